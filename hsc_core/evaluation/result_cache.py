"""The checksummed cache of ``hsc evaluate``: one small JSON of result rows and one ``.npz`` of RC
tables per finished model, keyed by the content evaluated and the settings.

The cache never hands back wrong results. Each worker reads its ``.npz`` once (``read_content``),
hashing the bytes as it decodes them, and its manifest, and evaluates the model decoded from them; its
entry is saved under the key of those bytes (``result_key``): the up-front hash of the main
process (``file_digest``) only looks entries up, so a file replaced while a run is under way is
never mistaken for the original. An entry is reused only when its key is that of the file as it
is now and it is intact: rows of the result schema (``rows_problem``: types, NaN only where a gain
may be NaN, one row per metric × rule × loss × setting asked for, this file's model name,
protocol, seed, ``dec`` and tree) and a SHA-256 ``checksum`` of the entry's canonical JSON that
matches. The checksum detects corruption and hand edits, not a deliberate forger who can write to
the folder (they could recompute it): keeping others from writing there is the job of the
folder's file permissions.

The settings a key covers include the rules and extra metrics asked for (``--rules``,
``--metrics``) and the subset, so a run with other rules never reuses another run's rows.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np

from ..core.confidence import compatible, get_confidence
from ..core.risk import LOSSES
from ..core.rules import RULES
from ..datasets.logits_io import (
    HashingReader,
    LogitsBundle,
    LogitsFileError,
    LogitsStream,
    manifest_from_bytes,
    manifest_path,
)
from ..datasets.members import MembersError, member_names, member_path
from ..datasets.registry import dataset_for_manifest, load_dataset
from .rc_table import COLUMN_KINDS, POINT_COLUMNS, RC_TABLE_COLUMNS, table_columns
from .results import RESULT_COLUMNS, hierarchy_hash

__all__ = [
    "CACHE_FORMAT", "ROW_COLUMNS", "ContentRead", "cache_dir_for", "cache_file", "entry_checksum", "file_digest",
    "manifest_dataset", "manifest_dict", "with_members", "builtin_tree_tag", "key_settings", "rc_arrays",
    "rc_cache_file", "rc_entry_bytes", "rc_key",
    "read_cached", "read_content", "read_rc_cached", "result_key", "row_ids", "rows_problem", "cache_entry",
    "DEFAULT_CALIBRATORS", "DEFAULT_CONFIDENCES", "score_pairs",
]

#: The calibrators and confidence scores of ``hsc evaluate`` without ``--calibrator``/``--confidence``.
DEFAULT_CALIBRATORS: tuple[str, ...] = ("none", "temperature")
DEFAULT_CONFIDENCES: tuple[str, ...] = ("softmax",)

# Bump when the numbers or the schema a cached result holds would change, so old caches are recomputed.
CACHE_FORMAT = "hsc-evaluate/4"  # 4: rows carry calibrator and confidence (issue 31)
#: Columns of results.csv (and of every cached row): the layer's tidy schema and the logits file.
ROW_COLUMNS: tuple[str, ...] = (*RESULT_COLUMNS, "file")
#: The extra metrics' row names that depend on the loss (the others are computed once, under the first loss).
LOSS_METRICS: tuple[str, ...] = ("excess_haurc", "achievable_haurc")


# ---------------------------------------------------------------------------- result rows
# A cache entry is reused only when it is for the content that would be evaluated now and is intact:
#
# * its ``key`` is ``result_key`` of the bytes the worker actually evaluated (the .npz and its
#   manifest, read once, hashed as they are decoded) and the settings;
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


def file_digest(path: Path) -> tuple[str, bytes | None]:
    """(content digest, manifest bytes) of a file on disk, for looking up its cache entry; the
    .npz is hashed in blocks, never held whole (the worker hashes what it reads itself)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    manifest = _read_manifest_bytes(path)  # can change the data set (and so the tree) without touching the arrays
    return _digest(digest.digest(), manifest), manifest


def read_content(path: Path) -> tuple[HashingReader, bytes | None]:
    """A logits file opened for one pass (a ``HashingReader``: every byte the decoder reads is
    hashed as it passes, so the worker hashes exactly the bytes it decodes) and its manifest's
    bytes (None: none). The caller closes the reader."""
    if not path.is_file():
        raise LogitsFileError(f"cached logits file {path} not found")
    try:
        reader = HashingReader(path.open("rb"))
    except OSError as exc:
        raise LogitsFileError(f"{path}: cannot open ({exc})") from exc
    try:
        manifest = _read_manifest_bytes(path)
    except OSError as exc:
        reader.close()
        raise LogitsFileError(f"{manifest_path(path)}: manifest is not valid JSON ({exc})") from exc
    return reader, manifest


class ContentRead:
    """One pass over a logits file and its manifest (``read_content``), the logits decoded while
    they are used (``logits_io.LogitsStream``): the arrays are decoded block by block as the bytes
    are hashed, never held as raw bytes; float16 logits stay float16 (the evaluation casts one chunk
    at a time, with the same numbers).

    ``bundle`` is there at once, its logits filling in: use them through ``wait_rows`` (e.g. as
    ``logit_chunks``' ``ready``) until ``finish()``, which returns (bundle, content digest) once
    every byte is read and checked. A context manager: leaving it stops the decoding and closes
    the file.
    """

    def __init__(self, path: Path) -> None:
        self._reader, self._manifest_bytes = read_content(path)
        try:
            manifest = ({} if self._manifest_bytes is None
                        else manifest_from_bytes(self._manifest_bytes, manifest_path(path)))
            self._stream = LogitsStream(self._reader, str(path), manifest=manifest, keep_float16=True)
        except BaseException:
            self._reader.close()
            raise
        self.bundle: LogitsBundle = self._stream.bundle
        self.wait_rows = self._stream.wait_rows
        self._digest: str | None = None

    @property
    def decoded_rows(self) -> int:
        """How many leading rows of the logits are decoded so far."""
        return self._stream.decoded_rows

    def finish(self) -> tuple[LogitsBundle, str]:
        """(bundle, digest of the bytes decoded and of the manifest's), once the file is all read."""
        if self._digest is None:
            self._stream.finish()
            self._digest = _digest(self._reader.sha256(), self._manifest_bytes)
        return self.bundle, self._digest

    def close(self) -> None:
        self._stream.close()
        self._reader.close()

    def __enter__(self) -> ContentRead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def manifest_dataset(manifest: object) -> str | None:
    """The built-in data set a manifest names by itself (``dataset_for_manifest`` with its own
    n_classes), None when it cannot tell."""
    if not isinstance(manifest, dict):
        return None
    try:
        return dataset_for_manifest(manifest, int(manifest.get("n_classes", 0)))
    except (ValueError, TypeError):
        return None  # the worker reports what is wrong with the file


def builtin_tree_tag(manifest_bytes: bytes | None, seen: dict[str, str]) -> str:
    """Hash of the tree a file without ``--hierarchy`` will use, judged from its manifest
    ("unknown" when the manifest cannot tell), so an edited data set tree invalidates results."""
    try:
        name = manifest_dataset(json.loads(manifest_bytes.decode("utf-8")) if manifest_bytes else None)
        if name is None:
            return "unknown"
        if name not in seen:
            seen[name] = f"{name}:{hierarchy_hash(load_dataset(name).hierarchy)}"
        return seen[name]
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        return "unknown"  # the worker reports what is wrong with the file


def key_settings(settings: dict, tree_tag: str | None) -> dict:
    """The settings a key covers: the run's, plus the built-in tree's tag without ``--hierarchy``."""
    return settings if tree_tag is None else {**settings, "tree": tree_tag}


def with_members(content_digest: str, path: Path, manifest: dict | None, settings: dict) -> str:
    """``content_digest`` extended by each member file's digest when one of ``settings``'
    confidence scores reads an ensemble's members (``member_mean``, ``member_disagreement``), so a
    changed member file recomputes those rows; otherwise ``content_digest`` unchanged (the
    default keys stay what they were). A member that cannot be found keys as missing (the
    evaluation then reports why)."""
    chosen = settings.get("confidences") or ()
    if not isinstance(manifest, dict) or not any(get_confidence(c).needs_members for c in chosen):
        return content_digest
    parts = [content_digest]
    for name in member_names(manifest):
        try:
            parts.append(file_digest(member_path(path, name))[0])
        except (MembersError, OSError):
            parts.append(f"missing:{name}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def manifest_dict(manifest: bytes | None) -> dict | None:
    """A manifest's bytes (``file_digest``'s second value) as a dict, None if absent or unreadable."""
    if manifest is None:
        return None
    try:
        value = json.loads(manifest)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


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


def row_ids(settings: dict) -> frozenset[tuple[str, str, str, bool, str, str]]:
    """(metric, rule, loss, ts, calibrator, confidence) of every row of one model's result under
    ``settings``, each exactly once, per pair of ``score_pairs``: top-1 (and T for the
    ``temperature`` calibrator), hAURC and gain of ``settings["rules"]`` (default the paper's four)
    per loss, and the extra metrics ``settings["metrics"]`` (row names of ``results.EXTRA_METRICS``;
    the loss-free ones once, under no loss or the first loss, as ``evaluate_rows`` makes them)."""
    rules = tuple(settings.get("rules", RULES))
    metrics = tuple(settings.get("metrics", ()))
    ids = []
    for cal, conf in score_pairs(settings):
        ts = cal != "none"
        ids.append(("top1", "", "", ts, cal, conf))
        if cal == "temperature":
            ids.append(("temperature", "", "", ts, cal, conf))
        ids += [(metric, rule, loss, ts, cal, conf) for metric in ("haurc", "gain_percent") for rule in rules
                for loss in LOSSES]
        for metric in metrics:
            if metric in ("aurc_zhou", "augrc"):  # model-level: no rule, no loss
                ids.append((metric, "", "", ts, cal, conf))
            else:
                ids += [(metric, rule, loss, ts, cal, conf) for rule in rules
                        for loss in (LOSSES if metric in LOSS_METRICS else LOSSES[:1])]
    return frozenset(ids)


def score_pairs(settings: dict) -> list[tuple[str, str]]:
    """The (calibrator, confidence) pairs of a run, calibrators outer (default: none, then
    temperature, with softmax: the two TS settings, in their old order); pairs that cannot be
    scored (``confidence.compatible``: depth_temperature with another score than softmax) are left out."""
    return [(cal, conf) for cal in settings.get("calibrators", DEFAULT_CALIBRATORS)
            for conf in settings.get("confidences", DEFAULT_CONFIDENCES) if compatible(cal, conf)]


_TEXT_COLUMNS = ("model", "dataset", "hierarchy_hash", "subset", "protocol", "rule", "loss", "metric", "version",
                 "file", "calibrator", "confidence")
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
    for col in ("ci_low", "ci_high", "coverage_low", "coverage_high"):
        if row[col] is not None and not _is_number(row[col]):
            return f"its {col} is not a number"
    if row["n_resamples"] is not None and not (_is_int(row["n_resamples"]) and row["n_resamples"] > 0):
        return "its n_resamples is not a positive integer"
    if row["dec"] is not None and not (_is_int(row["dec"]) and row["dec"] == settings["dec"]):
        return f"its dec is {row['dec']!r}, not this run's {settings['dec']!r}"
    if row["protocol"] != settings["protocol"] or row["seed"] != settings["seed"]:
        return "its protocol or seed is not this run's"
    if row["subset"] != settings.get("subset", "all"):
        return "its subset is not this run's"
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
    ids = [(r["metric"], r["rule"], r["loss"], r["ts"], r["calibrator"], r["confidence"]) for r in rows]
    expected_ids = row_ids(settings)
    if len(ids) != len(expected_ids) or set(ids) != expected_ids:
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


def cache_entry(key: str, content: str, file: Path, settings: dict, rows: list[dict], changed: bool) -> dict:
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

