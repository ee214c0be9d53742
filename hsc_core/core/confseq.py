"""Anytime-valid confidence sequences for a bounded mean, updated in O(1) per observation.

The predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of Waudby-Smith & Ramdas
(2023, JRSS-B, "Estimating means of bounded random variables by betting", Theorem 2 and eqs. 13–15)
for observations X₁, X₂, … in [0, 1]:

    μ̂_t = (½ + Σ_{i≤t} X_i) / (t + 1),   σ̂²_t = (¼ + Σ_{i≤t} (X_i − μ̂_i)²) / (t + 1),
    λ_t = min(√(2 log(1/δ) / (σ̂²_{t−1} t log(1 + t))), c),       (predictable: uses X_{<t} only)
    v_t = 4 (X_t − μ̂_{t−1})²,   ψ(λ) = (−log(1 − λ) − λ) / 4,
    lower_t = (Σ λ_i X_i − log(1/δ) − Σ v_i ψ(λ_i)) / Σ λ_i,   upper_t = (Σ λ_i X_i + …) / Σ λ_i.

Each bound alone holds at every t simultaneously with probability ≥ 1 − δ (so looking after every
observation is allowed); the pair is a two-sided 1 − 2δ band. Nothing here assumes i.i.d. data:
``exp(Σ λ_i (X_i − m_i) − Σ v_i ψ(λ_i))`` is a non-negative supermartingale whenever
m_i = E[X_i | past] (Fan et al.'s inequality), so the bounds cover the λ-weighted running mean of
the conditional means, and ``upper_t < m`` for some t has probability ≤ δ whenever every m_i ≥ m
(Ville's inequality): the monitor's alarm.

The state is six running sums per stream (``BernsteinState``), so a stream of any length costs
constant memory; a chunk of observations is processed with cumulative sums, vectorised over time
and over any number of parallel streams (the tests' 1,000 null streams in one call). A missing
observation (NaN) leaves the state unchanged: a stream observed at only some times (labels that
arrive for a fraction of the samples, accuracy among the answered samples only) is the
subsequence it observes, and the guarantee holds for it when which times are observed is decided
before each observation (optional skipping).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BernsteinState", "ConfidenceBounds", "Detection", "DetectorState", "bernstein_bounds", "bernstein_update",
           "confidence_sequence", "detector_update"]

#: The largest λ (WSR's c; ½ keeps ψ small and the sequence stable after a few observations).
LAMBDA_MAX = 0.5


@dataclass(frozen=True)
class ConfidenceBounds:
    """Running estimate and confidence bounds, one value per observation time.

    estimate, lower, upper : arrays of shape (..., T): the running mean of the observations so far
        (NaN before the first) and the one-sided bounds (0 and 1 before the first observation).
    n : (..., T) int64 number of observations so far.
    """

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    n: np.ndarray


@dataclass
class BernsteinState:
    """Running sums of PrPl-EB for ``m`` parallel streams (each field has shape (m,)).

    n : observations so far; sum_x : Σ X_i; sum_dev : Σ (X_i − μ̂_i)²;
    sum_lam : Σ λ_i; sum_lam_x : Σ λ_i X_i; sum_penalty : Σ v_i ψ(λ_i).
    """

    n: np.ndarray
    sum_x: np.ndarray
    sum_dev: np.ndarray
    sum_lam: np.ndarray
    sum_lam_x: np.ndarray
    sum_penalty: np.ndarray

    @classmethod
    def empty(cls, m: int = 1) -> BernsteinState:
        """The state of ``m`` streams before any observation."""
        z = np.zeros(int(m))
        return cls(np.zeros(int(m), dtype=np.int64), z.copy(), z.copy(), z.copy(), z.copy(), z.copy())


def _psi(lam: np.ndarray) -> np.ndarray:
    return (-np.log1p(-lam) - lam) / 4.0


def _check_delta(delta: float) -> float:
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return float(delta)


def bernstein_update(state: BernsteinState, x: np.ndarray, delta: float,
                     lam_max: float = LAMBDA_MAX) -> ConfidenceBounds:
    """Feed a chunk of observations to ``state`` (updated in place) and return the bounds after each.

    Parameters
    ----------
    state : the running sums of ``m`` streams (``BernsteinState.empty(m)`` to start).
    x : (T,) for one stream or (m, T): observations in [0, 1] in time order; NaN = not observed.
    delta : each bound's error probability δ, in (0, 1) (the same δ at every call).
    lam_max : the cap c on λ, in (0, 1).

    Returns
    -------
    ``ConfidenceBounds`` with arrays shaped like ``x``: the state after each time.

    Examples
    --------
    >>> s = BernsteinState.empty()
    >>> b = bernstein_update(s, np.array([1.0, np.nan, 0.0]), delta=0.1)
    >>> b.n.tolist(), b.estimate.tolist()
    ([1, 1, 2], [1.0, 1.0, 0.5])
    """
    delta = _check_delta(delta)
    if not 0.0 < lam_max < 1.0:
        raise ValueError(f"lam_max must lie in (0, 1), got {lam_max}")
    arr = np.asarray(x, dtype=float)
    one = arr.ndim == 1
    obs = np.atleast_2d(arr)
    if obs.ndim != 2 or obs.shape[0] != state.n.size:
        raise ValueError(f"observations of shape {arr.shape} do not match {state.n.size} stream(s)")
    seen = ~np.isnan(obs)
    if np.any((obs[seen] < 0.0) | (obs[seen] > 1.0)):
        raise ValueError("observations must lie in [0, 1]")
    xv = np.where(seen, obs, 0.0)
    log_term = np.log(1.0 / delta)
    # counts and μ̂ after each time (μ̂_t with the ½ prior), and before it (μ̂_{t−1})
    n = state.n[:, None] + np.cumsum(seen, axis=1)
    sx = state.sum_x[:, None] + np.cumsum(xv, axis=1)
    mu = (0.5 + sx) / (n + 1.0)
    mu_prev = (0.5 + sx - xv) / (n - seen + 1.0)
    dev = np.where(seen, (xv - mu) ** 2, 0.0)
    sdev = state.sum_dev[:, None] + np.cumsum(dev, axis=1)
    var_prev = (0.25 + sdev - dev) / (n - seen + 1.0)  # σ̂²_{t−1}
    t = np.maximum(n, 1).astype(float)  # the observation's index (1-based) where seen
    lam = np.minimum(np.sqrt(2.0 * log_term / (var_prev * t * np.log1p(t))), lam_max)
    lam = np.where(seen, lam, 0.0)
    pen = np.where(seen, 4.0 * (xv - mu_prev) ** 2, 0.0) * _psi(lam)
    s_lam = state.sum_lam[:, None] + np.cumsum(lam, axis=1)
    s_lam_x = state.sum_lam_x[:, None] + np.cumsum(lam * xv, axis=1)
    s_pen = state.sum_penalty[:, None] + np.cumsum(pen, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = s_lam_x / s_lam
        half = (log_term + s_pen) / s_lam
        estimate = np.where(n > 0, sx / n, np.nan)
    lower = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    upper = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    if obs.shape[1]:
        state.n, state.sum_x, state.sum_dev = n[:, -1].copy(), sx[:, -1].copy(), sdev[:, -1].copy()
        state.sum_lam, state.sum_lam_x = s_lam[:, -1].copy(), s_lam_x[:, -1].copy()
        state.sum_penalty = s_pen[:, -1].copy()
    out = ConfidenceBounds(estimate, lower, upper, n)
    return ConfidenceBounds(*(a[0] for a in (out.estimate, out.lower, out.upper, out.n))) if one else out


def bernstein_bounds(x: np.ndarray, delta: float, lam_max: float = LAMBDA_MAX) -> ConfidenceBounds:
    """The confidence sequence of whole streams at once: ``bernstein_update`` from an empty state.

    Parameters
    ----------
    x : (T,) or (m, T) observations in [0, 1], NaN = not observed.
    delta : each bound's error probability δ; lam_max : the cap on λ.

    Returns
    -------
    ``ConfidenceBounds`` with arrays of ``x``'s shape.

    Examples
    --------
    >>> b = confidence_sequence(np.ones(200), delta=0.1)
    >>> round(float(b.lower[-1]), 3), float(b.upper[-1])
    (0.976, 1.0)
    """
    arr = np.asarray(x, dtype=float)
    return bernstein_update(BernsteinState.empty(1 if arr.ndim == 1 else arr.shape[0]), arr, delta, lam_max)


#: The public name (``hsc_core.confidence_sequence``).
confidence_sequence = bernstein_bounds


# ---------------------------------------------------------------------------- the alarm: a change detector
#: λ values of the detector's bets (each is a test; the alarm needs K/δ against the best).
DETECTOR_LAMBDAS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.35, 0.5)


@dataclass
class DetectorState:
    """Running state of ``detector_update`` for ``m`` streams and K bets (fields (m,) or (m, K)).

    n, sum_x : observations so far and their sum (the predictable μ̂ of the penalty);
    log_d : log of the best window's weighted wealth (−inf before the first observation);
    start, start_time : that window's first observation (1-based count) and its time;
    win_n, win_x, win_pen : the window's observations, their sum and Σ v ψ(λ).
    """

    n: np.ndarray
    sum_x: np.ndarray
    log_d: np.ndarray
    start: np.ndarray
    start_time: np.ndarray
    win_n: np.ndarray
    win_x: np.ndarray
    win_pen: np.ndarray

    @classmethod
    def empty(cls, m: int = 1, k: int = len(DETECTOR_LAMBDAS)) -> DetectorState:
        z = np.zeros((int(m), int(k)))
        return cls(np.zeros(int(m), dtype=np.int64), np.zeros(int(m)), np.full((int(m), int(k)), -np.inf),
                   np.zeros((int(m), int(k)), dtype=np.int64), np.zeros((int(m), int(k)), dtype=np.int64),
                   z.copy(), z.copy(), z.copy())


@dataclass(frozen=True)
class Detection:
    """The detector after each time (arrays shaped like the observations, (T,) or (m, T)).

    statistic : log(best wealth) − log(K/δ); the alarm rings where it is ≥ 0.
    since : the time at which the best window starts (0 before any observation).
    estimate, upper : that window's mean and its anytime-valid upper bound (1 before any observation);
        ``upper < level`` exactly where the alarm rings.
    """

    statistic: np.ndarray
    since: np.ndarray
    estimate: np.ndarray
    upper: np.ndarray


def detector_update(state: DetectorState, x: np.ndarray, level: float, delta: float,
                    times: np.ndarray | None = None, lambdas: tuple[float, ...] = DETECTOR_LAMBDAS,
                    windows: bool = True) -> Detection:
    """Test, after every observation, "every conditional mean so far is ≥ ``level``" (updates ``state``).

    For every window of observations s…t and bet λ_k the process
    ``w_s exp(Σ_{i=s}^t λ_k (level − X_i) − v_i ψ(λ_k))`` (v_i, ψ as in ``bernstein_update``,
    w_s = 1/(s(s+1))) is at most w_s times a non-negative supermartingale under that hypothesis,
    so their maximum over s ever reaching K/δ has probability ≤ δ (Ville; a union over the K bets).
    The maximum over s obeys log D_t = max(log D_{t−1}, log w_t) + g_t, computed for a chunk with
    cumulative sums and a running maximum: O(K) state, vectorised over time and streams. A window
    starting at the change forgets the samples before it, so the delay does not grow with a long
    clean prefix (a CUSUM/Shiryaev–Roberts-style e-detector that still bounds the probability of
    *any* false alarm, not only its rate).

    Parameters
    ----------
    state : ``DetectorState.empty(m, K)``; x : (T,) or (m, T) observations in [0, 1], NaN = none.
    level : the promised level of the mean, in (0, 1); delta : the alarm's error probability.
    times : (T,) time of each column (default 1…T after the state's last time is unknown: positions).
    lambdas : the K bets, each in (0, 1).
    windows : also track the best window (``since``, ``estimate``, ``upper``); False gives only the
        statistic (NaN elsewhere, and the state is then for this one call), several times faster
        (the tests' 1,000 null streams).
    """
    delta = _check_delta(delta)
    arr = np.asarray(x, dtype=float)
    one = arr.ndim == 1
    obs = np.atleast_2d(arr)
    m, T = obs.shape
    lam = np.asarray(lambdas, dtype=float)[None, :, None]
    K = lam.shape[1]
    if state.log_d.shape != (m, K):
        raise ValueError(f"observations of shape {arr.shape} do not match the detector's {state.log_d.shape}")
    tt = np.arange(1, T + 1) if times is None else np.asarray(times, dtype=np.int64)
    seen = ~np.isnan(obs)
    xv = np.where(seen, obs, 0.0)
    n = state.n[:, None] + np.cumsum(seen, axis=1)  # observation count after each time
    sx = state.sum_x[:, None] + np.cumsum(xv, axis=1)
    mu_prev = (0.5 + sx - xv) / (n - seen + 1.0)
    pen = np.where(seen, 4.0 * (xv - mu_prev) ** 2, 0.0)[:, None, :] * _psi(lam)  # (m, K, T)
    g = np.where(seen[:, None, :], lam * (level - xv[:, None, :]), 0.0) - pen
    with np.errstate(divide="ignore"):
        log_w = np.where(seen, -np.log(np.maximum(n, 1) * (n + 1.0)), -np.inf)[:, None, :]
    c = np.cumsum(g, axis=2)
    cand = np.broadcast_to(log_w - (c - g), g.shape)
    run = np.maximum.accumulate(cand, axis=2)
    carried = state.log_d[:, :, None] >= run  # the window from before the chunk is still the best
    log_d = np.where(carried, state.log_d[:, :, None], run) + c
    threshold = np.log(K / delta)
    if not windows:
        stat = log_d.max(axis=1) - threshold
        nan = np.full(stat.shape, np.nan)
        return Detection(*(a[0] for a in (stat, nan, nan, nan))) if one else Detection(stat, nan, nan, nan)
    pos = np.maximum.accumulate(np.where((cand == run) & np.isfinite(cand), np.arange(T), -1), axis=2)
    p = np.maximum(pos, 0)
    # window sums: from the chunk's start position p (inclusive), or the carried window plus the chunk
    cs_n = np.cumsum(seen, axis=1)[:, None, :].astype(float)
    cs_x = np.cumsum(xv, axis=1)[:, None, :]
    cs_p = np.cumsum(pen, axis=2)

    def since_p(cs: np.ndarray, own: np.ndarray) -> np.ndarray:
        cs = np.broadcast_to(cs, g.shape)
        before = np.take_along_axis(cs, p, axis=2) - np.take_along_axis(np.broadcast_to(own, g.shape), p, axis=2)
        return cs - before

    seen_b = seen[:, None, :].astype(float)
    win_n = np.where(carried, state.win_n[:, :, None] + cs_n, since_p(cs_n, seen_b))
    win_x = np.where(carried, state.win_x[:, :, None] + cs_x, since_p(cs_x, xv[:, None, :]))
    win_pen = np.where(carried, state.win_pen[:, :, None] + cs_p, since_p(cs_p, pen))
    n_b = np.broadcast_to(n[:, None, :], g.shape)
    start = np.where(carried, state.start[:, :, None], np.take_along_axis(n_b, p, axis=2))
    start_time = np.where(carried, state.start_time[:, :, None], tt[p])
    best = np.argmax(log_d, axis=1)[:, None, :]  # (m, 1, T)

    def pick(a: np.ndarray) -> np.ndarray:
        return np.take_along_axis(a, best, axis=1)[:, 0, :]

    bn, bx, bp, bs = pick(win_n), pick(win_x), pick(win_pen), pick(start).astype(float)
    blam = np.asarray(lambdas, dtype=float)[best[:, 0, :]]
    ok = bn > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.where(ok, bx / bn, np.nan)
        log_ws = -np.log(bs * (bs + 1.0))
        upper = np.where(ok, np.minimum(est + (threshold - log_ws + bp) / (blam * bn), 1.0), 1.0)
    stat = pick(log_d) - threshold
    since = np.where(ok, pick(start_time), 0)
    if T:
        state.n, state.sum_x = n[:, -1].copy(), sx[:, -1].copy()
        state.log_d = log_d[:, :, -1].copy()
        state.start, state.start_time = start[:, :, -1].copy(), start_time[:, :, -1].copy()
        state.win_n, state.win_x = win_n[:, :, -1].copy(), win_x[:, :, -1].copy()
        state.win_pen = win_pen[:, :, -1].copy()
    out = Detection(stat, since, est, upper)
    return Detection(*(a[0] for a in (out.statistic, out.since, out.estimate, out.upper))) if one else out
