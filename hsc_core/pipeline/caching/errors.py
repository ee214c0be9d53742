"""The two errors of a caching run; each carries a one-line message that the CLI prints as is."""

from __future__ import annotations

__all__ = ["CacheRunError", "DatasetError"]


class DatasetError(ValueError):
    """The image list is malformed (bad CSV, unknown wnid, missing image folder or files)."""


class CacheRunError(RuntimeError):
    """The run cannot go on as asked (no CUDA, a partial folder from another run, bad outputs)."""
