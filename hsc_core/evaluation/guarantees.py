"""Every accuracy guarantee side by side: one interface, one vectorised shoot-out.

A *method* turns a calibration set into a rule that says which node to predict for a new sample:
a threshold θ on a nested node family (Climbing's path, or the LCA node of the flat conformal set),
one θ per superclass (Mondrian), or DARTS' λ. Every method is calibrated and applied through
``calibrate_weights`` (one row of weights per calibration set), so one calibration
(``calibrate``), the shoot-out over thousands of repeated calibration sets (``shootout``), the
``hsc guarantees`` and ``hsc card`` commands and the dashboard share one implementation.

Guarantees (``METHODS[name].kind``):

* ``pac`` — with probability ≥ 1 − δ over the calibration set, the accuracy on new data is
  ≥ 1 − α (LTT, Theorem 1 one-sided): the shoot-out's *violation rate* must be ≤ δ;
* ``marginal`` — on average over calibration set and new sample, accuracy ≥ 1 − α (the paper's
  Algorithm 2, CRC, conformal sets): about half the calibration sets fall below 1 − α, by design;
  what must hold is the *mean* accuracy;
* ``marginal per group`` — the same within every superclass (Mondrian);
* ``heuristic`` — DARTS' binomial stopping rule, no finite-sample guarantee.

Sampling: ``"iid"`` (default) draws the n calibration samples with replacement from the data set,
which then *is* the deployment distribution: a method's realised accuracy is its accuracy on the
whole data set, and every guarantee's law is exactly the one its proof assumes. ``"split"`` is the
paper's Figure 3: a stratified calibration set without replacement, numbers on the other samples —
their own sampling noise (a test set of m samples adds ≈ sqrt(a(1−a)/m)) is in no guarantee, so
violation rates of PAC methods read there are inflated.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from ..config import memory_budget_bytes
from ..core.baselines import darts_lambda, darts_predict
from ..core.conformal import (
    conformal_rank,
    lca_set_paths,
    mondrian_groups,
    threshold_above,
    top_down_paths,
    weighted_order_statistic,
)
from ..core.hierarchy import Hierarchy
from ..core.ltt import (
    FWER_PROCEDURES,
    P_VALUES,
    FWERProcedure,
    PValue,
    fwer_reject,
    ltt_theta_grid,
    risk_p_values,
    select_safe_theta,
)
from ..core.risk import hierarchical_correctness, severity_loss
from ..core.rules import DecisionPaths, concat_decision_paths, decision_paths
from ..core.thresholds import (
    QuantileMethod,
    climbing_tight_thresholds,
    last_incorrect_values,
    select_threshold,
    stratified_split_sampler,
)
from ..core.validation import check_labels, quote

Sampling = Literal["iid", "split"]
SAMPLINGS: tuple[Sampling, ...] = ("iid", "split")
Kind = Literal["pac", "marginal", "marginal per group", "heuristic"]


@dataclass(frozen=True)
class MethodInfo:
    """What a method is: its label, the nested family it thresholds, its guarantee and source."""

    label: str
    family: str  # "climbing", "lca_set" or "darts"
    kind: Kind
    source: str


METHODS: dict[str, MethodInfo] = {
    "theorem1": MethodInfo("Algorithm 2 θ̂ (paper)", "climbing", "marginal",
                           "Goren et al. 2024, Algorithm 2 (order statistic ⌈(n+1)(1−α)⌉)"),
    "theorem1_pac": MethodInfo("Theorem 1, one-sided (PAC)", "climbing", "pac",
                               "Theorem 1's Beta law, one-sided: smallest rank k with "
                               "P(Beta(k, n+1−k) < 1−α) ≤ δ (Vovk 2012, training-conditional)"),
    "crc": MethodInfo("Conformal risk control", "climbing", "marginal",
                      "Angelopoulos et al. 2024, 0/1 loss (definitions §6.6)"),
    "ltt_bonferroni": MethodInfo("LTT · Bonferroni", "climbing", "pac", "Angelopoulos et al. 2021, Bonferroni"),
    "ltt_fixed_sequence": MethodInfo("LTT · fixed sequence", "climbing", "pac",
                                     "Angelopoulos et al. 2021, fixed-sequence testing from θ = 1 down"),
    "ltt_holm": MethodInfo("LTT · Holm", "climbing", "pac", "Angelopoulos et al. 2021, Holm step-down"),
    "ltt_multi": MethodInfo("LTT · several risks", "climbing", "pac",
                            "Angelopoulos et al. 2021 §4: max of the risks' p-values, Holm"),
    "conformal_lca": MethodInfo("Conformal node (LCA of the flat set)", "lca_set", "marginal",
                                "split conformal on node-valued sets (Mortier et al. 2025)"),
    "conformal_top_down": MethodInfo("Conformal node (greedy top-down)", "top_down", "marginal",
                                     "split conformal on the greedy top-down node (Mortier et al. 2025)"),
    "theorem1_mondrian": MethodInfo("Algorithm 2 per superclass (Mondrian)", "climbing", "marginal per group",
                                    "Mondrian split conformal (Vovk et al. 2005) on Climbing"),
    "conformal_mondrian": MethodInfo("Conformal node per superclass (Mondrian)", "lca_set", "marginal per group",
                                     "Mondrian split conformal on node-valued sets"),
    "darts": MethodInfo("DARTS", "darts", "heuristic", "Deng et al. 2012, as the authors run it"),
}
#: Methods the shoot-out runs by default (``ltt_multi`` joins when a second risk is given).
DEFAULT_METHODS: tuple[str, ...] = (
    "theorem1", "theorem1_pac", "crc", "ltt_bonferroni", "ltt_fixed_sequence", "ltt_holm",
    "conformal_lca", "conformal_top_down", "theorem1_mondrian", "conformal_mondrian", "darts")
N_REPS = 1000
SEED = 0
MONDRIAN_DEPTH = 2
N_LAMBDAS = 100


def check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    """The methods, validated (one line naming the unknown one)."""
    out = tuple(dict.fromkeys(methods))
    unknown = [m for m in out if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {quote(unknown[0])}; choose from {', '.join(METHODS)}")
    if not out:
        raise ValueError("give at least one method")
    return out


# ---------------------------------------------------------------------------- the data
@dataclass
class GuaranteeData:
    """Per-sample quantities every method needs, computed once per data set.

    Attributes
    ----------
    hierarchy : the class tree.
    labels : (n,) true leaves.
    paths : family → ``DecisionPaths`` (``"climbing"``, ``"lca_set"``, ``"top_down"``), (n, n_records).
    last_incorrect : family → (n,) value the parameter must exceed for the node to be correct
        (−inf: always correct).
    tight : (n,) the paper's per-sample thresholds (Algorithm 3) for Algorithm 2's θ̂.
    leaf_pred : (n,) arg-max leaves (Mondrian groups are their ancestors).
    node_probs : optional (n, n_nodes) probabilities, or a callable returning them; DARTS only.
    """

    hierarchy: Hierarchy
    labels: np.ndarray
    paths: dict[str, DecisionPaths]
    last_incorrect: dict[str, np.ndarray]
    tight: np.ndarray
    leaf_pred: np.ndarray
    node_probs: np.ndarray | Callable[[], np.ndarray] | None = None
    _probs: np.ndarray | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return int(self.labels.size)

    def probabilities(self) -> np.ndarray:
        """(n, n_nodes) node probabilities (DARTS), loaded once."""
        if self._probs is None:
            if self.node_probs is None:
                raise ValueError("DARTS needs the node probabilities; this data set was built without them")
            self._probs = np.asarray(self.node_probs() if callable(self.node_probs) else self.node_probs)
        return self._probs

    @classmethod
    def from_arrays(cls, hierarchy: Hierarchy, node_probs: np.ndarray, labels: np.ndarray) -> GuaranteeData:
        """From (n, n_nodes) node probabilities and true leaves (small data, tests, synthetic)."""
        probs = np.asarray(node_probs)
        labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
        climbing = decision_paths(hierarchy, probs, "climbing")
        return cls._build(hierarchy, labels, climbing, lca_set_paths(hierarchy, probs),
                          top_down_paths(hierarchy, probs), climbing_tight_thresholds(hierarchy, probs, labels), probs)

    @classmethod
    def from_evaluation_set(cls, es: Any) -> GuaranteeData:
        """From an ``EvaluationSet`` (its cached paths and tight thresholds; the LCA family is
        built chunk by chunk, never holding samples × nodes at once)."""
        from ..core.evaluation import node_probability_chunks

        ev = es.evaluation
        lca, top = [], []
        for _, probs in node_probability_chunks(es.hierarchy, ev.logits, temperature=es.temperature, rows=es.rows,
                                                precision=ev.precision):
            lca.append(lca_set_paths(es.hierarchy, probs))
            top.append(top_down_paths(es.hierarchy, probs))
        return cls._build(es.hierarchy, es.labels, es.paths["climbing"], concat_decision_paths(lca),
                          concat_decision_paths(top), es.tight_thresholds(),
                          lambda: es.node_probabilities(np.arange(es.n)))

    @classmethod
    def _build(cls, hierarchy: Hierarchy, labels: np.ndarray, climbing: DecisionPaths, lca: DecisionPaths,
               top: DecisionPaths, tight: np.ndarray, probs: Any) -> GuaranteeData:
        paths = {"climbing": climbing, "lca_set": lca, "top_down": top}
        return cls(hierarchy, labels, paths,
                   {k: last_incorrect_values(hierarchy, p, labels) for k, p in paths.items()},
                   np.asarray(tight, dtype=float), climbing.nodes[:, 0], probs)


# ---------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Settings:
    """The requirement and the methods' options.

    alpha : 1 − target accuracy.
    delta : PAC methods' failure probability; only the methods that read it (``needs_delta``) ask
        for it, so it may be None for the others (Algorithm 2, CRC, conformal, Mondrian, DARTS).
    min_coverage, max_severity : optional second risks of ``ltt_multi`` (mean coverage ≥ c,
        mean severity ≤ s).
    p_value : LTT's p-values: ``"binomial"`` (exact binomial tail, 0/1 losses) or
        ``"hoeffding_bentkus"``; second risks always use Hoeffding–Bentkus (non-binary losses).
    n_lambdas : LTT's grid size (``ltt_theta_grid``).
    mondrian_depth : depth of the superclasses of the Mondrian methods.
    quantile : Algorithm 2's θ̂ (``theorem1``): ``"order_statistic"`` (the paper's
        θ_(⌈(n+1)(1−α)⌉)) or ``"quantile"`` (the authors' code, ``numpy.quantile``).
    """

    alpha: float
    delta: float | None = None
    min_coverage: float | None = None
    max_severity: float | None = None
    p_value: PValue = "binomial"
    n_lambdas: int = N_LAMBDAS
    mondrian_depth: int = MONDRIAN_DEPTH
    quantile: QuantileMethod = "order_statistic"

    def __post_init__(self) -> None:
        for name in ("alpha", "delta"):
            v = getattr(self, name)
            if (v is not None or name == "alpha") and not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {v}")
        for name in ("min_coverage", "max_severity"):
            v = getattr(self, name)
            if v is not None and not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name.replace('_', ' ')} must lie in (0, 1), got {v}")
        if self.p_value not in P_VALUES:
            raise ValueError(f"unknown p-value {quote(self.p_value)}; choose one of {', '.join(P_VALUES)}")
        if int(self.mondrian_depth) != self.mondrian_depth or self.mondrian_depth < 0:
            raise ValueError(f"the Mondrian depth must be a non-negative integer, got {self.mondrian_depth}")
        if self.quantile not in ("order_statistic", "quantile"):
            raise ValueError(f"unknown θ̂ rule {quote(self.quantile)}; use 'order_statistic' or 'quantile'")

    @property
    def target(self) -> float:
        return 1.0 - self.alpha

    def delta_for(self, method: str) -> float:
        """δ for ``method``, which reads it (``needs_delta``); one clear error when it was not given."""
        if self.delta is None:
            raise ValueError(f"δ (delta) is needed for method {quote(method)}: its guarantee holds with probability "
                             "≥ 1 − δ over the calibration set; give delta in (0, 1)")
        return float(self.delta)


def needs_delta(method: str) -> bool:
    """Whether ``method`` reads δ: the PAC methods (Theorem 1 one-sided, LTT) do, no other does."""
    return METHODS[check_methods([method])[0]].kind == "pac"


#: The public name (``hsc_core.GuaranteeSettings``).
GuaranteeSettings = Settings


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


def _ltt(data: GuaranteeData, weights: np.ndarray, s: Settings, procedure: FWERProcedure,
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


def _mondrian(data: GuaranteeData, weights: np.ndarray, s: Settings, family: str) -> BatchFit:
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


def calibrate_weights(method: str, data: GuaranteeData, weights: np.ndarray, settings: Settings) -> BatchFit:
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


def calibrate(method: str, data: GuaranteeData, rows: np.ndarray, settings: Settings) -> Calibration:
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


def cannot_note(method: str, n_cal: int, s: Settings, found: bool | float, *, single: bool = False) -> str:
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
    level = s.delta / s.n_lambdas if method in ("ltt_bonferroni", "ltt_holm", "ltt_multi") else s.delta
    need = int(np.ceil(np.log(level) / np.log(1.0 - s.alpha)))
    if method == "theorem1_pac":
        return (f"cannot certify accuracy {s.target:.4g} with confidence {1 - s.delta:.4g} at n = {n_cal:,} "
                f"(needs n ≥ {need:,}): it predicts the root {who}")
    return (f"no θ passes the test at accuracy {s.target:.4g} with confidence {1 - s.delta:.4g} and "
            f"n = {n_cal:,} {who} (even an error-free calibration set needs n ≥ {need:,}): it predicts the root "
            "there")


# ---------------------------------------------------------------------------- the shoot-out
def draw_weights(labels: np.ndarray, n_cal: int, reps: int, *, sampling: Sampling = "iid",
                 seed: int = SEED) -> Callable[[int], np.ndarray]:
    """Return ``draw(r) -> (r, n) weights`` of the next r calibration sets (seeded, reproducible).

    ``"iid"``: n_cal draws with replacement; ``"split"``: a stratified subset of n_cal
    (``stratified_split_sampler``, the paper's protocol).
    """
    n = int(np.asarray(labels).size)
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown sampling {quote(sampling)}; choose one of {', '.join(SAMPLINGS)}")
    if int(n_cal) != n_cal or not 0 < n_cal < n:
        raise ValueError(f"n_cal must be an integer in (0, {n}), got {n_cal}")
    if int(reps) != reps or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps}")
    if sampling == "split":
        sampler = stratified_split_sampler(labels, int(n_cal), seed)

        def draw_split(r: int) -> np.ndarray:
            w = np.zeros((r, n), dtype=np.int64)
            for i in range(r):
                w[i, sampler()] = 1
            return w
        return draw_split
    rng = np.random.default_rng(seed)

    def draw_iid(r: int) -> np.ndarray:
        idx = rng.integers(0, n, size=(r, int(n_cal)))
        w = np.zeros((r, n), dtype=np.int64)
        np.add.at(w, (np.repeat(np.arange(r), int(n_cal)), idx.ravel()), 1)
        return w
    return draw_iid


def _realised(data: GuaranteeData, nodes: np.ndarray, test: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per calibration set: accuracy, coverage, set size (leaves) and severity of ``nodes`` (R, n),
    over every sample (``test`` None) or over the samples ``test`` (R, n) marks."""
    h = data.hierarchy
    per_sample = {
        "accuracy": hierarchical_correctness(h, nodes, data.labels[None, :]).astype(float),
        "coverage": h.coverage[nodes],
        "set_size": h.leaf_count[nodes].astype(float),
        "severity": severity_loss(h, nodes, data.labels[None, :]),
    }
    if test is None:
        return {k: v.mean(axis=1) for k, v in per_sample.items()}
    m = test.sum(axis=1)
    return {k: (v * test).sum(axis=1) / m for k, v in per_sample.items()}


def shootout(
    data: GuaranteeData,
    settings: Settings,
    n_cal: int,
    *,
    methods: Sequence[str] = DEFAULT_METHODS,
    reps: int = N_REPS,
    sampling: Sampling = "iid",
    seed: int = SEED,
    chunk: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ShootoutResult:
    """Every method on the same ``reps`` calibration sets of ``n_cal`` samples.

    Parameters
    ----------
    data : per-sample quantities (``GuaranteeData``).
    settings : target (α), δ, second risks and options.
    n_cal : calibration size.
    methods : names of ``METHODS`` (``ltt_multi`` needs a second risk in ``settings``).
    reps, sampling, seed : the repetitions (``draw_weights``).
    chunk : calibration sets processed at once; default: up to 100, fewer when the (chunk, n) tables
        (weights, nodes, four per-sample measures) would exceed the memory budget.
    progress : ``progress(done, total)`` after each chunk of each method.

    Returns
    -------
    ``ShootoutResult``: one row per (rep, method) and the per-method summary.
    """
    methods = check_methods(methods)
    draw = draw_weights(data.labels, n_cal, reps, sampling=sampling, seed=seed)
    if chunk is None:
        chunk = int(min(100, max(1, memory_budget_bytes() // max(1, data.n * 8 * 8))))
    sizes = [min(chunk, reps - s) for s in range(0, reps, chunk)]
    total = len(sizes) * len(methods)
    done = 0
    rows: list[pd.DataFrame] = []
    seconds = dict.fromkeys(methods, 0.0)
    start_rep = 0
    for size in sizes:
        w = draw(size)
        test = (w == 0) if sampling == "split" else None
        for method in methods:
            t0 = time.perf_counter()
            fit = calibrate_weights(method, data, w, settings)
            got = _realised(data, apply_weights(method, data, fit), test)
            seconds[method] += time.perf_counter() - t0
            theta = fit.lam if fit.lam is not None else (
                fit.theta.min(axis=1) if fit.theta is not None else np.full(size, np.nan))
            rows.append(pd.DataFrame({"rep": np.arange(start_rep, start_rep + size), "method": method,
                                      "theta": theta, "certified": fit.found, **got}))
            done += 1
            if progress is not None:
                progress(done, total)
        start_rep += size
    reps_df = pd.concat(rows, ignore_index=True)
    reps_df["violated"] = violations(reps_df, settings)
    return ShootoutResult(settings, int(n_cal), int(reps), sampling, int(seed), reps_df,
                          summarize(reps_df, settings, int(n_cal), seconds, sampling))


def violations(reps: pd.DataFrame, s: Settings) -> np.ndarray:
    """Whether each repetition missed the requirement: accuracy < 1 − α, or (``ltt_multi``) a
    second risk over its bound. A calibration set on which ``ltt_multi`` certified nothing claims
    nothing (LTT returns no θ; we fall back to the root), so it cannot violate a claim."""
    bad = reps["accuracy"].to_numpy() < s.target - 1e-12
    multi = (reps["method"] == "ltt_multi").to_numpy() & reps["certified"].to_numpy(dtype=bool)
    if s.min_coverage is not None:
        bad |= multi & (reps["coverage"].to_numpy() < s.min_coverage - 1e-12)
    if s.max_severity is not None:
        bad |= multi & (reps["severity"].to_numpy() > s.max_severity + 1e-12)
    return bad


SUMMARY_COLUMNS: tuple[str, ...] = (
    "method", "label", "kind", "target", "delta", "violation_rate", "violation_se", "violation_high",
    "guarantee_holds", "accuracy_mean", "accuracy_std", "accuracy_q05", "accuracy_q95", "coverage_mean",
    "coverage_std", "set_size_mean", "severity_mean", "certified_share", "seconds", "note")


def summarize(reps: pd.DataFrame, s: Settings, n_cal: int, seconds: Mapping[str, float],
              sampling: Sampling) -> pd.DataFrame:
    """One row per method (``SUMMARY_COLUMNS``).

    ``violation_rate`` ± ``violation_se`` (binomial standard error over the repetitions) and its
    one-sided 95 % Clopper–Pearson upper limit ``violation_high``. ``guarantee_holds``: for PAC
    methods, the violation count is not significantly above δ (exact binomial test at 1 %); for
    marginal ones, the mean accuracy is not significantly below 1 − α (one-sided z at 1 %);
    heuristic ones have no claim (empty).
    """
    out = []
    for method, g in reps.groupby("method", sort=False):
        info = METHODS[str(method)]
        r = len(g)
        k = int(g["violated"].sum())
        rate = k / r
        acc = g["accuracy"].to_numpy()
        if info.kind == "pac":
            holds: Any = bool(stats.binom.sf(k - 1, r, s.delta_for(str(method))) > 0.01)
        elif info.kind.startswith("marginal"):
            se = acc.std(ddof=1) / np.sqrt(r) if r > 1 else 0.0
            holds = bool(acc.mean() >= s.target - 2.326 * se - 1e-12)
        else:
            holds = ""
        note = cannot_note(str(method), n_cal, s, float(g["certified"].mean()))
        if info.kind.startswith("marginal"):
            note = (note + "; " if note else "") + "guarantee on average: about half the sets fall below 1 − α"
        if info.kind == "pac" and sampling == "split":
            note = (note + "; " if note else "") + "split sampling: test-set noise inflates the violation rate"
        out.append({
            "method": method, "label": info.label, "kind": info.kind, "target": s.target, "delta": s.delta,
            "violation_rate": rate, "violation_se": float(np.sqrt(rate * (1 - rate) / r)),
            "violation_high": float(stats.beta.ppf(0.95, k + 1, r - k)) if k < r else 1.0,
            "guarantee_holds": holds, "accuracy_mean": float(acc.mean()),
            "accuracy_std": float(acc.std(ddof=1)) if r > 1 else 0.0,
            "accuracy_q05": float(np.quantile(acc, 0.05)), "accuracy_q95": float(np.quantile(acc, 0.95)),
            "coverage_mean": float(g["coverage"].mean()),
            "coverage_std": float(g["coverage"].std(ddof=1)) if r > 1 else 0.0,
            "set_size_mean": float(g["set_size"].mean()), "severity_mean": float(g["severity"].mean()),
            "certified_share": float(g["certified"].mean()), "seconds": float(seconds.get(str(method), 0.0)),
            "note": note,
        })
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))


@dataclass(frozen=True)
class ShootoutResult:
    """What ``shootout`` returns: its settings, one row per (rep, method), one per method."""

    settings: Settings
    n_cal: int
    reps: int
    sampling: Sampling
    seed: int
    repetitions: pd.DataFrame
    summary: pd.DataFrame


__all__ = [
    "DEFAULT_METHODS", "FWER_PROCEDURES", "METHODS", "SAMPLINGS", "SUMMARY_COLUMNS", "BatchFit",
    "Calibration", "GuaranteeData", "GuaranteeSettings", "MethodInfo", "Settings", "ShootoutResult",
    "apply_weights", "calibrate", "calibrate_weights", "cannot_note", "check_methods", "draw_weights",
    "needs_delta", "shootout", "summarize", "violations",
]
