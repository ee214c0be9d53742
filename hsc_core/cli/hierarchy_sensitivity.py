"""``hsc hierarchy-sensitivity``: one ImageNet-1k model's hAURC and gain under each built-in class tree
(``datasets.imagenet_trees``), with 95 % bootstrap intervals.

Usage::

    hsc hierarchy-sensitivity cached_logits/efficientnet_lite0.npz [--trees wordnet,authors_is_a,induced_lite0,random]
        [--ts|--no-ts] [--random-seed 0] [--n-resamples 1000] [--bootstrap-seed S] [--out sensitivity.csv]

Prints one line per (tree, rule); ``--out`` writes the tidy rows (``evaluation.results`` schema).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.uncertainty import BOOTSTRAP_SEED
from ..core.validation import clip_path, quote
from ..datasets.imagenet import N_CLASSES
from ..datasets.imagenet_trees import TREES, imagenet_tree
from ..datasets.logits_io import load_logits
from ..evaluation.results import RESULT_COLUMNS, to_csv
from ..evaluation.sensitivity import hierarchy_sensitivity, sensitivity_table
from .args import add_bootstrap, add_ts

__all__ = ["configure_parser", "run"]


def configure_parser(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("logits", metavar="LOGITS", help="an ImageNet-1k cached-logits .npz (1000 classes)")
    ap.add_argument("--trees", default=",".join(TREES), metavar="A,B,…",
                    help=f"trees to compare (default all: {', '.join(TREES)})")
    add_ts(ap, default=False)
    ap.add_argument("--random-seed", type=int, default=0, help="seed of the random control tree (default 0)")
    add_bootstrap(ap, n_resamples=1000, seed=BOOTSTRAP_SEED)
    ap.add_argument("--out", metavar="CSV", help="write the tidy result rows here")


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    names = [t.strip() for t in args.trees.split(",") if t.strip()]
    unknown = [t for t in names if t not in TREES]
    if unknown or not names:
        return _error(f"unknown tree {quote(unknown[0] if unknown else args.trees)}; known: {', '.join(TREES)}")
    if args.n_resamples < 10:
        return _error(f"--n-resamples must be at least 10, got {args.n_resamples}")
    if args.random_seed < 0:
        return _error(f"--random-seed must be 0 or more, got {args.random_seed}")
    bundle = load_logits(args.logits, n_classes=N_CLASSES)  # LogitsFileError: the CLI's one line, exit 2
    trees = {t: imagenet_tree(t, seed=args.random_seed) for t in names}
    rows = hierarchy_sensitivity(bundle.logits, bundle.labels, trees, name=bundle.name, dataset="imagenet1k",
                                 ts=args.ts, n_resamples=args.n_resamples, seed=args.bootstrap_seed,
                                 sample_ids=bundle.sample_ids,
                                 sources=bundle.sources)
    print(f"{bundle.name}: {'with' if args.ts else 'without'} TS, {rows[0]['n_eval']} evaluation images, "
          f"95 % bootstrap intervals ({args.n_resamples} resamples)")
    print(f"{'tree':<15} {'rule':<13} {'hAURC×1000':>22} {'gain %':>24}")
    for d in sensitivity_table(rows):
        h = f"{d['haurc_x1000']:.2f} [{d['haurc_x1000_low']:.2f}, {d['haurc_x1000_high']:.2f}]"
        g = ("—" if d["gain_percent_low"] is None
             else f"{d['gain_percent']:.2f} [{d['gain_percent_low']:.2f}, {d['gain_percent_high']:.2f}]")
        print(f"{d['tree']:<15} {d['rule']:<13} {h:>22} {g:>24}")
    if args.out:
        Path(args.out).write_text(to_csv(rows, RESULT_COLUMNS))
        print(f"wrote {clip_path(args.out)}")
    return 0
