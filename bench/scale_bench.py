"""Benchmark of whole-model evaluation at iNat21 size on synthetic data (never a user default).

    .venv/bin/python bench/scale_bench.py [--leaves 10000] [--samples 100000] [--depth 7]

A seeded 7-level taxonomy (``synthetic_taxonomy``: 10,000 leaves, 16,328 nodes, 12,386 after
collapsing) and float16 logits (as cached logits are stored; 2 GB at full size). Two trees: the
default collapses single-child chains, so its leaves lie at depths 3–7 (mixed depths: hFβ's
hardest case); ``--no-collapse`` keeps them, every leaf at depth 7 as iNat21's species. Prints

* the real entry point, ``rc_curves_from_logits`` (all four rules, both losses, exact curves,
  chunked), wall time against the ≤ 60 s target;
* a per-rule split of the same work from a second chunked pass: the shared softmax + node
  probabilities, then each rule's decision paths and its exact curves + hAURC for both losses;
* the same entry point with every rule (``metric_rules.ALL_RULES``: the paper's four, hF1-, severity- and
  information-optimal, Valmadre's Pareto), the "all rules together ≤ 60 s" number;
* seconds per rule (decision paths of all eight, the tree's leaf depths named);
* per new rule: decision paths, curves + hAURC, and the new metrics (excess / achievable hAURC,
  hierarchical P/R/F, mistake-severity histogram), plus the flat AURC estimators and AUGRC;
* peak RSS of the process (``ru_maxrss``) against the ≤ 6 GB target.

Numbers are wall-clock on whatever else the machine is running; say so when reporting them.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.core.curves import rc_curve_from_paths  # noqa: E402
from hsc_core.core.hierarchical_prf import hierarchical_prf, mistake_lca_depth_counts  # noqa: E402
from hsc_core.core.logit_chunks import auto_chunk_size, node_probabilities_rows, rc_curves_from_logits  # noqa: E402
from hsc_core.core.metric_rules import EXTRA_RULES, any_decision_paths, rule_label  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES, argmax_leaf, concat_decision_paths, decision_paths  # noqa: E402
from hsc_core.core.selective_metrics import achievable_haurc, augrc, aurc, oracle_haurc, oracle_moves  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy  # noqa: E402


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leaves", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--depth", type=int, default=7)
    ap.add_argument("--logits-dtype", choices=["float16", "float32"], default="float16")
    ap.add_argument("--chunk-size", type=int, default=None, help="samples per chunk (default: automatic)")
    ap.add_argument("--no-split", action="store_true", help="skip the per-rule split (second pass)")
    ap.add_argument("--no-extra", action="store_true", help="skip the rules and metrics beyond the paper")
    ap.add_argument("--no-collapse", action="store_true",
                    help="keep single-child chains: every leaf at depth --depth, as iNat21's species")
    ap.add_argument("--extra-rules", default=",".join(EXTRA_RULES),
                    help="comma-separated new rules to time (default: all)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    h = synthetic_taxonomy(args.leaves, args.depth, seed=0, collapse=not args.no_collapse)
    _ = h.leaf_paths, h.leaf_matrix, h.coverage, h.ancestors_by_depth
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    leaf_depths = np.unique(h.depth[: h.n_leaves])
    print(f"taxonomy: {h.n_leaves:,} leaves, {h.n_nodes:,} nodes{'' if args.no_collapse else ' after collapsing'}, "
          f"depth {h.max_depth}, leaves at depths {leaf_depths.min()}–{leaf_depths.max()} "
          f"({time.perf_counter() - t0:.2f} s)")
    t0 = time.perf_counter()
    logits, labels = synthetic_logits(h, args.samples, top1=0.7, seed=0, dtype=np.dtype(args.logits_dtype).type)
    print(f"synthetic logits {logits.shape} {logits.dtype} ({logits.nbytes / 1024**3:.2f} GB): "
          f"{time.perf_counter() - t0:.1f} s (setup, not timed below)")
    chunk = args.chunk_size or auto_chunk_size(h)
    print(f"chunk: {chunk} samples; a dense float32 samples × nodes matrix would be "
          f"{args.samples * h.n_nodes * 4 / 1024**3:.1f} GB")
    rss_setup = peak_rss_gb()

    def report(done: int, total: int) -> None:
        if done == total or done // chunk % 25 == 0:
            print(f"\r  {done:,}/{total:,} samples", end="" if done < total else "\n", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    curves = rc_curves_from_logits(h, logits, labels, chunk_size=args.chunk_size, progress=report)
    haurc = {key: c.haurc for key, c in curves.items()}
    t_all = time.perf_counter() - t0
    print(f"\nrc_curves_from_logits, all 4 rules × 2 losses, exact curves + hAURC: {t_all:.1f} s (target ≤ 60 s)")
    rss_api = peak_rss_gb()
    del curves

    if not args.no_split:
        t_shared = 0.0
        t_paths = dict.fromkeys(RULES, 0.0)
        parts: dict[str, list] = {r: [] for r in RULES}
        for start in range(0, args.samples, chunk):
            t = time.perf_counter()
            probs = node_probabilities_rows(h, logits, np.arange(start, min(start + chunk, args.samples)))
            leaf = argmax_leaf(h, probs)
            t_shared += time.perf_counter() - t
            for rule in RULES:
                t = time.perf_counter()
                parts[rule].append(decision_paths(h, probs, rule, leaf=leaf))
                t_paths[rule] += time.perf_counter() - t
        print(f"\nshared per chunk: softmax + node probabilities + argmax leaf: {t_shared:.1f} s")
        print(f"{'rule':<14}{'decision paths (s)':>20}{'curves+hAURC, 2 losses (s)':>28}{'records/sample':>16}"
              f"{'breakpoints':>13}{'hAURC 0/1':>11}{'severity':>10}")
        for rule in RULES:
            t = time.perf_counter()
            paths = concat_decision_paths(parts.pop(rule))
            c01 = rc_curve_from_paths(h, paths, labels, "01")
            csev = rc_curve_from_paths(h, paths, labels, "severity")
            areas = (c01.haurc, csev.haurc)
            t_curve = time.perf_counter() - t
            assert areas == (haurc[(rule, "01")], haurc[(rule, "severity")])  # same numbers as the API
            print(f"{RULE_LABELS[rule]:<14}{t_paths[rule]:>20.2f}{t_curve:>28.2f}{paths.nodes.shape[1]:>16}"
                  f"{c01.events.size:>13,}{areas[0]:>11.5f}{areas[1]:>10.5f}")

    if not args.no_extra:
        extra_bench(h, logits, labels, chunk, args.chunk_size, report, tuple(args.extra_rules.split(",")))

    print(f"\npeak RSS: {peak_rss_gb():.2f} GB (after setup {rss_setup:.2f} GB, after rc_curves_from_logits "
          f"{rss_api:.2f} GB; target ≤ 6 GB)")


def extra_bench(h, logits, labels, chunk, chunk_size, report, extra: tuple[str, ...]) -> None:
    """The paper's rules and ``extra`` through the entry point, then seconds per rule (decision
    paths of all of them) and a per-rule split of the new rules and metrics."""
    rules = tuple(RULES) + extra
    depths = np.unique(h.depth[: h.n_leaves])
    tree = f"leaves at depth {depths[0]}" if depths.size == 1 else f"leaves at depths {depths.min()}–{depths.max()}"
    t0 = time.perf_counter()
    rc_curves_from_logits(h, logits, labels, rules=rules, chunk_size=chunk_size, progress=report)
    print(f"\nrc_curves_from_logits, {len(rules)} rules ({', '.join(rules)}) × 2 losses, exact curves + hAURC, "
          f"{tree}: {time.perf_counter() - t0:.1f} s (target ≤ 60 s)")
    n = labels.size
    t_paths = dict.fromkeys(rules, 0.0)
    t_shared = 0.0
    parts: dict[str, list] = {r: [] for r in extra}
    for start in range(0, n, chunk):
        t = time.perf_counter()
        probs = node_probabilities_rows(h, logits, np.arange(start, min(start + chunk, n)))
        leaf = argmax_leaf(h, probs)
        t_shared += time.perf_counter() - t
        for rule in rules:
            t = time.perf_counter()
            paths = any_decision_paths(h, probs, rule, leaf=leaf)
            t_paths[rule] += time.perf_counter() - t
            if rule in parts:
                parts[rule].append(paths)
    print(f"seconds per rule, decision paths for all {n:,} samples ({tree}; shared softmax + node probabilities "
          f"{t_shared:.1f} s): " + ", ".join(f"{rule_label(r)} {t_paths[r]:.2f}" for r in rules))
    print(f"{'rule':<22}{'paths (s)':>10}{'curves 2 losses (s)':>21}{'excess+achievable (s)':>23}"
          f"{'hP/hR/hF+histogram (s)':>24}{'records':>9}{'hAURC 0/1':>11}")
    for rule in extra:
        paths = concat_decision_paths(parts.pop(rule))
        t = time.perf_counter()
        c01 = rc_curve_from_paths(h, paths, labels, "01")
        rc_curve_from_paths(h, paths, labels, "severity")
        t_curve = time.perf_counter() - t
        t = time.perf_counter()
        oracle_haurc(oracle_moves(h, paths, labels, "01"))
        achievable_haurc(c01)
        t_metrics = time.perf_counter() - t
        t = time.perf_counter()
        nodes, _ = paths.predict(0.0)
        hierarchical_prf(h, labels, nodes, average="micro")
        hierarchical_prf(h, labels, nodes, average="macro")
        mistake_lca_depth_counts(h, nodes, labels)
        t_prf = time.perf_counter() - t
        print(f"{rule_label(rule):<22}{t_paths[rule]:>10.2f}{t_curve:>21.2f}{t_metrics:>23.2f}{t_prf:>24.2f}"
              f"{paths.nodes.shape[1]:>9}{c01.haurc:>11.5f}")
    t = time.perf_counter()
    leaf_probs = np.empty(n)
    leaf = np.empty(n, dtype=np.int64)
    for start in range(0, n, chunk):
        block = np.asarray(logits[start: start + chunk], dtype=np.float32)
        e = np.exp(block - block.max(axis=1, keepdims=True))
        leaf[start: start + chunk] = block.argmax(axis=1)
        leaf_probs[start: start + chunk] = 1.0 / e.sum(axis=1)
    err = (leaf != labels).astype(float)
    for estimator in ("plugin", "zhou", "trapezoid"):
        aurc(leaf_probs, err, estimator=estimator)
    augrc(leaf_probs, err)
    print(f"flat AURC (3 estimators) + AUGRC of the arg-max leaf: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
