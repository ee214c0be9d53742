"""End-to-end: the Guaranteed-accuracy shoot-out in headless Chromium at 1280×720 in presenter
mode, from a deep link: the run button, both figures drawn, the δ line, nothing wider than the
screen. Skipped when Chromium or Playwright is missing."""

from __future__ import annotations

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    chromium,
    require_browser,
    streamlit_server,
    wait_idle,
    wait_laid_out,
)

sync_api = require_browser()
if not (ROOT / "cached_logits" / "efficientnet_lite0.npz").is_file():
    pytest.skip("no cached logits to serve", allow_module_level=True)

LINK = ("guaranteed_accuracy?presenter=1&model=efficientnet_lite0&acc=0.95&conf=0.9&n=800&g_reps=100"
        "&g_methods=theorem1,theorem1_pac,ltt_holm,conformal_lca")
BARS_JS = """() => {
  for (const g of document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')) {
    for (const t of (g._fullData || [])) {
      if ((t.hovertemplate || '').includes('fell below the target')) return {x: Array.from(t.x), y: Array.from(t.y),
        shapes: (g.layout.shapes || []).length};
    }
  }
  return null;
}"""


def test_shootout_in_presenter_mode_at_1280x720(tmp_path):
    with streamlit_server() as url, chromium(sync_api) as browser:
        ctx = browser.new_context(viewport={"width": 1280, "height": 720})
        pg = ctx.new_page()
        pg.set_default_timeout(60_000)
        try:
            pg.goto(f"{url}/{LINK}")
            wait_laid_out(pg)  # the run at this screen's size has drawn the page: its button is final
            assert_no_exception(pg)
            pg.get_by_role("button", name="Run the shoot-out").click()
            try:
                pg.wait_for_function(f"() => ({BARS_JS})() !== null", timeout=180_000)
            except sync_api.TimeoutError:  # say what the page showed instead (its hint: the click's job was lost)
                shown = pg.locator('[data-testid="stAlert"], [data-testid="stProgress"]').all_inner_texts()
                raise AssertionError(f"no shoot-out bars after 180 s; the page shows {shown}") from None
            wait_idle(pg)
            assert_no_exception(pg)
            bars = pg.evaluate(BARS_JS)
            assert len(bars["x"]) == 4 and all(0 <= v <= 1 for v in bars["x"])
            assert bars["shapes"] >= 1  # the δ line
            # visible ones: a session's first run also sends a hidden, empty chart (widgets.warm_plotly)
            charts = pg.locator('[data-testid="stPlotlyChart"]:visible')
            assert charts.count() == 2  # violations and accuracy–coverage (no repetitions were run)
            for k in range(charts.count()):
                box = charts.nth(k).bounding_box()
                assert box is None or box["x"] + box["width"] <= 1280 + 1, box
            pg.screenshot(path=str(tmp_path / "guarantees_presenter_1280x720.png"), full_page=True)
            charts.first.scroll_into_view_if_needed()
        finally:
            ctx.close()
