"""Percentile-bootstrap intervals of the metrics beyond hAURC, by sample weights (one sort, no refit).

As ``uncertainty`` does for hAURC, a resample is a vector of draw counts w and each statistic is
written for weighted samples, so a resample costs a weighted sum, not a recomputation:

* ``weighted_oracle_haurc``: the oracle's moves are ordered once (the order does not depend on w);
* ``weighted_aurc_zhou`` / ``weighted_augrc``: the copies of a sample sit next to each other in
  the confidence order, so each sample's share is a closed form of its first and last position;
* ``weighted_prf``: pooled counts.

With all weights 1 each equals its unweighted function (tests check it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from scipy import stats

from .selective_metrics import OracleMoves
from .uncertainty import BOOTSTRAP_SEED, CONFIDENCE, N_RESAMPLES, Interval, counts_from_indices


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


def bootstrap_statistics(statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]], n: int, *,
                         n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
                         seed: int = BOOTSTRAP_SEED) -> dict[str, Interval]:
    """Paired percentile-bootstrap intervals (``scipy.stats.bootstrap``) of weighted statistics.

    statistics : name → f(weights) with weights (B, n) draw counts, returning (B,).
    The estimate is each statistic at all weights 1.
    """
    names = list(statistics)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        w = counts_from_indices(np.moveaxis(idx, axis, -1).reshape(-1, n), n)
        return np.stack([statistics[k](w) for k in names])

    full = statistic(np.arange(n)[None, :])[:, 0]
    res = stats.bootstrap((np.arange(n),), statistic, n_resamples=n_resamples, batch=64, vectorized=True,
                          confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    low, high = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
    return {k: Interval(float(e), float(lo), float(hi)) for k, e, lo, hi in zip(names, full, low, high, strict=True)}
