"""Inference rules: Selective, Climbing, Jumping and Max-Coverage (definitions §3).

Every rule is the same operation on a per-sample *candidate sequence* of nodes: return the first
candidate whose probability is ≥ θ. The root comes last with probability forced to 1.0, so every
θ ∈ [0, 1] has an answer.

* Selective:    [argmax leaf, root]
* Climbing:     the argmax leaf's path to the root (deepest ancestor with f ≥ θ)
* Jumping:      argmax leaf, then the most probable node of each height layer h = 1 … R
* Max-Coverage: the most probable node of each coverage level, from the leaves up

Only candidates that beat every earlier one can ever be chosen ("records"), so each sample is
compressed to a short, strictly increasing record list. Predicting at θ is then one comparison per
record, and the exact RC curve is a sweep over record values (see ``curves``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .hierarchy import Hierarchy
from .validation import check_node_probs, check_theta

Rule = Literal["selective", "climbing", "jumping", "max_coverage"]
RULES: tuple[Rule, ...] = ("selective", "climbing", "jumping", "max_coverage")
RULE_LABELS: dict[str, str] = {
    "selective": "Selective",
    "climbing": "Climbing",
    "jumping": "Jumping",
    "max_coverage": "Max-Coverage",
}


@dataclass(frozen=True)
class DecisionPaths:
    """Per-sample records of one rule.

    nodes, values: (n_samples, n_records) — the nodes a rule can stop at, in order, and their
    probabilities (strictly increasing along a row; the last real record is the root with 1.0).
    Rows shorter than ``n_records`` are padded by repeating their last record.
    lengths: (n_samples,) number of real records per row.
    """

    rule: str
    nodes: np.ndarray
    values: np.ndarray
    lengths: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.nodes.shape[0]

    def record_index(self, theta: float) -> np.ndarray:
        """Index of the chosen record at θ: the first with value ≥ θ. Shape (n_samples,)."""
        theta = check_theta(theta)
        return (self.values < theta).sum(axis=1)

    def predict(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, confidences) chosen at θ, each of shape (n_samples,)."""
        k = self.record_index(theta)[:, None]
        return (np.take_along_axis(self.nodes, k, axis=1)[:, 0],
                np.take_along_axis(self.values, k, axis=1)[:, 0])


def _best_in_columns(probs: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Per row, the column of ``columns`` with the highest probability (lowest index on ties)."""
    columns = np.sort(columns)
    if columns[-1] - columns[0] + 1 == columns.size:
        block = probs[:, columns[0]: columns[-1] + 1]  # contiguous: a view, no copy
    else:
        block = probs[:, columns]
    return columns[block.argmax(axis=1)]


def argmax_leaf(hierarchy: Hierarchy, node_probs: np.ndarray) -> np.ndarray:
    """Most probable leaf per sample (first index on ties, as torch). Shape (n_samples,)."""
    return node_probs[:, : hierarchy.n_leaves].argmax(axis=1)


def _candidates(hierarchy: Hierarchy, probs: np.ndarray, rule: str, leaf: np.ndarray) -> np.ndarray:
    """(n_samples, n_candidates) candidate node sequence of ``rule``.

    Jumping's layers and Max-Coverage's leaf level also hold other leaves, but none of them
    beats the argmax leaf (the first candidate), so they can never be chosen and are skipped.
    """
    n = probs.shape[0]
    internal = np.arange(hierarchy.n_leaves, hierarchy.n_nodes)
    if rule == "selective":
        return np.stack([leaf, np.full(n, hierarchy.root)], axis=1)
    if rule == "climbing":
        return hierarchy.leaf_paths[leaf]
    if rule == "jumping":
        height = hierarchy.max_depth - hierarchy.depth[internal]
        groups = [internal[height == h] for h in range(1, hierarchy.max_depth + 1)]
    elif rule == "max_coverage":
        counts = hierarchy.leaf_count[internal]
        groups = [internal[counts == c] for c in np.unique(counts)]
    else:
        raise ValueError(f"unknown rule {rule!r}; choose one of {', '.join(RULES)}")
    return np.stack([leaf] + [_best_in_columns(probs, g) for g in groups if g.size], axis=1)


def _compress(cand: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep candidates that beat every earlier one, packed left and padded with the last."""
    n = cand.shape[0]
    is_record = np.ones(vals.shape, dtype=bool)
    is_record[:, 1:] = vals[:, 1:] > np.maximum.accumulate(vals, axis=1)[:, :-1]
    lengths = is_record.sum(axis=1)
    width = int(lengths.max())
    rows, cols = np.nonzero(is_record)
    slots = (np.cumsum(is_record, axis=1) - 1)[rows, cols]
    nodes = np.empty((n, width), dtype=cand.dtype)
    values = np.empty((n, width), dtype=vals.dtype)
    nodes[rows, slots] = cand[rows, cols]
    values[rows, slots] = vals[rows, cols]
    pad = np.arange(width)[None, :] >= lengths[:, None]
    if pad.any():
        last = lengths - 1
        r = np.arange(n)
        nodes = np.where(pad, nodes[r, last][:, None], nodes)
        values = np.where(pad, values[r, last][:, None], values)
    return nodes, values, lengths


def decision_paths(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    rule: Rule,
    leaf: np.ndarray | None = None,
) -> DecisionPaths:
    """Compress ``rule``'s candidate sequences into records.

    node_probs: (n_samples, n_nodes) from ``probabilities.node_probabilities``.
    leaf: optional precomputed ``argmax_leaf`` (saves a pass when building several rules).
    """
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    if leaf is None:
        leaf = argmax_leaf(hierarchy, probs)
    cand = _candidates(hierarchy, probs, rule, leaf)
    raw = np.take_along_axis(probs, cand, axis=1)
    if not np.isfinite(raw).all():
        raise ValueError("node_probs contain NaN or inf")
    # Stored as float64 so θ is always compared at full precision. As the authors' RC code,
    # sums above 1 are clipped and the root is exactly 1.0. For float64 input, rounding to 12
    # decimals snaps summation noise (0.1 + 0.1 + 0.7 < 0.9) so decimal θ tie as intended;
    # float32 input keeps its exact values (the authors' float32 semantics).
    vals = np.minimum(raw.astype(np.float64), 1.0)
    if raw.dtype == np.float64:
        vals = np.round(vals, 12)
    vals[cand == hierarchy.root] = 1.0
    nodes, values, lengths = _compress(cand, vals)
    return DecisionPaths(rule=rule, nodes=nodes, values=values, lengths=lengths)


def predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """(predicted nodes, confidences) of ``rule`` at θ; a prediction is accepted when f ≥ θ."""
    return decision_paths(hierarchy, node_probs, rule).predict(theta)


def selective_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Argmax leaf if its probability ≥ θ, else the root (confidence 1.0)."""
    return predict(hierarchy, node_probs, theta, "selective")


def climbing_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Deepest ancestor of the argmax leaf (itself included) with probability ≥ θ (Algorithm 1)."""
    return predict(hierarchy, node_probs, theta, "climbing")


def jumping_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Argmax leaf, else the most probable node of the lowest height layer reaching θ."""
    return predict(hierarchy, node_probs, theta, "jumping")


def max_coverage_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Node of maximal coverage with probability ≥ θ; ties by probability, then lowest index."""
    return predict(hierarchy, node_probs, theta, "max_coverage")
