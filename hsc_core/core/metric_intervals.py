"""Percentile-bootstrap intervals of the metrics beyond hAURC, by sample weights (one sort, no refit).

As ``uncertainty`` does for hAURC, a resample is a vector of draw counts w and each statistic is
written for weighted samples, so a resample costs a weighted sum, not a recomputation:

* ``weighted_oracle_haurc``: the oracle's moves are ordered once (the order does not depend on w);
* ``weighted_aurc_zhou`` / ``weighted_augrc``: the copies of a sample sit next to each other in
  the confidence order, so each sample's share is a closed form of its first and last position;
* ``weighted_prf``: pooled counts;
* ``weighted_achievable_haurc``: each resample's curve points are weighted sums over the rule's
  events (``uncertainty.weighted_points``); the lower convex hulls of all resamples are found at
  once by removing, in rounds, every point that lies on or above the chord of its neighbours.

With all weights 1 each equals its unweighted function (tests check it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from scipy import stats

from .events import RuleEvents
from .selective_metrics import OracleMoves
from .uncertainty import (
    _BATCH_ELEMENTS,
    _BATCH_MAX,
    _BATCH_MIN,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    N_RESAMPLES,
    Interval,
    counts_from_indices,
    weighted_points,
)


def _rows(weights: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(weights, dtype=np.float64))


def weighted_oracle_haurc(moves: OracleMoves, weights: np.ndarray) -> np.ndarray:
    """(B,) oracle hAURC (``selective_metrics.oracle_haurc``) with sample i counted ``weights[b, i]``
    times: the oracle's order does not depend on the counts, so this is a weighted running sum."""
    w = _rows(weights)
    steps = w[:, moves.sample]                                                   # (B, M)
    total = w.sum(axis=1)
    cov = np.concatenate([(w @ moves.base_cov)[:, None], steps * moves.d_cov], axis=1).cumsum(axis=1)
    risk = np.concatenate([(w @ moves.base_loss)[:, None], steps * moves.d_loss], axis=1).cumsum(axis=1)
    area = -np.sum(np.diff(cov, axis=1) * (risk[:, 1:] + risk[:, :-1]), axis=1)
    return area / (2.0 * total**2)


def weighted_aurc_zhou(order_loss: np.ndarray, weights_in_order: np.ndarray) -> np.ndarray:
    """(B,) Zhou et al.'s finite-sample AURC (``selective_metrics.aurc(estimator="zhou")``) of the
    resampled set; ``order_loss``: losses most confident first, ``weights_in_order``: (B, n) counts
    in that order. Position k (1-based) of n weighs (H_{n−1} − H_{k−1})/n; the positions 1 … k
    weigh A(k) = (k·H_{n−1} − k·H_{k−1} + k − 1)/n together."""
    w = _rows(weights_in_order)
    n = order_loss.size
    harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, n + 1))]               # H_0 … H_n
    end = np.cumsum(w, axis=1)
    start = end - w
    k = np.arange(n + 1, dtype=np.float64)
    prefix = np.where(k > 0, (k * harmonic[n - 1] - k * harmonic[np.maximum(k.astype(int) - 1, 0)] + k - 1) / n, 0.0)
    share = prefix[end.astype(np.int64)] - prefix[start.astype(np.int64)]
    return (share * order_loss[None, :]).sum(axis=1)


def weighted_augrc(order_loss: np.ndarray, weights_in_order: np.ndarray) -> np.ndarray:
    """(B,) AUGRC (``selective_metrics.augrc``) of the resampled set: sample i's w copies add
    w·L_before + ℓ·w²/2 to n²·area, L_before being the loss of the more confident copies."""
    w = _rows(weights_in_order)
    n = order_loss.size
    contrib = w * order_loss[None, :]
    before = np.cumsum(contrib, axis=1) - contrib
    return (w * before + order_loss[None, :] * w**2 / 2.0).sum(axis=1) / n**2


def lower_hull_areas(coverage: np.ndarray, risk: np.ndarray, *, monotone: bool = False) -> np.ndarray:
    """(B,) trapezoidal area under the lower convex hull of each column's points (coverage, risk),
    each (P, B): column b is one point set. Equals ``selective_metrics.achievable_haurc`` per column.

    monotone : coverage never rises down the rows (a rule's θ order when ``RuleEvents.monotone``):
        the rows reversed are then sorted by coverage, and only ties of coverage are checked.

    All columns at once: order each by (coverage, risk), then repeatedly drop every point on or
    above the chord of its surviving neighbours (never a hull vertex, so dropping them together is
    safe) and every repeat of the point before it, until none is dropped; what is left is convex,
    i.e. the hull. The first round compares array neighbours (slices, no gathers) and on RC curves
    drops ~98 % of the points; the survivors are then packed to the front whenever fewer than
    half remain, so the later rounds are cheap.
    """
    c, r, dc, dr = _by_coverage(np.asarray(coverage, np.float64), np.asarray(risk, np.float64), monotone)
    if c.shape[0] > 2:
        # cross((j−1 → j), (j−1 → j+1)) written with the steps: the dc·dr terms of the step into j cancel
        cross = dc[:-1] * dr[1:] - dr[:-1] * dc[1:]
        repeat = (dc == 0) & (dr == 0)                  # point k+1 repeats point k
        alive = np.ones(c.shape, dtype=bool)
        # a run of equal points keeps its first (its next neighbour is equal, so the chord test is void)
        alive[1:-1] = ~(repeat[:-1] | ((cross <= 0) & ~repeat[1:]))
        alive[-1] = ~repeat[-1]                         # the last point: only a repeat goes
        c, r, alive = _pack(c, r, alive, int(alive.sum(axis=0).max()))
    while c.shape[0] > 2:
        p = c.shape[0]
        idx = np.arange(p)[:, None]
        before = np.maximum.accumulate(np.where(alive, idx, -1), axis=0)   # last survivor ≤ j
        after = np.minimum.accumulate(np.where(alive, idx, p)[::-1], axis=0)[::-1]  # first survivor ≥ j
        prev = np.vstack([np.full((1, c.shape[1]), -1), before[:-1]])
        nxt = np.vstack([after[1:], np.full((1, c.shape[1]), p)])
        inner = alive & (prev >= 0) & (nxt < p)
        pa, na = np.clip(prev, 0, p - 1), np.clip(nxt, 0, p - 1)
        ca, ra = np.take_along_axis(c, pa, 0), np.take_along_axis(r, pa, 0)
        cb, rb = np.take_along_axis(c, na, 0), np.take_along_axis(r, na, 0)
        # cross((a → j), (a → b)) ≤ 0: j is on or above the chord a–b (as selective_metrics.lower_hull);
        # points are distinct now, so no chord is void
        drop = inner & ((c - ca) * (rb - ra) - (r - ra) * (cb - ca) <= 0)
        if not drop.any():
            break
        alive &= ~drop
        kept = int(alive.sum(axis=0).max())
        if 2 * kept <= p:
            c, r, alive = _pack(c, r, alive, kept)
    c, r, _ = _pack(c, r, alive, c.shape[0]) if c.shape[0] > 2 else (c, r, None)
    return np.sum(np.diff(c, axis=0) * (r[1:] + r[:-1]), axis=0) / 2.0


def _by_coverage(c: np.ndarray, r: np.ndarray, monotone: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                         np.ndarray]:
    """(c, r, Δc, Δr): each column sorted by coverage, ties by risk, and its steps. A rule's curve
    reversed is sorted (monotone rules) or nearly so (a stable sort then finds runs): only ties
    of coverage need risk's order, and a risk falling within a tie is rare (a single-child chain,
    a move between nodes of equal coverage): then a full sort."""
    c, r = c[::-1], r[::-1]
    if not monotone:
        order = np.argsort(c, axis=0, kind="stable")
        c, r = np.take_along_axis(c, order, axis=0), np.take_along_axis(r, order, axis=0)
    dc, dr = np.diff(c, axis=0), np.diff(r, axis=0)
    if ((dc == 0) & (dr < 0)).any():
        order = np.lexsort((r, c), axis=0)
        c, r = np.take_along_axis(c, order, axis=0), np.take_along_axis(r, order, axis=0)
        dc, dr = np.diff(c, axis=0), np.diff(r, axis=0)
    return c, r, dc, dr


def _pack(c: np.ndarray, r: np.ndarray, alive: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each column's surviving points first (in order), ``size`` rows; the rows past a column's
    survivors repeat its last survivor (zero width: no area) and are marked dead. No sort: the
    survivors' positions come from one ``nonzero`` (every column keeps its first point)."""
    col, row = np.nonzero(alive.T)                     # by column, then row
    kept = np.bincount(col, minlength=c.shape[1])
    start = np.cumsum(kept) - kept
    idx = np.broadcast_to(row[start + kept - 1][None, :], (size, c.shape[1])).copy()
    idx[np.arange(col.size) - start[col], col] = row
    live = np.arange(size)[:, None] < kept[None, :]
    return np.take_along_axis(c, idx, 0), np.take_along_axis(r, idx, 0), live


def weighted_achievable_haurc(events: RuleEvents, weights: np.ndarray,
                              points: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(B,) achievable hAURC (``selective_metrics.achievable_haurc``: area under the lower convex
    hull of the RC points) of the curve with sample i counted ``weights[b, i]`` times. Any rule:
    the hull does not need coverage to fall with θ. ``points``: ``weighted_points(events, weights)``
    when already computed (``RulePoints``)."""
    cov, risk, total = weighted_points(events, _rows(weights)) if points is None else points
    return lower_hull_areas(cov, risk, monotone=events.monotone) / total**2


class RulePoints:
    """``weighted_points`` of one rule for the last weights asked for: the statistics of one rule
    (hAURC, excess, achievable) read one batch's curves from a single weighted sweep."""

    def __init__(self, events: RuleEvents) -> None:
        self.events = events
        self._weights: np.ndarray | None = None
        self._points: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __call__(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._weights is not weights or self._points is None:
            self._points = weighted_points(self.events, _rows(weights))
            self._weights = weights  # held, so its id cannot be reused by another array
        return self._points


def weighted_prf(both: np.ndarray, pred: np.ndarray, gold: np.ndarray, weights: np.ndarray,
                 beta: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B,) micro hP, hR, hFβ from per-sample |V̂∩Y|, |V̂|, |Y| (``hierarchical_prf``)."""
    w = _rows(weights)
    b, p, g = w @ both, w @ pred, w @ gold
    with np.errstate(divide="ignore", invalid="ignore"):
        hp = np.where(p > 0, b / p, 1.0)
        hr = np.where(g > 0, b / g, 1.0)
        denom = beta**2 * hp + hr
        hf = np.where(denom > 0, (1 + beta**2) * hp * hr / denom, 0.0)
    return hp, hr, hf


def batch_for(widest: int) -> int:
    """Resamples per batch when a statistic holds (``widest`` × batch) float arrays: the hAURC
    bootstrap's bound (``uncertainty._BATCH_ELEMENTS``), 8 to 64."""
    return int(max(_BATCH_MIN, min(_BATCH_MAX, _BATCH_ELEMENTS // max(widest, 1))))


def bootstrap_statistics(statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]], n: int, *,
                         n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
                         seed: int = BOOTSTRAP_SEED, batch: int = 64) -> dict[str, Interval]:
    """Paired percentile-bootstrap intervals (``scipy.stats.bootstrap``) of weighted statistics.

    statistics : name → f(weights) with weights (B, n) draw counts, returning (B,).
    batch : resamples per call (B); callers whose statistics hold (events × B) arrays pass
        ``batch_for(events)`` so memory stays bounded at any scale.
    The estimate is each statistic at all weights 1.
    """
    names = list(statistics)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        w = counts_from_indices(np.moveaxis(idx, axis, -1).reshape(-1, n), n)
        return np.stack([statistics[k](w) for k in names])

    full = statistic(np.arange(n)[None, :])[:, 0]
    res = stats.bootstrap((np.arange(n),), statistic, n_resamples=n_resamples, batch=batch, vectorized=True,
                          confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    low, high = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
    return {k: Interval(float(e), float(lo), float(hi)) for k, e, lo, hi in zip(names, full, low, high, strict=True)}
