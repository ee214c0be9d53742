"""The calibrators' iNat21-size fits (``core.large_fits``, issue 31): each against today's form on a
problem small enough for both (the class-count threshold lowered), plus brute-force pieces."""

from __future__ import annotations

import numpy as np
import pytest

from hsc_core.core import calibrators, large_fits
from hsc_core.core.calibrators import fit_calibrator
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.large_fits import (
    LARGE_CLASS_COUNT,
    depth_first_leaves,
    is_large,
    offdiagonal_square_sum,
)
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy


@pytest.fixture(scope="module")
def problem() -> tuple[Hierarchy, np.ndarray, np.ndarray]:
    tree = synthetic_taxonomy(120, 4, seed=1, collapse=False)
    logits, labels = synthetic_logits(tree, 1500, top1=0.6, seed=3)
    return tree, logits.astype(np.float32), labels


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every class count takes the iNat21-size fits."""
    monkeypatch.setattr(large_fits, "LARGE_CLASS_COUNT", 10)


def _nll(logits: np.ndarray, labels: np.ndarray) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-z[np.arange(labels.size), labels].mean())


def test_threshold_keeps_imagenet_on_todays_fits():
    assert LARGE_CLASS_COUNT == 1024 and not is_large(1000) and is_large(10_000)


def test_offdiagonal_square_sum_and_its_gradients_by_brute_force():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    w = u @ v.T
    value, gu, gv = offdiagonal_square_sum(u, v)
    assert value == pytest.approx(np.sum(w ** 2) - np.sum(np.diag(w) ** 2), rel=1e-12)
    eps = 1e-6
    for (j, r) in [(0, 0), (3, 1), (5, 0)]:
        du = np.zeros_like(u)
        du[j, r] = eps
        assert gu[j, r] == pytest.approx((offdiagonal_square_sum(u + du, v)[0]
                                          - offdiagonal_square_sum(u - du, v)[0]) / (2 * eps), rel=1e-6)
        assert gv[j, r] == pytest.approx((offdiagonal_square_sum(u, v + du)[0]
                                          - offdiagonal_square_sum(u, v - du)[0]) / (2 * eps), rel=1e-6)


def test_depth_first_leaves_make_every_node_a_contiguous_run(problem):
    tree = problem[0]
    order = depth_first_leaves(tree)
    assert sorted(order) == list(range(tree.n_leaves))
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    for v in range(tree.n_leaves, tree.n_nodes):
        at = np.sort(position[tree.leaf_matrix[v].indices])
        assert at[-1] - at[0] == at.size - 1, v


def test_vector_in_float32_reaches_todays_nll(problem, monkeypatch):
    tree, z, y = problem
    today = fit_calibrator("vector", tree, z, y)
    ts = fit_calibrator("temperature", tree, z, y)
    monkeypatch.setattr(large_fits, "LARGE_CLASS_COUNT", 10)
    capped = fit_calibrator("vector", tree, z, y)  # 50 iterations from TS's optimum: only downhill
    assert capped.params["nll"] < _nll(ts.logits(z), y)
    assert _nll(capped.logits(z), y) == pytest.approx(capped.params["nll"], abs=1e-5)
    monkeypatch.setattr(calibrators, "LARGE_VECTOR_MAX_ITER", calibrators.VECTOR_MAX_ITER)
    same_iterations = fit_calibrator("vector", tree, z, y)  # float32 passes, today's 100 iterations
    assert same_iterations.params["nll"] == pytest.approx(today.params["nll"], abs=2e-4)


@pytest.mark.usefixtures("large")
@pytest.mark.parametrize("key", ["matrix", "dirichlet"])
def test_structured_matrix_improves_on_ts_and_maps_as_fitted(problem, key):
    tree, z, y = problem
    fitted = fit_calibrator(key, tree, z, y)
    p = fitted.params
    assert "W" not in p and p["U"].shape == p["V"].shape == (tree.n_leaves, large_fits.LOW_RANK)
    np.testing.assert_allclose(p["V"].T @ p["V"], np.eye(large_fits.LOW_RANK), atol=1e-6)
    ts = fit_calibrator("temperature", tree, z, y)
    ts_nll = _nll(ts.logits(z), y)
    mine = _nll(fitted.logits(z), y)
    assert mine < ts_nll - 0.05  # it starts from TS and L-BFGS only descends
    penalty = (p["lambda"] / (120 * 119) * offdiagonal_square_sum(p["U"], p["V"])[0]
               + p["mu"] / 120 * float(p["b"] @ p["b"]))
    assert mine + penalty == pytest.approx(p["nll"], abs=1e-4)  # the map applied is the one fitted
    probs = fitted.leaf_probs(z)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_newton_depth_temperatures_match_todays_search(problem, monkeypatch):
    tree, z, y = problem
    today = fit_calibrator("depth_temperature", tree, z, y).params["T"]
    monkeypatch.setattr(large_fits, "LARGE_CLASS_COUNT", 10)
    fast = fit_calibrator("depth_temperature", tree, z, y).params["T"]
    assert fast.shape == today.shape == (tree.max_depth + 1,)
    # today's bounded search stops within 1e-3 of log T; Newton converges to 1e-6 of 1/T
    np.testing.assert_allclose(fast, today, rtol=2e-3)


def test_newton_depth_temperature_on_a_flat_tree_is_temperature_scaling(monkeypatch):
    h = Hierarchy.flat(40)
    z, y = synthetic_logits(h, 800, seed=5)
    t = fit_calibrator("temperature", h, z, y).params["T"]
    monkeypatch.setattr(large_fits, "LARGE_CLASS_COUNT", 10)
    assert fit_calibrator("depth_temperature", h, z, y).params["T"][1] == pytest.approx(t, rel=1e-4)


def test_principal_directions_are_the_top_right_singular_vectors():
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(300, 3)) * [10.0, 5.0, 2.0]) @ rng.normal(size=(3, 40)) + 0.01 * rng.normal(size=(300, 40))
    x = x.astype(np.float32)
    v = large_fits.principal_directions(lambda rows: x[rows], 300, 40, 3)
    want = np.linalg.svd(x.astype(np.float64), full_matrices=False)[2][:3].T
    np.testing.assert_allclose(np.abs(v.T @ want), np.eye(3), atol=1e-4)  # the same subspace, up to signs
