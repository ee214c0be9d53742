"""Benchmark: how far the >1,024-class calibrator forms land from the full fits (issue 41).

    .venv/bin/python bench/large_fit_gap.py [--leaves 1100] [--samples 20000] [--seed 0]

Just above ``large_fits.LARGE_CLASS_COUNT`` a full fit still runs, so both forms can be compared on
one seeded synthetic problem (``synthetic_taxonomy`` + ``synthetic_logits``, the protocol's 10 %
calibration split): each calibrator is fitted in its large form (float32 vector scaling capped at 50
iterations; matrix and Dirichlet as diag(d) + U Vᵀ of rank 8, 30 iterations) and in its full form
(``is_large`` patched off), and the hAURC ×10⁻³ of Climbing (softmax) on the evaluation split is
printed beside temperature scaling's. Numbers, not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=1100)
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from hsc_core.core import calibrators
    from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
    from hsc_core.evaluation.model import ModelEvaluation

    tree = synthetic_taxonomy(args.leaves, depth=5, seed=args.seed)
    logits, labels = synthetic_logits(tree, args.samples, top1=0.75, seed=args.seed)
    print(f"{tree.n_leaves:,} classes, {args.samples:,} samples (10 % calibrate), seed {args.seed}")
    for form in ("large", "full"):
        if form == "full":
            calibrators.is_large = lambda n_classes: False  # the full C × C / float64 fits
        ev = ModelEvaluation(tree, logits, labels, name="synthetic")
        for cal in ("temperature", "vector", "matrix", "dirichlet"):
            if form == "full" and cal == "temperature":
                continue
            t0 = time.perf_counter()
            haurc = ev.scored(cal, "softmax").haurc("climbing")
            print(f"{form:5s} {cal:12s} hAURC ×10⁻³ {1000 * haurc:7.2f}   ({time.perf_counter() - t0:5.1f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
