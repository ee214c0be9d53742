"""Metrics beyond hAURC against maintained oracles (torch-uncertainty's AURC/AUGRC/RiskAtxCov,
HiClass's hierarchical P/R/F), hand-computed toys and brute force."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from hsc_core.core.curves import RCCurve, flat_aurc, hierarchical_rc_curve
from hsc_core.core.events import rule_events
from hsc_core.core.hierarchical_prf import hierarchical_prf, mistake_lca_depth_counts
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.rules import decision_paths
from hsc_core.core.selective_metrics import (
    achievable_haurc,
    augrc,
    aurc,
    coverage_at_risk,
    excess_haurc,
    lower_hull,
    oracle_haurc,
    oracle_moves,
    risk_at_coverage,
)
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.evaluation import ModelEvaluation

torch = pytest.importorskip("torch")
tu = pytest.importorskip("torch_uncertainty.metrics")


def _flat(seed: int, n: int = 200, k: int = 5):
    rng = np.random.default_rng(seed)
    probs = softmax(rng.normal(size=(n, k)) * 2)
    labels = rng.integers(0, k, n)
    return probs, labels


def _tu(metric, probs, labels) -> float:
    m = metric
    m.update(torch.tensor(probs, dtype=torch.float64), torch.tensor(labels))
    return float(m.compute())


# ------------------------------------------------------------------ flat special cases: torch-uncertainty


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_selective_haurc_is_augrc_of_torch_uncertainty(seed):
    probs, labels = _flat(seed)
    h = Hierarchy.flat(probs.shape[1])
    conf, err = probs.max(1), (probs.argmax(1) != labels).astype(float)
    n = labels.size
    ours = augrc(conf, err)
    # The paper's hAURC of Selective on a flat tree is the AUGRC (generalized risk, all n samples).
    assert hierarchical_rc_curve(h, node_probabilities(h, probs), labels, "selective").haurc == pytest.approx(ours)
    # torch-uncertainty integrates from coverage 1/n and rescales by 1/(1 − 1/n): undo that first trapezoid.
    first = err[np.argmax(conf)] / n
    assert _tu(tu.AUGRC(), probs, labels) == pytest.approx((ours - first / n / 2) / (1 - 1 / n), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_aurc_estimators_against_torch_uncertainty(seed):
    probs, labels = _flat(seed)
    conf, err = probs.max(1), (probs.argmax(1) != labels).astype(float)
    assert aurc(conf, err, estimator="trapezoid") == pytest.approx(_tu(tu.AURC(), probs, labels), rel=1e-6)
    assert aurc(conf, err) == pytest.approx(flat_aurc(conf, 1 - err), rel=1e-12)


def test_zhou_estimator_hand_computed_and_its_bias_correction():
    conf, loss = np.array([0.9, 0.8, 0.6]), np.array([0.0, 1.0, 1.0])
    # weights (H₂ − H_{i−1}) / 3 for i = 1, 2, 3: 1.5/3, 0.5/3, 0
    assert aurc(conf, loss, estimator="zhou") == pytest.approx(0.5 / 3)
    probs, labels = _flat(4, n=500)
    c, e = probs.max(1), (probs.argmax(1) != labels).astype(float)
    assert aurc(c, e, estimator="zhou") == pytest.approx(aurc(c, e) - e.mean() / e.size, rel=1e-12)


@pytest.mark.parametrize("cov", [0.33, 0.5, 0.81])
def test_risk_at_coverage_flat_against_torch_uncertainty(cov):
    probs, labels = _flat(7, n=101)
    h = Hierarchy.flat(probs.shape[1])
    curve = hierarchical_rc_curve(h, node_probabilities(h, probs), labels, "selective")
    (risk,), (theta,) = risk_at_coverage(curve, [cov])
    k = int(np.ceil(cov * labels.size))
    selective_risk = _tu(tu.RiskAtxCov(cov_threshold=cov), probs, labels)
    # torch-uncertainty reports the selective risk (errors / accepted); the paper's risk is over all n.
    assert risk == pytest.approx(selective_risk * k / labels.size, rel=1e-6)
    assert curve.at(theta)[0] == pytest.approx(k / labels.size)


# ------------------------------------------------------------------ oracle, excess, achievable


@pytest.mark.parametrize("seed", [0, 3])
def test_flat_oracle_accepts_correct_first(seed):
    probs, labels = _flat(seed)
    h = Hierarchy.flat(probs.shape[1])
    p = node_probabilities(h, probs)
    paths = decision_paths(h, p, "selective")
    err = float((probs.argmax(1) != labels).mean())
    # Correct first: risk 0 up to coverage = accuracy, then rising linearly to err: area err²/2.
    assert oracle_haurc(oracle_moves(h, paths, labels)) == pytest.approx(err**2 / 2, abs=1e-12)
    # …which is the AUGRC of a confidence that ranks every correct sample first.
    correct = (probs.argmax(1) == labels).astype(float)
    assert oracle_haurc(oracle_moves(h, paths, labels)) == pytest.approx(augrc(correct, 1 - correct))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), loss=st.sampled_from(["01", "severity"]),
       rule=st.sampled_from(["selective", "climbing", "jumping", "max_coverage", "hf1", "min_severity",
                             "max_information"]))
def test_excess_and_achievable_bounds(seed, rule, loss):
    from hsc_core.core.metric_rules import any_decision_paths

    h = random_tree(15, seed)
    rng = np.random.default_rng(seed)
    probs = node_probabilities(h, softmax(rng.normal(size=(60, 15)) * 2))
    labels = rng.integers(0, 15, 60)
    paths = any_decision_paths(h, probs, rule)
    curve = hierarchical_rc_curve(h, probs, labels, rule, loss, paths=paths)
    moves = oracle_moves(h, paths, labels, loss)
    # the oracle's path is a real one: its risk never leaves [0, 1] and it ends where the rule ends
    risk = (moves.base_loss.sum() + np.cumsum(moves.d_loss)) / 60
    assert risk.min() >= -1e-12 and risk[-1] == pytest.approx(curve.risk[-1], abs=1e-12)
    assert oracle_haurc(moves) >= -1e-12
    if rule_events(h, paths, labels, loss).monotone:
        assert excess_haurc(curve, moves) >= -1e-12
        assert oracle_haurc(moves) <= achievable_haurc(curve) + 1e-12   # the oracle's path is convex and lowest
        assert achievable_haurc(curve) <= curve.haurc + 1e-12


def test_lower_hull_hand_toy():
    c, r = lower_hull(np.array([0.0, 0.5, 1.0]), np.array([0.0, 0.4, 0.5]))
    assert c.tolist() == [0.0, 1.0] and r.tolist() == [0.0, 0.5]   # (0.5, 0.4) lies above the chord
    curve = RCCurve("x", "01", np.array([1.0, 0.5, 0.0]), np.array([0.5, 0.1, 0.0]), np.array([0.2, 0.6, 1.0]),
                    np.array([0.2, 0.6]))
    assert achievable_haurc(curve) == pytest.approx(0.5 * 0.05 + 0.5 * 0.3)   # already convex: unchanged
    assert achievable_haurc(curve) == pytest.approx(curve.haurc)


def test_coverage_at_risk_brute_force():
    probs, labels = _flat(9, n=80)
    h = Hierarchy.flat(probs.shape[1])
    curve = hierarchical_rc_curve(h, node_probabilities(h, probs), labels, "selective")
    for r in (0.0, 0.05, 0.1, 0.3, 1.0):
        (cov,), _ = coverage_at_risk(curve, [r])
        ok = curve.risk <= r
        assert cov == (curve.coverage[ok].max() if ok.any() else np.nan)


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("nan")], ["x"]])
def test_points_outside_unit_interval(bad):
    curve = RCCurve("x", "01", np.array([1.0, 0.0]), np.array([0.5, 0.0]), np.array([0.5, 1.0]), np.array([0.5]))
    with pytest.raises(ValueError, match="coverage point|coverage points"):
        risk_at_coverage(curve, bad)


# ------------------------------------------------------------------ hierarchical P/R/F: HiClass


def _hiclass_paths(h: Hierarchy, nodes) -> np.ndarray:
    rows = [[h.node_ids[u] for u in h.path_to_root(int(v))[::-1][1:]] for v in nodes]
    width = max(len(r) for r in rows)
    return np.array([r + [""] * (width - len(r)) for r in rows], dtype=object)


@pytest.mark.parametrize("average", ["micro", "macro"])
def test_hierarchical_prf_against_hiclass(toy, average):
    hm = pytest.importorskip("hiclass.metrics")
    rng = np.random.default_rng(0)
    true = rng.integers(0, toy.n_leaves, 40)
    pred = rng.integers(0, toy.n_nodes - 1, 40)   # any node but the root (HiClass has no empty prediction)
    names_true = [toy.node_ids[v] for v in true]
    names_pred = [toy.node_ids[v] for v in pred]
    p, r, f = hierarchical_prf(toy, names_true, names_pred, average=average)
    yt, yp = _hiclass_paths(toy, true), _hiclass_paths(toy, pred)
    width = max(yt.shape[1], yp.shape[1])
    yt = np.array([list(row) + [""] * (width - len(row)) for row in yt], dtype=object)
    yp = np.array([list(row) + [""] * (width - len(row)) for row in yp], dtype=object)
    assert p == pytest.approx(hm.precision(yt, yp, average=average))
    assert r == pytest.approx(hm.recall(yt, yp, average=average))
    assert f == pytest.approx(hm.f1(yt, yp, average=average))
    # indices and names agree
    assert hierarchical_prf(toy, true, pred, average=average) == (p, r, f)


def test_prf_bad_labels_and_beta(toy):
    with pytest.raises(ValueError, match="unknown true label 'zebra'"):
        hierarchical_prf(toy, ["zebra"], ["0"])
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        hierarchical_prf(toy, ["0"], ["0"], beta=0)


def test_mistake_lca_depth_counts_brute_force(toy):
    rng = np.random.default_rng(1)
    true = rng.integers(0, toy.n_leaves, 200)
    pred = rng.integers(0, toy.n_nodes, 200)
    want = np.zeros(toy.max_depth + 1, dtype=int)
    for v, y in zip(pred, true, strict=True):
        anc_y = set(toy.path_to_root(int(y)).tolist())
        if int(v) in anc_y:
            continue
        common = [u for u in toy.path_to_root(int(v)).tolist() if u in anc_y]
        want[toy.depth[common[0]]] += 1
    assert mistake_lca_depth_counts(toy, pred, true).tolist() == want.tolist()


# ------------------------------------------------------------------ the evaluation layer


def test_evaluation_set_metrics_on_a_flat_tree():
    h = Hierarchy.flat(6)
    logits, labels = synthetic_logits(h, 600, seed=2)
    es = ModelEvaluation(h, logits, labels, name="flat").setting(ts=False)
    assert es.haurc("selective") == pytest.approx(es.flat_augrc(), rel=1e-9)
    assert es.excess_haurc("selective") >= 0
    assert es.achievable_haurc("climbing") <= es.haurc("climbing") + 1e-12
    err = float((es.leaf_pred != es.labels).mean())
    assert es.oracle_haurc("selective") == pytest.approx(err**2 / 2)
    assert es.flat_aurc("zhou") == pytest.approx(es.flat_aurc() - err / es.n)
    p, r, f = es.hierarchical_prf("selective")
    assert p == r == f == pytest.approx(1 - err)   # a flat tree: every set is the leaf itself
    assert es.severity_histogram("selective").tolist() == [int(round(err * es.n)), 0]
    # new rules through the same layer: cached paths, curves, bootstrap
    assert es.haurc("hf1") >= 0 and es.rule_paths("hf1") is es.rule_paths("hf1")
    boot = es.bootstrap(rules=("hf1", "min_severity"), n_resamples=50)
    assert set(boot.haurc) == {"selective", "hf1", "min_severity"}


# ------------------------------------------------------------------ bootstrap by weights


def test_weighted_statistics_equal_the_plain_ones_and_explicit_resamples():
    from hsc_core.core.metric_intervals import (
        weighted_augrc,
        weighted_aurc_zhou,
        weighted_oracle_haurc,
        weighted_prf,
    )

    h = random_tree(15, 3)
    rng = np.random.default_rng(3)
    n = 80
    probs = node_probabilities(h, softmax(rng.normal(size=(n, 15)) * 2))
    labels = rng.integers(0, 15, n)
    paths = decision_paths(h, probs, "climbing")
    ev = oracle_moves(h, paths, labels)
    conf = paths.values[:, 0].astype(float) + rng.normal(size=n) * 1e-3   # distinct confidences
    err = (paths.nodes[:, 0] != labels).astype(float)
    order = np.argsort(-conf, kind="stable")
    ones = np.ones((1, n))
    assert weighted_oracle_haurc(ev, ones)[0] == pytest.approx(oracle_haurc(ev), rel=1e-12)
    assert weighted_aurc_zhou(err[order], ones)[0] == pytest.approx(aurc(conf, err, estimator="zhou"), rel=1e-12)
    assert weighted_augrc(err[order], ones)[0] == pytest.approx(augrc(conf, err), rel=1e-12)
    # A resample given as counts equals the statistic of the explicitly repeated samples.
    idx = rng.integers(0, n, n)
    w = np.bincount(idx, minlength=n).astype(float)[None, :]
    rep_paths = decision_paths(h, probs[idx], "climbing")
    rep_ev = oracle_moves(h, rep_paths, labels[idx])
    assert weighted_oracle_haurc(ev, w)[0] == pytest.approx(oracle_haurc(rep_ev), rel=1e-9)
    assert weighted_aurc_zhou(err[order], w[:, order])[0] == pytest.approx(
        aurc(conf[idx], err[idx], estimator="zhou"), rel=1e-9)
    assert weighted_augrc(err[order], w[:, order])[0] == pytest.approx(augrc(conf[idx], err[idx]), rel=1e-9)
    nodes = paths.nodes[:, 0]
    both = h.depth[h.lca(nodes, labels)].astype(float)
    got = [x[0] for x in weighted_prf(both, h.depth[nodes].astype(float), h.depth[labels].astype(float), w)]
    assert got == pytest.approx(list(hierarchical_prf(h, labels[idx], nodes[idx])))


def test_extra_results_rows_with_intervals():
    from hsc_core.evaluation.results import EXTRA_METRICS, wide_table

    h = random_tree(20, 1)
    logits, labels = synthetic_logits(h, 500, seed=1)
    es = ModelEvaluation(h, logits, labels, name="m").setting(ts=False)
    rows = es.extra_results(("selective", "climbing", "hf1"), intervals=True, n_resamples=200)
    by = {(r["rule"], r["metric"]): r for r in rows}
    assert {m for _, m in by} == set(EXTRA_METRICS)
    assert by[("climbing", "excess_haurc")]["value"] == pytest.approx(es.excess_haurc("climbing"))
    assert by[("", "aurc_zhou")]["value"] == pytest.approx(es.flat_aurc("zhou"))
    for key in [("climbing", "excess_haurc"), ("hf1", "hf1_micro"), ("", "augrc")]:
        r = by[key]
        assert r["ci_low"] <= r["value"] <= r["ci_high"] and r["n_resamples"] == 200
    a = by[("climbing", "achievable_haurc")]
    assert a["ci_low"] <= a["value"] <= a["ci_high"] and a["n_resamples"] == 200
    table = wide_table(rows, metrics=EXTRA_METRICS, intervals=True)
    assert "excess hAURC×1000 Climbing (no TS) low" in table[0] and "AUGRC×1000 (no TS) high" in table[0]


# ------------------------------------------------------------------ achievable hAURC's interval


@settings(max_examples=60, deadline=None)
@given(c=st.lists(st.integers(0, 4), min_size=1, max_size=12), r=st.lists(st.integers(0, 4), min_size=12,
                                                                          max_size=12))
def test_lower_hull_areas_equal_the_reference_hull(c, r):
    """Coarse integer points: many ties, repeats and collinear runs, each column against ``lower_hull``."""
    from hsc_core.core.curves import area_under_rc
    from hsc_core.core.metric_intervals import lower_hull_areas

    cov = np.array(c, float) / 4
    risk = np.array(r[: len(c)], float) / 4
    cols = np.stack([cov, cov[::-1]], axis=1), np.stack([risk, risk[::-1]], axis=1)
    got = lower_hull_areas(*cols)
    want = area_under_rc(*lower_hull(cov, risk))
    assert got.tolist() == pytest.approx([want, want], abs=1e-12)


def _brute_achievable(h, probs, labels, rule, w):
    """achievable hAURC of the explicitly repeated samples: paths, curve and hull rebuilt."""
    idx = np.repeat(np.arange(w.size), w.astype(np.int64))
    return achievable_haurc(hierarchical_rc_curve(h, probs[idx], labels[idx], rule))


@pytest.mark.parametrize("rule", ["climbing", "jumping"])   # coverage falls with θ / can rise again
def test_achievable_interval_equals_a_brute_force_bootstrap(rule):
    """The same resamples (fixed seed) through the weighted statistic and through a literal rebuild
    of every resample's curve and hull give the same interval."""
    from hsc_core.core.metric_intervals import bootstrap_statistics, weighted_achievable_haurc

    h = random_tree(8, 2)
    rng = np.random.default_rng(7)
    n = 40
    probs = node_probabilities(h, softmax(rng.normal(size=(n, 8)) * 2))
    labels = rng.integers(0, 8, n)
    events = rule_events(h, decision_paths(h, probs, rule), labels)
    fast = bootstrap_statistics({"a": lambda w: weighted_achievable_haurc(events, w)}, n, n_resamples=200, seed=3)
    slow = bootstrap_statistics({"a": lambda w: np.array([_brute_achievable(h, probs, labels, rule, row)
                                                          for row in w])}, n, n_resamples=200, seed=3)
    assert fast["a"].estimate == pytest.approx(achievable_haurc(hierarchical_rc_curve(h, probs, labels, rule)),
                                               rel=1e-12)
    assert (fast["a"].estimate, fast["a"].low, fast["a"].high) == pytest.approx(
        (slow["a"].estimate, slow["a"].low, slow["a"].high), rel=1e-9)
    assert fast["a"].low < fast["a"].estimate < fast["a"].high
