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
* with ``--rc-table PATH`` (``.csv``, or ``.parquet`` where pyarrow is installed): every exact
  operating point of the chosen ``--rules`` (default: all, the paper's four and the
  metric-optimal / Pareto ones), per loss and TS setting, in the stable schema
  ``evaluation.rc_table.RC_TABLE_COLUMNS`` (model, dataset, hierarchy_hash, subset, ts, rule,
  loss, theta, coverage, risk, n_accepted, n); with ``--coverage-points`` / ``--risk-points``,
  risk@coverage and coverage@risk rows (``POINT_COLUMNS``) go to ``<PATH stem>_points<suffix>``;
  each model's tables are computed by its worker from the same evaluation as its rows and cached
  beside them (``rc_cache_file``: an ``.npz`` of the columns, keyed also by the rules and points);
* ``results.csv.d/`` — one small JSON per finished model, keyed by the content it was computed
  from and the settings, so a rerun skips finished models and an interrupted run loses at most
  the models in flight.

The cache never hands back wrong results. Each worker reads its ``.npz`` and manifest once into
memory (the compressed file is held until it is decoded), hashes those bytes and evaluates the
model decoded from them, and its entry is saved under the key of those bytes: the up-front hash
of the main process only looks entries up, so a file replaced while the run is under way is
never mistaken for the original. An entry is reused only when its key is that of the file as it
is now and it is intact: rows of the result schema (types, NaN only where a gain may be NaN, one
row per metric × rule × loss × setting, this file's model name, protocol, seed, ``dec`` and tree)
and a SHA-256 ``checksum`` of the entry's canonical JSON that matches. Anything else (a truncated
or hand-edited entry, another file's rows) is recomputed with one line on stderr. The checksum
detects corruption and hand edits, not a deliberate forger who can write to the folder (they could
recompute it): keeping others from writing there is the job of the folder's file permissions.

Every CSV is written by ``evaluation.results.to_csv`` (a name that a spreadsheet would run as a
formula is neutralised). Models run in parallel local processes (``--workers``) or as Ray tasks
(``--ray``); both call ``evaluate_model`` and give identical numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.hierarchy import Hierarchy
from ..core.metric_rules import ALL_RULES, check_rule
from ..core.protocol import CALIBRATION_FRACTION, PROTOCOLS, SPLIT_SEED, check_protocol, protocol_text
from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES
from ..core.validation import quote
from ..datasets.logits_io import (
    LogitsBundle,
    LogitsFileError,
    load_logits,
    load_logits_bytes,
    manifest_from_bytes,
    manifest_path,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from ..datasets.registry import dataset_for_manifest, load_dataset
from ..evaluation.model import ModelEvaluation
from ..evaluation.rc_table import (
    COLUMN_KINDS,
    POINT_COLUMNS,
    RC_TABLE_COLUMNS,
    check_table_path,
    model_tables,
    table_bytes,
    table_columns,
    table_rows,
)
from ..evaluation.resolve import builtin_hierarchy, expand_inputs, load_user_hierarchy, resolve_hierarchy
from ..evaluation.results import RESULT_COLUMNS, SUMMARY_COLUMNS, hierarchy_hash, summary_rows, to_csv, wide_table
from .distributed import LOCAL_RAY, default_workers, map_jobs

if TYPE_CHECKING:
    from tqdm.auto import tqdm

# builtin_hierarchy, expand_inputs and load_user_hierarchy are re-exported for ``hsc report``
# (report/html_report.py imports them from here) until it imports them from the layer.
__all__ = [
    "CACHE_FORMAT", "ROW_COLUMNS", "Evaluated", "builtin_hierarchy", "evaluate_all", "evaluate_many", "evaluate_model",
    "expand_inputs",
    "format_summary", "load_user_hierarchy", "model_table", "run",
]

# Bump when the numbers or the schema a cached result holds would change, so old caches are recomputed.
CACHE_FORMAT = "hsc-evaluate/3"
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
    ev = _model_evaluation(bundle, hierarchy, file=file, dataset=dataset, protocol=protocol,
                           cal_fraction=cal_fraction, seed=seed, progress=progress)
    return [{**row, "file": file} for row in ev.results(losses=LOSSES, dec=dec)]


def _model_evaluation(bundle: LogitsBundle, hierarchy: Hierarchy, *, file: str, dataset: str, protocol: str,
                      cal_fraction: float, seed: int, progress: Progress | None) -> ModelEvaluation:
    ev = ModelEvaluation.from_bundle(bundle, hierarchy, dataset=dataset, protocol=protocol,
                                     cal_fraction=cal_fraction, seed=seed, file=file)
    if progress is not None:
        _build_settings(ev, progress)
    return ev


def _build_settings(ev: ModelEvaluation, progress: Progress) -> None:
    """Build both settings (the long part) with one sample count over both; under the paper
    protocol the two differ in size (no TS: every sample), so the offsets are their real sizes."""
    sizes = [int(ev.rows_for(ts).size) for ts in (False, True)]
    for ts, offset in ((False, 0), (True, sizes[0])):
        def report(done: int, _n: int, o: int = offset) -> None:
            progress(o + done, sum(sizes))
        ev.setting(ts, progress=report)


def check_dec(dec: int | None) -> None:
    if dec is not None and not 0 <= dec <= MAX_DEC:
        raise ValueError(f"--dec must be between 0 and {MAX_DEC} (the authors used 2), got {dec}")


# ---------------------------------------------------------------------------- the result cache
# A cache entry is reused only when it is for the content that would be evaluated now and is intact:
#
# * its ``key`` is ``result_key`` of the bytes the worker actually evaluated (the .npz and its
#   manifest, read once into memory, hashed, and decoded from those same bytes) and the settings;
#   the main process hashes the files up front only to look entries up, so a file replaced
#   mid-run gets an entry under the replacement's key, which the original never matches;
# * its ``checksum`` is the SHA-256 of a canonical JSON of everything else in it (format, key,
#   content digest, settings, rows) and its rows must pass ``rows_problem`` (schema, types, NaN
#   only where a number may be NaN, the model and settings of this file), so a damaged or
#   hand-edited entry is recomputed with one line on stderr, never reused, dropped or crashed on.
#
# The checksum catches corruption and hand edits, not a forger with write access to the folder
# (anyone who can write an entry can recompute its checksum): keeping others from writing there
# is the job of the folder's file permissions.
def _digest(npz_sha256: bytes, manifest: bytes | None) -> str:
    """The content digest of a logits file: its .npz's SHA-256 and its manifest's (or its absence)."""
    manifest_part = b"\0" if manifest is None else b"\1" + hashlib.sha256(manifest).digest()
    return hashlib.sha256(npz_sha256 + manifest_part).hexdigest()


def _read_manifest_bytes(path: Path) -> bytes | None:
    """The manifest's bytes, None when the file has none (OSError when it cannot be read)."""
    try:
        return manifest_path(path).read_bytes()
    except FileNotFoundError:
        return None


def _file_digest(path: Path) -> tuple[str, bytes | None]:
    """(content digest, manifest bytes) of a file on disk, for looking up its cache entry; the
    .npz is hashed in blocks, never held whole (the worker hashes what it reads itself)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    manifest = _read_manifest_bytes(path)  # can change the data set (and so the tree) without touching the arrays
    return _digest(digest.digest(), manifest), manifest


def read_content(path: Path) -> tuple[bytes, bytes | None]:
    """The bytes of a logits file and of its manifest (None: none), each read once: the worker
    hashes exactly these bytes and decodes the model from them."""
    if not path.is_file():
        raise LogitsFileError(f"cached logits file {path} not found")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogitsFileError(f"{path}: cannot open ({exc})") from exc
    try:
        manifest = _read_manifest_bytes(path)
    except OSError as exc:
        raise LogitsFileError(f"{manifest_path(path)}: manifest is not valid JSON ({exc})") from exc
    return data, manifest


def _load_content(path: Path) -> tuple[LogitsBundle, str]:
    """(bundle, content digest) of the bytes read once by ``read_content``; the raw bytes are
    dropped on return (the bundle holds the decoded arrays only)."""
    data, manifest_bytes = read_content(path)
    digest = _digest(hashlib.sha256(data).digest(), manifest_bytes)
    manifest = {} if manifest_bytes is None else manifest_from_bytes(manifest_bytes, manifest_path(path))
    return load_logits_bytes(data, str(path), manifest=manifest), digest


def _manifest_dataset(manifest: object) -> str | None:
    """The built-in data set a manifest names by itself (``dataset_for_manifest`` with its own
    n_classes), None when it cannot tell."""
    if not isinstance(manifest, dict):
        return None
    try:
        return dataset_for_manifest(manifest, int(manifest.get("n_classes", 0)))
    except (ValueError, TypeError):
        return None  # the worker reports what is wrong with the file


def _builtin_tree_tag(manifest_bytes: bytes | None, seen: dict[str, str]) -> str:
    """Hash of the tree a file without ``--hierarchy`` will use, judged from its manifest
    ("unknown" when the manifest cannot tell), so an edited data set tree invalidates results."""
    try:
        name = _manifest_dataset(json.loads(manifest_bytes.decode("utf-8")) if manifest_bytes else None)
        if name is None:
            return "unknown"
        if name not in seen:
            seen[name] = f"{name}:{hierarchy_hash(load_dataset(name).hierarchy)}"
        return seen[name]
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        return "unknown"  # the worker reports what is wrong with the file


def _key_settings(settings: dict, tree_tag: str | None) -> dict:
    """The settings a key covers: the run's, plus the built-in tree's tag without ``--hierarchy``."""
    return settings if tree_tag is None else {**settings, "tree": tree_tag}


def result_key(content_digest: str, settings: dict) -> str:
    """What a cached result must match: the content digest of the logits (and manifest) bytes
    evaluated and the settings (``--protocol`` included)."""
    text = json.dumps({"format": CACHE_FORMAT, **settings}, sort_keys=True)
    return hashlib.sha256((text + content_digest).encode()).hexdigest()


def entry_checksum(entry: dict) -> str:
    """SHA-256 of the canonical JSON of a cache entry without its ``checksum`` (format, key,
    content digest, settings, rows): it detects corruption and hand edits, not a forger who can
    write to the cache folder (they could recompute it)."""
    body = {k: v for k, v in entry.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, allow_nan=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def cache_dir_for(out: Path) -> Path:
    return out.with_name(out.name + ".d")


def cache_file(cache_dir: Path, path: Path) -> Path:
    # Stem for the reader, a hash of the full path so two folders' "model.npz" do not collide.
    tag = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return cache_dir / f"{path.stem}-{tag}.json"


#: (metric, rule, loss, ts) of every row of one model's result, each exactly once.
_ROW_IDS = frozenset(
    [("top1", "", "", False), ("top1", "", "", True), ("temperature", "", "", True)]
    + [(metric, rule, loss, ts) for metric in ("haurc", "gain_percent") for rule in RULES for loss in LOSSES
       for ts in (False, True)]
)
_TEXT_COLUMNS = ("model", "dataset", "hierarchy_hash", "subset", "protocol", "rule", "loss", "metric", "version",
                 "file")
#: Columns every row of one model shares.
_SHARED_COLUMNS = ("model", "dataset", "hierarchy_hash", "subset", "protocol", "n_cal", "seed", "version")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, float) or _is_int(v)


def _is_finite(v: object) -> bool:
    """A finite number (an integer too large for a float is not)."""
    try:
        return _is_number(v) and math.isfinite(v)  # type: ignore[arg-type]
    except OverflowError:
        return False


def _row_problem(row: dict, settings: dict) -> str:
    """Why one row (with the ``ROW_COLUMNS`` keys) is not a valid result row of ``settings``; ""."""
    for col in _TEXT_COLUMNS:
        if not isinstance(row[col], str):
            return f"its {col} is not a text"
    if not isinstance(row["ts"], bool):
        return "its ts is not true/false"
    for col in ("n_eval", "n_cal", "seed"):
        if not _is_int(row[col]):
            return f"its {col} is not an integer"
    if row["n_eval"] < 1 or row["n_cal"] < 0:
        return "its sample counts are out of range"
    if not (_is_finite(row["temperature"]) and row["temperature"] > 0):
        return "its temperature is not a positive number"
    if not _is_number(row["value"]):
        return "its value is not a number"
    # gain is NaN when Selective's hAURC is 0; every other number is finite.
    if not (_is_finite(row["value"]) or (row["metric"] == "gain_percent" and isinstance(row["value"], float)
                                          and math.isnan(row["value"]))):
        return f"its value is {row['value']} (not a finite number)"
    for col in ("ci_low", "ci_high"):
        if row[col] is not None and not _is_number(row[col]):
            return f"its {col} is not a number"
    if row["n_resamples"] is not None and not (_is_int(row["n_resamples"]) and row["n_resamples"] > 0):
        return "its n_resamples is not a positive integer"
    if row["dec"] is not None and not (_is_int(row["dec"]) and row["dec"] == settings["dec"]):
        return f"its dec is {row['dec']!r}, not this run's {settings['dec']!r}"
    if row["protocol"] != settings["protocol"] or row["seed"] != settings["seed"]:
        return "its protocol or seed is not this run's"
    return ""


def rows_problem(rows: object, settings: dict, model: str, tree_tag: str | None = None) -> str:
    """Why ``rows`` are not the cached result rows of the model ``model`` under ``settings`` (the
    tree: ``settings["hierarchy"]``, or ``tree_tag`` for a built-in one); "" when they are.

    Valid: a non-empty list of dicts, each with exactly the keys ``ROW_COLUMNS`` and values of
    their types (finite numbers, NaN only for a gain), one row per (metric, rule, loss, ts) of a
    model's result, all of this model, protocol, seed, ``dec`` and tree.
    """
    if not isinstance(rows, list) or not rows:
        return "its rows are not a non-empty list"
    expected = set(ROW_COLUMNS)
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != expected:
            return f"row {k} is not a dict with the {len(expected)} result columns"
        problem = _row_problem(row, settings)
        if problem:
            return f"row {k}: {problem}"
    ids = [(r["metric"], r["rule"], r["loss"], r["ts"]) for r in rows]
    if len(ids) != len(_ROW_IDS) or set(ids) != _ROW_IDS:
        return "its rows are not one of each metric, rule, loss and setting"
    for col in _SHARED_COLUMNS:
        if len({r[col] for r in rows}) != 1:
            return f"its rows disagree on {col}"
    first = rows[0]
    if first["model"] != model:
        return f"its model {first['model']!r} is not this file's {model!r}"
    # (data set or None, hierarchy hash) the rows must name; unknown for a built-in tree the manifest does not name
    tree: tuple[str | None, str] | None = None
    if settings["hierarchy"] != "builtin":
        tree = (None, settings["hierarchy"])
    elif tree_tag and tree_tag != "unknown":
        name, _, digest = tree_tag.partition(":")
        tree = (name, digest)
    if tree is not None and (first["hierarchy_hash"] != tree[1] or tree[0] not in (None, first["dataset"])):
        return "its tree is not this run's"
    return ""


def read_cached(file: Path, key: str, settings: dict, model: str, tree_tag: str | None = None
                ) -> tuple[list[dict] | None, str]:
    """A cache entry's rows for ``key``: ``(rows, "")`` when it is intact and for this content
    and these settings; ``(None, "")`` when there is none or it is for another file version,
    other settings or an older cache format; ``(None, why)`` when it is unusable (not JSON, not
    an entry, rows failing ``rows_problem``, a checksum that does not match). Either way a missing
    result is computed again, never dropped."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    except ValueError:
        return None, "not valid JSON"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    if not isinstance(data.get("format"), str) or not isinstance(data.get("key"), str):
        return None, "no format or key"
    if data["format"] != CACHE_FORMAT or data["key"] != key:
        return None, ""  # stale: an older cache, another version of the file or other settings
    problem = rows_problem(data.get("rows"), settings, model, tree_tag)
    if problem:
        return None, problem
    if data.get("checksum") != entry_checksum(data):
        return None, "checksum mismatch"
    return data["rows"], ""


def _cache_entry(key: str, content: str, file: Path, settings: dict, rows: list[dict], changed: bool) -> dict:
    """A cache entry, its checksum last. ``content``: the digest of the bytes the rows were
    computed from; ``changed``: the file differed from the one looked up when the run began."""
    entry: dict = {"format": CACHE_FORMAT, "key": key, "content_sha256": content, "file": str(file),
                   "settings": settings}
    if changed:
        entry["note"] = ("the file changed between this run's lookup and its evaluation; the rows are of the "
                         "content evaluated (content_sha256)")
    entry["rows"] = rows
    entry["checksum"] = entry_checksum(entry)
    return entry


# ---------------------------------------------------------------------------- many models
def _evaluate_job(path: str, hierarchy: Hierarchy | None, settings: dict, sample_bar: bool = False,
                  rc: dict | None = None) -> dict:
    """One model, in a worker process or Ray task: {"rows": [...], "key": …, "content": …, "tree": …}
    or {"error": one line}. With ``rc`` (``rc_options``), also the model's ``--rc-table`` tables as
    arrays (``"rc"``: ``rc_arrays``) and their cache key (``"rc_key"``), from the same evaluation.

    The file and its manifest are read once; ``content`` is the digest of those bytes, ``key``
    their ``result_key`` under ``settings`` (and ``tree``, the built-in tree's tag), and the rows
    are computed from the same bytes, so an entry saved under ``key`` describes what was evaluated
    even when the file changed on disk meanwhile. Errors come back as values, so one bad file
    never stops the others. ``sample_bar``: a progress bar over this model's samples (only when it
    runs in the main process, so bars never interleave).
    """
    bar = _SampleBar(Path(path).stem) if sample_bar else None
    try:
        bundle, content = _load_content(Path(path))
        dataset, tree = resolve_hierarchy(bundle, path, hierarchy)
        tree_tag = None
        if hierarchy is None:  # the tag the main process derives from the manifest, of the tree used
            tree_tag = "unknown" if _manifest_dataset(bundle.manifest) is None else f"{dataset}:{hierarchy_hash(tree)}"
        check_dec(settings["dec"])
        ev = _model_evaluation(bundle, tree, file="", dataset=dataset, protocol=settings["protocol"],
                               cal_fraction=settings["cal_fraction"], seed=settings["seed"], progress=bar)
        rows = ev.results(losses=LOSSES, dec=settings["dec"])
        out: dict[str, object] = {"rows": [{**row, "file": path} for row in rows], "content": content,
                                  "tree": tree_tag, "key": result_key(content, _key_settings(settings, tree_tag))}
        if rc is not None:
            table, points = model_tables(ev, rc["rules"], coverages=rc["coverages"], risks=rc["risks"], losses=LOSSES)
            out["rc"] = rc_arrays(table, points)
            out["rc_key"] = rc_key(content, _key_settings(settings, tree_tag), rc)
        return out
    except (ValueError, OSError) as exc:
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    finally:
        if bar is not None:
            bar.close()


class _SampleBar:
    """``progress(done, total)`` callback drawing a tqdm bar on stderr, created on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar: tqdm | None = None

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
    saved there at once, under the key of the bytes it was computed from, and, with ``resume``, a
    model whose current file and settings match an intact saved result is not computed again (an
    unusable entry is noted on stderr in one line and computed again; see ``read_cached``). Rows
    come in the order of ``paths``, each named by ``model_names`` and carrying its ``file``.
    """
    done = evaluate_all(paths, hierarchy, dec=dec, protocol=protocol, cal_fraction=cal_fraction, seed=seed,
                        workers=workers, ray_address=ray_address, cache_dir=cache_dir, resume=resume,
                        progress=progress)
    return done.rows, done.errors, done.n_cached


@dataclass
class Evaluated:
    """What ``evaluate_all`` returns: result rows, {file: error}, the number of models taken whole
    from the cache, and with ``rc`` the RC table and operating-point rows (in the order of the
    files, each model named as in ``rows``)."""

    rows: list[dict]
    errors: dict[str, str]
    n_cached: int
    rc_table: list[dict] = field(default_factory=list)
    rc_points: list[dict] = field(default_factory=list)


def evaluate_all(
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
    rc: dict | None = None,
) -> Evaluated:
    """``evaluate_many``, and with ``rc`` (``rc_options``) each model's ``--rc-table`` tables,
    computed in the same worker (local process or Ray task) from the same evaluation and cached
    beside its result (``rc_cache_file``): a model is computed again when either is missing."""
    check_dec(dec)
    check_protocol(protocol)
    files = [Path(p) for p in paths]
    settings = {"dec": dec, "protocol": protocol, "cal_fraction": cal_fraction, "seed": seed,
                "hierarchy": hierarchy_hash(hierarchy) or "builtin"}
    cache = Path(cache_dir) if cache_dir is not None else None
    results: dict[int, list[dict]] = {}
    tables: dict[int, dict[str, dict[str, np.ndarray]]] = {}
    keys: dict[int, str] = {}  # the lookup key of each file as it is now
    trees: dict[str, str] = {}
    for i, p in enumerate(files):
        if cache is None:
            continue
        try:
            content, manifest = _file_digest(p)
        except OSError:
            continue  # unreadable: the worker reports why
        tree_tag = _builtin_tree_tag(manifest, trees) if hierarchy is None else None
        keys[i] = result_key(content, _key_settings(settings, tree_tag))
        if resume:
            entry = cache_file(cache, p)
            rows, problem = read_cached(entry, keys[i], settings, p.stem, tree_tag)
            if problem:
                print(f"{entry}: unusable cached result ({problem}); recomputing", file=sys.stderr)
            if rows is not None:
                results[i] = rows
            if rc is not None:
                arrays, problem = read_rc_cached(rc_cache_file(cache, p),
                                                 rc_key(content, _key_settings(settings, tree_tag), rc))
                if problem:
                    print(f"{rc_cache_file(cache, p)}: unusable cached RC table ({problem}); recomputing",
                          file=sys.stderr)
                if arrays is not None:
                    tables[i] = arrays
    todo = [i for i in range(len(files)) if i not in results or (rc is not None and i not in tables)]
    n_cached = len(files) - len(todo)
    n_workers = default_workers(len(todo)) if workers is None else workers
    in_process = ray_address is None and (n_workers <= 1 or len(todo) <= 1)
    jobs = [(str(files[i]), hierarchy, settings, progress and in_process, rc) for i in todo]
    errors: dict[str, str] = {}
    bar = _progress_bar(len(files), n_cached, progress, "ray" if ray_address else "local")
    try:
        for j, out in map_jobs(_evaluate_job, jobs, workers=workers, ray_address=ray_address,
                               on_ray_task_error=lambda message: {"error": message}):
            i = todo[j]
            if "error" in out:
                errors[str(files[i])] = out["error"]
                results.pop(i, None)
                tables.pop(i, None)
            else:
                results[i] = out["rows"]
                changed = i in keys and keys[i] != out["key"]
                if changed:
                    print(f"note: {files[i]} changed while this run read it; its results are of the content "
                          "evaluated", file=sys.stderr)
                if cache is not None:
                    write_json_atomic(cache_file(cache, files[i]), _cache_entry(
                        out["key"], out["content"], files[i], _key_settings(settings, out["tree"]), out["rows"],
                        changed))
                if rc is not None:
                    tables[i] = out["rc"]
                    if cache is not None:
                        write_bytes_atomic(rc_cache_file(cache, files[i]), rc_entry_bytes(out["rc_key"], out["rc"]))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    names = model_names(files)
    # The same file may be named differently from run to run; name it as given now.
    done = Evaluated([{**row, "model": names[i], "file": str(files[i])} for i in sorted(results) for row in results[i]],
                     errors, n_cached)
    for i in sorted(tables):
        done.rc_table += table_rows(tables[i]["table"], model=names[i])
        done.rc_points += table_rows(tables[i]["points"], model=names[i])
    return done


# ---------------------------------------------------------------------------- the RC tables' cache
def rc_arrays(table: list[dict], points: list[dict]) -> dict[str, dict[str, np.ndarray]]:
    """A model's RC table and operating points as arrays (``rc_table.table_columns``): what a
    worker sends back and the cache keeps (a few MB where rows as dicts or JSON would be tens)."""
    return {"table": table_columns(table, RC_TABLE_COLUMNS), "points": table_columns(points, POINT_COLUMNS)}


def rc_cache_file(cache_dir: Path, path: Path) -> Path:
    """The RC tables' cache entry of a file, beside its result entry (``cache_file``)."""
    entry = cache_file(cache_dir, path)
    return entry.with_name(entry.stem + ".rc.npz")


def rc_key(content_digest: str, settings: dict, rc: dict) -> str:
    """``result_key`` of the content and settings plus the tables asked for (rules and targets)."""
    spec = {"rules": list(rc["rules"]), "coverages": list(rc["coverages"]), "risks": list(rc["risks"])}
    return result_key(content_digest, {**settings, "rc": spec})


def _arrays_checksum(key: str, arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256(f"{CACHE_FORMAT}\0{key}".encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def rc_entry_bytes(key: str, tables: dict[str, dict[str, np.ndarray]]) -> bytes:
    """A cache entry of a model's RC tables: an .npz of its columns (``table.<column>``,
    ``points.<column>``), the key and a SHA-256 checksum of everything else (as ``entry_checksum``:
    it detects corruption and hand edits, not a forger who can write to the folder)."""
    arrays = {f"{part}.{col}": a for part, cols in tables.items() for col, a in cols.items()}
    buf = io.BytesIO()
    meta = {"format": np.array(CACHE_FORMAT), "key": np.array(key), "checksum": np.array(_arrays_checksum(key, arrays))}
    np.savez_compressed(buf, **meta, **arrays)  # type: ignore[arg-type]  # (numpy's stub: names of arrays are str)
    return buf.getvalue()


def read_rc_cached(file: Path, key: str) -> tuple[dict[str, dict[str, np.ndarray]] | None, str]:
    """A model's cached RC tables for ``key``: ``(tables, "")`` when intact; ``(None, "")`` when
    there is none or it is for other content, settings or tables; ``(None, why)`` when unusable
    (not an .npz of the expected columns and types, or a checksum that does not match)."""
    try:
        with np.load(file, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError, EOFError, KeyError) as exc:  # not an .npz, or a damaged one
        return None, f"unreadable ({type(exc).__name__})"
    meta = {k: arrays.pop(k, None) for k in ("format", "key", "checksum")}
    if any(v is None or v.shape != () or v.dtype.kind != "U" for v in meta.values()):
        return None, "no format, key or checksum"
    if str(meta["format"]) != CACHE_FORMAT or str(meta["key"]) != key:
        return None, ""  # stale: an older cache, another version of the file, other settings or tables
    tables: dict[str, dict[str, np.ndarray]] = {}
    for part, columns in (("table", RC_TABLE_COLUMNS), ("points", POINT_COLUMNS)):
        cols = {c: arrays.get(f"{part}.{c}") for c in columns}
        if any(a is None or a.ndim != 1 or a.dtype.kind != COLUMN_KINDS[c] for c, a in cols.items()):
            return None, f"its {part} columns are not those of the schema"
        if len({a.size for a in cols.values()}) != 1:  # type: ignore[union-attr]
            return None, f"its {part} columns differ in length"
        tables[part] = cols  # type: ignore[assignment]
    if len(arrays) != len(RC_TABLE_COLUMNS) + len(POINT_COLUMNS):
        return None, "it has columns the schema does not"
    if str(meta["checksum"]) != _arrays_checksum(key, arrays):
        return None, "checksum mismatch"
    return tables, ""


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
            table: list[tuple[str, ...]] = [header]
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
                                               for k, (c, w) in enumerate(zip(row, widths, strict=True))))
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
    parser.add_argument("--rc-table", metavar="PATH",
                        help="also write every exact operating point (model, dataset, hierarchy_hash, subset, ts, "
                             "rule, loss, theta, coverage, risk, n_accepted, n) to PATH: .csv, or .parquet with "
                             "pyarrow")
    parser.add_argument("--rules", metavar="LIST",
                        help="comma-separated rules for --rc-table (default: all: " + ",".join(ALL_RULES)
                             + "; hf<β> for any β > 0, e.g. hf0.5)")
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
    rc = rc_options(args)  # checked before any work, as every other option

    # Whether this run had saved results for its files: then it says how many it reused and recomputed.
    had_entries = not args.recompute and any(cache_file(out["cache"], p).exists() for p in paths)
    done = evaluate_all(
        paths, hierarchy, dec=args.dec, protocol=args.protocol, cal_fraction=args.cal_fraction, seed=args.seed,
        workers=args.workers, ray_address=args.ray, cache_dir=out["cache"], resume=not args.recompute,
        progress=not args.no_progress, rc=rc,
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


# ---------------------------------------------------------------------------- RC tables
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


def rc_options(args: argparse.Namespace) -> dict | None:
    """The checked --rc-table options (None without --rc-table); bad input is one ValueError."""
    rules_given = args.rules is not None
    points_given = args.coverage_points is not None or args.risk_points is not None
    if args.rc_table is None:
        if rules_given or points_given:
            raise ValueError("--rules, --coverage-points and --risk-points need --rc-table PATH")
        return None
    path = check_table_path(args.rc_table)
    rules = tuple(ALL_RULES) if not rules_given else tuple(r.strip() for r in args.rules.split(",") if r.strip())
    if not rules:
        raise ValueError("--rules: give at least one rule")
    for rule in rules:
        check_rule(rule)
    return {"path": path, "rules": rules, "coverages": parse_points(args.coverage_points, "--coverage-points"),
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
