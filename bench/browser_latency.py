"""Shared links and cold start of the θ-swept views in headless Chromium.

Starts ``streamlit run app.py`` on the shipped logits and drives Debian's Chromium (Playwright):

1. Shared links: a fresh browser context (empty cache, new session) opens an Explorer and a
   Risk–Coverage deep link at θ = 0.37; time from navigation to the view drawn at that θ (its
   ``data-theta``), and the server process's CPU time meanwhile; the same view's share link (its
   snapshot, ``/s/<key>?theta=0.37``); then the floor: the same figure alone in a one-chart Streamlit app
   (``bench/one_chart_app.py``).
2. Cold start: from ``streamlit run app.py`` (a new process, the on-disk caches as they are) to the
   first chart drawn on ``/`` in a fresh browser; and the same for the one-chart app.

The view's own keys and ▶ Play need no server: ``tests/test_browser_sweep_hammer.py`` checks them.

    .venv/bin/python bench/browser_latency.py [--links 7] [--port 8639] [--cold 3]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"

# In the page: time from the next keydown to the first DOM mutation after which ``probe()`` holds.
def start_server(port: int, script: Path = ROOT / "app.py", **env_vars: str) -> subprocess.Popen:
    env = dict(os.environ, **env_vars)
    env.pop("HSC_SYNTHETIC", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


def wait_idle(pg, settle: float = 0.8) -> None:
    pg.wait_for_selector('[data-testid="stMainBlockContainer"] h1', state="visible", timeout=120_000)
    quiet = None
    deadline = time.time() + 120
    while time.time() < deadline:
        busy = pg.locator('[data-testid="stStatusWidget"]').filter(has_text=re.compile("Running|Stop")).count()
        if busy:
            quiet = None
        elif quiet is None:
            quiet = time.time()
        elif time.time() - quiet > settle:
            return
        time.sleep(0.05)


def stats(name: str, ms: list[float]) -> None:
    a = np.asarray(ms)
    print(f"{name:<58} n={a.size:3d}  median {np.median(a):7.1f} ms  p95 {np.percentile(a, 95):7.1f} ms  "
          f"max {a.max():7.1f} ms")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its children that have exited (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


# True once the chart's own θ slider shows the frame named ``theta`` (the chart drawn at that θ).
# The chart may sit in a custom component's iframe (same origin: the default for the two large charts).
FIND_CHART_JS = """const host = document.querySelector(`.st-key-${chart}`);
  let g = host && host.querySelector('.js-plotly-plot');
  if (!g && host) { const f = host.querySelector('iframe'), d = f && f.contentDocument;
                    g = d && d.querySelector('.js-plotly-plot'); }"""
AT_THETA_JS = """([chart, theta]) => { """ + FIND_CHART_JS + """
  // the θ-swept view (dashboard/sweep.py): drawn, at θ; a chart in the page (the floor): drawn at its frame
  // (the view's #root is in its own frame; the page's own #root is Streamlit's)
  const root = g && g.ownerDocument !== document && g.ownerDocument.getElementById('root');
  if (root) return root.dataset.drawn === '1' && root.dataset.theta === theta;
  const sl = g && g._fullLayout && g._fullLayout.sliders && g._fullLayout.sliders[0];
  if (sl) return !!sl.steps[sl.active] && sl.steps[sl.active].value === theta;
  return !!g && !!g.querySelector('.main-svg'); }"""


# The chart as the browser holds it (data, layout, frames), to serve it again in one_chart_app.py.
FIGURE_JS = """(chart) => { """ + FIND_CHART_JS + """
  const frames = (g._transitionData && g._transitionData._frames) || [];  // the component keeps its frames itself
  return JSON.stringify({data: g.data, layout: g.layout, frames: frames}); }"""


def open_link(browser, url: str, chart: str, theta: str) -> float:
    """Milliseconds from navigating a fresh context (no cached assets, a new session) to ``url``
    until ``chart`` is drawn at ``theta``."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = ctx.new_page()
    t0 = time.perf_counter()
    pg.goto(url)
    pg.wait_for_function(AT_THETA_JS, arg=[chart, theta], timeout=120_000, polling=20)
    ms = 1000 * (time.perf_counter() - t0)
    ctx.close()
    return ms


# True once the snapshot page's figure is drawn with its frames, its slider on the frame ``theta``.
SNAPSHOT_AT_THETA_JS = """(theta) => { const g = document.getElementById('fig0');
  if (document.body.getAttribute('data-drawn') !== '1' || !g || !g._fullLayout) return false;
  const sl = g._fullLayout.sliders && g._fullLayout.sliders[0];
  return !!sl && sl.steps[sl.active] && sl.steps[sl.active].value === theta; }"""


def open_snapshot(browser, url: str, theta: str) -> float:
    """Milliseconds from navigating a fresh context to a snapshot link until its figure is drawn at ``theta``."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = ctx.new_page()
    t0 = time.perf_counter()
    pg.goto(url)
    pg.wait_for_function(SNAPSHOT_AT_THETA_JS, arg=theta, timeout=120_000, polling=20)
    ms = 1000 * (time.perf_counter() - t0)
    ctx.close()
    return ms


LINKS = (("Explorer", "explorer?theta=0.37&pick=rescue", "explorer_tree"),
         ("Risk–Coverage", "risk_coverage?theta=0.37", "rc_chart"))


def shared_links(browser, url: str, server_pid: int, repeats: int, port: int) -> dict[str, dict[str, float]]:
    """6. A fresh context per visit: the live link, its snapshot link, then the floor: the same
    figure in a one-chart Streamlit app. Returns each page's medians (ms)."""
    theta = "0.37"
    medians: dict[str, dict[str, float]] = {}
    for name, path, chart in LINKS:
        ms, cpu = [], []
        for _ in range(repeats + 1):  # the first visit warms the server's caches and is dropped
            c0 = _cpu_seconds(server_pid)
            ms.append(open_link(browser, f"{url}/{path}", chart, theta))
            cpu.append(_cpu_seconds(server_pid) - c0)
        stats(f"Shared link, fresh session: {name} chart at θ = {theta}", ms[1:])
        print(f"{'':<58} server CPU per visit: median {np.median(cpu[1:]):.2f} s")
        medians[name] = {"live": float(np.median(ms[1:]))}

        pg = browser.new_page()
        pg.goto(f"{url}/{path}")
        pg.wait_for_function(AT_THETA_JS, arg=[chart, theta], timeout=120_000, polling=20)
        wait_idle(pg)
        snapshot = pg.frame_locator(f".st-key-{chart} iframe").locator("#share").get_attribute("href")
        # The first visit builds the snapshot (kept in the snapshot folder) and is dropped.
        ms = [open_snapshot(browser, snapshot, theta) for _ in range(repeats + 1)]
        stats(f"Snapshot link, fresh context: {name} at θ = {theta}", ms[1:])
        medians[name]["snapshot"] = float(np.median(ms[1:]))
        with tempfile.TemporaryDirectory() as tmp:
            figure = Path(tmp, "figure.json")
            figure.write_text(pg.evaluate(FIGURE_JS, chart), encoding="utf-8")
            pg.close()
            floor = start_server(port, ROOT / "bench" / "one_chart_app.py", HSC_BENCH_FIGURE=str(figure),
                                 HSC_BENCH_KEY=chart)
            try:
                ms = [open_link(browser, f"http://127.0.0.1:{port}/", chart, theta) for _ in range(repeats + 1)]
            finally:
                os.killpg(floor.pid, signal.SIGTERM)
                floor.wait(timeout=20)
        stats("  floor: the same figure alone in a one-chart Streamlit app", ms[1:])
        medians[name]["floor"] = float(np.median(ms[1:]))
    return medians


# Charts in the page and in the basic-bundle component's iframes (same origin; dashboard/plotly_component.py).
PAGE_CHARTS_JS = """[...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot'),
  ...[...document.querySelectorAll('[data-testid="stMain"] iframe')].flatMap((f) => {
    try { return f.contentDocument ? [...f.contentDocument.querySelectorAll('.js-plotly-plot')] : []; }
    catch (e) { return []; } })]"""
# The first chart on "/" as the browser holds it, for the one-chart app's cold start.
FIRST_FIGURE_JS = """() => { const g = """ + PAGE_CHARTS_JS + """.find(
  g => !g.closest('.st-key-hsc_plotly_warm'));
  return JSON.stringify({data: g.data, layout: g.layout, frames: (g._transitionData || {})._frames || []}); }"""


# The first chart of the page drawn (Plotly's main SVG in place), the invisible plotly.js warm-up chart aside.
FIRST_CHART_JS = """() => """ + PAGE_CHARTS_JS + """.some(
  g => !g.closest('.st-key-hsc_plotly_warm') && g.querySelector('.main-svg'))"""


def cold_start(browser, port: int, script: Path = ROOT / "app.py", **env_vars: str) -> float:
    """Seconds from starting ``streamlit run <script>`` to its first chart drawn on ``/`` in a fresh
    browser context (opened as soon as the server answers its health check)."""
    t0 = time.perf_counter()
    proc = start_server(port, script, **env_vars)
    try:
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        pg = ctx.new_page()
        pg.goto(f"http://127.0.0.1:{port}/")
        pg.wait_for_function(FIRST_CHART_JS, timeout=300_000, polling=20)
        seconds = time.perf_counter() - t0
        ctx.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    return seconds


def cold_starts(browser, port: int, repeats: int, figure: Path) -> tuple[float, float]:
    """7. Cold start of the dashboard and of the one-chart app (median seconds of ``repeats``)."""
    app = [cold_start(browser, port) for _ in range(repeats)]
    print(f"{'Cold start: streamlit run app.py → first chart on /':<58} n={len(app):3d}  median "
          f"{np.median(app):7.2f} s  runs {', '.join(f'{v:.2f}' for v in app)}")
    one = [cold_start(browser, port, ROOT / "bench" / "one_chart_app.py", HSC_BENCH_FIGURE=str(figure))
           for _ in range(repeats)]
    print(f"{'  one-chart app: streamlit run → its chart':<58} n={len(one):3d}  median "
          f"{np.median(one):7.2f} s  runs {', '.join(f'{v:.2f}' for v in one)}")
    return float(np.median(app)), float(np.median(one))


def summary(links: dict[str, dict[str, float]], cold: tuple[float, float] | None) -> None:
    """The issue's targets side by side: snapshot ≤ 1.0 s and ≤ 0.5 × floor, live ≤ 1.3 × floor, cold start
    ≤ 2 × the one-chart app."""
    print("\nSummary (medians)")
    for name, m in links.items():
        print(f"  {name:<14} snapshot {m['snapshot'] / 1000:5.2f} s ({m['snapshot'] / m['floor']:.2f} × floor)   "
              f"live {m['live'] / 1000:5.2f} s ({m['live'] / m['floor']:.2f} × floor)   "
              f"floor {m['floor'] / 1000:5.2f} s")
    if cold is not None:
        print(f"  cold start     {cold[0]:5.2f} s ({cold[0] / cold[1]:.2f} × the one-chart app's {cold[1]:.2f} s)")
    print(f"  load average   {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the targets are for an idle machine)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8639)
    ap.add_argument("--links", type=int, default=7, help="fresh sessions per deep link")
    ap.add_argument("--cold", type=int, default=3, help="cold starts of each app (0: none)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    proc = start_server(args.port)
    url = f"http://127.0.0.1:{args.port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            links = shared_links(browser, url, proc.pid, args.links, args.port + 1)
            cold = None
            if args.cold:
                with tempfile.TemporaryDirectory() as tmp:
                    figure = Path(tmp, "figure.json")
                    pg = browser.new_page()
                    pg.goto(f"{url}/")
                    pg.wait_for_function(FIRST_CHART_JS, timeout=300_000, polling=20)
                    figure.write_text(pg.evaluate(FIRST_FIGURE_JS), encoding="utf-8")
                    pg.close()
                    # The visit to "/" started the Overview's bootstrap intervals on this server: stop it,
                    # so its work does not run beside the cold starts (they measure a quiet machine).
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=20)
                    cold = cold_starts(browser, args.port + 1, args.cold, figure)
            summary(links, cold)
            browser.close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
