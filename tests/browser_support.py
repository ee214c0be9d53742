"""What every real-browser test needs: a Streamlit server on a free loopback port, Debian's
Chromium through Playwright (never ``playwright install``), and "wait until the app is idle".

Test modules call ``require_browser()`` at import time so they skip cleanly without Chromium or
Playwright, then build their fixtures from ``streamlit_server`` and ``chromium``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dashboard.plotly_component import CHARTS

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
# Settings of the developer's shell that would change what the served app shows.
APP_ENV = ("HSC_SYNTHETIC", "HSC_SYNTHETIC_TAXONOMY", "HSC_CACHED_LOGITS_DIR", "HSC_DATASETS_DIR", "HSC_IMAGE_DIR",
           "HSC_RESULTS_DIR")


def require_browser():
    """Playwright's sync API, or skip the calling module (no Playwright, or no Debian chromium)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found", allow_module_level=True)
    return sync_api


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_PIDS: dict[str, int] = {}  # a running streamlit_server's URL → its process id


@contextlib.contextmanager
def streamlit_server(env: Mapping[str, str] | None = None, log_path: Path | None = None) -> Iterator[str]:
    """Run ``streamlit run app.py`` on a free port until the block ends; yields its URL.

    ``env`` is applied on top of the current environment with the app's own settings removed.
    """
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if k not in APP_ENV}
    full_env.update(env or {})
    log = open(log_path, "w") if log_path is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    SERVER_PIDS[url] = proc.pid
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("streamlit server did not start")
            time.sleep(0.3)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        SERVER_PIDS.pop(url, None)
        if log is not subprocess.DEVNULL:
            log.close()


def thread_dump(url: str, log_path: Path, scripts_only: bool = True) -> str:
    """The threads' stacks of the server at ``url``, started with ``HSC_DEBUG=1`` and ``log_path``
    (app.py registers faulthandler for SIGUSR1 then): what a run that never ends is waiting on.
    ``scripts_only``: only the threads running the app's code or Streamlit's script runner."""
    before = log_path.stat().st_size if log_path.exists() else 0
    try:
        os.kill(SERVER_PIDS[url], signal.SIGUSR1)
    except (KeyError, ProcessLookupError, AttributeError) as exc:
        return f"(no thread dump: {exc!r})"
    time.sleep(1.0)
    with open(log_path, errors="replace") as f:
        f.seek(before)
        threads = f.read().split("\n\n")
    if not scripts_only:
        return "\n\n".join(threads)
    # The script runs' threads (the app's own code or Streamlit's script runner), not the server's idle pool.
    runs = [t for t in threads if any(part in t for part in ("script_runner", "/dashboard/", "/app_pages/",
                                                             "/hsc_core/"))]
    return "\n\n".join(runs) or f"(no script thread among {len(threads)} threads)"


@contextlib.contextmanager
def chromium(sync_api) -> Iterator:
    """A headless Debian Chromium browser."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


# Page functions every test page has (``new_page``/``new_context``), so a test finds a chart wherever it is
# drawn: by st.plotly_chart in the page, or by the basic-bundle component inside its iframe (same origin,
# dashboard/plotly_component.py). hscChart(key): widget ``key``'s chart element (or null); hscCharts():
# every chart element, the page's and the frames'; hscBox(el): an element's box in the page's coordinates.
CHART_JS = """
window.hscChart = (key) => {
  const host = document.querySelector(`.st-key-${key}`);
  if (!host) return null;
  const gd = host.querySelector('.js-plotly-plot');
  if (gd) return gd;
  const f = host.querySelector('iframe');
  try { return f && f.contentDocument ? f.contentDocument.querySelector(".js-plotly-plot") : null; }
  catch (e) { return null; }
};
window.hscCharts = (selector = '.js-plotly-plot') => {
  const found = Array.from(document.querySelectorAll(selector));
  for (const f of document.querySelectorAll('iframe')) {
    try { if (f.contentDocument) found.push(...f.contentDocument.querySelectorAll(selector)); }
    catch (e) { /* other origin */ }
  }
  return found;
};
window.hscBox = (el) => {
  const r = el.getBoundingClientRect();
  const f = el.ownerDocument.defaultView.frameElement;
  const o = f && f.ownerDocument === document ? f.getBoundingClientRect() : { left: 0, top: 0 };
  return { left: r.left + o.left, top: r.top + o.top, right: r.right + o.left, bottom: r.bottom + o.top,
           x: r.x + o.left, y: r.y + o.top, width: r.width, height: r.height };
};
"""


#: The charts drawn by the chart component (in its iframe): every θ-swept view and the static charts it
#: draws (``plotly_component.CHARTS``, the one list of them).
COMPONENT_CHARTS = frozenset({"explorer_tree", "rc_chart", "img_tree", "story_tree_sel", "story_tree_climb",
                              "story_rc"}) | CHARTS


def in_frame(key: str, url: str = "") -> bool:
    """Whether chart ``key`` is drawn by the chart component (in an iframe), in every mode."""
    return key in COMPONENT_CHARTS


def find_chart(pg, key: str):
    """A Playwright locator for widget ``key``'s chart (its ``.js-plotly-plot``), in the page or inside
    the component's frame; ``find_chart(pg, key).locator(".main-svg")`` etc. look inside it."""
    if in_frame(key, pg.url):
        return pg.frame_locator(f".st-key-{key} iframe").locator(".js-plotly-plot")
    # the first visible one: a presenter-mode rerun may briefly hold the old, hidden chart beside the new one
    return pg.locator(f".st-key-{key} .js-plotly-plot:visible").first


def view(pg, key: str):
    """The θ-swept view ``key``'s frame (a Playwright FrameLocator): ``#play``, ``#theta`` (its slider),
    ``#readout``, ``#share``, ``#text``, ``#chart``; ``#root``'s ``data-theta`` is the θ on screen,
    ``data-playing`` whether ▶ Play runs, ``data-sent`` the last rest sent to the server."""
    return pg.frame_locator(f".st-key-{key} iframe")


def view_state(pg, key: str) -> dict | None:
    """The view's θ on screen, the θ its drawn tree's headline names (Explorer, Try an image, story), whether it
    plays, the last rest it sent, its share link; None before it is drawn."""
    handle = pg.locator(f".st-key-{key} iframe").first
    try:
        frame = handle.element_handle(timeout=5_000).content_frame()
    except Exception:  # noqa: BLE001 - not there (yet)
        return None
    if frame is None:
        return None
    return frame.evaluate("""() => {
      const root = document.getElementById('root');
      if (!root || root.dataset.drawn !== '1') return null;
      const svg = document.querySelector('#chart .main-svg');
      const m = svg && /θ = ([0-9.]+)/.exec(svg.textContent);
      return { theta: root.dataset.theta, drawn: m ? m[1] : null, playing: root.dataset.playing === '1',
               sent: root.dataset.sent || null, share: document.getElementById('share').href,
               text: document.getElementById('text').textContent };
    }""")


def _view_frame(pg, key: str):
    return pg.locator(f".st-key-{key} iframe").first.element_handle(timeout=5_000).content_frame()


RECORD_JS = """() => {
  // Every θ the view shows, with its text at that moment: the observer runs after each change of data-theta
  // (the view sets θ, slider, readout and text in one step), so no θ is missed however slow a poll would be.
  const root = document.getElementById('root'), text = document.getElementById('text');
  window.__hscShown = [];
  new MutationObserver(() => window.__hscShown.push([root.dataset.theta, text.textContent]))
    .observe(root, {attributes: true, attributeFilter: ['data-theta']});
}"""


def play_and_record(pg, key: str, timeout: float = 60) -> list[tuple[str, str]]:
    """Press the view ``key``'s ▶ Play and wait until it stops; (θ, text) of every θ it showed on the way, in
    order (recorded in the view's frame as each was shown)."""
    frame = _view_frame(pg, key)
    frame.evaluate(RECORD_JS)
    view(pg, key).locator("#play").click()
    frame.wait_for_function("() => document.getElementById('root').dataset.playing === '0' "
                            "&& window.__hscShown.length > 0", timeout=timeout * 1000)
    return [tuple(x) for x in frame.evaluate("() => window.__hscShown")]


def mark_view(pg, key: str) -> None:
    """Leave a mark in the view's frame: ``view_kept`` says whether the browser still shows that same frame
    (a view mounted anew would lose its own θ for a moment)."""
    _view_frame(pg, key).evaluate("() => { window.__hscMark = 1; }")


def view_kept(pg, key: str) -> bool:
    return bool(_view_frame(pg, key).evaluate("() => window.__hscMark === 1"))


def wait_view(pg, key: str, timeout: float = 90) -> dict:
    """Wait until the view ``key`` is drawn; its ``view_state``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = view_state(pg, key)
        if got is not None:
            return got
        time.sleep(0.1)
    raise AssertionError(f"the view {key} was not drawn within {timeout:.0f} s")


def new_context(browser, **kwargs):
    """``browser.new_context(**kwargs)`` with the page functions of ``CHART_JS``."""
    ctx = browser.new_context(**kwargs)
    ctx.add_init_script(CHART_JS)
    return ctx


@contextlib.contextmanager
def new_page(browser, width: int = 1400, height: int = 1000) -> Iterator:
    ctx = new_context(browser, viewport={"width": width, "height": height})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    try:
        yield pg
    finally:
        ctx.close()


def wait_idle(pg, settle: float = 0.4) -> None:
    """Wait until the app has rendered and no script run is in progress."""
    pg.wait_for_selector('[data-testid="stApp"]', state="attached")
    pg.wait_for_selector('[data-testid="stMainBlockContainer"] h1', state="visible")
    deadline = time.time() + 90
    quiet_since = None
    while time.time() < deadline:
        running = pg.locator('[data-testid="stStatusWidget"]').filter(has_text=re.compile("Running|Stop")).count()
        spinning = pg.locator('[data-testid="stSpinner"]').count()
        if running or spinning:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since >= settle:
            return
        time.sleep(0.1)
    raise AssertionError("the app kept running for 90 s")


def app_is_running(pg) -> bool:
    """Whether a script run is in progress (Streamlit's status widget or a spinner is showing)."""
    running = pg.locator('[data-testid="stStatusWidget"]').filter(has_text=re.compile("Running|Stop")).count()
    return bool(running or pg.locator('[data-testid="stSpinner"]').count())


def wait_laid_out(pg) -> None:
    """Presenter mode: wait until the page has been laid out for this window (the run after the browser
    reported its size, ``presenter.presenter_style``'s ``--hsc-laid-out``) and nothing is running, so a
    click lands on the page's final widgets rather than on ones that run is about to replace."""
    size = f"'{pg.viewport_size['width']}x{pg.viewport_size['height']}'"
    pg.wait_for_function(f"""() => getComputedStyle(document.documentElement)
                             .getPropertyValue('--hsc-laid-out').trim().replace(/"/g, "'") === "{size}" """,
                         timeout=90_000)
    wait_idle(pg)


def wait_drawn(pg, path: str) -> None:
    """After opening ``path``: in presenter mode (``presenter=1``) wait for the run laid out at this window's size
    (``wait_laid_out``), otherwise for the app to be idle (``wait_idle``)."""
    (wait_laid_out if "presenter=1" in path else wait_idle)(pg)


def assert_no_exception(pg) -> None:
    exc = pg.locator('[data-testid="stException"]')
    assert exc.count() == 0, exc.first.inner_text()
    assert "Traceback" not in pg.locator('[data-testid="stApp"]').inner_text()
