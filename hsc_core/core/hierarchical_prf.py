"""Hierarchical precision, recall and F (Kiritchenko et al., 2006) and the mistake LCA-depth counts.

Node sets are a node's ancestors including itself and excluding the root, as HiClass
(``hiclass.metrics``) counts them: for a prediction v̂ and a true leaf y, |V̂ ∩ Y| = depth(LCA),
|V̂| = depth(v̂), |Y| = depth(y). ``micro`` sums the three counts over samples before dividing;
``macro`` averages the per-sample ratios. A root prediction claims nothing: precision 1
(vacuous) and recall 0 per sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from .hierarchy import Hierarchy
from .node_scores import check_beta
from .validation import quote

Average = Literal["micro", "macro"]


def as_node_indices(hierarchy: Hierarchy, nodes: Sequence | np.ndarray, what: str = "nodes") -> np.ndarray:
    """Node indices from indices or node ids (label names), one clear ValueError for an unknown one."""
    arr = np.asarray(nodes)
    if arr.dtype.kind in "iu":
        idx = arr.astype(np.int64)
    elif arr.dtype.kind in "UO" or arr.size == 0:
        idx = np.empty(arr.shape, dtype=np.int64)
        flat = idx.reshape(-1)
        for k, name in enumerate(arr.reshape(-1).tolist()):
            try:
                flat[k] = hierarchy.index_of(str(name))
            except (KeyError, ValueError):
                raise ValueError(f"unknown {what} label {quote(name)}") from None
    else:
        raise ValueError(f"{what} must be node indices or node ids, got dtype {arr.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= hierarchy.n_nodes):
        raise ValueError(f"{what} must be node indices in [0, {hierarchy.n_nodes})")
    return idx


def hierarchical_prf(hierarchy: Hierarchy, true: Sequence | np.ndarray, predicted: Sequence | np.ndarray, *,
                     average: Average = "micro", beta: float = 1.0) -> tuple[float, float, float]:
    """(hP, hR, hFβ) of predicted nodes against true leaves (indices or node ids).

    Parameters
    ----------
    true : (n,) true leaves.
    predicted : (n,) predicted nodes (any node: a rule's output).
    average : ``"micro"`` (pooled counts) or ``"macro"`` (mean of per-sample ratios), as HiClass.
    beta : β of Fβ (> 0).

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4, node_ids=list("abcdXYr"))
    >>> hierarchical_prf(h, ["a", "a"], ["b", "X"])     # overlaps 1 of 2 and 1 of 1
    (0.6666666666666666, 0.5, 0.5714285714285715)
    """
    if average not in ("micro", "macro"):
        raise ValueError(f"unknown average {quote(average)}; choose micro or macro")
    b2 = check_beta(beta) ** 2
    y = as_node_indices(hierarchy, true, "true")
    v = as_node_indices(hierarchy, predicted, "predicted")
    if y.shape != v.shape or y.ndim != 1 or y.size == 0:
        raise ValueError("true and predicted must be non-empty 1-D sequences of equal length")
    d = hierarchy.depth
    both = d[hierarchy.lca(v, y)].astype(np.float64)
    pred, gold = d[v].astype(np.float64), d[y].astype(np.float64)
    if average == "micro":
        p = both.sum() / pred.sum() if pred.sum() > 0 else 1.0
        r = both.sum() / gold.sum() if gold.sum() > 0 else 1.0
        f = (1 + b2) * p * r / (b2 * p + r) if p + r > 0 else 0.0
        return float(p), float(r), float(f)
    p_i = np.divide(both, pred, out=np.ones_like(both), where=pred > 0)
    r_i = np.divide(both, gold, out=np.ones_like(both), where=gold > 0)
    denom = b2 * p_i + r_i
    f_i = np.divide((1 + b2) * p_i * r_i, denom, out=np.zeros_like(both), where=denom > 0)
    return float(p_i.mean()), float(r_i.mean()), float(f_i.mean())


def mistake_lca_depth_counts(hierarchy: Hierarchy, predicted: Sequence | np.ndarray,
                               true: Sequence | np.ndarray) -> np.ndarray:
    """Counts of wrong predictions by the depth of their LCA with the true leaf.

    A prediction is wrong when it is not the true leaf or one of its ancestors (the paper's
    hierarchical correctness). Entry k counts the wrong predictions whose LCA with the truth is at
    depth k (0: they part at the root — the most severe; deeper: milder). Shape (max_depth + 1,),
    int64. Nodes may be indices or node ids. The one count behind
    ``evaluation.diagnostics.mistake_severity_histogram`` (per rule, as a table) and
    ``EvaluationSet.severity_histogram``.

    Examples
    --------
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)
    >>> mistake_lca_depth_counts(h, [1, 2, 4, 0], [0, 0, 0, 0]).tolist()   # sibling, far, right, right
    [1, 1, 0]
    """
    v = as_node_indices(hierarchy, predicted, "predicted")
    y = as_node_indices(hierarchy, true, "true")
    if y.shape != v.shape or y.ndim != 1:
        raise ValueError("true and predicted must be 1-D sequences of equal length")
    wrong = ~hierarchy.is_ancestor(v, y)
    lca_depth = hierarchy.depth[hierarchy.lca(v[wrong], y[wrong])]
    return np.bincount(lca_depth, minlength=hierarchy.max_depth + 1).astype(np.int64)
