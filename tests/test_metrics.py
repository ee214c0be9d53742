"""Softmax, node probabilities, temperature, ECE, flat AURC, gain, CC curves; bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO, TOY_LABELS, TOY_LEAF_PROBS, random_tree
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from hsc_core.core.curves import (
    area_under_rc,
    calibration_coverage_curve,
    expected_calibration_error,
    flat_aurc,
    hierarchical_gain,
    hierarchical_rc_curve,
)
from hsc_core.core.probabilities import fit_temperature, negative_log_likelihood, node_probabilities, softmax
from hsc_core.core.risk import hierarchical_correctness
from hsc_core.core.rules import decision_paths, predict


def test_softmax_and_node_probabilities_equal_sparse_matmul(toy):
    logits = np.log(TOY_LEAF_PROBS)
    np.testing.assert_allclose(softmax(logits), TOY_LEAF_PROBS, atol=1e-12)
    np.testing.assert_allclose(softmax(2 * logits, temperature=2.0), TOY_LEAF_PROBS, atol=1e-12)
    probs = node_probabilities(toy, TOY_LEAF_PROBS)
    np.testing.assert_allclose(probs, (toy.leaf_matrix @ TOY_LEAF_PROBS.T).T, atol=1e-12)
    np.testing.assert_allclose(probs[0, 5:], [0.35, 0.40, 0.65, 1.0])
    h = random_tree(50, 2)
    leaf = softmax(np.random.default_rng(0).normal(size=(20, 50)))
    np.testing.assert_allclose(node_probabilities(h, leaf), (h.leaf_matrix @ leaf.T).T, atol=1e-12)


def test_temperature_fit_recovers_the_generating_temperature():
    rng = np.random.default_rng(0)
    n, k, true_t = 20000, 10, 2.5
    base = rng.normal(size=(n, k)) * 3
    # Draw labels from softmax(base / T): the NLL-optimal divisor of ``base`` is then T.
    p = softmax(base, temperature=true_t)
    labels = (p.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    assert fit_temperature(base, labels) == pytest.approx(true_t, rel=0.05)


def _reference_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The textbook fit: float64 log_softmax of all logits at once, same search as ``fit_temperature``."""
    z = np.asarray(logits, dtype=np.float64)
    rows = np.arange(len(labels))

    def nll(log_t: float) -> float:
        return float(-log_softmax(z / np.exp(log_t), axis=1)[rows, labels].mean())

    res = minimize_scalar(nll, bounds=(np.log(0.05), np.log(20.0)), method="bounded", options={"xatol": 1e-6})
    return float(np.exp(res.x))


@pytest.mark.parametrize("path", sorted((REPO / "cached_logits").glob("*.npz")), ids=lambda p: p.stem)
def test_chunked_temperature_fit_equals_full_float64_fit_on_shipped_logits(path):
    data = np.load(path)
    logits, labels = data["logits"][:600], data["labels"][:600].astype(np.int64)
    assert fit_temperature(logits, labels) == pytest.approx(_reference_temperature(logits, labels), rel=1e-6)


def test_chunked_nll_equals_log_softmax_across_chunk_boundaries(monkeypatch):
    import hsc_core.core.probabilities as probabilities

    rng = np.random.default_rng(1)
    logits = (rng.normal(size=(37, 11)) * 4).astype(np.float32)
    labels = rng.integers(0, 11, 37)
    # A budget of ~300 bytes: 3 rows of 11 float64 a chunk, 13 chunks, the last one short.
    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", str(300 / 2**20))
    assert probabilities.rows_per_chunk(11 * 8) == 3
    expected = -log_softmax(logits.astype(np.float64) / 0.7, axis=1)[np.arange(37), labels].mean()
    assert negative_log_likelihood(logits, labels, 0.7) == pytest.approx(expected, rel=1e-12)
    assert fit_temperature(logits, labels) == pytest.approx(_reference_temperature(logits, labels), rel=1e-6)


def test_temperature_fit_never_holds_an_n_by_c_float64_array(monkeypatch):
    import tracemalloc

    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", "4")
    rng = np.random.default_rng(2)
    n, c = 2000, 4000  # 64 MB as float64; the float32 logits themselves are 32 MB
    logits = rng.normal(size=(n, c)).astype(np.float32)
    labels = rng.integers(0, c, n)
    tracemalloc.start()
    try:
        fit_temperature(logits, labels)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < n * c * 8 / 4  # one 4 MB chunk and per-row arrays


def test_temperature_fit_on_rows_and_float16_is_the_gathered_float32_fit_bit_for_bit(monkeypatch):
    """``rows=`` fits on those rows without gathering them, and float16 logits are cast a block at a time, never
    whole: T is the same float as the fit on the gathered float32 rows, and no float32 copy of them is made."""
    import tracemalloc

    rng = np.random.default_rng(3)
    n, c = 4000, 2000
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) * 2
    logits[np.arange(n), labels] += 3
    rows = np.flatnonzero(rng.random(n) < 0.3)
    assert fit_temperature(logits, labels, rows=rows) == fit_temperature(logits[rows], labels[rows])
    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", "1")  # (the budget groups the sums: the same one for both fits)
    half = logits.astype(np.float16)
    gathered = fit_temperature(half[rows].astype(np.float32), labels[rows])
    tracemalloc.start()
    try:
        assert fit_temperature(half, labels, rows=rows) == gathered
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < rows.size * c * 4 / 4  # a quarter of the rows' float32 copy (9.6 MB): blocks and per-row arrays
    bad = logits.copy()
    bad[rows[4], 7] = np.inf
    with pytest.raises(ValueError, match=rf"NaN or inf in 1 rows \(first: row {rows[4]}\)"):
        fit_temperature(bad, labels, rows=rows)
    for wrong, message in ((rows < 5, "row indices"), (rows[:0], "non-empty"), (np.r_[rows, n], rf"\[0, {n}\)")):
        with pytest.raises(ValueError, match=message):
            fit_temperature(logits, labels, rows=wrong)


def test_ece_by_hand():
    conf = np.array([0.0, 0.2, 0.2, 0.9, 1.0])
    correct = np.array([1, 0, 1, 1, 1])
    # 15 bins (lower, upper]: 0.0 in no bin; 0.2 → bin 3 (gap 0.2−0.5); 0.9, 1.0 → bin 14 (gap 0.95−1).
    expected = (abs(0.4 - 1) + abs(1.9 - 2)) / 5
    assert expected_calibration_error(conf, correct) == pytest.approx(expected)
    assert expected_calibration_error(np.array([1 / 15]), np.array([1])) == pytest.approx(1 - 1 / 15)


def test_flat_aurc_and_gain_by_hand():
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    correct = np.array([1, 0, 1, 0])
    # Selective risks at k = 1..4: 0, 1/2, 1/3, 2/4.
    assert flat_aurc(conf, correct) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    assert hierarchical_gain(0.04, 0.03) == pytest.approx(25.0)
    assert area_under_rc([0, 1, 0.5], [0, 1, 0.25]) == pytest.approx(0.375)


def test_cc_curve_uses_rule_confidences(toy, toy_probs):
    cc = calibration_coverage_curve(toy, toy_probs, TOY_LABELS, "climbing", thresholds=np.array([0.0, 0.55, 1.0]))
    for theta, cov, ece in zip(cc.thresholds, cc.coverage, cc.ece, strict=True):
        nodes, conf = predict(toy, toy_probs, theta, "climbing")
        assert cov == pytest.approx(toy.coverage[nodes].mean())
        assert ece == pytest.approx(expected_calibration_error(conf, hierarchical_correctness(toy, nodes, TOY_LABELS)))
    assert cc.coverage[-1] == 0 and cc.ece[-1] == 0  # all at the root: confidence 1, always right


def test_dec_grid_matches_exact_curve_at_grid_points(toy):
    h = random_tree(40, 4)
    rng = np.random.default_rng(1)
    probs = node_probabilities(h, softmax(rng.normal(size=(200, 40)) * 3))
    labels = rng.integers(0, 40, 200)
    exact = hierarchical_rc_curve(h, probs, labels, "climbing")
    grid = hierarchical_rc_curve(h, probs, labels, "climbing", dec=2)
    assert len(grid.thresholds) <= 101 and len(exact.coverage) > len(grid.coverage)
    for theta, c, r in zip(grid.thresholds, grid.coverage, grid.risk, strict=True):
        assert (c, r) == pytest.approx(exact.at(theta))
        assert grid.at(theta) == pytest.approx((c, r))  # a grid curve answers at its own θ values
    assert abs(exact.haurc - grid.haurc) < 0.01


@pytest.mark.parametrize("logits, message", [
    (np.array([1.0, 2.0]), "2-D"),
    (np.array([[1.0, np.nan]]), "NaN or inf"),
    (np.array([[1.0, np.inf]]), "NaN or inf"),
    (np.zeros((0, 3)), "non-empty"),
    (np.array([["a", "b"]]), "numeric"),
])
def test_bad_logits(logits, message):
    with pytest.raises(ValueError, match=message):
        softmax(logits)


def test_bad_labels_theta_rule_and_shapes(toy, toy_probs):
    with pytest.raises(ValueError, match="out of range"):
        hierarchical_rc_curve(toy, toy_probs, np.array([0, 1, 2, 3, 5]))
    with pytest.raises(ValueError, match="shape"):
        hierarchical_rc_curve(toy, toy_probs, np.array([0, 1]))
    with pytest.raises(ValueError, match="integers"):
        hierarchical_rc_curve(toy, toy_probs, np.array([0, 1, 2, 3, 0.5]))
    with pytest.raises(ValueError, match=r"theta must lie in \[0, 1\]"):
        predict(toy, toy_probs, 1.5, "climbing")
    with pytest.raises(ValueError, match="unknown rule"):
        decision_paths(toy, toy_probs, "greedy")
    with pytest.raises(ValueError, match="node_probs must have shape"):
        decision_paths(toy, toy_probs[:, :5], "climbing")
    bad = toy_probs.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        decision_paths(toy, bad, "selective")
    with pytest.raises(ValueError, match="leaf_probs must have shape"):
        node_probabilities(toy, TOY_LEAF_PROBS[:, :4])
    with pytest.raises(ValueError, match="temperature"):
        softmax(np.ones((2, 2)), temperature=0.0)
