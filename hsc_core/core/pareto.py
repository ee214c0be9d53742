"""Per-sample Pareto fronts of (score, probability) as decision-path records.

A rule that, at threshold θ, predicts the node of highest score among the nodes with probability
≥ θ changes its prediction only when θ passes the probability of the node it predicts. Its
candidates are therefore the Pareto front of (score, probability): the nodes that no other node
beats in both (Valmadre, NeurIPS 2022, "Hierarchical classification at multiple operating points",
§3: "Pareto-optimal sequence of predictions"). Listed from the most specific (lowest probability)
to the most confident, the front is exactly a ``rules.DecisionPaths`` record list: probabilities
strictly increase, and the first record with probability ≥ θ is the prediction at θ. So every
front-based rule gets the exact RC curve, hAURC, bootstrap and tables of the paper's four rules.

Ties: among nodes of equal score, the more probable wins; then the lower node index. Scores are
equal when they agree to ``SCORE_DECIMALS`` decimals: expected scores are sums over different
paths, so two nodes whose scores are equal in exact arithmetic can differ in the last bits (a
leaf at depth 2 and one at depth 3 with the same probability), and the tie rule must not depend
on summation order.
"""

from __future__ import annotations

import numpy as np

from .rules import DecisionPaths, nonzero_rows_cols

#: Scores equal to this many decimals are ties (floating-point sums differ by ~1e-15; distinct
#: scores of float32 probabilities differ by far more than 1e-10).
SCORE_DECIMALS = 10


def tie_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` (any shape) rounded to ``SCORE_DECIMALS`` decimals, as float64, so ties are exact."""
    return np.round(np.asarray(scores, dtype=np.float64), SCORE_DECIMALS)


def pareto_records(scores: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pareto-front records of each row: (nodes, values, lengths) as ``DecisionPaths`` holds them.

    Parameters
    ----------
    scores : (n_samples, n_nodes) what the rule maximises (higher is better).
    values : (n_samples, n_nodes) node probabilities as the rules read them (≤ 1, the root
        exactly 1.0), in the precision θ is compared in.

    Returns
    -------
    nodes, values : (n_samples, width) the front from the most specific node (the overall best
        score) to the most probable, padded by repeating the last record.
    lengths : (n_samples,) records per row.

    Only nodes at least as probable as the row's best-score node can be on the front, so the sort
    runs over those (a handful per row for a confident model) rather than all nodes.

    Examples
    --------
    >>> s = np.array([[3.0, 2.0, 1.0, 0.0]])      # score falls as probability rises…
    >>> v = np.array([[0.2, 0.5, 0.4, 1.0]])      # …except node 2, beaten by node 1 in both
    >>> nodes, vals, n = pareto_records(s, v)
    >>> nodes.tolist(), vals.tolist(), n.tolist()
    ([[0, 1, 3]], [[0.2, 0.5, 1.0]], [3])
    """
    n = scores.shape[0]
    rows = np.arange(n)
    scores = tie_scores(scores)
    best = scores.max(axis=1)
    # The best-score node, ties to the more probable, then the lower index.
    tied = np.where(scores == best[:, None], values, -np.inf)
    first = tied.argmax(axis=1)
    floor = values[rows, first]
    r, c = nonzero_rows_cols(values >= floor[:, None])
    return front_from_pairs(n, r, c, scores[r, c], values[r, c])


def front_from_pairs(n: int, r: np.ndarray, c: np.ndarray, s: np.ndarray,
                     v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pareto_records`` from candidate (row, node, score, value) lists, every row present at least
    once (the root). Candidates that some other candidate dominates may be left in or out: the front
    is the same."""
    rows = np.arange(n)
    s = tie_scores(s)
    # Per row: most probable first, then higher score, then lower index.
    order = np.lexsort((c, -s, -v, r))
    r, c, s, v = r[order], c[order], s[order], v[order]
    counts = np.bincount(r, minlength=n)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    pos = np.arange(r.size) - starts[r]
    width = int(counts.max())
    pad = np.full((n, width), -np.inf)
    pad[r, pos] = s
    run = np.maximum.accumulate(pad, axis=1)
    prev = np.concatenate([np.full((n, 1), -np.inf), run[:, :-1]], axis=1)[r, pos]
    keep = s > prev  # beats every more probable node: on the front
    r, c, v = r[keep], c[keep], v[keep]
    lengths = np.bincount(r, minlength=n)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    # Kept in decreasing probability; records run the other way (most specific first).
    slot = lengths[r] - 1 - (np.arange(r.size) - starts[r])
    width = int(lengths.max())
    nodes = np.empty((n, width), dtype=np.int64)
    vals = np.empty((n, width), dtype=v.dtype)
    nodes[r, slot] = c
    vals[r, slot] = v
    padding = np.arange(width)[None, :] >= lengths[:, None]
    if padding.any():
        nodes = np.where(padding, nodes[rows, lengths - 1][:, None], nodes)
        vals = np.where(padding, vals[rows, lengths - 1][:, None], vals)
    return nodes, vals, lengths


def pareto_paths(rule: str, scores: np.ndarray, values: np.ndarray) -> DecisionPaths:
    """``DecisionPaths`` named ``rule`` from the (score, probability) front of each row."""
    nodes, vals, lengths = pareto_records(scores, values)
    return DecisionPaths(rule=rule, nodes=nodes, values=vals, lengths=lengths)
