"""Slow, pure results kept on disk, keyed by content, so a fresh server shows them without
computing them again: every cached model's result rows with or without bootstrap intervals (the
Overview's headline and table, Risk–Coverage's intervals, the Model atlas's own models), a model's
hierarchy-sensitivity table (bootstrap intervals under each tree), what Compare models shows of each
model (its rows and the chart's curve) and a shipped validation image's logits (Try an image's
network, PyTorch not even imported).

Rows are a pure function of the model's logits file and manifest, its data set, the subset, the
TS setting, what was asked (``kind`` and its settings) and the toolkit's version; an image's logits
of its bytes, the model's registry spec and the versions of the packages that compute them. An
entry is kept under the SHA-256 of all of these, a file's bytes hashed as ``hsc evaluate``'s result
cache hashes them (``result_cache.file_digest``): a changed file has another key and is computed
anew. Entries hold their value's checksum; an unreadable, edited or foreign entry is ignored and
rewritten. Uploaded and synthetic models, and uploaded images, are never written to disk (they
are computed as before, and an upload's results leave with its session).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hsc_core import __version__, config
from hsc_core.core.risk import Loss
from hsc_core.core.rules import RULES
from hsc_core.core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES, Interval
from hsc_core.evaluation import ResultRow
from hsc_core.evaluation.result_cache import file_digest

from . import catalog, evaluations

FORMAT = "hsc-dashboard-rows/2"  # bump when what an entry holds would change


def cache_folder() -> Path:
    """``<HSC_CACHE_DIR>/results``."""
    return config.cache_dir() / "results"


@functools.lru_cache(maxsize=256)
def _content_digest(location: str, file_stamp: tuple) -> str:
    # One hash per file version and process (the stamp says when the file changed).
    return file_digest(Path(location))[0]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=True, separators=(",", ":"))


def rows_key(model: str, location: str, subset: str, ts: bool, kind: str = "results", **settings: object) -> str:
    """The key of one entry: the model file's content digest and everything else its rows depend on
    (``kind``: what the rows are; ``settings``: that kind's options)."""
    described = {"format": FORMAT, "kind": kind, "version": __version__, "model": model, "subset": subset,
                 "ts": bool(ts), "n_resamples": N_RESAMPLES, "seed": BOOTSTRAP_SEED,
                 "dataset": catalog._dataset_key(model, location), **settings}
    text = json.dumps(described, sort_keys=True, default=str)
    digest = _content_digest(location, catalog.stamp(location))
    return hashlib.sha256((text + digest).encode("utf-8")).hexdigest()


def _read(path: Path, key: str) -> object | None:
    """The value of the entry at ``path`` when it is this key's and its checksum holds, else None."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        value = entry["value"]
        if entry["key"] != key or entry["checksum"] != hashlib.sha256(_canonical(value).encode()).hexdigest():
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value


def _write(path: Path, key: str, value: object) -> None:
    text = json.dumps({"key": key, "checksum": hashlib.sha256(_canonical(value).encode()).hexdigest(),
                       "value": value}, allow_nan=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # a read-only or full disk: the value is still shown, just not kept
        pass


def _kept(key: str, valid: Callable[[object], bool], compute: Callable[[], Any]) -> Any:
    """The kept value of ``key`` when there is a valid one, else ``compute()``'s, kept."""
    path = cache_folder() / f"{key}.json"
    value = _read(path, key)
    if value is None or not valid(value):
        value = compute()
        _write(path, key, value)
    return value


def _kept_model_value(model: str, location: str, subset: str, ts: bool, kind: str, valid: Callable[[object], bool],
                      compute: Callable[[], Any], **settings: object) -> Any:
    """``compute()``'s value for one model, read from disk when this content was computed before (by any
    server), else computed and kept; an uploaded or synthetic model's is computed, never kept."""
    if location.startswith((catalog.UPLOAD_PREFIX, catalog.SYNTHETIC_PREFIX)):
        return compute()
    return _kept(rows_key(model, location, subset, ts, kind, **settings), valid, compute)


def kept_rows(model: str, location: str, subset: str, ts: bool, kind: str, compute: Callable[[], list[ResultRow]],
              **settings: object) -> list[ResultRow]:
    """``compute()``'s result rows for one model, kept on disk (``_kept_model_value``)."""
    return _kept_model_value(model, location, subset, ts, kind,
                             lambda rows: isinstance(rows, list) and all(isinstance(r, dict) for r in rows), compute,
                             **settings)


def result_rows(model: str, location: str, subset: str, ts: bool, intervals: bool = False,
                losses: tuple[Loss, ...] = ("01",), rules: tuple[str, ...] = RULES) -> list[ResultRow]:
    """``model_context(model, location, subset, ts).view.results(losses, intervals=intervals, rules=rules)``,
    kept on disk."""
    return kept_rows(model, location, subset, ts, "results",
                     lambda: evaluations.model_context(model, location, subset, ts).view.results(
                         tuple(losses), intervals=intervals, rules=rules),
                     intervals=bool(intervals), losses=list(losses), rules=list(rules))


@dataclasses.dataclass(frozen=True)
class ComparedModel:
    """What Compare models shows of one model: its table's rows and the chart's rule's RC curve as
    drawn (``evaluations.decimate``d: coverage and risk, (≤ DISPLAY_POINTS,) each) with its hAURC."""

    rows: list[ResultRow]
    coverage: np.ndarray
    risk: np.ndarray
    haurc: float


def compared_model(model: str, location: str, subset: str, ts: bool, loss: Loss, dec: int | None, rule: str,
                   rules: tuple[str, ...]) -> ComparedModel:
    """One model's ``ComparedModel``: ``rules``' rows (``view.results((loss,), dec, rules=rules)``) and
    ``rule``'s curve, kept on disk, so a fresh server draws every model's curve without evaluating them."""
    def compute() -> dict[str, Any]:
        es = evaluations.model_context(model, location, subset, ts)
        cs = evaluations.curve_set(es, loss, dec)
        coverage, risk = cs.display[rule]
        return {"rows": es.view.results((loss,), dec, rules=rules),
                "coverage": [float(v) for v in coverage], "risk": [float(v) for v in risk],
                "haurc": float(cs.curves[rule].haurc)}

    def valid(v: object) -> bool:
        return isinstance(v, dict) and isinstance(v.get("rows"), list) and isinstance(v.get("haurc"), float) and all(
            isinstance(v.get(k), list) for k in ("coverage", "risk"))

    value = _kept_model_value(model, location, subset, ts, "compare", valid, compute, loss=loss, dec=dec, rule=rule,
                              rules=list(rules))
    return ComparedModel(value["rows"], np.asarray(value["coverage"], dtype=float),
                         np.asarray(value["risk"], dtype=float), value["haurc"])


def gain_interval(model: str, location: str, subset: str, ts: bool, rule: str) -> Interval:
    """``rule``'s hierarchical gain (0/1 loss) with its 95 % bootstrap interval, from the model's kept
    rows with intervals (the Overview's headline and its table read the same rows)."""
    rows = result_rows(model, location, subset, ts, intervals=True)
    row = next(r for r in rows if r["metric"] == "gain_percent" and r["rule"] == rule and r["loss"] == "01")
    low, high = (float("nan") if row[k] is None else row[k] for k in ("ci_low", "ci_high"))
    return Interval(row["value"], low, high)


def sensitivity_rows(es: evaluations.ModelContext, trees: tuple[str, ...]) -> list[ResultRow]:
    """``evaluations.hierarchy_sensitivity(es, trees)`` (the built-in ImageNet-1k trees, named),
    kept on disk: seconds of bootstrap per tree, once per content."""
    return kept_rows(es.model, es.location, es.subset, es.view.ts, "sensitivity",
                     lambda: evaluations.hierarchy_sensitivity(es, tuple(trees)), trees=list(trees))


def image_logits(image: bytes, model: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """(C,) float32 logits of a shipped validation image under a registered model (``compute()``:
    the network's forward pass), kept on disk under the image's bytes, the model's spec and the
    versions of everything that computes them, so a fresh server shows the image's answer without
    loading PyTorch. Never call it with an upload: an upload's results leave with its session."""
    from hsc_core.pipeline.registry import get_spec

    spec = get_spec(model)
    if spec is None:  # not a registered model: nothing pins what it computes
        return compute()
    versions = {package: _installed_version(package) for package in ("torch", "torchvision", "timm", "pillow",
                                                                      spec.weights_package)}
    described = {"format": FORMAT, "kind": "image_logits", "version": __version__, "spec": dataclasses.asdict(spec),
                 "packages": versions}
    text = json.dumps(described, sort_keys=True, default=str) + hashlib.sha256(image).hexdigest()
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    value = _kept(key, lambda v: isinstance(v, list) and all(isinstance(x, float) for x in v),
                  lambda: [float(x) for x in np.asarray(compute(), dtype=np.float32)])
    return np.asarray(value, dtype=np.float32)  # float32 → float → float32 is exact


def _installed_version(package: str) -> str:
    try:
        return importlib.metadata.version(package.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
