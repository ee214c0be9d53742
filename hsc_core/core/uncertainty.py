"""Bootstrap 95 % confidence intervals for hAURC and hierarchical gain (paired over samples).

A difference of 1–4 % between rules on a couple of thousand images can be noise, so every number
the report and the Overview show comes with a percentile bootstrap interval
(``scipy.stats.bootstrap``): resample the evaluation samples with replacement, recompute every
rule's hAURC on the *same* resample (paired, so the gain of a rule vs Selective keeps its
correlation), repeat ``N_RESAMPLES`` times, and take the 2.5 / 97.5 % percentiles.

Fast because no resample recomputes a curve from scratch. A resample is a vector of counts w
(how often each sample was drawn), and the exact RC curve of the resampled set is the full set's
curve with every sample weighted by w: the operating point changes only at the full set's events
(a sample drawn 0 times adds a zero-length step, which adds no area). So the per-sample events
(θ, Δcoverage, Δloss) are sorted once, and each resample is a weighted cumulative sum over them:
O(E) per resample for E events, in batches of resamples (``RuleEvents``, ``weighted_haurc``).
``bench/uncertainty_bench.py`` times it on 1,894 and 50,000 samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import stats

from .curves import hierarchical_gain
from .events import RuleEvents, rule_events
from .hierarchy import Hierarchy
from .risk import Loss
from .rules import RULES, DecisionPaths

N_RESAMPLES = 1000
# Above this many evaluation samples 1,000 resamples take tens of seconds (~40 s at 50,000 on one
# core), so interactive front ends compute them on request rather than on first render.
ON_DEMAND_SAMPLES = 20_000
# The bootstrap's work is its events (operating-point changes), up to samples × path records per
# rule: Climbing on a 1,000-deep caterpillar has ~1,000 per sample, so 270 samples cost what 16,000
# do on ImageNet. Measured on 2 cores (bench/link_costs.py): 1.8 s for ImageNet's 1,705 samples × 17
# records, 11 s for a caterpillar's 270 × 1,001; a page bootstraps both TS settings, so it waits
# for a request above ON_DEMAND_SAMPLES × ON_DEMAND_RECORDS = 100,000 samples × records (~5 s each).
ON_DEMAND_RECORDS = 5
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 0
# Elements of one (events × batch) work matrix (~8 MB of float64), and the batch's bounds:
# measured, 8 resamples per batch run ~1.7× faster than 2 on 138k events, and much larger
# batches run slower again, out of cache.
_BATCH_ELEMENTS = 1_000_000
_BATCH_MIN, _BATCH_MAX = 8, 64


def intervals_on_request(n_samples: int, n_records: int) -> bool:
    """Whether an interactive front end should compute the bootstrap only on request: more than
    ``ON_DEMAND_SAMPLES`` samples, or paths so long (``n_records``, the longest decision path of
    the rules bootstrapped, ``DecisionPaths.nodes.shape[1]``) that the work exceeds what
    ``ON_DEMAND_SAMPLES`` samples with ``ON_DEMAND_RECORDS`` records cost.

    >>> intervals_on_request(1_705, 19), intervals_on_request(5_000, 1_001), intervals_on_request(50_000, 5)
    (False, True, True)
    """
    return n_samples > ON_DEMAND_SAMPLES or n_samples * max(n_records, 1) > ON_DEMAND_SAMPLES * ON_DEMAND_RECORDS


def weighted_haurc(events: RuleEvents, weights: np.ndarray) -> np.ndarray | float:
    """hAURC of the curve with sample i counted ``weights[b, i]`` times, for each row b.

    weights : (B, n_samples) non-negative counts (a bootstrap resample), or (n_samples,).
    Returns (B,) (or a scalar for 1-D weights). With all weights 1 this equals
    ``hierarchical_rc_curve(...).haurc`` (up to float rounding).
    """
    w = np.asarray(weights, dtype=float)
    area = haurc_of_points(*weighted_points(events, np.atleast_2d(w)), monotone=events.monotone)
    return float(area[0]) if w.ndim == 1 else area


def haurc_of_points(cov: np.ndarray, risk: np.ndarray, total: np.ndarray, *, monotone: bool) -> np.ndarray:
    """(B,) hAURC of ``weighted_points``' curves; ``monotone``: the rule's ``RuleEvents.monotone``."""
    if monotone:
        # Coverage never rises with θ: θ order is coverage order reversed, and points of equal
        # coverage add no width, so their order (the tie rule) cannot change the area.
        area = -np.sum(np.diff(cov, axis=0) * (risk[1:] + risk[:-1]), axis=0)
    else:
        # Sort by coverage, ties by θ descending (curves.area_under_rc): reverse θ order, then a
        # stable sort per resample, which finds its row nearly sorted.
        cov, risk = cov[::-1].T, risk[::-1].T
        order = np.argsort(cov, axis=1, kind="stable")
        cov = np.take_along_axis(cov, order, axis=1)
        risk = np.take_along_axis(risk, order, axis=1)
        area = np.sum(np.diff(cov, axis=1) * (risk[:, 1:] + risk[:, :-1]), axis=1)
    return area / (2.0 * total**2)


def weighted_points(events: RuleEvents, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The curve's points with sample i counted ``weights[b, i]`` times, as weighted *sums*.

    weights : (B, n_samples) counts. Returns (coverage, risk, total): coverage and risk of shape
    (G + 1, B), the θ = 0 point then one per θ group, each the sum of the weighted samples' values
    (divide by ``total``, (B,), for the curve's means).
    """
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    # Events × resamples layout: the cumulative sums then run down rows, vectorised across
    # resamples (a running sum along a row cannot use SIMD and is ~5× slower).
    # (E, B), reused for coverage and risk; np.take copies rows several times faster than w.T[idx].
    steps = np.take(np.ascontiguousarray(w.T), events.event_sample, axis=0)
    work = np.empty_like(steps)  # one (E, B) scratch for both running sums: no second allocation
    cov = _points(w @ events.base_cov, steps, events.d_cov, events.group_end, work)
    risk = _points(w @ events.base_loss, steps, events.d_loss, events.group_end, work)
    return cov, risk, w.sum(axis=1)


def _points(base: np.ndarray, steps: np.ndarray, delta: np.ndarray, group_end: np.ndarray,
            work: np.ndarray) -> np.ndarray:
    """(G + 1, B) weighted sums at each curve point: the θ = 0 value, then after each θ group.

    ``work`` : (E, B) float64 scratch, overwritten.
    """
    run = np.multiply(steps, delta[:, None], out=work)
    np.cumsum(run, axis=0, out=run)
    out = np.empty((group_end.size + 1, steps.shape[1]))
    out[0] = base
    np.add(np.take(run, group_end, axis=0), base[None, :], out=out[1:])
    return out


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap confidence interval [low, high]."""

    estimate: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """The interval lies entirely above or below 0 (a clear difference at this confidence)."""
        return bool(self.low > 0 or self.high < 0)


@dataclass(frozen=True)
class BootstrapResult:
    """hAURC of each rule and gain (%) of each rule vs Selective, each with its interval.

    ``gain`` has every rule but Selective. Intervals are percentile intervals of ``n_resamples``
    paired resamples of the ``n_samples`` evaluation samples, drawn with ``seed``.
    """

    haurc: dict[str, Interval]
    gain: dict[str, Interval]
    loss: str
    n_samples: int
    n_resamples: int
    confidence: float
    seed: int


def counts_from_indices(indices: np.ndarray, n: int) -> np.ndarray:
    """(B, n) draw counts of each sample from (B, n) resampled indices."""
    idx = np.atleast_2d(np.asarray(indices, dtype=np.int64))
    offsets = (np.arange(idx.shape[0]) * n)[:, None]
    return np.bincount((idx + offsets).ravel(), minlength=idx.shape[0] * n).reshape(idx.shape[0], n).astype(float)


def _gains(sel: np.ndarray, rule: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sel > 0, 100.0 * (sel - rule) / sel, np.nan)


def bootstrap_haurc(
    hierarchy: Hierarchy,
    labels: np.ndarray,
    paths: Mapping[str, DecisionPaths],
    loss: Loss = "01",
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> BootstrapResult:
    """Paired percentile-bootstrap intervals of every rule's hAURC and gain vs Selective.

    Parameters
    ----------
    labels : (n_samples,) true leaves of the evaluation samples.
    paths : rule → ``decision_paths`` on those samples; must include ``"selective"`` for gains.
    n_resamples : resamples (default 1,000: percentile limits then move by ≲ 0.1 hAURC×1000
        between seeds on 1,894 images).
    seed : the resamples are a deterministic function of it.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 2:
        raise ValueError(f"n_resamples must be at least 2, got {n_resamples}")
    rules = [r for r in RULES if r in paths] + [r for r in paths if r not in RULES]
    if not rules:
        raise ValueError("no decision paths given")
    n = next(iter(paths.values())).n_samples
    if n < 2:
        raise ValueError(f"need at least 2 samples for a bootstrap, got {n}")
    events = {r: rule_events(hierarchy, paths[r], labels, loss) for r in rules}
    gain_rules = [r for r in rules if r != "selective"] if "selective" in rules else []
    widest = max(max(e.event_sample.size, 1) for e in events.values())
    batch = int(min(n_resamples, max(_BATCH_MIN, min(_BATCH_MAX, _BATCH_ELEMENTS // max(widest, n)))))

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        w = counts_from_indices(np.moveaxis(idx, axis, -1).reshape(-1, n), n)
        # 2-D weights, so each area is a (B,) array, never the scalar of 1-D weights
        areas = {r: cast(np.ndarray, weighted_haurc(e, w)) for r, e in events.items()}
        out = [areas[r] for r in rules] + [_gains(areas["selective"], areas[r]) for r in gain_rules]
        return np.stack(out)

    full = statistic(np.arange(n)[None, :])[:, 0]
    # Percentile intervals: BCa would add a jackknife of n more evaluations (50,000 at ImageNet scale).
    res = stats.bootstrap((np.arange(n),), statistic, n_resamples=n_resamples, batch=batch, vectorized=True,
                          confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    low, high = np.atleast_1d(res.confidence_interval.low), np.atleast_1d(res.confidence_interval.high)
    intervals = [Interval(float(e), float(lo), float(hi)) for e, lo, hi in zip(full, low, high, strict=True)]
    haurc = dict(zip(rules, intervals[: len(rules)], strict=True))
    gain = dict(zip(gain_rules, intervals[len(rules):], strict=True))
    # The gain's point estimate is the curves' own (hierarchical_gain), not a re-derivation.
    gain = {r: Interval(hierarchical_gain(haurc["selective"].estimate, haurc[r].estimate), g.low, g.high)
            for r, g in gain.items()}
    return BootstrapResult(haurc, gain, loss, n, int(n_resamples), float(confidence), int(seed))
