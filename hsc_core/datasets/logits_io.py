"""Cached model outputs on disk: one ``.npz`` per model plus a JSON manifest.

File format (``FORMAT_VERSION``):

* ``<stem>.npz`` (``np.savez``: stored, not deflated; no pickles) holds
  ``logits`` (N, C) float16 by default, ``labels`` (N,) int16/int32 class indices,
  ``sample_ids`` (N,) str (e.g. image file names) and, optionally, ``sources`` (N,) str
  (a per-sample data-source tag). Stored, because float logits shrink by under a tenth under
  deflate while inflating them is one core's work ahead of everything else (10 s for the 2 GB of
  a 100,000 × 10,000 float16 file); a deflated file (``np.savez_compressed``, as 1.4.2 and older wrote them)
  reads the same, more slowly.
* ``<stem>.json`` sits beside it. This manifest gives the model, weights, preprocessing, dataset,
  n_samples, n_classes, top1, top1 per source, dtype, device, date, library versions and
  the format version.

Both files are written atomically: a temporary file in the same directory, fsync, then
``os.replace``. A crash mid-write leaves the previous file intact, never a truncated one.

Reading treats the file as untrusted (it may be an upload): no pickles; before anything is
decompressed, each array's ``.npy`` header (shape × itemsize) must match the size its zip entry
declares, and their sum may be capped (``max_bytes``), so a 1 MB file cannot inflate to gigabytes
and a header claiming a (10⁹, 1000) array is refused instead of raising MemoryError. Logits must
be finite and within ±``MAX_ABS_LOGIT``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import mmap
import os
import platform
import struct
import threading
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from ..config import rows_per_chunk
from ..core.validation import bounded_message, check_labels, clip, clip_path, quote
from .atomic_files import write_bytes_atomic as write_bytes_atomic  # re-exported: the old home
from .atomic_files import write_json_atomic, write_npz_atomic
from .atomic_files import write_text_atomic as write_text_atomic  # re-exported: the old home

FORMAT_VERSION = "hsc-logits/1"
REQUIRED_ARRAYS = ("logits", "labels", "sample_ids")
# Keys the writer computes from the arrays; a manifest that disagrees with them is rejected.
_CHECKED_KEYS = ("n_samples", "n_classes")
# Real networks' logits stay within about ±100. Beyond ±1e4 a file is broken (wrong scale or
# dtype); such values also overflow float32 in softmax once divided by a fitted temperature
# (T ≥ 0.05) and would surface later as NaN far from the cause.
MAX_ABS_LOGIT = 1e4


class LogitsFileError(ValueError):
    """A cached-logits file is missing, corrupt or inconsistent."""

    def __init__(self, message: object = "") -> None:  # bounded: built from user-provided names
        super().__init__(bounded_message(str(message)))


@dataclass(frozen=True, eq=False)
class LogitsBundle:
    """The arrays and manifest of one cached-logits file.

    Attributes
    ----------
    logits : float32 (or float64) array of shape (N, C).
    labels : int64 array of shape (N,), values in [0, C).
    sample_ids : str array of shape (N,).
    sources : str array of shape (N,), or None when the file has no source tags.
    manifest : the JSON manifest ({} when the file has none).
    name : the file's stem, normally the model name.
    """

    logits: np.ndarray
    labels: np.ndarray
    sample_ids: np.ndarray
    sources: np.ndarray | None
    manifest: dict = field(default_factory=dict)
    name: str = ""

    @property
    def n_samples(self) -> int:
        return int(self.logits.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.logits.shape[1])

    def top1(self) -> float:
        """Top-1 accuracy of the stored logits."""
        return top1_accuracy(self.logits, self.labels)

    def top1_per_source(self) -> dict[str, float]:
        """Top-1 accuracy within each source tag ({} without tags)."""
        return top1_per_source(self.logits, self.labels, self.sources)


def manifest_path(path: str | os.PathLike) -> Path:
    """The manifest that belongs to a ``.npz`` file: same directory and stem, ``.json``."""
    return Path(path).with_suffix(".json")


def top1_accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose arg-max equals the label (nan for no rows)."""
    if len(labels) == 0:
        return float("nan")
    return float((np.asarray(logits).argmax(axis=1) == np.asarray(labels)).mean())


def top1_per_source(logits: np.ndarray, labels: np.ndarray, sources: np.ndarray | None) -> dict[str, float]:
    """Top-1 accuracy for each distinct source tag, in sorted tag order."""
    if sources is None:
        return {}
    sources = np.asarray(sources)
    correct = np.asarray(logits).argmax(axis=1) == np.asarray(labels)
    return {str(s): float(correct[sources == s].mean()) for s in sorted(set(sources.tolist()))}


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape the numbers, for the manifest."""
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("torch", "timm", "torchvision", "PIL"):
        try:
            versions[mod if mod != "PIL" else "pillow"] = __import__(mod).__version__
        except ImportError:
            pass
    return versions


# ---------------------------------------------------------------------------- writing
# the atomic writers live in ``atomic_files``; imported here for save_logits and for the callers
# that have always imported them from this module
def _label_dtype(labels: np.ndarray) -> type:
    # int16 suffices for ImageNet (1000 classes); iNat21's 10,000 also fit, larger sets need int32.
    return np.int16 if labels.size == 0 or labels.max() < np.iinfo(np.int16).max else np.int32


def save_logits(
    path: str | os.PathLike,
    logits: np.ndarray,
    labels: np.ndarray,
    sample_ids: Sequence[str] | np.ndarray,
    sources: Sequence[str] | np.ndarray | None = None,
    manifest: Mapping[str, Any] | None = None,
    dtype: str = "float16",
) -> Path:
    """Write ``<path>`` (.npz) and its manifest ``<stem>.json`` atomically; return the npz path.

    ``manifest`` holds the caller's descriptive fields (model, weights, preprocessing, dataset,
    device, …). The writer adds n_samples, n_classes, top1, top1_per_source, dtype, date,
    versions and format, computed from the arrays. Raises LogitsFileError for inconsistent
    inputs, including logits beyond ±``MAX_ABS_LOGIT``.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise LogitsFileError(f"cached logits must be a .npz file, got {quote(path.name)}")
    arrays = _check_arrays(
        np.asarray(logits), np.asarray(labels), np.asarray(sample_ids),
        None if sources is None else np.asarray(sources), clip_path(path), keep_float16=dtype == "float16",
    )
    logits_arr, labels_arr, ids_arr, src_arr = arrays
    # _check_arrays bounds |logits| by MAX_ABS_LOGIT, below float16's largest value (65504): no overflow.
    # float16 in, float16 stored: no float32 or second float16 copy (2 GB, not 8, at 100,000 × 10,000).
    stored = logits_arr.astype(dtype, copy=False)
    out = {
        "logits": stored,
        "labels": labels_arr.astype(_label_dtype(labels_arr)),
        "sample_ids": ids_arr.astype(str),
    }
    if src_arr is not None:
        out["sources"] = src_arr.astype(str)
    meta: dict[str, Any] = dict(manifest or {})
    meta.update(
        n_samples=int(stored.shape[0]),
        n_classes=int(stored.shape[1]),
        # Accuracy of the stored (rounded) logits, so a reader recomputing it gets the same number.
        top1=top1_accuracy(stored, labels_arr),
        top1_per_source=top1_per_source(stored, labels_arr, src_arr),
        dtype=str(stored.dtype),
        format=FORMAT_VERSION,
    )
    meta.setdefault("date", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if "versions" not in meta:  # importing torch just to read its version is slow
        meta["versions"] = library_versions()
    write_npz_atomic(path, out, compress=False)  # stored: see the module's docstring
    write_json_atomic(manifest_path(path), meta)
    return path


# ---------------------------------------------------------------------------- reading
_HALF_INF = np.uint16(0x7C00)  # the bits of float16 inf; NaNs lie above


def _half_bits_at_most(limit: float) -> np.uint16:
    """The bits of the largest float16 ≤ ``limit``: |x| > limit ⟺ its magnitude bits exceed these."""
    value = np.float16(limit)
    if float(value) > limit:
        value = np.nextafter(value, np.float16(0))
    return value.view(np.uint16)


def _check_logit_values(logits: np.ndarray, where: str) -> None:
    """NaN/inf and the ±``MAX_ABS_LOGIT`` bound, checked a block of rows at a time: whole-array
    ``isfinite`` and ``abs`` temporaries would be as large as the logits (4 GB at iNat21 size)."""
    check = _LogitValueCheck(logits)
    check.rows(logits.shape[0])
    check.raise_if_bad(where)


class _LogitValueCheck:
    """``_check_logit_values`` fed in order, as rows arrive (a stream checks them on its decoding
    thread, beside the pass that uses them): ``rows(k)`` checks the rows not yet checked below ``k``,
    ``raise_if_bad`` raises what the whole array would. The messages do not depend on how the rows
    were cut: the bad rows are counted in order, and the first over the bound and the largest
    value are the first in row order."""

    def __init__(self, logits: np.ndarray) -> None:
        self.logits = logits
        self.done = 0  # rows [0, done) are checked
        self.bad_rows: list[np.ndarray] = []
        self.has_nan = False
        self.peak, self.peak_abs, self.first_over = 0.0, -1.0, cast("int | None", None)

    def rows(self, stop: int) -> None:
        n, c = self.logits.shape
        step = rows_per_chunk(c * max(8, self.logits.dtype.itemsize))
        half = self.logits.dtype == np.float16
        for start in range(self.done, min(stop, n), step):
            block = self.logits[start:min(start + step, stop)]
            # float16: |x| from the bits (the sign bit cleared), ~10× faster than float16 arithmetic in
            # numpy; the order of magnitudes is the order of their bit patterns, inf is 0x7C00, NaN above.
            mag = (block.view(np.uint16) & np.uint16(0x7FFF)) if half else np.abs(block)
            finite = (mag < _HALF_INF).all(axis=1) if half else np.isfinite(block).all(axis=1)
            if not finite.all():
                self.bad_rows.append(start + np.flatnonzero(~finite))
                self.has_nan = self.has_nan or bool((mag > _HALF_INF).any() if half else np.isnan(block).any())
                continue  # the NaN/inf message wins; values of these rows are not compared
            k = int(mag.argmax())
            if abs(float(block.flat[k])) > self.peak_abs:  # strict: the first largest, as one argmax over all rows
                self.peak = float(block.flat[k])
                self.peak_abs = abs(self.peak)
            if self.first_over is None and self.peak_abs > MAX_ABS_LOGIT:
                over = (mag > _half_bits_at_most(MAX_ABS_LOGIT)) if half else (mag > MAX_ABS_LOGIT)
                self.first_over = start + int(np.flatnonzero(over.any(axis=1))[0])
        self.done = max(self.done, min(stop, n))

    def raise_if_bad(self, where: str) -> None:
        if self.bad_rows:
            rows = np.concatenate(self.bad_rows)
            raise LogitsFileError(f"{where}: logits contain {'NaN' if self.has_nan else 'inf'} in {len(rows)} rows "
                                  f"(first: row {int(rows[0])})")
        if self.first_over is not None:
            raise LogitsFileError(f"{where}: logits reach {self.peak:.3g} (first in row {self.first_over}); logits "
                                  f"must lie within ±{MAX_ABS_LOGIT:g} (real networks stay near ±100): the file holds "
                                  "something else, e.g. wrongly scaled values")


def _check_logits_header(shape: tuple[int, ...], dtype: np.dtype, where: str) -> None:
    """The logits' shape and dtype (from the array or its ``.npy`` header)."""
    if len(shape) != 2:
        raise LogitsFileError(f"{where}: logits must be 2-D (n_samples, n_classes), got shape {shape}")
    n, c = shape
    if n == 0:
        raise LogitsFileError(f"{where}: holds no samples (logits shape {shape})")
    if c == 0:
        raise LogitsFileError(f"{where}: logits have 0 classes")
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise LogitsFileError(f"{where}: logits must be numeric, got dtype {dtype}")


def _as_float(logits: np.ndarray, keep_float16: bool) -> np.ndarray:
    """Logits as float32 (float64 stays float64), or float16 kept with ``keep_float16``."""
    if keep_float16 and logits.dtype == np.float16:
        return logits
    return logits.astype(np.float64 if logits.dtype == np.float64 else np.float32, copy=False)


def _check_samples(n: int, c: int, labels: np.ndarray, ids: np.ndarray, sources: np.ndarray | None, where: str,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Labels (as int64 in [0, c)), sample ids (unique) and sources of ``n`` samples."""
    if labels.ndim != 1 or labels.shape[0] != n:
        raise LogitsFileError(f"{where}: labels must have shape ({n},) to match logits, got {labels.shape}")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        raise LogitsFileError(f"{where}: labels must be integers, got dtype {labels.dtype}")
    try:
        labels = check_labels(labels, n, c)
    except ValueError as err:
        raise LogitsFileError(f"{where}: {err}") from None
    if ids.ndim != 1 or ids.shape[0] != n:
        raise LogitsFileError(f"{where}: sample_ids must have shape ({n},) to match logits, got {ids.shape}")
    if len(set(ids.tolist())) != n:
        raise LogitsFileError(f"{where}: sample_ids are not unique")
    if sources is not None and (sources.ndim != 1 or sources.shape[0] != n):
        raise LogitsFileError(f"{where}: sources must have shape ({n},) to match logits, got {sources.shape}")
    return labels, ids, sources


def _check_arrays(
    logits: np.ndarray, labels: np.ndarray, ids: np.ndarray, sources: np.ndarray | None, where: str,
    keep_float16: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Validate shapes, dtypes and values; return (logits float, labels int64, ids, sources).

    Logits become float32 (float64 stays float64), or stay float16 with ``keep_float16``.
    """
    _check_logits_header(logits.shape, logits.dtype, where)
    logits = _as_float(logits, keep_float16)
    _check_logit_values(logits, where)
    n, c = logits.shape
    return (logits, *_check_samples(n, c, labels, ids, sources, where))


def _read_manifest(path: Path) -> dict:
    mpath = manifest_path(path)
    if not mpath.exists():
        return {}
    try:
        data = mpath.read_bytes()
    except OSError as exc:
        raise LogitsFileError(f"{clip_path(mpath)}: manifest is not valid JSON ({clip(exc)})") from exc
    return manifest_from_bytes(data, clip_path(mpath))


def manifest_from_bytes(data: bytes, where: str | os.PathLike) -> dict:
    """A manifest read as bytes (UTF-8 JSON) → its object; LogitsFileError naming ``where`` otherwise."""
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise LogitsFileError(f"{where}: manifest is not valid JSON ({clip(exc)})") from exc
    if not isinstance(manifest, dict):
        raise LogitsFileError(f"{where}: manifest must be a JSON object, got {type(manifest).__name__}")
    return manifest


def _check_manifest(manifest: Mapping[str, Any], logits: np.ndarray, where: str) -> None:
    """The manifest's n_samples / n_classes must match the arrays and its format must be ours."""
    actual = {"n_samples": logits.shape[0], "n_classes": logits.shape[1]}
    for key in _CHECKED_KEYS:
        if key in manifest and manifest[key] != actual[key]:
            raise LogitsFileError(
                f"{where}: manifest says {key}={quote(manifest[key])} but the arrays have {actual[key]}")
    fmt = manifest.get("format")
    if fmt is not None and fmt != FORMAT_VERSION:
        raise LogitsFileError(f"{where}: unsupported format {quote(fmt)} (this reader knows {FORMAT_VERSION!r})")


def _mb(nbytes: int) -> str:
    """A byte count for messages: 4,000 bytes, 584.8 MB, 4.0 TB."""
    if nbytes < 1e6:
        return f"{nbytes:,} bytes"
    unit, scale = ("MB", 1e6) if nbytes < 1e9 else ("GB", 1e9) if nbytes < 1e12 else ("TB", 1e12)
    return f"{nbytes / scale:,.1f} {unit}"


def _check_npz_members(zf: zipfile.ZipFile, keys: Sequence[str], where: str,
                       max_bytes: int | None) -> dict[str, tuple[int, tuple[int, ...], bool, np.dtype]]:
    """Read only the ``.npy`` headers and check them against the zip's own size records.

    Each member's declared uncompressed size must equal its header plus shape × itemsize (numpy
    then reads exactly that much), and the arrays together may not exceed ``max_bytes``.
    Returns each key's (header length, shape, Fortran order, dtype).
    """
    total = 0
    headers: dict[str, tuple[int, tuple[int, ...], bool, np.dtype]] = {}
    for key in keys:
        info = zf.getinfo(f"{key}.npy")
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise LogitsFileError(f"{where}: array {key!r} uses .npy format version {version}, not 1.0 or 2.0")
            header_len = fh.tell()
        headers[key] = (header_len, tuple(shape), bool(_fortran), dtype)
        if dtype.hasobject:
            # Pickles can run code, so they are never loaded; str arrays (dtype '<U…') are the format.
            raise LogitsFileError(f"{where}: array {key!r} is an object (pickled) array, which is not loaded for "
                                  "safety; save sample_ids and sources as str arrays, e.g. np.asarray(ids, dtype=str)")
        nbytes = dtype.itemsize
        for dim in shape:
            nbytes *= int(dim)  # Python ints: a crafted shape cannot overflow
        if header_len + nbytes != info.file_size:
            raise LogitsFileError(
                f"{where}: array {key!r} claims shape {tuple(shape)} of {dtype} ({_mb(nbytes)}), but the file "
                f"stores {_mb(max(info.file_size - header_len, 0))} for it: the file is corrupt or crafted")
        total += nbytes
    if max_bytes is not None and total > max_bytes:
        raise LogitsFileError(f"{where}: its arrays inflate to {_mb(total)}, more than the {_mb(max_bytes)} "
                              "allowed here")
    return headers


#: The deflate decoder of a logits member: ISA-L's (``isal``, ~1.6× zlib's speed on float16 logits, the
#: same stream, the same bytes) where installed, else zlib's.
_inflate: Any
try:
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - isal is in requirements.txt
    _inflate = zlib

_INFLATE_BLOCK = 4 << 20  # compressed bytes read at once
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: signature, …, name and extra lengths


def _member_decodable(info: zipfile.ZipInfo, header: tuple[int, tuple[int, ...], bool, np.dtype]) -> bool:
    """Whether ``_read_npy_member`` can read this member: deflated or stored, not encrypted, C order,
    no object dtype (any other is left to ``np.load``)."""
    return (info.compress_type in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED) and not info.flag_bits & 0x1
            and not header[2] and not header[3].hasobject)


def _read_into(fh: IO[bytes], view: memoryview) -> int:
    """Bytes read from ``fh`` straight into ``view`` (through ``read`` for a file without ``readinto``)."""
    readinto = getattr(fh, "readinto", None)
    if readinto is not None:
        return int(readinto(view) or 0)
    data = fh.read(len(view))
    view[: len(data)] = data
    return len(data)


def _read_npy_member(fh: IO[bytes], info: zipfile.ZipInfo, header: tuple[int, tuple[int, ...], bool, np.dtype],
                     out: np.ndarray | None = None, advance: Callable[[int], None] | None = None,
                     ) -> np.ndarray:
    """The ``.npy`` member ``info`` of the zip open as ``fh``, decoded straight into its array.

    Its compressed bytes are read in order, 4 MB at a time (a ``HashingReader`` hashes them as they
    pass), inflated (``_inflate``) and copied into the array; the size and CRC-32 are checked as
    ``zipfile`` checks them. Only for a member ``_member_decodable`` accepts (``np.load`` reads
    any other). ``out``: the array to fill (of the header's shape and dtype; a new one when None);
    ``advance(k)``: called whenever the array's first ``k`` bytes are in, so a reader can use its
    first rows while the rest is decoded.
    """
    header_len, shape, _fortran, dtype = header
    fh.seek(info.header_offset)
    local = fh.read(_LOCAL_HEADER.size)
    if len(local) != _LOCAL_HEADER.size or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header of {info.filename}")
    name_len, extra_len = _LOCAL_HEADER.unpack(local)[1:]
    if len(fh.read(name_len + extra_len)) != name_len + extra_len:
        raise EOFError(f"{info.filename} is cut short")
    if out is None:
        out = np.empty(shape, dtype=dtype)
    flat = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # the array's own bytes
    inflate = _inflate.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
    skip, pos, crc, left = header_len, 0, 0, info.compress_size

    def put(data: bytes) -> None:
        nonlocal skip, pos, crc
        crc = _inflate.crc32(data, crc)
        view = memoryview(data)[skip:]
        skip = max(0, skip - len(data))
        if pos + len(view) > len(flat):
            raise zipfile.BadZipFile(f"{info.filename} inflates to more than its declared size")
        flat[pos: pos + len(view)] = view
        pos += len(view)
        if advance is not None and len(view):
            advance(pos)

    if inflate is None and left >= header_len:  # stored: the header, then the values read straight into the array
        put(fh.read(header_len))
        left -= header_len
        if left > len(flat):
            raise zipfile.BadZipFile(f"{info.filename} inflates to more than its declared size")
        while left > 0 and not skip:
            got = _read_into(fh, flat[pos: pos + min(_INFLATE_BLOCK, left)])
            if not got:
                raise EOFError(f"{info.filename} is cut short")
            crc = _inflate.crc32(flat[pos: pos + got], crc)
            pos += got
            left -= got
            if advance is not None:
                advance(pos)
    while left > 0:
        data = fh.read(min(_INFLATE_BLOCK, left))
        if not data:
            raise EOFError(f"{info.filename} is cut short")
        left -= len(data)
        while data:  # bounded output per call: a crafted member cannot inflate a block without limit
            put(data if inflate is None else inflate.decompress(data, _INFLATE_BLOCK))
            data = b"" if inflate is None else inflate.unconsumed_tail
    if inflate is not None:
        put(inflate.flush())
        if not inflate.eof:
            raise EOFError(f"{info.filename}: compressed data end before the stream does")
    if pos != len(flat) or skip:
        raise EOFError(f"{info.filename} holds {pos:,} of its {len(flat):,} bytes")
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    return out


@contextlib.contextmanager
def _npz_errors(where: str) -> Iterator[None]:
    """Whatever reading an npz raises, as one ``LogitsFileError`` line naming the file."""
    try:
        yield
    except LogitsFileError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error, _inflate.error, NotImplementedError) as exc:
        raise LogitsFileError(f"{where}: not a valid .npz (truncated or corrupt zip: {clip(exc)})") from exc
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise LogitsFileError(f"{where}: holds an object (pickled) array, which is not loaded for safety; save "
                                  "sample_ids and sources as str arrays, e.g. np.asarray(ids, dtype=str)") from exc
        raise LogitsFileError(f"{where}: cannot read as .npz (ValueError: {clip(exc)})") from exc
    except MemoryError as exc:
        raise LogitsFileError(f"{where}: too large to load into memory") from exc
    except OSError as exc:
        raise LogitsFileError(f"{where}: cannot read as .npz ({type(exc).__name__}: {clip(exc)})") from exc


class _Stopped(Exception):
    """``LogitsStream.close`` before the logits were all decoded: the decoding thread stops."""


class LogitsStream:
    """One cached-logits file read in one pass, its logits usable row by row while they are decoded.

    The file's small arrays (labels, sample ids, sources) are read and checked at once, found through
    the zip's directory (they follow the logits in the file; a ``HashingReader`` keeps their bytes for
    its digest). A thread then inflates the logits member into its array in file order, and
    ``wait_rows(k)`` returns as soon as its first ``k`` rows are in: a pass over the rows in
    ascending order (the evaluation's setting without TS, ``logit_chunks``) works while the rest
    is decoded, on the other core. ``bundle`` holds that array from the start; use its logits only
    through ``wait_rows`` until ``finish()`` has returned.

    ``finish()`` waits for the end and checks the logits' values and the manifest, with
    ``load_logits``'s messages; a damaged member raises from ``wait_rows`` and ``finish`` alike.
    A member this reader cannot stream (compressed otherwise, Fortran order, logits that are
    converted to float32) is read at once by numpy. ``source`` must be seekable; nothing else may
    read it until ``finish`` or ``close``. ``where`` names the file in messages (default: ``name``,
    cut).
    """

    def __init__(self, source: IO[bytes] | io.RawIOBase, name: str, n_classes: int | None = None, *,
                 max_bytes: int | None = None, manifest: Mapping[str, Any] | None = None,
                 keep_float16: bool = False, where: str | None = None) -> None:
        self.where = where = clip(name) if where is None else where
        fh = cast("IO[bytes]", source)
        with _npz_errors(where):
            magic = fh.read(4)
            fh.seek(0)
        if (what := _not_npz(bytes(magic))) is not None:
            raise LogitsFileError(f"{where}: not a valid .npz file ({what})")
        self._cond = threading.Condition()
        self._done_bytes, self._row_bytes, self._error = 0, 1, cast("BaseException | None", None)
        self._thread: threading.Thread | None = None
        self._stop = False
        self._finished = False
        with _npz_errors(where):
            with zipfile.ZipFile(fh) as zf:
                names = set(zf.namelist())
                members = sorted(n[:-4] for n in names if n.endswith(".npy"))
                missing = [k for k in REQUIRED_ARRAYS if f"{k}.npy" not in names]
                if missing:
                    raise LogitsFileError(f"{where}: missing arrays {missing} (has {quote(members)})")
                keys = list(REQUIRED_ARRAYS) + (["sources"] if "sources.npy" in names else [])
                headers = _check_npz_members(zf, keys, where, max_bytes)
                info = zf.getinfo("logits.npy")
            header = headers["logits"]
            shape, dtype = header[1], header[3]
            _check_logits_header(shape, dtype, where)
            fh.seek(0)
            with np.load(fh, allow_pickle=False) as npz:  # the small arrays first (a damaged one fails here)
                labels, ids = (npz[k] for k in REQUIRED_ARRAYS[1:])
                sources = npz["sources"] if "sources" in keys else None
                decodable = _member_decodable(info, header)
                streamed = decodable and (dtype == np.float32 or (keep_float16 and dtype == np.float16))
                if streamed:
                    # zeros: a row read before it is decoded is zero, never leftover memory; finish() checks the values
                    logits = _zeroed(shape, dtype)
                else:  # cast once whole (float16 to float32, integers): decoded here, then cast
                    logits = _as_float(_read_npy_member(fh, info, header) if decodable else npz["logits"],
                                       keep_float16)
        n, c = shape
        labels, ids, sources = _check_samples(n, c, labels, ids, sources, where)
        if n_classes is not None and c != n_classes:
            raise LogitsFileError(f"{where}: logits have {c} classes, expected {n_classes}")
        manifest = dict(manifest or {})
        _check_manifest(manifest, logits, where)
        self.bundle = LogitsBundle(logits, labels, ids, sources, manifest, Path(name).stem)
        self.n_samples = n
        self._row_bytes = max(1, c * dtype.itemsize)
        if not streamed:  # read and cast above
            self._done_bytes = logits.nbytes
            _check_logit_values(logits, where)
            self._finished = True
            return
        self._values = _LogitValueCheck(logits)  # checked on the decoding thread as rows come in
        self._check_rows = rows_per_chunk(c * 8)
        self._thread = threading.Thread(target=self._decode, args=(fh, info, header, logits),
                                        name="hsc-logits-decode", daemon=True)
        self._thread.start()

    def _decode(self, fh: IO[bytes], info: zipfile.ZipInfo, header: tuple[int, tuple[int, ...], bool, np.dtype],
                out: np.ndarray) -> None:
        try:
            with _npz_errors(self.where):
                _read_npy_member(fh, info, header, out=out, advance=self._advance)
            self._values.rows(self.n_samples)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting threads, raised there
            with self._cond:
                self._error = exc
        with self._cond:
            if self._error is None:
                self._done_bytes = out.nbytes
            self._cond.notify_all()

    def _advance(self, done: int) -> None:
        with self._cond:
            if self._stop:
                raise _Stopped
            self._done_bytes = done
            self._cond.notify_all()
        # the rows now in, checked here beside the pass that uses them (a block of rows at a time), so
        # finish() has nothing left to check
        rows = done // self._row_bytes
        if rows - self._values.done >= self._check_rows:
            self._values.rows(rows)

    def _raise_error(self) -> None:
        err = self._error
        if isinstance(err, LogitsFileError):
            raise LogitsFileError(str(err)) from err  # a new one per raise: several threads may raise it
        if err is not None:
            raise LogitsFileError(f"{self.where}: cannot read as .npz ({type(err).__name__})") from err

    @property
    def decoded_rows(self) -> int:
        """How many leading rows of the logits are decoded so far."""
        with self._cond:
            return min(self._done_bytes // self._row_bytes, self.n_samples)

    def wait_rows(self, stop: int) -> None:
        """Return once the logits' rows ``[0, stop)`` are decoded (LogitsFileError: the file is damaged)."""
        need = min(int(stop), self.n_samples) * self._row_bytes
        with self._cond:
            while self._done_bytes < need and self._error is None:
                self._cond.wait()
            self._raise_error()

    def finish(self) -> LogitsBundle:
        """The whole bundle, checked as ``load_logits`` checks it (once the logits are all decoded)."""
        if not self._finished:
            if self._thread is not None:
                self._thread.join()
            self._raise_error()  # also the size and CRC-32 checks, made after the last row is in
            self._values.raise_if_bad(self.where)
            self._finished = True
        return self.bundle

    def close(self) -> None:
        """Stop decoding (when ``finish`` was not reached) and wait for the thread: the source is free."""
        with self._cond:
            self._stop = True
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> LogitsStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _zeroed(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A zeroed array in an anonymous memory mapping: the system gives its pages zeroed as they are
    first written. ``np.zeros`` asks for transparent huge pages for a large array, and where the
    system cannot find them it stalls on each first write instead (seen here: 2 GB of logits took
    1.3 to 4.4 s to fill that way, 1.4 s mapped; a pass over them ran at the same speed)."""
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size == 0:
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, size), dtype=dtype).reshape(shape)


def _not_npz(magic: bytes) -> str | None:
    # An npz is a zip archive; anything else would reach np.load's pickle fallback.
    if magic.startswith(b"PK"):
        return None
    return "empty" if not magic else "a .npy array" if magic.startswith(b"\x93NUM") else "not a zip archive"


def load_logits(path: str | os.PathLike, require_manifest: bool = False,
                n_classes: int | None = None, *, max_bytes: int | None = None,
                keep_float16: bool = False) -> LogitsBundle:
    """Read and validate a cached-logits file and its manifest.

    Raises LogitsFileError with a specific message when the file is missing, is not an npz, is
    truncated or corrupt, lacks an array, has no samples, wrong shapes, NaN/inf or out-of-bound
    logits or out-of-range labels, when an array's header disagrees with the zip's size record,
    when the arrays inflate to more than ``max_bytes`` (None: no cap), when its manifest is
    malformed or disagrees with the arrays, or when ``n_classes`` is given (e.g. 1000 for
    ImageNet-1k) and the logits have another class count.

    Logits are returned as float32 (float64 files as float64). ``keep_float16`` keeps float16
    files in float16: half the memory (2 GB instead of 4 GB at 100,000 × 10,000), for readers that
    cast a chunk at a time, as the evaluation layer does (its numbers are then the same: float16 →
    float32 is exact).
    """
    path = Path(path)
    where = clip_path(path)  # messages name the file, cut if very long
    if not path.is_file():
        raise LogitsFileError(f"cached logits file {where} not found")
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise LogitsFileError(f"{where}: cannot open ({clip_path(exc)})") from exc
    with fh, LogitsStream(fh, path.name, n_classes, max_bytes=max_bytes, keep_float16=keep_float16,
                          where=where) as stream:
        bundle = stream.finish()
    manifest = _read_manifest(path)
    if require_manifest and not manifest:
        raise LogitsFileError(f"{where}: manifest {clip(manifest_path(path).name)} not found")
    _check_manifest(manifest, bundle.logits, where)
    return replace(bundle, manifest=manifest)


def load_logits_bytes(data: bytes, name: str, n_classes: int | None = None, *,
                      max_bytes: int | None = None, manifest: Mapping[str, Any] | None = None) -> LogitsBundle:
    """Validate an in-memory ``.npz`` (e.g. an upload) exactly like ``load_logits``, without
    touching the disk. Messages name the file as ``name`` (a very long name is cut:
    ``validation.clip``); the bundle's name is its stem.

    ``manifest``: the file's manifest when the caller read it too (e.g. ``manifest_from_bytes``
    of the bytes it hashed), checked against the arrays as ``load_logits`` checks it and kept in
    the bundle; None: no manifest (an upload).
    """
    return load_logits_stream(io.BytesIO(data), name, n_classes, max_bytes=max_bytes, manifest=manifest)


class HashingReader(io.RawIOBase):
    """A seekable binary file whose bytes are hashed (SHA-256) once each, in file order, as a
    reader such as ``zipfile`` passes over them: the digest of a whole file read in one pass.

    Reads that start at or before the first byte not yet hashed (or up to ``GAP_BYTES`` after it:
    the gap is read and hashed then) extend the hashed prefix. Reads further on (a zip's central
    directory and later members' headers, read first) are kept, up to ``AHEAD_BYTES``, and
    ``sha256()`` hashes the rest of the file (its size when opened) from them, reading the file
    only where nothing was read: so the digest is of the bytes the decoder used even when the
    file is rewritten once they are read, and equals ``hashlib.sha256`` of an unchanged file.
    """

    AHEAD_BYTES = 64 << 20
    GAP_BYTES = 64 << 10

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._hash = hashlib.sha256()
        self._hashed = 0  # bytes [0, _hashed) are in the hash
        self._ahead: dict[int, bytes] = {}  # position → bytes read beyond the hashed prefix
        self._ahead_size = 0
        self._end = raw.seek(0, os.SEEK_END)  # the size when opened: the bytes the digest covers
        raw.seek(0)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def read(self, size: int | None = -1) -> bytes:
        start = self._raw.tell()
        data = self._raw.read(-1 if size is None else size)
        self._passed(start, data)
        return data

    def readinto(self, buffer: Any) -> int:
        """Read straight into ``buffer`` (a stored zip member into its array: no copy of its bytes)."""
        start = self._raw.tell()
        view = memoryview(buffer).cast("B")
        got = _read_into(self._raw, view)
        self._passed(start, view[:got])
        return got

    def _passed(self, start: int, data: bytes | memoryview) -> None:
        """Hash ``data``, read at ``start``, where it extends the hashed prefix; else keep it to hash later."""
        if data and self._hashed < start <= self._hashed + self.GAP_BYTES:
            # a few bytes the decoder skips (a zip member's data descriptor): hashed now, in order
            self._raw.seek(self._hashed)
            gap = self._raw.read(start - self._hashed)
            self._raw.seek(start + len(data))
            self._hash.update(gap)
            self._hashed += len(gap)
        if start <= self._hashed < start + len(data):
            self._hash.update(memoryview(data)[self._hashed - start:])
            self._hashed = start + len(data)
        elif start > self._hashed and data and self._ahead_size + len(data) <= self.AHEAD_BYTES:
            self._ahead[start] = bytes(data)
            self._ahead_size += len(data)

    def sha256(self) -> bytes:
        """The SHA-256 of the whole file: the bytes not hashed yet are taken from what was read
        ahead, or read now where nothing was."""
        end = self._end
        while self._hashed < end:
            kept = [(p, d) for p, d in self._ahead.items() if p <= self._hashed < p + len(d)]
            if kept:
                p, d = max(kept, key=lambda item: item[0] + len(item[1]))
                block = d[self._hashed - p:]
            else:
                upto = min([p for p in self._ahead if p > self._hashed] + [end, self._hashed + (1 << 20)])
                self._raw.seek(self._hashed)
                block = self._raw.read(upto - self._hashed)
                if not block:
                    break
            self._hash.update(block)
            self._hashed += len(block)
        return self._hash.digest()


def load_logits_stream(source: IO[bytes] | io.RawIOBase, name: str, n_classes: int | None = None, *,
                       max_bytes: int | None = None, manifest: Mapping[str, Any] | None = None,
                       keep_float16: bool = False) -> LogitsBundle:
    """``load_logits_bytes`` of a seekable binary file, read once (a ``HashingReader`` over a file
    on disk: the evaluation's workers). The logits are decompressed into their array a block at a
    time, never held as bytes beside it; ``keep_float16`` keeps float16 logits float16 (2 GB, not
    4, at 100,000 × 10,000: ``load_logits``). Same checks and messages as ``load_logits``."""
    with LogitsStream(source, name, n_classes, max_bytes=max_bytes, manifest=manifest,
                      keep_float16=keep_float16) as stream:
        return stream.finish()


def list_cached_logits(directory: str | os.PathLike) -> list[Path]:
    """The ``.npz`` files directly in ``directory``, sorted by name (temp and partial files skipped; a
    symbolic link that leads outside ``directory`` is skipped with a warning, as data-set folders are)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    base = directory.resolve()
    found = []
    for p in sorted(directory.glob("*.npz")):
        if not p.is_file() or p.name.startswith("."):
            continue
        if not p.resolve().is_relative_to(base):
            warnings.warn(f"{clip_path(p)}: skipped, it is a link that leads outside {clip_path(directory)}",
                          stacklevel=2)
            continue
        found.append(p)
    return found
