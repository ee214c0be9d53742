"""Issue 12 parts 1–4 in a real browser: the Streamlit server in headless Chromium (Playwright).

Hostile uploads (sample ids naming server files, a zip bomb), markdown in shared links, and link
values no widget can hold. Skipped when Chromium or Playwright is missing.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from browser_support import ROOT, require_browser, streamlit_server
from PIL import Image
from test_security import model_arrays, npz_bytes, zip_bomb

EVIL = "http://evil.example"

sync_api = require_browser()
if not any((ROOT / "cached_logits").glob("*.npz")):
    pytest.skip("no cached logits to serve", allow_module_level=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """<tmp>/images/ok.png (the image folder), <tmp>/secret.png beside it, and the hostile uploads."""
    root = tmp_path_factory.mktemp("security_browser")
    (root / "images").mkdir()
    Image.new("RGB", (32, 32), (0, 0, 200)).save(root / "images" / "ok.png")
    Image.new("RGB", (32, 32), (200, 0, 0)).save(root / "secret.png")
    secret = str(root / "secret.png")
    hostile = ["../secret.png", "./../secret.png", "images/../../secret.png", ".././secret.png", secret,
               "/" + secret, secret.replace("/", "//"), "/etc/passwd", "/etc/./passwd", "/etc//passwd"]
    (root / "paths.npz").write_bytes(npz_bytes(model_arrays(hostile)))
    (root / "bomb.npz").write_bytes(zip_bomb())
    return root


@pytest.fixture(scope="module")
def server(files):
    with streamlit_server({"HSC_IMAGE_DIR": str(files / "images")}) as url:
        yield url



@pytest.fixture()
def page(page):
    page.set_default_timeout(120_000)  # the shared page (conftest), with more time for these pages
    return page


def settle(pg) -> None:
    """Wait until the app has rendered its title and stopped running."""
    pg.locator("h1").first.wait_for()
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')")
    pg.wait_for_timeout(700)


def open_url(pg, url: str) -> None:
    pg.goto(url)
    settle(pg)


def upload(pg, server: str, path: Path, start: str = "calibration_coverage") -> str:
    """Open ``start``, upload ``path`` in the sidebar; the sidebar's success or error text."""
    open_url(pg, f"{server}/{start}")
    pg.get_by_text("Add a logits file (.npz)").click()
    file_input = pg.locator("[data-testid=stSidebar] input[type=file]").first
    file_input.set_input_files(str(path))
    alert = pg.locator("[data-testid=stSidebar] [data-testid=stAlert]").filter(has_text="dd")
    try:
        alert.first.wait_for(timeout=45_000)
    except sync_api.TimeoutError:  # on a cold, loaded server the first selection can be lost: select again
        file_input.set_input_files(str(path))
        alert.first.wait_for()
    settle(pg)
    return alert.first.inner_text()


def no_traceback(pg) -> None:
    exceptions = pg.locator("[data-testid=stException]")
    assert exceptions.count() == 0, exceptions.first.inner_text()


def test_uploaded_sample_ids_never_show_server_files(page, server, files):
    assert "Added paths" in upload(page, server, files / "paths.npz", start="explorer?pick=random")
    seen = set()
    for _ in range(6):
        no_traceback(page)
        caption = page.get_by_text("(no image with this name").first.inner_text()
        seen.add(caption)
        assert page.locator("[data-testid=stMain] [data-testid=stImage] img").count() == 0
        assert page.locator("img[src*='/media/']").count() == 0
        seed = page.get_by_label("Seed")
        before = int(seed.input_value())
        page.get_by_role("button", name="New random sample").click()
        # The click's own rerun: the seed shows its new value while that run goes on (the status widget
        # is up), and settle() then waits for it to end. Settling at once could read the run before it.
        page.wait_for_function("([el, want]) => el.value === want", arg=[seed.element_handle(), str(before + 1)])
        settle(page)
    assert len(seen) >= 3  # several different hostile ids were shown, none of their files


def test_zip_bomb_upload_is_refused(page, server, files):
    text = upload(page, server, files / "bomb.npz")
    assert "Cannot add bomb.npz: its arrays inflate to 571.1 MB, more than the 200.0 MB allowed here" in text
    no_traceback(page)


@pytest.mark.parametrize("path, value", [
    ("", f"x** [log in]({EVIL}/) ![t]({EVIL}/t.png) **"),
    ("calibration_coverage", f"`x` [a]({EVIL}/) ` <b>bold</b> :red[r]"),
])
def test_markdown_in_links_is_shown_as_text(page, server, path, value):
    key = "model" if not path else "bins"
    open_url(page, f"{server}/{path}?{key}={urllib.parse.quote(value)}")
    no_traceback(page)
    assert page.locator("a[href*='evil']").count() == 0
    assert page.locator("img[src*='evil']").count() == 0
    alerts = " ".join(a.inner_text() for a in page.locator("[data-testid=stAlert]").all()).replace("\u2060", "")
    assert value in alerts  # every character shown as typed
    # The page's own bold around the value is all: the value opens and closes no emphasis itself.
    bold = [b.inner_text().replace("\u2060", "") for b in page.locator("[data-testid=stAlert] strong").all()]
    assert all(value in b or "log in" not in b for b in bold)


@pytest.mark.parametrize("query, shown", [
    ("calibration_coverage?bins=0", "bins = 0 (must be a whole number from 5 to 30)"),
    ("calibration_coverage?bins=100000", "bins = 100000 (must be a whole number from 5 to 30)"),
    ("guaranteed_accuracy?acc=0.1", "acc = 0.1 (must be a number from 0.7 to 0.995)"),
    ("guaranteed_accuracy?conf=0.999", "conf = 0.999 (must be a number from 0.5 to 0.99)"),
    ("guaranteed_accuracy?reps=1000000", "reps = 1000000 (must be a whole number from 10 to 1,000)"),
    ("guaranteed_accuracy?solve=n&eps=0.0001&acc=0.9999&conf=0.99", "acc = 0.9999 (must be a number from 0.7 to"),
])
def test_out_of_range_link_values_are_ignored_with_a_notice(page, server, query, shown):
    open_url(page, f"{server}/{query}")
    no_traceback(page)
    warning = page.locator("[data-testid=stAlert]").filter(has_text="Ignored invalid link parameters")
    assert shown in warning.first.inner_text()
    page.locator("[data-testid=stSlider]").first.wait_for()  # the page itself is there, with its widgets
    no_traceback(page)
