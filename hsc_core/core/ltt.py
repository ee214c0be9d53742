"""Learn then Test (Angelopoulos, Bates, Candès, Jordan & Lei 2021, arXiv 2110.01052) for θ.

LTT turns risk control into multiple testing: for every candidate θ_j of a fixed grid the null
hypothesis H_j: R(θ_j) > α ("θ_j is not safe") is tested on the calibration set with a valid
p-value; a family-wise error rate (FWER) procedure at level δ picks the θ_j whose nulls it
rejects, and every one of them satisfies R(θ) ≤ α *simultaneously* with probability ≥ 1 − δ over
the calibration set (a PAC guarantee, unlike conformal methods' guarantee on average).

Every function works on a leading "repetition" axis too, so thousands of calibration sets are
tested at once (``evaluation.guarantees`` runs them). The p-values are those of MAPIE's
``compute_hoeffding_bentkus_p_value`` (tests check them against MAPIE 1.6), except that the exact
binomial one counts errors as integers where MAPIE rounds n·R̂ up in floating point (7/400·400
counts as 8 there).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy import stats

from .validation import quote

FWERProcedure = Literal["bonferroni", "fixed_sequence", "holm", "fallback"]
FWER_PROCEDURES: tuple[FWERProcedure, ...] = ("bonferroni", "fixed_sequence", "holm", "fallback")
PValue = Literal["binomial", "hoeffding_bentkus"]
P_VALUES: tuple[PValue, ...] = ("binomial", "hoeffding_bentkus")


def _check_level(name: str, value: float) -> float:
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {value}")
    return float(value)


def binomial_p_values(errors: np.ndarray, n: int | np.ndarray, alpha: float) -> np.ndarray:
    """Exact p-value of H: R > α for a *binary* loss: P(Binomial(n, α) ≤ errors).

    Valid because the number of errors among n exchangeable samples is Binomial(n, R) and
    P(Bin(n, R) ≤ k) ≤ P(Bin(n, α) ≤ k) for every R ≥ α (LTT §3.2; ``scipy.stats.binom``).

    Parameters
    ----------
    errors : (...,) number of calibration errors at each θ (any shape).
    n : calibration size (broadcast against ``errors``).
    alpha : the risk level α.

    Returns
    -------
    p-values, the shape of ``errors``.

    Examples
    --------
    >>> binomial_p_values(np.array([0, 5, 50]), 100, 0.1).round(6).tolist()
    [2.7e-05, 0.057577, 1.0]
    """
    alpha = _check_level("alpha", alpha)
    return stats.binom.cdf(np.asarray(errors), np.asarray(n), alpha)


def _kl_h1(r: np.ndarray, a: float) -> np.ndarray:
    """Bernoulli KL divergence h₁(r, a) = r log(r/a) + (1−r) log((1−r)/(1−a)), 0·log 0 = 0."""
    r = np.asarray(r, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0) / a), 0.0)
        second = np.where(r < 1, (1 - r) * np.log(np.where(r < 1, 1 - r, 1.0) / (1 - a)), -np.log(1 - a))
    return first + second


def hoeffding_bentkus_p_values(risk: np.ndarray, n: int | np.ndarray, alpha: float, *,
                               binary: bool = False) -> np.ndarray:
    """Hoeffding–Bentkus p-value of H: R > α for a loss in [0, 1] (LTT Proposition 3.5).

    min(exp(−n·h₁(min(R̂, α), α)), e·P(Bin(n, α) ≤ ⌈n R̂⌉)); ``binary`` drops the factor e
    (valid for 0/1 losses), as MAPIE's ``compute_hoeffding_bentkus_p_value``. Valid for any loss
    bounded in [0, 1] (e.g. 1 − coverage, the severity loss), where the exact binomial is not.

    Parameters
    ----------
    risk : (...,) empirical risks R̂ in [0, 1].
    n : calibration size.
    alpha : the risk level α.
    binary : whether the loss takes only the values 0 and 1.

    Examples
    --------
    >>> hoeffding_bentkus_p_values(np.array([0.05, 0.2]), 100, 0.1).round(4).tolist()
    [0.1565, 1.0]
    """
    alpha = _check_level("alpha", alpha)
    r = np.asarray(risk, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    hoeffding = np.exp(-n_arr * _kl_h1(np.minimum(r, alpha), alpha))
    bentkus = (1.0 if binary else np.e) * stats.binom.cdf(np.ceil(n_arr * r), n_arr, alpha)
    return np.minimum(hoeffding, bentkus)


def fwer_reject(p_values: np.ndarray, delta: float, procedure: FWERProcedure) -> np.ndarray:
    """Which nulls a family-wise error procedure at level δ rejects, along the last axis.

    ``"bonferroni"``: p_j ≤ δ/m. ``"fixed_sequence"`` (Bauer 1991): test in the grid's order at
    level δ and stop at the first p_j > δ — the caller orders the grid from the safest θ to the
    most specific, so the risk grows along it. ``"holm"`` (Holm 1979): step down through the
    sorted p-values, the i-th smallest (0-based) at level δ/(m − i), stopping at the first failure.
    ``"fallback"`` (Wiens 2003): test in the grid's order, H_j at level δ/m plus the level of
    H_{j−1} when that was rejected, and go on after a failure: a fixed sequence that survives hypotheses
    it cannot reject at its start (where a conditional risk has almost no samples).
    All four control the FWER at δ under any dependence; MAPIE's ``control_fwer`` is the oracle in
    the tests for the first three, a direct loop for the fallback.

    Parameters
    ----------
    p_values : (..., m) p-values; leading axes are independent families (repetitions).
    delta : the FWER level δ.
    procedure : one of ``FWER_PROCEDURES``.

    Returns
    -------
    Boolean array of the shape of ``p_values``: True where the null is rejected (θ_j is safe).

    Examples
    --------
    >>> p = np.array([0.001, 0.013, 0.04, 0.5])
    >>> [fwer_reject(p, 0.05, k).tolist() for k in ("bonferroni", "fixed_sequence", "holm")]
    [[True, False, False, False], [True, True, True, False], [True, True, False, False]]
    >>> fwer_reject(np.array([0.5, 0.01, 0.02, 0.04]), 0.08, "fallback").tolist()   # levels 0.02, 0.02, 0.04, 0.06
    [False, True, True, True]
    """
    delta = _check_level("delta", delta)
    p = np.asarray(p_values, dtype=float)
    m = p.shape[-1]
    if m == 0:
        raise ValueError("p_values must not be empty")
    if procedure == "bonferroni":
        return p <= delta / m
    if procedure == "fixed_sequence":
        return np.cumprod(p <= delta, axis=-1).astype(bool)
    if procedure == "holm":
        order = np.argsort(p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        ok = np.cumprod(sorted_p <= delta / (m - np.arange(m)), axis=-1).astype(bool)
        out = np.zeros_like(ok)
        np.put_along_axis(out, order, ok, axis=-1)
        return out
    if procedure == "fallback":
        out = np.zeros(p.shape, dtype=bool)
        carried = np.zeros(p.shape[:-1])
        for j in range(m):  # m steps, each vectorised over the leading (repetition) axes
            level = delta / m + carried
            out[..., j] = p[..., j] <= level
            carried = np.where(out[..., j], level, 0.0)
        return out
    raise ValueError(f"unknown FWER procedure {quote(procedure)}; choose one of {', '.join(FWER_PROCEDURES)}")


def risk_p_values(risk: np.ndarray, n: int | np.ndarray, alpha: float, p_value: PValue = "binomial", *,
                  binary: bool = True) -> np.ndarray:
    """p-values of H: R > α from empirical risks: ``binomial`` (exact, 0/1 losses only) or
    ``hoeffding_bentkus`` (any loss in [0, 1])."""
    if p_value == "binomial":
        if not binary:
            raise ValueError("the exact binomial p-value needs a 0/1 loss; use 'hoeffding_bentkus'")
        return binomial_p_values(np.rint(np.asarray(risk) * np.asarray(n)), n, alpha)
    if p_value == "hoeffding_bentkus":
        return hoeffding_bentkus_p_values(risk, n, alpha, binary=binary)
    raise ValueError(f"unknown p-value {quote(p_value)}; choose one of {', '.join(P_VALUES)}")


def ltt_theta_grid(n_lambdas: int = 100) -> np.ndarray:
    """The fixed, data-independent θ grid LTT tests, ascending, from 0 to 1 inclusive.

    Half the points are spread evenly on [0, 0.9) and half crowd towards 1 (1 − 10^−u, u from 1 to 6),
    where the probabilities of confident models lie. A grid chosen from the calibration data
    itself would void the guarantee.

    >>> g = ltt_theta_grid(10); (float(g[0]), float(g[-1]), g.size, bool(np.all(np.diff(g) > 0)))
    (0.0, 1.0, 10, True)
    """
    if int(n_lambdas) != n_lambdas or n_lambdas < 2:
        raise ValueError(f"n_lambdas must be an integer ≥ 2, got {n_lambdas}")
    half = int(n_lambdas) // 2
    even = np.linspace(0.0, 0.9, int(n_lambdas) - half, endpoint=False)
    near_one = 1.0 - np.logspace(-1.0, -6.0, half - 1)
    return np.r_[even, near_one, 1.0]


def select_safe_theta(grid: np.ndarray, rejected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The most specific safe θ: the smallest rejected grid point (coverage falls as θ rises).

    Parameters
    ----------
    grid : (m,) ascending θ grid.
    rejected : (..., m) boolean, from ``fwer_reject``.

    Returns
    -------
    (theta, found): (...,) the chosen θ (1.0, the root, where nothing is rejected) and whether any
    grid point was rejected.
    """
    rejected = np.asarray(rejected, dtype=bool)
    found = rejected.any(axis=-1)
    first = np.argmax(rejected, axis=-1)
    return np.where(found, np.asarray(grid)[first], 1.0), np.asarray(found)
