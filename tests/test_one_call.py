"""One call per question (``hsc_core.rc_curve_and_haurc``, ``threshold_for_accuracy``, ``decision_card``),
why the dense path and the evaluation layer give different hAURC on the same logits, and δ asked
only where a method reads it (library and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hsc_core
from hsc_core import (
    GuaranteeSettings,
    ModelEvaluation,
    calibration_draw,
    hierarchical_rc_curve,
    imagenet_hierarchy,
    load_logits,
    node_probabilities,
    optimal_threshold,
    rc_curve_and_haurc,
    softmax,
    threshold_for_accuracy,
)

REPO = Path(__file__).resolve().parents[1]
LITE0 = REPO / "cached_logits" / "efficientnet_lite0.npz"


@pytest.fixture(scope="module")
def lite0():
    return imagenet_hierarchy(), load_logits(LITE0)


def test_dense_path_and_layer_differ_by_the_evaluated_rows_and_agree_on_the_same_rows(lite0):
    h, b = lite0
    ev = ModelEvaluation.from_bundle(b, h)
    # The "two numbers": the dense path on every sample, the layer on the 90 % evaluation split.
    dense_all = hierarchical_rc_curve(h, node_probabilities(h, softmax(b.logits)), b.labels, "selective").haurc
    curve, layer = rc_curve_and_haurc(h, b.logits, b.labels, "selective", ts=False)
    assert (round(dense_all, 5), round(layer, 5)) == (0.04691, 0.04722)
    assert layer == ev.setting(ts=False).haurc("selective")  # the dashboard's number
    # Given the layer's rows and T, the dense path gives the same curve, bit for bit.
    for ts in (False, True):
        rows = ev.rows_for(ts)
        assert rows.size == 1705
        T = ev.temperature if ts else 1.0
        probs = node_probabilities(h, softmax(b.logits[rows] / T))
        for rule in ("selective", "climbing"):
            dense = hierarchical_rc_curve(h, probs, b.labels[rows], rule)
            curve, haurc = rc_curve_and_haurc(h, b.logits, b.labels, rule, ts=ts)
            assert haurc == pytest.approx(dense.haurc, rel=1e-12, abs=1e-15), (ts, rule)
            np.testing.assert_allclose(curve.coverage, dense.coverage, rtol=1e-6)
            np.testing.assert_allclose(curve.risk, dense.risk, rtol=1e-12, atol=1e-15)
    # The paper's protocol evaluates all samples without TS: there the two paths agree on all rows.
    _, paper = rc_curve_and_haurc(h, b.logits, b.labels, "selective", ts=False, protocol="paper")
    assert paper == pytest.approx(dense_all, rel=1e-12)


def test_threshold_for_accuracy_is_algorithm_2_on_the_seeded_draw_without_delta(lite0):
    h, b = lite0
    res = threshold_for_accuracy(h, b.logits, b.labels, 0.9, "theorem1", n=500, seed=3)
    assert (res.method, res.kind, res.delta, res.epsilon, res.n_cal, res.n_test) == (
        "theorem1", "marginal", None, None, 500, 1205)
    # named no method: LTT on the answers' accuracy with δ = 0.1 (issue 41), on the same draw
    default = threshold_for_accuracy(h, b.logits, b.labels, 0.9, n=500, seed=3)
    assert (default.method, default.kind, default.quantity, default.delta) == ("ltt_selective", "pac", "answers", 0.1)
    assert default.test_positions.tolist() == res.test_positions.tolist()
    # Brute force: Algorithm 2 on the same calibration samples (evaluation split, with T).
    ev = ModelEvaluation.from_bundle(b, h)
    rows = ev.rows_for(True)
    cal, test = calibration_draw(b.labels[rows], 500, seed=3)
    probs = node_probabilities(h, softmax(b.logits[rows][cal] / ev.temperature))
    assert res.theta == pytest.approx(optimal_threshold(h, probs, b.labels[rows][cal], alpha=0.1), abs=1e-6)
    assert res.test_positions.tolist() == np.flatnonzero(test).tolist()
    # δ given: Theorem 1's ε comes with it; a PAC method without δ is one clear error.
    with_delta = threshold_for_accuracy(h, b.logits, b.labels, 0.9, "theorem1", delta=0.1, n=500, seed=3)
    assert with_delta.epsilon == pytest.approx(hsc_core.theorem1_epsilon(500, 0.1, 0.1))
    with pytest.raises(ValueError, match="δ .delta. is needed for method 'ltt_holm'"):
        threshold_for_accuracy(h, b.logits, b.labels, 0.9, "ltt_holm", n=500)


def test_guarantee_settings_ask_delta_only_of_the_methods_that_read_it():
    assert GuaranteeSettings(alpha=0.05).delta is None
    assert GuaranteeSettings(0.05, 0.1).delta == 0.1  # the old positional call still works
    with pytest.raises(ValueError, match="needed for method 'theorem1_pac'"):
        GuaranteeSettings(alpha=0.05).delta_for("theorem1_pac")
    with pytest.raises(ValueError, match="delta must lie in"):
        GuaranteeSettings(alpha=0.05, delta=1.5)


def test_cli_card_without_delta_for_a_method_that_does_not_read_it(tmp_path, capsys):
    from hsc_core.cli import main

    out = tmp_path / "card.md"
    assert main(["card", str(LITE0), "--target-accuracy", "0.9", "--method", "theorem1", "--reps", "0",
                 "--n-cal", "500", "--out", str(out)]) == 0
    card = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert card["delta"] is None and card["kind"] == "marginal"
    res = threshold_for_accuracy(imagenet_hierarchy(), *_arrays(), 0.9, "theorem1", n=500)
    assert card["theta"] == res.theta  # the one-call θ is the card's θ
    # The default method is the page's (LTT on the answers' accuracy, δ = 0.1 when none is given);
    # a named PAC method reads δ: one line, exit 2, before any work.
    capsys.readouterr()
    assert main(["card", str(LITE0), "--target-accuracy", "0.9", "--reps", "0", "--n-cal", "500",
                 "--out", str(out)]) == 0
    default = threshold_for_accuracy(imagenet_hierarchy(), *_arrays(), 0.9, n=500)
    got = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert (got["theta"], got["method"], got["delta"]) == (default.theta, "ltt_selective", 0.1)
    capsys.readouterr()
    assert main(["card", str(LITE0), "--target-accuracy", "0.9", "--method", "theorem1_pac", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--delta is needed for theorem1_pac" in err
    # hsc guarantees: methods without δ run without --delta; the default list has PAC ones, so it asks.
    assert main(["guarantees", str(LITE0), "--target-accuracy", "0.9", "--methods", "theorem1", "crc",
                 "--reps", "5", "--n-cal", "500"]) == 0
    out = capsys.readouterr().out
    assert "accuracy ≥ 0.9, n_cal = 500" in out and "δ" not in out.splitlines()[0]
    assert main(["guarantees", str(LITE0), "--target-accuracy", "0.9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--delta is needed for theorem1_pac, ltt_bonferroni" in err


def _arrays() -> tuple[np.ndarray, np.ndarray]:
    b = load_logits(LITE0)
    return b.logits, b.labels
