"""End-to-end: the real Streamlit server in headless Chromium (Playwright, sync API).

Starts ``streamlit run app.py`` on a free port with the shipped cached logits, visits every
page, moves θ with the keyboard on Risk–Coverage and Explorer, and checks the shown values change.
Skipped when Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    find_chart,
    new_context,
    require_browser,
    streamlit_server,
    view,
    view_state,
    wait_drawn,
    wait_idle,
    wait_view,
)

# A deep link first: the fresh server's first request is /explorer, which must run through app.py
# (the pages live in app_pages/, so Streamlit has no legacy pages/ mode to run the file alone) and
# so get app.py's sidebar and state.
PAGES = {
    "explorer": "Explorer",
    "": "Hierarchical Selective Classification",
    "overview": "Hierarchical Selective Classification",  # the Overview's twin address (a shared /overview)
    "story": "Guided story",
    "risk_coverage": "Risk–coverage",
    "calibration_coverage": "Calibration–coverage",
    "guaranteed_accuracy": "Guaranteed accuracy",
    "compare_models": "Compare models",
    "try_an_image": "Try an image",
}

sync_api = require_browser()
if not any((ROOT / "cached_logits").glob("*.npz")):
    pytest.skip("no cached logits to serve", allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    log = ROOT / ".pytest_cache" / "streamlit_browser_test.log"
    with streamlit_server(log_path=log if log.parent.is_dir() else None) as url:
        yield url




def _bytes(frame) -> bytes:
    return frame if isinstance(frame, bytes) else frame.encode()


def press(pg, key: str, keys: list[str]) -> None:
    """Keys on the θ-swept view ``key`` (its chart focused), as a user presses them."""
    view(pg, key).locator("#chart").focus()
    for k in keys:
        pg.keyboard.press(k)


def test_every_page_renders(server, page):
    for path, title in PAGES.items():
        page.goto(f"{server}/{path}")
        wait_idle(page)
        assert page.locator("h1").first.inner_text().strip() == title, path
        assert_no_exception(page)
        # The sidebar model picker is on every page (the page ran inside app.py); the sidebar may
        # still be drawing when the page's title is up, so wait for it (30 s) before counting.
        picker = page.locator('[data-testid="stSidebar"]').get_by_text("Model (cached logits)")
        picker.first.wait_for(timeout=30_000)
        assert picker.count() == 1


# The data of the first plotted trace whose name or hover template starts with a prefix, read
# from the Plotly graph in the page (what the user sees, not what the server meant to send).
_TRACE_JS = """(prefix) => {
  for (const g of hscCharts()) {  // in the page or in the component's frame (browser_support.CHART_JS)
    for (const t of (g.data || [])) {
      if ((t.name || '').startsWith(prefix) || (t.hovertemplate || '').startsWith(prefix))
        return {x: Array.from(t.x), y: Array.from(t.y)};
    }
  }
  return null;
}"""


def trace(pg, prefix: str, y_prefix: str = "") -> dict | None:
    """Waits (up to 30 s) for Plotly to draw the trace (with a first y label starting ``y_prefix``)."""
    pg.wait_for_function(
        f"([prefix, y]) => {{ const t = ({_TRACE_JS})(prefix); return t !== null && String(t.y[0]).startsWith(y); }}",
        arg=[prefix, y_prefix], timeout=30_000)
    return pg.evaluate(_TRACE_JS, prefix)


def test_risk_coverage_operating_point_follows_theta(server, page):
    page.goto(f"{server}/risk_coverage?theta=0.5")
    wait_idle(page)
    before = wait_view(page, "rc_chart")["text"]
    assert "Climbing at θ = 0.50" in before
    marker = trace(page, "Climbing at θ = 0.50")  # the operating point drawn on the chart
    cov, risk = re.search(r"Climbing at θ = 0\.50: coverage ([0-9.]+), risk ([0-9.]+)", before).groups()
    assert marker and f"{marker['x'][0]:.4f}" == cov and f"{marker['y'][0]:.4f}" == risk
    press(page, "rc_chart", ["ArrowRight"])  # one step: θ = 0.51, the view's text at once
    step = view_state(page, "rc_chart")["text"]
    assert "Climbing at θ = 0.51" in step and step != before
    press(page, "rc_chart", ["End"])  # θ = 1: every rule predicts the root
    after = view_state(page, "rc_chart")["text"]
    first = re.search(r"Climbing at θ = 0\.51: coverage ([0-9.]+), risk ([0-9.]+)", step)
    assert first and "Climbing at θ = 1.00: coverage 0.0000, risk 0.0000" in after, after
    assert float(first.group(1)) > 0
    # The chart's marker moved with θ to the root's (coverage, risk) = (0, 0).
    moved = trace(page, "Climbing at θ = 1.00")
    # (With temperature scaling a few nodes reach p = 1 in float32, so coverage is 0 only to 4 decimals.)
    assert moved and abs(moved["x"][0]) < 5e-5 and moved["y"][0] == 0, moved
    # At rest the server takes θ: the link and the operating points' CSV say 1.
    page.wait_for_function("() => window.location.search.includes('theta=1')", timeout=30_000)
    page.get_by_text("Operating points at θ = 1.00 (CSV)").wait_for()
    assert_no_exception(page)


def test_explorer_choice_follows_theta(server, page):
    page.goto(f"{server}/explorer?theta=0.5&pick=random&seed=0")
    wait_idle(page)
    before = wait_view(page, "explorer_tree")
    assert before["theta"] == before["drawn"] == "0.50", before
    press(page, "explorer_tree", ["End"])
    after = view_state(page, "explorer_tree")
    assert after["theta"] == "1.00" and after["text"] != before["text"]
    # At θ = 1 Selective abstains: a root prediction reads "reject (root)", never "correct".
    assert re.search(r"Selective → reject \(root\): abstains", after["text"]), after["text"]
    # The tree (built once per sample) shows θ by its frame.
    page.wait_for_function("() => window.location.search.includes('theta=1')", timeout=30_000)
    assert view_state(page, "explorer_tree")["drawn"] == "1.00"
    page.get_by_text("Table of the picks (θ = 1.00)").wait_for()
    assert_no_exception(page)


def test_theta_sweep_runs_in_the_browser(server, page):
    """The view holds 101 frames; keys and ▶ Play move θ with no message to the server; once the sweep
    rests, one value reaches the server (the link and the table follow)."""
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
    page.goto(f"{server}/explorer?theta=0.3&pick=random&seed=0")
    wait_idle(page)
    assert wait_view(page, "explorer_tree")["drawn"] == "0.30"
    frames = find_chart(page, "explorer_tree").evaluate("(g) => g._transitionData._frames.map(f => f.name)")
    assert len(frames) == 101 and frames[0] == "0.00" and frames[-1] == "1.00"
    before = len(sent)
    # Five key presses in one go (a loaded machine may take longer than the view's rest delay between
    # two Playwright key presses, and a pause that long is a rest): the server hears only the θ they end at.
    view(page, "explorer_tree").locator("#chart").evaluate(
        "(c) => { c.focus(); for (let i = 0; i < 5; i++) c.dispatchEvent(new KeyboardEvent('keydown', "
        "{key: 'ArrowRight', bubbles: true})); }")
    assert view_state(page, "explorer_tree")["drawn"] == "0.35"
    # At rest, the server's θ follows (after the view's short delay) and the page is rerun once.
    page.wait_for_function("() => window.location.search.includes('theta=0.35')", timeout=30_000)
    wait_idle(page)
    told = [t for frame in sent[before:] for t in re.findall(rb'"theta":"([0-9.]+)"', _bytes(frame))]
    assert told == [b"0.35"], told  # no θ on the way reached the server: no Streamlit rerun while sweeping
    # ▶ Play: θ climbs to 1 in the browser, without a server message until it rests.
    before = len(sent)
    heads = set()
    view(page, "explorer_tree").locator("#play").click()
    while True:
        n = len(sent)  # counted before the view is read: if it still plays then, it played when counted
        shown = view_state(page, "explorer_tree")
        if not shown["playing"] and heads:
            break
        heads.add(shown["drawn"])  # sampled until Play ends (each sample takes what the machine gives it)
        if shown["playing"]:
            assert n == before  # no server message while it plays
    assert len(heads) >= 3, heads  # several θ values drawn on the way
    page.wait_for_function("() => window.location.search.includes('theta=1')", timeout=30_000)
    assert view_state(page, "explorer_tree")["drawn"] == "1.00"
    assert_no_exception(page)


VIEWPORTS = [(1280, 720), (1920, 1080)]  # a laptop and a projector
# ts=0: the Explorer's first rescue without temperature scaling is the sample checked below.
SHOTS = {"explorer": "explorer?pick=rescue&ts=0", "risk_coverage": "risk_coverage", "story": "story?step=3",
         "explorer_presenter": "explorer?pick=rescue&presenter=1", "story_presenter": "story?step=4&presenter=1"}


@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_screenshots(server, browser, tmp_path, width, height):
    """Screenshots of the teaching views at projector and laptop sizes (kept in tmp_path, or in
    $HSC_SCREENSHOT_DIR when set); in presenter mode the θ sweep and the tree share the screen."""
    ctx = new_context(browser, viewport={"width": width, "height": height})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    out = Path(os.environ.get("HSC_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for name, path in SHOTS.items():
            pg.goto(f"{server}/{path}")
            wait_idle(pg)
            key = {"explorer": "explorer_tree", "risk_coverage": "rc_chart", "story": "story_tree_climb",
                   "explorer_presenter": "explorer_tree", "story_presenter": "story_rc"}[name]
            # Presenter mode: the browser reports its size and the page reruns once at that scale.
            wait_drawn(pg, path)
            wait_view(pg, key)
            assert_no_exception(pg)
            file = out / f"{name}_{width}x{height}.png"
            pg.screenshot(path=str(file))
            assert file.stat().st_size > 20_000
            if name == "story":  # the five steps on one line, none cut off or scrolled away
                group = pg.locator('[data-testid="stButtonGroup"]').first.bounding_box()
                steps = pg.locator('[data-testid="stButtonGroup"] button')
                boxes = [steps.nth(k).bounding_box() for k in range(steps.count())]
                assert len(boxes) == 5 and len({round(b["y"]) for b in boxes}) == 1, boxes
                assert all(b["x"] + b["width"] <= group["x"] + group["width"] + 1 for b in boxes), (group, boxes)
            if name == "explorer":  # the tree keeps its natural width: full names, no stretched gaps
                texts = find_chart(pg, "explorer_tree").locator(".scatterlayer .textpoint").all_text_contents()
                assert any("American Staffordshire terrier" in t for t in texts), texts
                tree = find_chart(pg, "explorer_tree").bounding_box()
                assert tree["width"] <= 1000, tree
            if name == "explorer_presenter":
                slider = view(pg, "explorer_tree").locator("#theta").bounding_box()
                labels = find_chart(pg, "explorer_tree").locator(".scatterlayer .textpoint")
                boxes = [labels.nth(k).bounding_box() for k in range(labels.count())]
                on_screen = [b for b in boxes if b and b["y"] + b["height"] <= height]
                assert slider["y"] + slider["height"] <= height, slider
                assert len(on_screen) >= min(len(boxes), 12), (len(on_screen), len(boxes))
                assert pg.locator('[data-testid="stSidebar"][aria-expanded="true"]').count() == 0
    finally:
        ctx.close()
