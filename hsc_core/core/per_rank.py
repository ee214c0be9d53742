"""Climbing by rank: rules, the exact RC curve and LTT's θ-vector paths for per-rank scores.

A per-rank classifier gives, for each sample and each rank r (coarsest r = 0 … finest R − 1), a
predicted node and a confidence ``conf[i, r]``. *Climbing by rank* answers, from the finest rank
upward, at the first rank whose confidence reaches its threshold (``conf ≥ θ_r``), and otherwise at
the root (abstains). Every function here reads three (n, R) arrays only:

conf : confidence of each rank's prediction, in [0, 1];
correct : whether that rank's predicted node is an ancestor-or-self of the true class;
coverage : that node's coverage φ(v) = 1 − log|L(v)|/log|L| (definitions §2.2).

The root counts as correct with coverage 0, and risk and coverage are averaged over all samples,
abstentions included (definitions §2.3, §4.2), so the numbers compare with the paper's rules.

With one shared θ the answer is at rank r iff M_r ≥ θ > M_{r+1}, where M_r = max_{s ≥ r} conf[s]
(the finer-or-equal ranks' best confidence; M_R = −∞). So a sample's coverage is the telescoping
sum Σ_r (cov_r − cov_{r−1})·1[M_r ≥ θ] (cov_{−1} = 0 at the root), and likewise its loss: the
curve is one sort of n·R records by M plus cumulative sums, exact at every breakpoint, as
``curves.rc_curve_from_paths``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .curves import RCCurve
from .ltt import binomial_p_values, fwer_reject, ltt_theta_grid

RULE = "climbing_by_rank"
#: How much more slack 1 − θ each coarser rank gets on LTT's paths: 1 − θ_r = (1 − λ)·ρ^(finest − r).
TILTS: tuple[float, ...] = (1.0, 1.5, 2.0, 3.0)
#: Where a sample answers when no rank's confidence reaches its θ.
ROOT = -1
#: The share of δ that tests the shared-θ path (tilt 1, first in ``TILTS``); the tilted paths share
#: the rest evenly. So the search never falls below a shared-θ LTT's coverage by more than the cost of
#: testing at δ·SHARED_SHARE instead of δ.
SHARED_SHARE = 0.8


def _check(conf: np.ndarray, correct: np.ndarray, coverage: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    conf = np.asarray(conf, dtype=float)
    correct = np.asarray(correct, dtype=bool)
    coverage = np.asarray(coverage, dtype=float)
    if conf.ndim != 2 or conf.shape != correct.shape or conf.shape != coverage.shape:
        raise ValueError(f"conf, correct and coverage must share one (n, R) shape, got {conf.shape}, "
                         f"{correct.shape}, {coverage.shape}")
    if conf.shape[0] == 0 or conf.shape[1] == 0:
        raise ValueError("per-rank scores need at least one sample and one rank")
    return conf, correct, coverage


def answer_ranks(conf: np.ndarray, thetas: np.ndarray | Sequence[float]) -> np.ndarray:
    """The rank each sample answers at: the finest r with conf[:, r] ≥ θ_r, else ``ROOT`` (−1).

    Parameters
    ----------
    conf : (n, R) confidences, coarsest rank first.
    thetas : (R,) one θ per rank, or (V, R) for V vectors at once.

    Returns
    -------
    (n,) int64 rank indices, or (V, n) for (V, R) thetas.

    Examples
    --------
    >>> answer_ranks(np.array([[0.9, 0.5], [0.9, 0.8], [0.3, 0.2]]), [0.6, 0.7]).tolist()
    [0, 1, -1]
    """
    conf = np.asarray(conf, dtype=float)
    th = np.asarray(thetas, dtype=float)
    ok = conf >= (th[..., None, :])  # (…, n, R)
    n_ranks = conf.shape[1]
    finest = n_ranks - 1 - np.argmax(ok[..., ::-1], axis=-1)
    return np.where(ok.any(axis=-1), finest, ROOT).astype(np.int64)


def outcomes(correct: np.ndarray, coverage: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample (correct, coverage) of answering at ``ranks`` ((n,) or (V, n)); the root: (True, 0)."""
    correct, coverage = np.asarray(correct, dtype=bool), np.asarray(coverage, dtype=float)
    at = np.maximum(ranks, 0)
    rows = np.arange(correct.shape[0])
    root = ranks == ROOT
    ok = np.where(root, True, correct[rows, at])
    cov = np.where(root, 0.0, coverage[rows, at])
    return ok, cov


def evaluate_thetas(conf: np.ndarray, correct: np.ndarray, coverage: np.ndarray,
                    thetas: np.ndarray | Sequence[float]) -> dict[str, object]:
    """Accuracy, coverage and where answers stop, for one θ vector.

    Returns
    -------
    dict with ``accuracy`` (hierarchical, abstentions correct), ``coverage`` (mean φ),
    ``answered_accuracy`` (the share of the answers that are right, abstentions excluded; NaN: none),
    ``answer_share`` ((R + 1,) share of samples answering at each rank, coarsest first, then the
    root) and ``ranks`` ((n,) the answered rank, −1 = root).
    """
    conf, correct, coverage = _check(conf, correct, coverage)
    th = np.asarray(thetas, dtype=float)
    if th.shape != (conf.shape[1],):
        raise ValueError(f"give one θ per rank: {conf.shape[1]} values, got shape {th.shape}")
    ranks = answer_ranks(conf, th)
    ok, cov = outcomes(correct, coverage, ranks)
    share = np.bincount(ranks + 1, minlength=conf.shape[1] + 1) / conf.shape[0]
    answered = ranks != ROOT
    return {"accuracy": float(ok.mean()), "coverage": float(cov.mean()),
            "answered_accuracy": float(ok[answered].mean()) if answered.any() else float("nan"),
            "answer_share": np.r_[share[1:], share[0]], "ranks": ranks}


def rank_rc_curve(conf: np.ndarray, correct: np.ndarray, coverage: np.ndarray) -> RCCurve:
    """The exact hierarchical RC curve of Climbing by rank with one shared θ.

    Point k is the operating point for θ ∈ (events[k−1], events[k]] (the first from θ = 0), as
    ``curves.RCCurve``; the last point (every sample at the root) is included when θ ≤ 1 reaches it,
    i.e. when no finer-or-equal confidence equals 1. Risk is the hierarchical 0/1 risk.

    Parameters
    ----------
    conf, correct, coverage : (n, R) arrays (module docstring).
    """
    conf, correct, coverage = _check(conf, correct, coverage)
    n = conf.shape[0]
    best_below = np.maximum.accumulate(conf[:, ::-1], axis=1)[:, ::-1]  # M_r = max_{s ≥ r} conf_s
    loss = (~correct).astype(float)
    d_cov = np.diff(coverage, axis=1, prepend=0.0).ravel()  # cov_r − cov_{r−1}, the root's 0 first
    d_loss = np.diff(loss, axis=1, prepend=0.0).ravel()
    m = best_below.ravel()
    order = np.argsort(-m, kind="stable")  # records with M ≥ θ are on: descending M
    m, d_cov, d_loss = m[order], d_cov[order], d_loss[order]
    last_of_group = np.r_[np.flatnonzero(np.diff(m) != 0), m.size - 1]
    events = m[last_of_group][::-1]  # ascending distinct M
    cov_on = np.cumsum(d_cov)[last_of_group][::-1] / n  # θ ∈ (events[k−1], events[k]]: records M ≥ events[k]
    risk_on = np.cumsum(d_loss)[last_of_group][::-1] / n
    if events[-1] < 1.0:  # θ in (max M, 1] puts every sample at the root
        cov_on, risk_on = np.r_[cov_on, 0.0], np.r_[risk_on, 0.0]
        thresholds = np.r_[events, 1.0]
    else:
        thresholds, events = events, events[:-1]
    # Running sums of ± differences leave ~1e-16 residues: clamp.
    return RCCurve(RULE, "01", np.clip(cov_on, 0.0, 1.0), np.clip(risk_on, 0.0, 1.0), thresholds, events)


# ------------------------------------------------------------------------- LTT over θ vectors
def theta_paths(n_ranks: int, n_lambdas: int = 100, tilts: Sequence[float] = TILTS) -> np.ndarray:
    """LTT's data-independent θ vectors: one path per tilt, each from the strictest to the most permissive.

    On the path of tilt ρ, 1 − θ_r = (1 − λ)·ρ^(R−1−r) (clipped to θ ≥ 0), with λ going down
    ``ltt_theta_grid(n_lambdas)`` from 1 to 0: every θ_r falls along the path, so answers only get
    finer. ρ = 1 is one flat θ; ρ = 2 gives coarser ranks twice the slack of the rank below
    (e.g. 0.8/0.6/0.2 … near 0.8 at the finest rank).

    Returns
    -------
    (len(tilts), n_lambdas, n_ranks) θ vectors, coarsest rank first.
    """
    if int(n_ranks) != n_ranks or n_ranks < 1:
        raise ValueError(f"n_ranks must be a positive integer, got {n_ranks}")
    rho = np.asarray(tilts, dtype=float)
    if rho.ndim != 1 or rho.size == 0 or (rho < 1).any():
        raise ValueError(f"tilts must be a non-empty list of numbers ≥ 1, got {rho.tolist()}")
    lam = ltt_theta_grid(n_lambdas)[::-1]  # strict → permissive
    power = np.arange(n_ranks)[::-1]  # finest rank: 0
    slack = (1.0 - lam)[None, :, None] * rho[:, None, None] ** power[None, None, :]
    return np.round(np.clip(1.0 - slack, 0.0, 1.0), 12)  # 0.828, not 0.8280000000000001, in the card


def vector_outcomes(conf: np.ndarray, correct: np.ndarray, coverage: np.ndarray,
                    vectors: np.ndarray, chunk: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample loss, coverage and answering of every θ vector.

    Parameters
    ----------
    conf, correct, coverage : (n, R) arrays (module docstring).
    vectors : (..., R) θ vectors, flattened to (V, R).

    Returns
    -------
    (errors, cov, answered): (V, n) bool errors (the root is never wrong), (V, n) float32 coverage
    and (V, n) bool whether the sample answers (its rank is not ``ROOT``; read from the answer ranks,
    not from coverage > 0, since a coarse node covering every leaf has coverage 0 yet answers).

    >>> e, c, a = vector_outcomes(np.array([[0.9, 0.5], [0.3, 0.2]]), np.array([[True, False], [True, True]]),
    ...                           np.array([[0.0, 1.0], [0.0, 1.0]]), np.array([[0.6, 0.7]]))
    >>> e.tolist(), a.tolist()
    ([[False, False]], [[True, False]])
    """
    conf, correct, coverage = _check(conf, correct, coverage)
    vectors = np.asarray(vectors, dtype=float).reshape(-1, conf.shape[1])
    errors = np.empty((vectors.shape[0], conf.shape[0]), dtype=bool)
    cov = np.empty((vectors.shape[0], conf.shape[0]), dtype=np.float32)
    answered = np.empty((vectors.shape[0], conf.shape[0]), dtype=bool)
    for start in range(0, vectors.shape[0], chunk):  # (chunk, n, R) booleans at a time
        ranks = answer_ranks(conf, vectors[start:start + chunk])
        ok, c = outcomes(correct, coverage, ranks)
        errors[start:start + chunk], cov[start:start + chunk] = ~ok, c
        answered[start:start + chunk] = ranks != ROOT
    return errors, cov, answered


def path_levels(n_paths: int, delta: float, shared_share: float = SHARED_SHARE) -> np.ndarray:
    """(S,) each path's FWER level: the first (shared θ) gets δ·``shared_share``, the others split the
    rest evenly (weighted Bonferroni: the levels sum to δ). One path gets all of δ.

    >>> path_levels(4, 0.1).round(6).tolist()
    [0.08, 0.006667, 0.006667, 0.006667]
    """
    if n_paths == 1:
        return np.array([float(delta)])
    if not 0.0 < shared_share < 1.0:
        raise ValueError(f"the shared path's share of δ must lie in (0, 1), got {shared_share}")
    return np.r_[delta * shared_share, np.full(n_paths - 1, delta * (1 - shared_share) / (n_paths - 1))]


def vector_p_values(cal_errors: np.ndarray, n_cal: int | np.ndarray, alpha: float,
                    cal_answered: np.ndarray | None = None) -> np.ndarray:
    """Each vector's exact binomial p-value of H: its risk > α.

    Without ``cal_answered`` the risk is the hierarchical one (errors among all ``n_cal`` samples,
    an abstention correct): P(Bin(n_cal, α) ≤ errors). With it, the risk is the answers' one
    P(wrong | answered) (abstentions excluded, a selective risk): given the number answered n_A,
    the answered calibration samples are i.i.d. from the answered population, so their errors are
    Binomial(n_A, R_sel) and P(Bin(n_A, α) ≤ errors) is a valid p-value (``ltt_selective``'s); a
    vector answering nothing gets p = 1.

    Parameters
    ----------
    cal_errors : (..., S, m) error counts (a root answer is never an error).
    n_cal : calibration size(s), broadcast against the leading axes.
    alpha : the risk level α.
    cal_answered : (..., S, m) answered counts, or None (hierarchical).

    Returns
    -------
    (..., S, m) p-values.

    >>> vector_p_values(np.array([[1, 0, 2]]), 10, 0.2, np.array([[3, 0, 10]])).round(4).tolist()
    [[0.896, 1.0, 0.6778]]
    """
    errors = np.asarray(cal_errors)
    if cal_answered is None:
        n_arr = np.asarray(n_cal)
        return binomial_p_values(errors, n_arr.reshape(n_arr.shape + (1, 1)) if n_arr.ndim else n_arr, alpha)
    answered = np.asarray(cal_answered)
    if answered.shape != errors.shape:
        raise ValueError(f"cal_answered must have the shape of cal_errors {errors.shape}, got {answered.shape}")
    some = answered > 0
    return np.where(some, binomial_p_values(errors, np.where(some, answered, 1), alpha), 1.0)


def ltt_select(cal_errors: np.ndarray, cal_coverage: np.ndarray, n_cal: int | np.ndarray, alpha: float,
               delta: float, shared_share: float = SHARED_SHARE, cal_answered: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """Learn then Test over the paths: which vector to ship, for each calibration set.

    Each path (tilt) is tested from its strictest vector, the shared-θ path (the first) at level
    δ·``shared_share`` and the tilted ones at the rest of δ split evenly (weighted Bonferroni over the
    paths, ``path_levels``), with the exact binomial p-value of H: risk > α (``vector_p_values``);
    so with probability ≥ 1 − δ every vector rejected on any path has accuracy ≥ 1 − α. Among the
    rejected vectors, the one with the highest calibration coverage (the most specific answers) is
    chosen, so the choice is never less specific on the calibration set than a shared-θ LTT at level
    δ·``shared_share``.

    Without ``cal_answered`` the accuracy is the hierarchical one (every sample counts, an abstention
    counts as correct) and each path is tested by fixed-sequence testing. With it, the accuracy is
    that of the answers given (abstentions excluded) and each path is tested by the fallback
    procedure (Wiens 2003, ``ltt.fwer_reject``) at its path level: the strictest vectors answer
    (almost) nothing, so their p-values are 1 and a fixed sequence would stop there.

    Parameters
    ----------
    cal_errors : (..., S, m) calibration error counts of each vector.
    cal_coverage : (..., S, m) calibration coverage sums (or means) of each vector.
    n_cal : calibration size(s), broadcast against the leading axes.
    alpha, delta : the requirement (error ≤ α with probability ≥ 1 − δ).
    shared_share : the share of δ of the first (shared-θ) path.
    cal_answered : (..., S, m) calibration counts answered (below the root) of each vector, or None.

    Returns
    -------
    (choice, found): (...,) flat index into S·m of the chosen vector (0 where none) and whether any
    vector was certified (where not, the caller abstains everywhere).
    """
    errors = np.asarray(cal_errors)
    n_paths = errors.shape[-2]
    p = vector_p_values(errors, n_cal, alpha, cal_answered)
    levels = path_levels(n_paths, delta, shared_share)
    if cal_answered is None:
        rejected = np.cumprod(p <= levels[:, None], axis=-1).astype(bool)  # fixed sequence per path at its level
    else:
        rejected = np.stack([fwer_reject(p[..., s, :], levels[s], "fallback") for s in range(n_paths)], axis=-2)
    flat = rejected.reshape(rejected.shape[:-2] + (-1,))
    score = np.where(flat, np.asarray(cal_coverage, dtype=float).reshape(flat.shape), -np.inf)
    return np.asarray(np.argmax(score, axis=-1)), np.asarray(flat.any(axis=-1))


__all__ = ["RULE", "ROOT", "SHARED_SHARE", "TILTS", "answer_ranks", "evaluate_thetas", "ltt_select", "outcomes",
           "path_levels", "rank_rc_curve", "theta_paths", "vector_outcomes", "vector_p_values"]
