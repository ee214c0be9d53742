"""``hsc evaluate``: hAURC and hierarchical gain of every rule for one or many cached-logits files.

::

    hsc evaluate cached_logits/ [more.npz 'runs/*.npz' ...] [--hierarchy FILE [--classes FILE]]
                 [--dec N] [--out results.csv] [--workers K | --ray local|auto|ADDRESS]

For each model, T is fitted on the protocol's seeded, class-stratified calibration split
(``core.protocol``) and every number, with or without temperature scaling, is computed on the other
samples. Outputs, beside ``--out``:

* ``results.csv`` — one row per model × rule × loss × temperature scaling;
* ``results_models.csv`` — one row per model (top-1, T, hAURC×1000 and gain of every rule);
* ``results_summary.csv`` and the printed table — the paper's Table 1: mean ± SEM over models;
* ``results.csv.d/`` — one small JSON per finished model, keyed by the file's content and the
  settings, so a rerun skips finished models and an interrupted run loses at most the models
  in flight.

Models run in parallel local processes (``--workers``) or as Ray tasks (``--ray``); both call
``evaluate_model`` and give identical numbers.
"""

from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from ..core.curves import hierarchical_gain
from ..core.evaluation import rc_curves_from_logits
from ..core.hierarchy import Hierarchy
from ..core.probabilities import fit_temperature
from ..core.protocol import CALIBRATION_FRACTION, SPLIT_SEED, calibration_mask
from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES
from ..datasets.formats import load_hierarchy
from ..datasets.logits_io import LogitsBundle, list_cached_logits, load_logits, manifest_path, write_json_atomic
from ..datasets.registry import dataset_for_manifest, load_dataset
from .distributed import LOCAL_RAY, default_workers, map_jobs

# Bump when the numbers a cached result holds would change, so old caches are recomputed.
CACHE_FORMAT = "hsc-evaluate/1"
MAX_DEC = 6

RESULT_COLUMNS = (
    "model", "dataset", "rule", "loss", "temperature_scaled", "temperature", "haurc", "haurc_x1000",
    "gain_percent", "top1", "n_samples", "n_eval", "n_cal", "dec", "cal_fraction", "seed", "file",
)
SUMMARY_COLUMNS = (
    "dataset", "loss", "temperature_scaled", "rule", "n_models",
    "haurc_x1000_mean", "haurc_x1000_sem", "gain_percent_mean", "gain_percent_sem",
)


# ---------------------------------------------------------------------------- one model
def evaluate_model(
    bundle_or_path: LogitsBundle | str | os.PathLike,
    hierarchy: Hierarchy,
    *,
    dec: int | None = None,
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    dataset: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Rows of one model: every rule × loss, without and with temperature scaling.

    T is fitted on ``calibration_mask(labels, cal_fraction, seed)``; all metrics (both TS settings)
    use the remaining evaluation split. ``haurc`` is raw (the paper reports ``haurc_x1000``);
    ``gain_percent`` is relative to Selective with the same loss and TS setting (Selective's is 0);
    ``top1`` is on the evaluation split; ``temperature`` is the T applied (1.0 without TS).
    ``progress(done, total)`` counts evaluation samples over both passes (without, with TS).
    """
    if isinstance(bundle_or_path, LogitsBundle):
        bundle, file = bundle_or_path, ""
    else:
        bundle, file = load_logits(bundle_or_path), str(bundle_or_path)
    check_dec(dec)
    if bundle.n_classes != hierarchy.n_leaves:
        raise ValueError(f"{file or bundle.name}: logits have {bundle.n_classes} classes but the hierarchy has "
                         f"{hierarchy.n_leaves} leaves")
    cal = calibration_mask(bundle.labels, cal_fraction, seed)
    logits, labels = bundle.logits[~cal], bundle.labels[~cal]
    fitted_t = fit_temperature(bundle.logits[cal], bundle.labels[cal])
    top1 = float((logits.argmax(axis=1) == labels).mean())
    rows = []
    for scaled in (False, True):
        t = fitted_t if scaled else 1.0
        step = None if progress is None else (lambda done, total, k=int(scaled): progress(k * total + done, 2 * total))
        curves = rc_curves_from_logits(hierarchy, logits, labels, temperature=t, dec=dec, progress=step)
        for loss in LOSSES:
            sel = curves[("selective", loss)].haurc
            for rule in RULES:
                haurc = curves[(rule, loss)].haurc
                rows.append({
                    "model": bundle.name, "dataset": dataset, "rule": rule, "loss": loss,
                    "temperature_scaled": scaled, "temperature": t, "haurc": haurc, "haurc_x1000": 1000.0 * haurc,
                    # Selective's gain is 0 by definition (also when its hAURC is 0).
                    "gain_percent": 0.0 if rule == "selective" else hierarchical_gain(sel, haurc),
                    "top1": top1, "n_samples": bundle.n_samples, "n_eval": int(labels.size),
                    "n_cal": int(cal.sum()), "dec": "exact" if dec is None else int(dec),
                    "cal_fraction": cal_fraction, "seed": seed, "file": file,
                })
    return rows


def check_dec(dec: int | None) -> None:
    if dec is not None and not 0 <= dec <= MAX_DEC:
        raise ValueError(f"--dec must be between 0 and {MAX_DEC} (the authors used 2), got {dec}")


# ---------------------------------------------------------------------------- hierarchies
def builtin_hierarchy(bundle: LogitsBundle, where: str) -> tuple[str, Hierarchy]:
    """(data set name, its tree) for a file evaluated without ``--hierarchy``: the data set its
    manifest's ``dataset_id`` names (built-in or under ``$HSC_DATASETS_DIR``), else ImageNet-1k for
    1000 classes."""
    name = dataset_for_manifest(bundle.manifest, bundle.n_classes)
    if name is None:
        raise ValueError(f"{where}: no built-in hierarchy for {bundle.n_classes}-class logits (the manifest names "
                         "no dataset_id); pass --hierarchy FILE")
    try:
        return name, load_dataset(name).hierarchy
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}; or pass --hierarchy FILE") from exc


def _dataset_name(bundle: LogitsBundle) -> str:
    """The data set column when the user gave the tree: what the manifest says, else "custom"."""
    try:
        return dataset_for_manifest(bundle.manifest, bundle.n_classes) or "custom"
    except ValueError:
        return "custom"


def load_user_hierarchy(path: str, classes: str | None = None, first_parent: bool = False) -> Hierarchy:
    """``--hierarchy FILE`` in any format ``datasets.formats`` reads, leaves ordered by ``--classes``."""
    return load_hierarchy(path, classes, first_parent=first_parent)


def hierarchy_fingerprint(hierarchy: Hierarchy | None) -> str:
    """Content hash of a tree (node ids, names, parents, leaf order); "builtin" for None."""
    if hierarchy is None:
        return "builtin"
    text = json.dumps(hierarchy.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- many models
def expand_inputs(specs: Iterable[str]) -> list[Path]:
    """Files, folders (every ``*.npz`` directly inside) and glob patterns → unique .npz paths, in
    the order given (folders and globs sorted). A missing file, an empty folder or a pattern that
    matches nothing raises ValueError before any work starts."""
    out: list[Path] = []
    seen: set[Path] = set()
    for spec in specs:
        path = Path(os.path.expanduser(spec))
        if path.is_dir():
            found = list_cached_logits(path)
            if not found:
                raise ValueError(f"folder {spec} holds no .npz files")
        elif path.exists():
            found = [path]
        elif any(c in spec for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(os.path.expanduser(spec), recursive=True)
                           if p.endswith(".npz") and Path(p).is_file())
            if not found:
                raise ValueError(f"pattern {spec!r} matches no .npz files")
        else:
            raise ValueError(f"logits file {spec} not found")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


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
    """Fingerprint of the tree a file without ``--hierarchy`` will use, judged from its manifest
    ("unknown" when the manifest cannot tell), so an edited data set tree invalidates results."""
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        name = dataset_for_manifest(manifest, int(manifest.get("n_classes", 0)))
        if name is None:
            return "unknown"
        if name not in seen:
            seen[name] = f"{name}:{hierarchy_fingerprint(load_dataset(name).hierarchy)}"
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


def _read_cached(file: Path, key: str) -> list[dict] | None:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or damaged: compute again
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("rows"), list):
        return None
    return data["rows"]


def _evaluate_job(path: str, hierarchy: Hierarchy | None, dec: int | None, cal_fraction: float, seed: int,
                  sample_bar: bool = False) -> dict:
    """One model, in a worker process or Ray task: {"rows": [...]} or {"error": one line}.

    Errors come back as values, so one bad file never stops the others. ``sample_bar``: a progress
    bar over this model's samples (only when it runs in the main process, so bars never interleave).
    """
    bar = _SampleBar(Path(path).stem) if sample_bar else None
    try:
        bundle = load_logits(path)
        if hierarchy is None:
            dataset, tree = builtin_hierarchy(bundle, path)
        else:
            dataset, tree = _dataset_name(bundle), hierarchy
        return {"rows": evaluate_model(bundle, tree, dec=dec, cal_fraction=cal_fraction, seed=seed, dataset=dataset,
                                       progress=bar)}
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


def evaluate_many(
    paths: Sequence[str | os.PathLike],
    hierarchy: Hierarchy | None = None,
    *,
    dec: int | None = None,
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
    result is not computed again. Rows come in the order of ``paths``.
    """
    check_dec(dec)
    paths = [Path(p) for p in paths]
    settings = {"dec": dec, "cal_fraction": cal_fraction, "seed": seed, "hierarchy": hierarchy_fingerprint(hierarchy)}
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
            if resume and (rows := _read_cached(cache_file(cache, p), keys[i])) is not None:
                results[i] = rows
    n_cached = len(results)
    todo = [i for i in range(len(paths)) if i not in results]
    n_workers = default_workers(len(todo)) if workers is None else workers
    in_process = ray_address is None and (n_workers <= 1 or len(todo) <= 1)
    jobs = [(str(paths[i]), hierarchy, dec, cal_fraction, seed, progress and in_process) for i in todo]
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
    rows = []
    for i in sorted(results):
        for row in results[i]:
            # The same file may be named differently from run to run; name it as given now.
            rows.append({**row, "model": paths[i].stem, "file": str(paths[i])})
    return rows, errors, n_cached


def _progress_bar(total: int, done: int, enabled: bool, where: str):
    if not enabled or total - done < 2:  # one model: its sample bar is enough
        return None
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (logs, CI).
    return tqdm(total=total, initial=done, desc=f"evaluate ({where})", unit="model", file=sys.stderr, disable=None)


# ---------------------------------------------------------------------------- tables
def model_rows(rows: Sequence[dict]) -> list[dict]:
    """One row per model: top-1, fitted T, sizes, then hAURC×1000 and gain per rule × loss × TS.

    Column names: ``haurc_x1000_<rule>[_severity][_ts]``, ``gain_percent_<rule>[_severity][_ts]``.
    """
    by_model: dict[str, dict] = {}
    for r in rows:
        m = by_model.setdefault(r["file"], {
            "model": r["model"], "dataset": r["dataset"], "top1": r["top1"], "temperature": None,
            "n_samples": r["n_samples"], "n_eval": r["n_eval"], "n_cal": r["n_cal"], "dec": r["dec"],
        })
        if r["temperature_scaled"]:
            m["temperature"] = r["temperature"]
        suffix = ("" if r["loss"] == "01" else f"_{r['loss']}") + ("_ts" if r["temperature_scaled"] else "")
        m[f"haurc_x1000_{r['rule']}{suffix}"] = r["haurc_x1000"]
        if r["rule"] != "selective":
            m[f"gain_percent_{r['rule']}{suffix}"] = r["gain_percent"]
    out = []
    for file, m in by_model.items():
        m["file"] = file
        out.append(m)
    return out


def _mean_sem(values: Sequence[float]) -> tuple[float, float]:
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    # Standard error of the mean over models (as in the paper's Table 1); undefined for one model.
    sem = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")
    return float(x.mean()), sem


def summary_rows(rows: Sequence[dict]) -> list[dict]:
    """Mean ± SEM over models of hAURC×1000 and gain, per dataset × loss × TS × rule."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["loss"], r["temperature_scaled"], r["rule"]), []).append(r)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    out = []
    for ds in datasets:
        for loss in LOSSES:
            for scaled in (False, True):
                for rule in RULES:
                    group = groups.get((ds, loss, scaled, rule))
                    if not group:
                        continue
                    h_mean, h_sem = _mean_sem([g["haurc_x1000"] for g in group])
                    g_mean, g_sem = _mean_sem([g["gain_percent"] for g in group])
                    out.append({"dataset": ds, "loss": loss, "temperature_scaled": scaled, "rule": rule,
                                "n_models": len(group), "haurc_x1000_mean": h_mean, "haurc_x1000_sem": h_sem,
                                "gain_percent_mean": g_mean, "gain_percent_sem": g_sem})
    return out


def _pm(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.2f}" if not math.isfinite(sem) else f"{mean:.2f} ± {sem:.2f}"


def format_summary(summary: Sequence[dict], cal_fraction: float = CALIBRATION_FRACTION, seed: int = SPLIT_SEED) -> str:
    """The paper's Table 1 as text: per data set and loss, a row per rule with hAURC×1000 and gain
    (mean ± SEM over models), without and with temperature scaling."""
    lines: list[str] = []
    index = {(s["dataset"], s["loss"], s["temperature_scaled"], s["rule"]): s for s in summary}
    for ds in dict.fromkeys(s["dataset"] for s in summary):
        for loss in LOSSES:
            rules = [r for r in RULES if (ds, loss, False, r) in index]
            if not rules:
                continue
            n = index[(ds, loss, False, rules[0])]["n_models"]
            loss_name = "0/1 loss" if loss == "01" else "severity loss"
            lines.append(f"{ds or 'models'} — {loss_name}, mean ± SEM over {n} model{'s' * (n != 1)}")
            header = ("rule", "hAURC×1000", "gain %", "hAURC×1000 (TS)", "gain % (TS)")
            table = [header]
            for rule in rules:
                cells = [RULE_LABELS[rule]]
                for scaled in (False, True):
                    s = index[(ds, loss, scaled, rule)]
                    cells.append(_pm(s["haurc_x1000_mean"], s["haurc_x1000_sem"]))
                    cells.append("–" if rule == "selective" else _pm(s["gain_percent_mean"], s["gain_percent_sem"]))
                table.append(tuple(cells))
            widths = [max(len(row[k]) for row in table) for k in range(len(header))]
            for row in table:
                lines.append("  " + "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                                               for k, (c, w) in enumerate(zip(row, widths))))
            lines.append("")
    lines.append(f"TS: T fitted on a class-stratified {cal_fraction:.0%} calibration split (seed {seed}); "
                 f"every number is on the other {1 - cal_fraction:.0%}.")
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # repr: shortest text that reads back exactly
    return str(value)


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str] | None = None) -> None:
    """CSV with a header, written atomically (a temporary file renamed over ``path``)."""
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([_cell(r.get(c)) for c in columns])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def output_paths(out: Path) -> dict[str, Path]:
    """results.csv → its per-model and summary CSVs and the per-model result cache."""
    return {"rows": out, "models": out.with_name(f"{out.stem}_models.csv"),
            "summary": out.with_name(f"{out.stem}_summary.csv"), "cache": cache_dir_for(out)}


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
    parser.add_argument("--dec", type=int, metavar="N",
                        help=f"θ on the authors' grid of node probabilities rounded to N decimals (0–{MAX_DEC}; "
                             "they used 2); default: exact curves")
    parser.add_argument("--out", default="results.csv", metavar="CSV",
                        help="per-rule rows (default results.csv); <stem>_models.csv, <stem>_summary.csv and "
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
    if not 0.0 < args.cal_fraction < 1.0:
        raise ValueError(f"--cal-fraction must lie in (0, 1), got {args.cal_fraction}")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.classes and not args.hierarchy:
        raise ValueError("--classes orders the leaves of --hierarchy FILE; pass --hierarchy too")
    paths = expand_inputs(args.inputs)
    hierarchy = load_user_hierarchy(args.hierarchy, args.classes, args.first_parent) if args.hierarchy else None
    out = output_paths(Path(args.out))
    if out["rows"].suffix.lower() != ".csv":
        raise ValueError(f"--out must name a .csv file, got {args.out}")

    rows, errors, n_cached = evaluate_many(
        paths, hierarchy, dec=args.dec, cal_fraction=args.cal_fraction, seed=args.seed, workers=args.workers,
        ray_address=args.ray, cache_dir=out["cache"], resume=not args.recompute, progress=not args.no_progress,
    )
    if rows:
        summary = summary_rows(rows)
        write_csv(out["rows"], rows, RESULT_COLUMNS)
        write_csv(out["models"], model_rows(rows))
        write_csv(out["summary"], summary, SUMMARY_COLUMNS)
        print(format_summary(summary, args.cal_fraction, args.seed))
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
