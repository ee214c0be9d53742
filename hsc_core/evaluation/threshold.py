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

__all__ = ["DEFAULT_N_CAL", "MAX_CAL_SHARE", "ThresholdResult", "calibration_draw", "default_n_cal",
           "guarantee_sentence", "threshold"]


def guarantee_sentence(kind: str, target: float, delta: float | None, depth: int) -> str:
    """What a method of guarantee ``kind`` promises, in words (δ is read by ``"pac"`` only)."""
    if kind == "pac":
        if delta is None:
            raise ValueError("a PAC guarantee needs δ (delta)")
        return (f"With probability at least {1 - delta:.4g} over the calibration set, the hierarchical accuracy "
                f"on new data from the same distribution is at least {target:.4g}.")
    if kind == "marginal":
        return (f"On average over calibration sets, a new sample is predicted correctly with probability at least "
                f"{target:.4g}; one deployed calibration can fall below it (no 1 − δ statement).")
    if kind == "marginal per group":
        return (f"As 'marginal', within every superclass at depth {depth} of the tree: on average, accuracy at "
                f"least {target:.4g} in each.")
    return "No finite-sample guarantee: DARTS' binomial stopping rule is a heuristic."


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
    theta : the θ to ship (Mondrian: the smallest group θ; DARTS: its λ).
    epsilon : Theorem 1's ε for ``theorem1`` when δ is given, else None.
    target_accuracy, delta : the requirement (δ None when the method does not read it).
    n_cal, n_test, seed : the split (``calibration_draw``).
    certified : whether the method certified the target (False: it predicts the root there).
    note : why it did not, or a caveat ("" otherwise).
    test_accuracy, test_coverage : hierarchical accuracy and mean coverage on the test samples.
    share_answered_below_root : share of test samples predicted below the root.
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

    def answer_sentence(self) -> str:
        """E.g. "72.8 % of the test samples get an answer below the root, most at depth 9"."""
        depth = self.most_common_depth
        where = "" if depth is None else f", most at depth {depth}"
        return f"{self.share_answered_below_root:.1%} of the test samples get an answer below the root{where}"


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
    method: str = "theorem1",
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
    method : a name of ``guarantees.METHODS`` (default ``"theorem1"``, the paper's Algorithm 2).
    delta : δ, needed by the PAC methods only (``guarantees.needs_delta``); the others ignore it,
        except ``theorem1``, whose result then carries Theorem 1's ε.
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
    >>> res.n_cal, res.n_test, res.kind
    (200, 340, 'marginal')
    >>> 0.0 <= res.theta <= 1.0 and abs(sum(res.share_by_depth.values()) - 1.0) < 1e-12
    True
    >>> es.threshold(0.9, "theorem1_pac", n=200)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: δ (delta) is needed for method 'theorem1_pac' (Theorem 1, one-sided (PAC)): ...
    """
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
        method=method, label=info.label, kind=info.kind, theta=float(fit.theta), epsilon=eps,
        target_accuracy=settings.target, delta=settings.delta, n_cal=int(cal.size), n_test=int(test.sum()),
        seed=int(seed), certified=bool(fit.found), note=fit.note,
        test_accuracy=float(h.is_ancestor(nodes, data.labels[test]).mean()),
        test_coverage=float(h.coverage[nodes].mean()),
        share_answered_below_root=float((nodes != h.root).mean()),
        share_by_depth={int(d): float(c / nodes.size) for d, c in zip(depths, counts, strict=True)},
        guarantee=guarantee_sentence(info.kind, settings.target, settings.delta, settings.mondrian_depth),
        thetas_by_group=dict(fit.thetas_by_group), test_nodes=nodes, test_positions=np.flatnonzero(test),
        calibration=fit)
