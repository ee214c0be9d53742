"""A HiClass classifier's tree and per-level probabilities as the toolkit's ``Hierarchy`` and node scores.

HiClass (Miranda et al., JMLR 2023) trains local classifiers per node, per parent node or per level
and, with ``return_all_probabilities=True``, ``predict_proba`` returns one (n, n_classes_at_level)
array per level. ``hiclass_hierarchy`` turns the fitted classifier's graph into a ``Hierarchy``
(node ids: HiClass's own node names, the path joined by its separator; names: the last step);
``hiclass_node_scores`` places each level's probabilities at its nodes (the root scores 1), the
(n, n_nodes) scores every rule, curve and guarantee of the toolkit reads (``hierarchical_rc_curve``,
``GuaranteeData.from_arrays``); ``hiclass_labels`` turns HiClass's 2-D label rows into leaf indices.
Scores need not add up the tree: a rule stops at the first node on its candidate list whose score
is ≥ θ, whatever the local classifiers say. For leaf probabilities (every logits path of the
toolkit), ``hiclass_leaf_probabilities`` takes each leaf's score and renormalises the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.hierarchy import Hierarchy
from ..core.validation import quote

__all__ = ["hiclass_hierarchy", "hiclass_labels", "hiclass_leaf_probabilities", "hiclass_node_scores"]


def _fitted(classifier: Any) -> Any:
    for attr in ("hierarchy_", "root_", "separator_", "global_classes_"):
        if not hasattr(classifier, attr):
            raise ValueError(f"{type(classifier).__name__} is not a fitted HiClass classifier (no {attr}): "
                             "fit it first")
    return classifier


def hiclass_hierarchy(classifier: Any) -> Hierarchy:
    """The fitted HiClass classifier's tree as a ``Hierarchy``.

    Leaves are the nodes without children, level by level and in the order of HiClass's
    ``global_classes_``; node ids are HiClass's node names, names the last step of each path.
    """
    c = _fitted(classifier)
    parent_of = {str(child): str(par) for par, child in c.hierarchy_.edges}
    has_child = set(parent_of.values())
    leaves = [str(node) for level in c.global_classes_ for node in level.tolist()
              if str(node) in parent_of and str(node) not in has_child]  # HiClass pads short paths with ""-nodes
    names = {node: node.split(c.separator_)[-1] for node in [*parent_of, str(c.root_)]}
    names[str(c.root_)] = "root"
    return Hierarchy.from_parent_map(parent_of, leaves, names, collapse_single_child=False)


def hiclass_node_scores(classifier: Any, X: Any, hierarchy: Hierarchy | None = None) -> np.ndarray:
    """(n, n_nodes) node scores: each node's probability at its level (``predict_proba`` with
    ``return_all_probabilities=True``), 1 at the root, 0 where a level has no column for a node.

    Parameters
    ----------
    classifier : a fitted HiClass classifier with ``return_all_probabilities=True``.
    X : its input.
    hierarchy : ``hiclass_hierarchy(classifier)`` (built when None).
    """
    c = _fitted(classifier)
    h = hiclass_hierarchy(c) if hierarchy is None else hierarchy
    levels = c.predict_proba(X)
    if not isinstance(levels, list):
        raise ValueError("predict_proba gave one level: build the HiClass classifier with "
                         "return_all_probabilities=True to get every level's probabilities")
    n = levels[0].shape[0]
    scores = np.zeros((n, h.n_nodes))
    scores[:, h.root] = 1.0
    index = {node: i for i, node in enumerate(h.node_ids)}
    # predict_proba's columns at level ℓ are ``classes_[ℓ]``: local names (the last step), merged
    # over parents; a node is found from its level and local name, which must then be unique
    for level, probs in enumerate(levels):
        probs = np.asarray(probs, dtype=np.float64)
        local = [str(v) for v in c.classes_[level].tolist()]
        if probs.shape != (n, len(local)):
            raise ValueError(f"level {level}'s probabilities have shape {probs.shape}, expected ({n}, {len(local)})")
        nodes: dict[str, list[str]] = {}
        for node in map(str, c.global_classes_[level].tolist()):
            if node in index:  # not HiClass's padding of shorter paths
                nodes.setdefault(node.split(c.separator_)[-1], []).append(node)
        for j, name in enumerate(local):
            found = nodes.get(name, [])
            if len(found) > 1:
                raise ValueError(f"HiClass merges the probabilities of the {len(found)} nodes named {quote(name)} at "
                                 f"level {level}: give them distinct names to score them apart")
            if found:
                scores[:, index[found[0]]] = probs[:, j]
    return scores


def hiclass_leaf_probabilities(node_scores: np.ndarray, hierarchy: Hierarchy) -> np.ndarray:
    """(n, n_leaves) leaf probabilities: the leaves' scores, each row divided by its sum (a row
    with all leaves at 0 becomes uniform)."""
    leaf = np.asarray(node_scores, dtype=np.float64)[:, : hierarchy.n_leaves]
    total = leaf.sum(axis=1, keepdims=True)
    return np.where(total > 0, leaf / np.where(total > 0, total, 1.0), 1.0 / hierarchy.n_leaves)


def hiclass_labels(classifier: Any, y: Any, hierarchy: Hierarchy | None = None) -> np.ndarray:
    """(n,) leaf index of each of HiClass's label rows ((n, n_levels) strings, ``""`` padding the
    shorter paths); a path that is not a leaf of the tree raises one line."""
    c = _fitted(classifier)
    h = hiclass_hierarchy(c) if hierarchy is None else hierarchy
    rows = np.asarray(y, dtype=object)
    if rows.ndim == 1:
        rows = rows[:, None]
    index = {node: i for i, node in enumerate(h.node_ids[: h.n_leaves])}
    out = np.empty(rows.shape[0], dtype=np.int64)
    for k, row in enumerate(rows.tolist()):
        path = c.separator_.join(str(v) for v in row if v is not None and str(v) != "")
        if path not in index:
            raise ValueError(f"label {quote(' / '.join(str(v) for v in row if str(v)))} (row {k}) is not a leaf "
                             "of the classifier's tree")
        out[k] = index[path]
    return out
