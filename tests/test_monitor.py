"""Monitoring a deployed θ on a stream (``core.confseq``, ``evaluation.monitor``, ``hsc monitor``):
the confidence sequence against a scalar reference and MAPIE's ``RiskMonitoring`` (the oracle
where the definitions coincide), the false-alarm rate over 1,000 null streams at every horizon, a
known change point, hand-computed toy streams for θ fixed / ACI / recalibrated, ACI's long-run
bound on every shipped shift, and one line for each bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TOY_LABELS, TOY_LEAF_PROBS

from hsc_core.core.confseq import (
    BernsteinState,
    DetectorState,
    bernstein_bounds,
    bernstein_update,
    detector_update,
)
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities
from hsc_core.core.rules import decision_paths
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.thresholds import last_incorrect_values
from hsc_core.evaluation.monitor import (
    Deployment,
    Promise,
    StreamMonitor,
    aci_bound,
    detection_delays,
    monitor_stream,
    parse_simulation,
    shift_names,
    simulate_chunks,
)
from hsc_core.evaluation.results import hierarchy_hash

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"
SMALL = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)  # leaves 0–3 under 4 and 5, root 6


# ---------------------------------------------------------------------------- the confidence sequence
def _reference(x: list[float], delta: float, c: float = 0.5) -> list[tuple[float, float]]:
    """PrPl-EB written as Waudby-Smith & Ramdas state it, one observation at a time (NaN skipped)."""
    out, xs, mus = [], [], [0.5]
    lam_x = lam_s = pen = 0.0
    sig2 = 0.25
    for v in x:
        if not math.isnan(v):
            t = len(xs) + 1
            lam = min(math.sqrt(2 * math.log(1 / delta) / (sig2 * t * math.log(1 + t))), c)
            pen += 4 * (v - mus[-1]) ** 2 * (-math.log(1 - lam) - lam) / 4
            lam_x, lam_s = lam_x + lam * v, lam_s + lam
            xs.append(v)
            mus.append((0.5 + sum(xs)) / (t + 1))
            sig2 = (0.25 + sum((xi - mi) ** 2 for xi, mi in zip(xs, mus[1:], strict=True))) / (t + 1)
        if not xs:
            out.append((0.0, 1.0))
            continue
        half = (math.log(1 / delta) + pen) / lam_s
        out.append((max(0.0, lam_x / lam_s - half), min(1.0, lam_x / lam_s + half)))
    return out


def test_bounds_equal_the_scalar_reference_in_any_chunking():
    rng = np.random.default_rng(3)
    x = rng.random(300).round(2)
    x[rng.random(300) < 0.3] = np.nan
    want = np.array(_reference(x.tolist(), 0.05))
    whole = bernstein_bounds(x, 0.05)
    np.testing.assert_allclose(np.c_[whole.lower, whole.upper], want, atol=1e-12)
    state, parts = BernsteinState.empty(), []
    for a, b in [(0, 1), (1, 57), (57, 58), (58, 300)]:
        parts.append(bernstein_update(state, x[a:b], 0.05).upper)
    np.testing.assert_allclose(np.concatenate(parts), whole.upper, atol=1e-12)
    assert whole.n[-1] == int((~np.isnan(x)).sum())
    assert whole.estimate[-1] == pytest.approx(np.nanmean(x))


def test_bounds_reject_bad_observations():
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        bernstein_bounds(np.array([0.5, 1.5]), 0.1)
    with pytest.raises(ValueError, match="delta"):
        bernstein_bounds(np.array([0.5]), 1.0)


@pytest.mark.parametrize("p", [0.93, 0.6])
def test_false_alarm_rate_of_1000_null_streams_at_every_horizon(p):
    """1,000 Bernoulli(p) streams of 5,000 at the boundary of the null (mean = the promised level):
    the share of streams whose alarm has rung by t is ≤ δ for every t (and each bound alone holds)."""
    delta = 0.1
    x = (np.random.default_rng(7).random((1000, 5000)) < p).astype(float)
    b = bernstein_bounds(x, delta)
    rung_by_t = np.maximum.accumulate(b.upper < p, axis=1).mean(axis=0)
    assert rung_by_t.max() <= delta
    assert np.maximum.accumulate(b.lower > p, axis=1).mean(axis=0).max() <= delta
    assert np.all(b.upper[:, -1] - b.lower[:, -1] < 0.07)  # and it is not vacuous


def test_detector_false_alarm_rate_of_1000_null_streams_at_every_horizon():
    """The alarm itself (the change detector) on 1,000 null streams of 5,000 at the boundary."""
    x = (np.random.default_rng(8).random((1000, 5000)) < 0.9).astype(float)
    d = detector_update(DetectorState.empty(1000), x, 0.9, 0.1, windows=False)
    assert np.maximum.accumulate(d.statistic >= 0, axis=1).mean(axis=0).max() <= 0.1


def test_detector_window_by_chunks_and_its_bound():
    """Chunked updates equal one update; where it rings, the window's upper bound is below the level."""
    rng = np.random.default_rng(2)
    x = np.r_[rng.random(1500) < 0.97, rng.random(700) < 0.5].astype(float)
    x[rng.random(x.size) < 0.2] = np.nan
    whole = detector_update(DetectorState.empty(), x, 0.9, 0.1, times=np.arange(1, x.size + 1))
    state, parts = DetectorState.empty(), []
    for a, b in [(0, 700), (700, 701), (701, 1800), (1800, 2200)]:
        parts.append(detector_update(state, x[a:b], 0.9, 0.1, times=np.arange(a + 1, b + 1)))
    for f in ("statistic", "since", "estimate", "upper"):
        np.testing.assert_allclose(np.concatenate([getattr(p, f) for p in parts]), getattr(whole, f))
    ring = whole.statistic >= 0
    assert ring.any() and np.array_equal(ring, whole.upper < 0.9)
    j = int(np.argmax(ring))
    assert 1500 < j and 1400 < whole.since[j] <= 1501 + 50
    win = x[whole.since[j] - 1: j + 1]
    assert whole.estimate[j] == pytest.approx(np.nanmean(win))


def test_hierarchical_null_streams_of_a_model_meeting_its_target():
    """I.i.d. samples of a synthetic model at θ, whose accuracy, accuracy among answers and share
    answered are exactly the pool's: every monitored quantity's alarm rate ≤ δ over 1,000 × 5,000."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.full(4, 0.7), 4000)
    labels = (rng.random((4000, 1)) > probs.cumsum(axis=1)).sum(axis=1)  # a calibrated model's labels
    nodes, _ = decision_paths(SMALL, node_probabilities(SMALL, probs), "climbing").predict(0.6)
    correct = SMALL.is_ancestor(nodes, labels).astype(float)
    answered = SMALL.leaf_count[nodes] < SMALL.n_leaves
    draw = np.random.default_rng(1).integers(0, 4000, (1000, 5000))
    truth = {"accuracy": correct.mean(), "answered_accuracy": correct[answered].mean(),
             "answered_share": answered.mean()}
    obs = {"accuracy": correct[draw], "answered_accuracy": np.where(answered[draw], correct[draw], np.nan),
           "answered_share": answered[draw].astype(float)}
    assert 0.2 < truth["answered_share"] < 0.9  # all three quantities differ
    for q, x in obs.items():
        b = bernstein_bounds(x, 0.1)
        assert np.maximum.accumulate(b.upper < truth[q], axis=1).mean(axis=0).max() <= 0.1, q
    d = detector_update(DetectorState.empty(1000), obs["answered_accuracy"], truth["answered_accuracy"], 0.1,
                        windows=False)
    assert np.maximum.accumulate(d.statistic >= 0, axis=1).mean(axis=0).max() <= 0.1


def test_mapie_risk_monitoring_is_the_oracle_for_a_binary_stream():
    """A flat two-class tree at θ = 0: hierarchical accuracy is plain accuracy, MAPIE's "accuracy"
    risk. The error sequences are equal, both lower bounds on the error hold, and at the same
    online level (MAPIE halves its test level) ours rings no later on a harmful stream."""
    rm = pytest.importorskip("mapie.exchangeability_testing")
    flat = Hierarchy.from_parents([2, 2, -1], 2)
    rng = np.random.default_rng(1)
    n = 1500
    y = rng.integers(0, 2, n)
    wrong = rng.random(n) < 0.2
    pred = np.where(wrong, 1 - y, y)
    probs = np.where(np.arange(2)[None, :] == pred[:, None], 0.8, 0.2)
    mon = StreamMonitor(flat, Deployment.from_theta(0.0, 0.9, delta=0.05), inputs="probabilities")
    rows = mon.update(probs, y)
    oracle = rm.RiskMonitoring(risk="accuracy", threshold=0.1, test_level=0.1, warn=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.update(y, pred)
    np.testing.assert_array_equal(oracle.online_risk_sequence_history, 1.0 - rows["correct"])
    theirs = oracle.online_risk_lower_bound_sequence_history
    ours = 1.0 - rows["accuracy_upper"]
    assert (theirs <= 0.2 + 1e-9).all() and (ours <= 0.2 + 1e-9).all() and oracle.harmful_shift_detected
    assert mon.first_alarm is not None and mon.first_alarm <= int(np.argmax(theirs > 0.1)) + 1


# ---------------------------------------------------------------------------- the controller on a toy
def _toy_monitor(toy: Hierarchy, **options) -> tuple[StreamMonitor, dict]:
    mon = StreamMonitor(toy, Deployment.from_theta(0.5, 0.8, delta=0.1), inputs="probabilities", **options)
    return mon, mon.update(TOY_LEAF_PROBS, TOY_LABELS, ids=np.arange(1, 6))


def test_fixed_theta_rows_by_hand(toy):
    """Climbing at θ = 0.5 on the §9 toy (rows 0–4): R, 0, C, R, 4."""
    mon, rows = _toy_monitor(toy)
    R, C = toy.node_ids.index("R"), toy.node_ids.index("C")
    nodes = [R, 0, C, R, 4]
    np.testing.assert_array_equal(rows["correct"], [1, 0, 1, 1, 1])
    np.testing.assert_array_equal(rows["answered"], [False, True, True, False, True])
    np.testing.assert_allclose(rows["coverage"], toy.coverage[nodes])
    np.testing.assert_allclose(rows["accuracy"], [1, 1 / 2, 2 / 3, 3 / 4, 4 / 5])
    np.testing.assert_allclose(rows["answered_accuracy"], [np.nan, 0, 1 / 2, 1 / 2, 2 / 3])
    np.testing.assert_allclose(rows["answered_share"], [0, 1 / 2, 2 / 3, 1 / 2, 3 / 5])
    assert (rows["theta"] == 0.5).all() and mon.first_alarm is None
    assert mon.verdict().startswith("no alarm over 5 samples: hierarchical accuracy ≥ 0.")


def test_aci_and_recalibration_by_hand(toy):
    """Last wrong values 0.35, 0.70, 0.35, −inf, −inf. ACI (γ 0.1, α 0.2): right → −0.02, wrong →
    +0.08. Recalibration (window 4, every 2): θ̂ of [.35, .70] is 1 (rank ⌈3·0.8⌉ = 3 > 2), of
    [.35, .70, .35, −inf] the 4th smallest, 0.70."""
    c = last_incorrect_values(toy, decision_paths(toy, node_probabilities(toy, TOY_LEAF_PROBS), "climbing"),
                              TOY_LABELS)
    np.testing.assert_allclose(c, [0.35, 0.70, 0.35, -np.inf, -np.inf])
    mon, rows = _toy_monitor(toy, adapt="aci", gamma=0.1)
    np.testing.assert_allclose(rows["theta"], [0.5, 0.48, 0.56, 0.54, 0.52])
    np.testing.assert_array_equal(rows["correct"], [1, 0, 1, 1, 1])
    assert mon.theta == pytest.approx(0.50)
    _, rows = _toy_monitor(toy, adapt="recalibrate", window=4, period=2)
    np.testing.assert_allclose(rows["theta"], [0.5, 0.5, 1.0, 1.0, 0.70])
    np.testing.assert_array_equal(rows["correct"], [1, 0, 1, 1, 1])  # θ = 1 answers the root: right


def test_known_change_point_rings_after_it_and_soon():
    """A synthetic stream: 3,000 samples of a model right 97 % of the time at θ, then one that is
    always wrong at a leaf. The alarm (accuracy ≥ 0.9 promised) rings after the change, within 150."""
    rng = np.random.default_rng(0)
    n0, n1 = 3000, 1000
    pred = rng.integers(0, 4, n0 + n1)
    probs = np.full((n0 + n1, 4), 0.1 / 3)
    probs[np.arange(n0 + n1), pred] = 0.9
    wrong = np.r_[rng.random(n0) < 0.03, np.ones(n1, bool)]
    labels = np.where(wrong, (pred + 2) % 4, pred)  # the other branch: wrong at the leaf and its parent
    res = monitor_stream(SMALL, ({"scores": probs[s:s + 512], "labels": labels[s:s + 512],
                                  "segment": np.where(np.arange(s, min(s + 512, n0 + n1)) < n0, "before", "after")}
                                 for s in range(0, n0 + n1, 512)),
                         Deployment.from_theta(0.8, 0.9), inputs="probabilities")
    assert res.first_alarm is not None and n0 < res.first_alarm <= n0 + 150
    delays = detection_delays(res.frame).set_index("segment")
    assert delays.loc["after", "delay"] == res.first_alarm - (n0 + 1)
    assert res.verdict.startswith(f"alarm at sample {res.first_alarm:,}: hierarchical accuracy ≤ 0.")
    assert f"since sample {n0 + 1:,} (promised ≥ 0.9)" in res.verdict  # the window starts at the change
    j = res.first_alarm - 1
    assert res.frame["accuracy_recent_upper"][j] < 0.9 <= res.frame["accuracy_recent_upper"][j - 1]
    assert res.frame["accuracy_upper"][j] > 0.9  # the bound since deployment has not crossed yet


def test_chunking_does_not_change_the_rows():
    z, y = synthetic_logits(SMALL, 3000, top1=0.6, seed=2)
    y = np.where(np.arange(3000) % 3 == 0, y, -1)  # a label for every third sample
    dep = Deployment.from_theta(0.55, 0.85, min_answered=0.5)
    frames = [monitor_stream(SMALL, ({"scores": z[s:s + k], "labels": y[s:s + k]} for s in range(0, 3000, k)), dep,
                             adapt="aci").frame for k in (3000, 211)]
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert frames[0]["labelled"].sum() == 1000 and np.isnan(frames[0]["correct"][1])


def test_promises_from_a_card_and_the_delta_split():
    card = {"format": "hsc-decision-card/1", "theta": 0.7, "target_accuracy": 0.9, "delta": 0.2, "method": "crc",
            "model": "m", "hierarchy_hash": "", "temperature": 1.5, "ts": True,
            "guaranteed": {"accuracy": 0.9, "accuracy_among_answers": 0.8}}
    dep = Deployment.from_card(card, min_answered=0.6)
    assert dep.promises == (Promise("accuracy", 0.9), Promise("answered_accuracy", 0.8),
                            Promise("answered_share", 0.6))
    assert dep.temperature == 1.5 and dep.delta == 0.2
    assert StreamMonitor(SMALL, dep).delta_each == pytest.approx(0.2 / 3)
    assert Deployment.from_card({**card, "delta": None}).delta == 0.1


# ---------------------------------------------------------------------------- ACI's bound on the shipped shifts
@pytest.mark.skipif(not SHIPPED.is_file(), reason="shipped logits absent")
def test_aci_long_run_miscoverage_is_within_its_bound_on_every_shipped_shift():
    shifts = shift_names("efficientnet_lite0")
    assert len(shifts) == 9
    from hsc_core.datasets.logits_io import load_logits
    from hsc_core.evaluation.resolve import resolve_hierarchy

    _, h = resolve_hierarchy(load_logits(SHIPPED), str(SHIPPED))
    dep = Deployment.from_theta(0.6, 0.85)
    for s in shifts:
        res = monitor_stream(h, simulate_chunks([("clean", 500), (s, 2500)], model="efficientnet_lite0", seed=1),
                             dep, adapt="aci", gamma=0.01)
        f = res.frame
        miss = 1.0 - f["correct"].mean()
        assert miss <= float(aci_bound(len(f), 0.15, 0.01, float(np.float32(0.6)))), s
        assert abs(miss - 0.15) < 0.03, s  # and it tracks the target


# ---------------------------------------------------------------------------- bad input, one line each
def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_bad_streams_one_line_each(toy):
    mon = StreamMonitor(toy, Deployment.from_theta(0.5, 0.8), inputs="probabilities")
    with pytest.raises(ValueError, match="out of order") as e:
        mon.update(TOY_LEAF_PROBS, TOY_LABELS, ids=[1, 2, 4, 3, 5])
    _one_line(e)
    mon = StreamMonitor(toy, Deployment.from_theta(0.5, 0.8), inputs="probabilities")
    mon.update(TOY_LEAF_PROBS[:2], TOY_LABELS[:2], ids=[1, 2])
    with pytest.raises(ValueError, match="sample id 2 is duplicated"):
        mon.update(TOY_LEAF_PROBS[2:], TOY_LABELS[2:], ids=[2, 3, 4])
    with pytest.raises(ValueError, match="'b' is duplicated"):
        StreamMonitor(toy, Deployment.from_theta(0.5, 0.8), inputs="probabilities").update(
            TOY_LEAF_PROBS[:3], TOY_LABELS[:3], ids=["a", "b", "b"])
    with pytest.raises(ValueError, match=r"label 7 of sample 2 is outside the tree \(leaves 0–4") as e:
        StreamMonitor(toy, Deployment.from_theta(0.5, 0.8), inputs="probabilities").update(
            TOY_LEAF_PROBS[:2], np.array([1, 7]))
    _one_line(e)
    with pytest.raises(ValueError, match="the stream is empty"):
        monitor_stream(toy, iter([]), Deployment.from_theta(0.5, 0.8))
    with pytest.raises(ValueError, match=r"shape \(n, 5\)"):
        StreamMonitor(toy, Deployment.from_theta(0.5, 0.8)).update(np.zeros((2, 4)))


def test_cards_for_another_tree_or_model_one_line_each(toy):
    card = {"format": "hsc-decision-card/1", "theta": 0.5, "target_accuracy": 0.9, "method": "theorem1",
            "model": "efficientnet_lite0", "hierarchy_hash": hierarchy_hash(SMALL)}
    with pytest.raises(ValueError, match="the card is for another hierarchy") as e:
        Deployment.from_card(card).check_stream(toy, "efficientnet_lite0")
    _one_line(e)
    with pytest.raises(ValueError, match="the card is for model 'efficientnet_lite0', the stream comes from 'x'"):
        Deployment.from_card(card).check_stream(SMALL, "x")
    Deployment.from_card(card).check_stream(SMALL, "efficientnet_lite0")  # its own: fine
    with pytest.raises(ValueError, match="not a decision card"):
        Deployment.from_card({"theta": 0.5})
    with pytest.raises(ValueError, match="thresholds no Climbing θ"):
        Deployment.from_card({**card, "method": "conformal_lca"})
    with pytest.raises(ValueError, match="SOURCE:N"):
        parse_simulation("clean=100")
    with pytest.raises(ValueError, match="the stream is empty"):
        parse_simulation("clean:0")


# ---------------------------------------------------------------------------- hsc monitor
def _hsc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hsc_core", "monitor", *args], cwd=cwd, capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                          "HSC_CACHED_LOGITS_DIR": str(REPO / "cached_logits")})


@pytest.fixture(scope="module")
def shipped_card(tmp_path_factory) -> Path:
    if not SHIPPED.is_file():
        pytest.skip("shipped logits absent")
    from hsc_core.datasets.logits_io import load_logits
    from hsc_core.evaluation.card import card_json, decision_card
    from hsc_core.evaluation.model import ModelEvaluation
    from hsc_core.evaluation.resolve import resolve_hierarchy

    b = load_logits(SHIPPED)
    ds, h = resolve_hierarchy(b, str(SHIPPED))
    card = decision_card(ModelEvaluation.from_bundle(b, h, dataset=ds, file=str(SHIPPED)), target_accuracy=0.85,
                         reps=0, n_resamples=10)
    path = tmp_path_factory.mktemp("card") / "card.json"
    path.write_text(card_json(card), encoding="utf-8")
    return path


def test_cli_simulated_stream_writes_the_tidy_csv_and_a_verdict(shipped_card, tmp_path):
    out = tmp_path / "m.csv"
    done = _hsc("--card", str(shipped_card), "--simulate", "clean:1500,gaussian_blur-5:1500", "--labels-every", "2",
                "--out", str(out), "--chunk-size", "1000", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("alarm at sample ") and "with 90% confidence" in lines[0]
    f = pd.read_csv(out)
    assert len(f) == 3000 and list(f.columns[:5]) == ["segment", "image", "t", "theta", "labelled"]
    assert {"accuracy", "accuracy_lower", "accuracy_upper", "answered_share_upper", "alarm"} <= set(f.columns)
    first = int(f.loc[f["alarm"], "t"].iloc[0])
    assert lines[0].startswith(f"alarm at sample {first:,}:") and first > 1500  # rings on the blur, not before
    assert f["labelled"].sum() == 1500 and f["correct"].isna().sum() == 1500
    assert "gaussian_blur-5: samples 1,501–3,000, alarm" in done.stdout
    adapt = _hsc("--card", str(shipped_card), "--simulate", "clean:500,gaussian_blur-5:1000", "--adapt",
                 "--out", str(out), cwd=tmp_path)
    assert adapt.returncode == 0, adapt.stderr
    assert pd.read_csv(out)["theta"].nunique() > 100


def test_cli_bad_input_one_line(shipped_card, tmp_path, capsys, monkeypatch):
    from hsc_core.cli import main

    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(REPO / "cached_logits"))
    other = tmp_path / "other.json"
    card = json.loads(shipped_card.read_text())
    other.write_text(json.dumps({**card, "model": "efficientnet_lite2"}))
    for args, message in [
        (("--card", str(other), str(SHIPPED)), "the card is for model 'efficientnet_lite2'"),
        (("--card", str(shipped_card), "--simulate", "clean:10,fog-3:10"), "no shipped shift 'fog-3'"),
        (("--card", str(shipped_card)), "give a STREAM file or --simulate"),
        (("--card", str(tmp_path / "none.json"), str(SHIPPED)), "not found"),
    ]:
        assert main(["monitor", *args, "--out", str(tmp_path / "x.csv")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and message in err, err


def test_cli_stream_file_csv_quotes_a_sample_id_a_spreadsheet_would_run(shipped_card, tmp_path, monkeypatch):
    """A STREAM file's sample ids reach the CSV's ``image`` column as text: one starting like a formula
    gets the ``'`` of ``results.csv_cell`` (pyarrow's writer and pandas' alike)."""
    from hsc_core.datasets import logits_io

    monkeypatch.setattr(logits_io, "library_versions", dict)
    b = logits_io.load_logits(SHIPPED)
    ids = np.array([f"s{i}" for i in range(300)], dtype="<U30")
    ids[7] = "=HYPERLINK(\"http://e\")"
    keep = {k: v for k, v in b.manifest.items() if k in ("model", "dataset_id", "hierarchy")}
    stream = logits_io.save_logits(tmp_path / "stream.npz", b.logits[:300], b.labels[:300], ids, manifest=keep)
    out = tmp_path / "m.csv"
    done = _hsc(str(stream), "--card", str(shipped_card), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    f = pd.read_csv(out)
    assert len(f) == 300 and f["image"].iloc[7] == "'=HYPERLINK(\"http://e\")" and f["image"].iloc[8] == "s8"
