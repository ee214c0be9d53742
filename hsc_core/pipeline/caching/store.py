"""The on-disk side of a run: resumable chunks in ``<out>.partial/`` and the final atomic write.

Each chunk of ``chunk_size`` images is written atomically as soon as it is done, next to a
``meta.json`` fingerprint of everything that changes the numbers. A rerun with the same
fingerprint skips the finished chunks; at the end the chunks are merged into ``<out>`` (written
atomically, then read back) and the partial folder is removed. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.validation import clip, clip_path, quote
from ...datasets.atomic_files import write_json_atomic, write_npz_atomic
from ...datasets.logits_io import LogitsBundle, LogitsFileError, load_logits, save_logits
from .errors import CacheRunError
from .samples import SampleList

__all__ = [
    "PARTIAL_META",
    "ChunkCollector",
    "batch_plan",
    "check_writable",
    "chunk_ranges",
    "existing_output",
    "fingerprint",
    "merge_chunks",
    "open_partial",
    "output_name",
    "partial_dir",
    "pending_chunks",
    "write_final",
]

PARTIAL_META = "meta.json"
Chunk = tuple[int, int, int]  # (chunk number, first sample, one past the last sample)


# ---------------------------------------------------------------------------- output paths
def output_name(model: str, tag: str = "") -> str:
    """File name of a model's logits in ``--out-dir``: the model name, with anything but letters,
    digits, ``_ . -`` replaced (``hf-hub:org/x`` → ``hf-hub_org_x.npz``), and ``__<tag>`` for a
    variant (``CacheOptions.variant_tag``: ``efficientnet_lite0__tta-flip.npz``)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip(".")
    return f"{stem}__{tag}.npz" if tag else f"{stem}.npz"


def check_writable(out: Path) -> None:
    """Refuse, before the model loads, an ``out`` that cannot be created: its nearest existing
    ancestor must be a folder this process may write in."""
    where = clip_path(out)
    if out.is_dir():
        raise CacheRunError(f"cannot write {where}: it is a folder")
    probe = out.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise CacheRunError(f"cannot write {where}: {clip_path(probe)} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CacheRunError(f"cannot write {where}: no write permission in {clip_path(probe)}")


def existing_output(out: Path, model: str, samples: SampleList) -> str | None:
    """For ``--out-dir`` runs: "done" when ``out`` already holds this model's logits for exactly
    these samples (the run skips it), None when there is no file. A file from another run is an
    error (CacheRunError), not overwritten."""
    if not out.exists():
        return None
    try:
        bundle = load_logits(out, require_manifest=True)
    except LogitsFileError as exc:
        raise CacheRunError(f"{clip_path(out)} exists but is not a valid logits file ({clip(exc, 240)}); "
                            "move it away to recompute") from None
    if bundle.manifest.get("model") != model or bundle.sample_ids.tolist() != list(samples.sample_ids):
        raise CacheRunError(f"{clip_path(out)} exists and holds another run "
                            f"(model {quote(bundle.manifest.get('model'))}, "
                            f"{bundle.n_samples} images); move it away or choose another --out-dir")
    return "done"


def partial_dir(out: Path) -> Path:
    """Where finished chunks of a run writing ``out`` are kept until the final file is written."""
    return out.with_name(out.name + ".partial")


# ---------------------------------------------------------------------------- the chunk plan
def chunk_ranges(n: int, chunk_size: int) -> list[tuple[int, int]]:
    """[(start, stop)] of the chunks of ``n`` samples, ``chunk_size`` each (the last may be shorter)."""
    return [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]


def fingerprint(samples: SampleList, info: Any, chunk_size: int, amp: str | None, decode: str,
                variant: Mapping[str, Any] | None = None) -> dict:
    """Everything that changes the numbers (``info`` is the ``models.ModelInfo``): a resumed run must
    not mix chunks from another setup (nvJPEG and libjpeg-turbo differ in the last bit of some pixels)."""
    digest = hashlib.sha256("\n".join(samples.sample_ids).encode()).hexdigest()
    return {"model": info.name, "weights": info.weights, "preprocessing": info.preprocessing(),
            "n_samples": len(samples), "sample_ids_sha256": digest, "chunk_size": chunk_size, "amp": amp,
            "decode": decode, "variant": dict(variant or {})}


def open_partial(partial: Path, fp: Mapping[str, Any]) -> None:
    """Create ``partial`` with its fingerprint ``fp``, or accept an existing one with the same
    fingerprint (its chunks are reused); one from another run raises CacheRunError and is left alone."""
    meta_path = partial / PARTIAL_META
    if not meta_path.is_file():
        partial.mkdir(parents=True, exist_ok=True)
        write_json_atomic(meta_path, dict(fp))
        return
    try:
        old = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError):
        old = None
    if old != fp:
        raise CacheRunError(f"{clip_path(partial)} holds chunks from a different run (model, data, "
                            "preprocessing or chunk "
                            f"size differ); delete it or rerun with the original arguments")


def pending_chunks(partial: Path, ranges: Sequence[tuple[int, int]], rank: int = 0,
                   world: int = 1) -> tuple[list[Chunk], int]:
    """(this rank's chunks still to compute, the number of this rank's chunks); chunk ``i`` belongs
    to rank ``i % world``."""
    mine = [(c, s, e) for c, (s, e) in enumerate(ranges) if c % world == rank]
    return [(c, s, e) for c, s, e in mine if not _chunk_done(partial, c, s, e)], len(mine)


def batch_plan(pending: Sequence[Chunk], batch_size: int) -> list[list[int]]:
    """The batches (lists of sample indices) that cover ``pending``; a DataLoader ``batch_sampler``."""
    # Batches never straddle two chunks, so each chunk completes on a batch boundary.
    out: list[list[int]] = []
    for _chunk, start, stop in pending:
        out.extend(list(range(s, min(s + batch_size, stop))) for s in range(start, stop, batch_size))
    return out


# ---------------------------------------------------------------------------- chunk files
def _chunk_path(partial: Path, chunk: int) -> Path:
    return partial / f"chunk_{chunk:06d}.npz"


def _write_chunk(partial: Path, chunk: int, indices: np.ndarray, logits: np.ndarray) -> None:
    """Persist one finished chunk atomically: indices (n,) int64, logits (n, C) float32 (float32, so
    the final write rounds only once).

    Uncompressed: zlib needs over a second per 2048×1000 chunk of float16-AMP logits (their
    zeroed low mantissa bits make it search hard), which halved GPU throughput; the chunks are
    temporary anyway."""
    write_npz_atomic(_chunk_path(partial, chunk), {"indices": indices.astype(np.int64),
                                                   "logits": logits.astype(np.float32)}, compress=False)


def _chunk_done(partial: Path, chunk: int, start: int, stop: int) -> bool:
    """The chunk file exists, covers exactly samples ``start:stop`` and holds finite logits."""
    path = _chunk_path(partial, chunk)
    if not path.is_file():
        return False
    try:
        with np.load(path, allow_pickle=False) as z:
            return bool(np.array_equal(z["indices"], np.arange(start, stop)) and np.isfinite(z["logits"]).all())
    except Exception:  # noqa: BLE001 - a damaged chunk (any reason) is simply recomputed
        return False


class ChunkCollector:
    """Gathers batches of a run into their chunks and writes each chunk as soon as it is complete.

    Parameters
    ----------
    partial : Path
        The partial folder (``partial_dir(out)``, opened with ``open_partial``).
    pending : sequence of (chunk, start, stop)
        The chunks being computed (``pending_chunks``); batches come from ``batch_plan(pending, …)``.
    """

    def __init__(self, partial: Path, pending: Sequence[Chunk]) -> None:
        self.partial = partial
        self._chunk_of = {i: c for c, s, e in pending for i in range(s, e)}
        self._size = {c: e - s for c, s, e in pending}
        self._parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def add(self, indices: np.ndarray, logits: np.ndarray) -> bool:
        """Take one batch, indices (n,) and logits (n, C); True when it completed (and wrote) its chunk."""
        c = self._chunk_of[int(indices[0])]
        parts = self._parts.setdefault(c, [])
        parts.append((indices, logits))
        if sum(len(i) for i, _ in parts) < self._size[c]:
            return False
        del self._parts[c]
        _write_chunk(self.partial, c, np.concatenate([i for i, _ in parts]), np.concatenate([x for _, x in parts]))
        return True


# ---------------------------------------------------------------------------- the final file
def merge_chunks(partial: Path, ranges: Sequence[tuple[int, int]], n_classes: int) -> np.ndarray:
    """The float32 logits (N, n_classes) of all chunks; a missing or damaged chunk raises CacheRunError."""
    n = ranges[-1][1] if ranges else 0
    logits = np.empty((n, n_classes), dtype=np.float32)
    for c, (s, e) in enumerate(ranges):
        path = _chunk_path(partial, c)
        if not _chunk_done(partial, c, s, e):
            raise CacheRunError(f"chunk {c} ({clip_path(path)}) is missing or damaged; rerun to recompute it")
        with np.load(path, allow_pickle=False) as z:
            logits[s:e] = z["logits"]
    return logits


def write_final(out: Path, partial: Path, ranges: Sequence[tuple[int, int]], samples: SampleList,
                n_classes: int, manifest: Mapping[str, Any]) -> LogitsBundle:
    """Merge the chunks into ``out`` (float16 logits, atomically, with its manifest), read it back,
    then remove ``partial``; return what was read."""
    logits = merge_chunks(partial, ranges, n_classes)
    sources = None if samples.sources is None else np.asarray(samples.sources)
    # save_logits refuses |logit| > 1e4 (LogitsFileError), below float16's 65504: float16 cannot overflow.
    save_logits(out, logits, samples.labels, np.asarray(samples.sample_ids), sources, dict(manifest))
    # Verify what was written before deleting the chunks it was built from.
    bundle = load_logits(out, require_manifest=True)
    shutil.rmtree(partial, ignore_errors=True)
    return bundle
