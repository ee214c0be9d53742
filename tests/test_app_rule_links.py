"""AppTest: every page opened with every listed rule in the link, through each rule parameter
(``rules``, ``cmp_rule``) together with the other pages' settings: no page raises, none shows an
error, and a page that cannot show a rule (Model atlas: the paper's four only) says so in one line
and shows its default.

The pages share one server-side cache (one process), so the shipped model is evaluated once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from app_support import open_page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard import state  # noqa: E402
from hsc_core.core.rule_registry import rule_label, rule_names  # noqa: E402

PAGES = ("app_pages/overview.py", "app_pages/story.py", "app_pages/explorer.py", "app_pages/risk_coverage.py",
         "app_pages/calibration_coverage.py", "app_pages/guaranteed_accuracy.py", "app_pages/compare_models.py",
         "app_pages/where_in_tree.py", "app_pages/model_atlas.py", "app_pages/hierarchy_sensitivity.py",
         "app_pages/try_an_image.py")
#: The link parameters that pick rules (state.SETTINGS): every one of them carries the rule.
RULE_KEYS = ("rules", "cmp_rule")
#: Other pages' settings, each away from its default, so a rule meets every page's state.
OTHER_SETTINGS = {"model": "efficientnet_lite0", "ts": "0", "theta": "0.6", "loss": "severity", "dec": "2",
                  "bins": "10", "wkind": "icicle", "wcolour": "accuracy_here", "level": "3",
                  "atlas_y": "gain_percent", "pick": "disagree", "regime": "distillation", "step": "2"}
LITE0 = ROOT / "cached_logits" / "efficientnet_lite0.npz"
pytestmark = pytest.mark.skipif(not LITE0.exists(), reason="no shipped logits")


def test_the_link_parameters_cover_every_rule_setting():
    # a new rule setting must be added to RULE_KEYS, and every other setting here is a real, valid one
    rule_settings = {k for k, s in state.SETTINGS.items() if s.default in (list(rule_names(paper=True)), "climbing")}
    assert rule_settings == set(RULE_KEYS)
    for key, value in OTHER_SETTINGS.items():
        assert key not in RULE_KEYS and state.SETTINGS[key].parse(value) != state.SETTINGS[key].default or key == "model"


@pytest.mark.parametrize("rule", rule_names())
@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_with_every_rule_in_the_link(page, rule):
    at = open_page(page, {**OTHER_SETTINGS, **dict.fromkeys(RULE_KEYS, rule)})  # asserts no exception
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not any(key == k for k, *_ in at.session_state[state.URL_IGNORED] for key in RULE_KEYS)
    if page.endswith("model_atlas.py") and rule not in rule_names(paper=True):
        assert any(rule_label(rule) in i.value and "paper's four" in i.value for i in at.info)
        assert at.session_state["cmp_rule"] == state.SETTINGS["cmp_rule"].default
    elif page.endswith(("compare_models.py", "where_in_tree.py")):
        assert at.session_state["cmp_rule"] == rule  # shown, not replaced
