"""The θ-swept view in a real browser (Chromium, Playwright), as a teacher uses it.

* ▶ Play in both modes at 1280×720 and 1920×1080: θ sampled every 20 ms until 8 s after it reaches 1 —
  on screen (the view's θ) and in the drawn tree (its headline's θ) it never leaves 1, and the server
  ends at 1 (``HSC_PLAY_RUNS`` plays per mode and size; 1 by default).
* The share link, read while a sweep is still going: in a fresh context it opens the sharer's sample at the
  sharer's θ, and its "Open interactive" the live page at both.
* The hammer: random (seeded) keys, drags of the view's slider, ▶ Play, ❚❚ and fresh links, in quick
  succession; after each run comes to rest the view's θ, its drawn tree, the link and the server agree.
* Nothing above the chart moves while θ sweeps (the curated example's picker keeps its height, the page's
  sentence stays while a rerun writes it again), checked at every frame the browser draws.

The counts are environment variables so the acceptance runs (``HSC_PLAY_RUNS=20 HSC_HAMMER_RUNS=50
HSC_SHARE_LINKS=20``, about 25 minutes) can be made on demand while CI, on 2 cores, runs each path a few
times (1 play per mode and size, 5 hammer runs per mode, 3 links): each hammer run costs about 5 s, each
play about 15 s, each link about 3.5 s.

Every wait is on an event or a state (the view's ``data-*``, the address, an element), never a fixed sleep
standing in for one.
"""

from __future__ import annotations

import os
import random
import signal
import time
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import (
    ROOT,
    SERVER_PIDS,
    assert_no_exception,
    mark_view,
    new_page,
    require_browser,
    streamlit_server,
    view,
    view_kept,
    view_state,
    wait_idle,
    wait_view,
)

sync_api = require_browser()
if not any((ROOT / "cached_logits").glob("*.npz")):
    pytest.skip("no cached logits to serve", allow_module_level=True)

CHART = "explorer_tree"
PLAYS = int(os.environ.get("HSC_PLAY_RUNS", "1"))
RUNS = int(os.environ.get("HSC_HAMMER_RUNS", "5"))
LINKS = int(os.environ.get("HSC_SHARE_LINKS", "3"))
SIZES = [(1280, 720), (1920, 1080)]


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    return tmp_path_factory.mktemp("hammer") / "streamlit.log"


@pytest.fixture(scope="module")
def server(server_log):
    with streamlit_server({"HSC_DEBUG": "1"}, log_path=server_log) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        yield b
        b.close()


def link_theta(pg) -> str | None:
    """The address's θ (the server writes it when it has taken a θ), as two decimals."""
    raw = parse_qs(urlparse(pg.url).query).get("theta", [None])[-1]
    return None if raw is None else f"{float(raw):.2f}"


def wait_for(pg, predicate, timeout: float = 60, what: str = "") -> None:
    """Wait until ``predicate()`` holds, letting Playwright take the page's events meanwhile (its sync API
    updates ``page.url`` only while it runs: a plain sleep would leave the address as it was)."""
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        pg.wait_for_timeout(50)


def settled(pg, key: str = CHART, timeout: float = 60) -> dict:
    """Wait until the view is at rest (not playing; its θ sent or the server's) and the server has taken
    that θ (the address names it); the view's state."""
    got: dict = {}

    def done() -> bool:
        nonlocal got
        got = view_state(pg, key) or {}
        return bool(got) and not got["playing"] and link_theta(pg) == got["theta"]
    wait_for(pg, done, timeout, f"the view to rest and the server to take its θ ({got}, link {link_theta(pg)})")
    return got


def open_view(pg, url: str) -> dict:
    pg.goto(url)
    wait_idle(pg)
    return wait_view(pg, CHART)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("presenter", [0, 1], ids=["normal", "presenter"])
def test_play_never_leaves_one(server, browser, presenter, size):
    with new_page(browser, *size) as pg:
        first = open_view(pg, f"{server}/explorer?pick=rescue&theta=0.3&presenter={presenter}")
        assert first["theta"] == "0.30" and first["drawn"] == "0.30", first
        frame = view(pg, CHART)
        mark_view(pg, CHART)
        for run in range(PLAYS):
            frame.locator("#play").click()
            samples, reached = [], None
            while reached is None or time.time() - reached < 8:
                got = view_state(pg, CHART)
                samples.append((got["theta"], got["drawn"]))
                if reached is None and got["theta"] == "1.00":
                    reached = time.time()
                    samples = [(got["theta"], got["drawn"])]
                time.sleep(0.02)
            # the drawn frame may lag the θ by one frame when it is sampled right at the end
            left = [s for s in samples[2:] if s != ("1.00", "1.00")]
            assert not left, (run, left[:10])
            assert link_theta(pg) == "1.00", (run, pg.url)  # the server took where Play ended
        assert view_kept(pg, CHART)  # the server's answers never mounted the view anew
        assert_no_exception(pg)


def test_share_link_opens_the_sharers_view(server, browser):
    """``HSC_SHARE_LINKS`` links (3 by default, 20 in the acceptance run), each copied while θ is still
    moving (keys, before the rest reaches the server), after a
    new random sample or none: in a fresh context the snapshot shows the sharer's θ and sample; a few
    are followed to the live page through "Open interactive"."""
    rng = random.Random(40)
    with new_page(browser, 1280, 720) as pg:
        open_view(pg, f"{server}/explorer?pick=random&seed=3&theta=0.5")
        for n in range(LINKS):
            if rng.random() < 0.4:
                before = parse_qs(urlparse(pg.url).query)["sample"][-1]
                wait_idle(pg)  # no run going: the button on screen is the one that stays
                pg.get_by_role("button", name="New random sample").click()
                # the run that draws the new sample ends by writing it into the address
                wait_for(pg, lambda old=before: parse_qs(urlparse(pg.url).query)["sample"][-1] != old, 60,
                         "a new sample")
                settled(pg)
            sample = parse_qs(urlparse(pg.url).query)["sample"][-1]
            # the sample on screen: the image's caption beside the view
            assert pg.locator('[data-testid="stImageCaption"]').first.inner_text().strip() == sample
            frame = view(pg, CHART)
            frame.locator("#chart").focus()
            for _ in range(rng.randint(1, 6)):
                pg.keyboard.press(rng.choice(["ArrowRight", "ArrowLeft", "PageUp", "PageDown"]))
            shown = view_state(pg, CHART)  # the moment it is copied: the sweep has not come to rest yet
            href = shown["share"]
            assert "/s/" in href and href.endswith(f"theta={shown['theta']}"), shown
            with new_page(browser, 1280, 720) as fresh:
                fresh.goto(href)
                fresh.wait_for_selector("body[data-drawn='1']")
                assert fresh.locator("body").get_attribute("data-theta") == shown["theta"], (n, href)
                assert sample in fresh.locator(".info").inner_text(), (n, sample)
                assert f"θ = {shown['theta']}" in fresh.locator("#theta-text").inner_text()
                if n % 5 == 0:  # the live page through "Open interactive"
                    fresh.locator("a.open").click()
                    wait_idle(fresh)
                    live = wait_view(fresh, CHART)
                    assert live["theta"] == shown["theta"] and live["drawn"] == shown["theta"], (n, live)
                    assert parse_qs(urlparse(fresh.url).query)["sample"][-1] == sample
            settled(pg)
        assert_no_exception(pg)


@pytest.mark.parametrize("page", ["risk_coverage", "try_an_image"])
def test_the_other_views_share_their_theta(server, browser, page):
    key = {"risk_coverage": "rc_chart", "try_an_image": "img_tree"}[page]
    with new_page(browser, 1280, 720) as pg:
        pg.goto(f"{server}/{page}?theta=0.42")
        wait_idle(pg)
        wait_view(pg, key)
        view(pg, key).locator("#chart").focus()
        for k in ("PageUp", "ArrowRight", "ArrowRight"):
            pg.keyboard.press(k)
        shown = view_state(pg, key)
        assert shown["theta"] == "0.54", shown
        with new_page(browser, 1280, 720) as fresh:
            fresh.goto(shown["share"])
            fresh.wait_for_selector("body[data-drawn='1']")
            assert fresh.locator("body").get_attribute("data-theta") == "0.54"
            assert "θ = 0.54" in fresh.locator("#theta-text").inner_text()


@pytest.mark.parametrize("presenter", [0, 1], ids=["normal", "presenter"])
def test_hammer_every_theta_agrees_after_each_run(server, browser, presenter):
    rng = random.Random(1000 + presenter)
    failures: list[str] = []
    with new_page(browser, 1280, 720) as pg:
        open_view(pg, f"{server}/explorer?pick=random&seed=0&theta=0.37&presenter={presenter}")
        for run in range(RUNS):
            frame = view(pg, CHART)
            for _ in range(rng.randint(1, 8)):
                action = rng.choice(["key", "key", "drag", "play", "pause", "fresh"])
                if action == "key":
                    frame.locator("#chart").focus()
                    pg.keyboard.press(rng.choice(["ArrowRight", "ArrowLeft", "PageUp", "PageDown", "Home", "End"]))
                elif action == "drag":
                    box = frame.locator("#theta").bounding_box()
                    y = box["y"] + box["height"] / 2
                    pg.mouse.move(box["x"] + box["width"] * rng.random(), y)
                    pg.mouse.down()
                    pg.mouse.move(box["x"] + box["width"] * rng.random(), y, steps=5)
                    pg.mouse.up()
                elif action in ("play", "pause"):
                    frame.locator("#play").click()  # Play, or ❚❚ while it plays
                else:
                    pg.goto(pg.url)  # a fresh link to the view as it is
                    wait_view(pg, CHART)
                    frame = view(pg, CHART)
                time.sleep(rng.choice([0, 0.05, 0.2, 0.6]))
            try:
                got = settled(pg, timeout=60)
                still = view_state(pg, CHART)
                if not (got["theta"] == got["drawn"] == link_theta(pg) == still["theta"]):
                    failures.append(f"run {run}: {got} link {link_theta(pg)} then {still}")
            except AssertionError as exc:
                failures.append(f"run {run}: {exc}")
                break
        assert_no_exception(pg)
    assert not failures, "\n".join(failures)


# Every element of the main column that starts above the chart: its test id, classes, top and height.
ABOVE_JS = """(key) => {
  const chart = document.querySelector(`.st-key-${key} iframe`).getBoundingClientRect().top;
  return Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid]'))
    .filter((e) => e.getClientRects().length && e.getBoundingClientRect().top < chart)
    .map((e) => { const r = e.getBoundingClientRect(), name = `${e.dataset.testid}.${e.className.split(' ')[0]}`;
                  return `${name}@${Math.round(r.top)}+${Math.round(r.height)}`; })
    .slice(-40);
}"""


# The view's top at every frame the browser draws (requestAnimationFrame), and what is above the chart the first
# time it moves: a gap of one frame counts (polling from the test every 20 ms missed most of them).
TOPS_JS = """(key) => {
  const above = __ABOVE__;
  const frame = () => document.querySelector(`.st-key-${key} iframe`);
  window.__tops = [frame().getBoundingClientRect().top];
  window.__moved = null;
  const sample = () => {
    const e = frame();
    if (e) {
      const t = e.getBoundingClientRect().top;
      window.__tops.push(t);
      if (window.__moved === null && Math.abs(t - window.__tops[0]) >= 1) window.__moved = above(key);
    }
    if (!window.__stopTops) requestAnimationFrame(sample);
  };
  requestAnimationFrame(sample);
}""".replace("__ABOVE__", ABOVE_JS)


def test_nothing_above_the_chart_moves_while_theta_sweeps(server, browser):
    """A curated pick reruns the page at each rest (its list depends on θ); at θ = 1 there is no example,
    and the picker keeps its height; the page's sentence above stays while a rerun writes it again: the
    view's top stays where it was at every frame the browser draws, until 8 s after the sweep's rest."""
    with new_page(browser, 1280, 720) as pg:
        open_view(pg, f"{server}/explorer?pick=rescue&theta=0.6")
        pg.evaluate(TOPS_JS, CHART)
        view(pg, CHART).locator("#play").click()
        settled(pg)
        pg.wait_for_timeout(8000)  # the reruns that follow the rest (the curated list at θ = 1) come and go
        pg.evaluate("window.__stopTops = true")
        tops, moved = pg.evaluate("window.__tops"), pg.evaluate("window.__moved")
        assert len(tops) > 100, len(tops)  # the browser drew frames all along
        assert max(abs(t - tops[0]) for t in tops) < 1, (sorted(set(tops)), moved)
        assert "none at θ = 1.00" in pg.locator('[data-testid="stMain"]').inner_text()


def test_a_debug_server_writes_its_threads_stacks_on_sigusr1(server, server_log):
    """HSC_DEBUG: SIGUSR1 writes every thread's stack to the server's log, and the server keeps serving
    (without the handler the signal would end the process). The dump is read once it is whole: it ends
    with the main thread, the asyncio loop of Streamlit's server."""
    import urllib.request

    before = server_log.stat().st_size
    os.kill(SERVER_PIDS[server], signal.SIGUSR1)

    def whole() -> bool:
        with open(server_log, errors="replace") as f:
            f.seek(before)
            text = f.read()
        return all(part in text for part in ("most recent call first", "streamlit/web/bootstrap.py", "asyncio"))
    deadline = time.time() + 30
    while not whole():
        assert time.time() < deadline, "no whole thread dump within 30 s"
        time.sleep(0.1)
    with open(server_log, errors="replace") as f:
        f.seek(before)
        dump = f.read()
    assert "asyncio" in dump, dump[-3000:]
    with urllib.request.urlopen(f"{server}/_stcore/health", timeout=10) as reply:
        assert reply.status == 200
