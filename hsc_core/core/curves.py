"""Exact hierarchical risk–coverage curves, hAURC, gain, flat AURC, ECE and CC curves (§4–5).

A rule's prediction for one sample changes only when θ passes one of its record values
(``rules.DecisionPaths``), so the whole curve is a sort of those events plus cumulative sums:
every breakpoint, no θ grid, O(E log E) for E events. The authors' rounded grid (``dec=2``) is
available for comparing numbers with theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import rows_per_chunk
from .events import rule_events
from .hierarchy import Hierarchy
from .risk import Loss, hierarchical_correctness
from .rules import DecisionPaths, Rule, decision_paths, theta_in_precision
from .validation import check_labels, quote


@dataclass(frozen=True)
class RCCurve:
    """Hierarchical risk–coverage curve of one rule.

    coverage, risk, thresholds: (n_points,). Point k is the operating point for every θ in
    (thresholds[k-1], thresholds[k]] (the first from θ = 0), listed in increasing θ.
    events: (n_points − 1,) sorted θ values at which the operating point changes; on a ``dec``
    grid curve, the grid values (θ then selects the first grid value ≥ θ). Their dtype is the
    node probabilities' precision (float32 or float64): θ is rounded to it before comparing, as
    ``DecisionPaths.predict`` does, so ``at(θ)`` always equals a direct prediction at θ.
    """

    rule: str
    loss: str
    coverage: np.ndarray
    risk: np.ndarray
    thresholds: np.ndarray
    events: np.ndarray

    @property
    def precision(self) -> str:
        """``"float32"`` or ``"float64"``: the precision in which θ is compared."""
        return self.events.dtype.name

    def index_at(self, theta: float) -> int:
        """Index of the point that θ selects (predictions accept when f ≥ θ)."""
        theta = self.events.dtype.type(theta_in_precision(theta, self.events.dtype))
        return int(np.searchsorted(self.events, theta, side="left"))

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


#: How a rule is compared with Selective when its curve stops short of Selective's coverage at
#: θ = 0 (the metric-optimal rules may never predict some samples' leaves): both hAURCs are taken
#: over the coverage range both curves cover, each as the mean risk over that range (area / width),
#: and the range is shown beside the gain. The paper's four rules reach coverage 1 as Selective
#: does, so theirs is the paper's gain, unchanged.
COMMON_RANGE_NOTE = ("A rule whose RC curve stops short of Selective's highest coverage is compared with Selective "
                     "only over the coverage range both curves cover, each hAURC taken as the mean risk over that "
                     "range, and that range is printed beside its gain. Rules whose curves reach coverage 1, as "
                     "Selective's does (the paper's four), keep the paper's gain of the raw areas, unchanged.")


def _sorted_points(curve: RCCurve) -> tuple[np.ndarray, np.ndarray]:
    """(coverage, risk) sorted as ``area_under_rc`` integrates them: by coverage, ties by θ descending."""
    c, r = np.asarray(curve.coverage, float), np.asarray(curve.risk, float)
    order = np.lexsort((-np.asarray(curve.thresholds, float), c))
    return c[order], r[order]


def coverage_range(curve: RCCurve) -> tuple[float, float]:
    """(lowest, highest) coverage the curve reaches (θ = 0 gives the highest for every listed rule)."""
    return float(np.min(curve.coverage)), float(np.max(curve.coverage))


def common_range(curve_a: RCCurve, curve_b: RCCurve) -> tuple[float, float]:
    """The coverage range both curves cover: (max of the lows, min of the highs); low ≥ high when none."""
    lo_a, hi_a = coverage_range(curve_a)
    lo_b, hi_b = coverage_range(curve_b)
    return max(lo_a, lo_b), min(hi_a, hi_b)


def haurc_on_range(curve: RCCurve, low: float, high: float) -> float:
    """Mean risk of ``curve`` over coverage [low, high]: its trapezoidal area there / (high − low).

    The same piecewise-linear curve as ``area_under_rc`` (points by coverage, ties by θ
    descending), cut at ``low`` and ``high`` by linear interpolation; so over the curve's own
    full range it is ``curve.haurc / (high − low)``. NaN when high ≤ low (no common range).

    Raises
    ------
    ValueError
        When [low, high] is not inside the curve's coverage range.
    """
    c, r = _sorted_points(curve)
    if not high > low:
        return float("nan")
    slack = 1e-9  # coverages summed in another order differ in the last bits
    if low < c[0] - slack or high > c[-1] + slack:
        raise ValueError(f"coverage range [{low}, {high}] is outside the curve's [{c[0]}, {c[-1]}]")
    c0, c1, r0, r1 = c[:-1], c[1:], r[:-1], r[1:]
    a, b = np.maximum(c0, low), np.minimum(c1, high)
    keep = (b > a) & (c1 > c0)  # segments overlapping the range (vertical ones have no area)
    c0, c1, r0, r1, a, b = c0[keep], c1[keep], r0[keep], r1[keep], a[keep], b[keep]
    slope = (r1 - r0) / (c1 - c0)
    ra, rb = r0 + slope * (a - c0), r0 + slope * (b - c0)
    return float(np.sum((b - a) * (ra + rb) / 2.0) / (high - low))


@dataclass(frozen=True)
class RangeGain:
    """A rule's gain over Selective and the coverage range it is measured over.

    gain : percent reduction of the mean risk vs Selective (``hierarchical_gain``).
    low, high : the coverage range of the comparison.
    restricted : True when the rule's curve does not span Selective's range, so the comparison is
        over the common range (front ends print the range beside the gain); False: the paper's gain.
    """

    gain: float
    low: float
    high: float
    restricted: bool

    def range_text(self, digits: int = 3) -> str:
        """``"coverage 0.000–0.947"`` (the range printed beside a restricted gain)."""
        return coverage_range_text(self.low, self.high, digits)


def coverage_range_text(low: float, high: float, digits: int = 3) -> str:
    """How every front end prints the coverage range of a gain: ``"coverage 0.000–0.947"``."""
    return f"coverage {low:.{digits}f}–{high:.{digits}f}"


def gain_on_common_range(selective: RCCurve, rule: RCCurve) -> RangeGain:
    """``rule``'s gain over ``selective``, fair by construction (``COMMON_RANGE_NOTE``).

    When ``rule``'s curve spans Selective's coverage range, the paper's gain of the raw areas
    (bit for bit); otherwise the gain of ``haurc_on_range`` over ``common_range``.
    """
    sel_range = coverage_range(selective)
    # Only the θ = 0 end decides: at the other end every rule gives the root except to samples
    # whose probability is exactly 1 in float32, which differs between rules by a few samples;
    # the paper integrates each curve from its own lowest coverage (hsc-definitions §4.1).
    if coverage_range(rule)[1] == sel_range[1]:
        return RangeGain(hierarchical_gain(selective.haurc, rule.haurc), *sel_range, restricted=False)
    low, high = common_range(selective, rule)
    if not high > low:
        return RangeGain(float("nan"), low, high, restricted=True)
    return RangeGain(hierarchical_gain(haurc_on_range(selective, low, high), haurc_on_range(rule, low, high)),
                     low, high, restricted=True)


def threshold_grid_keys(node_probs: np.ndarray, dec: int = 2, present: np.ndarray | None = None) -> np.ndarray:
    """Mark the authors' grid values present in ``node_probs`` (one chunk of rows at a time).

    present: (10**dec + 1,) bool, updated in place and returned; ``present[k]`` means k / 10**dec
    is in the grid. Feeding every chunk of rows gives the same grid as all rows at once.
    """
    if not 0 <= dec <= 6:
        raise ValueError(f"dec must be between 0 and 6, got {dec}")
    scale = 10**dec
    if present is None:
        present = np.zeros(scale + 1, dtype=bool)
    if present.all():  # nothing left to find (the usual case after the first chunk of real data)
        return present
    # Rounded in the probabilities' own precision, as the authors' torch.round; in place, in
    # row blocks, so the float temporaries stay small.
    probs = np.asarray(node_probs)
    rows = rows_per_chunk(8 * (probs.shape[1] if probs.ndim == 2 else 1))
    for start in range(0, probs.shape[0], rows):
        keys = np.clip(probs[start: start + rows], 0.0, 1.0)
        keys *= scale
        np.rint(keys, out=keys)
        if not np.isfinite(keys).all():
            raise ValueError("node_probs contain NaN")
        present[keys.astype(np.intp).ravel()] = True
    return present


def rounded_threshold_grid(node_probs: np.ndarray, dec: int = 2) -> np.ndarray:
    """The authors' θ set: unique node probabilities, clipped to ≤ 1, rounded to ``dec`` decimals."""
    if not 0 <= dec <= 6:
        raise ValueError(f"dec must be between 0 and 6, got {dec}")
    return np.flatnonzero(threshold_grid_keys(node_probs, dec)) / 10**dec  # row blocks inside


def rc_curve_from_paths(
    hierarchy: Hierarchy,
    paths: DecisionPaths,
    labels: np.ndarray,
    loss: Loss = "01",
    grid: np.ndarray | None = None,
) -> RCCurve:
    """Hierarchical RC curve of the rule whose records are ``paths``.

    paths : (n_samples, n_records) records from ``rules.decision_paths`` (or the chunked
        ``logit_chunks.decision_paths_from_logits``).
    labels : (n_samples,) true leaf indices.
    grid : None for the exact curve; the authors' θ values (``rounded_threshold_grid``,
        ascending) for their grid curve, compared in the records' precision.
    """
    n = paths.n_samples
    ev = rule_events(hierarchy, paths, labels, loss)  # the one event sweep, in row blocks
    last_of_group = ev.group_end
    events = ev.theta[last_of_group]  # in the records' precision
    coverage = (ev.base_cov.sum() + np.r_[0.0, np.cumsum(ev.d_cov)[last_of_group]]) / n
    risk = (ev.base_loss.sum() + np.r_[0.0, np.cumsum(ev.d_loss)[last_of_group]]) / n
    thresholds = np.r_[events.astype(np.float64), 1.0]
    # Running sums of ± differences leave ~1e-13 residues (−0.0 coverage at the root): clamp.
    coverage, risk = np.clip(coverage, 0.0, 1.0), np.clip(risk, 0.0, 1.0)
    if grid is None:
        return RCCurve(paths.rule, loss, coverage, risk, thresholds, events)
    grid = np.asarray(grid, dtype=np.float64)
    # The authors' θ are rounded copies of the probabilities: compare them in the same precision.
    grid_in_precision = grid.astype(paths.values.dtype)
    k = np.searchsorted(events, grid_in_precision, side="left")
    # On a grid curve, θ selects the first grid value ≥ θ (exact at the grid values themselves).
    return RCCurve(paths.rule, loss, coverage[k], risk[k], grid, grid_in_precision[:-1])


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

    For data too large to hold as a samples × nodes matrix, use ``logit_chunks.rc_curves_from_logits``
    or ``hsc_core.evaluation.ModelEvaluation`` (chunked, identical results).

    This dense path measures exactly the rows and probabilities it is given. The evaluation layer
    (``EvaluationSet.curve``, ``hsc_core.rc_curve_and_haurc``, ``hsc evaluate`` and every dashboard
    page, which use it) measures the protocol's evaluation split instead: 90 % of the samples, with
    T fitted on the other 10 % when temperature scaling is on. On the same logits the two therefore
    differ (Lite0, Selective, no TS: 0.04691 here on all 1,894 samples, 0.04722 there on 1,705);
    given the layer's rows (``ModelEvaluation.rows_for``) and T they agree exactly.

    Examples
    --------
    >>> import numpy as np
    >>> from hsc_core import Hierarchy
    >>> h = Hierarchy.from_parents([3, 3, 4, 4, -1], n_leaves=3, node_ids=["cat", "dog", "car", "animal", "root"])
    >>> from hsc_core import node_probabilities
    >>> p = node_probabilities(h, np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]))
    >>> c = hierarchical_rc_curve(h, p, np.array([1, 2]), "climbing")   # true: dog, car
    >>> c.coverage.round(3).tolist(), c.risk.tolist(), round(c.haurc, 4)  # θ ≤ 0.5, ≤ 0.8, above
    ([1.0, 0.685, 0.0], [0.5, 0.0, 0.0], 0.0789)
    """
    if paths is None:
        paths = decision_paths(hierarchy, node_probs, rule)
    grid = None if dec is None else rounded_threshold_grid(node_probs, dec)
    return rc_curve_from_paths(hierarchy, paths, labels, loss, grid)


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
    if isinstance(n_bins, (bool, np.bool_)) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer ≥ 1, got {quote(n_bins)}")
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
    node_probs: np.ndarray | None,
    labels: np.ndarray,
    rule: Rule = "climbing",
    thresholds: np.ndarray | None = None,
    n_bins: int = 15,
    paths: DecisionPaths | None = None,
) -> CCCurve:
    """ECE (``n_bins`` bins, hierarchical correctness, root confidence 1.0) against coverage.

    thresholds: θ values to evaluate; default the authors' rounded grid (``dec=2``).
    node_probs is read only to build ``paths`` or the default grid: with both ``paths`` and
    ``thresholds`` given (e.g. from ``logit_chunks.decision_paths_from_logits`` and
    ``threshold_grid_from_logits``) it may be None, so no samples × nodes matrix is needed.
    """
    if paths is None:
        if node_probs is None:
            raise ValueError("node_probs is needed to build the decision paths; pass paths")
        paths = decision_paths(hierarchy, node_probs, rule)
    labels = check_labels(labels, paths.n_samples, hierarchy.n_leaves)
    if thresholds is None:
        if node_probs is None:
            raise ValueError("node_probs is needed for the default θ grid; pass thresholds")
        grid = rounded_threshold_grid(node_probs, 2)
    else:
        grid = np.asarray(thresholds, float)
    cov = np.empty(grid.size)
    ece = np.empty(grid.size)
    for i, theta in enumerate(grid):
        nodes, conf = paths.predict(theta)
        cov[i] = hierarchy.coverage[nodes].mean()
        ece[i] = expected_calibration_error(conf, hierarchical_correctness(hierarchy, nodes, labels), n_bins)
    return CCCurve(paths.rule, grid, cov, ece)
