"""Rules beyond the paper's four: metric-optimal decoding with a θ knob, and Valmadre's Pareto curve.

* ``hf<β>`` (``hf1``, ``hf0.5``, ``hf2`` …): the node of highest expected hFβ (Plaud et al.,
  ICML 2025, "Hierarchical decision rules", optimal decoding for hFβ restricted to single-node
  predictions, as selective classification predicts one node).
* ``min_severity``: the node of lowest expected mistake severity (Bertinetto et al., CVPR 2020;
  Plaud et al. show the optimum is the deepest node with P > 0.5).
* ``max_information``: the node of highest expected information-based score (Zhao et al.,
  ICCV 2017; ``node_scores``).
* ``pareto``: Valmadre's (NeurIPS 2022) Pareto-optimal sequence of predictions with information
  specificity: at θ, the most specific node with probability ≥ θ.

The knob: at θ, each metric rule predicts the node of best expected score *among the nodes whose
probability is ≥ θ* — the Lagrangian of maximising the metric under a hierarchical-risk
constraint, solved for every multiplier at once. θ = 0 is the unconstrained metric-optimal node;
raising θ moves the prediction towards the root (P = 1) until θ = 1 leaves only nodes of
probability 1. θ is the same confidence threshold as in the paper's rules (a prediction is
accepted when its node's probability is ≥ θ), so every rule here has records, an exact RC curve
and an hAURC through the paper rules' machinery (``pareto``).
"""

from __future__ import annotations

import re

import numpy as np

from .hierarchy import Hierarchy
from .node_scores import Metric, check_beta, expected_scores, information
from .pareto import front_from_pairs, pareto_paths
from .rules import RULE_LABELS, RULES, DecisionPaths, argmax_leaf, decision_paths, value_dtype
from .validation import check_node_probs, quote

#: The new rules offered next to the paper's four (``hf<β>`` accepts any β > 0).
EXTRA_RULES: tuple[str, ...] = ("hf1", "min_severity", "max_information", "pareto")
#: Every rule a front end offers, the paper's four first.
ALL_RULES: tuple[str, ...] = RULES + EXTRA_RULES
EXTRA_RULE_LABELS: dict[str, str] = {rule: RULE_LABELS[rule] for rule in EXTRA_RULES}
_HF = re.compile(r"hf(.*)")


def parse_rule(rule: str) -> tuple[str, float]:
    """(kind, β) of a rule name: kind is the rule itself, or ``"hf"`` for ``hf<β>``.

    Raises one clear ValueError for an unknown name or a β that is not > 0.

    Examples
    --------
    >>> parse_rule("hf0.5"), parse_rule("climbing")
    (('hf', 0.5), ('climbing', 1.0))
    """
    if not isinstance(rule, str):
        raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(ALL_RULES)} (hf<β> for any β > 0)")
    if rule in RULES or (rule in EXTRA_RULE_LABELS and rule != "hf1"):
        return rule, 1.0
    m = _HF.fullmatch(rule)
    if m:
        try:
            beta = float(m.group(1))
        except ValueError:
            beta = None
        if beta is not None:
            return "hf", check_beta(beta)
    raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(ALL_RULES)} (hf<β> for any β > 0)")


def check_rule(rule: str) -> str:
    """``rule`` if it names a rule (``ALL_RULES`` or ``hf<β>`` with β > 0), else one clear ValueError."""
    parse_rule(rule)
    return rule


def rule_label(rule: str) -> str:
    """How tables and legends name a rule: "Climbing", "hF1-optimal", "Pareto (Valmadre)"."""
    kind, beta = parse_rule(rule)
    if kind == "hf":
        return f"hF{beta:g}-optimal"
    return RULE_LABELS[rule]


def record_values(hierarchy: Hierarchy, probs: np.ndarray) -> np.ndarray:
    """Node probabilities as every rule reads them (``rules.decision_paths``): clipped to 1 in the
    records' precision, float64 rounded to 12 decimals, the root exactly 1.0. (n, n_nodes)."""
    dtype = value_dtype(probs.dtype)
    vals = np.minimum(probs.astype(dtype, copy=False), dtype(1.0))
    if dtype == np.float64:
        vals = np.round(vals, 12)
    vals[:, hierarchy.root] = 1.0
    return vals


def rule_scores(hierarchy: Hierarchy, probs: np.ndarray, rule: str) -> np.ndarray:
    """(n, n_nodes) what ``rule`` maximises among the nodes with probability ≥ θ."""
    kind, beta = parse_rule(rule)
    if kind == "pareto":
        spec = information(hierarchy)
        return np.broadcast_to(spec, probs.shape)
    metric: Metric = {"hf": "hf", "min_severity": "severity", "max_information": "information"}[kind]  # type: ignore[assignment]
    return expected_scores(hierarchy, probs, metric, beta=beta)


def any_decision_paths(hierarchy: Hierarchy, node_probs: np.ndarray, rule: str,
                       leaf: np.ndarray | None = None, *, pruned: bool = True) -> DecisionPaths:
    """Decision paths of any rule: the paper's four (``rules.decision_paths``) or the ones here.

    Parameters
    ----------
    node_probs : (n_samples, n_nodes) node probabilities.
    rule : a name from ``ALL_RULES``, or ``hf<β>``.
    leaf : optional precomputed arg-max leaves.
    pruned : score only the nodes that can be on a sample's front (``_candidates``; exact, and
        what makes iNat21 scale affordable); False scores every node (the reference).

    Examples
    --------
    >>> from hsc_core.core.probabilities import node_probabilities
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)
    >>> p = node_probabilities(h, np.array([[0.4, 0.3, 0.2, 0.1]]))   # pair 4: 0.7, pair 5: 0.3
    >>> paths = any_decision_paths(h, p, "min_severity")
    >>> paths.nodes.tolist(), paths.predict(0.0)[0].tolist(), paths.predict(0.8)[0].tolist()
    ([[4, 6]], [4], [6])
    """
    kind, beta = parse_rule(rule)
    if kind in RULES:
        return decision_paths(hierarchy, node_probs, kind, leaf=leaf)  # type: ignore[arg-type]
    if kind == "pareto":
        # Valmadre's front with information specificity is Max-Coverage's record list: among
        # nodes of one information (= coverage level) only the most probable can be on the front,
        # and a level's node is on it iff it is more probable than every more specific one. The
        # grouped sweep of ``rules`` finds it without a per-sample sort (tests check the two).
        p = decision_paths(hierarchy, node_probs, "max_coverage", leaf=leaf)
        return DecisionPaths(rule=rule, nodes=p.nodes, values=p.values, lengths=p.lengths)
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    metric = _METRIC[kind]
    if not pruned or (metric == "hf" and not _uniform_leaf_depth(hierarchy)):
        if not np.isfinite(probs).all():
            raise ValueError("node_probs contain NaN or inf")
        return pareto_paths(rule, rule_scores(hierarchy, probs, rule), record_values(hierarchy, probs))
    if leaf is None:
        leaf = argmax_leaf(hierarchy, probs)
    # A NaN or inf leaf makes its root sum non-finite: checking the root column (and the
    # candidates) avoids a pass over every node.
    if not np.isfinite(probs[:, hierarchy.root]).all():
        raise ValueError("node_probs contain NaN or inf")
    r, c = _candidates(hierarchy, probs, metric, beta, leaf)
    raw = probs[r, c]
    if not np.isfinite(raw).all():
        raise ValueError("node_probs contain NaN or inf")
    scores = _pair_scores(hierarchy, probs, r, c, metric, beta)
    dtype = value_dtype(probs.dtype)
    vals = np.minimum(raw.astype(dtype, copy=False), dtype(1.0))
    if dtype == np.float64:
        vals = np.round(vals, 12)
    vals[c == hierarchy.root] = 1.0
    nodes, values, lengths = front_from_pairs(probs.shape[0], r, c, scores, vals)
    return DecisionPaths(rule=rule, nodes=nodes, values=values, lengths=lengths)


_METRIC: dict[str, Metric] = {"hf": "hf", "min_severity": "severity", "max_information": "information"}


def _uniform_leaf_depth(hierarchy: Hierarchy) -> bool:
    d = hierarchy.depth[: hierarchy.n_leaves]
    return bool(d.min() == d.max())


def _pruning(hierarchy: Hierarchy, metric: Metric, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """(top, q): each node's depth-1 ancestor, and the share q(v) of P(top(v)) below which its
    parent beats it in expected score (cached per metric and β).

    Moving a prediction from v up to its parent π changes the score of a true leaf y by −g_y
    (y under v) or +l_y (y elsewhere under top(v); leaves under other top nodes: no change), so
    E[score(v)] − E[score(π)] ≤ P(v)·max g − (P(top) − P(v))·min l < 0 when
    P(v) < q·P(top), q = min l / (max g + min l) — the bound hierulz (Plaud et al., 2025,
    Lemma 4.3 / Prop. E.6) uses to discard nodes. Then π is at least as probable and strictly
    better, so v is on no front. Nodes at depth ≤ 1 get q = 0 (never discarded this way).
    """
    key = ("metric_pruning", metric, beta)
    cache = hierarchy._cache
    if key not in cache:
        nodes = np.arange(hierarchy.n_nodes)
        top = hierarchy.ancestor_at_depth(nodes, np.minimum(hierarchy.depth, 1))
        deep = hierarchy.depth >= 2
        q = np.zeros(hierarchy.n_nodes)
        if metric == "hf":  # uniform leaf depth D: g = (1+β²)a/((a+d)(a+d−1)), l ≥ (1+β²)/(…) → q = 1/(a+1)
            a = beta**2 * float(hierarchy.depth[0])
            q[deep] = 1.0 / (a + 1.0)
        elif metric == "information":
            info = information(hierarchy)
            big = np.log2(hierarchy.n_leaves)
            # Compare with the nearest ancestor a holding more leaves (a single-child chain has one
            # information, so its parent would tie): the same argument, with a for π.
            count, parent = hierarchy.leaf_count, hierarchy.parent
            up = np.maximum(parent, 0)
            for _ in range(hierarchy.max_depth):
                same = (count[up] == count) & (parent[up] >= 0)
                if not same.any():
                    break
                up = np.where(same, np.maximum(parent[up], 0), up)
            g = 2 * info / (info + big) - 2 * info[up] / (info[up] + big)
            lo = 2 * info[top] * (1 / (info[up] + big) - 1 / (info + big))
            with np.errstate(divide="ignore", invalid="ignore"):
                q = np.where(deep & (hierarchy.depth[up] >= 1) & (lo > 0), lo / (g + lo), 0.0)
        cache[key] = (top, q)
    return cache[key]


def _candidates(hierarchy: Hierarchy, probs: np.ndarray, metric: Metric, beta: float,
                leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, nodes) that can be on a front, the root once per row; every other node is beaten
    in both score and probability by one kept (``_pruning``), so the front is unchanged."""
    n = probs.shape[0]
    rows = np.arange(n)
    root = hierarchy.root
    if metric == "severity":
        # Every true leaf outside v is one step closer to v's parent, every one under v one step
        # further: the parent wins unless P(v) ≥ 1/2 (hierulz's 0.5 threshold). A chain.
        r, c = np.nonzero(probs >= 0.5)
    else:
        top, q = _pruning(hierarchy, metric, beta)
        # Scores are ≤ 1 and 0 for leaves under another top node, so E[score(v)] ≤ P(top(v)); the
        # arg-max leaf scores ≥ its probability m. A node under a top node less probable than m is
        # beaten by that leaf in both. With P(v) ≥ q·P(top(v)) this needs P(v) ≥ q·m: a cheap pre-filter.
        m = probs[rows, leaf].astype(np.float64)
        # One scalar per row (the smallest positive q; a 1e-6 margin below covers float32 rounding,
        # ~6e-8), plus every row's nodes with q = 0: never drops a node the exact test below keeps,
        # and reads the probabilities once.
        free = np.flatnonzero(q == 0)
        q_lo = float(q[q > 0].min()) if (q > 0).any() else 0.0
        floor = (m * q_lo * (1.0 - 1e-6)).astype(probs.dtype)
        r, c = np.nonzero(probs >= floor[:, None])
        r, c = np.r_[r, np.repeat(rows, free.size)], np.r_[c, np.tile(free, n)]
        p_top = probs[r, top[c]].astype(np.float64)
        ok = (p_top >= m[r]) & (probs[r, c] >= q[c] * p_top)
        r, c = r[ok], c[ok]
    keep = c != root
    return np.r_[r[keep], rows], np.r_[c[keep], np.full(n, root)]


def _pair_scores(hierarchy: Hierarchy, probs: np.ndarray, r: np.ndarray, c: np.ndarray, metric: Metric,
                 beta: float) -> np.ndarray:
    """Expected scores of candidate (row, node) pairs from their ancestors' probabilities, summed
    root-first in float64 exactly as ``node_scores.expected_scores`` sums them (same bits)."""
    anc = hierarchy.paths_to_root(c)  # (pairs, width): node, parent, …, root, padded with the root
    if metric == "information":
        info = information(hierarchy)
        weight = info - np.where(hierarchy.parent >= 0, info[np.maximum(hierarchy.parent, 0)], 0.0)
    else:
        weight = np.ones(hierarchy.n_nodes)
    weight[hierarchy.root] = 0.0
    total = np.zeros(r.size)
    for k in range(anc.shape[1] - 1, -1, -1):
        col = anc[:, k]
        total = total + probs[r, col].astype(np.float64) * weight[col]
    depth = hierarchy.depth[c].astype(np.float64)
    if metric == "severity":
        return 2.0 * total - depth
    if metric == "information":
        denom = information(hierarchy)[c] + np.log2(hierarchy.n_leaves)
        return np.divide(2.0 * total, denom, out=np.zeros_like(total), where=denom > 0)
    b2 = beta**2
    out = (0.0 + total / (b2 * float(hierarchy.depth[0]) + depth)) * (1.0 + b2)
    out[depth == 0] = 0.0
    return out
