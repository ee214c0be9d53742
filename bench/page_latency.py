"""Every page's first content, cold and warm, against the one-chart floor (issue 45, item 1).

For each page of the sidebar (``dashboard/navigation.py``), in headless Debian Chromium at 1280×720, normal mode:

* **cold**: a fresh ``streamlit run app.py`` on the shipped logits (nothing computed in its memory yet; the
  on-disk caches as they are), opened by a fresh browser context; the median of ``--cold`` such servers (one
  visit is noisy on a shared 2-core machine);
* **warm**: ``--warm`` more fresh contexts on the last of them (what its first visit computed is shared).

Each visit is timed from navigation to

* **chart**: the page's first chart drawn (Plotly's SVG in place, in the page or in the chart component's
  frame); "—" for a page that draws none before a button is pressed (``NO_CHART_AT_REST``);
* **settled**: no script running and nothing spinning for 0.5 s (the 0.5 s not counted);
* **first content**: the later of the two (the sentence is drawn by the run that settles).

The floor is measured in the same run, as ``bench/browser_latency.py`` measures it: the Explorer's chart at
θ = 0.37 alone in ``bench/one_chart_app.py``, opened the same way (median of ``--warm`` fresh contexts after
one dropped). The issue's target: every page's first content within 2 × that floor, cold and warm.

    .venv/bin/python bench/page_latency.py [--cold 3] [--warm 3] [--port 8641] [--pages explorer,risk_coverage]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from browser_latency import (  # noqa: E402  (a sibling bench script)
    AT_THETA_JS,
    CHROMIUM,
    FIGURE_JS,
    FIRST_CHART_JS,
    ROOT,
    open_link,
    start_server,
)

from dashboard.navigation import SECTIONS  # noqa: E402

W, H = 1280, 720
SETTLE = 0.5
# One look at the page: is its title there, is a chart drawn, is anything running?
LOOK_JS = """() => ({
  title: !!document.querySelector('[data-testid="stMainBlockContainer"] h1'),
  chart: (""" + FIRST_CHART_JS + """)(),
  busy: !!document.querySelector('[data-testid="stSpinner"]')
        || /Running|Stop/.test((document.querySelector('[data-testid="stStatusWidget"]') || {}).innerText || '')})"""


#: Pages that draw no chart before a button is pressed (their first content is their sentence and controls).
NO_CHART_AT_REST = frozenset({"guaranteed_accuracy", "calibrators"})


def visit(browser, url: str, chart: bool, limit: float = 180.0) -> tuple[float | None, float]:
    """(seconds to the first chart, None without ``chart``; seconds to settled) of one fresh context
    opening ``url``."""
    ctx = browser.new_context(viewport={"width": W, "height": H})
    pg = ctx.new_page()
    t0 = time.perf_counter()
    pg.goto(url)
    chart_at, quiet_since = None, None
    try:
        while time.perf_counter() - t0 < limit:
            look = pg.evaluate(LOOK_JS)
            now = time.perf_counter() - t0
            if look["chart"] and chart_at is None:
                chart_at = now
            if look["title"] and not look["busy"]:
                quiet_since = now if quiet_since is None else quiet_since
                if now - quiet_since >= SETTLE and (chart_at is not None or not chart):
                    return chart_at, quiet_since
            else:
                quiet_since = None
            pg.wait_for_timeout(40)
        raise SystemExit(f"{url}: not settled within {limit:.0f} s")
    finally:
        ctx.close()


def floor_seconds(browser, port: int, figure: Path, repeats: int) -> float:
    """Median seconds for a fresh context to draw the Explorer's figure alone in the one-chart app."""
    proc = start_server(port, ROOT / "bench" / "one_chart_app.py", HSC_BENCH_FIGURE=str(figure),
                        HSC_BENCH_KEY="explorer_tree")
    try:
        ms = [open_link(browser, f"http://127.0.0.1:{port}/", "explorer_tree", "0.37") for _ in range(repeats + 1)]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    return float(np.median(ms[1:])) / 1000


def _median(visits: list[tuple[float | None, float]]) -> tuple[float | None, float]:
    """(median seconds to the chart, None without one; median seconds to settled) of some visits."""
    charts = [c for c, _ in visits if c is not None]
    return float(np.median(charts)) if charts else None, float(np.median([s for _, s in visits]))


def fmt(v: float | None, floor: float) -> str:
    return "     —        " if v is None else f"{v:6.2f} s {v / floor:4.2f}×"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8641)
    ap.add_argument("--cold", type=int, default=3, help="fresh servers per page, each opened once (median)")
    ap.add_argument("--warm", type=int, default=3, help="fresh contexts per page after the last cold one")
    ap.add_argument("--pages", default="", help="comma-separated url paths (default: every page)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    pages = [(p.url_path, p.title) for section in SECTIONS.values() for p in section]
    if args.pages:
        wanted = args.pages.split(",")
        pages = [p for p in pages if p[0] in wanted]
    print(f"load average before: {', '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"{W}×{H}, normal mode; cold = median of {args.cold} fresh servers' first visits, warm = median of "
          f"{args.warm} more")
    rows = []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        figure = Path(tmp, "figure.json")
        for path, title in pages:
            url = f"http://127.0.0.1:{args.port}/{'' if path == 'home' else path}"
            chart = path not in NO_CHART_AT_REST
            colds = []
            for _ in range(args.cold - 1):  # more fresh servers' first visits (the last one's server stays for warm)
                proc = start_server(args.port)
                try:
                    colds.append(visit(browser, url, chart))
                finally:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=20)
            proc = start_server(args.port)
            try:
                colds.append(visit(browser, url, chart))
                warm = [visit(browser, url, chart) for _ in range(args.warm)]
                if not figure.exists():  # the floor's figure: the Explorer's chart at θ = 0.37, as the browser holds it
                    pg = browser.new_page(viewport={"width": W, "height": H})
                    pg.goto(f"http://127.0.0.1:{args.port}/explorer?theta=0.37&pick=rescue")
                    pg.wait_for_function(AT_THETA_JS, arg=["explorer_tree", "0.37"], timeout=120_000, polling=20)
                    figure.write_text(pg.evaluate(FIGURE_JS, "explorer_tree"), encoding="utf-8")
                    pg.close()
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            rows.append((title, _median(colds), _median(warm)))
            print(f"  measured {title}", flush=True)
        floor = floor_seconds(browser, args.port + 1, figure, args.warm)
        browser.close()
    print(f"\nfloor (the Explorer's chart alone in a one-chart app): {floor:.2f} s; target ≤ 2 × floor = "
          f"{2 * floor:.2f} s\n")
    print("first content: the later of the first chart and settled (a page without a chart at rest: settled)\n")
    print(f"{'page':<24}{'cold: first content':>22}{'chart':>16}{'settled':>16}"
          f"{'warm: first content':>22}{'chart':>16}{'settled':>16}")
    for title, (c_chart, c_settled), (w_chart, w_settled) in rows:
        c_first, w_first = max(c_chart or 0.0, c_settled), max(w_chart or 0.0, w_settled)
        print(f"{title:<24}{fmt(c_first, floor):>22}{fmt(c_chart, floor):>16}{fmt(c_settled, floor):>16}"
              f"{fmt(w_first, floor):>22}{fmt(w_chart, floor):>16}{fmt(w_settled, floor):>16}")
    print(f"\nload average after: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
