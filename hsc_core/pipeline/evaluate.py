"""``hsc evaluate``: hAURC and hierarchical gain of every rule for one or many cached-logits files.

::

    hsc evaluate cached_logits/ [more.npz 'runs/*.npz' ...] [--hierarchy FILE [--classes FILE]]
                 [--protocol project|paper] [--dec N] [--out results.csv]
                 [--workers K | --ray local|auto|ADDRESS]

A thin front end of the evaluation layer (``hsc_core.evaluation``): each model is one
``ModelEvaluation`` under the protocol of ``core.protocol`` (``project``, the default: T fitted on
a seeded, class-stratified calibration split and every number, with or without temperature
scaling, on the other samples; ``paper``: the authors' — numbers without TS on all samples, with
TS on the held-out split). This module runs many models, caches each one and writes what the
layer returns. Outputs, beside ``--out``:

* ``results.csv`` — the layer's tidy rows (``RESULT_COLUMNS`` + ``file``), one number per row:
  top-1, T, and hAURC and gain of every rule × loss × TS setting;
* ``results_models.csv`` — one row per model (``wide_table``; columns named by ``column_label``,
  e.g. ``hAURC×1000 Climbing (TS)``);
* ``results_summary.csv`` and the printed table — the paper's Table 1 (``summary_rows``): mean ±
  SEM over models;
* ``results.csv.d/`` — one small JSON per finished model, keyed by the file's content and the
  settings, so a rerun skips finished models and an interrupted run loses at most the models
  in flight.

Every CSV is written by ``evaluation.results.to_csv`` (a name that a spreadsheet would run as a
formula is neutralised). Models run in parallel local processes (``--workers``) or as Ray tasks
(``--ray``); both call ``evaluate_model`` and give identical numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core.hierarchy import Hierarchy
from ..core.protocol import CALIBRATION_FRACTION, PROTOCOLS, SPLIT_SEED, check_protocol, protocol_text
from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES
from ..datasets.logits_io import LogitsBundle, load_logits, manifest_path, write_json_atomic, write_text_atomic
from ..datasets.registry import dataset_for_manifest, load_dataset
from ..evaluation.model import ModelEvaluation
from ..evaluation.resolve import builtin_hierarchy, expand_inputs, load_user_hierarchy, resolve_hierarchy
from ..evaluation.results import RESULT_COLUMNS, SUMMARY_COLUMNS, hierarchy_hash, summary_rows, to_csv, wide_table
from .distributed import LOCAL_RAY, default_workers, map_jobs

# builtin_hierarchy, expand_inputs and load_user_hierarchy are re-exported for ``hsc report``
# (report/html_report.py imports them from here) until it imports them from the layer.
__all__ = [
    "CACHE_FORMAT", "ROW_COLUMNS", "builtin_hierarchy", "evaluate_many", "evaluate_model", "expand_inputs",
    "format_summary", "load_user_hierarchy", "model_table", "run",
]

# Bump when the numbers or the schema a cached result holds would change, so old caches are recomputed.
CACHE_FORMAT = "hsc-evaluate/2"
MAX_DEC = 6
#: Columns of results.csv (and of every cached row): the layer's tidy schema and the logits file.
ROW_COLUMNS: tuple[str, ...] = (*RESULT_COLUMNS, "file")

Progress = Callable[[int, int], None]


# ---------------------------------------------------------------------------- one model
def evaluate_model(
    bundle_or_path: LogitsBundle | str | os.PathLike,
    hierarchy: Hierarchy,
    *,
    dec: int | None = None,
    protocol: str = "project",
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    dataset: str = "",
    progress: Progress | None = None,
) -> list[dict]:
    """Tidy result rows of one model: every rule × loss, without and with temperature scaling.

    Parameters
    ----------
    bundle_or_path : the model's logits, loaded or the path of its ``.npz``.
    hierarchy : its class tree; the logits' columns are the leaves, in order.
    dec : None for exact curves, else θ on the authors' grid rounded to ``dec`` decimals.
    protocol, cal_fraction, seed : the evaluation protocol (``core.protocol``).
    dataset : the rows' ``dataset``.
    progress : ``progress(done, total)``, counting the samples of both settings (without TS first).

    Returns
    -------
    list of dict
        ``ModelEvaluation.results`` for every loss (keys ``ROW_COLUMNS``); ``file`` is the path
        given ("" for a bundle).
    """
    check_dec(dec)
    if isinstance(bundle_or_path, LogitsBundle):
        bundle, file = bundle_or_path, ""
    else:
        bundle, file = load_logits(bundle_or_path), str(bundle_or_path)
    ev = ModelEvaluation.from_bundle(bundle, hierarchy, dataset=dataset, protocol=protocol,
                                     cal_fraction=cal_fraction, seed=seed, file=file)
    if progress is not None:
        _build_settings(ev, progress)
    return [{**row, "file": file} for row in ev.results(losses=LOSSES, dec=dec)]


def _build_settings(ev: ModelEvaluation, progress: Progress) -> None:
    """Build both settings (the long part) with one sample count over both; under the paper
    protocol the two differ in size (no TS: every sample), so the offsets are their real sizes."""
    sizes = [int(ev.rows_for(ts).size) for ts in (False, True)]
    for ts, offset in ((False, 0), (True, sizes[0])):
        ev.setting(ts, progress=lambda done, _n, o=offset: progress(o + done, sum(sizes)))


def check_dec(dec: int | None) -> None:
    if dec is not None and not 0 <= dec <= MAX_DEC:
        raise ValueError(f"--dec must be between 0 and {MAX_DEC} (the authors used 2), got {dec}")


# ---------------------------------------------------------------------------- the result cache
def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    manifest = manifest_path(path)
    # The manifest can change the data set (and so the tree) without touching the arrays.
    digest.update(manifest.read_bytes() if manifest.is_file() else b"")
    return digest.hexdigest()


def _builtin_tree_tag(path: Path, seen: dict[str, str]) -> str:
    """Hash of the tree a file without ``--hierarchy`` will use, judged from its manifest
    ("unknown" when the manifest cannot tell), so an edited data set tree invalidates results."""
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        name = dataset_for_manifest(manifest, int(manifest.get("n_classes", 0)))
        if name is None:
            return "unknown"
        if name not in seen:
            seen[name] = f"{name}:{hierarchy_hash(load_dataset(name).hierarchy)}"
        return seen[name]
    except (OSError, ValueError, TypeError, AttributeError):
        return "unknown"  # the worker reports what is wrong with the file


def result_key(path: Path, settings: dict) -> str:
    """What a cached result must match: the file's bytes (and its manifest's) and the settings."""
    text = json.dumps({"format": CACHE_FORMAT, **settings}, sort_keys=True)
    return hashlib.sha256((text + _file_digest(path)).encode()).hexdigest()


def cache_dir_for(out: Path) -> Path:
    return out.with_name(out.name + ".d")


def cache_file(cache_dir: Path, path: Path) -> Path:
    # Stem for the reader, a hash of the full path so two folders' "model.npz" do not collide.
    tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return cache_dir / f"{path.stem}-{tag}.json"


def rows_problem(rows: object) -> str:
    """Why ``rows`` are not one model's cached result rows; "" when they are.

    Valid: a non-empty list of dicts, each with exactly the keys ``ROW_COLUMNS`` and a numeric ``value``.
    """
    if not isinstance(rows, list) or not rows:
        return "its rows are not a non-empty list"
    expected = set(ROW_COLUMNS)
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != expected:
            return f"row {k} is not a dict with the {len(expected)} result columns"
        # The one field every table computes with: a text here would fail only later, in the summary.
        if isinstance(row["value"], bool) or not isinstance(row["value"], (int, float)):
            return f"row {k} has a value that is not a number"
    return ""


def read_cached(file: Path, key: str) -> tuple[list[dict] | None, str]:
    """A cache entry's rows for ``key``: ``(rows, "")``; ``(None, "")`` when there is none or it is
    for another file version or other settings; ``(None, why)`` when it is damaged. Either way a
    missing result is computed again, never dropped."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if data.get("key") != key:
        return None, ""  # stale: another version of the file or other settings
    problem = rows_problem(data.get("rows"))
    return (None, problem) if problem else (data["rows"], "")


# ---------------------------------------------------------------------------- many models
def _evaluate_job(path: str, hierarchy: Hierarchy | None, dec: int | None, protocol: str, cal_fraction: float,
                  seed: int, sample_bar: bool = False) -> dict:
    """One model, in a worker process or Ray task: {"rows": [...]} or {"error": one line}.

    Errors come back as values, so one bad file never stops the others. ``sample_bar``: a progress
    bar over this model's samples (only when it runs in the main process, so bars never interleave).
    """
    bar = _SampleBar(Path(path).stem) if sample_bar else None
    try:
        bundle = load_logits(path)
        dataset, tree = resolve_hierarchy(bundle, path, hierarchy)
        return {"rows": evaluate_model(bundle, tree, dec=dec, protocol=protocol, cal_fraction=cal_fraction,
                                       seed=seed, dataset=dataset, progress=bar)}
    except (ValueError, OSError) as exc:
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    finally:
        if bar is not None:
            bar.close()


class _SampleBar:
    """``progress(done, total)`` callback drawing a tqdm bar on stderr, created on first use."""

    def __init__(self, name: str) -> None:
        self.name, self.bar = name, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            # disable=None: no bar when stderr is not a terminal (logs, CI); leave=False: the model
            # bar stays, the sample bar goes when the model is done.
            self.bar = tqdm(total=total, desc=self.name, unit="sample", unit_scale=True, leave=False,
                            file=sys.stderr, disable=None)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def model_names(paths: Sequence[Path]) -> list[str]:
    """Each file's model name: its stem, or its path without ``.npz`` where files share a stem
    (tables are keyed by model name, so two folders' ``model.npz`` must not merge into one row)."""
    counts = Counter(p.stem for p in paths)
    return [p.stem if counts[p.stem] == 1 else str(p.with_suffix("")) for p in paths]


def evaluate_many(
    paths: Sequence[str | os.PathLike],
    hierarchy: Hierarchy | None = None,
    *,
    dec: int | None = None,
    protocol: str = "project",
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    workers: int | None = None,
    ray_address: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    resume: bool = True,
    progress: bool = False,
) -> tuple[list[dict], dict[str, str], int]:
    """Evaluate many files; returns (rows of the models that finished, {file: error}, #cached).

    ``hierarchy=None`` picks each file's built-in tree. With ``cache_dir``, each finished model is
    saved there at once and, with ``resume``, a model whose file and settings match a saved
    result is not computed again (a damaged entry is noted on stderr and computed again). Rows
    come in the order of ``paths``, each named by ``model_names`` and carrying its ``file``.
    """
    check_dec(dec)
    check_protocol(protocol)
    paths = [Path(p) for p in paths]
    settings = {"dec": dec, "protocol": protocol, "cal_fraction": cal_fraction, "seed": seed,
                "hierarchy": hierarchy_hash(hierarchy) or "builtin"}
    cache = Path(cache_dir) if cache_dir is not None else None
    results: dict[int, list[dict]] = {}
    keys: dict[int, str] = {}
    trees: dict[str, str] = {}
    for i, p in enumerate(paths):
        if cache is not None:
            tree_tag = {"tree": _builtin_tree_tag(p, trees)} if hierarchy is None else {}
            try:
                keys[i] = result_key(p, {**settings, **tree_tag})
            except OSError:
                continue  # unreadable: the worker reports why, and nothing is cached
            if resume:
                rows, problem = read_cached(cache_file(cache, p), keys[i])
                if problem:
                    print(f"note: {cache_file(cache, p)}: {problem}; evaluating {p} again", file=sys.stderr)
                if rows is not None:
                    results[i] = rows
    n_cached = len(results)
    todo = [i for i in range(len(paths)) if i not in results]
    n_workers = default_workers(len(todo)) if workers is None else workers
    in_process = ray_address is None and (n_workers <= 1 or len(todo) <= 1)
    jobs = [(str(paths[i]), hierarchy, dec, protocol, cal_fraction, seed, progress and in_process) for i in todo]
    errors: dict[str, str] = {}
    bar = _progress_bar(len(paths), n_cached, progress, "ray" if ray_address else "local")
    try:
        for j, out in map_jobs(_evaluate_job, jobs, workers=workers, ray_address=ray_address,
                               on_ray_task_error=lambda message: {"error": message}):
            i = todo[j]
            if "error" in out:
                errors[str(paths[i])] = out["error"]
            else:
                results[i] = out["rows"]
                if i in keys:
                    write_json_atomic(cache_file(cache, paths[i]), {
                        "format": CACHE_FORMAT, "key": keys[i], "file": str(paths[i]), "settings": settings,
                        "rows": out["rows"],
                    })
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    names = model_names(paths)
    # The same file may be named differently from run to run; name it as given now.
    return ([{**row, "model": names[i], "file": str(paths[i])} for i in sorted(results) for row in results[i]],
            errors, n_cached)


def _progress_bar(total: int, done: int, enabled: bool, where: str):
    if not enabled or total - done < 2:  # one model: its sample bar is enough
        return None
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (logs, CI).
    return tqdm(total=total, initial=done, desc=f"evaluate ({where})", unit="model", file=sys.stderr, disable=None)


# ---------------------------------------------------------------------------- tables
def model_table(rows: Sequence[dict]) -> list[dict]:
    """results_models.csv: ``wide_table`` over every loss and setting (one row per model), with
    each model's data set and file beside its name."""
    where = {r["model"]: (r["dataset"], r["file"]) for r in rows}
    out = []
    for m in wide_table(rows, loss=None):
        dataset, file = where[m["model"]]
        out.append({"model": m["model"], "dataset": dataset, **m, "file": file})
    return out


def _percent(fraction: float) -> str:
    return f"{round(100 * fraction, 2):g} %"


def protocol_sentence(protocol: str, *, cal_fraction: float = CALIBRATION_FRACTION, seed: int = SPLIT_SEED) -> str:
    """``protocol_text(protocol)`` for this run: its split sizes (the text states the default
    10 % / 90 %) and its seed."""
    text = protocol_text(protocol)
    for default, mine in ((CALIBRATION_FRACTION, cal_fraction), (1 - CALIBRATION_FRACTION, 1 - cal_fraction)):
        text = text.replace(_percent(default), _percent(mine))
    return f"{text} Split seed: {seed}."


def _pm(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.2f}" if not math.isfinite(sem) else f"{mean:.2f} ± {sem:.2f}"


def format_summary(summary: Sequence[dict], *, protocol: str = "project", cal_fraction: float = CALIBRATION_FRACTION,
                   seed: int = SPLIT_SEED) -> str:
    """The paper's Table 1 as text, from ``summary_rows``: per data set and loss, a row per rule
    with hAURC×1000 and gain (mean ± SEM over models), without and with temperature scaling, then
    the protocol sentence."""
    lines: list[str] = []
    index = {(s["dataset"], s["loss"], s["ts"], s["rule"]): s for s in summary}
    for ds in dict.fromkeys(s["dataset"] for s in summary):
        for loss in LOSSES:
            rules = [r for r in RULES if (ds, loss, False, r) in index and (ds, loss, True, r) in index]
            if not rules:
                continue
            n = index[(ds, loss, False, rules[0])]["n_models"]
            loss_name = "0/1 loss" if loss == "01" else "severity loss"
            lines.append(f"{ds or 'models'} — {loss_name}, mean ± SEM over {n} model{'s' * (n != 1)}")
            header = ("rule", "hAURC×1000", "gain %", "hAURC×1000 (TS)", "gain % (TS)")
            table = [header]
            for rule in rules:
                cells = [RULE_LABELS[rule]]
                for ts in (False, True):
                    s = index[(ds, loss, ts, rule)]
                    cells.append(_pm(s["haurc_x1000_mean"], s["haurc_x1000_sem"]))
                    cells.append("–" if rule == "selective" else _pm(s["gain_percent_mean"], s["gain_percent_sem"]))
                table.append(tuple(cells))
            widths = [max(len(row[k]) for row in table) for k in range(len(header))]
            for row in table:
                lines.append("  " + "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                                               for k, (c, w) in enumerate(zip(row, widths))))
            lines.append("")
    lines.append(protocol_sentence(protocol, cal_fraction=cal_fraction, seed=seed))
    return "\n".join(lines)


def output_paths(out: Path) -> dict[str, Path]:
    """results.csv → its per-model and summary CSVs and the per-model result cache."""
    return {"rows": out, "models": out.with_name(f"{out.stem}_models.csv"),
            "summary": out.with_name(f"{out.stem}_summary.csv"), "cache": cache_dir_for(out)}


def write_outputs(out: dict[str, Path], rows: Sequence[dict], summary: Sequence[dict]) -> None:
    """The three CSVs, each written atomically through ``to_csv`` (formula-neutralised names)."""
    write_text_atomic(out["rows"], to_csv(rows, ROW_COLUMNS))
    write_text_atomic(out["models"], to_csv(model_table(rows)))
    write_text_atomic(out["summary"], to_csv(summary, SUMMARY_COLUMNS))


# ---------------------------------------------------------------------------- command line
def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="LOGITS",
                        help=".npz logits files, folders (every .npz inside) or quoted glob patterns")
    parser.add_argument("--hierarchy", metavar="FILE",
                        help="class tree (default: the built-in tree of the logits' data set, e.g. ImageNet-1k "
                             "for 1000 classes)")
    parser.add_argument("--classes", metavar="FILE",
                        help="class list giving the logits' column order of the hierarchy's leaves")
    parser.add_argument("--first-parent", action="store_true",
                        help="in a DAG hierarchy, keep each node's first listed parent")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="a CSV hierarchy's first row is column names (--header) or data (--no-header); "
                             "default: detected, with a warning when a row that could be a class is taken as names")
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
    parser.add_argument("--seed", type=int, default=SPLIT_SEED, help=f"seed of that split (default {SPLIT_SEED})")
    parser.add_argument("--workers", type=int, metavar="K",
                        help="parallel local processes (default min(#models, #CPUs)); with --ray, the CPUs of a "
                             "local Ray")
    parser.add_argument("--ray", metavar="ADDRESS",
                        help=f"run models as Ray tasks: '{LOCAL_RAY}' (a private Ray on this machine), 'auto' (the "
                             "running cluster) or a cluster address; logits paths must be readable on every node")
    parser.add_argument("--recompute", action="store_true", help="ignore finished results in <out>.d/")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    check_dec(args.dec)
    check_protocol(args.protocol)
    if not 0.0 < args.cal_fraction < 1.0:
        raise ValueError(f"--cal-fraction must lie in (0, 1), got {args.cal_fraction}")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.classes and not args.hierarchy:
        raise ValueError("--classes orders the leaves of --hierarchy FILE; pass --hierarchy too")
    paths = expand_inputs(args.inputs)
    hierarchy = (load_user_hierarchy(args.hierarchy, args.classes, args.first_parent, args.header)
                 if args.hierarchy else None)
    out = output_paths(Path(args.out))
    if out["rows"].suffix.lower() != ".csv":
        raise ValueError(f"--out must name a .csv file, got {args.out}")

    rows, errors, n_cached = evaluate_many(
        paths, hierarchy, dec=args.dec, protocol=args.protocol, cal_fraction=args.cal_fraction, seed=args.seed,
        workers=args.workers, ray_address=args.ray, cache_dir=out["cache"], resume=not args.recompute,
        progress=not args.no_progress,
    )
    if rows:
        summary = summary_rows(rows)
        write_outputs(out, rows, summary)
        print(format_summary(summary, protocol=args.protocol, cal_fraction=args.cal_fraction, seed=args.seed))
        n_models = len(paths) - len(errors)
        reused = f", {n_cached} reused from {out['cache']}" if n_cached else ""
        print(f"\n{n_models} model{'s' * (n_models != 1)}{reused} → {out['rows']} ({len(rows)} rows), "
              f"{out['models'].name}, {out['summary'].name}")
    if errors:
        file, message = next(iter(errors.items()))
        if file not in message:
            message = f"{file}: {message}"
        n_ok = len(paths) - len(errors)
        kept = f"; the other {n_ok} model{' is' if n_ok == 1 else 's are'} in {out['rows']}" if rows else ""
        head = f"{len(errors)} of {len(paths)} models failed, first: " if len(errors) > 1 else ""
        raise ValueError(f"{head}{message}{kept}")
    return 0
