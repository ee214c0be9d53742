"""A class opening one link together: ten fresh Chromium contexts at once (issue 45, item 2).

Starts ``streamlit run app.py`` on the shipped logits and, for each of three links, opens it in
``--contexts`` fresh browser contexts at the same moment (each navigation is started before any
is waited for), then times each context from its navigation to the chart drawn at θ = 0.37:

* floor: the same figure alone in a one-chart Streamlit app (``bench/one_chart_app.py``) under the
  same ten contexts;
* live: the Explorer's deep link ``/explorer?theta=0.37&pick=rescue``;
* snapshot: that view's share link (``/s/<key>?theta=0.37``), what a class opens when the teacher
  shares the view.

Prints p50 / p95 of each, the live and snapshot p50 as a multiple of the floor's (the target: live
≤ 1.5 × floor), and the dashboard server's resident memory (with its child processes) before and after.
The first round of each link warms the server (its caches, the snapshot file) and is dropped.

    .venv/bin/python bench/classroom.py [--contexts 10] [--rounds 2] [--port 8641]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser_latency import (  # noqa: E402  (a sibling script, not a package)
    AT_THETA_JS,
    CHROMIUM,
    FIGURE_JS,
    ROOT,
    SNAPSHOT_AT_THETA_JS,
    start_server,
    wait_idle,
)

THETA = "0.37"
CHART = "explorer_tree"
LIVE_PATH = f"explorer?theta={THETA}&pick=rescue"


def tree_rss_mb(pid: int) -> float:
    """Resident memory (MB) of ``pid`` and its direct children (``ps``)."""
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid), "-p", str(pid)], capture_output=True, text=True)
    return sum(int(v) for v in out.stdout.split()) / 1024


def together(browser, url: str, contexts: int, probe: str, arg) -> list[float]:
    """Seconds from each of ``contexts`` fresh contexts' navigation to ``probe(arg)`` holding in it; the
    navigations are all started first, then the pages are polled in turn (every 20 ms) until each holds."""
    opened = []
    for _ in range(contexts):
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        pg = ctx.new_page()
        t0 = time.perf_counter()
        pg.goto(url, wait_until="commit")
        opened.append((ctx, pg, t0))
    done: dict[int, float] = {}
    deadline = time.perf_counter() + 300
    while len(done) < contexts:
        if time.perf_counter() > deadline:
            raise SystemExit(f"{contexts - len(done)} of {contexts} contexts did not draw {url} in 300 s")
        for k, (_, pg, t0) in enumerate(opened):
            if k not in done:
                try:
                    if pg.evaluate(probe, arg):
                        done[k] = time.perf_counter() - t0
                except Exception:  # a page mid-navigation has no context to evaluate in yet
                    pass
        opened[0][1].wait_for_timeout(20)
    for ctx, _, _ in opened:
        ctx.close()
    return [done[k] for k in range(contexts)]


def rounds_of(browser, url: str, contexts: int, rounds: int, probe: str, arg) -> list[float]:
    """Every context's seconds over ``rounds`` rounds after one warm-up round (dropped)."""
    together(browser, url, contexts, probe, arg)
    return [s for _ in range(rounds) for s in together(browser, url, contexts, probe, arg)]


def line(name: str, seconds: list[float], floor: float | None = None) -> float:
    p50, p95 = float(np.median(seconds)), float(np.percentile(seconds, 95))
    ratio = "" if floor is None else f"   p50 {p50 / floor:.2f} × floor"
    print(f"  {name:<10} p50 {p50:6.2f} s   p95 {p95:6.2f} s   (n = {len(seconds)}){ratio}")
    return p50


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, default=10, help="fresh browser contexts opening the link at once")
    ap.add_argument("--rounds", type=int, default=2, help="measured rounds of each link (after one warm-up)")
    ap.add_argument("--port", type=int, default=8641)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"{args.contexts} contexts at once, {args.rounds} rounds; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    proc = start_server(args.port)
    url = f"http://127.0.0.1:{args.port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
            pg = browser.new_page()
            pg.goto(f"{url}/{LIVE_PATH}")
            pg.wait_for_function(AT_THETA_JS, arg=[CHART, THETA], timeout=300_000, polling=50)
            wait_idle(pg)
            snapshot = pg.frame_locator(f".st-key-{CHART} iframe").locator("#share").get_attribute("href")
            rss_before = tree_rss_mb(proc.pid)
            live = rounds_of(browser, f"{url}/{LIVE_PATH}", args.contexts, args.rounds, AT_THETA_JS, [CHART, THETA])
            rss_after = tree_rss_mb(proc.pid)
            shared = rounds_of(browser, snapshot, args.contexts, args.rounds, SNAPSHOT_AT_THETA_JS, THETA)
            with tempfile.TemporaryDirectory() as tmp:
                figure = Path(tmp, "figure.json")
                figure.write_text(pg.evaluate(FIGURE_JS, CHART), encoding="utf-8")
                pg.close()
                floor_proc = start_server(args.port + 1, ROOT / "bench" / "one_chart_app.py",
                                          HSC_BENCH_FIGURE=str(figure), HSC_BENCH_KEY=CHART)
                try:
                    floor = rounds_of(browser, f"http://127.0.0.1:{args.port + 1}/", args.contexts, args.rounds,
                                      AT_THETA_JS, [CHART, THETA])
                finally:
                    os.killpg(floor_proc.pid, signal.SIGTERM)
                    floor_proc.wait(timeout=20)
            browser.close()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
    print(f"\nExplorer link at θ = {THETA}, {args.contexts} fresh contexts at once:")
    base = line("floor", floor)
    line("live", live, base)
    line("snapshot", shared, base)
    print(f"  server RSS {rss_before:.0f} MB before the live rounds, {rss_after:.0f} MB after "
          f"(target: live p50 ≤ 1.5 × floor); load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
