"""Does the server give memory back when sessions that uploaded large logits end?

Starts ``streamlit run app.py`` (``tests/browser_support.streamlit_server``) with a short
disconnected-session TTL (``STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL``, default 5 s) and drives
Debian's Chromium (Playwright). Each round opens ``--sessions`` browser contexts (each its own
Streamlit session) that upload a synthetic ``.npz`` of ``--samples`` × 1,000 float32 logits on
the ImageNet tree (``hsc_core.datasets.logits_io.save_logits``; 25,000 samples inflate to 100 MB,
under the 200 MB ``HSC_MAX_UPLOAD_MB`` default and the uploader's own limit) on the Risk–Coverage
page, wait until that page shows the uploaded model's curves, then closes every tab and waits for
the sessions to end. The server's resident memory (``/proc/<pid>/status`` VmRSS) is printed at
start, after a warm-up session on a shipped model (the libraries, the ImageNet tree and the shipped
model's evaluation loaded: what any first visitor costs), with the sessions open, and once it
settles after each round.

The target: after repeated rounds the settled RSS stays within 10 % of the warm baseline.

    .venv/bin/python bench/session_memory_bench.py [--rounds 3] [--sessions 3] [--samples 25000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from browser_support import CHROMIUM, chromium, streamlit_server, wait_idle  # noqa: E402


def server_pid(url: str) -> int:
    """The pid of the ``streamlit run`` process serving ``url`` (found by its --server.port)."""
    port = url.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"streamlit" in b" ".join(args) and b"--server.port" in args and port.encode() in args:
            return int(entry.name)
    raise RuntimeError(f"no streamlit process serves {url}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def smaps_summary(pid: int) -> str:
    """Where the RSS is: [heap] (glibc's main arena), anonymous mappings by size (64 MB-reserved
    malloc arenas of other threads, thread stacks, Python's 1 MB object arenas, large arrays),
    and files (code, libraries), in MB."""
    groups: dict[str, float] = {}
    name, size = "", 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            size = hi - lo
            path = parts[5] if len(parts) > 5 else ""
            if path == "[heap]":
                name = "[heap] main arena"
            elif path.startswith("[stack"):
                name = "[stack]"
            elif path:
                name = "files (code, libraries)"
            elif size in (64 << 20, 128 << 20) or (60 << 20) <= size <= (64 << 20):
                name = "anon: thread malloc arenas (64 MB reserved)"
            elif (8 << 20) <= size <= (8 << 20) + (1 << 20):
                name = "anon: thread stacks (8 MB)"
            elif size >= (16 << 20):
                name = "anon: large blocks (≥ 16 MB)"
            else:
                name = "anon: small blocks (< 16 MB: Python object arenas, buffers)"
        elif parts[0] == "Rss:":
            groups[name] = groups.get(name, 0.0) + int(parts[1]) / 1024
    return "; ".join(f"{k} {v:.0f}" for k, v in sorted(groups.items(), key=lambda kv: -kv[1]) if v >= 1)


def settle(pid: int, seconds: float, quiet_mb: float = 5.0, window: float = 10.0) -> float:
    """Wait at most ``seconds`` for the RSS to stop falling (no change above ``quiet_mb`` for
    ``window`` seconds); the last reading."""
    deadline = time.time() + seconds
    readings: list[tuple[float, float]] = []
    while time.time() < deadline:
        now, value = time.time(), rss_mb(pid)
        readings.append((now, value))
        recent = [v for t, v in readings if t >= now - window]
        if now - readings[0][0] >= window and max(recent) - min(recent) <= quiet_mb:
            break
        time.sleep(1.0)
    return readings[-1][1]


def make_upload(folder: Path, samples: int) -> Path:
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.datasets.logits_io import save_logits

    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, samples, top1=0.75, seed=1)
    path = folder / "bench_upload.npz"
    save_logits(path, logits, labels, [f"s{i:06d}" for i in range(samples)],
                manifest={"model": "bench_upload", "dataset_id": "imagenet1k"}, dtype="float32")
    path.with_suffix(".json").unlink()  # an upload comes without its manifest
    return path


def open_rc(browser, url: str, upload: Path | None, sync_api):
    """A new browser context (a new Streamlit session) on Risk–Coverage, optionally with ``upload``
    added in the sidebar; returns the context once the page shows its chart."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(300_000)
    page.goto(f"{url}/risk_coverage")
    wait_idle(page)
    if upload is not None:
        page.get_by_text("Add a logits file (.npz)").click()
        file_input = page.locator("[data-testid=stSidebar] input[type=file]").first
        file_input.set_input_files(str(upload))
        added = page.locator("[data-testid=stSidebar] [data-testid=stAlert]").filter(has_text="Added").first
        try:
            added.wait_for(timeout=60_000)
        except sync_api.TimeoutError:  # on a busy server the first selection can be lost (as in the tests)
            file_input.set_input_files(str(upload))
            added.wait_for()
        page.wait_for_function("() => location.search.includes('model=bench_upload')")
        wait_idle(page)
    page.locator("[data-testid=stPlotlyChart] .js-plotly-plot").first.wait_for()
    text = page.locator("[data-testid=stMain]").inner_text()
    assert "Traceback" not in text, text[:2000]
    if upload is not None:
        assert "bench_upload" in text, text[:2000]
    return ctx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--samples", type=int, default=25_000, help="rows of the uploaded logits (× 1,000 float32)")
    ap.add_argument("--ttl", type=int, default=5, help="server.disconnectedSessionTTL (s)")
    ap.add_argument("--settle", type=float, default=90.0, help="at most this long for the RSS to settle (s)")
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} not found")
    from playwright import sync_api

    with tempfile.TemporaryDirectory(prefix="hsc_mem_bench_") as tmp:
        upload = make_upload(Path(tmp), args.samples)
        print(f"upload: {upload.name}, {args.samples:,} × 1,000 float32 = {args.samples * 4000 / 1e6:.0f} MB "
              "inflated, "
              f"{upload.stat().st_size / 1e6:.0f} MB on disk")
        env = {"STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": str(args.ttl)}
        with streamlit_server(env, log_path=Path(tmp) / "streamlit.log") as url, chromium(sync_api) as browser:
            pid = server_pid(url)
            start = rss_mb(pid)
            print(f"start (no session yet):              {start:8.0f} MB")
            open_rc(browser, url, None, sync_api).close()
            time.sleep(args.ttl + 1)
            warm = settle(pid, args.settle)
            print(f"warm baseline (one session, closed):  {warm:8.0f} MB")
            print(f"  where (MB): {smaps_summary(pid)}")
            for k in range(1, args.rounds + 1):
                t0 = time.time()
                contexts = [open_rc(browser, url, upload, sync_api) for _ in range(args.sessions)]
                peak = rss_mb(pid)
                for ctx in contexts:
                    ctx.close()
                time.sleep(args.ttl + 1)
                settled = settle(pid, args.settle)
                print(f"round {k}: {args.sessions} sessions open {peak:8.0f} MB → settled {settled:8.0f} MB "
                      f"({100 * (settled - warm) / warm:+.1f} % vs warm baseline; {time.time() - t0:.0f} s)",
                      flush=True)
                print(f"  where (MB): {smaps_summary(pid)}", flush=True)
            log = (Path(tmp) / "streamlit.log").read_text()
            errors = [line for line in log.splitlines() if "Error" in line or "Traceback" in line]
            if errors:
                print("server log errors:\n  " + "\n  ".join(errors[:20]))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
