"""A synthetic per-rank classifier for the per-rank tests: 4 families × 3 genera × 4 species.

Each sample has a difficulty u; the prediction is right at the coarsest rank with probability
1 − 0.3u and, once right, at each finer rank with probability 1 − 0.5u (a wrong rank makes every
finer one wrong: the predicted path leaves the true one there). The confidence of a rank is its
probability of being right plus noise, so confidences are informative but not calibrated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

RANKS = ("family", "genus", "species")
SHAPE = (4, 3, 4)


def synthetic_per_rank_frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    true = np.stack([rng.integers(0, k, n) for k in SHAPE], axis=1)
    u = rng.random(n)
    p_right = np.stack([1 - 0.3 * u, 1 - 0.5 * u, 1 - 0.5 * u], axis=1)
    right = np.cumprod(rng.random((n, 3)) < p_right, axis=1).astype(bool)
    pred = true.copy()
    for r, k in enumerate(SHAPE):
        wrong_here = ~right[:, r] & (r == 0 or right[:, r - 1]) if r else ~right[:, 0]
        pred[wrong_here, r] = (true[wrong_here, r] + rng.integers(1, k, wrong_here.sum())) % k
        below = ~right[:, r]
        if r + 1 < len(SHAPE):  # finer ranks under a wrong node: any child
            for s in range(r + 1, len(SHAPE)):
                pred[below, s] = rng.integers(0, SHAPE[s], below.sum())
    conf = np.clip(np.cumprod(p_right, axis=1) + rng.normal(0, 0.08, (n, 3)), 0, 1).round(4)

    def names(path: np.ndarray) -> list[np.ndarray]:
        out, prefix = [], np.full(len(path), "", dtype=object)
        for r, rank in enumerate(RANKS):
            prefix = prefix + np.array([f"{rank[0].upper()}{v}" for v in path[:, r]], dtype=object)
            out.append(prefix.copy())
            prefix = prefix + "."
        return out

    t, p = names(true), names(pred)
    data = {"sample_id": [f"x{i}" for i in range(n)]}
    for r, rank in enumerate(RANKS):
        data[f"true_{rank}"], data[f"pred_{rank}"], data[f"conf_{rank}"] = t[r], p[r], conf[:, r]
    return pd.DataFrame(data)


def independent_heads_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """Independent heads, one per rank, on the same 4 × 3 × 4 taxonomy: given a difficulty u, the head
    of rank r is right with probability 1 − (0.2 + 0.2r)u, independently of the other heads, and
    otherwise names a uniformly drawn other node of its rank (so heads disagree: predictions are not
    nested); its confidence is that probability plus noise."""
    rng = np.random.default_rng(seed)
    sizes = np.cumprod(SHAPE)  # nodes per rank: 4, 12, 48
    leaf = rng.integers(0, sizes[-1], n)
    u = rng.random(n)
    data: dict[str, object] = {"sample_id": [f"x{i}" for i in range(n)]}
    for r, rank in enumerate(RANKS):
        true = leaf // (sizes[-1] // sizes[r])  # the leaf's ancestor at rank r
        p_right = 1 - (0.2 + 0.2 * r) * u
        right = rng.random(n) < p_right
        pred = np.where(right, true, (true + rng.integers(1, sizes[r], n)) % sizes[r])

        def name(v: np.ndarray, r: int = r) -> list[str]:  # "F1.G4.S9": the node's path of global indices
            return [".".join(f"{RANKS[s][0].upper()}{x // (sizes[r] // sizes[s])}" for s in range(r + 1)) for x in v]

        data[f"true_{rank}"], data[f"pred_{rank}"] = name(true), name(pred)
        data[f"conf_{rank}"] = np.clip(p_right + rng.normal(0, 0.08, n), 0, 1).round(4)
    return pd.DataFrame(data)
