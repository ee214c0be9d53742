"""Calibrating every accuracy-guarantee method (``guarantee_methods.METHODS``) through one interface.

``calibrate_weights`` fits R calibration sets at once, each given as one row of sample weights
(draw counts: repeats count twice), and ``apply_weights`` applies the R fitted rules to every
sample; ``calibrate`` is one calibration set, returned as the ``Calibration`` to ship. The
shoot-out (``shootout``) and ``hsc_core.evaluation.threshold`` both go through these, so a method
has one implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ..config import memory_budget_bytes
from ..core.baselines import darts_lambda, darts_predict
from ..core.conformal import conformal_rank, mondrian_groups, threshold_above, weighted_order_statistic
from ..core.ltt import FWERProcedure, fwer_reject, ltt_theta_grid, risk_p_values, select_safe_theta
from ..core.risk import severity_loss
from ..core.rules import DecisionPaths
from ..core.thresholds import select_threshold
from .guarantee_methods import METHODS, GuaranteeData, GuaranteeSettings, MethodInfo, check_methods, needs_delta


@dataclass
class BatchFit:
    """The calibrated rules of R calibration sets.

    theta : (R, 1) one θ per set, or (R, n) one θ per sample (Mondrian: its group's θ);
        None for DARTS.
    found : (R,) whether the method certified the target (False: it falls back to the root).
    lam : (R,) DARTS' λ (else None).
    groups : (n,) Mondrian group of each sample (else None).
    """

    theta: np.ndarray | None
    found: np.ndarray
    lam: np.ndarray | None = None
    groups: np.ndarray | None = None
    depth: int | None = None


def _pac_rank(n: int, alpha: float, delta: float) -> int:
    """Smallest k with P(Beta(k, n+1−k) < 1−α) ≤ δ (n + 1: no such rank)."""
    ks = np.arange(1, n + 1)
    ok = np.flatnonzero(stats.beta.cdf(1.0 - alpha, ks, n + 1 - ks) <= delta)
    return int(ks[ok[0]]) if ok.size else n + 1


def _order_theta(li: np.ndarray, weights: np.ndarray, k: np.ndarray | int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """θ just above the k-th smallest last-incorrect value of each row's calibration multiset."""
    order = np.argsort(li, kind="stable")
    kth = weighted_order_statistic(li[order], weights[:, order], k)
    return threshold_above(kth, dtype), np.isfinite(kth)


def _record_nodes(paths: DecisionPaths, theta: np.ndarray) -> np.ndarray:
    """(R, n) node chosen at θ, given as (R, 1) or (R, n), for every sample: the first record whose
    value is ≥ θ, θ rounded to the records' precision (as ``rules.below_theta``)."""
    vals, nodes = paths.values, paths.nodes
    th = np.broadcast_to(np.asarray(theta, dtype=float), (np.shape(theta)[0], vals.shape[0]))
    per_block = max(1, memory_budget_bytes() // max(1, vals.size * 16))  # the comparison and indices
    out = np.empty(th.shape, dtype=np.int64)
    for s in range(0, th.shape[0], per_block):
        k = (vals[None, :, :] < th[s: s + per_block, :, None].astype(vals.dtype)).sum(axis=-1)
        out[s: s + per_block] = nodes[np.arange(vals.shape[0])[None, :], k]
    return out


def _ltt(data: GuaranteeData, weights: np.ndarray, s: GuaranteeSettings, procedure: FWERProcedure,
         multi: bool) -> BatchFit:
    grid = ltt_theta_grid(s.n_lambdas)
    paths = data.paths["climbing"]
    li = data.last_incorrect["climbing"]
    n_cal = weights.sum(axis=1, keepdims=True).astype(float)
    grid_p = grid.astype(paths.values.dtype)
    errors = weights @ (li[:, None] >= grid_p[None, :]).astype(float)  # correct iff li < θ
    p = risk_p_values(errors / n_cal, n_cal, s.alpha, s.p_value, binary=True)
    if multi:
        nodes = _record_nodes(paths, grid[:, None])  # (m, n): each grid θ's node per sample
        if s.min_coverage is not None:
            cov_loss = 1.0 - data.hierarchy.coverage[nodes].T  # (n, m), in [0, 1]
            risk = (weights @ cov_loss) / n_cal
            p = np.maximum(p, risk_p_values(risk, n_cal, 1.0 - s.min_coverage, "hoeffding_bentkus", binary=False))
        if s.max_severity is not None:
            sev = severity_loss(data.hierarchy, nodes, data.labels[None, :]).T
            p = np.maximum(p, risk_p_values((weights @ sev) / n_cal, n_cal, s.max_severity, "hoeffding_bentkus",
                                            binary=False))
    if procedure == "fixed_sequence":  # from the safest θ (1, the root) down to the most specific
        rejected = fwer_reject(p[:, ::-1], s.delta_for("ltt"), procedure)[:, ::-1]
    else:
        rejected = fwer_reject(p, s.delta_for("ltt"), procedure)
    theta, found = select_safe_theta(grid, rejected)
    return BatchFit(theta[:, None], found)


def _ltt_selective(data: GuaranteeData, weights: np.ndarray, s: GuaranteeSettings) -> BatchFit:
    """LTT on the selective risk P(wrong | answered) of Climbing at each grid θ, fallback testing at δ.

    Given the number answered at θ, n_A(θ), the answered calibration samples are i.i.d. from the
    answered population, so their errors are Binomial(n_A(θ), R_sel(θ)): the binomial tail at
    n_A(θ) is a valid p-value of H: R_sel(θ) > α (valid marginally too; MAPIE's precision control
    uses the same effective sample size). A θ where nothing is answered gets p = 1. The fallback
    procedure (Wiens 2003; ``fwer_reject``) tests from θ = 1 down as a fixed sequence would, but goes on
    after a failure: a plain fixed sequence would stop at once, where almost nothing is answered. A
    wrong node is never the root, so the errors are Climbing's errors."""
    grid = ltt_theta_grid(s.n_lambdas)
    paths = data.paths["climbing"]
    grid_p = grid.astype(paths.values.dtype)
    errors = weights @ (data.last_incorrect["climbing"][:, None] >= grid_p[None, :]).astype(float)
    answered = weights @ (data.answer_score("climbing")[:, None] >= grid_p[None, :]).astype(float)
    some = answered > 0
    n_eff = np.where(some, answered, 1.0)
    p = np.where(some, risk_p_values(errors / n_eff, n_eff, s.alpha, s.p_value, binary=True), 1.0)
    # from θ = 1 (the safest) down to the most specific, as LTT's fixed sequence
    rejected = fwer_reject(p[:, ::-1], s.delta_for("ltt_selective"), "fallback")[:, ::-1]
    theta, found = select_safe_theta(grid, rejected)
    return BatchFit(theta[:, None], found)


def _mondrian(data: GuaranteeData, weights: np.ndarray, s: GuaranteeSettings, family: str) -> BatchFit:
    groups = mondrian_groups(data.hierarchy, data.leaf_pred, s.mondrian_depth)
    li = data.last_incorrect[family]
    dtype = data.paths[family].values.dtype
    theta = np.ones(weights.shape, dtype=float)
    found = np.ones(weights.shape[0], dtype=bool)
    order = np.argsort(groups, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(groups[order])) + 1, order.size]
    for a, b in zip(starts[:-1], starts[1:], strict=False):
        members = order[a:b]
        w = weights[:, members]
        k = conformal_rank(w.sum(axis=1), s.alpha)
        th, ok = _order_theta(li[members], w, k, dtype)
        theta[:, members] = th[:, None]
        # a group with no calibration sample is never certified; its samples go to the root
        found &= ok | (w.sum(axis=1) == 0)
    return BatchFit(theta, found, groups=groups, depth=int(s.mondrian_depth))


def calibrate_weights(method: str, data: GuaranteeData, weights: np.ndarray, settings: GuaranteeSettings) -> BatchFit:
    """Calibrate ``method`` on R calibration multisets at once.

    Parameters
    ----------
    method : a name of ``METHODS``.
    data : the per-sample quantities.
    weights : (R, n) how often each sample is in each calibration set (0/1 for a subset).
    settings : the requirement and options.

    Returns
    -------
    ``BatchFit``; apply it with ``apply_weights``.
    """
    check_methods([method])
    s = settings
    if needs_delta(method):
        s.delta_for(method)  # one clear error before any work
    w = np.asarray(weights)
    if w.ndim != 2 or w.shape[1] != data.n:
        raise ValueError(f"weights must have shape (R, {data.n}), got {w.shape}")
    n_cal = w.sum(axis=1)
    if method in ("theorem1", "theorem1_pac"):
        n0 = int(n_cal[0])
        if not np.all(n_cal == n0):
            raise ValueError(f"{method} needs calibration sets of one size")
        if method == "theorem1" and s.quantile == "quantile":  # the authors' code: one numpy quantile per set
            th = np.array([select_threshold(np.repeat(data.tight, row), s.alpha, "quantile") for row in w])
            return BatchFit(th[:, None], np.ones(w.shape[0], dtype=bool))
        k = conformal_rank(n0, s.alpha) if method == "theorem1" else _pac_rank(n0, s.alpha, s.delta_for(method))
        order = np.argsort(data.tight, kind="stable")
        kth = weighted_order_statistic(data.tight[order], w[:, order], int(k))
        return BatchFit(np.where(np.isfinite(kth), kth, 1.0)[:, None], np.isfinite(kth))
    if method == "crc":
        li = data.last_incorrect["climbing"]
        allowed = np.floor(s.alpha * (n_cal + 1) - 1 + 1e-9).astype(np.int64)
        th, _ = _order_theta(li, w, np.maximum(n_cal - allowed, 1), data.paths["climbing"].values.dtype)
        ok = allowed >= 0
        return BatchFit(np.where(ok, th, 1.0)[:, None], ok)
    if method == "ltt_selective":
        return _ltt_selective(data, w, s)
    if method.startswith("ltt_"):
        multi = method == "ltt_multi"
        if multi and s.min_coverage is None and s.max_severity is None:
            raise ValueError("ltt_multi needs a second risk: a minimum coverage or a maximum severity")
        procedure: FWERProcedure = "holm" if multi else method[4:]  # type: ignore[assignment]
        return _ltt(data, w, s, procedure, multi)
    if method in ("conformal_lca", "conformal_top_down"):
        family = METHODS[method].family
        th, ok = _order_theta(data.last_incorrect[family], w, conformal_rank(n_cal, s.alpha),
                              data.paths[family].values.dtype)
        return BatchFit(th[:, None], ok)
    if method.endswith("_mondrian"):
        return _mondrian(data, w, s, "climbing" if method == "theorem1_mondrian" else "lca_set")
    # DARTS: one bisection per calibration set (the slow one)
    probs = data.probabilities()
    lam = np.array([darts_lambda(data.hierarchy, probs[np.repeat(np.arange(data.n), row)],
                                 data.labels[np.repeat(np.arange(data.n), row)], s.alpha) for row in w])
    return BatchFit(None, np.ones(w.shape[0], dtype=bool), lam=lam)


def apply_weights(method: str, data: GuaranteeData, fit: BatchFit) -> np.ndarray:
    """(R, n) node each calibrated rule predicts for every sample of ``data``."""
    family = METHODS[method].family
    if family == "darts":
        assert fit.lam is not None
        probs = data.probabilities()
        return np.stack([darts_predict(data.hierarchy, probs, float(lam)) for lam in fit.lam])
    assert fit.theta is not None
    return _record_nodes(data.paths[family], fit.theta)


# ---------------------------------------------------------------------------- one calibration
@dataclass(frozen=True)
class Calibration:
    """One calibrated method: what to ship.

    theta : the θ (Mondrian: the smallest group θ; DARTS: λ).
    thetas_by_group : Mondrian group node → θ (empty otherwise).
    found : whether the target is certified (False: it predicts the root).
    note : a sentence when it is not, or when the guarantee needs a caveat.
    """

    method: str
    theta: float
    found: bool
    note: str
    thetas_by_group: dict[int, float]
    fit: BatchFit

    @property
    def info(self) -> MethodInfo:
        return METHODS[self.method]

    def predict(self, data: GuaranteeData) -> np.ndarray:
        """(n,) node predicted for every sample of ``data`` (the data it was calibrated on, or any
        other of the same tree: Mondrian groups are recomputed from its arg-max leaves)."""
        fit = self.fit
        if fit.groups is not None:
            groups = mondrian_groups(data.hierarchy, data.leaf_pred, int(fit.depth or 0))
            theta = np.array([self.thetas_by_group.get(int(g), 1.0) for g in groups])[None, :]
            fit = BatchFit(theta, fit.found, groups=groups, depth=fit.depth)
        return apply_weights(self.method, data, fit)[0]


def calibrate(method: str, data: GuaranteeData, rows: np.ndarray, settings: GuaranteeSettings) -> Calibration:
    """Calibrate ``method`` on the samples ``rows`` of ``data`` (repeats count twice)."""
    rows = np.asarray(rows, dtype=np.int64)
    w = np.zeros((1, data.n), dtype=np.int64)
    np.add.at(w[0], rows, 1)
    fit = calibrate_weights(method, data, w, settings)
    found = bool(fit.found[0])
    by_group: dict[int, float] = {}
    if fit.groups is not None:
        assert fit.theta is not None
        for g in np.unique(fit.groups):
            by_group[int(g)] = float(fit.theta[0, np.flatnonzero(fit.groups == g)[0]])
        theta = float(min(by_group.values()))
    else:
        theta = float(fit.lam[0]) if fit.lam is not None else float(fit.theta[0, 0])  # type: ignore[index]
    return Calibration(method, theta, found, cannot_note(method, rows.size, settings, found, single=True), by_group,
                       fit)


def cannot_note(method: str, n_cal: int, s: GuaranteeSettings, found: bool | float, *, single: bool = False) -> str:
    """A sentence saying that (and why) ``method`` cannot certify the target at this n, else "".

    ``found``: whether (one calibration, ``single``) or how often (a share of repetitions) it did."""
    share = float(found)
    if share >= 1.0:
        return ""
    kind = METHODS[method].kind
    who = ("here" if single else "in every calibration set") if share == 0 else \
        f"in {1 - share:.0%} of the calibration sets"
    if method in ("theorem1", "conformal_lca", "conformal_top_down", "crc") and (n_cal + 1) * s.alpha < 1:
        return (f"cannot meet accuracy {s.target:.4g} with n = {n_cal:,}: (n+1)·α < 1, so θ̂ = 1: only nodes of "
                "probability exactly 1 are predicted, every other sample gets the root "
                f"(needs n ≥ {int(np.ceil(1 / s.alpha - 1)):,})")
    if kind == "marginal per group":
        return (f"some superclasses have too few calibration samples for accuracy {s.target:.4g}: their samples get "
                f"the root {who}")
    if s.delta is None:  # a method without δ that certified nothing (none does today but Mondrian, above)
        return f"cannot certify accuracy {s.target:.4g} at n = {n_cal:,}: it predicts the root {who}"
    # with no error at all the best p-value / Beta tail is (1 − α)^n; it must reach δ (fixed sequence,
    # Theorem 1) or δ/m (Bonferroni and Holm test the best θ at δ/m first): below that n nothing certifies
    level = s.delta / s.n_lambdas if method in ("ltt_bonferroni", "ltt_holm", "ltt_multi", "ltt_selective") \
        else s.delta
    need = int(np.ceil(np.log(level) / np.log(1.0 - s.alpha)))
    if method == "theorem1_pac":
        return (f"cannot certify accuracy {s.target:.4g} with confidence {1 - s.delta:.4g} at n = {n_cal:,} "
                f"(needs n ≥ {need:,}): it predicts the root {who}")
    return (f"no θ passes the test at accuracy {s.target:.4g} with confidence {1 - s.delta:.4g} and "
            f"n = {n_cal:,} {who} (even an error-free calibration set needs n ≥ {need:,}): it predicts the root "
            "there")



__all__ = [
    "BatchFit", "Calibration", "apply_weights", "calibrate", "calibrate_weights", "cannot_note",
]
