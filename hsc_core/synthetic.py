"""Seeded synthetic logits on a hierarchy — for tests and benchmarks only, never a user default.

Each sample's logits are Gaussian noise plus a boost on the true leaf and a smaller boost on
leaves near it in the tree (a shared deep ancestor), so confusions concentrate among siblings
as in real classifiers. A per-sample difficulty spreads the confidences. The boost strength is
tuned by bisection on a pilot set to reach the requested top-1 accuracy.
"""

from __future__ import annotations

import numpy as np

from .hierarchy import Hierarchy


def leaf_similarity(hierarchy: Hierarchy) -> np.ndarray:
    """(n_leaves, n_leaves) depth of the LCA divided by the tree's maximal depth, in [0, 1]."""
    leaves = np.arange(hierarchy.n_leaves)
    lca = hierarchy.lca(leaves[:, None], leaves[None, :])
    return hierarchy.depth[lca] / max(hierarchy.max_depth, 1)


def _draw(sim: np.ndarray, labels: np.ndarray, difficulty: np.ndarray, strength: float,
          rng: np.random.Generator, dtype: type) -> np.ndarray:
    n, k = labels.size, sim.shape[0]
    logits = rng.standard_normal((n, k), dtype=np.float32).astype(dtype, copy=False)
    signal = (strength * difficulty).astype(dtype)
    # Nearby leaves share part of the evidence: that is what makes a parent node confident.
    logits += (0.6 * signal)[:, None] * sim[labels].astype(dtype) ** 2
    logits[np.arange(n), labels] += signal
    return logits


def synthetic_logits(
    hierarchy: Hierarchy,
    n_samples: int,
    top1: float = 0.8,
    seed: int = 0,
    dtype: type = np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """Logits of shape (n_samples, n_leaves) and labels of shape (n_samples,).

    top1: target top-1 accuracy in (1/n_leaves, 1); reached within about ±1 point.
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    if not 1.0 / hierarchy.n_leaves < top1 < 1.0:
        raise ValueError(f"top1 must lie in (1/{hierarchy.n_leaves}, 1), got {top1}")
    rng = np.random.default_rng(seed)
    sim = leaf_similarity(hierarchy)
    labels = rng.integers(0, hierarchy.n_leaves, n_samples)
    difficulty = rng.gamma(2.0, 0.5, n_samples)

    pilot = min(n_samples, 3000)
    lo, hi = 0.0, 50.0
    for _ in range(25):
        mid = (lo + hi) / 2
        pilot_logits = _draw(sim, labels[:pilot], difficulty[:pilot], mid, np.random.default_rng(seed + 1), dtype)
        acc = (pilot_logits.argmax(axis=1) == labels[:pilot]).mean()
        lo, hi = (mid, hi) if acc < top1 else (lo, mid)
    return _draw(sim, labels, difficulty, (lo + hi) / 2, rng, dtype), labels
