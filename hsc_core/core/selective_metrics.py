"""Selective-classification metrics beyond hAURC: oracle/excess and achievable (convex-hull) areas,
AURC estimators, AUGRC, and risk@coverage / coverage@risk read off exact RC curves.

How the paper's hAURC relates to AUGRC (Traub et al., NeurIPS 2024): the hierarchical risk
divides the loss by *all* n samples (a root prediction counts as correct, not as removed), so it
is a generalized risk; on a flat tree the Selective rule's hAURC is exactly the area under the
generalized risk–coverage curve, AUGRC, not AURC (``augrc``; tests check it against
torch-uncertainty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .curves import RCCurve, area_under_rc
from .hierarchy import Hierarchy
from .risk import Loss, sample_loss
from .rules import DecisionPaths
from .validation import check_labels, quote

AurcEstimator = Literal["plugin", "zhou", "trapezoid"]
AURC_ESTIMATORS: tuple[str, ...] = ("plugin", "zhou", "trapezoid")


def _ranked_losses(confidence: np.ndarray, loss: np.ndarray) -> np.ndarray:
    conf = np.asarray(confidence, dtype=np.float64)
    los = np.asarray(loss, dtype=np.float64)
    if conf.shape != los.shape or conf.ndim != 1 or conf.size == 0:
        raise ValueError("confidence and loss must be non-empty 1-D arrays of equal length")
    if not (np.isfinite(conf).all() and np.isfinite(los).all()):
        raise ValueError("confidence and loss must be finite")
    return los[np.argsort(-conf, kind="stable")]  # most confident first


def aurc(confidence: np.ndarray, loss: np.ndarray, *, estimator: AurcEstimator = "plugin") -> float:
    """Flat AURC of per-sample losses ranked by confidence, with a choice of estimator.

    Parameters
    ----------
    confidence : (n,) scores, higher accepted first (ties keep sample order).
    loss : (n,) per-sample losses (1 − correctness for the 0/1 loss).
    estimator :
        ``"plugin"`` — Geifman et al. (ICLR 2019): the mean of the n selective risks at
        coverages k/n (``curves.flat_aurc``); equals (1/n) Σᵢ ℓ₍ᵢ₎ (H_n − H_{i−1}).
        ``"zhou"`` — the finite-sample-corrected Monte-Carlo estimator of Zhou et al. (ICML 2025,
        "A novel characterization of the population AURC"): weights (H_{n−1} − H_{i−1}) / n, i.e.
        the plug-in minus mean(ℓ)/n, its O(1/n) bias.
        ``"trapezoid"`` — trapezoids over coverages 1/n … 1 rescaled to a unit support, as
        torch-uncertainty's ``AURC`` (n ≥ 2).

    Examples
    --------
    >>> conf, loss = np.array([0.9, 0.8, 0.6]), np.array([0.0, 1.0, 1.0])
    >>> round(aurc(conf, loss), 6), round(aurc(conf, loss, estimator="zhou"), 6)   # risks 0, 1/2, 2/3
    (0.388889, 0.166667)
    """
    if estimator not in AURC_ESTIMATORS:
        raise ValueError(f"unknown estimator {quote(estimator)}; choose one of {', '.join(AURC_ESTIMATORS)}")
    los = _ranked_losses(confidence, loss)
    n = los.size
    risks = np.cumsum(los) / np.arange(1, n + 1)
    if estimator == "plugin":
        return float(risks.mean())
    if estimator == "trapezoid":
        if n < 2:
            raise ValueError("the trapezoid estimator needs at least 2 samples")
        return float((risks.sum() - (risks[0] + risks[-1]) / 2.0) / n / (1.0 - 1.0 / n))
    harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, n))]  # H_0 … H_{n−1}
    weights = (harmonic[-1] - harmonic) / n                     # i = 1 … n → H_{n−1} − H_{i−1}
    return float(np.dot(los, weights))


def augrc(confidence: np.ndarray, loss: np.ndarray) -> float:
    """Area under the generalized risk–coverage curve (Traub et al., NeurIPS 2024).

    Generalized risk at coverage k/n = (sum of the k accepted losses) / n; trapezoids from
    coverage 0 (risk 0) to 1, as hAURC integrates. torch-uncertainty's ``AUGRC`` integrates from
    1/n and rescales by 1/(1 − 1/n); the two differ by that first trapezoid only.

    Examples
    --------
    >>> round(augrc(np.array([0.9, 0.8, 0.6]), np.array([0.0, 1.0, 1.0])), 6)   # (0 + ½·⅓ + 1½·⅓)/3
    0.222222
    """
    los = _ranked_losses(confidence, loss)
    n = los.size
    gen = np.r_[0.0, np.cumsum(los)] / n
    return float(np.sum((gen[1:] + gen[:-1]) / 2.0) / n)


@dataclass(frozen=True)
class OracleMoves:
    """The oracle's moves of one rule, in the oracle's order.

    base_cov, base_loss : (n,) each sample's coverage and loss at θ = 0 (its first record).
    sample, d_cov, d_loss : (M,) the moves: sample, Δcoverage (< 0 or 0) and Δloss, sorted by
        loss removed per coverage given up, best first (each sample's own moves stay in order).
    """

    base_cov: np.ndarray
    base_loss: np.ndarray
    sample: np.ndarray
    d_cov: np.ndarray
    d_loss: np.ndarray

    @property
    def n_samples(self) -> int:
        return int(self.base_cov.size)


def oracle_moves(hierarchy: Hierarchy, paths: DecisionPaths, labels: np.ndarray, loss: Loss = "01") -> OracleMoves:
    """The oracle ordering of a rule's operating points (see ``oracle_haurc``).

    Each sample may sit at any of its records (its coverage φ and loss there). From θ = 0 the
    oracle gives up coverage where it removes the most loss per coverage: each sample's moves
    follow the lower convex hull of its (coverage given up, loss) points, and all samples' hull
    segments are merged by slope — the greedy optimum of this separable problem, never worse than
    any threshold on any confidence. Gift wrapping, vectorised over samples: O(n · records²).
    """
    labels = check_labels(labels, paths.n_samples, hierarchy.n_leaves)
    nodes = paths.nodes
    n, width = nodes.shape
    cov = hierarchy.coverage[nodes]
    los = np.asarray(sample_loss(hierarchy, nodes, np.broadcast_to(labels[:, None], nodes.shape), loss), dtype=float)
    real = np.arange(width)[None, :] < paths.lengths[:, None]
    x = cov[:, :1] - cov                      # coverage given up, ≥ 0 for points the oracle can move to
    rows = np.arange(n)
    cur = np.zeros(n, dtype=np.int64)
    seg_rows, seg_dx, seg_dl, seg_slope, seg_step = [], [], [], [], []
    for step in range(width):
        dx = x - x[rows, cur][:, None]
        dl = los - los[rows, cur][:, None]
        cand = real & ((dx > 0) | ((dx == 0) & (dl < 0)))
        if not cand.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(cand, np.where(dx > 0, dl / np.where(dx > 0, dx, 1.0), -np.inf), np.inf)
        best = slope.min(axis=1)
        tie = cand & (slope == best[:, None])
        far = np.where(tie, dx, -np.inf).max(axis=1)       # ties: the farthest point, then the lowest loss
        tie &= dx == far[:, None]
        nxt = np.where(tie, -dl, -np.inf).argmax(axis=1)
        moving = cand.any(axis=1)
        r = rows[moving]
        seg_rows.append(r)
        seg_dx.append(dx[r, nxt[moving]])
        seg_dl.append(dl[r, nxt[moving]])
        seg_slope.append(best[moving])
        seg_step.append(np.full(r.size, step))
        cur = np.where(moving, nxt, cur)
    if seg_rows:
        r, dx_, dl_, sl, st_ = (np.concatenate(a) for a in (seg_rows, seg_dx, seg_dl, seg_slope, seg_step))
    else:
        r = st_ = np.zeros(0, dtype=np.int64)
        dx_ = dl_ = sl = np.zeros(0)
    order = np.lexsort((st_, r, sl))  # by slope; a sample's own moves keep their order
    return OracleMoves(cov[:, 0].astype(float), los[:, 0], r[order], -dx_[order], dl_[order])


def oracle_haurc(moves: OracleMoves) -> float:
    """Area under the oracle's RC curve (``oracle_moves``): the least hAURC any ordering of the
    rule's own operating points can reach. On a flat tree with Selective it is the oracle of
    Geifman et al. (ICLR 2019) that accepts every correct prediction before any wrong one
    (area err²/2)."""
    n = moves.n_samples
    coverage = (moves.base_cov.sum() + np.r_[0.0, np.cumsum(moves.d_cov)]) / n
    risk = (moves.base_loss.sum() + np.r_[0.0, np.cumsum(moves.d_loss)]) / n
    return float(-np.sum(np.diff(coverage) * (risk[1:] + risk[:-1])) / 2.0)


def excess_haurc(curve: RCCurve, moves: OracleMoves) -> float:
    """hAURC minus the oracle's (``oracle_haurc``): what a perfect ranking would save (E-AURC of
    Geifman et al., ICLR 2019, for hierarchical rules). ≥ 0 for rules whose coverage falls with θ."""
    return curve.haurc - oracle_haurc(moves)


def lower_hull(coverage: np.ndarray, risk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of the lower convex hull of (coverage, risk) points, by increasing coverage.

    Andrew's monotone chain; every vertex is an operating point, and every point between two is
    reachable by choosing between their thresholds at random.
    """
    c, r = np.asarray(coverage, float), np.asarray(risk, float)
    order = np.lexsort((r, c))
    hull: list[int] = []
    for i in order:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b if it lies on or above the segment a → i
            if (c[b] - c[a]) * (r[i] - r[a]) - (r[b] - r[a]) * (c[i] - c[a]) <= 0:
                hull.pop()
            else:
                break
        if hull and c[hull[-1]] == c[i]:
            continue  # same coverage, higher risk: the first (lowest risk) stays
        hull.append(int(i))
    idx = np.array(hull, dtype=np.int64)
    return c[idx], r[idx]


def achievable_haurc(curve: RCCurve) -> float:
    """Area under the achievable RC curve: the lower convex hull of the curve's operating points
    (the upper hull in coverage–accuracy terms), reachable by randomising between two thresholds.
    ≤ ``curve.haurc`` whenever the curve's coverage is monotone in θ."""
    c, r = lower_hull(curve.coverage, curve.risk)
    return area_under_rc(c, r)


def _check_points(points: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    try:
        arr = np.atleast_1d(np.asarray(points, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"{what} points must be numbers in [0, 1], got {quote(points)}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what} points must be a non-empty list of numbers in [0, 1]")
    bad = arr[~((arr >= 0) & (arr <= 1))]
    if bad.size:
        raise ValueError(f"{what} point {quote(bad[0])} is outside [0, 1]")
    return arr


def risk_at_coverage(curve: RCCurve, coverages: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(risk, θ) at each target coverage: the operating point of largest θ whose coverage is ≥
    the target (the threshold one would deploy to guarantee that coverage). NaN where no point
    reaches it. Each of shape (n_points,)."""
    targets = _check_points(coverages, "coverage")
    risk = np.full(targets.size, np.nan)
    theta = np.full(targets.size, np.nan)
    for k, c in enumerate(targets):
        ok = np.flatnonzero(curve.coverage >= c)
        if ok.size:
            j = ok[-1]  # points are listed by increasing θ
            risk[k], theta[k] = curve.risk[j], curve.thresholds[j]
    return risk, theta


def coverage_at_risk(curve: RCCurve, risks: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coverage, θ) at each target risk: the largest coverage among operating points with risk ≤
    the target (ties: the largest θ). NaN where none. Each of shape (n_points,)."""
    targets = _check_points(risks, "risk")
    cov = np.full(targets.size, np.nan)
    theta = np.full(targets.size, np.nan)
    for k, r in enumerate(targets):
        ok = np.flatnonzero(curve.risk <= r)
        if ok.size:
            best = curve.coverage[ok].max()
            j = ok[curve.coverage[ok] == best][-1]
            cov[k], theta[k] = best, curve.thresholds[j]
    return cov, theta
