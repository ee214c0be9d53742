"""``hsc atlas``: the model atlas of a per-model results table, as text and CSV (and a figure).

::

    hsc atlas models_comparison_full.csv [--out atlas.csv] [--figure atlas.html]
              [--rule climbing] [--loss 01|severity] [--ts|--no-ts] [--yours results.csv]

The table is the authors' ``results/models_comparison/models_comparison_full.csv`` (download it
from github.com/shanigoren/Hierarchical-Selective-Classification; it is not shipped) or ``hsc
evaluate``'s ``results.csv`` / ``results_models.csv``. Prints the paper's Table 1 and Table 7 (mean
± SEM over models), the training regimes' means for one rule, and the suspect rows; ``--out``
writes every model with its regimes and suspect flags (``to_csv``: formulas neutralised);
``--figure`` writes the accuracy-vs-hAURC figure as an offline HTML page. Bad input is one line on
stderr and exit code 2 (``hsc_core.cli``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.risk import LOSSES
from ..core.rule_registry import rule_label, rule_names
from ..datasets.atomic_files import write_text_atomic
from ..evaluation.atlas import load_atlas_table
from ..evaluation.results import to_csv
from ..report.atlas_cli import format_atlas, sample_note
from .args import add_ts

__all__ = ["configure_parser", "run"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="CSV",
                        help="the authors' models_comparison_full.csv, or hsc evaluate's results.csv / "
                             "results_models.csv")
    parser.add_argument("--yours", metavar="CSV", help="your own hsc evaluate results, placed on the same axes")
    parser.add_argument("--rule", default="climbing", metavar="{" + ",".join(rule_names(paper=True)) + "}",
                        help="the rule of the regime table and the figure (default climbing)")
    parser.add_argument("--loss", default="01", metavar="{" + ",".join(LOSSES) + "}", help="default 01")
    add_ts(parser, default=True)  # regimes and figure with or without temperature scaling
    parser.add_argument("--out", metavar="CSV", help="every model with its regimes and suspect flags")
    parser.add_argument("--figure", metavar="HTML", help="accuracy vs hAURC per regime, an offline HTML page")


def run(args: argparse.Namespace) -> int:
    if args.rule not in rule_names(paper=True):
        raise ValueError(f"--rule must be one of {', '.join(rule_names(paper=True))}, got {args.rule[:40]!r}")
    if args.loss not in LOSSES:
        raise ValueError(f"--loss must be one of {', '.join(LOSSES)}, got {args.loss[:40]!r}")
    for flag, value, suffix in (("--out", args.out, ".csv"), ("--figure", args.figure, ".html")):
        if value and Path(value).suffix.lower() != suffix:
            raise ValueError(f"{flag} must name a {suffix} file, got {value[:200]!r}")
    table = load_atlas_table(args.table)
    yours = load_atlas_table(args.yours) if args.yours else None
    ts = args.ts
    print(format_atlas(table, rule=args.rule, loss=args.loss, ts=ts))
    note = sample_note(yours) if yours is not None and (table["source"] == "authors").any() else ""
    if note:
        print("\n" + note)
    if args.out:
        rows = table.to_dict("records") + ([] if yours is None else yours.to_dict("records"))
        write_text_atomic(Path(args.out), to_csv(rows))
        print(f"\n{len(rows)} models → {args.out}")
    if args.figure:
        from ..report.atlas_figure import atlas_figure

        fig = atlas_figure(table, rule=args.rule, loss=args.loss, ts=ts, yours=yours,
                           title=f"{len(table)} models: top-1 vs {rule_label(args.rule)} hAURC "
                                 f"({'TS' if ts else 'no TS'})")
        write_text_atomic(Path(args.figure), fig.to_html(include_plotlyjs=True, full_html=True))
        print(f"figure → {args.figure}")
    return 0
