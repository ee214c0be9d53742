"""Atomic file writes: a reader sees the old file or the whole new one, never half of either.

Each writer writes a temp file beside the target, fsyncs it, renames it over the target and fsyncs
the directory (so the rename survives a power cut); on any error, KeyboardInterrupt included, the
old file stays and no temp file is left. The logits files, result caches and the CLI's outputs
all go through here.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through ``write(fileobj)`` to a temp file beside ``path``, fsync, rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Also on KeyboardInterrupt: the old file stays and no temp file is left behind.
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Make the rename itself durable; not every platform can open a directory.
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_npz_atomic(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], compress: bool = True) -> None:
    """Write ``arrays`` as an ``.npz`` to ``path``, atomically (zip-deflated unless ``compress=False``)."""
    save = np.savez_compressed if compress else np.savez

    def write(fh: IO[bytes]) -> None:
        save(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle

    atomic_write(Path(path), write)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Pretty JSON to ``path``, atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """UTF-8 ``text`` to ``path``, atomically (a reader sees the old file or the whole new one)."""
    def write(fh: IO[bytes]) -> None:
        fh.write(text.encode("utf-8"))

    atomic_write(Path(path), write)


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """``data`` to ``path``, atomically (a reader sees the old file or the whole new one)."""
    def write(fh: IO[bytes]) -> None:
        fh.write(data)

    atomic_write(Path(path), write)


__all__ = ["atomic_write", "write_bytes_atomic", "write_json_atomic", "write_npz_atomic", "write_text_atomic"]
