"""Slow, literal per-sample implementations of the four rules (definitions §3), used to check
the vectorised engine. Loops over samples and nodes on purpose: nothing here is shared with it."""

from __future__ import annotations

import numpy as np

from hsc_core.core.hierarchy import Hierarchy


def _clipped(h: Hierarchy, probs: np.ndarray) -> np.ndarray:
    p = np.minimum(np.round(probs, 12), 1.0)
    p[h.root] = 1.0
    return p


def selective(h: Hierarchy, probs: np.ndarray, theta: float) -> int:
    leaf = int(np.argmax(probs[: h.n_leaves]))
    return leaf if _clipped(h, probs)[leaf] >= theta else h.root


def climbing(h: Hierarchy, probs: np.ndarray, theta: float) -> int:
    p = _clipped(h, probs)
    v = int(np.argmax(probs[: h.n_leaves]))
    while p[v] < theta:
        v = int(h.parent[v])
    return v


def max_coverage(h: Hierarchy, probs: np.ndarray, theta: float) -> int:
    p = _clipped(h, probs)
    ok = [v for v in range(h.n_nodes) if p[v] >= theta]
    best_cov = max(h.coverage[v] for v in ok)
    cand = [v for v in ok if h.coverage[v] == best_cov]
    best_p = max(p[v] for v in cand)
    return min(v for v in cand if p[v] == best_p)


def jumping(h: Hierarchy, probs: np.ndarray, theta: float) -> int:
    p = _clipped(h, probs)
    v = int(np.argmax(probs[: h.n_leaves]))
    if p[v] >= theta:
        return v
    r = h.max_depth
    for height in range(1, r + 1):
        # Layer: internal nodes of this height, plus leaves at depth ≤ R − height (dummy padding).
        layer = [u for u in range(h.n_nodes)
                 if (u >= h.n_leaves and r - h.depth[u] == height)
                 or (u < h.n_leaves and h.depth[u] <= r - height)]
        best = max(layer, key=lambda u: (p[u], -u))
        if p[best] >= theta:
            return best
    return h.root


RULE_FUNCTIONS = {"selective": selective, "climbing": climbing,
                  "jumping": jumping, "max_coverage": max_coverage}
