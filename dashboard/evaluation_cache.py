"""The cached models' result rows kept on disk, keyed by content, so a fresh server shows every
model's numbers without evaluating them again.

A model's rows (``EvaluationSet.results``: top-1, T, hAURC and gain of the paper's four, with or
without bootstrap intervals) are a pure function of its logits file and manifest, its data set,
the subset, the TS setting and the toolkit's version. An entry is kept under the SHA-256 of all
of these, the file's bytes hashed as ``hsc evaluate``'s result cache hashes them
(``result_cache.file_digest``): a changed file has another key and is evaluated anew. Entries hold
their rows' checksum; an unreadable, edited or foreign entry is ignored and rewritten. Uploaded and
synthetic models are never written to disk (they are computed as before).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from hsc_core import __version__, config
from hsc_core.core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES
from hsc_core.evaluation import ResultRow
from hsc_core.evaluation.result_cache import file_digest

from . import catalog, evaluations

FORMAT = "hsc-dashboard-rows/1"  # bump when what an entry holds would change


def cache_folder() -> Path:
    """``<HSC_CACHE_DIR>/results``."""
    return config.cache_dir() / "results"


@functools.lru_cache(maxsize=256)
def _content_digest(location: str, file_stamp: tuple) -> str:
    # One hash per file version and process (the stamp says when the file changed).
    return file_digest(Path(location))[0]


def _canonical(rows: list[ResultRow]) -> str:
    return json.dumps(rows, sort_keys=True, allow_nan=True, separators=(",", ":"))


def rows_key(model: str, location: str, subset: str, ts: bool, intervals: bool) -> str:
    """The key of one model's rows: its file's content digest and everything else the rows depend on."""
    settings = {"format": FORMAT, "version": __version__, "model": model, "subset": subset, "ts": bool(ts),
                "intervals": bool(intervals), "n_resamples": N_RESAMPLES, "seed": BOOTSTRAP_SEED,
                "dataset": catalog._dataset_key(model, location)}
    text = json.dumps(settings, sort_keys=True, default=str)
    digest = _content_digest(location, catalog.stamp(location))
    return hashlib.sha256((text + digest).encode("utf-8")).hexdigest()


def _read(path: Path, key: str) -> list[ResultRow] | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        rows = entry["rows"]
        if entry["key"] != key or entry["checksum"] != hashlib.sha256(_canonical(rows).encode()).hexdigest():
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rows if isinstance(rows, list) and all(isinstance(r, dict) for r in rows) else None


def _write(path: Path, key: str, rows: list[ResultRow]) -> None:
    text = json.dumps({"key": key, "checksum": hashlib.sha256(_canonical(rows).encode()).hexdigest(), "rows": rows},
                      allow_nan=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # a read-only or full disk: the rows are still shown, just not kept
        pass


def result_rows(model: str, location: str, subset: str, ts: bool, intervals: bool = False) -> list[ResultRow]:
    """``model_context(model, location, subset, ts).view.results(intervals=intervals)``, read from
    disk when this content was evaluated before (by any server), else computed and kept."""
    if location.startswith((catalog.UPLOAD_PREFIX, catalog.SYNTHETIC_PREFIX)):
        return evaluations.model_context(model, location, subset, ts).view.results(intervals=intervals)
    key = rows_key(model, location, subset, ts, intervals)
    path = cache_folder() / f"{key}.json"
    rows = _read(path, key)
    if rows is None:
        rows = evaluations.model_context(model, location, subset, ts).view.results(intervals=intervals)
        _write(path, key, rows)
    return rows
