"""Benchmark of ``hsc evaluate`` over many models: one process vs local processes vs local Ray.

    .venv/bin/python bench/evaluate_bench.py [--models 8] [--n 10000] [--workers K] [--no-ray]

Writes ``--models`` synthetic ImageNet-scale logits files (n × 1000, float16, seeded; never a user
default) to a temporary folder, then evaluates all of them (4 rules × 2 losses × with/without TS,
exact curves) with ``evaluate_many``: in this process, in K local processes, and as Ray tasks on a
private local Ray (start-up timed separately). Prints seconds per model and checks that every back
end gives identical rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets import logits_io  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.pipeline.many_models import evaluate_many  # noqa: E402


def write_models(folder: Path, n_models: int, n: int) -> list[Path]:
    h = imagenet_hierarchy()
    logits_io.library_versions = dict  # keep torch out of this benchmark's manifests
    paths = []
    for k in range(n_models):
        logits, labels = synthetic_logits(h, n, top1=0.6 + 0.3 * k / max(n_models - 1, 1), seed=k)
        ids = np.array([f"s{i}" for i in range(n)])
        paths.append(logits_io.save_logits(folder / f"model_{k:03d}.npz", logits, labels, ids, manifest={"model": k}))
    return paths


def timed(label: str, n_models: int, fn) -> list[dict]:
    t = time.perf_counter()
    rows, errors, _ = fn()
    dt = time.perf_counter() - t
    assert not errors, errors
    print(f"{label:<34}{dt:>9.2f} s{dt / n_models:>10.2f} s/model")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--n", type=int, default=10_000, help="samples per model")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs (load average {load}), "
          f"python {platform.python_version()}")

    with tempfile.TemporaryDirectory(prefix="hsc_evaluate_bench_") as tmp:
        t = time.perf_counter()
        paths = write_models(Path(tmp), args.models, args.n)
        print(f"{args.models} synthetic models, {args.n} × 1000 logits each: "
              f"written in {time.perf_counter() - t:.1f} s")
        print(f"\n{'back end':<34}{'total':>11}{'per model':>16}")
        serial = timed("1 process", args.models, lambda: evaluate_many(paths, workers=1))
        local = timed(f"{args.workers} local processes", args.models,
                      lambda: evaluate_many(paths, workers=args.workers))
        assert local == serial, "local processes gave different rows"
        if not args.no_ray:
            import ray

            t = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}})
            print(f"{'  (local Ray start-up)':<34}{time.perf_counter() - t:>9.2f} s")
            try:
                # ray_address is only read when no Ray is running; this one is reused, not restarted.
                on_ray = timed(f"Ray, {args.workers} CPUs (after start-up)", args.models,
                               lambda: evaluate_many(paths, workers=args.workers, ray_address="local"))
            finally:
                ray.shutdown()
            assert on_ray == serial, "Ray gave different rows"
        print("\nall back ends gave identical rows")


if __name__ == "__main__":
    main()
