"""Benchmark of the paired bootstrap (``hsc_core.core.uncertainty``): hAURC and gain intervals of
all four rules, on the shipped logits (1,894 images) and on synthetic ImageNet-scale logits.

    .venv/bin/python bench/uncertainty_bench.py [--n 50000] [--resamples 1000] [--fit-n 10000]

Prints, per data set, the seconds for the per-sample event tables plus ``n_resamples`` paired
resamples (decision paths are computed beforehand, as the dashboard caches them), the events per
rule, and the resulting intervals. Then the temperature fit (``fit_temperature``, the dashboard's
first step on a model) on ``--fit-n`` × ``--fit-n`` float16 logits, with its peak traced memory.
With ``--inat21 N``: the severity-loss event tables and a short bootstrap on the 10,000-leaf synthetic
taxonomy with N samples, with the peak traced memory of the events (row-blocked by the memory budget).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES, decision_paths  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.core.uncertainty import bootstrap_haurc, rule_events  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "cached_logits" / "efficientnet_lite0.npz"


def run(name: str, h, logits: np.ndarray, labels: np.ndarray, n_resamples: int) -> None:
    probs = node_probabilities(h, softmax(logits))
    paths = {rule: decision_paths(h, probs, rule) for rule in RULES}
    events = {rule: rule_events(h, paths[rule], labels).event_sample.size for rule in RULES}
    t, cpu = time.perf_counter(), time.process_time()
    res = bootstrap_haurc(h, labels, paths, n_resamples=n_resamples)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    # CPU time too: on a shared machine the wall time also counts other processes' turns.
    print(f"\n{name}: {labels.size:,} samples, {n_resamples:,} paired resamples × 4 rules: {seconds:.2f} s wall, "
          f"{cpu:.2f} s CPU ({1000 * seconds / n_resamples:.2f} ms per resample); load average "
          f"{os.getloadavg()[0]:.1f}")
    print("  events per rule: " + ", ".join(f"{RULE_LABELS[r]} {e:,}" for r, e in events.items()))
    for rule in RULES:
        iv = res.haurc[rule]
        line = (f"  {RULE_LABELS[rule]:<13} hAURC×1000 {1000 * iv.estimate:7.2f} "
                f"[{1000 * iv.low:.2f}, {1000 * iv.high:.2f}]")
        if rule in res.gain:
            g = res.gain[rule]
            line += f"   gain {g.estimate:6.2f} % [{g.low:.2f}, {g.high:.2f}]"
        print(line)


def run_fit(n: int) -> None:
    import tracemalloc

    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((n, n), dtype=np.float32) * 3).astype(np.float16)
    labels = rng.integers(0, n, n)
    logits[np.arange(n), labels] += 6  # a model that is right about half the time
    tracemalloc.start()
    t = time.perf_counter()
    temperature = fit_temperature(logits, labels)
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"\nfit_temperature on {n:,} × {n:,} float16 logits: T = {temperature:.6f}, {seconds:.2f} s wall, "
          f"peak traced memory {peak / 2**20:,.0f} MB (the logits as float64 would be {n * n * 8 / 2**20:,.0f} MB)")


def run_inat21(n: int, n_resamples: int) -> None:
    import tracemalloc

    from hsc_core.core.logit_chunks import decision_paths_from_logits
    from hsc_core.core.synthetic import synthetic_taxonomy

    h = synthetic_taxonomy()
    logits, labels = synthetic_logits(h, n, top1=0.7, seed=0, dtype=np.float16)
    paths = decision_paths_from_logits(h, logits)
    del logits
    tracemalloc.start()
    t = time.perf_counter()
    sizes = {rule: rule_events(h, paths[rule], labels, "severity").event_sample.size for rule in RULES}
    ev_seconds, ev_peak = time.perf_counter() - t, tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    t = time.perf_counter()
    res = bootstrap_haurc(h, labels, paths, loss="severity", n_resamples=n_resamples)
    boot_seconds, boot_peak = time.perf_counter() - t, tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    records = sum(p.nodes.size for p in paths.values())
    print(f"\niNat21-size synthetic ({h.n_leaves:,} leaves, {h.n_nodes:,} nodes, depth {h.max_depth}), {n:,} samples, "
          f"severity loss: event tables of 4 rules ({sum(sizes.values()):,} events from {records:,} records) "
          f"{ev_seconds:.1f} s, peak traced {ev_peak / 2**20:,.0f} MB; bootstrap ({n_resamples} resamples) "
          f"{boot_seconds:.1f} s, peak traced {boot_peak / 2**20:,.0f} MB; climbing gain "
          f"{res.gain['climbing'].estimate:.2f} % [{res.gain['climbing'].low:.2f}, {res.gain['climbing'].high:.2f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000, help="synthetic samples (0 skips)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--fit-n", type=int, default=10_000, help="samples = classes of the temperature fit (0 skips)")
    ap.add_argument("--inat21", type=int, default=0, metavar="N",
                    help="severity events + bootstrap on the 10,000-leaf synthetic taxonomy with N samples (0 skips)")
    args = ap.parse_args()
    if args.inat21 > 0:
        run_inat21(args.inat21, min(args.resamples, 200))
    h = imagenet_hierarchy()
    _ = h.leaf_paths, h.leaf_matrix, h.coverage
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    if SHIPPED.exists():
        data = load_logits(SHIPPED)
        run(f"shipped {SHIPPED.stem}", h, data.logits, data.labels, args.resamples)
    if args.n > 0:
        logits, labels = synthetic_logits(h, args.n, top1=0.8, seed=0)
        run("synthetic (seed 0)", h, logits, labels, args.resamples)
    if args.fit_n > 0:
        run_fit(args.fit_n)
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2:.2f} GB")


if __name__ == "__main__":
    main()
