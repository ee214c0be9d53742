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
from typing import Literal

import numpy as np

from .curves import RCCurve, area_under_rc
from .events import RuleEvents
from .validation import quote

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


def oracle_haurc(events: RuleEvents) -> float:
    """hAURC of the best reordering of a rule's own moves (oracle ordering).

    Each event moves one sample from one record to the next (Δcoverage, Δloss). The oracle takes
    the moves that remove the most loss per coverage given up first (wrong predictions leave
    first, correct ones are accepted first), which gives the smallest area any ordering of these
    moves can. On a flat tree with Selective, it is the oracle of Geifman et al. (ICLR 2019) that
    accepts every correct prediction before any wrong one.
    """
    n = events.n_samples
    d_cov, d_loss = events.d_cov, events.d_loss
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(d_cov < 0, d_loss / -d_cov, np.where(d_loss < 0, -np.inf, np.inf))
    # Moves that add coverage are never needed by the oracle's descent: order them last.
    order = np.lexsort((d_loss, slope))
    coverage = (events.base_cov.sum() + np.r_[0.0, np.cumsum(d_cov[order])]) / n
    risk = (events.base_loss.sum() + np.r_[0.0, np.cumsum(d_loss[order])]) / n
    return area_under_rc(np.clip(coverage, 0, 1), np.clip(risk, 0, 1), np.arange(coverage.size, dtype=float))


def excess_haurc(curve: RCCurve, events: RuleEvents) -> float:
    """hAURC minus the oracle's (``oracle_haurc``): what a perfect confidence ranking would save
    (E-AURC of Geifman et al., ICLR 2019, for hierarchical rules). ≥ 0 for monotone rules."""
    return curve.haurc - oracle_haurc(events)


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
