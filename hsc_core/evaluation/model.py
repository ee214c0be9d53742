"""One model's logits under the evaluation protocol: every number the toolkit shows, computed once.

``ModelEvaluation`` holds one model's logits, labels and hierarchy, the protocol's calibration
split and the temperature T fitted on it. ``ModelEvaluation.setting(ts)`` gives an
``EvaluationSet``: the samples that setting is evaluated on, reduced to each rule's decision paths
(chunk by chunk: no samples × nodes matrix is ever held), with curves, hAURC, gain,
calibration–coverage curves, bootstrap intervals, tight thresholds and tidy result rows as cached
methods. ``hsc evaluate``, ``hsc report`` and every dashboard page call these methods and only lay
out what they return, so a number means the same thing wherever it is shown.

Both objects are safe to share between threads (the dashboard's sessions): each cached value is
computed once, under a lock, and then treated as read-only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cached_property, partial
from typing import Any, TypeVar

import numpy as np

from ..core.calibrators import FittedCalibrator, fit_calibrator, get_calibrator
from ..core.confidence import MemberScorer, NodeScorer, fit_node_scorer, get_confidence
from ..core.curves import (
    CCCurve,
    RangeGain,
    RCCurve,
    calibration_coverage_curve,
    gain_on_common_range,
    rc_curve_from_paths,
)
from ..core.events import RuleEvents, rule_events
from ..core.hierarchical_prf import Average, hierarchical_prf, mistake_lca_depth_counts
from ..core.hierarchy import Hierarchy
from ..core.logit_chunks import (
    Precision,
    decision_paths_from_logits,
    node_probabilities_rows,
    node_probability_chunks,
    threshold_grid_from_logits,
)
from ..core.metric_intervals import (
    RulePoints,
    batch_for,
    bootstrap_statistics,
    weighted_achievable_haurc,
    weighted_augrc,
    weighted_aurc_zhou,
    weighted_oracle_haurc,
    weighted_prf,
)
from ..core.metric_rules import ALL_RULES, check_rule
from ..core.parallel import ordered_map
from ..core.probabilities import fit_temperature
from ..core.protocol import CALIBRATION_FRACTION, SPLIT_SEED, calibration_mask, check_protocol, evaluation_mask
from ..core.risk import LOSSES, Loss, hierarchical_correctness
from ..core.rule_registry import shared_pass
from ..core.rules import RULES, DecisionPaths
from ..core.selective_metrics import (
    AurcEstimator,
    OracleMoves,
    achievable_haurc,
    augrc,
    aurc,
    oracle_haurc,
    oracle_moves,
)
from ..core.thresholds import climbing_tight_thresholds
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES, BootstrapResult, bootstrap_haurc, haurc_of_points
from ..core.validation import check_labels, check_logits, clip, clip_path, quote
from ..datasets.members import MembersError, load_members, member_names
from .results import ResultRow, hierarchy_hash, result_row

Progress = Callable[[int, int], None]
#: ``decision_paths_from_logits``'s signature: how a setting's records are built (the plain pass, or
#: ``pipeline.distributed.ray_decision_paths``: the rows split across a Ray cluster, the same numbers).
PathsOf = Callable[..., dict[str, DecisionPaths]]
T = TypeVar("T")
#: Columns of ``EvaluationSet.cc_summary`` (``rule`` is the rule's key; front ends show ``rule_label``).
CC_SUMMARY_COLUMNS: tuple[str, ...] = ("rule", "ECE at the lowest θ (leaves)", "max ECE", "coverage at max ECE",
                                       "area under CC curve (lower is better)")


class _Memo:
    """Values computed once per key (sessions share these objects).

    A value already computed is returned without waiting; one being computed makes only the
    callers of the same key wait (a lock per key), so a long job (a bootstrap) never holds up
    another key's value. Computations nest in one direction only (curves → curve → paths, θ grid),
    so per-key locks cannot deadlock.
    """

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()  # guards ``_locks``

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        try:
            return self._values[key]  # written once, never changed: no lock needed to read
        except KeyError:
            pass
        with self._lock:
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._values:
                self._values[key] = compute()
            return self._values[key]


class EvaluationSet:
    """The samples one temperature setting is evaluated on, and each rule's decision paths.

    Made by ``ModelEvaluation.setting``; not built directly. ``rows`` are the evaluated rows of
    the model's logits (the protocol's choice ∩ the subset), shared with it, never copied.

    Attributes
    ----------
    evaluation : the ``ModelEvaluation`` it belongs to.
    ts : whether the temperature is applied.
    temperature : the T applied (1.0 without temperature scaling).
    rows : (n,) int64 rows of the model's logits, ascending.
    labels : (n,) true leaves of those rows.
    paths : rule → ``DecisionPaths`` of shape (n, n_records).
    calibrator, confidence : the calibrator and confidence score (``core.calibrators``,
        ``core.confidence``); ``none``/``temperature`` with ``softmax`` are the two TS settings.
    scorer : the fitted ``confidence.NodeScorer`` of any other pair (None for the two TS settings).
    """

    def __init__(self, evaluation: ModelEvaluation, ts: bool, rows: np.ndarray, progress: Progress | None,
                 scorer: NodeScorer | MemberScorer | None = None, rules: Sequence[str] = RULES) -> None:
        self.evaluation = evaluation
        self.ts = bool(ts)
        self.scorer = scorer
        self.calibrator = scorer.calibration.key if scorer is not None else ("temperature" if ts else "none")
        self.confidence = scorer.confidence if scorer is not None else "softmax"
        self.temperature = (evaluation.temperature if ts else 1.0) if scorer is None else scorer.calibration.temperature
        self.rows = rows
        self.labels = evaluation.labels[rows]
        if rows.size == 0:
            raise ValueError(f"{clip(evaluation.name)}: no samples to evaluate in subset "
                             f"{quote(evaluation.subset_name)}")
        # The paper's four and any other ``rules`` asked for up front: one pass over the logits.
        built = tuple(dict.fromkeys((*RULES, *(check_rule(r) for r in rules))))
        build = decision_paths_from_logits if scorer is not None or evaluation.paths_of is None else evaluation.paths_of
        self.paths: dict[str, DecisionPaths] = build(
            evaluation.hierarchy, evaluation.logits, self.temperature, built, progress=progress,
            precision=evaluation.precision, rows=rows, scorer=scorer)
        self._memo = _Memo()

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per ``key`` for this set (thread-safe, as every cached number here);
        for layers built on the set (``calibrator_benchmark``). Treat the value as read-only."""
        return self._memo.get(("ext", key), compute)

    def has_cached(self, key: Hashable) -> bool:
        """Whether ``cached(key, …)`` already holds a value (a front end then shows no progress)."""
        return ("ext", key) in self._memo._values

    # ------------------------------------------------------------------ samples
    @property
    def hierarchy(self) -> Hierarchy:
        return self.evaluation.hierarchy

    @property
    def n(self) -> int:
        """Number of evaluated samples."""
        return int(self.rows.size)

    @cached_property
    def sample_ids(self) -> np.ndarray:
        """(n,) sample ids of the evaluated rows ("row <i>" when the model has none)."""
        ids = self.evaluation.sample_ids
        return np.array([f"row {i}" for i in self.rows]) if ids is None else ids[self.rows]

    @cached_property
    def sources(self) -> np.ndarray | None:
        src = self.evaluation.sources
        return None if src is None else src[self.rows]

    @cached_property
    def leaf_pred(self) -> np.ndarray:
        """(n,) the arg-max leaf of each sample (every rule's first record)."""
        return self.paths[RULES[0]].nodes[:, 0]

    @cached_property
    def leaf_conf(self) -> np.ndarray:
        """(n,) the arg-max leaf's probability (clipped to 1, as the rules read it)."""
        return self.paths[RULES[0]].values[:, 0]

    @cached_property
    def top1(self) -> float:
        """Top-1 accuracy of the evaluated samples."""
        return float((self.leaf_pred == self.labels).mean())

    @cached_property
    def id_index(self) -> dict[str, int]:
        """Sample id → position among the evaluated samples."""
        return {str(s): i for i, s in enumerate(self.sample_ids.tolist())}

    @cached_property
    def most_confident_wrong(self) -> np.ndarray:
        """Positions whose arg-max leaf is wrong, most confident first."""
        wrong = np.flatnonzero(self.leaf_pred != self.labels)
        return wrong[np.argsort(-self.leaf_conf[wrong], kind="stable")]

    @cached_property
    def rows_by_class(self) -> dict[int, np.ndarray]:
        """True leaf → positions of its evaluated samples."""
        order = np.argsort(self.labels, kind="stable")
        classes, starts = np.unique(self.labels[order], return_index=True)
        return dict(zip(classes.tolist(), np.split(order, starts[1:]), strict=True))

    def node_probabilities(self, positions: int | Sequence[int] | np.ndarray) -> np.ndarray:
        """Node probabilities of a few evaluated samples, (len(positions), n_nodes), on demand.

        Bit-identical to the rows the decision paths were built from.
        """
        pos = np.atleast_1d(np.asarray(positions, dtype=np.int64))
        return node_probabilities_rows(self.hierarchy, self.evaluation.logits, self.rows[pos], self.temperature,
                                       self.evaluation.precision, scorer=self.scorer)

    def node_row(self, position: int) -> np.ndarray:
        """(n_nodes,) node probabilities of one sample as the rules read them (≤ 1, root = 1)."""
        row = np.minimum(self.node_probabilities([position])[0], 1.0)
        row[self.hierarchy.root] = 1.0
        return row

    def decision_paths(self, rule: str) -> DecisionPaths:
        """Decision paths of any registered rule (``rule_registry``: a listed rule or ``hf<β>``),
        (n, n_records).

        The paper's four are built with the setting; the others on first use, once, with the rules
        they share a pass over the logits with (``rule_registry.shared_pass``: softmax and node
        probabilities are most of the work; another hf<β> gets its own).
        """
        if rule in self.paths:
            return self.paths[rule]
        check_rule(rule)
        ev = self.evaluation
        group = shared_pass(rule)
        return self._memo.get(("paths", group), lambda: decision_paths_from_logits(
            self.hierarchy, ev.logits, self.temperature, group, precision=ev.precision, rows=self.rows,
            scorer=self.scorer))[rule]

    def rule_paths(self, rule: str) -> DecisionPaths:
        """``decision_paths`` (the name before the rule registry)."""
        return self.decision_paths(rule)

    def predict(self, rule: str, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, confidences) of ``rule`` at θ for every evaluated sample, each (n,)."""
        return self.decision_paths(rule).predict(theta)

    def correctness(self, nodes: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
        """Hierarchical correctness of predicted ``nodes`` for the samples at ``positions`` (all)."""
        labels = self.labels if positions is None else self.labels[positions]
        return hierarchical_correctness(self.hierarchy, nodes, labels)

    # ------------------------------------------------------------------ curves and numbers
    def theta_grid(self, dec: int = 2, *, progress: Progress | None = None) -> np.ndarray:
        """The authors' θ grid: node probabilities rounded to ``dec`` decimals, ascending."""
        return self._memo.get(("grid", dec), lambda: threshold_grid_from_logits(
            self.hierarchy, self.evaluation.logits, self.temperature, dec, progress=progress,
            precision=self.evaluation.precision, rows=self.rows, scorer=self.scorer))

    def curves(self, loss: Loss = "01", dec: int | None = None, *, rules: Sequence[str] = RULES,
               progress: Progress | None = None) -> dict[str, RCCurve]:
        """rule → ``curve(rule, loss, dec)`` for ``rules`` (default the paper's four)."""
        if dec is not None:
            self.theta_grid(dec, progress=progress)  # the slow part, with its progress bar
        names = tuple(rules)
        return self._memo.get(("curves", loss, dec, names), lambda: {rule: self.curve(rule, loss, dec)
                                                                    for rule in names})

    def curve(self, rule: str, loss: Loss = "01", dec: int | None = None) -> RCCurve:
        """Hierarchical RC curve of any registered rule (exact, or on the authors' ``dec`` grid).

        Measured on this setting's samples (``rows``: the protocol's evaluation split, 90 % by
        default) with this setting's T: the dashboard's and ``hsc evaluate``'s curve. The dense
        ``core.curves.hierarchical_rc_curve`` on all samples without T therefore gives another
        hAURC on the same logits (Lite0, Selective, no TS: 0.04722 here, 0.04691 there on all
        1,894 samples); on these rows with this T it gives exactly this curve.
        """
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {quote(loss)}; choose one of {', '.join(LOSSES)}")
        paths = self.decision_paths(rule)
        return self._memo.get(("curve", rule, loss, dec), lambda: rc_curve_from_paths(
            self.hierarchy, paths, self.labels, loss, None if dec is None else self.theta_grid(dec)))

    def haurc(self, rule: str, loss: Loss = "01", dec: int | None = None) -> float:
        """Area under ``rule``'s hierarchical RC curve (raw; the paper prints ×1000)."""
        return self.curve(rule, loss, dec).haurc

    def gain(self, rule: str, loss: Loss = "01", dec: int | None = None) -> float:
        """hAURC reduction of ``rule`` vs Selective, in percent (Selective's own is 0), over the
        coverage range both curves cover when ``rule``'s stops short (``gain_range``)."""
        if rule == "selective":
            return 0.0
        return self.gain_range(rule, loss, dec).gain

    def gain_range(self, rule: str, loss: Loss = "01", dec: int | None = None) -> RangeGain:
        """``rule``'s gain vs Selective and the coverage range it is measured over
        (``curves.gain_on_common_range``: the paper's gain when ``rule``'s curve reaches Selective's
        coverage 1, else the mean-risk gain over the common range, ``restricted`` True)."""
        return gain_on_common_range(self.curve("selective", loss, dec), self.curve(rule, loss, dec))

    def cc_curves(self, n_bins: int = 15, *, rules: Sequence[str] = RULES,
                  progress: Progress | None = None) -> dict[str, CCCurve]:
        """rule → ``cc_curve(rule, n_bins)`` for ``rules`` (default the paper's four)."""
        self.theta_grid(2, progress=progress)  # the slow part, with its progress bar
        names = tuple(rules)
        return self._memo.get(("cc_curves", n_bins, names), lambda: {rule: self.cc_curve(rule, n_bins)
                                                                    for rule in names})

    def cc_curve(self, rule: str, n_bins: int = 15) -> CCCurve:
        """Calibration–coverage curve of any registered rule on the authors' 2-decimal θ grid."""
        paths = self.decision_paths(rule)
        # ``rule`` is read only to build paths, and these are given: the curve is named by paths.rule
        return self._memo.get(("cc", rule, n_bins), lambda: calibration_coverage_curve(
            self.hierarchy, None, self.labels, thresholds=self.theta_grid(2), n_bins=n_bins, paths=paths))

    def cc_summary(self, rules: Sequence[str] = RULES, n_bins: int = 15) -> list[dict[str, Any]]:
        """One row per rule of its calibration–coverage curve (``CC_SUMMARY_COLUMNS``): the ECE at
        the lowest θ (the leaves), the largest ECE and the coverage where it occurs, and the area
        under the curve (trapezoids over coverage; lower is better)."""
        out = []
        for rule in rules:
            c = self.cc_curve(rule, n_bins)
            order = np.argsort(c.coverage, kind="stable")
            cov, ece = c.coverage[order], c.ece[order]
            area = float(np.sum(np.diff(cov) * (ece[1:] + ece[:-1]) / 2))
            out.append(dict(zip(CC_SUMMARY_COLUMNS, (rule, float(c.ece[0]), float(c.ece.max()),
                                                     float(c.coverage[c.ece.argmax()]), area), strict=True)))
        return out

    def bootstrap(self, loss: Loss = "01", *, n_resamples: int = N_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED, rules: Sequence[str] | None = None) -> BootstrapResult:
        """95 % paired percentile-bootstrap intervals of every rule's hAURC and gain.

        rules : which rules (default the paper's four); Selective is always included for the gains.
        """
        names = tuple(RULES) if rules is None else tuple(dict.fromkeys(("selective", *rules)))
        paths = {r: self.decision_paths(r) for r in names}
        return self._memo.get(("boot", loss, n_resamples, seed, names), lambda: bootstrap_haurc(
            self.hierarchy, self.labels, paths, loss=loss, n_resamples=n_resamples, seed=seed))

    # ------------------------------------------------------------------ metrics beyond hAURC
    def events(self, rule: str, loss: Loss = "01") -> RuleEvents:
        """``rule``'s operating-point changes sorted by θ (``core.events.rule_events``), cached."""
        return self._memo.get(("events", rule, loss), lambda: rule_events(
            self.hierarchy, self.decision_paths(rule), self.labels, loss))

    def oracle_moves(self, rule: str, loss: Loss = "01") -> OracleMoves:
        """The oracle ordering of ``rule``'s operating points (``selective_metrics.oracle_moves``), cached."""
        return self._memo.get(("oracle", rule, loss), lambda: oracle_moves(
            self.hierarchy, self.decision_paths(rule), self.labels, loss))

    def oracle_haurc(self, rule: str, loss: Loss = "01") -> float:
        """hAURC of the oracle ordering of ``rule``'s operating points (``selective_metrics.oracle_haurc``)."""
        return oracle_haurc(self.oracle_moves(rule, loss))

    def excess_haurc(self, rule: str, loss: Loss = "01") -> float:
        """hAURC − oracle hAURC (E-AURC for hierarchical rules; raw, tables show ×1000)."""
        return self.haurc(rule, loss) - self.oracle_haurc(rule, loss)

    def achievable_haurc(self, rule: str, loss: Loss = "01") -> float:
        """Area under the convex hull of ``rule``'s RC points (``selective_metrics.achievable_haurc``)."""
        return achievable_haurc(self.curve(rule, loss))

    def flat_aurc(self, estimator: AurcEstimator = "plugin") -> float:
        """Flat AURC of the arg-max leaf (0/1 loss, ranked by its probability), by ``estimator``
        (``"zhou"``: the finite-sample-corrected estimator of Zhou et al., ICML 2025)."""
        return aurc(self.leaf_conf, (self.leaf_pred != self.labels).astype(float), estimator=estimator)

    def flat_augrc(self) -> float:
        """AUGRC of the arg-max leaf (Traub et al., 2024); equals Selective's hAURC on a flat tree."""
        return augrc(self.leaf_conf, (self.leaf_pred != self.labels).astype(float))

    def hierarchical_prf(self, rule: str, theta: float = 0.0, *, average: Average = "micro",
                         beta: float = 1.0) -> tuple[float, float, float]:
        """(hP, hR, hFβ) of ``rule``'s predictions at θ (``core.hierarchical_prf``)."""
        nodes, _ = self.predict(rule, theta)
        return hierarchical_prf(self.hierarchy, self.labels, nodes, average=average, beta=beta)

    def severity_histogram(self, rule: str, theta: float = 0.0) -> np.ndarray:
        """Wrong predictions of ``rule`` at θ by LCA depth (``mistake_lca_depth_counts``)."""
        nodes, _ = self.predict(rule, theta)
        return mistake_lca_depth_counts(self.hierarchy, nodes, self.labels)

    def extra_results(self, rules: Sequence[str] = ALL_RULES, loss: Loss = "01", *, intervals: bool = False,
                      n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[ResultRow]:
        """Tidy rows of the metrics beyond hAURC (``results.EXTRA_METRICS``): per rule excess and
        achievable hAURC and micro hF1 at θ = 0; per model Zhou's AURC and AUGRC of the arg-max
        leaf. With ``intervals``, paired 95 % percentile-bootstrap limits (``core.metric_intervals``;
        excess hAURC of rules whose coverage can rise with θ has none)."""
        ev = self.evaluation
        err = (self.leaf_pred != self.labels).astype(float)
        order = np.argsort(-self.leaf_conf, kind="stable")
        values: dict[tuple[str, str], float] = {("", "aurc_zhou"): self.flat_aurc("zhou"),
                                                ("", "augrc"): self.flat_augrc()}
        stats_: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "|aurc_zhou": lambda w: weighted_aurc_zhou(err[order], w[:, order]),
            "|augrc": lambda w: weighted_augrc(err[order], w[:, order]),
        }
        d = self.hierarchy.depth
        for rule in rules:
            events = self.events(rule, loss)
            values[(rule, "excess_haurc")] = self.excess_haurc(rule, loss)
            values[(rule, "achievable_haurc")] = self.achievable_haurc(rule, loss)
            nodes, _ = self.predict(rule, 0.0)
            values[(rule, "hf1_micro")] = self.hierarchical_prf(rule)[2]
            counts = (d[self.hierarchy.lca(nodes, self.labels)].astype(float), d[nodes].astype(float),
                      d[self.labels].astype(float))
            stats_[f"{rule}|hf1_micro"] = partial(_weighted_hf1, counts)
            points = RulePoints(events)  # one weighted sweep per batch for both areas
            stats_[f"{rule}|achievable_haurc"] = partial(_weighted_achievable, points)
            if events.monotone:
                stats_[f"{rule}|excess_haurc"] = partial(_weighted_excess, points, self.oracle_moves(rule, loss))
        # (events × batch) arrays per rule and batch: the batch shrinks as the events grow (iNat21 scale)
        widest = max([self.n] + [self.events(r, loss).event_sample.size for r in rules])
        limits = (self._memo.get(("extra_boot", tuple(rules), loss, n_resamples, seed), lambda: bootstrap_statistics(
            stats_, self.n, n_resamples=n_resamples, seed=seed, batch=batch_for(widest))) if intervals else {})
        rows = []
        for (rule, metric), value in values.items():
            lim = limits.get(f"{rule}|{metric}")
            rows.append(ev.row(self, rule, loss if rule else "", metric, value,
                               None if lim is None else (lim.low, lim.high), None,
                               n_resamples if lim is not None else None))
        return rows

    def tight_thresholds(self, *, progress: Progress | None = None) -> np.ndarray:
        """(n,) each sample's minimal θ at which Climbing is correct (``climbing_tight_thresholds``)."""
        def compute() -> np.ndarray:
            out = np.empty(self.n)
            ev = self.evaluation
            for start, probs in node_probability_chunks(self.hierarchy, ev.logits, temperature=self.temperature,
                                                        rows=self.rows, progress=progress, precision=ev.precision,
                                                        scorer=self.scorer):
                out[start: start + probs.shape[0]] = climbing_tight_thresholds(
                    self.hierarchy, probs, self.labels[start: start + probs.shape[0]])
            return out
        return self._memo.get("tight", compute)

    def guarantee_data(self) -> Any:
        """The per-sample quantities of every accuracy guarantee (``guarantees.GuaranteeData``),
        built once: the shoot-out, the decision card and the dashboard share them."""
        from .guarantee_methods import GuaranteeData  # guarantees uses this module's sets, not the reverse

        return self._memo.get("guarantees", lambda: GuaranteeData.from_evaluation_set(self))

    def results(self, losses: Sequence[Loss] = ("01",), dec: int | None = None, *, intervals: bool = False,
                n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                rules: Sequence[str] = RULES) -> list[ResultRow]:
        """Tidy rows of this setting: top-1 (and T with TS), then hAURC and gain of each of
        ``rules`` (default the paper's four; any of ``ALL_RULES`` or ``hf<β>``, gains vs Selective)
        per loss, with bootstrap intervals when ``intervals`` (exact curves only: ``dec`` is None).

        A rule whose curve stops short of Selective's coverage 1 (``gain_range``) gets its gain over
        the common coverage range, that range in the row's ``coverage_low``/``coverage_high``, and
        no bootstrap interval of the gain (the bootstrap's is of the raw areas)."""
        if intervals and dec is not None:
            raise ValueError("bootstrap intervals are computed on the exact curves; use dec=None")
        rules = tuple(dict.fromkeys(check_rule(r) for r in rules))
        pairs = [(rule, loss) for loss in losses for rule in rules]
        # Each curve is its own sweep (numpy's sorts release the GIL): built side by side on the chunk
        # threads, kept in the memo, and read below in order, so the rows are the same for any thread count.
        for _ in ordered_map(lambda i: self.curve(*pairs[i], dec), range(len(pairs)), warm_first=False):
            pass
        ev = self.evaluation
        rows = [ev.row(self, "", "", "top1", self.top1)]
        if self.calibrator == "temperature":
            rows.append(ev.row(self, "", "", "temperature", self.temperature))
        for loss in losses:
            boot = None
            if intervals:  # the paper's four share one bootstrap (and its cache) with every other caller
                boot = self.bootstrap(loss, n_resamples=n_resamples, seed=seed,
                                      rules=None if set(rules) <= set(RULES) else rules)
            n_boot = None if boot is None else n_resamples
            for rule in rules:
                h = boot.haurc[rule] if boot else None
                rows.append(ev.row(self, rule, loss, "haurc", self.haurc(rule, loss, dec),
                                   None if h is None else (h.low, h.high), dec, n_boot))
                g = boot.gain.get(rule) if boot else None
                fair = self.gain_range(rule, loss, dec)
                if fair.restricted:  # the bootstrap resamples the raw areas' gain: no interval for this one
                    g = None
                rows.append(ev.row(self, rule, loss, "gain_percent", self.gain(rule, loss, dec),
                                   None if g is None else (g.low, g.high), dec,
                                   None if fair.restricted else n_boot,
                                   (fair.low, fair.high) if fair.restricted else None))
        return rows

    def threshold(self, target_accuracy: float, method: str | None = None, *, delta: float | None = None,
                  n: int | None = None, seed: int = 0, **options: Any) -> Any:
        """The θ to ship for accuracy ≥ ``target_accuracy``: ``method`` calibrated on a seeded
        stratified calibration set of ``n`` samples, measured on the others
        (``threshold.threshold``; the Guaranteed-accuracy page, ``hsc card`` and ``decision_card``
        give the same θ for the same settings).

        Parameters
        ----------
        target_accuracy : 1 − α, in (0, 1).
        method : a name of ``guarantees.METHODS``; None (default): ``threshold.DEFAULT_METHOD``, LTT on
            the accuracy of the answers given, with confidence 1 − δ (δ = 0.1 unless given).
        delta : δ, asked only by the PAC methods (``ltt_selective``, ``theorem1_pac``, LTT); ``theorem1``
            (the paper's marginal θ̂) then reports ε.
        n : calibration size (default ``threshold.default_n_cal``: 1,000, at most 90 % of the
            samples); seed : the draw.
        options : further ``guarantees.GuaranteeSettings`` fields (``min_coverage``, ``mondrian_depth`` …).

        Returns
        -------
        ``threshold.ThresholdResult``
        """
        from .threshold import threshold  # the engine uses this module's sets, not the reverse

        return threshold(self.guarantee_data(), target_accuracy, method, delta=delta, n=n, seed=seed, **options)


class ModelEvaluation:
    """One model's logits under the evaluation protocol.

    Parameters
    ----------
    hierarchy : the class tree; the logits' columns are its leaves, in order.
    logits : (n_samples, n_leaves) model outputs, any float dtype; kept, never copied.
    labels : (n_samples,) true leaf indices.
    name, dataset : what the results are labelled with.
    sample_ids, sources : optional (n_samples,) arrays (sources: the data subset of each sample).
    subset : optional (n_samples,) boolean mask: only these samples are *evaluated* (T is always
        fitted on the whole file's calibration split, so every subset shares one T).
    subset_name : what the results call the subset ("all" without one).
    protocol : ``"project"`` (default: every metric on the evaluation split) or ``"paper"`` (the
        authors': metrics without TS on all samples, with TS on the held-out split).
    cal_fraction, seed : the calibration split (``core.protocol.calibration_mask``).
    precision : ``"float32"`` / ``"float64"`` node probabilities; None follows the logits.
    file, manifest : provenance, shown in reports.
    members : an ensemble's members' logits (name → (n_samples, C), the same rows), for the member
        confidence scores; None loads them on first use through the manifest (``datasets.members``)
        from ``members_path`` (default: ``file``).
    members_path : the logits file on disk whose manifest names the members ("": none on disk, so
        no member scores).
    paths_of : builds the records of the two TS settings (``PathsOf``, called as
        ``decision_paths_from_logits``); None: that function, in this process.

    Examples
    --------
    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> h = Hierarchy.flat(4)
    >>> logits, labels = synthetic_logits(h, 400, seed=0)
    >>> ev = ModelEvaluation(h, logits, labels, name="toy")
    >>> ev.setting(ts=False).n                       # the 90 % evaluation split
    360
    >>> round(ev.setting(ts=False).gain("climbing"), 6)   # a flat tree: climbing = selective
    0.0
    """

    def __init__(
        self,
        hierarchy: Hierarchy,
        logits: np.ndarray,
        labels: np.ndarray,
        *,
        name: str = "model",
        dataset: str = "",
        sample_ids: np.ndarray | None = None,
        sources: np.ndarray | None = None,
        subset: np.ndarray | None = None,
        subset_name: str = "all",
        protocol: str = "project",
        cal_fraction: float = CALIBRATION_FRACTION,
        seed: int = SPLIT_SEED,
        precision: Precision | None = None,
        file: str = "",
        manifest: Mapping | None = None,
        members: Mapping[str, np.ndarray] | None = None,
        members_path: str | None = None,
        paths_of: PathsOf | None = None,
    ) -> None:
        arr = np.asarray(logits)
        check_logits(arr[:1], hierarchy.n_leaves)  # shape, class count, dtype; finiteness per chunk
        n = arr.shape[0]
        self.hierarchy = hierarchy
        self.logits = arr
        self.labels = check_labels(labels, n, hierarchy.n_leaves)
        self.name, self.dataset, self.file = str(name), str(dataset), str(file)
        self.manifest = dict(manifest or {})
        self.sample_ids = None if sample_ids is None else _per_sample(sample_ids, n, "sample_ids")
        self.sources = None if sources is None else _per_sample(sources, n, "sources")
        self.subset = None if subset is None else _per_sample(subset, n, "subset").astype(bool)
        self.subset_name = subset_name
        self.protocol = check_protocol(protocol)
        self.cal_fraction, self.seed = float(cal_fraction), int(seed)
        self.precision = precision
        self._members = None if members is None else dict(members)
        self.members_path = self.file if members_path is None else str(members_path)
        self.paths_of = paths_of
        self._memo = _Memo()

    @classmethod
    def from_bundle(cls, bundle: Any, hierarchy: Hierarchy, **options: Any) -> ModelEvaluation:
        """From a ``datasets.logits_io.LogitsBundle`` (name, ids, sources and manifest taken from it)."""
        options.setdefault("name", bundle.name)
        options.setdefault("manifest", bundle.manifest)
        if bundle.n_classes != hierarchy.n_leaves:
            raise ValueError(f"{clip_path(options.get('file') or bundle.name)}: logits have {bundle.n_classes} "
                             "classes but the "
                             f"hierarchy has {hierarchy.n_leaves} leaves")
        return cls(hierarchy, bundle.logits, bundle.labels, sample_ids=bundle.sample_ids, sources=bundle.sources,
                   **options)

    # ------------------------------------------------------------------ the protocol
    @property
    def n_samples(self) -> int:
        return int(self.labels.size)

    @cached_property
    def calibration(self) -> np.ndarray:
        """(n_samples,) boolean mask of the calibration split, on which T is fitted."""
        return calibration_mask(self.labels, self.cal_fraction, self.seed)

    @property
    def n_cal(self) -> int:
        return int(self.calibration.sum())

    @cached_property
    def temperature(self) -> float:
        """T fitted by NLL on the calibration split."""
        return self._memo.get("T", lambda: float(fit_temperature(self.logits, self.labels,
                                                                 rows=np.flatnonzero(self.calibration))))

    @cached_property
    def hierarchy_hash(self) -> str:
        return hierarchy_hash(self.hierarchy)

    def rows_for(self, ts: bool) -> np.ndarray:
        """(n,) ascending rows evaluated with or without TS: the protocol's choice ∩ the subset."""
        mask = evaluation_mask(self.calibration, ts=ts, protocol=self.protocol)
        if self.subset is not None:
            mask = mask & self.subset
        return np.flatnonzero(mask)

    def setting(self, ts: bool, *, progress: Progress | None = None, rules: Sequence[str] = RULES) -> EvaluationSet:
        """The ``EvaluationSet`` with (``ts=True``) or without temperature scaling, built once.

        ``progress(done, total)`` is called while its decision paths are built (first call only).
        ``rules``: rules beyond the paper's four to build in the same pass over the logits, when
        this call builds the set (a rule not built then is built on first use).
        """
        return self._memo.get(("set", bool(ts)), lambda: EvaluationSet(self, bool(ts), self.rows_for(ts), progress,
                                                                      rules=rules))

    def scored(self, calibrator: str = "temperature", confidence: str = "softmax", *,
               progress: Progress | None = None, rules: Sequence[str] = RULES) -> EvaluationSet:
        """The ``EvaluationSet`` of a calibrator (``core.calibrators``) and confidence score
        (``core.confidence``), each fitted on the calibration split, built once.

        ``("none", "softmax")`` is ``setting(False)`` and ``("temperature", "softmax")`` is
        ``setting(True)``, the same objects (so the same numbers). Every other pair is evaluated on
        the rows of the TS setting (the samples its calibrator was not fitted on); with ``none``,
        on the rows without TS (``ts`` false), as ``setting(False)``.
        """
        get_calibrator(calibrator)
        get_confidence(confidence)
        if confidence == "softmax" and calibrator in ("none", "temperature"):
            return self.setting(calibrator == "temperature", progress=progress, rules=rules)
        ts = calibrator != "none"
        return self._memo.get(("scored", calibrator, confidence), lambda: EvaluationSet(
            self, ts, self.rows_for(ts), progress, scorer=self.scorer(calibrator, confidence), rules=rules))

    def built(self, calibrator: str, confidence: str) -> EvaluationSet | None:
        """The ``scored`` set of (calibrator, confidence) when it is built already, else None: nothing
        is fitted or computed here (a front end plans its work with it)."""
        key: tuple = (("set", calibrator == "temperature") if confidence == "softmax"
                      and calibrator in ("none", "temperature") else ("scored", calibrator, confidence))
        return self._memo._values.get(key)

    def is_fitted(self, calibrator: str) -> bool:
        """Whether ``fitted_calibrator(calibrator)`` is held already (``none`` needs no fit)."""
        return calibrator == "none" or ("calibrator", calibrator) in self._memo._values

    def scorer(self, calibrator: str, confidence: str) -> NodeScorer | MemberScorer:
        """The fitted ``NodeScorer`` of (calibrator, confidence) on the calibration split, once
        (the calibrator itself is fitted once for every confidence score); a ``MemberScorer``
        over ``member_logits()`` for a member score."""
        cal = self.calibration
        members = self.member_logits() if get_confidence(confidence).needs_members else None
        return self._memo.get(("scorer", calibrator, confidence), lambda: fit_node_scorer(
            self.hierarchy, self.fitted_calibrator(calibrator), confidence, self.logits[cal], self.labels[cal],
            members=members))

    @property
    def has_members(self) -> bool:
        """Whether the member scores apply: members given, or named by the manifest of a file on disk."""
        return self._members is not None or bool(member_names(self.manifest) and self.members_path)

    def member_logits(self) -> tuple[np.ndarray, ...]:
        """The ensemble members' logits, M arrays (n_samples, C) in this model's rows, loaded once;
        one ``MembersError`` line saying why when the model has none or they do not match."""
        def load() -> tuple[np.ndarray, ...]:
            if self._members is not None:
                found = self._members
            elif not member_names(self.manifest) or not self.members_path:
                raise MembersError(f"{clip(self.name)} has no ensemble members (the member scores need an "
                                   "ensemble variant whose manifest lists member_files)")
            else:
                found = load_members(self.members_path, self.manifest, self.sample_ids, self.labels,
                                     self.hierarchy.n_leaves)
            for name, arr in found.items():
                if np.shape(arr) != self.logits.shape:
                    raise MembersError(f"member {clip(name)} of {clip(self.name)} has logits of shape "
                                       f"{np.shape(arr)}, not {self.logits.shape}")
            return tuple(found.values())
        return self._memo.get(("members",), load)

    def fitted_calibrator(self, calibrator: str) -> FittedCalibrator:
        """Calibrator ``calibrator`` (``core.calibrators``) fitted on the calibration split, once."""
        cal = self.calibration
        return self._memo.get(("calibrator", calibrator), lambda: fit_calibrator(
            calibrator, self.hierarchy, self.logits[cal], self.labels[cal]))

    # ------------------------------------------------------------------ results
    def results(self, losses: Sequence[Loss] = LOSSES, dec: int | None = None, *,
                settings: Sequence[bool] = (False, True), intervals: bool = False, n_resamples: int = N_RESAMPLES,
                seed: int = BOOTSTRAP_SEED) -> list[ResultRow]:
        """Tidy result rows (``results.RESULT_COLUMNS``) of every setting, rule and loss."""
        out: list[ResultRow] = []
        for ts in settings:
            out += self.setting(ts).results(losses, dec, intervals=intervals, n_resamples=n_resamples, seed=seed)
        return out

    def row(self, es: EvaluationSet, rule: str, loss: str, metric: str, value: float,
            ci: tuple[float, float] | None = None, dec: int | None = None, n_resamples: int | None = None,
            coverage: tuple[float, float] | None = None) -> ResultRow:
        """One tidy row of ``es`` (used by ``EvaluationSet.results``)."""
        return result_row(model=self.name, dataset=self.dataset, hierarchy_hash=self.hierarchy_hash,
                          subset=self.subset_name, protocol=self.protocol, rule=rule, loss=loss, ts=es.ts,
                          temperature=es.temperature, dec=dec, metric=metric, value=value, ci=ci,
                          calibrator=es.calibrator, confidence=es.confidence,
                          n_resamples=n_resamples, n_eval=es.n, n_cal=self.n_cal, seed=self.seed,
                          coverage=coverage)


def _weighted_hf1(counts: tuple[np.ndarray, np.ndarray, np.ndarray], w: np.ndarray) -> np.ndarray:
    return weighted_prf(*counts, w)[2]


def _weighted_excess(points: RulePoints, moves: OracleMoves, w: np.ndarray) -> np.ndarray:
    return haurc_of_points(*points(w), monotone=points.events.monotone) - weighted_oracle_haurc(moves, w)


def _weighted_achievable(points: RulePoints, w: np.ndarray) -> np.ndarray:
    return weighted_achievable_haurc(points.events, w, points(w))


def _per_sample(values: Any, n: int, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise ValueError(f"{what} must have shape ({n},), got {arr.shape}")
    return arr
