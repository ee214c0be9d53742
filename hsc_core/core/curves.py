"""Exact hierarchical risk–coverage curves, hAURC, gain, flat AURC, ECE and CC curves (§4–5).

A rule's prediction for one sample changes only when θ passes one of its record values
(``rules.DecisionPaths``), so the whole curve is a sort of those events plus cumulative sums:
every breakpoint, no θ grid, O(E log E) for E events. The authors' rounded grid (``dec=2``) is
available for comparing numbers with theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hierarchy import Hierarchy
from .risk import Loss, hierarchical_correctness, sample_loss
from .rules import DecisionPaths, Rule, decision_paths
from .validation import check_labels, check_theta


@dataclass(frozen=True)
class RCCurve:
    """Hierarchical risk–coverage curve of one rule.

    coverage, risk, thresholds: (n_points,). Point k is the operating point for every θ in
    (thresholds[k-1], thresholds[k]] (the first from θ = 0), listed in increasing θ.
    events: (n_points − 1,) sorted θ values at which the operating point changes; on a ``dec``
    grid curve, the grid values (θ then selects the first grid value ≥ θ).
    """

    rule: str
    loss: str
    coverage: np.ndarray
    risk: np.ndarray
    thresholds: np.ndarray
    events: np.ndarray

    def index_at(self, theta: float) -> int:
        """Index of the point that θ selects (predictions accept when f ≥ θ)."""
        return int(np.searchsorted(self.events, check_theta(theta), side="left"))

    def at(self, theta: float) -> tuple[float, float]:
        """(coverage, risk) at θ."""
        k = self.index_at(theta)
        return float(self.coverage[k]), float(self.risk[k])

    @property
    def haurc(self) -> float:
        return area_under_rc(self.coverage, self.risk, self.thresholds)


def area_under_rc(coverage: np.ndarray, risk: np.ndarray, thresholds: np.ndarray | None = None) -> float:
    """Trapezoidal area under (coverage, risk) points sorted by coverage, ties by θ descending.

    Not normalised by the coverage range, as the authors' ``sklearn.metrics.auc`` (§4.3).
    """
    c, r = np.asarray(coverage, float), np.asarray(risk, float)
    t = np.zeros_like(c) if thresholds is None else np.asarray(thresholds, float)
    order = np.lexsort((-t, c))
    c, r = c[order], r[order]
    return float(np.sum(np.diff(c) * (r[1:] + r[:-1]) / 2.0))


def rounded_threshold_grid(node_probs: np.ndarray, dec: int = 2, chunk: int = 8192) -> np.ndarray:
    """The authors' θ set: unique node probabilities, clipped to ≤ 1, rounded to ``dec`` decimals."""
    if not 0 <= dec <= 6:
        raise ValueError(f"dec must be between 0 and 6, got {dec}")
    scale = 10**dec
    present = np.zeros(scale + 1, dtype=bool)
    for start in range(0, node_probs.shape[0], chunk):  # chunks keep the temporaries small
        keys = np.rint(np.clip(node_probs[start: start + chunk], 0.0, 1.0) * scale).astype(np.int64)
        present |= np.bincount(keys.ravel(), minlength=scale + 1).astype(bool)
    return np.flatnonzero(present) / scale


def _record_losses(hierarchy: Hierarchy, paths: DecisionPaths, labels: np.ndarray, loss: Loss) -> tuple[np.ndarray, np.ndarray]:
    cov = hierarchy.coverage[paths.nodes]
    lab = np.broadcast_to(labels[:, None], paths.nodes.shape)
    return cov, sample_loss(hierarchy, paths.nodes, lab, loss)


def hierarchical_rc_curve(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    rule: Rule = "climbing",
    loss: Loss = "01",
    dec: int | None = None,
    paths: DecisionPaths | None = None,
) -> RCCurve:
    """Hierarchical RC curve of ``rule``.

    Parameters
    ----------
    node_probs : (n_samples, n_nodes) node probabilities.
    labels : (n_samples,) true leaf indices.
    loss : ``"01"`` (hierarchical 0/1 risk) or ``"severity"`` (LCA severity).
    dec : None for the exact curve (every breakpoint); an int for the authors' variant that
        evaluates θ only on node probabilities rounded to ``dec`` decimals (they used 2).
    paths : precomputed ``decision_paths`` for ``rule`` (saves work across losses).
    """
    if paths is None:
        paths = decision_paths(hierarchy, node_probs, rule)
    n = paths.n_samples
    labels = check_labels(labels, n, hierarchy.n_leaves)
    cov, los = _record_losses(hierarchy, paths, labels, loss)

    # Leaving record j for record j+1 happens when θ passes values[:, j].
    live = np.arange(paths.nodes.shape[1] - 1)[None, :] < (paths.lengths[:, None] - 1)
    t = paths.values[:, :-1][live]
    d_cov = np.diff(cov, axis=1)[live]
    d_loss = np.diff(los, axis=1)[live]
    order = np.argsort(t, kind="stable")
    t, d_cov, d_loss = t[order], d_cov[order], d_loss[order]
    last_of_group = np.flatnonzero(np.r_[t[1:] != t[:-1], True]) if t.size else np.zeros(0, int)
    events = t[last_of_group]
    coverage = (cov[:, 0].sum() + np.r_[0.0, np.cumsum(d_cov)[last_of_group]]) / n
    risk = (los[:, 0].sum() + np.r_[0.0, np.cumsum(d_loss)[last_of_group]]) / n
    thresholds = np.r_[events, 1.0]
    # Running sums of ± differences leave ~1e-13 residues (−0.0 coverage at the root): clamp.
    curve = RCCurve(rule, loss, np.clip(coverage, 0.0, 1.0), np.clip(risk, 0.0, 1.0), thresholds, events)
    if dec is None:
        return curve
    grid = rounded_threshold_grid(node_probs, dec)
    # Compare in the probabilities' precision, as the authors' θ are rounded copies of them.
    k = np.searchsorted(events, grid.astype(np.asarray(node_probs).dtype).astype(np.float64), side="left")
    # On a grid curve, θ selects the first grid value ≥ θ (exact at the grid values themselves).
    return RCCurve(rule, loss, coverage[k], curve.risk[k], grid, grid[:-1])


def hierarchical_aurc(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    rule: Rule = "climbing",
    loss: Loss = "01",
    dec: int | None = None,
) -> float:
    """Area under the hierarchical RC curve (raw; the paper reports ×1000)."""
    return hierarchical_rc_curve(hierarchy, node_probs, labels, rule, loss, dec).haurc


def hierarchical_gain(haurc_selective: float, haurc_rule: float) -> float:
    """Percent hAURC reduction of a rule relative to Selective; positive means better (§4.4)."""
    if haurc_selective <= 0:
        return float("nan")
    return 100.0 * (haurc_selective - haurc_rule) / haurc_selective


def flat_aurc(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Standard AURC: mean selective risk over the N coverages k/N, most confident first."""
    conf = np.asarray(confidence, float)
    err = 1.0 - np.asarray(correct, float)
    if conf.shape != err.shape or conf.ndim != 1 or conf.size == 0:
        raise ValueError("confidence and correct must be non-empty 1-D arrays of equal length")
    err = err[np.argsort(-conf, kind="stable")]
    return float(np.mean(np.cumsum(err) / np.arange(1, err.size + 1)))


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 15) -> float:
    """ECE with equal-width bins (lower, upper]; confidence 0 is in no bin but counts in N (§5.2)."""
    conf = np.asarray(confidence, float)
    acc = np.asarray(correct, float)
    if conf.shape != acc.shape or conf.ndim != 1 or conf.size == 0:
        raise ValueError("confidence and correct must be non-empty 1-D arrays of equal length")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    b = np.searchsorted(edges, conf, side="left") - 1
    ok = (b >= 0) & (b < n_bins)
    gap = np.bincount(b[ok], weights=conf[ok] - acc[ok], minlength=n_bins)
    return float(np.abs(gap).sum() / conf.size)


@dataclass(frozen=True)
class CCCurve:
    """Calibration–coverage curve: ECE of a rule's confidences at each θ. Arrays of shape (n_points,)."""

    rule: str
    thresholds: np.ndarray
    coverage: np.ndarray
    ece: np.ndarray


def calibration_coverage_curve(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    rule: Rule = "climbing",
    thresholds: np.ndarray | None = None,
    n_bins: int = 15,
    paths: DecisionPaths | None = None,
) -> CCCurve:
    """ECE (``n_bins`` bins, hierarchical correctness, root confidence 1.0) against coverage.

    thresholds: θ values to evaluate; default the authors' rounded grid (``dec=2``).
    """
    if paths is None:
        paths = decision_paths(hierarchy, node_probs, rule)
    labels = check_labels(labels, paths.n_samples, hierarchy.n_leaves)
    grid = rounded_threshold_grid(node_probs, 2) if thresholds is None else np.asarray(thresholds, float)
    cov = np.empty(grid.size)
    ece = np.empty(grid.size)
    for i, theta in enumerate(grid):
        nodes, conf = paths.predict(theta)
        cov[i] = hierarchy.coverage[nodes].mean()
        ece[i] = expected_calibration_error(conf, hierarchical_correctness(hierarchy, nodes, labels), n_bins)
    return CCCurve(paths.rule, grid, cov, ece)
