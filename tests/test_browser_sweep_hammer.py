"""The Explorer's θ, hammered: random (seeded) keys on the chart and on the page's θ slider, clicks on
▶ Play, ❚❚, the chart's own slider and the page slider's track, and fresh links, in quick succession.

After each run settles (no animation, no script run, nothing hidden as "ahead"), every θ on screen
agrees and stays put: the chart's slider, the tree's headline (its frame), the page's θ slider, the
link's ``theta`` and the server's θ (the text below the chart names the picks at it). Fifty runs
share one server and one page (about two minutes).
"""

from __future__ import annotations

import random
import re
import time
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import (
    ROOT,
    assert_no_exception,
    find_chart,
    new_page,
    require_browser,
    streamlit_server,
    thread_dump,
    wait_idle,
)

sync_api = require_browser()
if not any((ROOT / "cached_logits").glob("*.npz")):
    pytest.skip("no cached logits to serve", allow_module_level=True)

RUNS = 50
CHART = "explorer_tree"
# A random sample (seed 0): θ reruns only the tree's fragment (a curated pick reruns the whole page for its
# list), so fifty runs fit in about two minutes.
PAGE = "pick=random&seed=0"
# Every θ the page shows, and whether it is busy: an animation running, a θ hidden as "ahead".
THETAS_JS = """(chart) => {
  const gd = hscChart(chart);
  if (!gd || !gd._fullLayout || !gd._fullLayout.sliders) return null;
  const sl = gd._fullLayout.sliders[0];
  const head = gd.data.find((t) => t.name === 'headline');
  const m = head && /θ = ([0-9.]+)/.exec(String(head.text && head.text[0]));
  const label = Array.from(gd.querySelectorAll('.slider-container .slider-label'))
    .find((t) => t.textContent.startsWith('θ = '));
  const thumb = document.querySelector(`.st-key-${chart}_slider [data-testid="stSliderThumbValue"]`);
  const stale = document.querySelectorAll('.hsc-stale').length;
  return { chart: sl.steps[sl.active].value, label: label ? label.textContent.replace('θ = ', '').trim() : null,
           tree: m ? m[1] : null, page: thumb ? parseFloat(thumb.textContent).toFixed(2) : null,
           busy: !!(gd._transitionData && gd._transitionData._animationRaf) || stale > 0 };
}"""


THETA_KEYS = ("chart", "label", "tree", "page", "link")  # every θ on screen, and the link's

# The sweep listener's state (theta_sweep.js) and the run counter: what a failure report shows.
LISTENER_JS = """(chart) => {
  const gd = hscChart(chart), s = gd && gd.__hscSweep;
  const age = (t) => (t ? Math.round(Date.now() - t) : null);
  return { generations: window.__hscSweepGen, attached: !!s, ahead: s && s.ahead, want: s && s.want,
           server: s && s.server, resting: s && s.timer === null, sent_ms_ago: s && age(s.sentAt),
           playing: !!(gd && gd._transitionData && gd._transitionData._animationRaf) };
}"""


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    return tmp_path_factory.mktemp("hammer") / "server.log"


@pytest.fixture(scope="module")
def server(server_log):
    # HSC_DEBUG: the server dumps its threads' stacks on SIGUSR1 (thread_dump), for a run that never ends.
    with streamlit_server(env={"HSC_DEBUG": "1"}, log_path=server_log) as url:
        yield url


def _thetas(pg) -> dict:
    shown = pg.evaluate(THETAS_JS, CHART)
    if shown is not None:
        shown["link"] = parse_qs(urlparse(pg.url).query).get("theta", ["0.5"])[0]
        shown["link"] = f"{float(shown['link']):.2f}"
    return shown


def _running(pg) -> bool:
    return pg.locator('[data-testid="stStatusWidget"]').filter(has_text=re.compile("Running|Stop")).count() > 0


def _settled_thetas(pg, timeout: float = 30.0) -> dict:
    """The θs once the page has been quiet (no run, no animation, nothing ahead) for 1 s and they
    agree; or, after ``timeout``, what it shows then."""
    deadline, quiet_since, last = time.time() + timeout, None, None
    while time.time() < deadline:
        shown = _thetas(pg)
        quiet = shown is not None and not shown["busy"] and not _running(pg)
        key = None if shown is None else tuple(shown[k] for k in THETA_KEYS)
        if quiet and key == last and len(set(key)) == 1:
            if quiet_since is None:
                quiet_since = time.time()
            elif time.time() - quiet_since >= 0.6:
                return shown
        else:
            quiet_since = None
        last = key
        time.sleep(0.1)
    return _thetas(pg)


def _open_settled(pg, server: str, theta: str) -> dict:
    """Open the Explorer's random sample at ``theta`` and return its θs once settled."""
    pg.goto(f"{server}/explorer?{PAGE}&theta={theta}")
    wait_idle(pg, settle=1.0)
    find_chart(pg, CHART).locator(".main-svg").first.wait_for()
    return _settled_thetas(pg)


def _act(pg, rng: random.Random, url: str) -> str:
    """One random user action; returns what it did."""
    kind = rng.choice(["chart_keys"] * 3 + ["page_keys"] * 3 + ["play"] * 2 + ["pause", "chart_click", "page_click"] * 2
                      + ["fresh_link"])
    chart = find_chart(pg, CHART)
    if kind == "chart_keys":
        presses = [rng.choice(["ArrowRight", "ArrowLeft", "PageUp", "PageDown", "Home", "End"])
                   for _ in range(rng.randint(1, 10))]
        chart.focus()
        for key in presses:
            pg.keyboard.press(key)
        return f"chart keys {presses}"
    if kind == "page_keys":
        thumb = pg.locator(f".st-key-{CHART}_slider input")
        if not thumb.is_visible():
            return "page keys (slider hidden)"
        presses = [rng.choice(["ArrowRight", "ArrowLeft"]) for _ in range(rng.randint(1, 10))]
        thumb.focus()
        for key in presses:
            pg.keyboard.press(key)
        return f"page keys {presses}"
    if kind in ("play", "pause"):
        buttons = find_chart(pg, CHART).locator(".updatemenu-button")
        buttons.nth(0 if kind == "play" else 1).click()
        return kind
    if kind == "chart_click":
        rail = find_chart(pg, CHART).locator(".slider-rail-touch-rect").bounding_box()
        x = rng.random()
        pg.mouse.click(rail["x"] + x * rail["width"], rail["y"] + rail["height"] / 2)
        return f"chart slider click at {x:.2f}"
    if kind == "page_click":
        track = pg.locator(f'.st-key-{CHART}_slider [data-testid="stSlider"] [role="group"]')
        if not track.is_visible():
            return "page click (slider hidden)"
        box, x = track.bounding_box(), rng.random()
        pg.mouse.click(box["x"] + x * box["width"], box["y"] + box["height"] / 2)
        return f"page slider click at {x:.2f}"
    theta = rng.randint(0, 100) / 100
    pg.goto(f"{url}/explorer?{PAGE}&theta={theta:.2f}")
    find_chart(pg, CHART).locator(".main-svg").first.wait_for()
    return f"fresh link θ={theta:.2f}"


def test_every_theta_agrees_after_random_keys_clicks_and_play(server, server_log, browser):
    rng = random.Random(35)
    with new_page(browser, 1280, 720) as pg:
        # The tab's uncaught errors and console errors, for the failure report (a send that throws in
        # Streamlit's batched widget flush would leave every later change unsent).
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
        pg.on("console", lambda msg: errors.append(f"console.{msg.type}: {msg.text}")
              if msg.type in ("error", "warning") else None)
        first = _open_settled(pg, server, "0.37")
        assert first["chart"] == first["tree"] == first["page"] == first["link"] == "0.37", first
        failures = []
        for run in range(RUNS):
            done = []
            for _ in range(rng.randint(1, 3)):
                done.append(_act(pg, rng, server))
                time.sleep(rng.choice([0.0, 0.05, 0.2, 0.5, 1.0]))
            shown = _settled_thetas(pg)
            values = {k: shown[k] for k in THETA_KEYS}
            if len(set(values.values())) != 1 or shown["busy"]:
                failures.append(f"run {run}: {'; '.join(done)} → {shown}, script running: {_running(pg)}, "
                                f"listener: {pg.evaluate(LISTENER_JS, CHART)}")
                if len(failures) == 1:  # what the server was doing then
                    dump = thread_dump(server, server_log)
        assert_no_exception(pg)
        assert not failures, ("\n".join(failures) + "\n\nThe tab's errors and warnings (last 15):\n"
                              + "\n".join(errors[-15:]) + "\n\nThe server's threads at the first failure:\n" + dump)


def test_a_debug_server_writes_its_threads_stacks_on_sigusr1(server, server_log):
    """What the hammer's failure report reads: with HSC_DEBUG, SIGUSR1 writes the stacks and the
    server keeps serving (without the handler the signal would end the process)."""
    import urllib.request

    dump = thread_dump(server, server_log, scripts_only=False)
    # the main thread: Streamlit's server in its asyncio loop
    assert "most recent call first" in dump and "streamlit/web/bootstrap.py" in dump and "asyncio" in dump, dump[-3000:]
    with urllib.request.urlopen(f"{server}/_stcore/health", timeout=10) as reply:
        assert reply.status == 200


def test_a_sweep_whose_rerun_requests_are_lost_reloads_the_page_at_its_theta(server, browser):
    """Under load Streamlit's frontend can stop sending a tab's widget changes (the hammer's run 32:
    page, chart and link then disagree until a reload). Here the page's messages to the server are
    dropped after the chart moves: after STALL_MS with the server idle, the listener reloads the page
    at the chart's θ, and page, chart, link and server agree on it."""
    state = {"drop": False, "connections": 0}

    def route(ws):
        state["connections"] += 1
        first = state["connections"] == 1
        upstream = ws.connect_to_server()

        def to_server(message):
            if not (first and state["drop"]):
                upstream.send(message)
        ws.on_message(to_server)

    with new_page(browser, 1280, 720) as pg:
        pg.route_web_socket(re.compile(r"/_stcore/stream"), route)
        first = _open_settled(pg, server, "0.37")
        assert first["chart"] == first["page"] == first["link"] == "0.37" and not first["busy"], first
        state["drop"] = True  # from now on this tab's rerun requests never reach the server
        find_chart(pg, CHART).focus()
        pg.keyboard.press("End")  # the chart moves to θ = 1, ahead of the server
        pg.wait_for_function("() => new URLSearchParams(window.location.search).get('theta') === '1'",
                             timeout=45_000)
        assert state["connections"] >= 2  # a reload: a new connection, whose messages pass
        find_chart(pg, CHART).locator(".main-svg").first.wait_for()
        shown = _settled_thetas(pg)
        values = {k: shown[k] for k in THETA_KEYS}
        assert set(values.values()) == {"1.00"} and not shown["busy"], shown
        assert_no_exception(pg)
