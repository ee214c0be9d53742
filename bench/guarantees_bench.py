"""Benchmark of the guarantee shoot-out (``hsc_core.evaluation.guarantees.shootout``) on the shipped
logits: every method but DARTS on the same ``--reps`` calibration sets (target ≤ 30 s for 1,000 on
2 cores), then DARTS alone on ``--darts-reps`` sets, extrapolated to ``--reps``.

    .venv/bin/python bench/guarantees_bench.py [--model efficientnet_lite0] [--reps 1000] [--n-cal 852]

Prints the one-off preparation (decision paths, the conformal node family), the shoot-out's wall
time and each method's own seconds, and the peak RSS.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.datasets.logits_io import load_logits  # noqa: E402
from hsc_core.evaluation.guarantee_methods import DEFAULT_METHODS, GuaranteeData, GuaranteeSettings  # noqa: E402
from hsc_core.evaluation.model import ModelEvaluation  # noqa: E402
from hsc_core.evaluation.resolve import resolve_hierarchy  # noqa: E402
from hsc_core.evaluation.shootout import shootout  # noqa: E402

CACHED = Path(__file__).resolve().parents[1] / "cached_logits"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--darts-reps", type=int, default=20)
    ap.add_argument("--n-cal", type=int, default=None)
    ap.add_argument("--target-accuracy", type=float, default=0.95)
    ap.add_argument("--delta", type=float, default=0.1)
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    path = CACHED / f"{args.model}.npz"
    bundle = load_logits(path)
    name, h = resolve_hierarchy(bundle, str(path))
    ev = ModelEvaluation.from_bundle(bundle, h, dataset=name, file=str(path))
    t0 = time.perf_counter()
    es = ev.setting(True)
    data = GuaranteeData.from_evaluation_set(es)
    prep = time.perf_counter() - t0
    n_cal = args.n_cal or min(1000, data.n // 2)
    settings = GuaranteeSettings(alpha=1 - args.target_accuracy, delta=args.delta, min_coverage=0.6)
    print(f"{args.model}: {data.n:,} evaluated samples, n_cal = {n_cal:,}; preparation (paths, T, conformal "
          f"family): {prep:.2f} s")
    methods = [m for m in DEFAULT_METHODS if m != "darts"] + ["ltt_multi"]
    t0 = time.perf_counter()
    res = shootout(data, settings, n_cal, methods=methods, reps=args.reps, seed=0)
    wall = time.perf_counter() - t0
    print(f"shoot-out, {len(methods)} methods (all but DARTS) × {args.reps:,} repetitions: {wall:.2f} s "
          f"(target ≤ 30 s)")
    for _, r in res.summary.iterrows():
        print(f"  {r['method']:<20} {r['seconds']:6.2f} s   violation {r['violation_rate']:.3f}   "
              f"accuracy {r['accuracy_mean']:.4f}   coverage {r['coverage_mean']:.4f}")
    if args.darts_reps:
        t0 = time.perf_counter()
        shootout(data, settings, n_cal, methods=["darts"], reps=args.darts_reps, seed=0)
        d = time.perf_counter() - t0
        print(f"DARTS: {d:.2f} s for {args.darts_reps} repetitions → about {d / args.darts_reps * args.reps:.0f} s "
              f"for {args.reps:,}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
