"""What a hierarchy costs at the size limits, and what the reported attacks cost now (refused).

    .venv/bin/python bench/hierarchy_bench.py [--samples 2000] [--skip-broom]

Every case runs in its own child process, and its peak memory is that child's ``ru_maxrss`` read
with ``os.wait4``. This parent imports nothing heavy and allocates nothing (the files are written by
a child too): a child started by fork/vfork + exec starts its peak at the parent's, so a parent
holding the test files would inflate every number. Each peak is shown beside the baseline, a
child that only imports the library (``import-only``).

Cases (``hsc_core.core.hierarchy.LIMITS``: depth 1,000, 200,000 nodes, 5,000,000 class–ancestor
links, 1,001 level columns, 32 MB, 500,000 lines):

* legal worst cases, loaded with ``load_hierarchy``: a caterpillar edge list at the maximum depth;
  a levels CSV at the maximum columns (a caterpillar with a broom of classes at the bottom, just
  under the class–ancestor bound, 27 MB); a Newick caterpillar at the maximum depth; an is-a
  caterpillar listed top-down (the authors' first-parent loop took a pass per level); a flat tree
  at the maximum nodes as an edge list and as the project's JSON;
* the reported attacks, each refused: a 10,000-level caterpillar edge list (265 kB; was 4.1 GB and
  33 s), levels CSVs of 10,000 and 20,000 columns × 5 rows (100 / 120 kB; was 2.5 GB in 15 s and a
  MemoryError), Newick nested 100,000 deep (200 kB; was 44–74 s, 1.5 GB, then RecursionError), and
  JSON nested 100,000 deep (was a traceback);
* the rules on the deepest trees: every rule's decision paths and exact RC curves (both losses) for
  ``--samples`` samples of random logits, on the depth-1,000 caterpillar and on the levels broom.

Exits 1 if a refusal takes over 1 s or 50 MB above the baseline, or a legal load over 1 GB above it.
Numbers are wall-clock on whatever else the machine is running; say so when reporting them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPTH = 1_000  # LIMITS.max_depth (checked by the children against the library's value)
MAX_NODES = 200_000
BROOM = 4_400  # bottom classes of the levels broom: 499,500 + 4,400 × 1,000 links, under 5,000,000

LEGAL = {  # case → (file, what it is)
    "caterpillar-edges": ("caterpillar_1000.csv", "edge list, caterpillar at depth 1,000"),
    "levels-max-columns": ("levels_1001_columns.csv", "levels CSV, 1,001 columns, 5,399 classes"),
    "newick-max-depth": ("caterpillar_1000.nwk", "Newick caterpillar at depth 1,000"),
    "is-a-max-depth": ("caterpillar_1000_top_down.txt", "is-a caterpillar at depth 1,000, listed top-down"),
    "flat-max-nodes": ("flat_200000.csv", "edge list, 199,999 classes under one root"),
    "flat-max-nodes-json": ("flat_200000.json", "hsc-hierarchy/1 JSON, 200,000 nodes"),
}
ATTACKS = {
    "attack-caterpillar-10000": ("caterpillar_10000.csv", "edge list, caterpillar 10,000 deep (265 kB)"),
    "attack-levels-10000-columns": ("levels_10000_columns.csv", "levels CSV, 10,000 columns × 5 rows"),
    "attack-levels-20000-columns": ("levels_20000_columns.csv", "levels CSV, 20,000 columns × 5 rows"),
    "attack-newick-100000": ("nested_100000.nwk", "Newick nested 100,000 deep (200 kB)"),
    "attack-json-100000": ("nested_100000.json", "JSON nested 100,000 deep"),
}
RULE_CASES = {
    "rules-caterpillar": ("caterpillar_1000.nwk", "caterpillar, depth 1,000"),
    "rules-levels-broom": ("levels_1001_columns.csv", "levels broom, depth 1,000, 4.9 M links"),
}


# ---------------------------------------------------------------------------------------- the files
def caterpillar_edges(depth: int) -> str:
    return "".join(f"n{i},n{i + 1}\nn{i},leaf{i}\n" for i in range(depth))


def caterpillar_newick(n_classes: int) -> str:
    opening = "".join(f"(c{i}," for i in range(n_classes - 2))
    return opening + f"(c{n_classes - 2},c{n_classes - 1})" + ")" * (n_classes - 2) + ";"


def levels_broom(columns: int, bottom: int) -> str:
    """Group g_i holds class s_i and group g_{i+1} (a caterpillar); the last group holds ``bottom``
    classes at the full depth. Every row has ``columns`` cells: groups, empty cells, the class."""
    groups = [f"g{i}" for i in range(columns - 1)]
    rows = [",".join(groups[: i + 1] + [""] * (columns - 2 - i) + [f"s{i}"]) for i in range(columns - 2)]
    full = ",".join(groups)
    rows += [f"{full},b{j}" for j in range(bottom)]
    return "\n".join(rows) + "\n"


def write_files(folder: Path) -> None:
    (folder / "caterpillar_1000.csv").write_text(caterpillar_edges(DEPTH))
    (folder / "levels_1001_columns.csv").write_text(levels_broom(DEPTH + 1, BROOM))
    (folder / "caterpillar_1000.nwk").write_text(caterpillar_newick(DEPTH + 1))
    (folder / "caterpillar_1000_top_down.txt").write_text(
        "".join(f"n{i} n{i + 1}\nn{i} leaf{i}\n" for i in range(DEPTH)))
    flat = "".join(f"root,class{i}\n" for i in range(MAX_NODES - 1))
    (folder / "flat_200000.csv").write_text("parent,child\n" + flat)
    nodes = [{"id": f"class{i}", "name": f"class {i}", "parent": MAX_NODES - 1} for i in range(MAX_NODES - 1)]
    nodes.append({"id": "root", "name": "root", "parent": -1})
    (folder / "flat_200000.json").write_text(json.dumps(
        {"format": "hsc-hierarchy/1", "n_leaves": MAX_NODES - 1, "nodes": nodes}, indent=0))
    (folder / "caterpillar_10000.csv").write_text(caterpillar_edges(10_000))
    for columns in (10_000, 20_000):
        (folder / f"levels_{columns}_columns.csv").write_text(
            "".join(",".join(f"c{j}" for j in range(columns - 1)) + f",k{r}\n" for r in range(5)))
    (folder / "nested_100000.nwk").write_text("(" * 100_000 + "a,b" + ")" * 100_000 + ";")
    (folder / "nested_100000.json").write_text("[" * 100_000 + "]" * 100_000)


# ---------------------------------------------------------------------------------------- one case (a child)
def run_case(case: str, folder: Path, samples: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from hsc_core.core.hierarchy import LIMITS, HierarchyError
    from hsc_core.datasets.formats import load_hierarchy

    assert LIMITS.max_depth == DEPTH and LIMITS.max_nodes == MAX_NODES
    if case == "import-only":
        return {}
    file = (LEGAL | ATTACKS | RULE_CASES)[case][0]
    start = time.perf_counter()
    try:
        tree = load_hierarchy(folder / file, fmt="is_a" if file.endswith(".txt") else None)
    except HierarchyError as exc:
        return {"seconds": time.perf_counter() - start, "error": str(exc).replace(str(folder) + os.sep, "")}
    out = {"seconds": time.perf_counter() - start, "nodes": tree.n_nodes, "leaves": tree.n_leaves,
           "depth": tree.max_depth, "links": int(tree.depth[: tree.n_leaves].sum())}
    if case in RULE_CASES:
        import numpy as np

        from hsc_core.core.curves import rc_curve_from_paths
        from hsc_core.core.probabilities import node_probabilities, softmax
        from hsc_core.core.rules import RULES, argmax_leaf, decision_paths

        rng = np.random.default_rng(0)
        logits = (rng.normal(size=(samples, tree.n_leaves)) * 3).astype(np.float32)
        labels = rng.integers(0, tree.n_leaves, samples)
        start = time.perf_counter()
        probs = node_probabilities(tree, softmax(logits))
        leaf = argmax_leaf(tree, probs)
        out["probabilities_s"] = time.perf_counter() - start
        for rule in RULES:
            start = time.perf_counter()
            paths = decision_paths(tree, probs, rule, leaf=leaf)
            built = time.perf_counter() - start
            for loss in ("01", "severity"):
                rc_curve_from_paths(tree, paths, labels, loss)
            out[rule] = {"paths_s": built, "curves_s": time.perf_counter() - start - built,
                         "records": int(paths.nodes.shape[1])}
    return out


# ---------------------------------------------------------------------------------------- the parent
def child(args: list[str]) -> tuple[dict, float]:
    """(the case's printed result, its peak RSS in MB) from a fresh interpreter."""
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed with exit code {proc.returncode}")
    return (json.loads(out) if out.strip() else {}), usage.ru_maxrss / 1024  # KiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2_000, help="samples of the rules cases (default 2,000)")
    ap.add_argument("--skip-broom", action="store_true", help="leave out the rules on the levels broom (the slowest)")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--write", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write:
        write_files(Path(args.write))
        return 0
    if args.case:
        print(json.dumps(run_case(args.case, Path(args.dir), args.samples)))
        return 0

    failures = []
    with tempfile.TemporaryDirectory(prefix="hier_bench_") as tmp:
        child(["--write", tmp])
        sizes = {p.name: p.stat().st_size for p in Path(tmp).iterdir()}
        _, base = child(["--case", "import-only", "--dir", tmp])
        print(f"baseline (python + hsc_core imports): peak RSS {base:.0f} MB; machine load "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
        print(f"{'case':<30} {'file':>9} {'time':>8} {'peak':>8} {'+base':>7}  result")
        for table, legal in ((LEGAL, True), (ATTACKS, False)):
            for case, (file, what) in table.items():
                res, peak = child(["--case", case, "--dir", tmp])
                extra = peak - base
                if legal:
                    result = (f"{res['nodes']:,} nodes, {res['leaves']:,} classes, depth {res['depth']:,}, "
                              f"{res['links']:,} links" if "error" not in res else f"REFUSED: {res['error']}")
                    bad = "error" in res or extra > 1024
                else:
                    result = f"refused: {res.get('error', 'LOADED')}"
                    bad = "error" not in res or res["seconds"] > 1.0 or extra > 50
                if bad:
                    failures.append(case)
                print(f"{case:<30} {sizes[file] / 2**20:>7.2f}MB {res['seconds']:>7.3f}s {peak:>6.0f}MB "
                      f"{extra:>+6.0f}MB  {what}: {result}{'  <-- FAIL' if bad else ''}")
        print(f"\nrules on {args.samples:,} samples of random float32 logits: node probabilities, then per rule its "
              "decision paths and exact RC curves for both losses")
        for case, (_, what) in RULE_CASES.items():
            if case == "rules-levels-broom" and args.skip_broom:
                continue
            res, peak = child(["--case", case, "--dir", tmp, "--samples", str(args.samples)])
            per_rule = ", ".join(f"{r} {res[r]['paths_s']:.2f}+{res[r]['curves_s']:.2f} s ({res[r]['records']} records)"
                                 for r in ("selective", "climbing", "jumping", "max_coverage"))
            print(f"{case:<30} load {res['seconds']:.2f} s, probabilities {res['probabilities_s']:.2f} s; {per_rule}; "
                  f"peak {peak:.0f} MB ({peak - base:+.0f} MB)  [{what}]")
    if failures:
        print(f"\nFAILED: {', '.join(failures)}")
        return 1
    print("\nall refusals under 1 s and 50 MB above the baseline; every legal case under 1 GB above it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
