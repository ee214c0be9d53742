"""Hierarchical split-conformal prediction: node-valued prediction sets with marginal coverage.

Split conformal prediction restricted to the internal nodes of the class tree (Mortier, Javanmardi,
Sale, Hüllermeier & Waegeman 2025, arXiv 2501.19038, their first algorithm's setting: a prediction
set is one node, i.e. the leaves below it; den Hengst et al. 2025, arXiv 2508.13288, allow unions of
nodes). Conformal validity needs a *nested* family of sets indexed by one parameter θ; the label is
covered iff θ exceeds one number per sample (its "last incorrect" value), so the calibrated θ̂ is an
order statistic of those numbers and P(y ∈ C_θ̂(x)) ≥ 1 − α over calibration and test sample.

Three nested node families are provided, all as ``DecisionPaths`` records (the node chosen at θ is
the first record whose value is ≥ θ, ``rules.record_index``):

* Climbing's path (paper Algorithm 1): the paper's Algorithm 2 *is* split conformal on it;
* ``lca_set_paths``: the LCA of the flat "LAC" set {argmax} ∪ {y : p(y|x) > 1 − θ} (Sadinle, Lei &
  Wasserman 2019), i.e. the most specific single node containing every leaf the flat conformal set
  would return — the node-valued version of the standard flat conformal set, our construction in
  the framework of Mortier et al. (the node grows as θ rises, so the family is nested);
* ``top_down_paths``: the greedy top-down node — from the root into the most probable child while
  its probability is ≥ θ (internal-node prediction sets as in Mortier et al.).

Mondrian (class-conditional) variants calibrate one θ̂ per group — here the predicted superclass at
a chosen depth, known at test time — which guarantees 1 − α *within every group* (Vovk et al. 2005).
"""

from __future__ import annotations

import numpy as np

from ..config import rows_per_chunk
from .hierarchy import Hierarchy
from .rules import DecisionPaths, _segment_argmax
from .validation import check_node_probs

LCA_SET = "lca_set"
TOP_DOWN = "top_down"
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


def top_down_paths(hierarchy: Hierarchy, node_probs: np.ndarray) -> DecisionPaths:
    """Records of the greedy top-down node: from the root, step into the most probable child while
    its probability is ≥ θ (the internal-node search of Mortier et al. 2025, arXiv 2501.19038).

    The greedy path root → leaf is fixed per sample; at θ the node is its deepest node with
    probability ≥ θ, i.e. the first record (deepest first) whose value is ≥ θ. Nodes on one path
    are nested, so the family is nested and split conformal applies. Values are made
    non-decreasing towards the root (a parent's probability is the sum of its children's; rounding
    could break that by an ulp) and the root's is 1.

    Parameters
    ----------
    hierarchy : the class tree.
    node_probs : (n_samples, n_nodes) node probabilities.

    Returns
    -------
    ``DecisionPaths`` with rule ``"top_down"``, (n_samples, max_depth + 1) tables.

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> p = np.array([[0.3, 0.25, 0.35, 0.1, 0.55, 0.45, 1.0]])   # argmax leaf 2, but node 4 > node 5
    >>> paths = top_down_paths(h, p)
    >>> paths.nodes.tolist(), paths.values.round(2).tolist()
    ([[0, 4, 6]], [[0.3, 0.55, 1.0]])
    """
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    n = probs.shape[0]
    parent = hierarchy.parent
    internal = np.flatnonzero(np.bincount(parent[parent >= 0], minlength=hierarchy.n_nodes) > 0)
    kids = np.argsort(parent, kind="stable")
    kids = kids[parent[kids] >= 0]  # children grouped by parent, parents ascending
    starts = np.searchsorted(parent[kids], internal)
    slot = np.full(hierarchy.n_nodes, -1, dtype=np.int64)
    slot[internal] = np.arange(internal.size)
    width = hierarchy.max_depth + 1
    nodes = np.empty((n, width), dtype=np.int64)
    values = np.empty((n, width), dtype=probs.dtype if probs.dtype in (np.float32, np.float64) else np.float64)
    chunk = rows_per_chunk(max(1, kids.size) * 16)
    for s in range(0, n, chunk):
        block = probs[s: s + chunk]
        best = _segment_argmax(block, kids, starts)  # most probable child of each internal node (first on ties)
        rows = np.arange(block.shape[0])
        path = np.empty((block.shape[0], width), dtype=np.int64)
        path[:, 0] = hierarchy.root
        for d in range(1, width):
            here = path[:, d - 1]
            is_leaf = slot[here] < 0
            path[:, d] = np.where(is_leaf, here, best[rows, np.maximum(slot[here], 0)])
        deep_first = path[:, ::-1]
        vals = np.minimum(block[rows[:, None], deep_first], 1.0)
        vals[:, -1] = 1.0
        nodes[s: s + chunk] = deep_first
        values[s: s + chunk] = np.maximum.accumulate(vals, axis=1)
    lengths = hierarchy.depth[nodes[:, 0]] + 1
    # rows shorter than the deepest are padded at the front with their leaf: move the padding to the end
    pad = width - lengths
    cols = np.minimum(np.arange(width)[None, :] + pad[:, None], width - 1)
    return DecisionPaths(TOP_DOWN, np.take_along_axis(nodes, cols, axis=1), np.take_along_axis(values, cols, axis=1),
                         lengths)


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
