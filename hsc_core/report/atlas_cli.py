"""``hsc atlas``: the model atlas of a per-model results table, as text and CSV (and a figure).

::

    hsc atlas models_comparison_full.csv [--out atlas.csv] [--figure atlas.html]
              [--rule climbing] [--loss 01|severity] [--no-ts] [--yours results.csv]

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
import math
from collections.abc import Sequence
from pathlib import Path

from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES
from ..datasets.logits_io import write_text_atomic
from ..evaluation.atlas import (
    AUTHORS_SAMPLES,
    load_atlas_table,
    paper_table1,
    regime_summary,
    rule_summary,
)
from ..evaluation.results import to_csv


def _pm(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.2f}" if not math.isfinite(sem) else f"{mean:.2f} ± {sem:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[k])) for r in (header, *rows)) for k in range(len(header))]
    return ["  " + "  ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w)
                             for k, (c, w) in enumerate(zip(r, widths, strict=True))) for r in (header, *rows)]


def format_atlas(table, *, rule: str = "climbing", loss: str = "01", ts: bool = True) -> str:
    """The atlas as text: Table 1, Table 7 (``loss``), the regimes for ``rule``, the suspect rows."""
    n = len(table)
    sizes = sorted({(int(a), int(b)) for a, b in zip(table["n_eval"], table["n_eval (TS)"], strict=True)
                    if math.isfinite(a) and math.isfinite(b)})
    samples = ", ".join(f"{a:,} / {b:,}" for a, b in sizes[:3]) + (" …" if len(sizes) > 3 else "")
    lines = [f"{n} models; evaluation samples without / with TS: {samples}", "",
             "Table 1 (as the paper prints it: Selective and MC without TS, Climbing with TS, gains vs Selective "
             "without TS)"]
    lines += _table(("rule", "hAURC×1000", "gain %"),
                    [(f"{RULE_LABELS[r['rule']]}{' (TS)' if r['ts'] else ''}",
                      _pm(r["haurc_x1000_mean"], r["haurc_x1000_sem"]),
                      _pm(r["gain_percent_mean"], r["gain_percent_sem"])) for r in paper_table1(table)])
    lines += ["", f"Every rule without / with TS ({'0/1' if loss == '01' else 'severity'} loss; the paper's Table "
              f"{7 if loss == '01' else 8})"]
    by = {(r["ts"], r["rule"]): r for r in rule_summary(table, loss=loss)}
    lines += _table(("rule", "hAURC×1000", "gain %", "hAURC×1000 (TS)", "gain % (TS)"),
                    [(RULE_LABELS[rule_], *(c for ts_ in (False, True) for c in (
                        _pm(by[(ts_, rule_)]["haurc_x1000_mean"], by[(ts_, rule_)]["haurc_x1000_sem"]),
                        _pm(by[(ts_, rule_)]["gain_percent_mean"], by[(ts_, rule_)]["gain_percent_sem"]))))
                     for rule_ in RULES])
    lines += ["", f"Training regimes, {RULE_LABELS[rule]} {'with' if ts else 'without'} TS (a model counts in "
              "each of its regimes)"]
    lines += _table(("regime", "models", "top-1 %", "hAURC×1000", "gain %"),
                    [(s["label"], str(s["n_models"]), _pm(s["top1_percent_mean"], s["top1_percent_sem"]),
                      _pm(s["haurc_x1000_mean"], s["haurc_x1000_sem"]),
                      _pm(s["gain_percent_mean"], s["gain_percent_sem"]))
                     for s in regime_summary(table, rule=rule, loss=loss, ts=ts)])
    suspect = table[table["suspect"] != ""]
    lines += ["", f"{len(suspect)} suspect row{'s' * (len(suspect) != 1)} (kept in every mean, as the paper did)"]
    lines += [f"  {m}: {s}" for m, s in zip(suspect["model"][:30], suspect["suspect"][:30], strict=True)]
    if len(suspect) > 30:
        lines.append(f"  … and {len(suspect) - 30} more (in --out)")
    return "\n".join(lines)


def sample_note(yours, authors_samples: dict[bool, int] = AUTHORS_SAMPLES) -> str:
    """The plain sentence on how the user's models' samples differ from the authors' (empty when same)."""
    if yours is None or yours.empty:
        return ""
    sizes = sorted({int(v) for v in yours["n_eval"] if math.isfinite(v)})
    if sizes == [authors_samples[False]]:
        return ""
    shown = ", ".join(f"{v:,}" for v in sizes[:3])
    return (f"Different samples: your models on {shown} images, the authors' on {authors_samples[False]:,} "
            f"({authors_samples[True]:,} with TS), so yours are noisier and not strictly comparable.")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="CSV",
                        help="the authors' models_comparison_full.csv, or hsc evaluate's results.csv / "
                             "results_models.csv")
    parser.add_argument("--yours", metavar="CSV", help="your own hsc evaluate results, placed on the same axes")
    parser.add_argument("--rule", default="climbing", metavar="{" + ",".join(RULES) + "}",
                        help="the rule of the regime table and the figure (default climbing)")
    parser.add_argument("--loss", default="01", metavar="{" + ",".join(LOSSES) + "}", help="default 01")
    parser.add_argument("--no-ts", action="store_true", help="regimes and figure without temperature scaling")
    parser.add_argument("--out", metavar="CSV", help="every model with its regimes and suspect flags")
    parser.add_argument("--figure", metavar="HTML", help="accuracy vs hAURC per regime, an offline HTML page")


def run(args: argparse.Namespace) -> int:
    if args.rule not in RULES:
        raise ValueError(f"--rule must be one of {', '.join(RULES)}, got {args.rule[:40]!r}")
    if args.loss not in LOSSES:
        raise ValueError(f"--loss must be one of {', '.join(LOSSES)}, got {args.loss[:40]!r}")
    for flag, value, suffix in (("--out", args.out, ".csv"), ("--figure", args.figure, ".html")):
        if value and Path(value).suffix.lower() != suffix:
            raise ValueError(f"{flag} must name a {suffix} file, got {value[:200]!r}")
    table = load_atlas_table(args.table)
    yours = load_atlas_table(args.yours) if args.yours else None
    ts = not args.no_ts
    print(format_atlas(table, rule=args.rule, loss=args.loss, ts=ts))
    note = sample_note(yours) if yours is not None and (table["source"] == "authors").any() else ""
    if note:
        print("\n" + note)
    if args.out:
        rows = table.to_dict("records") + ([] if yours is None else yours.to_dict("records"))
        write_text_atomic(Path(args.out), to_csv(rows))
        print(f"\n{len(rows)} models → {args.out}")
    if args.figure:
        from .atlas_figure import atlas_figure

        fig = atlas_figure(table, rule=args.rule, loss=args.loss, ts=ts, yours=yours,
                           title=f"{len(table)} models: top-1 vs {RULE_LABELS[args.rule]} hAURC "
                                 f"({'TS' if ts else 'no TS'})")
        write_text_atomic(Path(args.figure), fig.to_html(include_plotlyjs=True, full_html=True))
        print(f"figure → {args.figure}")
    return 0
