"""Hierarchical split-conformal prediction: node-valued prediction sets with marginal coverage.

Split conformal prediction restricted to the internal nodes of the class tree (Mortier, Javanmardi,
Sale, Hüllermeier & Waegeman 2025, arXiv 2501.19038, their first algorithm's setting: a prediction
set is one node, i.e. the leaves below it; den Hengst et al. 2025, arXiv 2508.13288, allow unions of
nodes). Conformal validity needs a *nested* family of sets indexed by one parameter θ; the label is
covered iff θ exceeds one number per sample (its "last incorrect" value), so the calibrated θ̂ is an
order statistic of those numbers and P(y ∈ C_θ̂(x)) ≥ 1 − α over calibration and test sample.

Two nested node families are provided, both as ``DecisionPaths`` records (the node chosen at θ is
the first record whose value is ≥ θ, ``rules.record_index``):

* Climbing's path (paper Algorithm 1): the paper's Algorithm 2 *is* split conformal on it;
* ``lca_set_paths``: the LCA of the flat "LAC" set {argmax} ∪ {y : p(y|x) > 1 − θ} (Sadinle, Lei &
  Wasserman 2019), i.e. the most specific single node containing every leaf the flat conformal set
  would return — the node-valued version of the standard flat conformal set, our construction in
  the framework of Mortier et al. (the node grows as θ rises, so the family is nested).

Mondrian (class-conditional) variants calibrate one θ̂ per group — here the predicted superclass at
a chosen depth, known at test time — which guarantees 1 − α *within every group* (Vovk et al. 2005).
"""

from __future__ import annotations

import numpy as np

from ..config import rows_per_chunk
from .hierarchy import Hierarchy
from .rules import DecisionPaths
from .validation import check_node_probs

LCA_SET = "lca_set"
#: Records kept per sample by ``lca_set_paths``: beyond them the set's node is the root (a superset,
#: so coverage stays valid); bounds memory at iNat21 scale.
MAX_RECORDS = 64


def lca_set_paths(hierarchy: Hierarchy, node_probs: np.ndarray, *, max_records: int = MAX_RECORDS) -> DecisionPaths:
    """Records of the node-valued LAC family: the LCA of {argmax} ∪ {y : p(y|x) > 1 − θ}.

    Record j is the LCA of the j + 1 most probable leaves, with value 1 − p_(j+2) (the θ above
    which the next leaf joins the set); the last record is the root with value 1. Truncated after
    ``max_records`` records with the root (a larger node: coverage only grows).

    Parameters
    ----------
    hierarchy : the class tree.
    node_probs : (n_samples, n_nodes) or (n_samples, n_leaves) probabilities; the leaves' columns
        come first.
    max_records : cap on records per sample.

    Returns
    -------
    ``DecisionPaths`` with rule ``"lca_set"``, float64 values, (n_samples, ≤ max_records) tables.

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)   # leaves 0–3, parents 4, 5, root 6
    >>> p = np.array([[0.5, 0.3, 0.15, 0.05]])
    >>> paths = lca_set_paths(h, p)
    >>> paths.nodes.tolist(), paths.values.round(2).tolist()
    ([[0, 4, 6]], [[0.7, 0.85, 1.0]])
    >>> int(paths.predict(0.6)[0][0]), int(paths.predict(0.8)[0][0]), int(paths.predict(0.9)[0][0])
    (0, 4, 6)
    """
    if int(max_records) != max_records or max_records < 2:
        raise ValueError(f"max_records must be an integer ≥ 2, got {max_records}")
    probs = np.asarray(node_probs)
    n_leaves = hierarchy.n_leaves
    if probs.ndim != 2 or probs.shape[1] not in (n_leaves, hierarchy.n_nodes):
        check_node_probs(probs, hierarchy.n_nodes)  # raises the library's one message
    n = probs.shape[0]
    width = int(min(max_records, max(n_leaves, 2)))
    nodes = np.full((n, width), hierarchy.root, dtype=np.int64)
    values = np.ones((n, width))
    chunk = rows_per_chunk(n_leaves * 8 * 3)  # the sort and its index array per row
    for s in range(0, n, chunk):
        leaf = probs[s: s + chunk, :n_leaves].astype(float)
        order = np.argsort(-leaf, axis=1, kind="stable")[:, :width]
        top = np.take_along_axis(leaf, order, axis=1)
        block = slice(s, s + leaf.shape[0])
        nodes[block, 0] = order[:, 0]
        values[block, : top.shape[1] - 1] = 1.0 - top[:, 1:]
        for j in range(1, min(width - 1, top.shape[1])):  # the last column stays the root (the cap)
            if (nodes[block, j - 1] == hierarchy.root).all():
                break
            nodes[block, j] = hierarchy.lca(nodes[block, j - 1], order[:, j])
    lengths = (nodes != hierarchy.root).sum(axis=1) + 1  # chains are nested: the root ends each one
    # pad each row by repeating its root record (DecisionPaths' convention)
    last = lengths - 1
    cols = np.minimum(np.arange(width)[None, :], last[:, None])
    nodes = np.take_along_axis(nodes, cols, axis=1)
    values = np.take_along_axis(values, cols, axis=1)
    values[np.arange(n)[:, None], np.arange(width)[None, :]] = np.where(
        np.arange(width)[None, :] >= last[:, None], 1.0, values)
    width_used = int(lengths.max()) if n else 1
    return DecisionPaths(LCA_SET, nodes[:, :width_used], values[:, :width_used], lengths)


def conformal_rank(n: int | np.ndarray, alpha: float) -> np.ndarray:
    """k = ⌈(n+1)(1−α)⌉, the rank of the conformal order statistic (> n: no finite quantile).

    >>> conformal_rank(np.array([9, 99, 1000]), 0.1).tolist()
    [9, 90, 901]
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return np.ceil((np.asarray(n) + 1) * (1.0 - alpha) - 1e-9).astype(np.int64)


def threshold_above(values: np.ndarray, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """The smallest θ in ``dtype`` strictly above each value (correct iff θ > value), in [0, 1]:
    0 for −inf (always correct) and 1 for +inf or values ≥ 1 (the root)."""
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    up = np.nextafter(np.where(finite, v, 0.0).astype(dtype), np.asarray(np.inf, dtype=dtype)).astype(float)
    return np.where(v == -np.inf, 0.0, np.where(finite, np.clip(up, 0.0, 1.0), 1.0))


def weighted_order_statistic(sorted_values: np.ndarray, weights: np.ndarray, k: np.ndarray | int) -> np.ndarray:
    """The k-th smallest of a multiset given as counts over pre-sorted values, per row.

    Parameters
    ----------
    sorted_values : (n,) ascending values.
    weights : (R, n) how many times each value is in each row's multiset (0/1 for a subset).
    k : (R,) or scalar ranks (1-based); a rank above the row's size gives +inf.

    Returns
    -------
    (R,) float.

    >>> weighted_order_statistic(np.array([1.0, 2.0, 3.0]), np.array([[1, 0, 2], [0, 1, 0]]), 2).tolist()
    [3.0, inf]
    """
    vals = np.asarray(sorted_values, dtype=float)
    cum = np.cumsum(np.asarray(weights), axis=1)
    k = np.broadcast_to(np.asarray(k), (cum.shape[0],))
    idx = (cum < k[:, None]).sum(axis=1)
    out = np.full(cum.shape[0], np.inf)
    ok = idx < vals.size
    out[ok] = vals[idx[ok]]
    return out


def mondrian_groups(hierarchy: Hierarchy, leaves: np.ndarray, depth: int) -> np.ndarray:
    """Group of each sample for Mondrian calibration: its predicted leaf's ancestor at ``depth``
    (the leaf itself when it is shallower). Known at test time, so per-group θ̂ can be applied.

    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> mondrian_groups(h, np.array([0, 1, 3]), 1).tolist()
    [4, 4, 5]
    """
    if int(depth) != depth or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth}")
    leaves = np.asarray(leaves, dtype=np.int64)
    return hierarchy.ancestor_at_depth(leaves, np.minimum(hierarchy.depth[leaves], int(depth)))
