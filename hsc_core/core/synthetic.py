"""Seeded synthetic taxonomies and logits — for tests and benchmarks only, never a user default.

``synthetic_taxonomy`` builds an iNat21-sized tree (10,000 species under 7 levels, about 16,300
nodes before and 12,400 after collapsing single-child chains).

Each sample's logits are Gaussian noise, plus a boost ``subtree_boost`` on every leaf under a
"perceived" ancestor of the true leaf (one or a few levels up), plus a per-sample boost on the
true leaf. So when the model errs it mostly picks a nearby leaf and the ancestor stays
confident, as with real classifiers (dog breeds confused with dog breeds). The true-leaf boost
is tuned by bisection on a pilot set to reach the requested top-1 accuracy.
"""

from __future__ import annotations

import numpy as np

from .hierarchy import Hierarchy

# iNat21's level sizes: kingdom, phylum, class, order, family, genus, species.
INAT21_LEVELS = (3, 13, 51, 273, 1103, 4884, 10_000)


def synthetic_taxonomy(n_leaves: int = 10_000, depth: int = 7, seed: int = 0, skew: float = 1.3,
                       collapse: bool = True) -> Hierarchy:
    """A seeded ``depth``-level taxonomy with ``n_leaves`` leaves, all at depth ``depth``.

    Level sizes follow iNat21's proportions when ``depth`` is 7 (else grow geometrically). Every
    node gets at least one child and the remaining children go to parents with heavy-tailed
    (Pareto(``skew``)) weights, so many nodes have one child, as genera with one species do; those
    chains are collapsed (``Hierarchy.from_parent_map``). The defaults give 16,328 nodes before
    and 12,386 after collapsing, with 10,000 leaves at depths 3–7; ``collapse=False`` keeps the
    chains, so every leaf stays at depth ``depth`` (as iNat21's species are all at depth 7).
    """
    if n_leaves < 2 or depth < 1:
        raise ValueError(f"need n_leaves ≥ 2 and depth ≥ 1, got {n_leaves} and {depth}")
    if depth == len(INAT21_LEVELS):
        sizes = [max(1, round(s * n_leaves / INAT21_LEVELS[-1])) for s in INAT21_LEVELS]
    else:
        sizes = np.geomspace(min(3, n_leaves), n_leaves, depth).round().astype(int).tolist()
    sizes[-1] = n_leaves
    sizes = np.maximum.accumulate(sizes).tolist()  # a level never has fewer nodes than the one above
    rng = np.random.default_rng(seed)
    parent_of: dict[str, str] = {}
    above = ["root"]
    for level, size in enumerate(sizes):
        names = [f"leaf{i}" for i in range(size)] if level == depth - 1 else [f"L{level + 1}_{i}" for i in range(size)]
        weights = rng.pareto(skew, len(above)) + 1e-3
        extra = rng.choice(len(above), size - len(above), p=weights / weights.sum())
        parents = np.r_[np.arange(len(above)), extra][rng.permutation(size)]
        parent_of.update(zip(names, (above[i] for i in parents.tolist()), strict=True))
        above = names
    return Hierarchy.from_parent_map(parent_of, above, collapse_single_child=collapse)


def _draw(hierarchy: Hierarchy, labels: np.ndarray, ancestor: np.ndarray, difficulty: np.ndarray,
          strength: float, noise: float, subtree_boost: float, seed: int, chunk: int = 4096,
          dtype: type = np.float32) -> np.ndarray:
    n, k = labels.size, hierarchy.n_leaves
    rng = np.random.default_rng(seed)
    leaves_under = hierarchy.leaf_matrix.tocsr()
    out: np.ndarray = np.empty((n, k), dtype=dtype)  # never wider than float32: no dense float64 n × leaves
    boost = np.float32(subtree_boost)
    for s in range(0, n, chunk):  # chunks keep the float32 working block small
        e = min(s + chunk, n)
        block = noise * rng.standard_normal((e - s, k), dtype=np.float32)
        # The boost goes only where the perceived subtree's leaves are (sparse rows): adding 0
        # elsewhere would change nothing and cost a dense chunk × leaves pass.
        under = leaves_under[ancestor[s:e]]
        block[np.repeat(np.arange(e - s), np.diff(under.indptr)), under.indices] += boost
        block[np.arange(e - s), labels[s:e]] += np.float32(strength) * difficulty[s:e]
        out[s:e] = block
    return out


def synthetic_logits(
    hierarchy: Hierarchy,
    n_samples: int,
    top1: float = 0.8,
    seed: int = 0,
    noise: float = 2.0,
    subtree_boost: float = 8.0,
    climb_p: float = 0.7,
    dtype: type = np.float32,
) -> tuple[np.ndarray, np.ndarray]:
    """Logits of shape (n_samples, n_leaves) and int64 labels of shape (n_samples,).

    top1: target top-1 accuracy in (1/n_leaves, 1), reached within about ±1 point.
    climb_p: the perceived ancestor is Geometric(climb_p) levels above the true leaf.
    dtype: float32 (default) or float16 (as cached logits are stored; half the memory: 2 GB
        at 100,000 × 10,000). Drawn in float32 chunks of 4,096 samples either way.
    """
    if np.dtype(dtype) not in (np.float16, np.float32):
        raise ValueError(f"dtype must be float16 or float32, got {np.dtype(dtype)}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    if not 1.0 / hierarchy.n_leaves < top1 < 1.0:
        raise ValueError(f"top1 must lie in (1/{hierarchy.n_leaves}, 1), got {top1}")
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, hierarchy.n_leaves, n_samples)
    depth = hierarchy.depth[labels]
    up = rng.geometric(climb_p, n_samples)
    ancestor = hierarchy.ancestor_at_depth(labels, np.maximum(depth - up, 1 if hierarchy.max_depth > 1 else 0))
    difficulty = rng.gamma(1.0, 1.0, n_samples).astype(np.float32)

    pilot = min(n_samples, 3000)
    lo, hi = 0.0, 60.0
    for _ in range(22):
        mid = (lo + hi) / 2
        logits = _draw(hierarchy, labels[:pilot], ancestor[:pilot], difficulty[:pilot], mid, noise, subtree_boost,
                       seed + 1)
        acc = (logits.argmax(axis=1) == labels[:pilot]).mean()
        lo, hi = (mid, hi) if acc < top1 else (lo, mid)
    logits = _draw(hierarchy, labels, ancestor, difficulty, (lo + hi) / 2, noise, subtree_boost, seed + 2, dtype=dtype)
    return logits, labels
