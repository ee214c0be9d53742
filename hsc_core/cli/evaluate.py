"""``hsc evaluate``: hAURC and hierarchical gain of every rule (and, on request, the extra
metrics) for one or many cached-logits files.

::

    hsc evaluate cached_logits/ [more.npz 'runs/*.npz' ...] [--hierarchy FILE [--classes FILE]]
                 [--protocol project|paper] [--dec N] [--subset NAME] [--rules LIST] [--metrics LIST]
                 [--calibrator LIST] [--confidence LIST]
                 [--out results.csv] [--workers K | --ray local|auto|ADDRESS]

A thin front end of the evaluation layer: each model is one ``ModelEvaluation`` under the
protocol of ``core.protocol`` (``project``, the default: T fitted on a seeded, class-stratified
calibration split (``--seed``) and every number, with or without temperature scaling, on the
other samples; ``paper``: the authors' — numbers without TS on all samples, with TS on the
held-out split), run by ``pipeline.many_models`` and cached by ``evaluation.result_cache``.
Outputs, beside ``--out``:

* ``results.csv`` — the layer's tidy rows (``RESULT_COLUMNS`` + ``file``), one number per row:
  top-1, T, hAURC and gain of every rule of ``--rules`` (default: every rule, ``rule_registry.rule_names()``) × loss ×
  TS setting — or, with ``--calibrator``/``--confidence``, × every (calibrator, confidence) pair
  (rows carry ``calibrator`` and ``confidence``; default none,temperature × softmax) — then
  the extra metrics of ``--metrics`` (default: none; ``all`` for every one:
  excess_haurc, achievable_haurc, aurc, augrc, hf1 — ``EvaluationSet.extra_results``);
* ``results_models.csv`` — one row per model (``wide_table``);
* ``results_summary.csv`` and the printed table — the paper's Table 1 (``summary_rows``; the
  printed table shows the paper's four rules);
* with ``--rc-table PATH`` (``.csv``, or ``.parquet`` with pyarrow): every exact operating point
  of the ``--rules`` per loss and TS setting (``evaluation.rc_table.RC_TABLE_COLUMNS``); with
  ``--coverage-points`` / ``--risk-points``, risk@coverage and coverage@risk rows
  (``POINT_COLUMNS``) in ``<PATH stem>_points<suffix>``;
* ``results.csv.d/`` — the resumable, checksummed cache (one entry per finished model).

Every CSV is written by ``evaluation.results.to_csv`` (a name that a spreadsheet would run as a
formula is neutralised).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..core.protocol import CALIBRATION_FRACTION, PROTOCOLS, SPLIT_SEED, check_protocol
from ..core.validation import quote
from ..datasets.atomic_files import write_bytes_atomic, write_text_atomic
from ..evaluation.rc_table import POINT_COLUMNS, RC_TABLE_COLUMNS, check_table_path, table_bytes
from ..evaluation.resolve import expand_inputs, load_user_hierarchy
from ..evaluation.result_cache import ROW_COLUMNS, cache_dir_for, cache_file
from ..evaluation.results import SUMMARY_COLUMNS, summary_rows, to_csv, wide_table
from ..evaluation.summary_text import format_summary
from ..pipeline.distributed import LOCAL_RAY
from ..pipeline.many_models import EXTRA_METRICS, MAX_DEC, check_dec, check_metrics, evaluate_all
from .args import (
    MAX_WORKERS,
    add_hierarchy,
    add_rules,
    add_scores,
    add_seed,
    add_subset,
    parse_calibrators,
    parse_confidences,
    parse_list,
    parse_rules,
)

__all__ = ["configure_parser", "model_table", "output_paths", "parse_points", "rc_options", "run", "write_outputs",
           "write_rc_tables"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="LOGITS",
                        help=".npz logits files, folders (every .npz inside) or quoted glob patterns")
    add_hierarchy(parser)
    # Checked in run(), not by argparse choices, so a bad value is one line like every other error.
    parser.add_argument("--protocol", default="project", metavar="{" + ",".join(PROTOCOLS) + "}",
                        help="project (default): every number on the evaluation split; paper: the authors' "
                             "protocol, numbers without TS on all samples, with TS on the held-out split")
    parser.add_argument("--dec", type=int, metavar="N",
                        help=f"θ on the authors' grid of node probabilities rounded to N decimals (0–{MAX_DEC}; "
                             "they used 2); default: exact curves")
    parser.add_argument("--out", default="results.csv", metavar="CSV",
                        help="tidy result rows (default results.csv); <stem>_models.csv, <stem>_summary.csv and "
                             "the resumable cache <out>.d/ go beside it")
    parser.add_argument("--cal-fraction", type=float, default=CALIBRATION_FRACTION, metavar="F",
                        help=f"calibration split that fits T (default {CALIBRATION_FRACTION})")
    add_seed(parser, SPLIT_SEED, "that split")
    add_subset(parser)
    parser.add_argument("--workers", type=int, metavar="K",
                        help="parallel local processes (default min(#models, #CPUs)); with --ray, the CPUs of a "
                             "local Ray (default every CPU)")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help=f"run models as Ray tasks, each model's rows split across the cluster's CPUs (the same "
                             f"numbers): '{LOCAL_RAY}' (a private Ray on this machine), 'auto' (the running cluster) "
                             "or a cluster address; logits paths must be readable on every node")
    parser.add_argument("--recompute", action="store_true", help="ignore finished results in <out>.d/")
    parser.add_argument("--rc-table", metavar="PATH",
                        help="also write every exact operating point (model, dataset, hierarchy_hash, subset, ts, "
                             "rule, loss, theta, coverage, risk, n_accepted, n) to PATH: .csv, or .parquet with "
                             "pyarrow")
    add_rules(parser, " of the result rows and --rc-table")
    add_scores(parser, "none,temperature", "softmax")
    parser.add_argument("--metrics", metavar="LIST",
                        help="comma-separated extra metrics in the result rows: " + ",".join(EXTRA_METRICS)
                             + " or all (default: none)")
    parser.add_argument("--coverage-points", metavar="LIST",
                        help="comma-separated coverages in [0, 1]: risk@coverage rows in <rc-table stem>_points")
    parser.add_argument("--risk-points", metavar="LIST",
                        help="comma-separated risks in [0, 1]: coverage@risk rows in <rc-table stem>_points")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    check_dec(args.dec)
    check_protocol(args.protocol)
    if not 0.0 < args.cal_fraction < 1.0:
        raise ValueError(f"--cal-fraction must lie in (0, 1), got {args.cal_fraction}")
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be from 1 to {MAX_WORKERS}, got {args.workers}")
    if args.classes and not args.hierarchy:
        raise ValueError("--classes orders the leaves of --hierarchy FILE; pass --hierarchy too")
    paths = expand_inputs(args.inputs)
    hierarchy = (load_user_hierarchy(args.hierarchy, args.classes, args.first_parent, args.header)
                 if args.hierarchy else None)
    out = output_paths(Path(args.out))
    if out["rows"].suffix.lower() != ".csv":
        raise ValueError(f"--out must name a .csv file, got {args.out}")
    rules = parse_rules(args.rules)
    metrics = parse_metrics(args.metrics)
    calibrators, confidences = parse_calibrators(args.calibrator), parse_confidences(args.confidence)
    rc = rc_options(args, rules)  # checked before any work, as every other option

    # Whether this run had saved results for its files: then it says how many it reused and recomputed.
    had_entries = not args.recompute and any(cache_file(out["cache"], p).exists() for p in paths)
    done = evaluate_all(
        paths, hierarchy, dec=args.dec, protocol=args.protocol, cal_fraction=args.cal_fraction, seed=args.seed,
        workers=args.workers, ray_address=args.ray, cache_dir=out["cache"], resume=not args.recompute,
        progress=not args.no_progress, rc=rc, rules=rules, metrics=metrics, subset=args.subset,
        calibrators=calibrators, confidences=confidences,
    )
    rows, errors, n_cached = done.rows, done.errors, done.n_cached
    if rows:
        summary = summary_rows(rows)
        write_outputs(out, rows, summary)
        print(format_summary(summary, protocol=args.protocol, cal_fraction=args.cal_fraction, seed=args.seed))
        n_models = len(paths) - len(errors)
        counts = f", {n_cached} reused, {n_models - n_cached} recomputed" if had_entries else ""
        print(f"\n{n_models} model{'s' * (n_models != 1)}{counts} → {out['rows']} ({len(rows)} rows), "
              f"{out['models'].name}, {out['summary'].name}")
        if rc is not None:
            print(write_rc_tables(done.rc_table, done.rc_points, rc["path"]))
    if errors:
        file, message = next(iter(errors.items()))
        if file not in message:
            message = f"{file}: {message}"
        n_ok = len(paths) - len(errors)
        kept = f"; the other {n_ok} model{' is' if n_ok == 1 else 's are'} in {out['rows']}" if rows else ""
        head = f"{len(errors)} of {len(paths)} models failed, first: " if len(errors) > 1 else ""
        raise ValueError(f"{head}{message}{kept}")
    return 0


def parse_points(text: str | None, option: str) -> tuple[float, ...]:
    """Comma-separated numbers in [0, 1] (``--coverage-points 0.5,0.9``); one clear ValueError."""
    if text is None:
        return ()
    points = []
    for part in str(text).split(","):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"{option}: {quote(part.strip())} is not a number") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{option}: point {quote(value)} is outside [0, 1]")
        points.append(value)
    return tuple(points)


def parse_metrics(text: str | None) -> tuple[str, ...]:
    """``--metrics``: the row names of the extra metrics named (``all``: every one; default none);
    an unknown one is one ValueError naming the choices."""
    names = parse_list(text, "--metrics")
    if names is None:
        return ()
    if "all" in names:
        names = tuple(EXTRA_METRICS)
    try:
        return check_metrics(names)
    except ValueError as exc:
        raise ValueError(f"--metrics: {exc} or all") from None


def rc_options(args: argparse.Namespace, rules: Sequence[str]) -> dict | None:
    """The checked --rc-table options (None without --rc-table); the tables are of ``rules``
    (``--rules``). Bad input is one ValueError."""
    points_given = args.coverage_points is not None or args.risk_points is not None
    if args.rc_table is None:
        if points_given:
            raise ValueError("--coverage-points and --risk-points need --rc-table PATH")
        return None
    path = check_table_path(args.rc_table)
    return {"path": path, "rules": tuple(rules), "coverages": parse_points(args.coverage_points, "--coverage-points"),
            "risks": parse_points(args.risk_points, "--risk-points")}


def write_rc_tables(table: Sequence[dict], points: Sequence[dict], path: Path) -> str:
    """Write the RC table (and the operating points, when there are any) that ``evaluate_all``
    gathered from the workers; returns the line to print."""
    write_bytes_atomic(path, table_bytes(table, RC_TABLE_COLUMNS, path.suffix))
    line = f"RC table → {path} ({len(table)} rows)"
    if points:
        where = path.with_name(f"{path.stem}_points{path.suffix}")
        write_bytes_atomic(where, table_bytes(points, POINT_COLUMNS, path.suffix))
        line += f", operating points → {where} ({len(points)} rows)"
    return line


def model_table(rows: Sequence[dict]) -> list[dict]:
    """results_models.csv: ``wide_table`` over every loss and setting (one row per model), with
    each model's data set and file beside its name."""
    where = {r["model"]: (r["dataset"], r["file"]) for r in rows}
    out = []
    for m in wide_table(rows, loss=None):
        dataset, file = where[m["model"]]
        out.append({"model": m["model"], "dataset": dataset, **m, "file": file})
    return out


def output_paths(out: Path) -> dict[str, Path]:
    """results.csv → its per-model and summary CSVs and the per-model result cache."""
    return {"rows": out, "models": out.with_name(f"{out.stem}_models.csv"),
            "summary": out.with_name(f"{out.stem}_summary.csv"), "cache": cache_dir_for(out)}


def write_outputs(out: dict[str, Path], rows: Sequence[dict], summary: Sequence[dict]) -> None:
    """The three CSVs, each written atomically through ``to_csv`` (formula-neutralised names)."""
    write_text_atomic(out["rows"], to_csv(rows, ROW_COLUMNS))
    write_text_atomic(out["models"], to_csv(model_table(rows)))
    write_text_atomic(out["summary"], to_csv(summary, SUMMARY_COLUMNS))
