"""Benchmark of hsc_core at ImageNet scale on synthetic logits (never a user default).

    .venv/bin/python bench/core_bench.py [--n 50000] [--reps 1000]

Prints seconds per rule for the exact RC curve + hAURC (decision paths included), the authors'
dec=2 variant, the threshold algorithm at reps × 6 targets, and the peak resident memory.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.core.curves import hierarchical_rc_curve  # noqa: E402
from hsc_core.core.probabilities import node_probabilities, softmax  # noqa: E402
from hsc_core.core.rules import RULES, decision_paths  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.evaluation.guarantee_methods import GuaranteeData  # noqa: E402
from hsc_core.evaluation.repeated_splits import split_repetitions  # noqa: E402

TARGET_ALPHAS = [0.005, 0.01, 0.05, 0.1, 0.2, 0.3]


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args()

    h = imagenet_hierarchy()
    _ = h.leaf_paths, h.leaf_matrix, h.coverage  # build the cached tree tables outside the timings
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print(f"hierarchy: {h.n_leaves} leaves, {h.n_nodes} nodes, depth {h.max_depth}")
    (logits, labels), t = timed(lambda: synthetic_logits(h, args.n, top1=0.8, seed=0))
    print(f"synthetic logits {logits.shape}: {t:.2f} s, top-1 {(logits.argmax(1) == labels).mean():.3f}")
    probs, t = timed(lambda: node_probabilities(h, softmax(logits)))
    print(f"softmax + node probabilities {probs.shape} {probs.dtype}: {t:.2f} s")

    print(f"\n{'rule':<14}{'exact curve+hAURC (s)':>23}{'breakpoints':>13}{'hAURC':>10}"
          f"{'dec=2 (s)':>11}{'hAURC dec=2':>13}")
    for rule in RULES:
        def exact(rule=rule):
            c = hierarchical_rc_curve(h, probs, labels, rule)
            return c, c.haurc
        (curve, area), t_exact = timed(exact)
        (grid_area), t_dec = timed(lambda rule=rule: hierarchical_rc_curve(h, probs, labels, rule, dec=2).haurc)
        print(f"{rule:<14}{t_exact:>23.3f}{len(curve.events):>13d}{area:>10.5f}{t_dec:>11.3f}{grid_area:>13.5f}")
    paths = decision_paths(h, probs, "climbing")
    _, t = timed(lambda: hierarchical_rc_curve(h, probs, labels, "climbing", "severity", paths=paths).haurc)
    print(f"climbing severity curve (paths reused): {t:.3f} s")

    data, t = timed(lambda: GuaranteeData.from_arrays(h, probs, labels))
    print(f"\nper-sample guarantee quantities (GuaranteeData): {t:.2f} s")
    res, t = timed(lambda: split_repetitions(data, TARGET_ALPHAS, 5000, args.reps, baselines=()))
    print(f"threshold algorithm, {args.reps} reps × {len(TARGET_ALPHAS)} targets (n_cal=5000): {t:.2f} s")
    res, t = timed(lambda: split_repetitions(data, TARGET_ALPHAS, 5000, args.reps, baselines=("crc",)))
    print(f"  with the CRC baseline as well: {t:.2f} s")
    print(f"\npeak RSS: {peak_rss_gb():.2f} GB")


if __name__ == "__main__":
    main()
