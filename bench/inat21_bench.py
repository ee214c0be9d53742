"""Benchmark of ``hsc evaluate`` on one iNat21-size model (issue 46): 100,000 samples × 10,000 species.

    .venv/bin/python bench/inat21_bench.py [--folder /tmp/hsc_inat21] [--samples 100000] [--rules all|paper]
                                           [--ray] [--no-profile] [--make-only]

Makes the synthetic case once (seeded; never a user default) in ``--folder`` and reuses it while
its manifest matches:

* the tree: ``synthetic_taxonomy`` (iNat21's seven level sizes, 10,000 species, every species at
  depth 7, 16,327 edges) written as a ``parent,child`` edge list with its class list, read back by
  ``hsc evaluate --hierarchy`` as a user's file is (single-child chains collapsed: 12,386 nodes,
  leaves at depths 3–7);
* the logits: ``synthetic_logits`` in float16 (a 2.0 GB ``.npz``, the logits stored, not deflated, as
  ``save_logits`` and ``hsc cache-logits`` write them since 1.4.3): noise, plus a boost on every
  species under a "perceived" ancestor of the true one
  (its genus mostly, sometimes higher), plus a per-sample boost on the true species: mistakes stay
  within the genus, as real classifiers' do; top-1 0.7.

Then runs ``hsc evaluate FILE --hierarchy tree.csv --classes classes.txt`` (every rule, exact
curves, with and without temperature scaling; ``--rules paper`` for the paper's four alone;
``--ray`` through a private local Ray) in a child process and prints its wall time, its peak RSS
(``ru_maxrss`` of the child) and, unless ``--no-profile``, a per-stage profile of the same run
(cProfile's cumulative seconds of the stage functions; the profiler adds a few percent). Load
average before and after: the machine is shared, so say so when reporting the numbers.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy  # noqa: E402
from hsc_core.datasets import logits_io  # noqa: E402

CASE_VERSION = 2  # bump when the case's recipe changes, so an old folder is remade
TOP1 = 0.7
#: (label, functions whose cumulative time is that stage), in the order they run; a function is its
#: name, or "file.py:name" where the name alone is ambiguous. The passes run their chunks on several
#: threads (``HSC_THREADS``), and the logits are inflated on a thread of their own while the setting
#: without TS is built; cProfile sees the main thread, which waits for them, so a stage's figure is its
#: wall time.
STAGES = (
    ("open the file, read and check labels, ids and sources (then the logits inflate on a thread)",
     ("result_cache.py:__init__",)),
    ("read the hierarchy file", ("load_user_hierarchy",)),
    ("both settings: softmax, node sums, every rule's records (2 passes; the first as the logits inflate), TS fit",
     ("_build_settings",)),
    ("  of which: the rest of the file inflated, hashed and its values checked", ("result_cache.py:finish",)),
    ("  of which: TS fit on the calibration split", ("fit_temperature",)),
    ("exact RC curves + hAURC (rules × 2 losses × 2 settings, side by side on the threads)", ("results",)),
    ("gains over a common coverage range", ("gain_range",)),
    ("result rows in all (passes, curves, gains)", ("evaluation_rows",)),
)


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def make_case(folder: Path, n_samples: int, n_leaves: int, seed: int = 0) -> dict[str, Path]:
    """The case's files in ``folder`` (made once; remade when the manifest differs)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"logits": folder / f"inat21_{n_samples}.npz", "tree": folder / f"tree_{n_leaves}.csv",
             "classes": folder / f"classes_{n_leaves}.txt"}
    recipe = {"case_version": CASE_VERSION, "seed": seed, "n_leaves": n_leaves, "top1_target": TOP1}
    manifest = logits_io.manifest_path(files["logits"])
    if all(p.exists() for p in files.values()) and manifest.exists():
        found = json.loads(manifest.read_text(encoding="utf-8"))
        if all(found.get(k) == v for k, v in recipe.items()) and found.get("n_samples") == n_samples:
            return files
    t = time.perf_counter()
    h = synthetic_taxonomy(n_leaves, 7, seed=seed, collapse=False)
    with files["tree"].open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["parent", "child"])
        for v in range(h.n_nodes):
            if h.parent[v] >= 0:
                out.writerow([h.node_ids[h.parent[v]], h.node_ids[v]])
    files["classes"].write_text("\n".join(h.node_ids[: h.n_leaves]) + "\n", encoding="utf-8")
    logits, labels = synthetic_logits(h, n_samples, top1=TOP1, seed=seed, dtype=np.float16)
    ids = np.char.add("s", np.arange(n_samples).astype(str))
    logits_io.library_versions = dict  # keep torch out of this benchmark's manifest
    logits_io.save_logits(files["logits"], logits, labels, ids, manifest={"model": "synthetic iNat21", **recipe})
    print(f"made the case in {folder} ({time.perf_counter() - t:.0f} s): {h.n_nodes - 1:,} edges, logits "
          f"{logits.shape} "
          f"float16, {files['logits'].stat().st_size / 1e9:.2f} GB on disk")
    return files


def run_evaluate(files: dict[str, Path], rules: str, ray: bool,
                 profile: Path | None) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS in GB, stdout) of ``hsc evaluate`` in a child process."""
    with tempfile.TemporaryDirectory(prefix="hsc_inat21_out_") as tmp:
        cmd = [sys.executable]
        if profile is not None:
            cmd += ["-m", "cProfile", "-o", str(profile)]
        cmd += ["-m", "hsc_core", "evaluate", str(files["logits"]), "--hierarchy", str(files["tree"]),
                "--classes", str(files["classes"]), "--out", str(Path(tmp) / "results.csv"), "--recompute",
                "--no-progress"]
        if rules == "paper":
            cmd += ["--rules", "selective,climbing,jumping,max_coverage"]
        if ray:
            cmd += ["--ray", "local"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak RSS and CPU time
        wall = time.perf_counter() - t
        if status:
            raise SystemExit(f"hsc evaluate failed (status {status}):\n{out}")
        rows = (Path(tmp) / "results.csv").read_text(encoding="utf-8")
        cpu = usage.ru_utime + usage.ru_stime
        return wall, cpu, usage.ru_maxrss / 1024**2, out + f"\n({rows.count(chr(10)) - 1} result rows)"


def print_profile(path: Path) -> None:
    stats = pstats.Stats(str(path))
    cumulative: dict[str, float] = {}
    for (file, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        for key in (name, f"{Path(file).name}:{name}"):
            cumulative[key] = max(cumulative.get(key, 0.0), ct)
    print(f"\n{'stage (cProfile cumulative seconds of the main thread, same run)':<110}{'s':>8}")
    for label, names in STAGES:
        seconds = sum(cumulative.get(n, 0.0) for n in names)
        print(f"{label:<110}{seconds:>8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "hsc_inat21")
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--leaves", type=int, default=10_000)
    ap.add_argument("--rules", choices=["all", "paper"], default="all")
    ap.add_argument("--ray", action="store_true", help="run through a private local Ray (hsc evaluate --ray local)")
    ap.add_argument("--no-profile", action="store_true", help="time the run without cProfile")
    ap.add_argument("--make-only", action="store_true", help="make the case and stop")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"numpy {np.__version__}")
    files = make_case(args.folder, args.samples, args.leaves)
    if args.make_only:
        return
    print(f"load average before: {load_average()}")
    profile = None if args.no_profile else args.folder / "evaluate.prof"
    wall, cpu, rss, out = run_evaluate(files, args.rules, args.ray, profile)
    print(out.rstrip())
    print(f"\nhsc evaluate, {args.samples:,} × {args.leaves:,}, rules: {args.rules}{', Ray' if args.ray else ''}: "
          f"{wall:.1f} s wall ({cpu:.1f} s of CPU over its threads), peak RSS {rss:.2f} GB "
          "(targets: every rule ≤ 60 s, the paper's four ≤ 15 s, ≤ 6 GB)")
    print(f"load average after: {load_average()}")
    if profile is not None:
        print_profile(profile)


if __name__ == "__main__":
    main()
