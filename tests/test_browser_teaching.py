"""Teaching-grade views in headless Chromium, as a teacher at a projector would use them.

* Presenter mode at 1280×720 and 1920×1080 (a laptop and a projector): every θ page (Explorer, Risk–Coverage, story
  steps 2–4) and the Compare / Calibration–Coverage charts fit the screen with their θ control, and
  the type grows with the screen.
* Normal mode at both sizes: no label of the Explorer's tree is cut at the chart's edge.
* One θ on screen: the θ-swept view owns θ (its slider, keys, ▶ Play and its θ text move together) and the
  server takes θ where a sweep rests.
* The Overview (both addresses), Try an image and Guaranteed accuracy fit one presenter screen at both
  sizes: the message, the control and the main figure with its x-axis title.
* The story: mid-▶ Play every θ on screen agrees; a presenter link draws its chart once, at its size.
* ``/overview`` opens the Overview; the view's share link keeps the model and TS; the camera button exports
  the figure with a title and without the Play button and slider.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    find_chart,
    mark_view,
    new_page,
    play_and_record,
    require_browser,
    streamlit_server,
    view,
    view_kept,
    view_state,
    wait_drawn,
    wait_idle,
    wait_laid_out,
    wait_view,
)

sync_api = require_browser()
if not any((ROOT / "cached_logits").glob("*.npz")):
    pytest.skip("no cached logits to serve", allow_module_level=True)

SIZES = [(1280, 720), (1920, 1080)]  # a laptop and a projector
# path → the swept chart's key (None: a chart without a θ sweep)
PRESENTER_PAGES = {
    "explorer?presenter=1": "explorer_tree",
    "risk_coverage?presenter=1": "rc_chart",
    "story?presenter=1&step=2": "story_tree_sel",
    "story?presenter=1&step=3": "story_tree_climb",
    "story?presenter=1&step=4": "story_rc",
    "compare_models?presenter=1": None,
    "calibration_coverage?presenter=1": None,
}

GEOMETRY_JS = """() => {
  const box = (e) => { const r = hscBox(e); return [r.left, r.top, r.right, r.bottom]; };
  const all = (s) => hscCharts(s).filter((e) => !e.closest('.st-key-hsc_plotly_warm'));
  const p = document.querySelector('[data-testid="stMarkdownContainer"] p');
  return { charts: all('.js-plotly-plot').map(box), axes: all('.js-plotly-plot .xtitle').map(box),
           sweeps: all('#bar').filter((e) => e.getClientRects().length).map(box),  // a swept view's θ controls
           pageSliders: all('[data-testid="stSlider"] [role="group"]').map(box),
           text: p ? parseFloat(getComputedStyle(p).fontSize) : 0,
           chartText: Math.max(0, ...all('.js-plotly-plot .xtitle, .js-plotly-plot .textpoint text')
                                 .map((e) => parseFloat(e.style.fontSize) || 0)) };
}"""


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url



def _open(pg, url: str, path: str, chart: str | None = None) -> None:
    pg.goto(f"{url}/{path}")
    # presenter mode: the run at this screen's size (after the browser's report) has drawn the page
    wait_drawn(pg, path)
    if chart is not None:
        find_chart(pg, chart).locator(".main-svg").first.wait_for()
    else:  # a page chart (not app.py's invisible plotly.js warm-up chart)
        pg.wait_for_function("() => hscCharts('.js-plotly-plot .main-svg')"
                             ".some((e) => !e.closest('.st-key-hsc_plotly_warm'))")
    wait_idle(pg)


# The pages whose main figure (its key) must fit with the message and control above it: the Overview's
# illustration (its twin address /overview is opened by test_browser.py's every-page test), Try an image's tree
# (a shipped image) and Guaranteed accuracy's histogram after a run (its sliders and Run button above it).
SHIPPED_IMAGE = "ILSVRC2012_val_00000198.JPEG"
FITTED_PAGES = {
    "?presenter=1": "overview_illustration",
    f"try_an_image?presenter=1&timg={SHIPPED_IMAGE}": "img_tree",
    "guaranteed_accuracy?presenter=1&reps=20": "ga_hist",
}
MAIN_JS = """(chart) => {
  const box = (e) => { const r = hscBox(e); return [r.left, r.top, r.right, r.bottom]; };
  const main = hscChart(chart);
  const q = (s) => Array.from(document.querySelectorAll(s)).filter((e) => e.getClientRects().length).map(box);
  return { chart: box(main), axes: Array.from(main.querySelectorAll('.xtitle')).map(box),
           sweeps: Array.from(main.ownerDocument.querySelectorAll('#bar')).filter((e) => e.getClientRects().length)
                        .map(box),
           controls: q('[data-testid="stMain"] [data-testid="stSlider"] [role="group"]').concat(
                     q('[data-testid="stMain"] [data-testid="stSelectbox"]'),
                     q('[data-testid="stMain"] [data-testid="stButton"] button')),
           headline: q('[data-testid="stMain"] [data-testid="stAlert"]').slice(0, 1),
           width: document.documentElement.scrollWidth,
           text: parseFloat(getComputedStyle(document.documentElement).fontSize) };  // 1 rem
}"""


def _inside(box, w: int, h: int, slack: float = 2.0) -> bool:
    left, top, right, bottom = box
    return left >= -slack and top >= -slack and right <= w + slack and bottom <= h + slack


def test_presenter_mode_fits_every_screen_and_type_grows(server, browser):
    text, chart_text = {}, {}
    for w, h in SIZES:
        with new_page(browser, w, h) as pg:
            for path, chart in PRESENTER_PAGES.items():
                _open(pg, server, path, chart)
                assert_no_exception(pg)
                g = pg.evaluate(GEOMETRY_JS)
                where = f"{path} at {w}×{h}"
                assert g["charts"], where
                for box in g["charts"] + g["axes"]:
                    assert _inside(box, w, h), (where, box)
                if chart is not None:  # its θ control: the chart's own slider, and the page's if shown
                    assert g["sweeps"] and all(_inside(b, w, h) for b in g["sweeps"]), (where, g["sweeps"])
                    assert all(_inside(b, w, h) for b in g["pageSliders"]), (where, g["pageSliders"])
                text.setdefault((w, h), g["text"])
                chart_text[(w, h)] = max(chart_text.get((w, h), 0), g["chartText"])
    small, large = (text[s] for s in SIZES)
    assert large >= 1.4 * small, (small, large)
    small, large = (chart_text[s] for s in SIZES)
    assert large >= 1.3 * small, (small, large)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_image_and_guarantee_fit_one_presenter_screen(server, browser, size):
    """The page's message, its control and its main figure (the x-axis title included) on the first
    screen, nothing wider than it; the type grows with the screen."""
    from dashboard import perturb

    w, h = size
    with new_page(browser, w, h) as pg:
        for path, chart in FITTED_PAGES.items():
            if chart == "img_tree" and not perturb.pipeline_installed():
                continue
            pg.goto(f"{server}/{path}")
            wait_laid_out(pg)  # the run at this screen's size has drawn the page: its widgets are final
            if chart == "ga_hist":  # the histogram is drawn by a run (20 repetitions here)
                pg.get_by_role("button", name="Run repetitions").click()
            find_chart(pg, chart).locator(".main-svg").first.wait_for(timeout=120_000)
            wait_idle(pg)
            assert_no_exception(pg)
            g, where = pg.evaluate(MAIN_JS, chart), f"{path} at {w}×{h}"
            assert g["width"] <= w, where  # no horizontal scrolling
            # the message (the rules that do worse than Selective fold under the models' table: issue 45)
            headline = g["headline"] if chart == "overview_illustration" else []
            for box in [g["chart"], *g["axes"], *g["sweeps"], *headline]:
                assert _inside(box, w, h), (where, box)
            if chart == "img_tree":
                assert g["sweeps"], where  # the tree's own θ slider and ▶ Play
            if chart == "ga_hist":  # the requirement's two sliders, the method and the Run button
                assert len([b for b in g["controls"] if _inside(b, w, h)]) >= 4, (where, g["controls"])
            assert g["text"] >= 0.95 * 19.2 * min(w / 1280, h / 720), (where, g["text"])


@pytest.mark.parametrize("path, chart", [("story?presenter=1&step=3", "story_tree_climb"),
                                         ("story?step=2", "story_tree_sel")])
def test_story_shows_one_theta_during_play(server, browser, path, chart):
    """Mid-▶ Play the step's view shows one θ: its slider's, its drawn tree's and its text's; where Play
    stops (θ = 1) the step's text is the one for that θ, and the story keeps it."""
    with new_page(browser, 1280, 720) as pg:
        _open(pg, server, path, chart)
        first = wait_view(pg, chart)
        assert first["theta"] == first["drawn"] == "0.50" and "θ = 0.50" in first["text"], first
        mark_view(pg, chart)
        shown = play_and_record(pg, chart)  # every θ the sweep showed, with its text
        assert len({theta for theta, _ in shown}) > 3, shown  # it did sweep
        assert all(f"θ = {theta}" in text for theta, text in shown), shown
        got = view_state(pg, chart)
        assert got["theta"] == got["drawn"] == "1.00" and "θ = 1.00" in got["text"], got
        wait_idle(pg, settle=1.0)  # the rest reached the server: the view is drawn again at 1.00
        again = view_state(pg, chart)
        assert again["theta"] == "1.00" and again["sent"] == "1.00", again
        assert view_kept(pg, chart)  # the page's rerun at θ = 1 kept the view (the same frame)


SIZES_SEEN_JS = """() => {
  // Every size the Explorer's tree is shown at, from the first frame on.
  window.__treeSizes = new Set();
  const look = () => {
    const gd = hscChart('explorer_tree'), g = gd && gd.querySelector('.main-svg');
    const frame = g && g.ownerDocument.defaultView.frameElement;  // the component's iframe, hidden or not
    if (g && getComputedStyle(g).visibility !== 'hidden' && g.getClientRects().length
        && (!frame || getComputedStyle(frame).visibility !== 'hidden')) {
      const r = g.getBoundingClientRect();
      window.__treeSizes.add(`${Math.round(r.width)}x${Math.round(r.height)}`);
    }
    requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}"""


def test_presenter_chart_is_drawn_once_at_the_screens_size(server, browser):
    """A presenter link at 1920×1080: the tree never shows at the 1280×720 design's size first."""
    with new_page(browser, 1920, 1080) as pg:
        pg.add_init_script(f"({SIZES_SEEN_JS})()")
        _open(pg, server, "explorer?presenter=1&pick=rescue", "explorer_tree")
        time.sleep(1.0)
        assert len(pg.evaluate("() => Array.from(window.__treeSizes)")) == 1, pg.evaluate(
            "() => Array.from(window.__treeSizes)")


CLIPPED_JS = """(chart) => {
  const g = hscChart(chart);
  const frame = g.getBoundingClientRect();
  return Array.from(g.querySelectorAll('.textpoint text')).filter((t) => t.textContent.trim()).map((t) => {
    const r = t.getBoundingClientRect();
    return [t.textContent, r.left < frame.left - 1 || r.right > frame.right + 1];
  }).filter(([, cut]) => cut).map(([s]) => s);
}"""


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_tree_labels_are_never_cut_at_the_edge(server, browser, size):
    w, h = size
    with new_page(browser, w, h) as pg:
        for path, chart in (("explorer?pick=disagree", "explorer_tree"), ("story?step=3", "story_tree_climb"),
                            ("explorer?presenter=1&pick=disagree", "explorer_tree")):
            _open(pg, server, path, chart)
            assert pg.evaluate(CLIPPED_JS, chart) == [], (path, size)


def test_one_theta_on_screen_during_a_sweep(server, browser):
    """Keys and a drag on the view: its θ, its markers' frame and its operating-point text move together at
    once (no server round trip), and the server takes the θ where the sweep rests."""
    with new_page(browser, 1280, 720) as pg:
        _open(pg, server, "risk_coverage?presenter=1&theta=0.2", "rc_chart")
        got = wait_view(pg, "rc_chart")
        assert got["theta"] == "0.20" and "Operating points (θ = 0.20)" in got["text"], got
        view(pg, "rc_chart").locator("#chart").focus()
        pg.keyboard.press("PageUp")
        got = view_state(pg, "rc_chart")
        assert got["theta"] == "0.30" and "Operating points (θ = 0.30)" in got["text"], got
        pg.wait_for_function("() => window.location.search.includes('theta=0.3')", timeout=30_000)
        # Dragging the view's slider: θ and text follow the thumb before the release; the server after it.
        box = view(pg, "rc_chart").locator("#theta").bounding_box()
        y = box["y"] + box["height"] / 2
        pg.mouse.move(box["x"] + 0.3 * box["width"], y)
        pg.mouse.down()
        pg.mouse.move(box["x"] + 0.7 * box["width"], y, steps=10)
        dragged = view_state(pg, "rc_chart")
        assert float(dragged["theta"]) > 0.5 and f"(θ = {dragged['theta']})" in dragged["text"], dragged
        pg.mouse.up()
        pg.wait_for_function("(t) => new URLSearchParams(window.location.search).get('theta') == t",
                             arg=str(float(dragged["theta"])).rstrip("0").rstrip("."), timeout=30_000)
        assert view_state(pg, "rc_chart")["theta"] == dragged["theta"]


def _rescue_count(model: str, theta: float) -> int:
    """How many "Climbing rescues a wrong leaf" samples the library finds at θ (TS on, as the link)."""
    from dashboard.views import curated_rows
    from hsc_core import ModelEvaluation, imagenet_hierarchy, load_logits

    es = ModelEvaluation.from_bundle(load_logits(ROOT / "cached_logits" / f"{model}.npz"),
                                     imagenet_hierarchy()).setting(True)
    return int(curated_rows(es.hierarchy, es.paths, es.labels, es.leaf_pred, es.leaf_conf, theta)["rescue"].size)


def test_overview_link_and_explorer_link_keep_the_view(server, browser):
    with new_page(browser, 1440, 900) as pg:
        pg.goto(f"{server}/overview")
        wait_idle(pg)
        assert "Page not found" not in pg.locator('[data-testid="stApp"]').inner_text()
        assert pg.locator("h1").first.inner_text() == "Hierarchical Selective Classification"
        _open(pg, server, "explorer?model=efficientnet_lite1&ts=1&pick=rescue&theta=0.5", "explorer_tree")
        # The view's share link (its snapshot at the θ on screen); its "Open interactive" keeps the model and TS.
        href = wait_view(pg, "explorer_tree")["share"]
        assert re.fullmatch(r"http://127\.0\.0\.1:[0-9]+/s/[0-9a-f]{20}\?theta=0\.50", href), href
        with urllib.request.urlopen(href, timeout=120) as r:
            live = re.search(r'class="open" href="([^"]+)"', r.read().decode("utf-8")).group(1)
        assert "model=efficientnet_lite1" in live and "ts=1" in live and "pick=rescue" in live
        # A sweep to θ = 1 that comes to rest redraws the curated list for that θ (no stale "of N").
        before = pg.locator('[data-testid="stMain"]').inner_text()
        assert re.search(r"Example \(of [0-9,]+\)", before)
        view(pg, "explorer_tree").locator("#chart").focus()
        pg.keyboard.press("End")
        n = _rescue_count("efficientnet_lite1", 1.0)
        shown = "Example (none at θ = 1.00)" if n == 0 else f"Example (of {n:,})"
        pg.wait_for_function("(s) => document.querySelector('[data-testid=\"stMain\"]').innerText.includes(s)",
                             arg=shown, timeout=60_000)


def test_camera_exports_a_titled_figure_without_the_sweep_controls(server, browser):
    with new_page(browser, 1440, 900) as pg:
        _open(pg, server, "risk_coverage?theta=0.4", "rc_chart")
        # Record what the camera button hands to Plotly's image export.
        pg.evaluate("""() => { window.__exported = null;
            const P = hscChart('rc_chart').ownerDocument.defaultView.Plotly;  // the Plotly that drew it
            const orig = P.downloadImage;
            P.downloadImage = (fig, opts) => {
              window.__exported = { sliders: (fig.layout.sliders || []).length,
                                    menus: (fig.layout.updatemenus || []).length,
                                    title: fig.layout.title && fig.layout.title.text, filename: opts.filename };
              return orig(fig, opts); }; }""")
        chart = find_chart(pg, "rc_chart")
        chart.hover()
        with pg.expect_download() as dl:
            chart.locator('.modebar-btn[data-title^="Download plot"]').first.click()
        exported = pg.evaluate("() => window.__exported")
        assert exported["sliders"] == 0 and exported["menus"] == 0
        assert "Risk–coverage curves" in exported["title"] and "efficientnet_lite0" in exported["title"]
        assert dl.value.suggested_filename.endswith(".png")
        assert dl.value.path().read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
