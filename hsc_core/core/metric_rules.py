"""Rules beyond the paper's four: metric-optimal decoding with a θ knob, and Valmadre's Pareto curve.

* ``hf<β>`` (``hf1``, ``hf0.5``, ``hf2`` …): the node of highest expected hFβ (Plaud et al.,
  ICML 2025, "Hierarchical decision rules", optimal decoding for hFβ restricted to single-node
  predictions, as selective classification predicts one node).
* ``min_severity``: the node of lowest expected mistake severity (Bertinetto et al., CVPR 2020;
  Plaud et al. show the optimum is the deepest node with P > 0.5).
* ``max_information``: the node of highest expected information-based score (Zhao et al.,
  ICCV 2017; ``node_scores``).
* ``pareto``: Valmadre's (NeurIPS 2022) Pareto-optimal sequence of predictions with information
  specificity: at θ, the most specific node with probability ≥ θ.

The knob: at θ, each metric rule predicts the node of best expected score *among the nodes whose
probability is ≥ θ* — the Lagrangian of maximising the metric under a hierarchical-risk
constraint, solved for every multiplier at once. θ = 0 is the unconstrained metric-optimal node;
raising θ moves the prediction towards the root (P = 1) until θ = 1 leaves only nodes of
probability 1. θ is the same confidence threshold as in the paper's rules (a prediction is
accepted when its node's probability is ≥ θ), so every rule here has records, an exact RC curve
and an hAURC through the paper rules' machinery (``pareto``).
"""

from __future__ import annotations

import re

import numpy as np

from .hierarchy import Hierarchy
from .node_scores import Metric, check_beta, expected_scores, information
from .pareto import pareto_paths
from .rules import RULE_LABELS, RULES, DecisionPaths, decision_paths, value_dtype
from .validation import check_node_probs, quote

#: The new rules offered next to the paper's four (``hf<β>`` accepts any β > 0).
EXTRA_RULES: tuple[str, ...] = ("hf1", "min_severity", "max_information", "pareto")
#: Every rule a front end offers, the paper's four first.
ALL_RULES: tuple[str, ...] = RULES + EXTRA_RULES
EXTRA_RULE_LABELS: dict[str, str] = {
    "min_severity": "Severity-optimal",
    "max_information": "Information-optimal",
    "pareto": "Pareto (Valmadre)",
}
_HF = re.compile(r"hf(.*)")


def parse_rule(rule: str) -> tuple[str, float]:
    """(kind, β) of a rule name: kind is the rule itself, or ``"hf"`` for ``hf<β>``.

    Raises one clear ValueError for an unknown name or a β that is not > 0.

    Examples
    --------
    >>> parse_rule("hf0.5"), parse_rule("climbing")
    (('hf', 0.5), ('climbing', 1.0))
    """
    if not isinstance(rule, str):
        raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(ALL_RULES)} (hf<β> for any β > 0)")
    if rule in RULES or rule in EXTRA_RULE_LABELS:
        return rule, 1.0
    m = _HF.fullmatch(rule)
    if m:
        try:
            beta = float(m.group(1))
        except ValueError:
            beta = None
        if beta is not None:
            return "hf", check_beta(beta)
    raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(ALL_RULES)} (hf<β> for any β > 0)")


def check_rule(rule: str) -> str:
    """``rule`` if it names a rule (``ALL_RULES`` or ``hf<β>`` with β > 0), else one clear ValueError."""
    parse_rule(rule)
    return rule


def rule_label(rule: str) -> str:
    """How tables and legends name a rule: "Climbing", "hF1-optimal", "Pareto (Valmadre)"."""
    kind, beta = parse_rule(rule)
    if kind == "hf":
        return f"hF{beta:g}-optimal"
    return RULE_LABELS.get(rule) or EXTRA_RULE_LABELS[rule]


def record_values(hierarchy: Hierarchy, probs: np.ndarray) -> np.ndarray:
    """Node probabilities as every rule reads them (``rules.decision_paths``): clipped to 1 in the
    records' precision, float64 rounded to 12 decimals, the root exactly 1.0. (n, n_nodes)."""
    dtype = value_dtype(probs.dtype)
    vals = np.minimum(probs.astype(dtype, copy=False), dtype(1.0))
    if dtype == np.float64:
        vals = np.round(vals, 12)
    vals[:, hierarchy.root] = 1.0
    return vals


def rule_scores(hierarchy: Hierarchy, probs: np.ndarray, rule: str) -> np.ndarray:
    """(n, n_nodes) what ``rule`` maximises among the nodes with probability ≥ θ."""
    kind, beta = parse_rule(rule)
    if kind == "pareto":
        spec = information(hierarchy)
        return np.broadcast_to(spec, probs.shape)
    metric: Metric = {"hf": "hf", "min_severity": "severity", "max_information": "information"}[kind]  # type: ignore[assignment]
    return expected_scores(hierarchy, probs, metric, beta=beta)


def any_decision_paths(hierarchy: Hierarchy, node_probs: np.ndarray, rule: str,
                       leaf: np.ndarray | None = None) -> DecisionPaths:
    """Decision paths of any rule: the paper's four (``rules.decision_paths``) or the ones here.

    Parameters
    ----------
    node_probs : (n_samples, n_nodes) node probabilities.
    rule : a name from ``ALL_RULES``, or ``hf<β>``.
    leaf : optional precomputed arg-max leaves (used by the paper's rules only).

    Examples
    --------
    >>> from hsc_core.core.probabilities import node_probabilities
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4)
    >>> p = node_probabilities(h, np.array([[0.4, 0.3, 0.2, 0.1]]))   # pair 4: 0.7, pair 5: 0.3
    >>> paths = any_decision_paths(h, p, "min_severity")
    >>> paths.nodes.tolist(), paths.predict(0.0)[0].tolist(), paths.predict(0.8)[0].tolist()
    ([[4, 6]], [4], [6])
    """
    kind, _ = parse_rule(rule)
    if kind in RULES:
        return decision_paths(hierarchy, node_probs, kind, leaf=leaf)  # type: ignore[arg-type]
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    if not np.isfinite(probs).all():
        raise ValueError("node_probs contain NaN or inf")
    return pareto_paths(rule, rule_scores(hierarchy, probs, rule), record_values(hierarchy, probs))

