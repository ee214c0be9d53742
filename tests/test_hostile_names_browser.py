"""Untrusted names and uploads in a real browser (the Streamlit server in headless Chromium).

1. A data set whose class names are HTML (a link, a 60 px span): the guided story's top-5 chart
   and the Overview illustration draw them as text, so Plotly creates no ``<a>`` element and no
   60 px text in the chart.
2. "Download report (HTML)" delivers the file for an uploaded model (its evaluation lives in the
   session's cache, which the download's callable cannot read: it is resolved when the button is
   drawn) and still for a shipped one.

Skipped without Chromium or Playwright.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    find_chart,
    new_page,
    require_browser,
    streamlit_server,
    wait_idle,
)

sync_api = require_browser()

from hsc_core.core.hierarchy import Hierarchy  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.logits_io import save_logits  # noqa: E402

LINK = '<a href="https://x.example/">click</a>'
BIG = '<span style="font-size:60px">big</span>'
LEAVES = {"c0": LINK, "c1": BIG, "c2": "<b>bold</b>", "c3": "&lt;b&gt;escaped", "c4": "plain leaf"}
PLOTS = "[data-testid=stPlotlyChart] .js-plotly-plot"


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory) -> Path:
    """<base>/datasets/hostile (a JSON tree whose class and node names are HTML) and
    <base>/cached_logits/hostile_net.npz naming it."""
    base = tmp_path_factory.mktemp("hostile_names")
    parent_of = {"c0": "p1", "c1": "p1", "c2": "p1", "c3": "p2", "c4": "p2", "p1": "r", "p2": "r"}
    names = {**LEAVES, "p1": '<a href="https://y.example/">parent</a>', "p2": "<i>p2</i>", "r": "root"}
    h = Hierarchy.from_parent_map(parent_of, list(LEAVES), names)
    (base / "datasets" / "hostile").mkdir(parents=True)
    h.to_json(base / "datasets" / "hostile" / "hierarchy.json")
    (base / "cached_logits").mkdir()
    logits, labels = synthetic_logits(h, 400, top1=0.45, seed=3)
    save_logits(base / "cached_logits" / "hostile_net.npz", logits, labels, [f"s{i:04d}" for i in range(400)],
                manifest={"model": "hostile_net", "dataset_id": "hostile"}, dtype="float32")
    return base



@pytest.fixture
def page(page):
    page.set_default_timeout(120_000)  # the shared page (conftest), with more time for these pages
    return page


def chart_markup(pg, key: str) -> dict:
    """What Plotly drew in the chart rendered with ``key``: its <a> elements, any text styled at
    60 px, and its text."""
    find_chart(pg, key).locator(".main-svg").first.wait_for()
    return pg.evaluate("""(key) => {
        // the chart's element in the page, or in the chart component's frame (dashboard/plotly_component.py): there
        // the chart and a swept view's text (its control bar holds the view's own share link)
        const gd = hscChart(key);
        const root = gd.ownerDocument === document ? document.querySelector(`.st-key-${key}`)
                                                   : gd.ownerDocument.getElementById('body');
        const styled = Array.from(root.querySelectorAll('tspan, text'))
            .filter(t => (t.getAttribute('style') || '').includes('60px'));
        return {links: root.querySelectorAll('a').length, big: styled.length, text: root.textContent};
    }""", key)


def test_story_and_overview_draw_html_class_names_as_text(browser, hostile_folder):
    with streamlit_server({"HSC_CACHED_LOGITS_DIR": str(hostile_folder / "cached_logits")}) as url, \
            new_page(browser) as pg:
        pg.set_default_timeout(120_000)
        pg.goto(f"{url}/story?step=1")
        wait_idle(pg)
        assert_no_exception(pg)
        bars = chart_markup(pg, "story_bars")
        assert bars["links"] == 0 and bars["big"] == 0, bars
        # Every top-5 leaf is there, as the characters of its name.
        assert LINK in bars["text"] and BIG in bars["text"] and "&lt;b&gt;escaped" in bars["text"], bars["text"]
        assert pg.locator("a[href*='x.example']").count() == 0

        pg.goto(f"{url}/")
        wait_idle(pg)
        assert_no_exception(pg)
        drawing = chart_markup(pg, "overview_illustration")
        assert drawing["links"] == 0 and drawing["big"] == 0, drawing
        assert LINK in drawing["text"], drawing["text"]


# ---------------------------------------------------------------------------- the report download
@pytest.fixture(scope="module")
def upload_file(tmp_path_factory) -> Path:
    """A small ImageNet-1k logits file to upload (no manifest: 1,000 classes mean ImageNet)."""
    from hsc_core.datasets.imagenet import imagenet_hierarchy

    path = tmp_path_factory.mktemp("report_upload") / "tiny_upload.npz"
    logits, labels = synthetic_logits(imagenet_hierarchy(), 300, top1=0.7, seed=2)
    save_logits(path, logits, labels, [f"u{i:04d}.png" for i in range(300)], dtype="float16")
    path.with_suffix(".json").unlink()
    return path


@pytest.fixture(scope="module")
def shipped_server(tmp_path_factory):
    if not any((ROOT / "cached_logits").glob("*.npz")):
        pytest.skip("no cached logits to serve")
    with streamlit_server({}, log_path=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url


def download_report(pg, timeout: float = 240_000) -> str:
    """Click the sidebar's "Download report (HTML)"; the file's text."""
    button = pg.locator("[data-testid=stSidebar] [data-testid=stDownloadButton] button").filter(
        has_text="Download report (HTML)")
    with pg.expect_download(timeout=timeout) as info:
        button.first.click()
    path = info.value.path()
    return Path(path).read_text(encoding="utf-8")


def test_report_downloads_for_an_uploaded_model(page, shipped_server, upload_file):
    page.goto(f"{shipped_server}/calibration_coverage")
    wait_idle(page)
    page.get_by_text("Add a logits file (.npz)").click()
    file_input = page.locator("[data-testid=stSidebar] input[type=file]").first
    file_input.set_input_files(str(upload_file))
    added = page.locator("[data-testid=stSidebar] [data-testid=stAlert]").filter(has_text="Added").first
    try:
        added.wait_for(timeout=45_000)
    except sync_api.TimeoutError:  # on a cold, loaded server the first selection can be lost: select again
        file_input.set_input_files(str(upload_file))
        added.wait_for()
    page.wait_for_function("() => location.search.includes('model=tiny_upload')")
    wait_idle(page)
    assert_no_exception(page)
    text = download_report(page)
    assert text.startswith("<!DOCTYPE html>") and "tiny_upload" in text
    assert "could not be built" not in text
    assert "How these numbers were measured" in text  # the whole report, not an error page


def test_report_still_downloads_for_a_shipped_model(page, shipped_server):
    page.goto(f"{shipped_server}/calibration_coverage?model=efficientnet_lite0")
    wait_idle(page)
    text = download_report(page)
    assert text.startswith("<!DOCTYPE html>") and "efficientnet_lite0" in text and "could not be built" not in text
