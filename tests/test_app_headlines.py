"""Issue 35: each page opens with one plain-language sentence computed from the data — AppTest on the
shipped Lite0 logits, each sentence recomputed from the library's numbers."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from app_support import open_page

from dashboard import headlines
from hsc_core.core.rule_registry import rule_label
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation.model import ModelEvaluation

SHIPPED = Path(__file__).resolve().parents[1] / "cached_logits"
PAPER = ["selective", "climbing", "jumping", "max_coverage"]


@pytest.fixture(scope="module")
def lite0():
    if not (SHIPPED / "efficientnet_lite0.npz").is_file():
        pytest.skip("shipped logits absent")
    return ModelEvaluation.from_bundle(load_logits(SHIPPED / "efficientnet_lite0.npz"), imagenet_hierarchy())


@pytest.fixture
def shipped_page(monkeypatch, tmp_path):
    for suffix in (".npz", ".json"):
        shutil.copy(SHIPPED / f"efficientnet_lite0{suffix}", tmp_path / f"efficientnet_lite0{suffix}")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path))
    return lambda page, query=None: open_page(page, query)


def _texts(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_risk_coverage_says_what_risk_is_and_which_curve_is_lowest(shipped_page, lite0):
    at = shipped_page("app_pages/risk_coverage.py", {"rules": ",".join(PAPER)})
    es = lite0.setting(True)
    areas = {r: es.curve(r).haurc for r in PAPER}
    sentence = headlines.risk_coverage_headline(areas, "01", rule_label)
    assert sentence in _texts(at)
    assert "**lower is better**" in sentence and f"**{rule_label(min(areas, key=areas.get))}**" in sentence


def test_calibration_coverage_names_the_most_honest_rule(shipped_page, lite0):
    at = shipped_page("app_pages/calibration_coverage.py", {"rules": ",".join(PAPER), "bins": "15"})
    table = lite0.setting(True).cc_summary(PAPER, 15)
    areas = {row["rule"]: row["area under CC curve (lower is better)"] for row in table}
    assert headlines.calibration_headline(areas, rule_label) in _texts(at)


def test_overview_opens_without_jargon(shipped_page, lite0):
    at = shipped_page("app_pages/overview.py")
    lead = next(m.value for m in at.markdown if m.value.startswith("#### "))
    assert "Answering with a coarser class when unsure (Climbing) makes" in lead
    assert "risk–coverage" not in lead and "hAURC" not in lead
    gain = lite0.setting(True).gain("climbing")
    assert f"{abs(gain):.0f} % fewer mistakes (averaged" in lead


def test_overview_opens_without_jargon_at_the_projector_too(shipped_page, lite0):
    """Presenter mode: the message box itself holds the plain sentence (no risk–coverage area in it)."""
    at = shipped_page("app_pages/overview.py", {"presenter": "1"})
    boxes = [b.value for kind in (at.info, at.success, at.warning) for b in kind]
    gain = lite0.setting(True).gain("climbing")
    lead = next(v for v in boxes if "Answering with a coarser class when unsure (Climbing) makes" in v)
    assert f"{abs(gain):.0f} % fewer mistakes (averaged" in lead and "risk–coverage" not in lead
    assert not any(m.value.startswith("#### ") for m in at.markdown)  # the lead is in the box, once


def test_compare_models_names_the_lowest_and_the_near_identical(shipped_page, lite0, tmp_path):
    """Two shipped models (the fixture's folder gets Lite1 too): the sentence names the lower curve."""
    lite1_file = SHIPPED / "efficientnet_lite1.npz"
    if not lite1_file.is_file():
        pytest.skip("shipped Lite1 logits absent")
    for suffix in (".npz", ".json"):
        shutil.copy(SHIPPED / f"efficientnet_lite1{suffix}", tmp_path / f"efficientnet_lite1{suffix}")
    at = shipped_page("app_pages/compare_models.py", {"cmp_rule": "climbing"})
    lite1 = ModelEvaluation.from_bundle(load_logits(lite1_file), imagenet_hierarchy())
    areas = {"efficientnet_lite0": lite0.setting(True).curve("climbing").haurc,
             "efficientnet_lite1": lite1.setting(True).curve("climbing").haurc}
    sentence = headlines.compare_headline(areas, "Climbing")
    assert sentence in _texts(at) and f"**{min(areas, key=areas.get)}** has the lowest" in sentence


def test_where_it_stops_says_where_the_answers_land(shipped_page, lite0):
    from hsc_core.evaluation.diagnostics import landing_counts

    at = shipped_page("app_pages/where_in_tree.py", {"cmp_rule": "climbing", "theta": "0.5"})
    es = lite0.setting(True)
    h = es.hierarchy
    table = landing_counts(h, es.decision_paths("climbing"), es.labels, 0.5).reindex(range(h.n_nodes), fill_value=0)
    sentence = headlines.where_headline(table["stops"].to_numpy(), table["stops_correct"].to_numpy(), h.leaf_count,
                                        "Climbing", 0.5)
    assert sentence in [m.value for m in at.markdown]  # body text, not a caption or a box
    projector = shipped_page("app_pages/where_in_tree.py", {"cmp_rule": "climbing", "theta": "0.5", "presenter": "1"})
    assert sentence in [m.value for m in projector.markdown]  # issue 45: not small grey text at the projector
    assert sentence.startswith("At θ = 0.50, Climbing answers ")


def test_explorer_and_story_open_with_their_sentence(shipped_page, lite0):
    """Issue 35, the pages that lacked one: the Explorer's sentence is the sample's path read by hand
    (Climbing from the top-1 leaf), the story's the top-1 error and the mistakes Climbing rescues."""
    es = lite0.setting(True)
    h = es.hierarchy
    at = shipped_page("app_pages/explorer.py", {"presenter": "1"})  # the sentence at the projector too
    sample = at.query_params["sample"]
    i = [str(s) for s in es.sample_ids].index(sample)
    row, leaf, true = es.node_row(i), int(es.leaf_pred[i]), int(es.labels[i])
    path = [int(v) for v in h.path_to_root(leaf)]
    first = next(k for k, v in enumerate(path) if h.is_ancestor(v, true))  # the lowest correct node
    name = h.names[path[first]].replace("_", " ")
    text = _texts(at)
    assert f"The model's top guess is **{h.names[leaf].replace('_', ' ')}** (p = {row[leaf]:.2f})" in text
    # the default pick rescues a wrong leaf: right from just above the last wrong node's probability
    assert first > 0 and f"with **{name}** or coarser, for θ from " in text
    # both ends of the range in one format (issue 45: "θ from 0.31 to 1.0000"), each its probability
    low, high = re.search(r"or coarser, for θ from ([0-9.]+) to ([0-9.]+)", text).groups()
    digits = len(low.split(".")[1])
    assert digits in (2, 4) and len(high.split(".")[1]) == digits
    below_root = float(row[path[-2]])
    assert float(low) == pytest.approx(row[path[first - 1]], abs=10.0 ** -digits / 2)
    assert float(high) == pytest.approx(min(below_root, 1 - 10.0 ** -digits), abs=10.0 ** -digits / 2)
    assert below_root >= 1 or float(high) < 1  # a probability below 1 never reads as 1
    story = shipped_page("app_pages/story.py")
    wrong = es.leaf_pred != es.labels
    assert f"On these {es.n:,} images the model's top guess is wrong {100 * wrong.mean():.0f} % of the time" in (
        _texts(story))
