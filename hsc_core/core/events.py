"""The one event sweep: a rule's decision paths → per-sample operating-point changes, sorted by θ.

A sample's prediction changes only when θ passes one of its record values (``rules``), so the
whole RC curve is a list of *events* (θ, sample, Δcoverage, Δloss) sorted by θ plus cumulative
sums. ``curves.rc_curve_from_paths`` sums them once; ``uncertainty.bootstrap_haurc`` sums them
with each resample's weights. Both take the events from here, built a block of rows at a time so
the severity loss's (records × depth) LCA temporaries stay within the memory budget
(``config.memory_budget_bytes``) at any scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import rows_per_chunk
from .hierarchy import Hierarchy
from .risk import Loss, sample_loss
from .rules import DecisionPaths
from .validation import check_labels


@dataclass(frozen=True)
class RuleEvents:
    """One rule's exact RC curve, taken apart per sample.

    base_cov, base_loss : (n_samples,) float64 coverage and loss of each sample's first record
        (its prediction at θ = 0).
    theta : (E,) the θ of each event, ascending, in the records' precision (float32 or float64).
    event_sample : (E,) the sample whose prediction changes at each event.
    d_cov, d_loss : (E,) float64 change of that sample's coverage and loss at the event.
    group_end : (G,) index of the last event of each group of equal θ (one curve point each).
    monotone : every Δcoverage ≤ 0, so coverage falls with θ for *any* sample weights
        (Selective and Climbing; Jumping and Max-Coverage can climb back down).
    """

    rule: str
    base_cov: np.ndarray
    base_loss: np.ndarray
    theta: np.ndarray
    event_sample: np.ndarray
    d_cov: np.ndarray
    d_loss: np.ndarray
    group_end: np.ndarray
    monotone: bool

    @property
    def n_samples(self) -> int:
        return int(self.base_cov.size)


def rule_events(hierarchy: Hierarchy, paths: DecisionPaths, labels: np.ndarray, loss: Loss = "01",
                *, budget_bytes: int | None = None) -> RuleEvents:
    """The events of ``paths`` sorted by θ (ties keep sample order: a stable sort).

    Parameters
    ----------
    paths : (n_samples, n_records) decision paths of one rule.
    labels : (n_samples,) true leaf indices.
    loss : ``"01"`` or ``"severity"``.
    budget_bytes : working memory of one block of rows (default: ``config.memory_budget_bytes``).

    Examples
    --------
    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> from hsc_core.core.rules import decision_paths
    >>> h = Hierarchy.flat(2)                  # leaves 0 and 1 under the root (node 2)
    >>> p = np.array([[0.8, 0.2, 1.0]])        # predicts leaf 0; the true leaf is 1
    >>> ev = rule_events(h, decision_paths(h, p, "selective"), np.array([1]))
    >>> float(ev.theta[0]), float(ev.d_cov[0]), float(ev.d_loss[0])   # above 0.8: leaf → root
    (0.8, -1.0, -1.0)
    """
    n, width = paths.nodes.shape
    labels = check_labels(labels, n, hierarchy.n_leaves)
    # Per record cell: coverage, loss and their differences (float64) plus the severity loss's
    # LCA temporaries (binary lifting: a few int64 arrays of the block's size, whatever the depth).
    rows = rows_per_chunk(width * 8 * 16, budget_bytes)
    base_cov = np.empty(n)
    base_loss = np.empty(n)
    parts: list[tuple[np.ndarray, ...]] = []
    for s in range(0, n, rows):
        nodes = paths.nodes[s: s + rows]
        cov = hierarchy.coverage[nodes]
        los = np.asarray(sample_loss(hierarchy, nodes, np.broadcast_to(labels[s: s + rows, None], nodes.shape), loss),
                         dtype=np.float64)
        base_cov[s: s + rows], base_loss[s: s + rows] = cov[:, 0], los[:, 0]
        # Leaving record j for record j + 1 happens when θ passes values[:, j].
        live = np.arange(width - 1)[None, :] < (paths.lengths[s: s + rows, None] - 1)
        sample = np.broadcast_to(np.arange(s, s + nodes.shape[0])[:, None], live.shape)[live]
        parts.append((paths.values[s: s + rows, :-1][live], sample,
                      np.diff(cov, axis=1)[live], np.diff(los, axis=1)[live]))
    theta, sample, d_cov, d_loss = (np.concatenate([p[k] for p in parts]) for k in range(4))
    order = np.argsort(theta, kind="stable")
    theta = theta[order]
    group_end = np.flatnonzero(np.r_[theta[1:] != theta[:-1], True]) if theta.size else np.zeros(0, np.int64)
    d_cov = d_cov[order]
    return RuleEvents(rule=paths.rule, base_cov=base_cov, base_loss=base_loss, theta=theta,
                      event_sample=sample[order], d_cov=d_cov, d_loss=d_loss[order], group_end=group_end,
                      monotone=bool(np.all(d_cov <= 0)))
