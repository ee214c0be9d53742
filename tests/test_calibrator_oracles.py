"""Calibrators against maintained implementations on the flat special case (issue 31):
torch-uncertainty's Temperature/Vector/MatrixScaler and scikit-learn's IsotonicRegression."""

from __future__ import annotations

import numpy as np
import pytest

from hsc_core.core.calibrators import _fit_matrix_of, _isotonic_knots, fit_calibrator
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.synthetic import synthetic_logits

torch = pytest.importorskip("torch")
post = pytest.importorskip("torch_uncertainty.post_processing")

C = 5


@pytest.fixture(scope="module")
def flat():
    h = Hierarchy.flat(C)
    logits, labels = synthetic_logits(h, 600, seed=3)
    return h, logits.astype(np.float64), labels


def _nll(z: np.ndarray, y: np.ndarray) -> float:
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(y.size), y]))


def _torch_fit(scaler, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    data = torch.utils.data.TensorDataset(torch.tensor(logits, dtype=torch.float32), torch.tensor(labels))
    scaler.fit(torch.utils.data.DataLoader(data, batch_size=len(labels)), progress=False)
    with torch.no_grad():
        return scaler(torch.tensor(logits, dtype=torch.float32)).double().numpy()


def test_temperature_matches_torch_uncertainty(flat):
    h, logits, labels = flat
    ours = fit_calibrator("temperature", h, logits, labels).logits(logits)
    theirs = _torch_fit(post.TemperatureScaler(max_iter=1000), logits, labels)
    assert abs(_nll(ours, labels) - _nll(theirs, labels)) < 1e-5
    np.testing.assert_allclose(ours, theirs, rtol=2e-3, atol=2e-3)


def test_vector_scaling_matches_torch_uncertainty(flat):
    h, logits, labels = flat
    cal = fit_calibrator("vector", h, logits, labels)
    theirs = _torch_fit(post.VectorScaler(num_classes=C, max_iter=2000), logits, labels)
    # convex in (w, b): one optimum; ours is never worse, and torch's LBFGS (lr 0.1) stops within 1 %
    assert _nll(cal.logits(logits), labels) <= _nll(theirs, labels) + 1e-5
    assert abs(_nll(cal.logits(logits), labels) - _nll(theirs, labels)) < 1e-2 * _nll(theirs, labels)


def test_matrix_scaling_without_odir_matches_torch_uncertainty(flat):
    h, logits, labels = flat
    cal = _fit_matrix_of("matrix", lambda z: z, lam=0.0, mu=0.0)(h, logits, labels)
    theirs = _torch_fit(post.MatrixScaler(num_classes=C, max_iter=300), logits, labels)
    assert _nll(cal.logits(logits), labels) <= _nll(theirs, labels) + 1e-5
    assert abs(_nll(cal.logits(logits), labels) - _nll(theirs, labels)) < 1e-2 * _nll(theirs, labels)


def test_odir_shrinks_the_off_diagonal(flat):
    h, logits, labels = flat
    free = _fit_matrix_of("matrix", lambda z: z, lam=0.0, mu=0.0)(h, logits, labels).params["W"]
    odir = _fit_matrix_of("matrix", lambda z: z, lam=50.0, mu=0.0)(h, logits, labels).params["W"]
    off = 1 - np.eye(C)
    assert np.abs(odir * off).sum() < 0.5 * np.abs(free * off).sum()


def test_isotonic_matches_scikit_learn(flat):
    sklearn_iso = pytest.importorskip("sklearn.isotonic")
    h, logits, labels = flat
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == labels).astype(float)
    x, y = _isotonic_knots(conf, correct)
    ref = sklearn_iso.IsotonicRegression(out_of_bounds="clip").fit(conf, correct)
    grid = np.linspace(0, 1, 2001)
    np.testing.assert_allclose(np.interp(grid, x, y), ref.predict(grid), atol=1e-12)
    cal = fit_calibrator("isotonic", h, logits, labels)
    probs = cal.leaf_probs(logits)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    # the old top-1 class gets the isotonic map of its probability (it may stop being the largest)
    np.testing.assert_allclose(probs[np.arange(len(conf)), p.argmax(axis=1)], ref.predict(conf), atol=1e-12)
