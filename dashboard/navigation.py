"""The dashboard's pages, grouped for the sidebar (Learn / Explore / Decide / Research) and named on
the landing page: one table, so the sidebar and the landing never disagree."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageInfo:
    """One page: its file in app_pages/, sidebar title, icon, deep link and what it answers."""

    file: str
    title: str
    icon: str
    url_path: str
    answers: str


#: The guided story's steps (its page, its snapshot and the landing page's count read them here).
STORY_STEPS = {
    1: "The classifier is unsure",
    2: "A selective classifier can only reject",
    3: "Climb the hierarchy instead",
    4: "Across all samples: risk against coverage",
    5: "The guarantee",
}
_COUNTS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def count_word(n: int) -> str:
    """``n`` as a word where that reads better (3 to 9), else its digits.

    >>> count_word(5), count_word(12)
    ('five', '12')
    """
    return _COUNTS.get(n, str(n))


SECTIONS: dict[str, list[PageInfo]] = {
    "Learn": [
        PageInfo("overview.py", "Overview", ":material/home:", "home", "the one message, and every model's numbers"),
        PageInfo("story.py", "Guided story", ":material/school:", "story",
                 f"the idea in {count_word(len(STORY_STEPS))} steps, for a class"),
        PageInfo("try_an_image.py", "Try an image", ":material/image:", "try_an_image",
                 "what the model answers for one photo"),
    ],
    "Explore": [
        PageInfo("explorer.py", "Explorer", ":material/account_tree:", "explorer",
                 "one sample's tree as θ moves (the paper's Figure 1, live)"),
        PageInfo("risk_coverage.py", "Risk–Coverage", ":material/show_chart:", "risk_coverage",
                 "mistakes against detail, for every rule"),
        PageInfo("calibration_coverage.py", "Calibration–Coverage", ":material/tune:", "calibration_coverage",
                 "how honest each rule's confidence is"),
        PageInfo("where_in_tree.py", "Where it stops", ":material/donut_large:", "where_in_tree",
                 "at which level of the tree the answers land"),
    ],
    "Decide": [
        PageInfo("guaranteed_accuracy.py", "Guaranteed accuracy", ":material/verified:", "guaranteed_accuracy",
                 "the θ to deploy for a target accuracy, and its decision card"),
        PageInfo("compare_models.py", "Compare models", ":material/compare_arrows:", "compare_models",
                 "which model and rule to pick"),
        PageInfo("monitor.py", "Monitor", ":material/monitor_heart:", "monitor",
                 "after deployment: when the promise breaks on a stream, and θ adapting"),
        PageInfo("per_rank.py", "Per-rank thresholds", ":material/stacked_bar_chart:", "per_rank",
                 "one θ per rank, with a guarantee, for a classifier that scores each rank"),
    ],
    "Research": [
        PageInfo("model_atlas.py", "Model atlas", ":material/scatter_plot:", "model_atlas",
                 "which kinds of model gain most from backing off"),
        PageInfo("hierarchy_sensitivity.py", "Hierarchy sensitivity", ":material/park:", "hierarchy_sensitivity",
                 "how much the result depends on the class tree"),
        PageInfo("calibrators.py", "Calibrators", ":material/thermostat:", "calibrators",
                 "which calibrator and confidence score serve the hierarchy best, by hAURC"),
    ],
}


def landing_markdown() -> str:
    """One line per section naming its pages and what each answers (Markdown), for the landing page.

    >>> landing_markdown().splitlines()[0][:40]
    '- **Learn**: *Overview* (the one message'
    """
    return "\n".join(f"- **{section}**: " + " · ".join(f"*{p.title}* ({p.answers})" for p in pages)
                     for section, pages in SECTIONS.items())
