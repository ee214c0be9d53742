"""Benchmark of "Where it stops" at iNat21 size on synthetic data (never a user default).

    .venv/bin/python bench/diagnostics_bench.py [--leaves 10000] [--samples 100000]

Builds a seeded 10,000-leaf taxonomy and float16 logits, the decision paths of every rule (chunked,
as the dashboard's evaluation does once per model), then times what a θ move reruns on the page:
``landing_counts`` (one rule), ``wedge_nodes`` + the sunburst figure (≤ MAX_WEDGES sectors) and its
JSON size, the mistake-severity histogram (four rules), and, once per rule and level, the
per-superclass RC curves. Median of 5 runs each; wall-clock on whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.core.logit_chunks import decision_paths_from_logits  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy  # noqa: E402
from hsc_core.evaluation.diagnostics import (  # noqa: E402
    landing_counts,
    mistake_severity_histogram,
    superclass_rc_curves,
    wedge_nodes,
)
from hsc_core.report.diagnostics_figures import tree_map_figure  # noqa: E402


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--leaves", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=100_000)
    args = ap.parse_args()
    h = synthetic_taxonomy(args.leaves, seed=0)
    logits, labels = synthetic_logits(h, args.samples, top1=0.6, seed=0, dtype=np.float16)
    t = time.perf_counter()
    paths = decision_paths_from_logits(h, logits)
    print(f"tree: {h.n_leaves:,} leaves, {h.n_nodes:,} nodes; {args.samples:,} samples; "
          f"decision paths (once per model): {time.perf_counter() - t:.1f} s")
    del logits
    theta = 0.6
    s, table = timed(lambda: landing_counts(h, paths["climbing"], labels, theta))
    print(f"landing_counts (Climbing, θ = {theta}):        {1000 * s:7.1f} ms")
    samples = table["samples"].to_numpy()
    s, nodes = timed(lambda: wedge_nodes(h, samples))
    print(f"wedge_nodes:                                 {1000 * s:7.1f} ms  ({len(nodes):,} wedges)")
    s, fig = timed(lambda: tree_map_figure(table, nodes))
    print(f"sunburst figure:                             {1000 * s:7.1f} ms  "
          f"({len(fig.to_json()) / 1e6:.2f} MB of JSON to the browser)")
    s, _ = timed(lambda: mistake_severity_histogram(h, paths, labels, theta))
    print(f"mistake-severity histogram (4 rules):        {1000 * s:7.1f} ms")
    s, curves = timed(lambda: superclass_rc_curves(h, paths["climbing"], labels, 2), repeat=3)
    print(f"superclass RC curves (6 groups, depth 2):    {1000 * s:7.1f} ms  (cached per rule and level)")


if __name__ == "__main__":
    main()
