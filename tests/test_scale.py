"""Chunked evaluation at scale (issue 9) and one θ precision everywhere (issue 12.6).

Chunked results must equal the dense functions exactly, for any chunk size; every θ comparison
(predict, RCCurve.at, exact and dec-grid curves) must agree in the node probabilities' precision.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import TOY_LABELS, TOY_LEAF_PROBS, TOY_PARENTS, random_tree
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_rules import RULE_FUNCTIONS

from hsc_core.core.curves import (
    calibration_coverage_curve,
    expected_calibration_error,
    hierarchical_rc_curve,
    rc_curve_from_paths,
    rounded_threshold_grid,
)
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.logit_chunks import (
    auto_chunk_size,
    decision_paths_from_logits,
    node_probabilities_rows,
    rc_curves_from_logits,
    threshold_grid_from_logits,
)
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.risk import sample_loss
from hsc_core.core.rules import RULES, concat_decision_paths, decision_paths, predict
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy

TOY = Hierarchy.from_parents(TOY_PARENTS, n_leaves=5, node_ids=list("01234ACBR"))


def _logits(h: Hierarchy, n: int, seed: int, dtype=np.float32, sharp: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, h.n_leaves)) * sharp).astype(dtype), rng.integers(0, h.n_leaves, n)


def _dense(h, logits, temperature, precision):
    dtype = {"float32": np.float32, "float64": np.float64}[precision]
    return node_probabilities(h, softmax(logits.astype(dtype), temperature))


def _assert_same_curve(a, b):
    for field in ("coverage", "risk", "thresholds", "events"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field


# ------------------------------------------------------------------------- chunked == dense, exactly

CASES = [  # (hierarchy, n_samples, logits dtype)
    (TOY, 23, np.float64),
    (random_tree(60, 3), 157, np.float32),
    (random_tree(200, 8), 301, np.float16),
    (synthetic_taxonomy(300, 7, seed=2), 120, np.float32),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_chunked_paths_and_curves_equal_dense(case, precision):
    h, n, dtype = CASES[case]
    logits, labels = _logits(h, n, seed=case, dtype=dtype)
    temperature = 1.7
    probs = _dense(h, logits, temperature, precision)
    dense_paths = {r: decision_paths(h, probs, r) for r in RULES}
    dense_grid = rounded_threshold_grid(probs, 2)
    for chunk in (1, 7, n // 3 + 1, n, None):  # 1, non-divisors, one chunk, the automatic size
        paths = decision_paths_from_logits(h, logits, temperature, chunk_size=chunk, precision=precision)
        for r in RULES:
            for field in ("nodes", "values", "lengths"):
                got, want = getattr(paths[r], field), getattr(dense_paths[r], field)
                assert got.dtype == want.dtype and np.array_equal(got, want), (r, field, chunk)
        grid = threshold_grid_from_logits(h, logits, temperature, dec=2, chunk_size=chunk, precision=precision)
        np.testing.assert_array_equal(grid, dense_grid)
    for dec in (None, 2):
        curves = rc_curves_from_logits(h, logits, labels, temperature=temperature, dec=dec, chunk_size=5,
                                       precision=precision)
        for (rule, loss), curve in curves.items():
            _assert_same_curve(curve, hierarchical_rc_curve(h, probs, labels, rule, loss, dec=dec))


def test_cc_curve_from_chunked_paths_needs_no_node_matrix():
    h = random_tree(40, 6)
    logits, labels = _logits(h, 80, 6, np.float32)
    paths = decision_paths_from_logits(h, logits, chunk_size=9)
    grid = threshold_grid_from_logits(h, logits, chunk_size=9)
    probs = node_probabilities(h, softmax(logits))
    for rule in RULES:
        chunked = calibration_coverage_curve(h, None, labels, rule, thresholds=grid, paths=paths[rule])
        dense = calibration_coverage_curve(h, probs, labels, rule)
        for field in ("thresholds", "coverage", "ece"):
            np.testing.assert_array_equal(getattr(chunked, field), getattr(dense, field))


def test_default_precision_follows_the_logits():
    h = random_tree(30, 1)
    for dtype, want in ((np.float16, np.float32), (np.float32, np.float32), (np.float64, np.float64)):
        logits, _ = _logits(h, 20, 0, dtype)
        paths = decision_paths_from_logits(h, logits, rules=("climbing",), chunk_size=6)["climbing"]
        assert paths.values.dtype == want and paths.precision == np.dtype(want).name
        dense = decision_paths(h, node_probabilities(h, softmax(logits)), "climbing")
        np.testing.assert_array_equal(paths.values, dense.values)


def test_toy_vectors_from_logits():
    """§9 toy set through the chunked path, one sample per chunk: the exact-arithmetic hAURC."""
    logits = np.log(TOY_LEAF_PROBS)
    curves = rc_curves_from_logits(TOY, logits, TOY_LABELS, dec=2, chunk_size=1, precision="float64")
    expected = {"selective": (0.320000, 0.171976), "climbing": (0.233440, 0.131539),
                "max_coverage": (0.250821, 0.135379), "jumping": (0.303966, 0.188524)}
    for rule, values in expected.items():
        for loss, want in zip(("01", "severity"), values, strict=True):
            assert curves[(rule, loss)].haurc == pytest.approx(want, abs=5e-7)


def test_node_probabilities_rows_and_progress():
    h = synthetic_taxonomy(500, 7, seed=1)
    logits, labels = _logits(h, 90, 4, np.float16)
    full = node_probabilities(h, softmax(logits, 1.3))
    rows = np.array([0, 89, 17, 17])
    np.testing.assert_array_equal(node_probabilities_rows(h, logits, rows, 1.3), full[rows])
    np.testing.assert_array_equal(node_probabilities_rows(h, logits, 5, 1.3), full[[5]])
    assert node_probabilities_rows(h, logits, [3], precision="float64").dtype == np.float64
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 90\)"):
        node_probabilities_rows(h, logits, [90])
    with pytest.raises(ValueError, match="rows must be"):
        node_probabilities_rows(h, logits, [[1, 2]])
    calls = []
    rc_curves_from_logits(h, logits, labels, chunk_size=40, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 90), (40, 90), (80, 90), (90, 90)]


def test_bad_input_is_refused_with_specific_errors():
    h = random_tree(20, 2)
    logits, labels = _logits(h, 30, 0)
    bad = logits.copy()
    bad[17, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf \(first: row 17\)"):
        rc_curves_from_logits(h, bad, labels, chunk_size=4)
    with pytest.raises(ValueError, match="precision must be 'float32' or 'float64'"):
        decision_paths_from_logits(h, logits, precision="float16")
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        decision_paths_from_logits(h, logits, chunk_size=0)
    with pytest.raises(ValueError, match="unknown rule"):
        decision_paths_from_logits(h, logits, rules=("greedy",))
    with pytest.raises(ValueError, match="unknown loss"):
        rc_curves_from_logits(h, logits, labels, losses=("hinge",))
    with pytest.raises(ValueError, match="temperature"):
        decision_paths_from_logits(h, logits, temperature=0.0)
    with pytest.raises(ValueError, match="dec must be"):
        threshold_grid_from_logits(h, logits, dec=9)
    with pytest.raises(ValueError, match="classes"):
        rc_curves_from_logits(h, logits[:, :5], labels)
    with pytest.raises(ValueError, match="labels must have shape"):
        rc_curves_from_logits(h, logits, labels[:3])
    with pytest.raises(ValueError, match="no decision paths"):
        concat_decision_paths([])


def test_chunked_evaluation_never_holds_a_samples_by_nodes_matrix(monkeypatch):
    """iNat21-sized tree: traced memory stays far below one dense float32 node-probability matrix
    on one thread, and each further thread adds at most its two chunks in flight (``ordered_map``)."""
    h = synthetic_taxonomy()
    n, chunk = 3000, 100
    logits = np.random.default_rng(0).normal(size=(n, h.n_leaves)).astype(np.float16)
    labels = np.arange(n) % h.n_leaves

    def peak_bytes(threads: int) -> int:
        monkeypatch.setenv("HSC_THREADS", str(threads))
        tracemalloc.start()
        try:
            curves = rc_curves_from_logits(h, logits, labels, chunk_size=chunk, dec=2)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(curves) == 8
        return peak

    one, two = peak_bytes(1), peak_bytes(2)
    dense = n * h.n_nodes * 4
    assert one < dense / 4, (one, dense)
    chunk_matrix = chunk * h.n_nodes * 8  # one chunk's float64 node probabilities
    assert two - one < 2 * 2 * chunk_matrix, (one, two, chunk_matrix)  # not n / chunk = 30 of them
    assert auto_chunk_size(h) >= 100


# ------------------------------------------------------------------------- rules at scale, ties


def test_segment_argmax_keeps_first_index_ties():
    """Quantised probabilities make many exact ties; Jumping and Max-Coverage must still pick the
    lowest index, as the literal per-sample definitions do."""
    h = synthetic_taxonomy(400, 7, seed=5)
    rng = np.random.default_rng(0)
    leaf = rng.integers(0, 3, size=(40, h.n_leaves)).astype(np.float64)
    leaf[:, rng.integers(0, h.n_leaves, 40)] += 60  # a few heavy leaves so internal nodes tie too
    # Divided by a power of two: every node sum is exact, so equal values tie bit for bit.
    probs = node_probabilities(h, leaf / 2.0 ** np.ceil(np.log2(leaf.sum(axis=1, keepdims=True))))
    for rule in ("jumping", "max_coverage"):
        paths = decision_paths(h, probs, rule)
        for theta in (0.0, 0.05, 0.2, 0.5, 0.9):
            nodes, _ = paths.predict(theta)
            assert nodes.tolist() == [RULE_FUNCTIONS[rule](h, probs[i], theta) for i in range(40)]


def test_synthetic_taxonomy_has_inat21_shape():
    h = synthetic_taxonomy()
    assert h.n_leaves == 10_000 and h.max_depth == 7
    assert 12_000 <= h.n_nodes <= 12_800  # 16,328 nodes before collapsing single-child chains
    internal = np.arange(h.n_leaves, h.n_nodes)
    assert all(len(h.children[v]) >= 2 for v in internal)  # chains collapsed
    assert np.array_equal(synthetic_taxonomy().parent, h.parent)  # seeded
    assert not np.array_equal(synthetic_taxonomy(seed=1).parent, h.parent)
    logits, labels = synthetic_logits(h, 300, top1=0.6, seed=0, dtype=np.float16)
    assert logits.dtype == np.float16 and logits.shape == (300, 10_000) and labels.max() < 10_000


# ------------------------------------------------------------------------- one θ precision (12.6)


def test_float32_probability_equal_to_theta_is_accepted_everywhere():
    """s1's leaf 0 is float32(0.7) = 0.699999988…: at θ = 0.7 every path accepts it, as the
    authors' float32 comparison does (before, predict compared in float64 and rejected it)."""
    probs32 = node_probabilities(TOY, TOY_LEAF_PROBS.astype(np.float32))
    assert probs32[1, 0] == np.float32(0.7) and float(probs32[1, 0]) < 0.7
    nodes, conf = predict(TOY, probs32, 0.7, "selective")
    assert nodes[1] == 0 and conf[1] == np.float32(0.7)
    direct_cov = TOY.coverage[nodes].mean()
    direct_risk = sample_loss(TOY, nodes, TOY_LABELS).mean()
    exact = hierarchical_rc_curve(TOY, probs32, TOY_LABELS, "selective")
    grid = hierarchical_rc_curve(TOY, probs32, TOY_LABELS, "selective", dec=2)
    assert exact.at(0.7) == pytest.approx((direct_cov, direct_risk), abs=1e-12)
    assert grid.at(0.7) == pytest.approx((direct_cov, direct_risk), abs=1e-12)
    # One float32 step above, it is rejected by all of them.
    above = float(np.nextafter(np.float32(0.7), np.float32(1)))
    nodes_above, _ = predict(TOY, probs32, above, "selective")
    assert nodes_above[1] == TOY.root
    assert exact.at(above)[0] == pytest.approx(TOY.coverage[nodes_above].mean(), abs=1e-12)
    # In float64 the same θ compares exactly: 0.7 ≥ 0.7.
    assert predict(TOY, node_probabilities(TOY, TOY_LEAF_PROBS), 0.7, "selective")[0][1] == 0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), precision=st.sampled_from(["float32", "float64"]),
       source=st.sampled_from(["logits", "decimal"]), thetas=st.lists(st.floats(0, 1), min_size=5, max_size=5))
def test_predict_curve_and_grid_agree_for_every_theta(seed, precision, source, thetas):
    h = random_tree(25, seed)
    dtype = np.dtype(precision).type
    logits, labels = _logits(h, 60, seed, np.float64)
    if source == "logits":
        all_paths = decision_paths_from_logits(h, logits, precision=precision, chunk_size=16)
        grid = threshold_grid_from_logits(h, logits, dec=2, precision=precision)
    else:
        # Leaf probabilities in steps of 0.05: node sums land on decimal θ (0.7 is float32(0.7)
        # or an ulp off), the case where float32 and float64 comparisons used to disagree.
        rng = np.random.default_rng(seed)
        leaf = rng.multinomial(20, np.full(h.n_leaves, 1 / h.n_leaves), size=60) * 0.05
        probs = node_probabilities(h, leaf.astype(dtype))
        all_paths = {rule: decision_paths(h, probs, rule) for rule in RULES}
        grid = rounded_threshold_grid(probs, 2)
    for rule in RULES:
        paths = all_paths[rule]
        for loss in ("01", "severity"):
            exact = rc_curve_from_paths(h, paths, labels, loss)
            on_grid = rc_curve_from_paths(h, paths, labels, loss, grid)
            # Random θ, decimal θ, every event and its neighbours in the precision.
            probes = np.r_[thetas, grid, exact.events,
                           np.nextafter(exact.events, dtype(2)), np.nextafter(exact.events, dtype(-1))]
            for theta in np.clip(probes.astype(np.float64), 0, 1):
                nodes, _ = paths.predict(theta)
                direct = (h.coverage[nodes].mean(), sample_loss(h, nodes, labels, loss).mean())
                assert exact.at(theta) == pytest.approx(direct, abs=1e-12)
            for g in grid:
                assert on_grid.at(g) == pytest.approx(exact.at(g), abs=1e-12)


def test_expected_calibration_error_needs_a_positive_integer_bin_count():
    conf, correct = np.array([0.2, 0.9]), np.array([0, 1])
    for bad in (0, -3, 2.5, True, "15"):
        with pytest.raises(ValueError, match="n_bins must be an integer ≥ 1"):
            expected_calibration_error(conf, correct, n_bins=bad)
    assert expected_calibration_error(conf, correct, n_bins=1) == pytest.approx(abs(0.55 - 0.5))
