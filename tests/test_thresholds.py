"""Optimal threshold algorithm, Theorem 1's ε and its solver, DARTS and CRC."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree

from hsc_core.core.baselines import crc_threshold, darts_lambda, darts_predict, darts_rewards
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.risk import hierarchical_correctness
from hsc_core.core.rules import decision_paths
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.thresholds import (
    climbing_tight_thresholds,
    select_threshold,
    solve_theorem1,
    stratified_split_sampler,
    theorem1_epsilon,
)
from hsc_core.evaluation.guarantee_methods import GuaranteeData
from hsc_core.evaluation.repeated_splits import (
    repeated_split_evaluation,
    split_repetitions,
    summarize_repetitions,
)

# Definitions §6.3, δ = 0.1.
EPS_TABLE = {
    1000: [0.00342, 0.00500, 0.01126, 0.01555, 0.02077, 0.02381],
    5000: [0.00162, 0.00230, 0.00506, 0.00697, 0.00930, 0.01066],
    10000: [0.00115, 0.00163, 0.00358, 0.00493, 0.00658, 0.00754],
}
ALPHAS = [0.005, 0.01, 0.05, 0.1, 0.2, 0.3]


@pytest.mark.parametrize("n", sorted(EPS_TABLE))
def test_theorem1_epsilon_table(n):
    got = [theorem1_epsilon(n, a, 0.1) for a in ALPHAS]
    np.testing.assert_allclose(got, EPS_TABLE[n], atol=5e-6)


def test_solve_for_each_parameter_round_trips():
    base = {"alpha": 0.05, "n": 2000, "delta": 0.1}
    eps = solve_theorem1(**base)["epsilon"]
    assert eps == pytest.approx(theorem1_epsilon(2000, 0.05, 0.1))
    assert solve_theorem1(alpha=0.05, n=2000, epsilon=eps)["delta"] == pytest.approx(0.1, abs=1e-6)
    n = solve_theorem1(alpha=0.05, epsilon=eps, delta=0.1)["n"]
    assert n <= 2000 and theorem1_epsilon(n, 0.05, 0.1) <= eps + 1e-12
    assert theorem1_epsilon(n - 1, 0.05, 0.1) > eps
    alpha = solve_theorem1(n=2000, epsilon=eps, delta=0.1)["alpha"]
    assert alpha == pytest.approx(0.05, abs=2e-3)
    with pytest.raises(ValueError, match="exactly three"):
        solve_theorem1(alpha=0.1, n=100)
    with pytest.raises(ValueError, match="alpha"):
        theorem1_epsilon(100, 1.5, 0.1)


def test_order_statistic_versus_numpy_quantile():
    t = np.arange(1, 11) / 10.0  # 0.1 … 1.0
    # ⌈(10+1)(1−0.2)⌉ = 9 → the 9th smallest; numpy interpolates at position 7.2.
    assert select_threshold(t, 0.2) == pytest.approx(0.9)
    assert select_threshold(t, 0.2, method="quantile") == pytest.approx(0.82)
    assert select_threshold(t, 0.05) == 1.0  # (n+1)α < 1: the paper sets θ̂ = 1


def test_paper_tight_threshold_formula(toy, toy_probs):
    from conftest import TOY_LABELS
    # s0: last wrong node A (0.35) under the root (1.0); s1: leaf 0 (0.7) under A (0.8).
    got = climbing_tight_thresholds(toy, toy_probs, TOY_LABELS, formula="paper")
    np.testing.assert_allclose(got, [0.35 + 1e-6, 0.7 + 0.8e-6, 0.35 + 0.6e-6, 0, 0], atol=1e-12)


def test_tight_thresholds_are_minimal(toy, toy_probs):
    from conftest import TOY_LABELS
    paths = decision_paths(toy, toy_probs, "climbing")
    th = climbing_tight_thresholds(toy, toy_probs, TOY_LABELS)
    for i, t in enumerate(th):
        node_at, _ = paths.predict(t)
        assert hierarchical_correctness(toy, node_at[i], TOY_LABELS[i])
        if t > 0:
            node_below, _ = paths.predict(t - 2e-6)
            assert not hierarchical_correctness(toy, node_below[i], TOY_LABELS[i])


@pytest.fixture(scope="module")
def synthetic():
    h = random_tree(300, 11)
    logits, labels = synthetic_logits(h, 12000, top1=0.75, seed=5)
    return h, node_probabilities(h, softmax(logits)), labels


def test_stratified_split_keeps_class_mix(synthetic):
    _, _, labels = synthetic
    draw = stratified_split_sampler(labels, 3000, seed=1)
    a, b = draw(), draw()
    assert a.size == 3000 == np.unique(a).size and not np.array_equal(np.sort(a), np.sort(b))
    expected = np.bincount(labels, minlength=300) * 3000 / labels.size
    assert np.abs(np.bincount(labels[a], minlength=300) - expected).max() < 1.0


def test_stratified_split_draws_every_sample_equally_often():
    """With 1–2 images per class (as the shipped sample), fixed quotas would leave the same
    classes out of every calibration set; each sample must be drawn with probability n_cal/n."""
    labels = np.r_[np.repeat(np.arange(500), 2), np.arange(500, 900)]  # 1,400 samples
    draw = stratified_split_sampler(labels, 300, seed=0)
    reps = 2000
    freq = np.zeros(labels.size)
    for _ in range(reps):
        a = draw()
        assert a.size == 300 and np.unique(a).size == 300
        counts = np.bincount(labels[a], minlength=900)
        assert counts[:500].max() <= 1 and counts[500:].max() <= 1  # floor(quota) or +1, never more
        freq[a] += 1
    freq /= reps
    p = 300 / labels.size
    assert np.abs(freq - p).max() < 5 * np.sqrt(p * (1 - p) / reps)
    # Per class of size 2 the expected count is 2·p = 0.43: drawn in about 43 % of the reps.
    assert np.mean(freq[:1000].reshape(500, 2).sum(axis=1)) == pytest.approx(2 * p, abs=0.01)


def test_theorem1_holds_empirically(synthetic):
    """|accuracy − (1−α)| ≤ ε in at least 1−δ of repetitions, up to binomial sampling error."""
    h, probs, labels = synthetic
    n_cal, reps, delta = 1000, 300, 0.1
    alphas = [0.05, 0.1]  # targets above the model's 75 % top-1, where the guarantee is two-sided
    data = GuaranteeData.from_arrays(h, probs, labels)
    res = split_repetitions(data, alphas, n_cal, reps, seed=3, baselines=("crc",))
    eps = {a: theorem1_epsilon(n_cal, a, delta) for a in alphas}
    summary = summarize_repetitions(res, eps).set_index(["alpha", "method"])
    slack = 3 * np.sqrt(delta * (1 - delta) / reps)
    for a in alphas:
        inside = summary.loc[(a, "hsc"), "fraction_inside_eps"]
        assert inside >= 1 - delta - slack
        assert abs(summary.loc[(a, "hsc"), "accuracy_mean"] - (1 - a)) < 0.004
        assert summary.loc[(a, "crc"), "accuracy_mean"] >= 1 - a - 0.004  # CRC controls the risk too


def test_fast_evaluation_matches_direct_prediction(synthetic):
    h, probs, labels = synthetic
    with pytest.warns(DeprecationWarning, match="shootout"):  # the old entry point, still working
        res = repeated_split_evaluation(h, probs, labels, [0.1], 2000, n_reps=1, seed=9, baselines=("crc",))
    cal = stratified_split_sampler(labels, 2000, seed=9)()
    test = np.setdiff1d(np.arange(labels.size), cal)
    paths = decision_paths(h, probs[test], "climbing")
    for _, row in res.iterrows():
        nodes, _ = paths.predict(row.threshold)
        assert row.accuracy == pytest.approx(hierarchical_correctness(h, nodes, labels[test]).mean())
        assert row.coverage == pytest.approx(h.coverage[nodes].mean())


def test_darts_reaches_target_or_returns_bound(synthetic):
    h, probs, labels = synthetic
    cal, test = slice(0, 3000), slice(3000, None)
    assert darts_lambda(h, probs[cal], labels[cal], alpha=0.5) == 0.0  # 75 % ≥ 50 % at λ = 0
    lam = darts_lambda(h, probs[cal], labels[cal], alpha=0.05)
    acc = hierarchical_correctness(h, darts_predict(h, probs[test], lam), labels[test]).mean()
    assert acc >= 0.95 - 0.01
    r = darts_rewards(h)
    assert r[h.root] == 0 and r[0] == pytest.approx(np.log2(300))


def test_crc_threshold_controls_calibration_risk(synthetic):
    h, probs, labels = synthetic
    theta = crc_threshold(h, probs[:2000], labels[:2000], alpha=0.1)
    nodes, _ = decision_paths(h, probs[:2000], "climbing").predict(theta)
    errors = (~hierarchical_correctness(h, nodes, labels[:2000])).sum()
    assert (errors + 1) / 2001 <= 0.1
    # The infimum: any lower threshold breaks the bound (the next lower θ in the probabilities'
    # float32 precision, in which θ is compared).
    lower = float(np.nextafter(np.float32(theta), np.float32(0)))
    nodes, _ = decision_paths(h, probs[:2000], "climbing").predict(lower)
    assert ((~hierarchical_correctness(h, nodes, labels[:2000])).sum() + 1) / 2001 > 0.1
