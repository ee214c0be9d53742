"""Benchmark of the dashboard pages on a legal deep tree (issue 33 (3)): a caterpillar of depth
``--depth`` (each internal node has one leaf child and the next internal node; 1,000 deep and
1,001 classes by default) with ``--samples`` synthetic samples (5,000), shipped to the app as a
user data set folder next to a cached-logits folder, then Where it stops (at ``level=2`` and
``level=64``) and Risk–Coverage opened through ``streamlit.testing.v1.AppTest``. Prints each
page's wall-clock time (the first open pays the evaluation, cached afterwards).

    .venv/bin/python bench/deep_tree_pages.py [--depth 1000] [--samples 5000] [--profile where]

``--profile PAGE`` runs that page once under cProfile (in the script thread) and prints the 25
most expensive functions (cumulative).

Measured on the busy 2-core development machine, depth 1,000, 5,000 samples, each page opened
straight from its link (first open, evaluation included):

==========================  ========  =======
page                        before    after
==========================  ========  =======
Where it stops              5.7 s     8.4 s   (no change: noise of the shared machine)
Where it stops, level=64    1.1 s     1.5 s
Risk–Coverage               164.8 s   2.2 s
Overview                    minutes   5.1 s
==========================  ========  =======

What dominated was the paired bootstrap (1,000 resamples over the rules' events, ~samples ×
depth of them on a caterpillar: the work of 250,000 samples on ImageNet), which Risk–Coverage
and the Overview ran on first render whenever there were at most 20,000 samples. Its cost is now
measured in samples × path records (``uncertainty.intervals_on_request``): such a set gets its
intervals on request, like a large one. The library's numbers are unchanged.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hsc_core.core.hierarchy import Hierarchy  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.logits_io import save_logits  # noqa: E402

PAGES = {"overview": ("app_pages/overview.py", {}), "where": ("app_pages/where_in_tree.py", {}),
         "where64": ("app_pages/where_in_tree.py", {"level": "64"}), "rc": ("app_pages/risk_coverage.py", {})}


def caterpillar(depth: int) -> tuple[Hierarchy, list[tuple[str, str]], list[str]]:
    """The caterpillar tree of ``depth`` internal nodes: internal ``n0`` (the root) … ``n{depth-1}``,
    leaf ``c{k}`` under ``n{k}``, and ``c{depth}`` under the deepest one. Returns the hierarchy (leaves
    first, as ``Hierarchy.from_parents`` wants), its parent→child edges and the class names."""
    n_leaves = depth + 1
    parent = np.empty(n_leaves + depth, dtype=np.int64)
    parent[:depth] = n_leaves + np.arange(depth)  # leaf k under internal k
    parent[depth] = n_leaves + depth - 1  # the last leaf under the deepest internal node
    parent[n_leaves] = -1
    parent[n_leaves + 1:] = n_leaves + np.arange(depth - 1)  # internal k under internal k-1
    names = [f"c{k}" for k in range(n_leaves)] + [f"n{k}" for k in range(depth)]
    h = Hierarchy.from_parents(parent, n_leaves, node_ids=names, names=names)
    edges = [(names[p], names[c]) for c, p in enumerate(parent) if p >= 0]
    return h, edges, names[:n_leaves]


def build(base: Path, depth: int, n_samples: int) -> Path:
    h, edges, classes = caterpillar(depth)
    folder = base / "datasets" / "caterpillar"
    folder.mkdir(parents=True)
    (folder / "hierarchy.csv").write_text("parent,child\n" + "".join(f"{p},{c}\n" for p, c in edges))
    (folder / "classes.txt").write_text("\n".join(classes) + "\n")
    logits, labels = synthetic_logits(h, n_samples, top1=0.6, seed=0)
    cached = base / "cached_logits"
    cached.mkdir()
    save_logits(cached / "deep_net.npz", logits, labels, [f"s{i:05d}" for i in range(n_samples)],
                manifest={"model": "deep_net", "dataset_id": "caterpillar"}, dtype="float32")
    return cached


def open_page(page: str, query: dict) -> tuple[float, object]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    for k, v in query.items():
        at.query_params[k] = v
    t = time.perf_counter()
    at.switch_page(page).run()  # straight to the page, as a browser opening its link (not the Overview first)
    elapsed = time.perf_counter() - t
    if at.exception:
        raise SystemExit(f"{page}: {[e.value for e in at.exception][:1]}")
    return elapsed, at


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--pages", default="where,where64,rc", help="comma-separated: " + ", ".join(PAGES))
    ap.add_argument("--profile", choices=list(PAGES), help="profile one page (after a warm-up open of it)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cached = build(Path(tmp), args.depth, args.samples)
        for var in ("HSC_SYNTHETIC", "HSC_SYNTHETIC_TAXONOMY", "HSC_DATASETS_DIR"):
            os.environ.pop(var, None)
        os.environ["HSC_CACHED_LOGITS_DIR"] = str(cached)
        print(f"caterpillar tree: depth {args.depth}, {args.depth + 1} classes, {args.samples} samples, "
              f"logits file {(cached / 'deep_net.npz').stat().st_size / 2**20:.1f} MB")
        if args.profile:
            page, query = PAGES[args.profile]
            from streamlit.testing.v1 import local_script_runner

            prof = cProfile.Profile()
            runner = local_script_runner.LocalScriptRunner
            original = runner._run_script_thread

            def profiled(self) -> None:  # the page runs in the script thread, which cProfile does not follow
                prof.enable()
                try:
                    original(self)
                finally:
                    prof.disable()

            runner._run_script_thread = profiled
            elapsed, _ = open_page(page, {"ts": "0", **query})
            print(f"{args.profile}: {elapsed:.1f} s (profiled)")
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
            return
        for name in args.pages.split(","):
            page, query = PAGES[name]
            elapsed, at = open_page(page, {"ts": "0", **query})
            shown = f"{len(at.get('plotly_chart'))} charts, {len(at.error)} errors, {len(at.warning)} warnings"
            print(f"{name:8s} {page:32s} {elapsed:7.1f} s  ({shown}; a fresh session, the evaluation cached after "
                  "the first)")
            for e in (*at.error, *at.warning):
                print("   ", str(e.value)[:160])


if __name__ == "__main__":
    main()
