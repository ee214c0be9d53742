"""Where in the tree: per-node landing counts of a rule's predictions at θ, the node budget of a
sunburst/icicle at any scale, the LCA depth of wrong predictions, and per-superclass RC curves.

Everything works from the decision paths (``core.rules.DecisionPaths``, n × records) and the
labels: per-node tallies are ``np.bincount`` over nodes and one bottom-up pass over the tree, so
memory is O(n_samples + n_nodes), never samples × nodes (iNat21: 100,000 × 12,386).

Goren, Galil & El-Yaniv, NeurIPS 2024 (the rules, hierarchical correctness, RC curves); Bertinetto
et al., "Making Better Mistakes", CVPR 2020 (mistake severity as the depth of the LCA).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.curves import RCCurve, rc_curve_from_paths
from ..core.hierarchical_prf import mistake_lca_depth_counts
from ..core.hierarchy import Hierarchy
from ..core.risk import Loss, hierarchical_correctness
from ..core.rules import RULES, DecisionPaths
from ..core.validation import check_theta, quote

__all__ = [
    "LANDING_COLUMNS", "MAX_WEDGES", "landing_counts", "mistake_severity_histogram", "samples_at_node",
    "subset_paths", "superclass_groups", "superclass_rc_curves", "wedge_nodes",
]

#: A sunburst stays responsive with a few thousand wedges; iNat21's tree has 12,386 nodes.
MAX_WEDGES = 1500
LANDING_COLUMNS = ("node", "name", "parent", "depth", "samples", "stops", "stops_correct", "stops_in_subtree",
                   "stopped_here", "accuracy_here")


def _subtree_sums(h: Hierarchy, per_node: np.ndarray) -> np.ndarray:
    """Each node's value plus all its descendants' (one pass, deepest nodes first)."""
    out = np.asarray(per_node, dtype=np.float64).copy()
    parent = h.parent
    for v in h.topological_order[::-1]:
        if parent[v] >= 0:
            out[parent[v]] += out[v]
    return out


def landing_counts(h: Hierarchy, paths: DecisionPaths, labels: np.ndarray, theta: float) -> pd.DataFrame:
    """Where ``paths``' rule lands at θ, tallied per node.

    Parameters
    ----------
    h : the tree.
    paths : one rule's decision paths, (n_samples, n_records).
    labels : (n_samples,) true leaf indices.
    theta : the confidence threshold.

    Returns
    -------
    DataFrame, one row per node (index = node index), ``LANDING_COLUMNS``:
    ``samples`` (samples whose true leaf is under the node: the sunburst's size), ``stops``
    (predictions landing exactly at the node), ``stops_correct`` (of those, correct: the node is
    an ancestor of the true leaf), ``stops_in_subtree``, ``stopped_here`` = stops_correct / samples
    (of the node's own samples, the share whose prediction stops exactly here: at the root the
    rejection rate, at a leaf its exact accuracy) and ``accuracy_here`` = stops_correct / stops
    (NaN where nothing lands).
    """
    theta = check_theta(theta)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (paths.n_samples,):
        raise ValueError(f"labels must have shape ({paths.n_samples},), got {labels.shape}")
    pred = paths.predict(theta)[0]
    correct = hierarchical_correctness(h, pred, labels)
    n_nodes = h.n_nodes
    stops = np.bincount(pred, minlength=n_nodes).astype(np.float64)
    stops_correct = np.bincount(pred, weights=correct.astype(np.float64), minlength=n_nodes)
    leaf_samples = np.zeros(n_nodes)
    leaf_samples[: h.n_leaves] = np.bincount(labels, minlength=h.n_leaves)
    samples = _subtree_sums(h, leaf_samples)
    with np.errstate(divide="ignore", invalid="ignore"):
        stopped_here = np.where(samples > 0, stops_correct / samples, np.nan)
        accuracy_here = np.where(stops > 0, stops_correct / stops, np.nan)
    return pd.DataFrame({
        "node": list(h.node_ids), "name": list(h.names), "parent": h.parent.astype(np.int64),
        "depth": h.depth, "samples": samples.astype(np.int64), "stops": stops.astype(np.int64),
        "stops_correct": stops_correct.astype(np.int64),
        "stops_in_subtree": _subtree_sums(h, stops).astype(np.int64),
        "stopped_here": stopped_here, "accuracy_here": accuracy_here,
    })


def wedge_nodes(h: Hierarchy, samples: np.ndarray, focus: int | None = None,
                max_wedges: int = MAX_WEDGES) -> np.ndarray:
    """The nodes a sunburst/icicle rooted at ``focus`` draws: whole levels below it, breadth
    first, while they fit in ``max_wedges``; of the first level that does not fit, its largest
    nodes (by ``samples``) until the budget is spent. Nodes with no samples are left out (they
    would have no area); the rest of a parent's area then stands for what is not drawn.

    Returns node indices, focus first, each after its parent.

    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)
    >>> wedge_nodes(h, np.array([1, 2, 3, 0, 3, 3, 6]), max_wedges=4).tolist()
    [6, 4, 5, 2]
    """
    if max_wedges < 1:
        raise ValueError(f"max_wedges must be at least 1, got {max_wedges}")
    focus = h.root if focus is None else int(focus)
    if not 0 <= focus < h.n_nodes:
        raise ValueError(f"node {quote(focus)} is not in the tree")
    samples = np.asarray(samples)
    chosen = [focus]
    level = np.asarray([focus])
    while level.size and len(chosen) < max_wedges:
        kids = np.concatenate([h.children[v] for v in level]) if level.size else np.empty(0, np.int64)
        kids = kids[samples[kids] > 0]
        room = max_wedges - len(chosen)
        if kids.size > room:
            kids = kids[np.sort(np.argsort(-samples[kids], kind="stable")[:room])]  # largest, in tree order
            chosen.extend(kids.tolist())
            break
        chosen.extend(kids.tolist())
        level = kids
    return np.asarray(chosen, dtype=np.int64)


def samples_at_node(h: Hierarchy, paths: DecisionPaths, labels: np.ndarray, theta: float, node: int, *,
                    where: str = "stops") -> np.ndarray:
    """Positions of the samples behind ``node`` at θ: ``where="stops"`` — the rule's prediction
    lands exactly at the node; ``"subtree"`` — it lands at the node or below; ``"true"`` — the
    true leaf is under the node. Ascending positions."""
    theta = check_theta(theta)
    node = int(node)
    if not 0 <= node < h.n_nodes:
        raise ValueError(f"node {quote(node)} is not in the tree")
    if where == "stops":
        return np.flatnonzero(paths.predict(theta)[0] == node)
    if where == "subtree":
        return np.flatnonzero(h.is_ancestor(node, paths.predict(theta)[0]))
    if where == "true":
        return np.flatnonzero(h.is_ancestor(node, np.asarray(labels, dtype=np.int64)))
    raise ValueError(f"where must be 'stops', 'subtree' or 'true', got {quote(where)}")


def mistake_severity_histogram(h: Hierarchy, paths: Mapping[str, DecisionPaths], labels: np.ndarray,
                               theta: float, rules: Sequence[str] = RULES) -> pd.DataFrame:
    """How bad each rule's mistakes are at θ: the depth of the lowest common ancestor of a wrong
    prediction and the true leaf (0 = they meet only at the root, the worst; deeper = a nearer
    miss), per rule (Bertinetto et al., CVPR 2020, "Making Better Mistakes").

    A prediction is wrong when the predicted node is not the true leaf or one of its ancestors
    (hierarchical correctness; the root, i.e. rejection, is never wrong).

    Returns
    -------
    DataFrame with one row per rule × LCA depth 0 … ``h.max_depth - 1``: ``rule``, ``lca_depth``,
    ``mistakes`` (count), ``share`` (of the rule's mistakes; NaN when it makes none) and
    ``per_sample`` (of all samples).
    """
    theta = check_theta(theta)
    labels = np.asarray(labels, dtype=np.int64)
    depths = np.arange(max(h.max_depth, 1))
    rows = []
    for rule in rules:
        if rule not in paths:
            raise ValueError(f"no decision paths for rule {quote(rule)}")
        pred = paths[rule].predict(theta)[0]
        counts = mistake_lca_depth_counts(h, pred, labels)[: depths.size]
        total = int(counts.sum())
        for d in depths:
            rows.append({"rule": rule, "lca_depth": int(d), "mistakes": int(counts[d]),
                         "share": counts[d] / total if total else float("nan"),
                         "per_sample": counts[d] / max(labels.size, 1)})
    return pd.DataFrame(rows, columns=["rule", "lca_depth", "mistakes", "share", "per_sample"])


def superclass_groups(h: Hierarchy, labels: np.ndarray, depth: int) -> np.ndarray:
    """Each sample's superclass at ``depth``: the true leaf's ancestor there (the leaf itself when
    it is shallower). Shape (n_samples,), node indices."""
    labels = np.asarray(labels, dtype=np.int64)
    if not 0 <= depth <= h.max_depth:
        raise ValueError(f"depth must lie between 0 and {h.max_depth}, got {quote(depth)}")
    return h.ancestor_at_depth(labels, np.minimum(h.depth[labels], depth))


def subset_paths(paths: DecisionPaths, positions: np.ndarray) -> DecisionPaths:
    """The decision paths of the samples at ``positions`` (rows taken, records unchanged)."""
    return DecisionPaths(paths.rule, paths.nodes[positions], paths.values[positions], paths.lengths[positions])


def superclass_rc_curves(h: Hierarchy, paths: DecisionPaths, labels: np.ndarray, depth: int, *,
                         loss: Loss = "01", groups: Sequence[int] | None = None, top: int = 6,
                         min_samples: int = 10) -> dict[int, RCCurve]:
    """One exact RC curve of ``paths``' rule per superclass at ``depth``, each on that
    superclass's samples only (e.g. "dog" vs "vehicle" at WordNet depth 4-5).

    groups : the superclass nodes to draw (default: the ``top`` largest with at least
        ``min_samples`` samples), in that order.
    Returns node → ``RCCurve`` (the superclass's own samples).
    """
    labels = np.asarray(labels, dtype=np.int64)
    sup = superclass_groups(h, labels, depth)
    sizes = np.bincount(sup, minlength=h.n_nodes)
    if groups is None:
        order = np.argsort(-sizes, kind="stable")
        groups = [int(v) for v in order[:top] if sizes[v] >= min_samples]
    out = {}
    for g in groups:
        rows = np.flatnonzero(sup == int(g))
        if rows.size:
            out[int(g)] = rc_curve_from_paths(h, subset_paths(paths, rows), labels[rows], loss)
    return out
