"""Rules beyond the paper's four: metric-optimal decoding with a θ knob, and Valmadre's Pareto curve.

* ``hf<β>`` (``hf1``, ``hf0.5``, ``hf2`` …): the node of highest expected hFβ (Plaud et al.,
  ICML 2025, "Hierarchical decision rules", optimal decoding for hFβ restricted to single-node
  predictions, as selective classification predicts one node). Where it differs from their code,
  hierulz (``hierulz/metrics/hf_beta_score.py``, ``hFBetaScore.decode``; the tests hold its
  outputs on toy trees): (1) hierulz counts the root in both node sets, |Y| = depth(y) + 1, and
  we do not (Kiritchenko et al.; ``node_scores``) — its definition is ours on the tree with one
  more node above the root, and there the two optima agree; (2) it decodes a *set* of nodes (the
  top k of its per-node gains for the best k), which may hold several branches, not one node;
  (3) its candidate filter P(v) ≥ 1/(1 + β²(depth of v's deepest leaf + 1)) is not exact when
  leaves lie at several depths (it can drop the optimum; the tests show a case). Ours is exact:
  the literal argmax over all nodes, pruned only by the bounds proved in ``_pruning`` and
  ``_hf_mixed_q``.
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

import numpy as np

from ..config import rows_per_block, rows_per_chunk
from .hierarchy import Hierarchy
from .node_scores import Metric, expected_scores, information
from .pareto import front_from_pairs, pareto_paths
from .rule_registry import get_rule, rule_names
from .rule_registry import rule_label as rule_label  # re-exported: the name callers know
from .rules import RULE_LABELS, DecisionPaths, argmax_leaf, decision_paths, nonzero_rows_cols, value_dtype
from .validation import check_node_probs

#: The new rules offered next to the paper's four (``hf<β>`` accepts any β > 0): ``rule_registry``'s.
EXTRA_RULES: tuple[str, ...] = rule_names(paper=False)
#: Every rule a front end offers, the paper's four first.
ALL_RULES: tuple[str, ...] = rule_names()
EXTRA_RULE_LABELS: dict[str, str] = {rule: RULE_LABELS[rule] for rule in EXTRA_RULES}


def parse_rule(rule: str) -> tuple[str, float]:
    """(kind, β) of a rule name: kind is the rule itself, or ``"hf"`` for ``hf<β>`` (``rule_registry``).

    Raises one clear ValueError for an unknown name or a β that is not > 0.

    Examples
    --------
    >>> parse_rule("hf0.5"), parse_rule("climbing")
    (('hf', 0.5), ('climbing', 1.0))
    """
    spec = get_rule(rule)
    return spec.kind, spec.beta


def check_rule(rule: str) -> str:
    """``rule`` if it names a rule (``ALL_RULES`` or ``hf<β>`` with β > 0), else one clear ValueError."""
    get_rule(rule)
    return rule


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
    spec = get_rule(rule)  # the registry says how (``RuleSpec.method``)
    beta = spec.beta
    if spec.method == "candidates":
        return decision_paths(hierarchy, node_probs, spec.key, leaf=leaf)  # type: ignore[arg-type]
    if spec.method == "records_of":
        # Pareto: Valmadre's front with information specificity is Max-Coverage's record list: among
        # nodes of one information (= coverage level) only the most probable can be on the front,
        # and a level's node is on it iff it is more probable than every more specific one. The
        # grouped sweep of ``rules`` finds it without a per-sample sort (tests check the two).
        p = decision_paths(hierarchy, node_probs, spec.records_of, leaf=leaf)  # type: ignore[arg-type]
        return DecisionPaths(rule=rule, nodes=p.nodes, values=p.values, lengths=p.lengths)
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    metric = _METRIC[spec.kind]
    if not pruned:
        if not np.isfinite(probs).all():
            raise ValueError("node_probs contain NaN or inf")
        return pareto_paths(rule, rule_scores(hierarchy, probs, rule), record_values(hierarchy, probs))
    if leaf is None:
        leaf = argmax_leaf(hierarchy, probs)
    # A NaN or inf leaf makes its root sum non-finite: checking the root column (and the
    # candidates) avoids a pass over every node.
    if not np.isfinite(probs[:, hierarchy.root]).all():
        raise ValueError("node_probs contain NaN or inf")
    # hFβ with leaves at several depths: scores from exact per-depth leaf sums (``_hf_mixed_scores``),
    # and a pruning margin for the float error of the given node sums against those.
    mixed = metric == "hf" and not _uniform_leaf_depth(hierarchy)
    if mixed:
        leaves = probs[:, : hierarchy.n_leaves]
        total = leaves.sum(axis=1, dtype=np.float64)  # a NaN or inf leaf shows in its row's total
        if not np.isfinite(total).all():
            raise ValueError("node_probs contain NaN or inf")
        if total.max() > 4 or leaves.min() < 0:  # not probabilities: no bounds, no fixed point
            return pareto_paths(rule, rule_scores(hierarchy, probs, rule), record_values(hierarchy, probs))
    r, c = _candidates(hierarchy, probs, metric, beta, leaf, margin=_sum_margin(hierarchy, probs) if mixed else 0.0)
    raw = probs[r, c]
    if not np.isfinite(raw).all():
        raise ValueError("node_probs contain NaN or inf")
    if mixed:
        scores = _hf_mixed_scores(hierarchy, probs, r, c, beta)
    else:
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
    def compute():
        nodes = np.arange(hierarchy.n_nodes)
        top = hierarchy.ancestor_at_depth(nodes, np.minimum(hierarchy.depth, 1))
        deep = hierarchy.depth >= 2
        q = np.zeros(hierarchy.n_nodes)
        if metric == "hf" and _uniform_leaf_depth(hierarchy):
            # Uniform leaf depth D: g = (1+β²)a/((a+d)(a+d−1)), l ≥ (1+β²)/(…) → q = 1/(a+1), a = β²D.
            a = beta**2 * float(hierarchy.depth[0])
            q[deep] = 1.0 / (a + 1.0)
        elif metric == "hf":
            q = _hf_mixed_q(hierarchy, beta, top)
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
        return (top, q)
    return hierarchy.memo(key, compute)


def _hf_mixed_q(hierarchy: Hierarchy, beta: float, top: np.ndarray) -> np.ndarray:
    """``_pruning``'s q for hFβ on a tree whose leaves lie at several depths. Shape (n_nodes,).

    Proof. Let v be at depth d ≥ 2 with parent π and write b = β², D(y) = b·d_y. Against a true
    leaf y, hFβ(v, y) = (1+b)·e/(D(y) + d) with e = depth(LCA(v, y)) (the root not counted):

    * y under v: e = d for v and d − 1 for π, so hFβ(v, y) − hFβ(π, y) = (1+b)·D(y)/((D(y)+d)(D(y)+d−1))
      =: g(d_y) > 0;
    * y under top(v) but not under v: LCA(v, y) = LCA(π, y), 1 ≤ e ≤ d − 1, so the difference is
      −(1+b)·e/((D(y)+d)(D(y)+d−1)) ≤ −(1+b)/((D(y)+d)(D(y)+d−1)) =: −l(d_y) < 0;
    * y under another depth-1 node: e = 0 for both, difference 0.

    Hence E[hFβ(v)] − E[hFβ(π)] ≤ P(v)·G − (P(top(v)) − P(v))·ℓ with G = max g over the leaf depths
    under v and ℓ = min l over those under top(v); l falls with d_y, so ℓ = l(deepest leaf under
    top(v)). If P(v) < q·P(top(v)) with q = ℓ/(G + ℓ), the right side is < 0: π is at least as
    probable and strictly better, so v is on no front. G is taken over every integer depth
    between the shallowest and the deepest leaf under v (a superset, so the bound still holds).
    With one leaf depth D this is the uniform case's q = 1/(β²D + 1).
    """
    b = beta**2
    n = hierarchy.n_nodes
    depth = hierarchy.depth.astype(np.float64)
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.zeros(n, dtype=np.int64)
    lo[: hierarchy.n_leaves] = hi[: hierarchy.n_leaves] = hierarchy.depth[: hierarchy.n_leaves]
    parent = hierarchy.parent
    for v in hierarchy.topological_order[::-1]:  # children before parents
        if parent[v] >= 0:
            lo[parent[v]] = min(lo[parent[v]], lo[v])
            hi[parent[v]] = max(hi[parent[v]], hi[v])
    big = b * hi[top].astype(np.float64)
    g = np.zeros(n)
    deep = hierarchy.depth >= 2  # q is only used there, where every denominator is > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ell = 1.0 / ((big + depth) * (big + depth - 1.0))
        for dy in range(1, hierarchy.max_depth + 1):
            x = b * dy
            under = (lo <= dy) & (dy <= hi)
            g = np.where(under, np.maximum(g, x / ((x + depth) * (x + depth - 1.0))), g)
        return np.where(deep, ell / (g + ell), 0.0)


def _sum_margin(hierarchy: Hierarchy, probs: np.ndarray) -> float:
    """Relative slack of the pruning tests when scores come from exact leaf sums but the tests read
    the given node probabilities: a sum of n ≥ 0 terms in floating point is within n·eps of the
    exact one, plus 1e-6 so that a discarded node loses by far more than the scores' rounding."""
    return min(0.5, 3.0 * hierarchy.n_leaves * float(np.finfo(value_dtype(probs.dtype)).eps) + 1e-6)


def _candidates(hierarchy: Hierarchy, probs: np.ndarray, metric: Metric, beta: float,
                leaf: np.ndarray, *, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(rows, nodes) that can be on a front, the root once per row; every other node is beaten
    in both score and probability by one kept (``_pruning``), so the front is unchanged.

    ``margin`` > 0 loosens both tests by that relative amount (and an absolute 1e-12), keeping a
    superset: for scores computed from leaf sums that the given node sums only approximate."""
    n = probs.shape[0]
    rows = np.arange(n)
    root = hierarchy.root
    if metric == "severity":
        # Every true leaf outside v is one step closer to v's parent, every one under v one step
        # further: the parent wins unless P(v) ≥ 1/2 (hierulz's 0.5 threshold). A chain.
        r, c = nonzero_rows_cols(probs >= 0.5)
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
        slack, tiny = 1.0 - margin, 1e-12 if margin else 0.0
        floor = (m * q_lo * slack * (1.0 - 1e-6) - 2 * tiny).astype(probs.dtype)
        r, c = nonzero_rows_cols(probs >= floor[:, None])
        r, c = np.r_[r, np.repeat(rows, free.size)], np.r_[c, np.tile(free, n)]
        p_top = probs[r, top[c]].astype(np.float64)
        ok = (p_top >= m[r] * slack - tiny) & (probs[r, c] >= q[c] * p_top * slack - 2 * tiny)
        r, c = r[ok], c[ok]
    keep = c != root
    return np.r_[r[keep], rows], np.r_[c[keep], np.full(n, root)]


def _pair_scores(hierarchy: Hierarchy, probs: np.ndarray, r: np.ndarray, c: np.ndarray, metric: Metric,
                 beta: float) -> np.ndarray:
    """Expected scores of candidate (row, node) pairs from their ancestors' probabilities, summed
    root-first in float64 exactly as ``node_scores.expected_scores`` sums them (same bits).

    Two ways to the same sums, the cheaper taken: along each pair's path to the root (pairs ×
    depth), or down the whole tree for the rows that have pairs (rows × nodes, one level at a
    time: T(v) = T(parent) + P(v)·w(v), the same additions in the same order). On a deep tree
    (a 1,000-deep caterpillar: ~1,000 pairs per row, each 1,000 deep) the second keeps the work
    and memory linear in the tree's size per sample.
    """
    if metric == "information":
        info = information(hierarchy)
        weight = info - np.where(hierarchy.parent >= 0, info[np.maximum(hierarchy.parent, 0)], 0.0)
    else:
        weight = np.ones(hierarchy.n_nodes)
    weight[hierarchy.root] = 0.0
    rows, where = np.unique(r, return_inverse=True)
    width = int(hierarchy.depth[c].max()) + 1 if c.size else 1
    if r.size * width <= rows.size * hierarchy.n_nodes:
        anc = hierarchy.paths_to_root(c)  # (pairs, width): node, parent, …, root, padded with the root
        total = np.zeros(r.size)
        for k in range(anc.shape[1] - 1, -1, -1):
            col = anc[:, k]
            total = total + probs[r, col].astype(np.float64) * weight[col]
    else:
        down = np.zeros((rows.size, hierarchy.n_nodes))
        sub = probs[rows]
        parent = hierarchy.parent
        for level in _nodes_by_depth(hierarchy)[1:]:
            down[:, level] = down[:, parent[level]] + sub[:, level].astype(np.float64) * weight[level]
        total = down[where, c]
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


def _nodes_by_depth(hierarchy: Hierarchy) -> list[np.ndarray]:
    """The nodes at each depth 0 … max_depth (cached)."""
    def compute() -> list[np.ndarray]:
        order = np.argsort(hierarchy.depth, kind="stable")
        return np.split(order, np.flatnonzero(np.diff(hierarchy.depth[order])) + 1)
    return hierarchy.memo(("nodes_by_depth",), compute)


def _fixed_scale(hierarchy: Hierarchy) -> float:
    """Fixed-point scale of ``_hf_mixed_scores``' leaf sums: a power of two such that the sum over
    a node's ≤ max_depth + 1 ancestors of leaf masses ≤ 4 (the row totals it accepts) stays
    below 2⁶³. 2⁵⁷ at depth 7: a leaf probability is kept to 7e-18."""
    return 2.0 ** (62 - int(np.ceil(np.log2(4 * (hierarchy.max_depth + 1)))))


def _leaf_layout(hierarchy: Hierarchy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(perm, lo, hi, dy): leaves ordered by depth, then pre-order, so the leaves of depth dy[k] under
    node u are the contiguous positions lo[k, u] … hi[k, u] − 1 of ``perm``. (n_leaves,), (K, n_nodes) × 2, (K,)."""
    key = ("leaf_depth_layout",)
    def compute():
        tin, tout = hierarchy._euler
        n_leaves = hierarchy.n_leaves
        leaf_depth = hierarchy.depth[:n_leaves]
        perm = np.lexsort((tin[:n_leaves], leaf_depth))
        dy = np.unique(leaf_depth)
        lo = np.empty((dy.size, hierarchy.n_nodes), dtype=np.int64)
        hi = np.empty_like(lo)
        offset = 0
        for k, d in enumerate(dy):
            t = np.sort(tin[:n_leaves][leaf_depth == d])
            lo[k] = offset + np.searchsorted(t, tin)
            hi[k] = offset + np.searchsorted(t, tout)
            offset += t.size
        return (perm, lo, hi, dy)
    return hierarchy.memo(key, compute)


def _hf_mixed_scores(hierarchy: Hierarchy, probs: np.ndarray, r: np.ndarray, c: np.ndarray,
                     beta: float) -> np.ndarray:
    """Expected hFβ of candidate (row, node) pairs on a tree whose leaves lie at several depths.

    E[hFβ(v)] = (1+β²) Σ_k N_k(v) / (β² d_k + d(v)), N_k(v) = Σ over v's ancestors u (v included,
    the root not) of the mass of u's leaves at depth d_k: ``expected_scores``' per-depth sums, for
    the pairs only. Every such u lies under v's depth-1 ancestor t, so per t only the rows with a
    candidate under it read t's leaves, in ``_leaf_layout`` order, into a fixed-point (int64)
    running sum; any node's mass per depth is then one difference of it — exact, and the same bits
    for two nodes with the same leaf probabilities (ties stay ties). Rows go in blocks within the
    memory budget (``config.rows_per_chunk``). The work per pair is (leaf depths) × (its depth): on a
    tree whose leaves lie at more than ``HF_LEAF_DEPTH_CLASSES`` depths ``_hf_deep_scores`` takes over.
    """
    if np.unique(hierarchy.depth[: hierarchy.n_leaves]).size > HF_LEAF_DEPTH_CLASSES:
        return _hf_deep_scores(hierarchy, probs, r, c, beta)
    perm, lo, hi, dy = _leaf_layout(hierarchy)
    root = hierarchy.root
    top = hierarchy.ancestor_at_depth(c, np.minimum(hierarchy.depth[c], 1))
    anc = hierarchy.paths_to_root(c)  # (pairs, width): node, parent, …, root, padded with the root
    sums = np.zeros((dy.size, r.size), dtype=np.int64)
    fixed_scale = _fixed_scale(hierarchy)
    work = np.result_type(probs.dtype, np.float32)  # float16 would overflow
    scale = work.type(fixed_scale)  # a power of two: scaling is exact
    for t in np.unique(top[c != root]):
        # t's leaves: class k's are the global positions lo[k, t] … hi[k, t] − 1; local offsets.
        width_k = hi[:, t] - lo[:, t]
        shift = np.r_[0, np.cumsum(width_k)[:-1]] - lo[:, t]  # global position + shift = local column
        cols = np.concatenate([perm[lo[k, t]: hi[k, t]] for k in range(dy.size)])
        pick = np.flatnonzero(top == t)
        pick = pick[np.argsort(r[pick], kind="stable")]
        rows, where = np.unique(r[pick], return_inverse=True)
        block = rows_per_chunk(8 * (cols.size + 1) + 2 * probs.itemsize * cols.size)
        cache_rows = rows_per_block(8 * (cols.size + 1) + probs.itemsize * cols.size)
        for a in range(0, rows.size, block):
            b = min(a + block, rows.size)
            sel = (where >= a) & (where < b)
            pp, lr = pick[sel], where[sel] - a
            # Most of the rows need t → np.take over all of them (~4× faster than a 2-D fancy gather;
            # at most twice the budget, as one block then holds over half the rows).
            whole = 2 * (b - a) > probs.shape[0]
            fixed = (np.take(probs, cols, axis=1) if whole else probs[rows[a:b, None], cols[None, :]]).astype(
                work, copy=False)
            if whole:
                lr = r[pp]
            # The gathered rows a cache block at a time (pairs are sorted by row): scaled, made
            # fixed-point and summed while they stay in the core's cache, not in passes over them all.
            for s0 in range(0, fixed.shape[0], cache_rows):
                s1 = min(s0 + cache_rows, fixed.shape[0])
                first, last = np.searchsorted(lr, (s0, s1))
                if first == last:
                    continue
                running = np.empty((s1 - s0, cols.size + 1), dtype=np.int64)
                running[:, 0] = 0
                # float → int64 truncates: a fixed-point value ⌊p·scale⌋ per leaf, summed exactly.
                running[:, 1:] = fixed[s0:s1] * scale
                np.cumsum(running[:, 1:], axis=1, out=running[:, 1:])
                q = pp[first:last]
                u = anc[q]  # (pairs, width)
                on = u != root  # the root (and the padding) is not counted: read t there, then drop it
                u = np.where(on, u, t)
                at = (lr[first:last] - s0)[None, :, None]
                mass = running[at, hi[:, u] + shift[:, None, None]] - running[at, lo[:, u] + shift[:, None, None]]
                sums[:, q] = (mass * on[None]).sum(axis=2)  # (K, pairs)
            del fixed
    b2 = beta**2
    depth = hierarchy.depth[c].astype(np.float64)
    total = np.zeros(r.size)
    for k, d in enumerate(dy):
        total = total + sums[k] / fixed_scale / (b2 * float(d) + depth)
    out = total * (1.0 + b2)
    out[depth == 0] = 0.0
    return out


#: Above this many distinct leaf depths (a caterpillar has one per leaf), ``_hf_mixed_scores``'
#: per-depth-class sums would cost (leaf depths) × depth per pair, quadratic in the depth:
#: ``_hf_deep_scores`` sums per candidate depth instead.
HF_LEAF_DEPTH_CLASSES = 16


def _leaf_preorder(hierarchy: Hierarchy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(perm, lo, hi): the leaves in pre-order, so node u's leaves are positions lo[u] … hi[u] − 1
    of ``perm``. (n_leaves,), (n_nodes,) × 2; cached."""
    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tin, tout = hierarchy._euler
        perm = np.argsort(tin[: hierarchy.n_leaves], kind="stable")
        t = tin[: hierarchy.n_leaves][perm]
        return perm, np.searchsorted(t, tin), np.searchsorted(t, tout)
    return hierarchy.memo(("leaf_preorder",), compute)


def _hf_deep_scores(hierarchy: Hierarchy, probs: np.ndarray, r: np.ndarray, c: np.ndarray,
                    beta: float) -> np.ndarray:
    """``_hf_mixed_scores`` on a tree whose leaves lie at many depths: linear in the depth per pair.

    For the pairs at depth d, E[hFβ(v)] = (1+β²) Σ_{u ∈ anc(v), u ≠ root} W_d(u) with
    W_d(u) = Σ_{y under u} p_y / (β² d_y + d): each leaf's weight is divided by its own
    denominator first, made fixed-point (int64, ``_fixed_scale``) and summed in pre-order, so
    W_d(u) is one difference of the running sum and the pair's score one pass up its path. Per
    depth-1 node t and candidate depth d, the rows with such a pair read t's leaves once:
    (rows × candidate depths × t's leaves) + (pairs × depth) in all, exact and tie-preserving.
    """
    perm, lo, hi = _leaf_preorder(hierarchy)
    root, b2 = hierarchy.root, beta**2
    fixed_scale = _fixed_scale(hierarchy)
    depth_c = hierarchy.depth[c]
    top = hierarchy.ancestor_at_depth(c, np.minimum(depth_c, 1))
    leaf_den = b2 * hierarchy.depth[perm].astype(np.float64)  # β² d_y of each leaf, in pre-order
    sums = np.zeros(r.size, dtype=np.int64)
    for t in np.unique(top[c != root]):
        cols, den, shift = perm[lo[t]: hi[t]], leaf_den[lo[t]: hi[t]], lo[t]
        under = np.flatnonzero((top == t) & (c != root))
        for d in np.unique(depth_c[under]):
            pick = under[depth_c[under] == d]
            rows, where = np.unique(r[pick], return_inverse=True)
            block = rows_per_chunk(24 * (cols.size + 1))
            for a in range(0, rows.size, block):
                b = min(a + block, rows.size)
                sel = (where >= a) & (where < b)
                pp, lr = pick[sel], where[sel] - a
                w = probs[rows[a:b, None], cols[None, :]].astype(np.float64)
                w /= den + float(d)
                w *= fixed_scale
                running = np.empty((b - a, cols.size + 1), dtype=np.int64)
                running[:, 0] = 0
                np.cumsum(w, axis=1, dtype=np.int64, out=running[:, 1:])  # ⌊w·scale⌋ per leaf, summed exactly
                del w
                u = hierarchy.paths_to_root(c[pp], width=int(d) + 1)  # (pairs, d + 1): v … root
                on = u != root
                u = np.where(on, u, t)
                at = (lr * running.shape[1] - shift)[:, None]  # flat positions: one 1-D take each
                flat = running.ravel()
                sums[pp] = ((flat.take(at + hi[u]) - flat.take(at + lo[u])) * on).sum(axis=1)
    out = sums / fixed_scale * (1.0 + b2)
    out[depth_c == 0] = 0.0
    return out
