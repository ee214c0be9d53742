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
RULE_KEYS = ("rules", "cmp_rule", "c_rule")
#: Other pages' settings, each away from its default, so a rule meets every page's state.
OTHER_SETTINGS = {"model": "efficientnet_lite0", "ts": "0", "theta": "0.6", "loss": "severity", "dec": "2",
                  "bins": "10", "wkind": "icicle", "wcolour": "accuracy_here", "level": "3",
                  "atlas_y": "haurc", "pick": "disagree", "regime": "distillation", "step": "2"}
LITE0 = ROOT / "cached_logits" / "efficientnet_lite0.npz"
pytestmark = pytest.mark.skipif(not LITE0.exists(), reason="no shipped logits")


def test_the_link_parameters_cover_every_rule_setting():
    # a new rule setting must be added to RULE_KEYS, and every other setting here is a real, valid one
    rule_settings = {k for k, s in state.SETTINGS.items() if s.default in (list(rule_names(paper=True)), "climbing")}
    assert rule_settings == set(RULE_KEYS)
    for key, value in OTHER_SETTINGS.items():
        setting = state.SETTINGS[key]
        assert key not in RULE_KEYS and (key == "model" or setting.parse(value) != setting.default), key


def _check(at, page: str, rule: str) -> None:
    assert not at.exception, (rule, [e.value for e in at.exception])
    assert not at.error, (rule, [e.value for e in at.error])
    if page.endswith("model_atlas.py") and rule not in rule_names(paper=True):
        assert any(rule_label(rule) in i.value and "paper's four" in i.value for i in at.info), rule
        assert at.session_state["cmp_rule"] == state.SETTINGS["cmp_rule"].default
    elif page.endswith(("compare_models.py", "where_in_tree.py")):
        assert at.session_state["cmp_rule"] == rule  # shown, not replaced


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_with_every_rule_in_the_link(page):
    """Each rule's link opens the page (a fresh session: the link is read); then the page is rerun
    in that session with each other rule as the link would set it (one app start per page)."""
    first, *rest = rule_names()
    at = open_page(page, {**OTHER_SETTINGS, **dict.fromkeys(RULE_KEYS, first)})  # asserts no exception
    assert not any(k in RULE_KEYS for k, *_ in at.session_state[state.URL_IGNORED])
    _check(at, page, first)
    for rule in rest:
        for key in RULE_KEYS:
            at.session_state[key] = state.SETTINGS[key].parse(rule)  # what the link gives init_state
        at.run()
        _check(at, page, rule)


@pytest.mark.parametrize("rule", rule_names(paper=False))
def test_where_it_stops_and_the_atlas_open_from_each_rules_link(rule):
    """The two pages that broke (KeyError, ValueError) on a rule beyond the paper, each from a fresh link."""
    for page in ("app_pages/where_in_tree.py", "app_pages/model_atlas.py"):
        at = open_page(page, {**OTHER_SETTINGS, **dict.fromkeys(RULE_KEYS, rule)})
        assert not any(k in RULE_KEYS for k, *_ in at.session_state[state.URL_IGNORED])
        _check(at, page, rule)
