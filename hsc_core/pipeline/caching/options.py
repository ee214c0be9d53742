"""``CacheOptions``: every setting of one caching run, checked once when it is made.

Torch-free on purpose: the CLI builds and validates the options before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.validation import quote

__all__ = ["AMP_DTYPES", "DECODE_MODES", "DEVICES", "CacheOptions"]

DEVICES = ("auto", "cpu", "cuda")
DECODE_MODES = ("auto", "gpu", "cpu")
AMP_DTYPES = ("float16", "bfloat16")
# A chunk is this many batches unless chunk_size says otherwise: large enough that the per-chunk
# file costs nothing, small enough that an interrupted run loses little.
BATCHES_PER_CHUNK = 8


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_optional_bool(value: Any) -> bool:
    return value is None or isinstance(value, bool)


# (field, test, what it must be): one table, so every bad field gets the same one-line ValueError.
_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("batch_size", lambda v: _is_int(v) and v >= 1, "an integer of at least 1"),
    ("workers", lambda v: _is_int(v) and v >= 0, "an integer of at least 0"),
    ("device", lambda v: isinstance(v, str) and v in DEVICES, f"one of {', '.join(DEVICES)}"),
    ("amp", _is_optional_bool, "None, True or False"),
    ("amp_dtype_name", lambda v: v is None or (isinstance(v, str) and v in AMP_DTYPES),
     f"None or one of {', '.join(AMP_DTYPES)}"),
    ("channels_last", _is_optional_bool, "None, True or False"),
    ("pretrained", lambda v: isinstance(v, bool), "True or False"),
    ("chunk_size", lambda v: v is None or (_is_int(v) and v >= 1), "None or an integer of at least 1"),
    ("decode", lambda v: isinstance(v, str) and v in DECODE_MODES, f"one of {', '.join(DECODE_MODES)}"),
    ("progress", lambda v: isinstance(v, bool), "True or False"),
    ("dataset_info", lambda v: v is None or isinstance(v, dict), "None or a dict"),
)


@dataclass(frozen=True, kw_only=True)
class CacheOptions:
    """How to run one model over the images (``cache_logits``); the defaults are the CLI's.

    Attributes
    ----------
    batch_size : int
        Images per forward pass (N of the uint8 (N, 3, H, W) batches), at least 1.
    workers : int
        DataLoader worker processes; 0 reads and decodes in the main process.
    device : {"auto", "cpu", "cuda"}
        ``auto`` is the local CUDA device when there is one, else the CPU.
    amp : bool or None
        Autocast mixed precision; None (auto) is on for CUDA, off for the CPU.
    amp_dtype_name : {"float16", "bfloat16"} or None
        The autocast dtype; None is float16 on CUDA, bfloat16 on the CPU.
    channels_last : bool or None
        channels_last memory format; None means on.
    pretrained : bool
        False gives random weights (benchmarks, tests: no download).
    chunk_size : int or None
        Images per resumable chunk, at least 1; None is ``BATCHES_PER_CHUNK`` batches.
    decode : {"auto", "gpu", "cpu"}
        Where JPEGs are decoded: ``cpu`` with PIL in the workers, ``gpu`` on the CUDA device,
        ``auto`` on the device when the model runs on CUDA and its self-check passes.
    progress : bool
        Show a progress bar (on rank 0 only).
    dataset_info : dict or None
        The manifest's ``dataset`` entry (JSON-ready); None describes the samples
        (``samples.describe_dataset``). Kept as a copy, so the caller's dict may change later.
    """

    batch_size: int = 64
    workers: int = 2
    device: str = "auto"
    amp: bool | None = None
    amp_dtype_name: str | None = None
    channels_last: bool | None = None
    pretrained: bool = True
    chunk_size: int | None = None
    decode: str = "auto"
    progress: bool = True
    dataset_info: dict[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        for name, ok, expected in _CHECKS:
            value = getattr(self, name)
            if not ok(value):
                # repr squeezed onto one line: the CLI prints the message as its one error line
                raise ValueError(f"{name} must be {expected}, got {' '.join(quote(value).split())}")
        if self.dataset_info is not None:
            object.__setattr__(self, "dataset_info", dict(self.dataset_info))  # frozen: copy, do not alias

    @property
    def images_per_chunk(self) -> int:
        """``chunk_size``, or ``BATCHES_PER_CHUNK`` batches when it is None."""
        return self.chunk_size or self.batch_size * BATCHES_PER_CHUNK
