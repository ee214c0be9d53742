"""One calibration, one θ to ship: the toolkit's single guarantee engine for one split.

``calibration_draw`` is the one seeded calibration/test split of every caller (the
Guaranteed-accuracy page, its story step, the decision card, the shift view, ``hsc card``): a
stratified draw without replacement (``stratified_split_sampler``, the paper's protocol), so one
(model, n, seed) gives one calibration set everywhere. ``threshold`` calibrates any method of
``guarantees.METHODS`` on it (``calibrate``, hence ``calibrate_weights``: the shoot-out's
implementation) and measures the shipped rule on the other samples; ``EvaluationSet.threshold``
is its entry point on a model.

δ is asked only by the methods that read it (``guarantees.needs_delta``: the PAC ones); the others
ignore it, except that Algorithm 2 (``theorem1``) then also reports Theorem 1's ε.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.thresholds import stratified_split_sampler, theorem1_epsilon
from ..core.validation import quote
from .calibration import Calibration, calibrate
from .guarantee_methods import METHODS, GuaranteeData, GuaranteeSettings, check_methods, needs_delta

__all__ = ["DEFAULT_METHOD", "DEFAULT_N_CAL", "MAX_CAL_SHARE", "ThresholdResult", "answer_breakdown",
           "breakdown_sentence", "calibration_draw", "default_n_cal", "guarantee_sentence", "threshold"]

#: The method every surface deploys when none is named (the Guaranteed-accuracy page, ``hsc card``,
#: ``threshold``): LTT on the accuracy of the answers given, with confidence 1 − δ: what the page's
#: "target accuracy" and "confidence" controls ask. The paper's marginal θ̂ (``theorem1``) is one
#: choice away and says "on average" wherever its number appears.
DEFAULT_METHOD = "ltt_selective"
#: δ when a caller of the default method gives none (the page's confidence slider opens at 0.90).
DEFAULT_DELTA = 0.1


def guarantee_sentence(kind: str, target: float, delta: float | None, depth: int,
                       quantity: str = "hierarchical") -> str:
    """What a method of guarantee ``kind`` promises about which ``quantity``, in words (δ is read by
    ``"pac"`` only; ``quantity``: ``"answers"``, the accuracy of the answers given, or
    ``"hierarchical"``, the paper's accuracy in which an abstention at the root counts as correct).

    >>> guarantee_sentence("pac", 0.9, 0.1, 2, "answers")[:96]
    'With probability at least 0.9 over the calibration set, at least 0.9 of the answers given on new'
    """
    what = (f"at least {target:.4g} of the answers given on new data from the same distribution are correct "
            "(abstentions at the root are not answers and are left out)" if quantity == "answers" else
            f"the hierarchical accuracy on new data from the same distribution is at least {target:.4g} (every "
            "sample counts and an abstention at the root counts as correct, so the answers alone may be less "
            "accurate)")
    if kind == "pac":
        if delta is None:
            raise ValueError("a PAC guarantee needs δ (delta)")
        return f"With probability at least {1 - delta:.4g} over the calibration set, {what}."
    if kind == "marginal":
        return (f"Only on average over calibration sets: a new sample is predicted correctly with probability at "
                f"least {target:.4g}, an abstention at the root counting as correct; the one calibration you deploy "
                "can fall below it (no 1 − δ statement).")
    if kind == "marginal per group":
        return (f"Only on average over calibration sets, within every superclass at depth {depth} of the tree: "
                f"accuracy at least {target:.4g} in each, an abstention at the root counting as correct.")
    return "No finite-sample guarantee: DARTS' binomial stopping rule is a heuristic."


def answer_breakdown(hierarchy: Any, nodes: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Where the answers land and how many are right: the one breakdown every surface states.

    Parameters
    ----------
    hierarchy : the class tree (``Hierarchy``).
    nodes : (m,) predicted node of each sample.
    labels : (m,) true leaf of each sample.

    Returns
    -------
    dict with ``answered_at_leaf``, ``answered_coarser`` (below the root, above a leaf) and
    ``abstained`` (the root): shares of the m samples, summing to 1; ``answered`` (their first two);
    ``answered_accuracy``: the share of the answers that are correct (NaN when none is);
    ``accuracy``: hierarchical accuracy, the root counting as correct; ``n``, ``n_answered``.

    Examples
    --------
    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> b = answer_breakdown(h, np.array([0, 1, 4, 6]), np.array([0, 0, 2, 3]))
    >>> b["answered_at_leaf"], b["answered_coarser"], b["abstained"], round(b["answered_accuracy"], 4), b["accuracy"]
    (0.5, 0.25, 0.25, 0.3333, 0.5)
    """
    nodes, labels = np.asarray(nodes, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    m = int(nodes.size)
    if m == 0:
        raise ValueError("no samples to break down")
    correct = np.asarray(hierarchy.is_ancestor(nodes, labels), dtype=bool)
    answered = nodes != hierarchy.root
    leaf = np.asarray(hierarchy.leaf_count)[nodes] == 1
    n_ans = int(answered.sum())
    return {"answered_at_leaf": float(np.mean(leaf & answered)), "answered_coarser": float(np.mean(answered & ~leaf)),
            "abstained": float(np.mean(~answered)), "answered": n_ans / m,
            "answered_accuracy": float(correct[answered].mean()) if n_ans else float("nan"),
            "accuracy": float(correct.mean()), "n": m, "n_answered": n_ans}


def breakdown_sentence(b: dict[str, float], who: str = "held-out samples") -> str:
    """The breakdown in words: "Of the 1,700 held-out samples, 70.0 % get an answer at a leaf, 9.6 % at a
    coarser node and 20.4 % abstain (the root); 87.8 % of the answers are correct (90.3 % counting the
    abstentions as correct, the paper's hierarchical accuracy)"."""
    acc = ("none is answered" if not b["n_answered"] else
           f"{b['answered_accuracy']:.1%} of the answers are correct")
    tail = (f" ({b['accuracy']:.1%} counting the abstentions as correct, the paper's hierarchical accuracy)"
            if b["abstained"] > 0 else "")
    return (f"Of the {int(b['n']):,} {who}, {b['answered_at_leaf']:.1%} get an answer at a leaf, "
            f"{b['answered_coarser']:.1%} at a coarser node and {b['abstained']:.1%} abstain (the root); {acc}{tail}")


def calibration_draw(labels: np.ndarray, n_cal: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The seeded, stratified calibration set of ``n_cal`` samples and the test samples (the rest).

    Parameters
    ----------
    labels : (n,) true leaves; each class keeps its share (``stratified_split_sampler``, first draw).
    n_cal : calibration size, 0 < n_cal < n.
    seed : the draw's seed; one seed, one calibration set, in every caller.

    Returns
    -------
    cal_positions : (n_cal,) int64 positions of the calibration samples, distinct.
    test_mask : (n,) bool, True for the n − n_cal samples not in the calibration set.

    Examples
    --------
    >>> cal, test = calibration_draw(np.repeat([0, 1], [60, 40]), 10, seed=0)
    >>> cal.size, int(test.sum()), int((np.repeat([0, 1], [60, 40])[cal] == 0).sum())
    (10, 90, 6)
    """
    labels = np.asarray(labels)
    n = int(labels.size)
    if int(n_cal) != n_cal or not 0 < n_cal < n:
        raise ValueError(f"n_cal must be an integer in (0, {n}), got {n_cal}")
    cal = np.asarray(stratified_split_sampler(labels, int(n_cal), int(seed))(), dtype=np.int64)
    test = np.ones(n, dtype=bool)
    test[cal] = False
    return cal, test


#: The calibration size the Guaranteed-accuracy page opens with, and the most any default draws.
DEFAULT_N_CAL = 1000
#: The share of the samples a default calibration may take: the rest measure the realised numbers.
MAX_CAL_SHARE = 0.9


def default_n_cal(n: int) -> int:
    """The calibration size when none is given: 1,000, at most 90 % of the ``n`` samples, the
    Guaranteed-accuracy page's default, so the page, ``hsc card``, ``hsc guarantees`` and
    ``decision_card`` state one θ for the same settings.

    >>> default_n_cal(50_000), default_n_cal(1705), default_n_cal(100)
    (1000, 1000, 90)
    """
    return int(min(DEFAULT_N_CAL, max(1, int(MAX_CAL_SHARE * n))))


@dataclass(frozen=True)
class ThresholdResult:
    """One method calibrated on one seeded calibration set and measured on the other samples.

    Attributes
    ----------
    method, label, kind : the method (``guarantees.METHODS``): name, label and guarantee kind
        (``"pac"``, ``"marginal"``, ``"marginal per group"``, ``"heuristic"``).
    quantity : which accuracy it guarantees: ``"answers"`` (of the answers given, abstentions
        excluded) or ``"hierarchical"`` (every sample, an abstention counting as correct).
    theta : the θ to ship (Mondrian: the smallest group θ; DARTS: its λ).
    epsilon : Theorem 1's ε for ``theorem1`` when δ is given, else None.
    target_accuracy, delta : the requirement (δ None when the method does not read it).
    n_cal, n_test, seed : the split (``calibration_draw``).
    certified : whether the method certified the target (False: it predicts the root there).
    note : why it did not, or a caveat ("" otherwise).
    test_accuracy, test_coverage : hierarchical accuracy (the root counting as correct) and mean
        coverage on the test samples.
    share_answered_below_root : share of test samples predicted below the root.
    breakdown : ``answer_breakdown`` of the test samples: shares answered at a leaf, at a coarser
        node and abstained, and the accuracy of the answers.
    share_by_depth : node depth → share of the test samples predicted at that depth (all of them
        sum to 1; depth 0 is the root).
    guarantee : what the method promises, in words (``card.guarantee_sentence``).
    thetas_by_group : Mondrian group node → θ (empty for the other methods).
    test_nodes : (n_test,) node predicted for each test sample, in sample order.
    test_positions : (n_test,) positions of the test samples in the data, increasing.
    calibration : the calibrated rule (``guarantees.Calibration``), to apply to other data.
    """

    method: str
    label: str
    kind: str
    quantity: str
    theta: float
    epsilon: float | None
    target_accuracy: float
    delta: float | None
    n_cal: int
    n_test: int
    seed: int
    certified: bool
    note: str
    test_accuracy: float
    test_coverage: float
    share_answered_below_root: float
    share_by_depth: dict[int, float]
    guarantee: str
    breakdown: dict[str, float] = field(default_factory=dict)
    thetas_by_group: dict[int, float] = field(default_factory=dict)
    test_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False, compare=False)
    test_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False,
                                       compare=False)
    calibration: Calibration | None = field(default=None, repr=False, compare=False)

    @property
    def found(self) -> bool:
        """Alias of ``certified`` (the shoot-out's word)."""
        return self.certified

    @property
    def most_common_depth(self) -> int | None:
        """The depth below the root where most answered test samples are predicted (None: none answered)."""
        below = {d: s for d, s in self.share_by_depth.items() if d > 0 and s > 0}
        return max(below, key=lambda d: (below[d], -d)) if below else None

    @property
    def answered_accuracy(self) -> float:
        """Accuracy of the answers given on the test samples (abstentions excluded; NaN: none)."""
        return float(self.breakdown["answered_accuracy"])

    @property
    def guaranteed_value(self) -> float:
        """The test samples' value of the quantity the method guarantees (``quantity``); the answers'
        accuracy is 1 when nothing is answered (no answer is wrong)."""
        if self.quantity == "answers":
            return 1.0 if self.breakdown["n_answered"] == 0 else self.answered_accuracy
        return self.test_accuracy

    @property
    def meets_target(self) -> bool:
        """Whether the guaranteed quantity, measured on the test samples, reaches the target."""
        return bool(self.guaranteed_value >= self.target_accuracy - 1e-12)

    def answer_sentence(self) -> str:
        """E.g. "Of the 705 test samples, 70.0 % get an answer at a leaf, 9.6 % at a coarser node and
        20.4 % abstain (the root); 87.8 % of the answers are correct (…), most at depth 9"."""
        depth = self.most_common_depth
        where = "" if depth is None else f"; the answers are most often at depth {depth}"
        return breakdown_sentence(self.breakdown, "test samples") + where

    def target_sentence(self) -> str:
        """Whether the realised value of the guaranteed quantity meets the target, and in which sense.

        E.g. "the accuracy of the answers on the test samples, 0.9447, is below the target 0.95 (the method
        promises it only on average over calibration sets)"."""
        what = "the accuracy of the answers" if self.quantity == "answers" else "the hierarchical accuracy"
        verdict = "meets" if self.meets_target else "is BELOW"
        how = {"pac": f" (promised with confidence {1 - self.delta:.4g})" if self.delta is not None else "",
               "marginal": " (promised only on average over calibration sets: one calibration can fall below)",
               "marginal per group": " (promised only on average over calibration sets, per superclass)",
               }.get(self.kind, " (no guarantee: a heuristic)")
        return (f"{what} on the test samples, {self.guaranteed_value:.4f}, {verdict} the target "
                f"{self.target_accuracy:.4g}{how}")


def _settings(target_accuracy: float, method: str, delta: float | None, options: dict[str, Any]) -> GuaranteeSettings:
    if not 0.0 < float(target_accuracy) < 1.0:
        raise ValueError(f"the target accuracy must lie in (0, 1), got {target_accuracy}")
    if needs_delta(method) and delta is None:
        raise ValueError(f"δ (delta) is needed for method {quote(method)} ({METHODS[method].label}): its guarantee "
                         "holds with probability ≥ 1 − δ over the calibration set; give delta in (0, 1)")
    return GuaranteeSettings(alpha=1.0 - float(target_accuracy), delta=None if delta is None else float(delta),
                             **options)


def threshold(
    data: GuaranteeData,
    target_accuracy: float,
    method: str | None = None,
    *,
    delta: float | None = None,
    n: int | None = None,
    seed: int = 0,
    **options: Any,
) -> ThresholdResult:
    """Calibrate ``method`` for accuracy ≥ ``target_accuracy`` on a seeded stratified calibration
    set and measure the shipped rule on the other samples.

    Parameters
    ----------
    data : the per-sample quantities (``GuaranteeData``; ``EvaluationSet.guarantee_data()``).
    target_accuracy : 1 − α, in (0, 1).
    method : a name of ``guarantees.METHODS``; None (default): ``DEFAULT_METHOD``, LTT on the accuracy
        of the answers (PAC), with δ = ``DEFAULT_DELTA`` unless ``delta`` is given.
    delta : δ, needed by the PAC methods only (``guarantees.needs_delta``); the others ignore it,
        except ``theorem1`` (the paper's marginal Algorithm 2), whose result then carries Theorem 1's ε.
    n : calibration size (default ``default_n_cal``: 1,000, at most 90 % of the samples).
    seed : the calibration draw (``calibration_draw``).
    options : further ``guarantees.GuaranteeSettings`` fields (``min_coverage``, ``p_value``,
        ``mondrian_depth``, ``quantile`` …).

    Returns
    -------
    ThresholdResult

    Examples
    --------
    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> from hsc_core.evaluation.model import ModelEvaluation
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)   # leaves 0–3 under 4 and 5, root 6
    >>> logits, labels = synthetic_logits(h, 600, seed=0)
    >>> es = ModelEvaluation(h, logits, labels, name="toy").setting(ts=False)
    >>> res = es.threshold(0.9, "theorem1", delta=0.1, n=200, seed=0)
    >>> res.n_cal, res.n_test, res.kind, res.quantity
    (200, 340, 'marginal', 'hierarchical')
    >>> default = es.threshold(0.9, n=200, seed=0)   # LTT on the answers' accuracy, δ = 0.1
    >>> default.method, default.kind, default.quantity, default.delta
    ('ltt_selective', 'pac', 'answers', 0.1)
    >>> 0.0 <= res.theta <= 1.0 and abs(sum(res.share_by_depth.values()) - 1.0) < 1e-12
    True
    >>> es.threshold(0.9, "theorem1_pac", n=200)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: δ (delta) is needed for method 'theorem1_pac' (Theorem 1, one-sided (PAC)): ...
    """
    if method is None:
        method, delta = DEFAULT_METHOD, DEFAULT_DELTA if delta is None else delta
    method = check_methods([method])[0]
    settings = _settings(target_accuracy, method, delta, dict(options))
    n_cal = default_n_cal(data.n) if n is None else n
    cal, test = calibration_draw(data.labels, n_cal, seed)
    fit = calibrate(method, data, cal, settings)
    nodes = fit.predict(data)[test]
    h = data.hierarchy
    info = METHODS[method]
    depth = h.depth[nodes]
    depths, counts = np.unique(depth, return_counts=True)
    eps = (theorem1_epsilon(int(cal.size), settings.alpha, settings.delta)
           if method == "theorem1" and settings.delta is not None else None)
    return ThresholdResult(
        method=method, label=info.label, kind=info.kind, quantity=info.quantity, theta=float(fit.theta), epsilon=eps,
        target_accuracy=settings.target, delta=settings.delta, n_cal=int(cal.size), n_test=int(test.sum()),
        seed=int(seed), certified=bool(fit.found), note=fit.note,
        test_accuracy=float(h.is_ancestor(nodes, data.labels[test]).mean()),
        test_coverage=float(h.coverage[nodes].mean()),
        share_answered_below_root=float((nodes != h.root).mean()),
        share_by_depth={int(d): float(c / nodes.size) for d, c in zip(depths, counts, strict=True)},
        guarantee=guarantee_sentence(info.kind, settings.target, settings.delta, settings.mondrian_depth,
                                     info.quantity),
        breakdown=answer_breakdown(h, nodes, data.labels[test]),
        thetas_by_group=dict(fit.thetas_by_group), test_nodes=nodes, test_positions=np.flatnonzero(test),
        calibration=fit)
