"""The evaluation layer: ModelEvaluation / EvaluationSet against the dense library functions, the
two protocols, subsets, the tidy result schema, CSV neutralisation, the one θ comparison (float32)
and the one event sweep (row-blocked, identical for any budget)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from hsc_core.core.curves import calibration_coverage_curve, hierarchical_rc_curve, rounded_threshold_grid
from hsc_core.core.events import rule_events
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax
from hsc_core.core.protocol import calibration_mask
from hsc_core.core.rules import RULES, below_theta, decision_paths, record_index
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.thresholds import climbing_tight_thresholds
from hsc_core.core.uncertainty import bootstrap_haurc
from hsc_core.evaluation import RESULT_COLUMNS, ModelEvaluation, column_label, summary_rows, to_csv, wide_table
from hsc_core.evaluation.results import csv_cell
from hsc_core.report.tree_figure import REJECT, T_BELOW, T_HEAD, record_rows, tree_figure, tree_layout
from tests.conftest import random_tree


@pytest.fixture(scope="module")
def model():
    h = random_tree(40, seed=3)
    logits, labels = synthetic_logits(h, 900, top1=0.7, seed=1)
    sources = np.where(np.arange(900) % 3 == 0, "a", "b")
    return h, logits, labels, sources


def dense_setting(h, logits, labels, rows, t):
    probs = node_probabilities(h, softmax(logits[rows], t))
    return probs, labels[rows]


# ---------------------------------------------------------------------------- against the dense functions
@pytest.mark.parametrize("ts", [False, True])
def test_setting_equals_the_dense_functions(model, ts):
    h, logits, labels, _ = model
    ev = ModelEvaluation(h, logits, labels, name="m")
    cal = calibration_mask(labels)
    t = fit_temperature(logits[cal], labels[cal])
    assert ev.temperature == pytest.approx(t, rel=1e-12)
    es = ev.setting(ts)
    assert np.array_equal(es.rows, np.flatnonzero(~cal)) and es.temperature == (t if ts else 1.0)
    probs, y = dense_setting(h, logits, labels, es.rows, es.temperature)
    for rule in RULES:
        for loss in ("01", "severity"):
            want = hierarchical_rc_curve(h, probs, y, rule, loss)
            got = es.curve(rule, loss)
            assert np.array_equal(got.coverage, want.coverage) and np.array_equal(got.risk, want.risk)
            assert es.haurc(rule, loss) == want.haurc
        grid_curve = hierarchical_rc_curve(h, probs, y, rule, dec=2)
        assert es.haurc(rule, dec=2) == grid_curve.haurc
        cc = calibration_coverage_curve(h, probs, y, rule, thresholds=rounded_threshold_grid(probs, 2))
        assert np.array_equal(es.cc_curves()[rule].ece, cc.ece)
    assert np.array_equal(es.tight_thresholds(), climbing_tight_thresholds(h, probs, y))
    assert np.array_equal(es.node_probabilities([0, 5]), probs[[0, 5]])
    boot = es.bootstrap(n_resamples=200)
    want_boot = bootstrap_haurc(h, y, {r: decision_paths(h, probs, r) for r in RULES}, n_resamples=200)
    assert boot.haurc["climbing"] == want_boot.haurc["climbing"]
    assert es.top1 == float((probs[:, : h.n_leaves].argmax(1) == y).mean())


def test_cached_methods_return_the_same_objects_across_threads(model):
    h, logits, labels, _ = model
    ev = ModelEvaluation(h, logits, labels)
    got = []
    threads = [threading.Thread(target=lambda: got.append(ev.setting(True).curves())) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(got) == 4 and all(g is got[0] for g in got)



def test_a_long_computation_holds_up_only_callers_of_its_own_key(model):
    """While one session computes a slow value (a bootstrap), other sessions get values already
    computed, and compute other keys, without waiting for it."""
    h, logits, labels, _ = model
    es = ModelEvaluation(h, logits, labels).setting(False)
    cached = es.curves()
    started, release, got = threading.Event(), threading.Event(), []

    def slow():
        started.set()
        release.wait(30)
        return "slow"

    busy = threading.Thread(target=lambda: got.append(es._memo.get("slow", slow)))
    busy.start()
    assert started.wait(30)
    try:
        other = threading.Thread(target=lambda: got.append((es.curves(), es.curves("severity"))))
        other.start()
        other.join(30)
        assert not other.is_alive() and got[0][0] is cached and set(got[0][1]) == set(RULES)
    finally:
        release.set()
        busy.join(30)
    assert got[1] == "slow" and es._memo.get("slow", lambda: "again") == "slow"  # computed once

def test_paper_protocol_scores_no_ts_on_every_sample(model):
    h, logits, labels, _ = model
    ev = ModelEvaluation(h, logits, labels, protocol="paper")
    cal = calibration_mask(labels)
    assert ev.setting(False).n == labels.size
    assert np.array_equal(ev.setting(True).rows, np.flatnonzero(~cal))
    probs, y = dense_setting(h, logits, labels, np.arange(labels.size), 1.0)
    assert ev.setting(False).haurc("climbing") == hierarchical_rc_curve(h, probs, y, "climbing").haurc
    rows = ev.results(losses=("01",))
    assert {(r["ts"], r["n_eval"]) for r in rows} == {(False, labels.size), (True, int((~cal).sum()))}
    assert {r["protocol"] for r in rows} == {"paper"}
    wide = wide_table(rows)[0]  # the table says that the TS numbers stand on fewer samples
    assert wide["n_eval"] == labels.size and wide["n_eval (TS)"] == int((~cal).sum())
    with pytest.raises(ValueError, match="unknown protocol 'authors'; choose one of project, paper"):
        ModelEvaluation(h, logits, labels, protocol="authors")


def test_a_subset_is_evaluated_but_t_comes_from_the_whole_calibration_split(model):
    h, logits, labels, sources = model
    full = ModelEvaluation(h, logits, labels)
    part = ModelEvaluation(h, logits, labels, sources=sources, subset=sources == "a", subset_name="a")
    assert part.temperature == full.temperature
    cal = calibration_mask(labels)
    assert np.array_equal(part.setting(True).rows, np.flatnonzero(~cal & (sources == "a")))
    assert set(part.setting(False).sources) == {"a"}
    with pytest.raises(ValueError, match="no samples to evaluate in subset 'none'"):
        ModelEvaluation(h, logits, labels, subset=np.zeros(labels.size, bool), subset_name="none").setting(False)


# ---------------------------------------------------------------------------- the result schema
def test_results_are_tidy_rows_with_one_column_scheme(model):
    h, logits, labels, _ = model
    ev = ModelEvaluation(h, logits, labels, name="m", dataset="toy")
    rows = ev.results(losses=("01",), intervals=True, n_resamples=100)
    assert all(tuple(r) == RESULT_COLUMNS for r in rows)
    es = ev.setting(True)
    climb = next(r for r in rows if r["ts"] and r["rule"] == "climbing" and r["metric"] == "haurc")
    assert climb["value"] == es.haurc("climbing") and climb["ci_low"] <= climb["value"] <= climb["ci_high"]
    assert climb["hierarchy_hash"] == ev.hierarchy_hash and len(ev.hierarchy_hash) == 16
    assert climb["n_resamples"] == 100 and climb["n_cal"] == ev.n_cal
    t_row = next(r for r in rows if r["metric"] == "temperature")
    assert t_row["ts"] and t_row["value"] == ev.temperature
    sel_gain = next(r for r in rows if r["rule"] == "selective" and r["metric"] == "gain_percent")
    assert sel_gain["value"] == 0.0
    wide = wide_table(rows, intervals=True)
    assert len(wide) == 1
    w = wide[0]
    assert w[column_label("haurc", "climbing", ts=True)] == pytest.approx(1000 * es.haurc("climbing"))
    assert w[column_label("gain_percent", "jumping", ts=False)] == pytest.approx(ev.setting(False).gain("jumping"))
    assert w["top-1 accuracy"] == es.top1 and w["T"] == ev.temperature
    assert column_label("gain_percent", "selective", ts=True) not in w  # 0 by definition
    assert w[column_label("haurc", "climbing", ts=True) + " low"] == pytest.approx(1000 * climb["ci_low"])


def test_summary_is_mean_and_sem_over_models(model):
    h, logits, labels, _ = model
    rows = []
    for k, seed in enumerate((0, 1, 2)):
        lg, lb = synthetic_logits(h, 400, top1=0.6 + 0.1 * k, seed=seed)
        rows += ModelEvaluation(h, lg, lb, name=f"m{k}", dataset="toy").results(losses=("01",))
    values = [1000 * r["value"] for r in rows if r["metric"] == "haurc" and r["rule"] == "climbing" and r["ts"]]
    s = next(s for s in summary_rows(rows) if s["rule"] == "climbing" and s["ts"])
    assert s["n_models"] == 3 and s["haurc_x1000_mean"] == pytest.approx(np.mean(values))
    assert s["haurc_x1000_sem"] == pytest.approx(np.std(values, ddof=1) / np.sqrt(3))


def test_csv_neutralises_formulas_and_keeps_numbers():
    text = to_csv([{"model": "=cmd|' /C calc'!A0", "value": -0.25, "rule": "+x", "ok": True, "none": None}])
    header, line = text.splitlines()
    assert header == "model,value,rule,ok,none"
    assert line == "'=cmd|' /C calc'!A0,-0.25,'+x,true,"
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("plain") == "plain"


# ---------------------------------------------------------------------------- the one θ comparison
def test_tree_picks_compare_theta_in_float32():
    """float32 leaf probabilities [0.7, 0.2, 0.1] at θ = 0.7: predict accepts the leaf, and so
    must the tree (it once compared in float64 and drew "reject (root)")."""
    h = Hierarchy.flat(3)
    probs = node_probabilities(h, np.array([[0.7, 0.2, 0.1]], dtype=np.float32))
    assert probs.dtype == np.float32 and float(probs[0, 0]) < 0.7
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    assert paths["climbing"].predict(0.7)[0][0] == 0
    records = record_rows(paths, 0)
    assert records["climbing"][1].dtype == np.float32
    fig = tree_figure(h, probs[0], records, 0, 0.7, animate=False)
    head = fig.data[T_HEAD].text[0]
    assert REJECT not in head and "Climbing" in head
    lay = tree_layout(h, probs[0].astype(float), records, 0)
    hollow = np.asarray(fig.data[T_BELOW].y, dtype=float)  # nodes drawn hollow: below θ
    assert np.isnan(hollow[list(lay.nodes).index(0)])  # the leaf at float32(0.7) is not below 0.7
    assert record_index(np.float32([0.7, 1.0]), 0.7) == 0 and not below_theta(np.float32(0.7), 0.7)


def test_record_index_refuses_theta_outside_zero_one():
    with pytest.raises(ValueError, match="theta must lie in"):
        record_index(np.array([0.5, 1.0]), [0.2, 1.5])


# ---------------------------------------------------------------------------- the one event sweep
@pytest.mark.parametrize("loss", ["01", "severity"])
def test_event_sweep_is_identical_for_any_memory_budget(model, loss):
    h, logits, labels, _ = model
    probs = node_probabilities(h, softmax(logits[:300], 1.0))
    for rule in RULES:
        p = decision_paths(h, probs, rule)
        whole = rule_events(h, p, labels[:300], loss, budget_bytes=1 << 40)
        tiny = rule_events(h, p, labels[:300], loss, budget_bytes=1)  # one row per block
        for f in ("base_cov", "base_loss", "theta", "event_sample", "d_cov", "d_loss", "group_end"):
            assert np.array_equal(getattr(whole, f), getattr(tiny, f)), (rule, f)


def test_results_and_cc_curves_of_any_rule():
    """The rules beyond the paper through the same layer calls as the four: hAURC and gain rows
    (with intervals) and calibration–coverage curves from their own decision paths."""
    from hsc_core.core.metric_rules import any_decision_paths
    from hsc_core.evaluation.model import CC_SUMMARY_COLUMNS

    h = random_tree(15, seed=4)
    logits, labels = synthetic_logits(h, 300, seed=2)
    es = ModelEvaluation(h, logits, labels, name="m").setting(ts=False)
    rows = es.results(intervals=True, n_resamples=100, rules=("climbing", "pareto"))
    by = {(r["rule"], r["metric"]): r for r in rows if r["rule"]}
    assert set(by) == {(r, m) for r in ("climbing", "pareto") for m in ("haurc", "gain_percent")}
    assert by[("pareto", "haurc")]["value"] == es.haurc("pareto")
    assert by[("pareto", "haurc")]["ci_low"] <= es.haurc("pareto") <= by[("pareto", "haurc")]["ci_high"]
    assert by[("pareto", "gain_percent")]["value"] == es.gain("pareto")
    probs = node_probabilities(h, softmax(logits[es.rows]))
    want = calibration_coverage_curve(h, probs, es.labels, paths=any_decision_paths(h, probs, "hf1", pruned=False))
    got = es.cc_curve("hf1")
    assert np.array_equal(got.thresholds, want.thresholds) and np.allclose(got.ece, want.ece, rtol=0, atol=1e-12)
    (row,) = es.cc_summary(("hf1",))
    assert tuple(row) == CC_SUMMARY_COLUMNS and row["rule"] == "hf1" and row["max ECE"] == pytest.approx(want.ece.max())
    with pytest.raises(ValueError, match="unknown rule"):
        es.results(rules=("best",))
