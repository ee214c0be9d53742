"""Every RC curve of one model from its logits: the single entry point that the ``evaluate``
command, the report and the dashboard use for whole-model numbers.

logits → (temperature) softmax → node probabilities → each rule's decision paths → exact
(or ``dec``-grid) RC curves per loss. Callers never hold a samples × nodes matrix themselves.
"""

from __future__ import annotations

import numpy as np

from .curves import RCCurve, hierarchical_rc_curve
from .hierarchy import Hierarchy
from .probabilities import node_probabilities, softmax
from .risk import LOSSES, Loss
from .rules import RULES, Rule, decision_paths
from .validation import check_labels, check_logits


def rc_curves_from_logits(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    temperature: float = 1.0,
    rules: tuple[Rule, ...] = RULES,
    losses: tuple[Loss, ...] = LOSSES,
    dec: int | None = None,
) -> dict[tuple[str, str], RCCurve]:
    """RC curve of each (rule, loss).

    Parameters
    ----------
    logits : (n_samples, n_leaves) model outputs in the hierarchy's leaf order.
    labels : (n_samples,) true leaf indices.
    temperature : softmax temperature (1.0 = none).
    dec : None for exact curves; an int for the authors' rounded θ grid.

    Returns
    -------
    {(rule, loss): RCCurve}
    """
    logits = check_logits(logits, hierarchy.n_leaves)
    labels = check_labels(labels, logits.shape[0], hierarchy.n_leaves)
    probs = node_probabilities(hierarchy, softmax(logits, temperature))
    out: dict[tuple[str, str], RCCurve] = {}
    for rule in rules:
        paths = decision_paths(hierarchy, probs, rule)
        for loss in losses:
            out[(rule, loss)] = hierarchical_rc_curve(hierarchy, probs, labels, rule, loss, dec=dec, paths=paths)
    return out
