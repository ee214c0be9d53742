"""``hsc ranks``: one θ per rank with a guarantee, from a per-rank scores table.

::

    hsc ranks SCORES --target-accuracy A --delta D [--quantity {hierarchical,answers}] [--out card.md]
              [--percent] [--hierarchy FILE] [--reps R] [--seed S]

SCORES is a CSV (or Parquet) table with ``sample_id`` and, per rank from the coarsest to the
finest, ``true_<rank>``, ``pred_<rank>`` and ``conf_<rank>`` (``hsc_core.datasets.per_rank``).
Writes the decision card (Markdown, and its JSON twin with ``"thetas": {rank: θ}``) of
``hsc_core.evaluation.per_rank.rank_card``. Bad input: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..datasets.per_rank import read_per_rank
from ..evaluation.guarantee_methods import QUANTITY_WORDS
from ..evaluation.per_rank import (
    N_REPS,
    SEED,
    guarantee_text,
    rank_breakdown,
    rank_card,
    rank_card_json,
    rank_card_markdown,
)
from .args import MAX_REPS, add_seed, count
from .guarantees import _check_out, _level


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scores", metavar="SCORES", help="per-rank scores table (.csv, or .parquet with pyarrow)")
    parser.add_argument("--target-accuracy", type=_level("--target-accuracy"), required=True, metavar="A",
                        help="accuracy to guarantee, e.g. 0.95 (which accuracy: --quantity)")
    parser.add_argument("--delta", type=_level("--delta"), required=True, metavar="D",
                        help="the guarantee may fail with probability at most D over the calibration set")
    parser.add_argument("--quantity", choices=list(QUANTITY_WORDS), default="hierarchical",
                        help="which accuracy is guaranteed: 'hierarchical' (default), every sample counts and an "
                             "abstention counts as correct; 'answers', the share of the answers given that are "
                             "correct, abstentions left out")
    parser.add_argument("--out", default="rank_card.md", metavar="MD",
                        help="the Markdown card (default rank_card.md); its JSON twin goes next to it")
    parser.add_argument("--percent", action="store_true",
                        help="confidences are percentages 0–100 (e.g. bootstrap support), not [0, 1]")
    parser.add_argument("--hierarchy", metavar="FILE",
                        help="class tree whose node ids are the labels (default: read from the labels, "
                             "each label's parent being the label one rank up)")
    parser.add_argument("--reps", type=count("--reps", 1, MAX_REPS), default=N_REPS, metavar="R",
                        help=f"random calibration/test splits of the comparison (default {N_REPS:,}, at most "
                             f"{MAX_REPS:,})")
    add_seed(parser, SEED, "the calibration/test splits")


def run(args: argparse.Namespace) -> int:
    _check_out(args.out)
    scores = read_per_rank(args.scores, percent=args.percent, hierarchy=args.hierarchy)
    card = rank_card(scores, args.target_accuracy, args.delta, source=Path(args.scores).name, reps=args.reps,
                     seed=args.seed, quantity=args.quantity)
    out = Path(args.out)
    out.write_text(rank_card_markdown(card), encoding="utf-8")
    out.with_suffix(".json").write_text(rank_card_json(card), encoding="utf-8")
    thetas = ", ".join(f"{r} {'never' if t is None else f'{t:.4f}'}" for r, t in card["thetas"].items())
    print(f"{card['source']}: θ per rank {thetas}; coverage {card['realised_coverage']:.4f}"
          + ("" if card["certified"] else " — NOT certified: every sample abstains"))
    print(f"  on these rows: {rank_breakdown(card)}")
    if card["certified"]:
        promise = guarantee_text(args.quantity, args.target_accuracy)
        print(f"  guaranteed with {1 - args.delta:.0%} confidence: {promise}")
    print(f"wrote {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0


__all__ = ["configure_parser", "run"]
