"""Snapshot links in a real browser: the sidebar's link of a live page opens a static page with the
same numbers, at 1280×720 and in presenter mode; its figure draws with its θ frames, ←/→ move θ,
and "Open interactive" links the live page in the same state. One server for the module."""

from __future__ import annotations

import re

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    chromium,
    find_chart,
    new_page,
    require_browser,
    streamlit_server,
    wait_idle,
    wait_view,
)

sync_api = require_browser()
if not (ROOT / "cached_logits" / "efficientnet_lite0.npz").exists():
    pytest.skip("no shipped logits to serve", allow_module_level=True)

POINT = re.compile(r"(Selective|Climbing|Jumping|Max-Coverage) at θ = (0\.\d\d): coverage ([0-9.]+), risk ([0-9.]+)")
PICK = re.compile(r"^(?:Selective|Climbing|Jumping|Max-Coverage) → .+$", re.M)  # a rule's pick, p and coverage
SAMPLE = re.compile(r"True class: ([^\n]+)\s+Top-1 leaf: ([^\n(]+?) \(p = ([0-9.]+)\)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with streamlit_server({"HSC_SNAPSHOT_DIR": str(tmp_path_factory.mktemp("snapshots"))}) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium(sync_api) as b:
        yield b


def _live(pg, server: str, path: str, chart: str | None, text: str | None = None) -> tuple[str, str]:
    """(main area's text, the sidebar's snapshot link) of a live page once it is idle, its chart
    (if any: ``chart``) drawn and ``text`` (if any) shown. (Streamlit loads an element's code when the
    page first uses it, so under load a metric can still be blank when the run has finished.)"""
    pg.goto(f"{server}/{path}")
    wait_idle(pg)
    if chart is not None:
        find_chart(pg, chart).wait_for()
    if text is not None:
        pg.locator('[data-testid="stMain"]').get_by_text(text).first.wait_for()
    assert_no_exception(pg)
    if chart in ("rc_chart", "explorer_tree"):  # a θ-swept view: its own link, and its θ text
        shown = wait_view(pg, chart)
        return pg.locator('[data-testid="stMain"]').inner_text() + "\n" + shown["text"], shown["share"]
    link = pg.locator("a", has_text="Snapshot link")
    link.wait_for(state="attached")
    return pg.locator('[data-testid="stMain"]').inner_text(), link.get_attribute("href")


def _snapshot(pg, server: str, href: str) -> str:
    """The snapshot page's headline text once its figure is drawn (with its frames)."""
    assert re.fullmatch(r"(http://127\.0\.0\.1:[0-9]+/)?s/[0-9a-f]{20}(\?theta=[01]\.[0-9]{2})?", href), href
    pg.goto(href if href.startswith("http") else f"{server}/{href}")
    pg.wait_for_selector("body[data-drawn='1']")
    assert "Traceback" not in pg.content()
    swept = pg.locator("#theta-text")
    return pg.locator('[data-testid="headline"]').inner_text() + ("\n" + swept.inner_text() if swept.count() else "")


@pytest.mark.parametrize("presenter", ["0", "1"])
def test_risk_coverage_snapshot_shows_the_live_numbers(server, browser, presenter):
    with new_page(browser, 1280, 720) as pg:
        live, href = _live(pg, server, f"risk_coverage?theta=0.42&presenter={presenter}", "rc_chart")
        expected = POINT.findall(live)
        assert len(expected) == 4 and all(p[1] == "0.42" for p in expected)
        assert sorted(POINT.findall(_snapshot(pg, server, href))) == sorted(expected)
        chart = pg.locator("#fig0")
        assert pg.evaluate("document.getElementById('fig0')._transitionData._frames.length") == 101
        assert pg.evaluate("document.getElementById('fig0').layout.sliders[0].active") == 42
        chart.focus()
        pg.keyboard.press("ArrowRight")
        pg.wait_for_function("document.getElementById('fig0').layout.sliders[0].active === 43")
        pg.wait_for_function("document.body.dataset.theta === '0.43'")  # its θ text follows
        assert "Climbing at θ = 0.43" in pg.locator("#theta-text").inner_text()
        back = pg.locator("a", has_text="Open interactive").get_attribute("href")
        assert "/risk_coverage?" in back and "theta=0.43" in back and f"presenter={presenter}" in back


@pytest.mark.parametrize("presenter", ["0", "1"])
def test_explorer_snapshot_shows_the_live_sample(server, browser, presenter):
    with new_page(browser, 1280, 720) as pg:
        live, href = _live(pg, server, f"explorer?pick=rescue&theta=0.5&presenter={presenter}",
                           "explorer_tree")
        sample = SAMPLE.search(live)
        assert sample is not None, live
        shown = _snapshot(pg, server, href)
        assert SAMPLE.search(shown).groups() == sample.groups()
        if presenter == "0":  # presenter mode shows the picks in the tree's headline only
            assert sorted(PICK.findall(shown)) == sorted(PICK.findall(live)) and len(PICK.findall(live)) == 4
            assert all(re.search(r"p = [0-9.]+, coverage [0-9.]+", line) for line in PICK.findall(live))
        assert pg.locator(".info img").count() in (0, 1)


HEADLINE = re.compile(r"On [^\n]+?, with(?:out)? temperature scaling, [^\n]+")


def test_overview_snapshot_shows_the_live_headline(server, browser):
    with new_page(browser, 1280, 720) as pg:
        live, href = _live(pg, server, "?model=efficientnet_lite0", "overview_illustration")
        expected = HEADLINE.findall(live)
        assert len(expected) == 2, live  # with and without temperature scaling
        assert sorted(HEADLINE.findall(_snapshot(pg, server, href))) == sorted(expected)


WHERE = re.compile(r"At θ = 0\.\d\d, \S+ answers [^\n]+ \(the root\)\.")
THETA_HAT = re.compile(r"θ̂ \(threshold\)\s*:?\s*\n?\s*(\d\.\d{4})")


@pytest.mark.parametrize("presenter", ["0", "1"])
def test_where_it_stops_and_guaranteed_accuracy_snapshots_show_the_live_numbers(server, browser, presenter):
    """Two of the pages that got their snapshot last: the sentence and θ̂ the live page shows."""
    with new_page(browser, 1280, 720) as pg:
        live, href = _live(pg, server, f"where_in_tree?theta=0.6&cmp_rule=jumping&presenter={presenter}",
                           "where_chart")
        expected = WHERE.findall(live)
        assert len(expected) == 1 and "0.60" in expected[0], live
        assert WHERE.findall(_snapshot(pg, server, href)) == expected
        # (its histogram waits for "Run repetitions"; the snapshot draws it for the link's count)
        live, href = _live(pg, server, f"guaranteed_accuracy?acc=0.9&n=400&reps=10&presenter={presenter}", None,
                           "θ̂ (threshold)")
        theta = THETA_HAT.search(live)
        assert theta is not None, live
        shown = _snapshot(pg, server, href)
        assert f"θ̂ (threshold): {theta.group(1)}" in shown
