"""Each page's opening sentence from the page's own data objects (``headlines`` turns numbers into
words): one function per page, called by the live page and by its snapshot, so both say the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.rule_registry import rule_label
from hsc_core.datasets.imagenet_trees import TREES
from hsc_core.evaluation import EvaluationSet
from hsc_core.report.html_report import HEADLINE_RULE

from . import calibrators as cal
from . import headlines, views
from .evaluations import CurveSet

#: Calibration–Coverage's summary column the sentence ranks the rules by.
CC_AREA = "area under CC curve (lower is better)"
#: The tree whose classes are shuffled: Hierarchy sensitivity's sentence says whether the gain survives it.
RANDOM_TREE = "random"


def climb(h: Hierarchy, node_row: np.ndarray, pred_leaf: int, true_leaf: int | None) -> str:
    """Explorer / Try an image: one sample's sentence from its (n_nodes,) node probabilities."""
    return headlines.climb_headline(*views.climb_path(h, node_row, int(pred_leaf), true_leaf))


def risk_coverage(cs: CurveSet, rules: Sequence[str], loss: str) -> str:
    """Risk–Coverage: the rules' hAURC in words."""
    return headlines.risk_coverage_headline({r: cs.curves[r].haurc for r in rules}, loss, rule_label)


def calibration_coverage(summary: Sequence[Mapping[str, Any]]) -> str:
    """Calibration–Coverage: ``summary`` is ``EvaluationSet.cc_summary``'s rows (one per rule)."""
    return headlines.calibration_headline({row["rule"]: row[CC_AREA] for row in summary}, rule_label)


def sensitivity(table: Sequence[Mapping[str, Any]], trees: Sequence[str]) -> str:
    """Hierarchy sensitivity: ``table`` is ``sensitivity_table``'s rows of the chosen ``trees``."""
    return headlines.sensitivity_headline(
        {TREES[d["tree"]].label: d["gain_percent"] for d in table if d["rule"] == HEADLINE_RULE},
        rule_label(HEADLINE_RULE), TREES[RANDOM_TREE].label if RANDOM_TREE in trees else None)


def story(view: EvaluationSet) -> str:
    """The guided story: the top-1 error and the share Climbing rescues at the story's θ."""
    return headlines.story_headline(view.n, *views.rescued_share(view, views.FIGURE1_THETA), views.FIGURE1_THETA)


def per_rank(card: Mapping[str, Any], target: float, delta: float) -> str:
    """Per-rank thresholds: the card's share answered and what it promises."""
    return headlines.per_rank_headline(card["answer_share"], bool(card["certified"]), target, delta,
                                       float(card["realised_accuracy"]), card.get("realised_answered_accuracy"),
                                       card.get("quantity", "hierarchical"))


def calibrators(rows: list[dict[str, Any]]) -> str:
    """Calibrators: the best and worst calibrator × score pair by hAURC."""
    return headlines.calibrators_headline(rows, cal.calibrator_label, cal.confidence_label)
