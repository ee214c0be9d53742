"""Leaf softmax, node probabilities f_v(x) = Σ_{y∈L(v)} p_y(x), and temperature scaling."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from .hierarchy import Hierarchy
from .validation import check_labels, check_logits


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature``.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
    temperature : float > 0; a divisor (T < 1 sharpens).

    Returns
    -------
    probs : array of shape (n_samples, n_classes); float32 for float16/32 input, else float64
    """
    logits = check_logits(logits)
    if not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


def node_probabilities(hierarchy: Hierarchy, leaf_probs: np.ndarray) -> np.ndarray:
    """Probability of every node: the sum of its leaves' probabilities.

    Parameters
    ----------
    hierarchy : Hierarchy with ``n_leaves`` classes.
    leaf_probs : array of shape (n_samples, n_leaves)

    Returns
    -------
    node_probs : array of shape (n_samples, n_nodes), same float dtype as the input
        (float64 for integer input). Columns ``0 … n_leaves-1`` equal ``leaf_probs``.
    """
    leaf_probs = np.asarray(leaf_probs)
    if leaf_probs.ndim != 2 or leaf_probs.shape[1] != hierarchy.n_leaves:
        raise ValueError(
            f"leaf_probs must have shape (n_samples, {hierarchy.n_leaves}), got {leaf_probs.shape}"
        )
    dtype = leaf_probs.dtype if np.issubdtype(leaf_probs.dtype, np.floating) else np.float64
    out = np.empty((leaf_probs.shape[0], hierarchy.n_nodes), dtype=dtype)
    out[:, : hierarchy.n_leaves] = leaf_probs
    # Children before parents: sum each level's children with one reduceat per level.
    for parents, child_cols, starts in _levels(hierarchy):
        out[:, parents] = np.add.reduceat(out[:, child_cols], starts, axis=1)
    return out


def _levels(hierarchy: Hierarchy) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    cache = hierarchy._cache
    if "levels" not in cache:
        level = np.zeros(hierarchy.n_nodes, dtype=np.int64)  # longest distance to a leaf
        for v in hierarchy.topological_order[::-1]:
            p = hierarchy.parent[v]
            if p >= 0:
                level[p] = max(level[p], level[v] + 1)
        levels = []
        for lv in range(1, int(level.max()) + 1):
            parents = np.flatnonzero(level == lv)
            kids = [hierarchy.children[p] for p in parents]
            starts = np.cumsum([0] + [len(k) for k in kids[:-1]])
            levels.append((parents, np.concatenate(kids), starts))
        cache["levels"] = levels
    return cache["levels"]


def negative_log_likelihood(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    """Mean cross-entropy of softmax(logits / T) against integer labels."""
    logits = check_logits(logits)
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    logp = log_softmax(logits / temperature, axis=1)
    return float(-logp[np.arange(len(labels)), labels].mean())


def fit_temperature(logits: np.ndarray, labels: np.ndarray, bounds: tuple[float, float] = (0.05, 20.0)) -> float:
    """Temperature T minimising the NLL on a calibration split (Guo et al. 2017).

    The authors fit T with LBFGS from T = 1.5; the NLL is convex in 1/T, so a bounded
    scalar search on log T finds the same optimum deterministically.
    """
    logits = check_logits(logits)
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    res = minimize_scalar(
        lambda log_t: negative_log_likelihood(logits, labels, float(np.exp(log_t))),
        bounds=(np.log(bounds[0]), np.log(bounds[1])),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(np.exp(res.x))
