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

Precision: records keep the node probabilities' precision (float32 for float16/32 input, else
float64) and θ is rounded to that precision before every comparison (``theta_in_precision``), as
the authors' torch code compares a float32 tensor with a Python float. So a probability equal to
float32(0.7) is accepted at θ = 0.7 by ``predict``, ``RCCurve.at`` and both curves alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from .hierarchy import Hierarchy
from .rule_registry import get_rule, rule_names
from .validation import check_node_probs, check_theta, check_theta_array, quote

Rule = Literal["selective", "climbing", "jumping", "max_coverage"]
#: The paper's four, from the one registry of rules (``rule_registry``).
RULES: tuple[Rule, ...] = cast("tuple[Rule, ...]", rule_names(paper=True))
#: Display name of every listed rule, the paper's four first (``rule_registry``; ``rule_label``
#: also names hf<β>), so every table, legend and export names a rule alike.
RULE_LABELS: dict[str, str] = {rule: get_rule(rule).label for rule in rule_names()}


@dataclass(frozen=True)
class DecisionPaths:
    """Per-sample records of one rule.

    nodes, values: (n_samples, n_records) — the nodes a rule can stop at, in order, and their
    probabilities (strictly increasing along a row; the last real record is the root with 1.0).
    Rows shorter than ``n_records`` are padded by repeating their last record. ``values`` keep
    the node probabilities' precision (float32 or float64), and θ is rounded to it to compare.
    lengths: (n_samples,) number of real records per row.

    The table is dense in the depth: a rule can stop at up to max_depth + 1 nodes of a path
    (Climbing on a caterpillar stops at every one), so ``n_records`` ≤ ``hierarchy.max_depth + 1``,
    which ``hierarchy.LIMITS.max_depth`` bounds.
    """

    rule: str
    nodes: np.ndarray
    values: np.ndarray
    lengths: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.nodes.shape[0]

    @property
    def precision(self) -> str:
        """``"float32"`` or ``"float64"``: the dtype of ``values``, in which θ is compared."""
        return self.values.dtype.name

    def record_index(self, theta: float) -> np.ndarray:
        """Index of the chosen record at θ: the first with value ≥ θ. Shape (n_samples,)."""
        return record_index(self.values, theta)

    def predict(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, confidences) chosen at θ, each of shape (n_samples,)."""
        k = self.record_index(theta)[:, None]
        return (np.take_along_axis(self.nodes, k, axis=1)[:, 0],
                np.take_along_axis(self.values, k, axis=1)[:, 0])


def value_dtype(dtype: np.dtype) -> type:
    """Precision of records for node probabilities of ``dtype``: float32 for float16/32, else float64."""
    return np.float32 if np.dtype(dtype) in (np.float16, np.float32) else np.float64


def theta_in_precision(theta: float, dtype: np.dtype | type | str = np.float64) -> float:
    """θ checked to lie in [0, 1] and rounded to ``dtype`` (nearest, as a tensor comparison casts it).

    Every θ comparison in the library goes through this, so ``predict``, ``RCCurve.at``, the
    exact curve and the ``dec`` grid curve agree for every θ.
    """
    return float(np.dtype(dtype).type(check_theta(theta)))


def below_theta(values: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
    """Which values are below θ, compared in the values' own precision (θ rounded to it, as a
    torch tensor comparison casts a Python float): the library's one θ comparison.

    ``record_index``, ``DecisionPaths.predict``, the Explorer tree's picks and its "below θ"
    marks all go through it, so none of them can disagree at a θ equal to a probability.

    Parameters
    ----------
    values : float32 or float64 array of any shape (other dtypes are compared in float64).
    theta : a θ in [0, 1], or an array of them.

    Returns
    -------
    Boolean array of shape ``np.shape(theta) + values.shape``.

    Examples
    --------
    >>> v = np.array([0.7, 0.9], dtype=np.float32)   # float32(0.7) < 0.7 in float64
    >>> below_theta(v, 0.7).tolist(), below_theta(v, [0.8, 1.0]).tolist()
    ([False, False], [[True, False], [True, True]])
    """
    vals = np.asarray(values)
    dtype = vals.dtype if vals.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    th = check_theta_array(theta).astype(dtype)  # nearest value in the values' precision
    return vals.astype(dtype, copy=False) < th.reshape(th.shape + (1,) * vals.ndim)


def record_index(values: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
    """Index of the record a rule picks at θ: the first whose value is ≥ θ (``below_theta``).

    Parameters
    ----------
    values : (..., n_records) record values, increasing along the last axis.
    theta : a θ in [0, 1], or an array of them.

    Returns
    -------
    Integer indices of shape ``np.shape(theta) + values.shape[:-1]``.

    Examples
    --------
    >>> v = np.array([0.7, 0.9, 1.0], dtype=np.float32)
    >>> int(record_index(v, 0.7)), int(record_index(v, 0.71)), record_index(v, [0.0, 0.95]).tolist()
    (0, 1, [0, 2])
    """
    return below_theta(values, theta).sum(axis=-1)


def concat_decision_paths(parts: list[DecisionPaths]) -> DecisionPaths:
    """Stack per-chunk ``DecisionPaths`` of one rule row-wise, padding to the widest.

    Padding repeats each row's last record, exactly as ``decision_paths`` pads, so the result is
    identical to computing the paths on all rows at once.
    """
    if not parts:
        raise ValueError("no decision paths to concatenate")
    width = max(p.nodes.shape[1] for p in parts)

    def pad(a: np.ndarray) -> np.ndarray:
        if a.shape[1] == width:
            return a
        return np.concatenate([a, np.repeat(a[:, -1:], width - a.shape[1], axis=1)], axis=1)

    return DecisionPaths(
        rule=parts[0].rule,
        nodes=np.concatenate([pad(p.nodes) for p in parts]),
        values=np.concatenate([pad(p.values) for p in parts]),
        lengths=np.concatenate([p.lengths for p in parts]),
    )


def nonzero_rows_cols(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a 2-D boolean mask, (rows, cols) in the same (row-major) order, by one
    flat scan and a divmod: about ten times faster than numpy's 2-D ``nonzero`` on a chunk of
    node probabilities (an iNat21-size chunk: 5 ms, not 50)."""
    rows, cols = np.divmod(np.flatnonzero(mask), max(mask.shape[1], 1))
    return rows, cols


def _segment_argmax(probs: np.ndarray, columns: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per row and per group, the column with the highest probability (lowest index on ties).

    columns: the groups' columns concatenated, each group sorted ascending; starts: where each
    group begins. One gather and two ``reduceat`` passes replace one argmax pass per group
    (Max-Coverage has ~100 coverage levels at iNat21 size). Shape (n_samples, n_groups).
    """
    block = np.take(probs, columns, axis=1)
    best = np.maximum.reduceat(block, starts, axis=1)
    if not np.isfinite(best).all():
        raise ValueError("node_probs contain NaN or inf")
    sizes = np.diff(np.r_[starts, columns.size])
    # First position in each group that reaches the group's maximum: groups are sorted, so it is
    # the lowest node index, as torch's argmax / max pick the first index.
    position = np.where(block == np.repeat(best, sizes, axis=1), np.arange(columns.size, dtype=np.int32),
                        np.int32(columns.size))
    return columns[np.minimum.reduceat(position, starts, axis=1)]


def _rule_groups(hierarchy: Hierarchy, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """(columns, starts) of Jumping's height layers or Max-Coverage's coverage levels, cached."""
    key = ("rule_groups", rule)
    def compute():
        internal = np.arange(hierarchy.n_leaves, hierarchy.n_nodes)
        if rule == "jumping":  # height layers h = 1 … R, lowest first
            level = hierarchy.max_depth - hierarchy.depth[internal]
        else:  # coverage levels from the leaves up: fewest leaves first
            level = hierarchy.leaf_count[internal]
        order = np.lexsort((internal, level))  # by level, then node index within a level
        columns, level = internal[order], level[order]
        starts = np.flatnonzero(np.r_[True, level[1:] != level[:-1]]) if columns.size else np.zeros(0, np.int64)
        return (columns, starts)
    return hierarchy.memo(key, compute)


def argmax_leaf(hierarchy: Hierarchy, node_probs: np.ndarray) -> np.ndarray:
    """Most probable leaf per sample (first index on ties, as torch). Shape (n_samples,)."""
    return node_probs[:, : hierarchy.n_leaves].argmax(axis=1)


def _candidates(hierarchy: Hierarchy, probs: np.ndarray, rule: str, leaf: np.ndarray) -> np.ndarray:
    """(n_samples, n_candidates) candidate node sequence of ``rule``.

    Jumping's layers and Max-Coverage's leaf level also hold other leaves, but none of them
    beats the argmax leaf (the first candidate), so they can never be chosen and are skipped.
    """
    n = probs.shape[0]
    if rule == "selective":
        return np.stack([leaf, np.full(n, hierarchy.root)], axis=1)
    if rule == "climbing":
        # The argmax leaves' paths, as wide as the deepest of them (at most max_depth + 1: the
        # one table dense in the depth, which LIMITS.max_depth bounds; depth < n_nodes, so it is
        # within the chunk's n_nodes-sized memory share).
        return hierarchy.paths_to_root(leaf)
    if rule not in ("jumping", "max_coverage"):
        raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(RULES)}")
    columns, starts = _rule_groups(hierarchy, rule)
    if not columns.size:  # a single-node tree
        return leaf[:, None]
    return np.concatenate([leaf[:, None], _segment_argmax(probs, columns, starts)], axis=1)


def _compress(cand: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep candidates that beat every earlier one, packed left and padded with the last."""
    n = cand.shape[0]
    is_record = np.ones(vals.shape, dtype=bool)
    is_record[:, 1:] = vals[:, 1:] > np.maximum.accumulate(vals, axis=1)[:, :-1]
    lengths = is_record.sum(axis=1)
    width = int(lengths.max())
    rows, cols = nonzero_rows_cols(is_record)
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
    # Kept in the probabilities' precision; θ is rounded to it when compared (module docstring).
    # As the authors' RC code, sums above 1 are clipped and the root is exactly 1.0. For float64
    # input, rounding to 12 decimals snaps summation noise (0.1 + 0.1 + 0.7 < 0.9) so decimal θ
    # tie as intended; float32 input keeps its exact values (the authors' float32 semantics).
    dtype = value_dtype(raw.dtype)
    vals = np.minimum(raw.astype(dtype, copy=False), dtype(1.0))
    if dtype == np.float64:
        vals = np.round(vals, 12)
    vals[cand == hierarchy.root] = 1.0
    nodes, values, lengths = _compress(cand, vals)
    return DecisionPaths(rule=rule, nodes=nodes, values=values, lengths=lengths)


def predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """(predicted nodes, confidences) of ``rule`` at θ; a prediction is accepted when f ≥ θ."""
    check_theta(theta)  # before the work: None, text or NaN is one clear ValueError
    return decision_paths(hierarchy, node_probs, rule).predict(theta)


def selective_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Argmax leaf if its probability ≥ θ, else the root (confidence 1.0)."""
    return predict(hierarchy, node_probs, theta, "selective")


def climbing_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Deepest ancestor of the argmax leaf (itself included) with probability ≥ θ (Algorithm 1).

    Parameters
    ----------
    node_probs : (n_samples, n_nodes) node probabilities (``probabilities.node_probabilities``).
    theta : the confidence threshold θ in [0, 1].

    Returns
    -------
    (nodes, confidences), each of shape (n_samples,).

    Examples
    --------
    >>> import numpy as np
    >>> from hsc_core import Hierarchy
    >>> h = Hierarchy.from_parents([3, 3, 4, 4, -1], n_leaves=3, node_ids=["cat", "dog", "car", "animal", "root"])
    >>> from hsc_core import node_probabilities
    >>> p = node_probabilities(h, np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    >>> nodes, conf = climbing_predict(h, p, theta=0.7)   # "cat" 0.5 < 0.7 → "animal" 0.8; "car" 0.8 stays
    >>> [h.node_ids[v] for v in nodes], conf.tolist()
    (['animal', 'car'], [0.8, 0.8])
    """
    return predict(hierarchy, node_probs, theta, "climbing")


def jumping_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Argmax leaf, else the most probable node of the lowest height layer reaching θ."""
    return predict(hierarchy, node_probs, theta, "jumping")


def max_coverage_predict(hierarchy: Hierarchy, node_probs: np.ndarray, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Node of maximal coverage with probability ≥ θ; ties by probability, then lowest index."""
    return predict(hierarchy, node_probs, theta, "max_coverage")
