"""Every ``HSC_*`` environment variable the toolkit reads, read here and nowhere else, and the one
working-memory budget that sizes every chunked loop.

Each variable is read when its function is called (not at import), so a test or a launcher can
set it late. A value that does not parse falls back to the default: a bad environment never stops
the dashboard.

================================  =======================================================  ==========================
variable                          meaning                                                  default
================================  =======================================================  ==========================
``HSC_CACHED_LOGITS_DIR``         the folder of cached-logits ``.npz`` files               ``<repo>/cached_logits``
``HSC_DATASETS_DIR``              the folder of user data sets (one sub-folder each)       ``datasets/`` beside the
                                                                                           cached-logits folder
``HSC_IMAGE_DIR``                 ImageNet-1k's image folder (files named by sample id)    ``../shared/imagenet-val-
                                                                                           sample/images`` if present
``HSC_RESULTS_DIR``               the dashboard's model atlas: the folder of per-model      ``../shared/reference``
                                  results tables it lists (and the only one it reads)      if present
``HSC_MEMORY_BUDGET_MB``          working memory of one chunk of any chunked loop          256
``HSC_THREADS``                   threads that work on chunks of one model's logits at     the CPUs, at most 4
                                  once (same numbers for any count; 1: one at a time)
``HSC_MAX_UPLOAD_MB``             the cap on an uploaded logits file's inflated arrays     200
``HSC_MAX_IMAGE_MEGAPIXELS``      the cap on an image's pixels, checked before decoding    40
``HSC_MAX_DECODED_MB``            the cap on what reading one table takes in memory once   2048
                                  decoded (its cells and their text) and on the per-rank
                                  study's working memory (rows × θ vectors), each checked
                                  before the allocation
``HSC_CACHE_DIR``                 the dashboard's on-disk caches, keyed by content (shipped  ``~/.cache/hsc``
                                  models' result rows and intervals, sensitivity tables,
                                  compared curves, shipped images' logits; snapshot links)
``HSC_SNAPSHOT_DIR``              the dashboard's snapshot links (``/s/<key>``): the       ``<cache dir>/
                                  views they name and their cached pages                   snapshots``
``HSC_SYNTHETIC``                 dashboard demo/benchmark: one synthetic model of n       unset
                                  samples instead of the catalog
``HSC_SYNTHETIC_TAXONOMY``        with ``HSC_SYNTHETIC``: the 10,000-leaf synthetic tree   unset
``HSC_DEBUG``                     the ``hsc`` command shows tracebacks; the dashboard's    unset
                                  server dumps its threads' stacks on SIGUSR1
================================  =======================================================  ==========================
"""

from __future__ import annotations

import os
from pathlib import Path

#: The repository root in a checkout (in an installed wheel: the site-packages folder).
REPO_ROOT = Path(__file__).resolve().parent.parent

CACHED_LOGITS_DIR = "HSC_CACHED_LOGITS_DIR"
DATASETS_DIR = "HSC_DATASETS_DIR"
IMAGE_DIR = "HSC_IMAGE_DIR"
RESULTS_DIR = "HSC_RESULTS_DIR"
MEMORY_BUDGET_MB = "HSC_MEMORY_BUDGET_MB"
THREADS = "HSC_THREADS"
MAX_UPLOAD_MB = "HSC_MAX_UPLOAD_MB"
MAX_IMAGE_MEGAPIXELS = "HSC_MAX_IMAGE_MEGAPIXELS"
MAX_DECODED_MB = "HSC_MAX_DECODED_MB"
CACHE_DIR = "HSC_CACHE_DIR"
SNAPSHOT_DIR = "HSC_SNAPSHOT_DIR"
SYNTHETIC = "HSC_SYNTHETIC"
SYNTHETIC_TAXONOMY = "HSC_SYNTHETIC_TAXONOMY"
DEBUG = "HSC_DEBUG"

DEFAULT_MEMORY_BUDGET_MB = 256.0
DEFAULT_MAX_UPLOAD_MB = 200.0
DEFAULT_MAX_IMAGE_MEGAPIXELS = 40.0
DEFAULT_MAX_DECODED_MB = 2048.0


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def is_set(name: str) -> bool:
    """Whether the variable ``name`` holds a non-blank value (e.g. a launcher passes a set one on,
    and supplies its own default only when it is not)."""
    return bool(_text(name))


def _positive(name: str, default: float) -> float:
    """A positive number from the environment, else ``default``."""
    try:
        value = float(_text(name) or default)
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


def cached_logits_dir() -> Path:
    """``$HSC_CACHED_LOGITS_DIR``, else ``<repo>/cached_logits``."""
    raw = _text(CACHED_LOGITS_DIR)
    return Path(raw).expanduser() if raw else REPO_ROOT / "cached_logits"


def datasets_dir() -> Path:
    """``$HSC_DATASETS_DIR``, else ``datasets/`` beside the cached-logits folder (the library, the
    ``hsc`` command and the dashboard all use this one default)."""
    raw = _text(DATASETS_DIR)
    return Path(raw).expanduser() if raw else cached_logits_dir().parent / "datasets"


def image_dir() -> Path | None:
    """``$HSC_IMAGE_DIR`` when set, else None (callers then look in their own default places)."""
    raw = _text(IMAGE_DIR)
    return Path(raw).expanduser() if raw else None


def results_dir() -> Path | None:
    """``$HSC_RESULTS_DIR`` when set, else ``../shared/reference`` beside the repository if it
    exists, else None: the folder whose per-model results tables the model atlas lists."""
    raw = _text(RESULTS_DIR)
    if raw:
        return Path(raw).expanduser()
    default = REPO_ROOT.parent / "shared" / "reference"
    return default if default.is_dir() else None


def cache_dir() -> Path:
    """``$HSC_CACHE_DIR``, else ``~/.cache/hsc``: the dashboard's on-disk caches (created when first written)."""
    raw = _text(CACHE_DIR)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "hsc"


def snapshot_dir() -> Path:
    """``$HSC_SNAPSHOT_DIR``, else ``<cache dir>/snapshots``: where the dashboard keeps the views its
    snapshot links name and their cached pages (created when the first link is made)."""
    raw = _text(SNAPSHOT_DIR)
    return Path(raw).expanduser() if raw else cache_dir() / "snapshots"


def memory_budget_bytes() -> int:
    """Working memory of one chunk of any chunked loop: ``$HSC_MEMORY_BUDGET_MB`` MB, else 256 MB."""
    return int(_positive(MEMORY_BUDGET_MB, DEFAULT_MEMORY_BUDGET_MB) * 2**20)


def chunk_threads() -> int:
    """``$HSC_THREADS`` when a positive integer, else the CPUs (at most 4): how many chunks of one
    model's logits are worked on at once (each holds its own chunk of the memory budget)."""
    try:
        value = int(_text(THREADS) or 0)
    except ValueError:
        value = 0
    return value if value > 0 else max(1, min(4, os.cpu_count() or 1))


def rows_per_chunk(bytes_per_row: float, budget_bytes: int | None = None) -> int:
    """How many rows of ``bytes_per_row`` bytes fit in the memory budget (at least 1).

    >>> rows_per_chunk(1024, budget_bytes=4096)
    4
    >>> rows_per_chunk(10**12, budget_bytes=4096)
    1
    """
    budget = memory_budget_bytes() if budget_bytes is None else int(budget_bytes)
    return max(1, int(budget // max(1.0, float(bytes_per_row))))


#: Bytes of one block of rows that a per-row loop works on at once: small enough to stay in one core's
#: L2 cache (1–2 MB on current CPUs), so a chain of numpy passes over it (scale, max, exp, sum) reads
#: main memory once, not once per pass.
CACHE_BLOCK_BYTES = 1 << 20


def rows_per_block(bytes_per_row: float) -> int:
    """How many rows of ``bytes_per_row`` bytes fit in ``CACHE_BLOCK_BYTES`` (at least 1).

    >>> rows_per_block(40_000)   # a float32 row of 10,000 classes
    26
    """
    return rows_per_chunk(bytes_per_row, CACHE_BLOCK_BYTES)


def max_upload_bytes() -> int:
    """The cap on an upload's inflated arrays: ``$HSC_MAX_UPLOAD_MB`` MB when positive, else 200 MB."""
    return int(_positive(MAX_UPLOAD_MB, DEFAULT_MAX_UPLOAD_MB) * 1_000_000)


def max_image_pixels() -> int:
    """The pixel cap: ``$HSC_MAX_IMAGE_MEGAPIXELS`` million when positive, else 40 MP."""
    return int(_positive(MAX_IMAGE_MEGAPIXELS, DEFAULT_MAX_IMAGE_MEGAPIXELS) * 1_000_000)


def max_decoded_bytes() -> int:
    """The cap on one table's decoded size and one per-rank study's working memory:
    ``$HSC_MAX_DECODED_MB`` MB when positive, else 2,048 MB. A file's bytes say little of this (a
    Parquet file of 500 kB can decode to gigabytes), so readers check it before they allocate."""
    return int(_positive(MAX_DECODED_MB, DEFAULT_MAX_DECODED_MB) * 2**20)


def synthetic_samples() -> int | None:
    """Samples of the dashboard's synthetic model when ``HSC_SYNTHETIC`` is a positive integer."""
    try:
        n = int(_text(SYNTHETIC))
    except ValueError:
        return None
    return n if n > 0 else None


def synthetic_taxonomy() -> bool:
    """``HSC_SYNTHETIC_TAXONOMY`` is ``1``, ``true``, ``yes`` or ``on``."""
    return _text(SYNTHETIC_TAXONOMY).lower() in ("1", "true", "yes", "on")


def debug() -> bool:
    """``HSC_DEBUG`` is set: the command line shows tracebacks, and the dashboard's server writes every
    thread's stack to its stderr on SIGUSR1 (app.py)."""
    return bool(_text(DEBUG))
