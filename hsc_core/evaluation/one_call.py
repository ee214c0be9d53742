"""One call per question, straight from logits: the curve and its hAURC, the θ for a target accuracy.

Each function is a thin front door to the evaluation layer (``ModelEvaluation``), so its numbers
are the ones the dashboard, ``hsc evaluate``, ``hsc report`` and ``hsc card`` show for the same
input: T is fitted on the protocol's 10 % calibration split and every number is measured on the
other 90 % (``core.protocol``). The third question, the decision card, is already one call:
``decision_card(ModelEvaluation(hierarchy, logits, labels), target_accuracy=…)``.

Why the dense functions can give a different hAURC on the same logits
-----------------------------------------------------------------------
``hierarchical_rc_curve`` / ``hierarchical_aurc`` (``core.curves``) measure exactly the node
probabilities they are given: usually all samples, without temperature scaling. The functions here
(and every page of the dashboard) measure the protocol's evaluation split: 90 % of the samples,
with T fitted on the other 10 % when ``ts=True``. On the shipped Lite0 logits Selective's hAURC is
0.04691 on all 1,894 samples and 0.04722 on the 1,705 evaluated ones; given the same rows and the
same T, the two paths agree to the last bit (``tests/test_one_call.py``). ``protocol="paper"``
with ``ts=False`` evaluates all samples, as the dense path does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.curves import RCCurve
from ..core.hierarchy import Hierarchy
from ..core.risk import Loss
from .model import ModelEvaluation
from .threshold import ThresholdResult

__all__ = ["rc_curve_and_haurc", "threshold_for_accuracy"]


def rc_curve_and_haurc(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    labels: np.ndarray,
    rule: str = "climbing",
    *,
    ts: bool = True,
    loss: Loss = "01",
    dec: int | None = None,
    **protocol: Any,
) -> tuple[RCCurve, float]:
    """The exact hierarchical risk–coverage curve of ``rule`` and its area (hAURC), in one call.

    The numbers of the dashboard's Risk–Coverage page and of ``hsc evaluate`` for the same input:
    T is fitted on the protocol's calibration split and the curve is measured on the evaluation
    split (see the module's note on why ``hierarchical_aurc`` on all samples differs).

    Parameters
    ----------
    hierarchy : the class tree; the logits' columns are its leaves, in order.
    logits : (n_samples, n_leaves) model outputs, any float dtype.
    labels : (n_samples,) true leaf indices.
    rule : any registered rule (``rule_names()``): the paper's ``"selective"``, ``"climbing"``,
        ``"jumping"``, ``"max_coverage"`` or one beyond the paper.
    ts : with temperature scaling (default, as the dashboard's headline).
    loss : ``"01"`` (hierarchical 0/1 risk) or ``"severity"`` (LCA severity).
    dec : None for the exact curve; 2 for the authors' 2-decimal θ grid.
    protocol : further ``ModelEvaluation`` options (``protocol="paper"``, ``cal_fraction``,
        ``seed``, ``subset`` …).

    Returns
    -------
    curve : ``RCCurve`` with (n_points,) ``coverage``, ``risk`` and ``thresholds``.
    haurc : float, the raw area (the paper prints ×1000); equal to ``curve.haurc``.

    Examples
    --------
    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)   # leaves 0–3 under 4 and 5, root 6
    >>> logits, labels = synthetic_logits(h, 400, seed=0)
    >>> curve, haurc = rc_curve_and_haurc(h, logits, labels, "climbing", ts=False)
    >>> round(haurc, 6), float(curve.coverage.max()), haurc == curve.haurc
    (0.032378, 1.0, True)
    """
    curve = ModelEvaluation(hierarchy, logits, labels, **protocol).setting(ts).curve(rule, loss, dec)
    return curve, curve.haurc


def threshold_for_accuracy(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    labels: np.ndarray,
    target_accuracy: float,
    method: str | None = None,
    *,
    delta: float | None = None,
    n: int | None = None,
    seed: int = 0,
    ts: bool = True,
    **options: Any,
) -> ThresholdResult:
    """The θ to ship for accuracy ≥ ``target_accuracy``, with its guarantee, in one call.

    ``method`` is calibrated on a seeded, stratified calibration set of ``n`` samples drawn from the
    protocol's evaluation split and measured on the rest: the Guaranteed-accuracy page's and
    ``hsc card``'s θ for the same settings (``EvaluationSet.threshold``).

    Parameters
    ----------
    hierarchy, logits, labels : as in ``rc_curve_and_haurc``.
    target_accuracy : 1 − α, in (0, 1).
    method : a guarantee method (``hsc_core.evaluation.guarantee_methods.METHODS``); None (default):
        ``"ltt_selective"``, LTT on the accuracy of the answers given (abstentions excluded), which holds
        with probability ≥ 1 − δ (δ = 0.1 unless given). ``"theorem1"`` is the paper's Algorithm 2 (a
        marginal guarantee on the hierarchical accuracy, on average over calibration sets; no δ).
    delta : δ, needed only by the PAC methods (``ltt_selective``, ``theorem1_pac`` and the LTT ones);
        ``theorem1`` then also reports Theorem 1's ε. Leave it out for every other method.
    n : calibration size (default ``threshold.default_n_cal``: 1,000, at most 90 % of the evaluation
        split).
    seed : the seed of the calibration draw (``calibration_draw``).
    ts : with temperature scaling (T fitted on the protocol's calibration split).
    options : further ``GuaranteeSettings`` fields (``min_coverage``, ``mondrian_depth`` …).

    Returns
    -------
    ThresholdResult : ``theta``, ``guarantee`` (in words), ``test_accuracy``, ``test_coverage`` …

    Examples
    --------
    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> logits, labels = synthetic_logits(h, 600, seed=0)
    >>> res = threshold_for_accuracy(h, logits, labels, 0.9, "theorem1", n=200)   # no δ: Algorithm 2 ignores it
    >>> res.kind, res.delta, res.n_cal, res.n_test, round(res.theta, 4)
    ('marginal', None, 200, 340, 0.6805)
    >>> pac = threshold_for_accuracy(h, logits, labels, 0.9, "theorem1_pac", delta=0.1, n=200)
    >>> pac.kind, pac.theta >= res.theta    # the PAC θ is at least as cautious
    ('pac', True)
    """
    es = ModelEvaluation(hierarchy, logits, labels).setting(ts)
    return es.threshold(target_accuracy, method, delta=delta, n=n, seed=seed, **options)
