"""Benchmark of ``hsc report`` at iNat21 size on synthetic data: wall time and peak memory.

    .venv/bin/python bench/report_bench.py [--samples 100000] [--leaves 10000] [--resamples 1000]

Builds the case of ``bench/scale_bench.py`` (a seeded 7-level ``synthetic_taxonomy`` with 10,000
leaves, float16 ``synthetic_logits``: 2 GB at 100,000 samples), writes it as a cached-logits
``.npz`` (``save_logits``) and a JSON hierarchy in a temporary folder, then runs the real command,
``python -m hsc_core report FILE --hierarchy TREE``, in a subprocess. Prints

* the command's wall time (loading, checking, evaluating, bootstrap, figures, writing the file);
* its peak RSS (the child's own ``ru_maxrss``, from ``os.wait4``), beside the size of the logits
  themselves, which the command must hold once. The data are drawn and written by a separate
  child first: Linux carries the parent's high-water mark into a child that it spawns (vfork +
  exec), so a bench that held 2 GB of logits itself would report at least that much for any child;
* the report's size.

``--resamples`` sets the bootstrap's resamples (default 1,000, the command's own default): the
bootstrap is the longest step at 100,000 samples, and its time grows linearly with it. Setup
(drawing and writing the data) is not timed. Numbers are wall-clock on whatever else the machine
is running; say so when reporting them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy  # noqa: E402
from hsc_core.core.uncertainty import N_RESAMPLES  # noqa: E402
from hsc_core.datasets.logits_io import save_logits  # noqa: E402


def write_case(folder: Path, leaves: int, samples: int, depth: int) -> None:
    """The synthetic model as ``folder/synthetic_inat.npz`` + ``folder/tree.json``."""
    h = synthetic_taxonomy(leaves, depth, seed=0)
    logits, labels = synthetic_logits(h, samples, top1=0.7, seed=0, dtype=np.float16)
    ids = np.char.add("s", np.arange(samples).astype(str))
    npz = save_logits(folder / "synthetic_inat.npz", logits, labels, ids, manifest={"model": "synthetic_inat"},
                      dtype="float16")
    tree = folder / "tree.json"
    h.to_json(tree)
    print(f"taxonomy: {h.n_leaves:,} leaves, {h.n_nodes:,} nodes, depth {h.max_depth}; logits {logits.shape} "
          f"{logits.dtype} ({logits.nbytes / 2**20:,.0f} MB in memory, {npz.stat().st_size / 2**20:,.0f} MB on disk)",
          flush=True)


def run_report(npz: Path, tree: Path, out: Path, resamples: int) -> tuple[float, float]:
    """Run ``hsc report`` in a child process; (wall seconds, that child's peak RSS in MB)."""
    cmd = [sys.executable, "-m", "hsc_core", "report", str(npz), "--hierarchy", str(tree), "--out", str(out),
           "--resamples", str(resamples)]
    print("command:", " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # progress on stderr
    _, status, usage = os.wait4(child.pid, 0)  # this child's own resource use
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"hsc report failed with exit code {child.returncode}")
    return wall, usage.ru_maxrss / 1024  # KiB on Linux


def write_in_child(folder: Path, args: argparse.Namespace) -> None:
    """``write_case`` in a child process, so this process never holds the logits (see the docstring)."""
    cmd = [sys.executable, __file__, "--write-only", str(folder), "--samples", str(args.samples),
           "--leaves", str(args.leaves), "--depth", str(args.depth)]
    subprocess.run(cmd, check=True)


def written(folder: Path, args: argparse.Namespace) -> bool:
    """Whether ``--keep DIR`` already holds this case (its manifest says the same size)."""
    manifest = folder / "synthetic_inat.json"
    if not (manifest.is_file() and (folder / "synthetic_inat.npz").is_file() and (folder / "tree.json").is_file()):
        return False
    meta = json.loads(manifest.read_text())
    return (meta.get("n_samples"), meta.get("n_classes")) == (args.samples, args.leaves)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--leaves", type=int, default=10_000)
    ap.add_argument("--depth", type=int, default=7)
    ap.add_argument("--resamples", type=int, default=N_RESAMPLES,
                    help=f"bootstrap resamples of the report (default {N_RESAMPLES}, the command's default)")
    ap.add_argument("--keep", metavar="DIR",
                    help="write the data and the report here and keep them (a later run with the same sizes reuses "
                         "the data)")
    ap.add_argument("--write-only", metavar="DIR", help=argparse.SUPPRESS)  # the setup child
    args = ap.parse_args()
    if args.write_only:
        write_case(Path(args.write_only), args.leaves, args.samples, args.depth)
        return

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="hsc_report_bench_") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        npz, tree = folder / "synthetic_inat.npz", folder / "tree.json"
        if written(folder, args):
            print(f"reusing the data in {folder}")
        else:
            write_in_child(folder, args)
        logits_bytes = args.samples * args.leaves * 2  # float16
        print(f"setup (not timed below): {time.perf_counter() - t0:.1f} s", flush=True)
        out = folder / "report.html"
        wall, rss_mb = run_report(npz, tree, out, args.resamples)
        print(f"\nhsc report, {args.samples:,} samples × {args.leaves:,} classes, {args.resamples:,} bootstrap "
              f"resamples{'' if args.resamples == N_RESAMPLES else f' (the default is {N_RESAMPLES:,})'}:")
        print(f"  wall time: {wall:.1f} s")
        print(f"  peak RSS:  {rss_mb:,.0f} MB (the logits alone: {logits_bytes / 2**20:,.0f} MB)")
        print(f"  report:    {out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
