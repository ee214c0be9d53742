"""Hierarchical scores of a predicted node against a true leaf, and their expectations per node.

Three node-to-leaf metrics that metric-optimal decoding (``metric_rules``) maximises in
expectation (Plaud et al., ICML 2025, "Hierarchical decision rules", §3–4):

* ``hf``: hierarchical Fβ (Kiritchenko et al., 2006). Node sets are the ancestors without the
  root, so |V̂| = depth(v̂), |Y| = depth(y), |V̂ ∩ Y| = depth(LCA); hFβ = (1 + β²)|V̂ ∩ Y| /
  (β²|Y| + |V̂|), and 0 for the root. β < 1 favours precision, β > 1 recall. (hierulz, Plaud
  et al.'s code, counts the root too: every depth + 1, i.e. this on the tree with one more
  node above the root.)
* ``severity``: mistake severity, the shortest-path length between v̂ and y in the tree
  (Bertinetto et al., CVPR 2020): depth(v̂) + depth(y) − 2 depth(LCA). A cost: lower is better.
* ``information``: the information-based similarity 2 I(LCA) / (I(v̂) + I(y)) with the
  uniform-leaf information I(v) = log₂(|L| / |L(v)|) (Lin, 1998; Zhao et al., ICCV 2017; the
  information of Deng et al., CVPR 2012 and Valmadre, NeurIPS 2022).

Every one of them depends on the LCA only through a sum over the predicted node's ancestors u of
w(u)·1[y ∈ L(u)], so its expectation under the node probabilities P(u) is a running sum down the
tree: ``expected_scores`` costs O(n_nodes) per sample (one pass per distinct leaf depth for hFβ),
never the O(n_nodes × n_leaves) of a cost-matrix product.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .hierarchy import Hierarchy
from .validation import check_node_probs, quote

Metric = Literal["hf", "severity", "information"]
METRICS: tuple[Metric, ...] = ("hf", "severity", "information")


def check_metric(metric: str) -> Metric:
    """``metric`` if it is one of ``METRICS``, else one clear ValueError."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {quote(metric)}; choose one of {', '.join(METRICS)}")
    return metric  # type: ignore[return-value]


def check_beta(beta: float) -> float:
    """β of hFβ: a finite number > 0, else one clear ValueError."""
    if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, (int, float, np.integer, np.floating)) \
            or not np.isfinite(beta) or beta <= 0:
        raise ValueError(f"beta must be a finite number > 0, got {quote(beta)}")
    return float(beta)


def information(hierarchy: Hierarchy) -> np.ndarray:
    """Uniform-leaf information I(v) = log₂(|L| / |L(v)|): 0 at the root. Shape (n_nodes,)."""
    return np.log2(hierarchy.n_leaves / hierarchy.leaf_count)


def node_scores(hierarchy: Hierarchy, nodes: np.ndarray, leaves: np.ndarray, metric: Metric = "hf", *,
                beta: float = 1.0) -> np.ndarray:
    """Score of predicted ``nodes`` against true ``leaves`` (broadcast together), elementwise.

    Returns float64 of the broadcast shape: hFβ and information in [0, 1] (higher is better),
    severity ≥ 0 (lower is better).

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)   # two pairs under a root
    >>> node_scores(h, [0, 4, 6], 1, "hf").tolist()           # a sibling, the parent, the root
    [0.5, 0.6666666666666666, 0.0]
    >>> node_scores(h, [0, 4, 2], 1, "severity").tolist()
    [2.0, 1.0, 4.0]
    """
    check_metric(metric)
    nodes, leaves = np.broadcast_arrays(np.asarray(nodes, dtype=np.int64), np.asarray(leaves, dtype=np.int64))
    lca = hierarchy.lca(nodes, leaves)
    if metric == "severity":
        d = hierarchy.depth
        return (d[nodes] + d[leaves] - 2 * d[lca]).astype(np.float64)
    if metric == "hf":
        b2 = check_beta(beta) ** 2
        d = hierarchy.depth.astype(np.float64)
        denom = b2 * d[leaves] + d[nodes]
        return np.divide((1 + b2) * d[lca], denom, out=np.zeros(nodes.shape), where=denom > 0)
    info = information(hierarchy)
    denom = info[nodes] + info[leaves]
    return np.divide(2 * info[lca], denom, out=np.zeros(nodes.shape), where=denom > 0)


def _down_sums(hierarchy: Hierarchy, weighted: np.ndarray) -> np.ndarray:
    """S(v) = Σ over v's ancestors u (v included, the root excluded) of ``weighted[:, u]``.

    One pass per depth level, each adding the parents' sums: O(n_nodes) per row. Worked in a
    node-major copy with the nodes sorted by depth, so each level is a block of contiguous rows
    and the parents' sums a row gather (~3× faster than gathering columns).
    """
    key = ("depth_order",)
    def compute():
        order = np.argsort(hierarchy.depth, kind="stable")
        pos = np.empty_like(order)
        pos[order] = np.arange(order.size)
        bounds = np.searchsorted(hierarchy.depth[order], np.arange(hierarchy.max_depth + 2))
        return (order, pos, bounds, pos[np.maximum(hierarchy.parent[order], 0)])
    order, pos, bounds, parent_pos = hierarchy.memo(key, compute)
    w = np.take(weighted.T, order, axis=0)  # (n_nodes, n) in depth order
    out = np.zeros_like(w)
    for d in range(1, hierarchy.max_depth + 1):
        a, b = bounds[d], bounds[d + 1]
        out[a:b] = out[parent_pos[a:b]] + w[a:b]
    return np.take(out, pos, axis=0).T


def expected_scores(hierarchy: Hierarchy, node_probs: np.ndarray, metric: Metric = "hf", *,
                    beta: float = 1.0) -> np.ndarray:
    """E_{y ~ p}[score(v, y)] of every node v, oriented so that higher is better.

    Parameters
    ----------
    node_probs : (n_samples, n_nodes) node probabilities (``probabilities.node_probabilities``).
    metric : ``"hf"`` (with ``beta``), ``"severity"`` or ``"information"`` (module docstring).

    Returns
    -------
    (n_samples, n_nodes) float64: the expected hFβ or information score, or for severity the
    negated expected distance up to a per-sample constant, −(depth(v) − 2 Σ_{u ∈ anc(v)} P(u)),
    which has the same argmax (E[depth(y)] does not depend on v).

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)
    >>> p = np.array([[0.4, 0.3, 0.2, 0.1, 0.7, 0.3, 1.0]])
    >>> expected_scores(h, p, "severity").round(2).tolist()   # the pair node 4 (P = 0.7) is best
    [[0.2, 0.0, -1.0, -1.2, 0.4, -0.4, 0.0]]
    """
    check_metric(metric)
    probs = check_node_probs(node_probs, hierarchy.n_nodes).astype(np.float64, copy=False)
    depth = hierarchy.depth.astype(np.float64)
    if metric == "severity":
        return 2.0 * _down_sums(hierarchy, probs) - depth
    if metric == "information":
        info = information(hierarchy)
        gain = info - np.where(hierarchy.parent >= 0, info[np.maximum(hierarchy.parent, 0)], 0.0)
        lca_info = _down_sums(hierarchy, probs * gain)
        # All leaves carry the same information log₂|L|, so the denominator is per node.
        denom = info + np.log2(hierarchy.n_leaves)
        return np.divide(2.0 * lca_info, denom, out=np.zeros_like(lca_info), where=denom > 0)
    b2 = check_beta(beta) ** 2
    # Σ_y p_y c(v, y) / (β² d_y + d_v): split the leaves by depth so each class has one d_y.
    leaf_depth = hierarchy.depth[: hierarchy.n_leaves]
    out = np.zeros(probs.shape)
    single = np.unique(leaf_depth).size == 1
    for dy in np.unique(leaf_depth):
        if single:
            class_probs = probs
        else:
            mask = (leaf_depth == dy).astype(np.float64)
            class_probs = np.asarray((hierarchy.leaf_matrix @ (probs[:, : hierarchy.n_leaves] * mask).T).T)
        out += _down_sums(hierarchy, class_probs) / (b2 * dy + depth)
    out *= 1.0 + b2
    out[:, depth == 0] = 0.0
    return out
