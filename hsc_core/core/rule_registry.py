"""Every inference rule the toolkit knows, named in one place (in the style of timm's ``_registry``).

Each rule is a frozen ``RuleSpec``: its key, display label, citation, plot style (colour, dash,
marker: plain strings, so the math layer holds no plotting code), whether it is one of the paper's
four, and how its decision paths are computed from (hierarchy, node_probs): ``method`` names the
algorithm (``rules.decision_paths`` for the paper's candidate sequences, the metric-optimal front
of ``metric_rules``, or another rule's records), and ``shared_pass`` groups the rules that are built
in one pass over the logits (softmax and node probabilities are most of the work).

``hf<β>`` is a *family*: any β > 0 resolves through its name pattern (``get_rule("hf0.5")``), and
``hf1`` is listed as its representative. ``rules.RULES``, ``rules.RULE_LABELS`` and
``metric_rules.ALL_RULES`` / ``EXTRA_RULES`` / ``parse_rule`` / ``check_rule`` / ``rule_label``
are derived from here; front ends list rules with ``rule_names`` and style them from the spec.

Examples
--------
>>> rule_names(paper=True)
('selective', 'climbing', 'jumping', 'max_coverage')
>>> get_rule("hf0.5").label, get_rule("hf0.5").beta, rule_label("max_coverage")
('hF0.5-optimal', 0.5, 'Max-Coverage')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from .node_scores import check_beta
from .validation import quote

#: How a rule's decision paths are computed from (hierarchy, node_probs):
#: "candidates": the paper's candidate sequence compressed to records (``rules.decision_paths``);
#: "metric_front": the front of the node of best expected ``metric`` among those with P ≥ θ
#: (``metric_rules``); "records_of": the records of another rule (``records_of``), renamed.
Method = Literal["candidates", "metric_front", "records_of"]


@dataclass(frozen=True)
class RuleSpec:
    """One inference rule.

    Attributes
    ----------
    key : the rule's name in code, URLs, CSV and the CLI ("climbing", "hf0.5").
    label : how tables and legends name it ("Climbing", "hF0.5-optimal").
    source : where it comes from (citation text).
    colour, dash, marker : its plot style: a hex colour, a plotly dash and a plotly marker symbol.
    paper : one of the paper's four rules.
    method : how its decision paths are computed (``Method``).
    metric : the expected score a "metric_front" rule maximises ("hf", "severity", "information").
    records_of : the rule whose records a "records_of" rule takes.
    beta : β of an hFβ rule (1.0 for every other rule, as ``parse_rule`` reports it).
    family : the family a rule was resolved through ("hf"), or None.
    shared_pass : rules with the same value are built in one pass over the logits; None: alone.
    """

    key: str
    label: str
    source: str
    colour: str
    dash: str
    marker: str
    paper: bool
    method: Method
    metric: str | None = None
    records_of: str | None = None
    beta: float = 1.0
    family: str | None = None
    shared_pass: str | None = None

    @property
    def kind(self) -> str:
        """The family name for a family member ("hf"), else the key (``metric_rules.parse_rule``)."""
        return self.family or self.key

    @property
    def style(self) -> tuple[str, str, str]:
        """(colour, dash, marker)."""
        return self.colour, self.dash, self.marker


@dataclass(frozen=True)
class RuleFamily:
    """Rules named by a pattern, such as ``hf<β>``: ``make`` builds the spec of one parameter."""

    name: str
    pattern: re.Pattern[str]
    hint: str
    make: Callable[[str], RuleSpec | None]


_RULES: dict[str, RuleSpec] = {}  # listed rules, in registration order
_FAMILIES: dict[str, RuleFamily] = {}


def register_rule(spec: RuleSpec) -> RuleSpec:
    """List ``spec`` (a new key; its style must differ from every listed rule's). Returns it."""
    if spec.key in _RULES:
        raise ValueError(f"rule {quote(spec.key)} is already registered")
    clash = [r.key for r in _RULES.values() if r.style == spec.style]
    if clash:
        raise ValueError(f"rule {quote(spec.key)} has the style of {clash[0]}; give it its own colour, dash or marker")
    _RULES[spec.key] = spec
    return spec


def register_family(family: RuleFamily) -> RuleFamily:
    """Accept every name ``family.pattern`` matches (``get_rule`` resolves them with ``family.make``)."""
    if family.name in _FAMILIES:
        raise ValueError(f"rule family {quote(family.name)} is already registered")
    _FAMILIES[family.name] = family
    return family


def rule_names(paper: bool | None = None) -> tuple[str, ...]:
    """The listed rules, the paper's first; ``paper=True``: only the paper's, False: only the others."""
    specs = sorted(_RULES.values(), key=lambda s: not s.paper)  # stable: registration order within each
    return tuple(s.key for s in specs if paper is None or s.paper == paper)


def _unknown(name: object) -> ValueError:
    hints = "".join(f" ({f.hint})" for f in _FAMILIES.values())
    return ValueError(f"unknown rule {quote(name)}; choose one of {', '.join(rule_names())}{hints}")


def get_rule(name: str) -> RuleSpec:
    """The spec of a listed rule, or of a family member (``hf0.5``); one clear ValueError otherwise."""
    if not isinstance(name, str):
        raise _unknown(name)
    spec = _RULES.get(name)
    if spec is not None and spec.family is None:
        return spec
    for family in _FAMILIES.values():
        if family.pattern.fullmatch(name):
            made = family.make(name)
            if made is not None:
                return made
    raise _unknown(name)


def is_rule(name: object) -> bool:
    """Whether ``name`` names a rule (``get_rule`` would not raise)."""
    try:
        get_rule(name)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def rule_label(name: str) -> str:
    """How tables and legends name a rule: "Climbing", "hF1-optimal", "Pareto (Valmadre)"."""
    return get_rule(name).label


def shared_pass(name: str) -> tuple[str, ...]:
    """The rules built in one pass with ``name`` (itself included; listed rules only, in order)."""
    spec = get_rule(name)
    if spec.shared_pass is None or spec.key not in _RULES:
        return (spec.key,)
    return tuple(k for k in rule_names() if _RULES[k].shared_pass == spec.shared_pass)


# ---------------------------------------------------------------------------- the rules
# Okabe & Ito (2008) colours (``report.style.OKABE_ITO`` names them); every pair of listed rules
# differs in at least two of colour, dash and marker, so no meaning rests on colour alone.
_BLACK, _ORANGE, _SKY_BLUE, _BLUISH_GREEN = "#000000", "#E69F00", "#56B4E9", "#009E73"
_BLUE, _VERMILLION, _REDDISH_PURPLE = "#0072B2", "#D55E00", "#CC79A7"
_PAPER = "Goren et al., \"Hierarchical Selective Classification\" (NeurIPS 2024)"

for _spec in (
    RuleSpec("selective", "Selective", _PAPER + ": the arg-max leaf, else the root", _BLACK, "dot", "square",
             paper=True, method="candidates", shared_pass="paper"),
    RuleSpec("climbing", "Climbing", _PAPER + ", Algorithm 1: up the arg-max leaf's path", _BLUE, "solid",
             "circle", paper=True, method="candidates", shared_pass="paper"),
    RuleSpec("jumping", "Jumping", _PAPER + ": the most probable node of each height layer", _ORANGE, "dash",
             "triangle-up", paper=True, method="candidates", shared_pass="paper"),
    RuleSpec("max_coverage", "Max-Coverage", _PAPER + ": the most probable node of each coverage level",
             _REDDISH_PURPLE, "dashdot", "diamond", paper=True, method="candidates", shared_pass="paper"),
):
    register_rule(_spec)

_HF1 = RuleSpec("hf1", "hF1-optimal", "Plaud et al., \"Hierarchical decision rules\" (ICML 2025): best expected "
                "hFβ", _SKY_BLUE, "longdash", "star", paper=False, method="metric_front", metric="hf", beta=1.0,
                family="hf", shared_pass="beyond")
for _spec in (
    _HF1,
    RuleSpec("min_severity", "Severity-optimal", "Bertinetto et al., \"Making better mistakes\" (CVPR 2020): "
             "lowest expected mistake severity", _VERMILLION, "longdashdot", "hexagon", paper=False,
             method="metric_front", metric="severity", shared_pass="beyond"),
    RuleSpec("max_information", "Information-optimal", "Zhao et al. (ICCV 2017): best expected information-based "
             "score", _BLUISH_GREEN, "dash", "pentagon", paper=False, method="metric_front", metric="information",
             shared_pass="beyond"),
    # Valmadre's front with information specificity is Max-Coverage's record list (``metric_rules``).
    RuleSpec("pareto", "Pareto (Valmadre)", "Valmadre, \"Hierarchical classification at multiple operating "
             "points\" (NeurIPS 2022)", _BLACK, "longdashdot", "cross", paper=False, method="records_of",
             records_of="max_coverage", shared_pass="beyond"),
):
    register_rule(_spec)


def _hf_member(name: str) -> RuleSpec | None:
    try:
        beta = float(name[2:])
    except ValueError:
        return None
    beta = check_beta(beta)  # β ≤ 0, inf or NaN: its own clear ValueError
    if name == _HF1.key:
        return _HF1
    # Any other β shares hF1's style (one of them is shown at a time) and gets its own pass.
    return replace(_HF1, key=name, label=f"hF{beta:g}-optimal", beta=beta, shared_pass=None)


register_family(RuleFamily("hf", re.compile(r"hf(.*)"), "hf<β> for any β > 0", _hf_member))
