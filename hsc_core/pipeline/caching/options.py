"""``CacheOptions``: every setting of one caching run, checked once when it is made.

Torch-free on purpose: the CLI builds and validates the options before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.validation import quote
from ...datasets.corruptions import CORRUPTIONS, CorruptionError, check_corruption

__all__ = ["AMP_DTYPES", "CORRUPTIONS", "DECODE_MODES", "DEVICES", "QUANTIZE_MODES", "TTA_MODES", "CacheOptions"]

DEVICES = ("auto", "cpu", "cuda")
DECODE_MODES = ("auto", "gpu", "cpu")
AMP_DTYPES = ("float16", "bfloat16")
TTA_MODES = ("flip", "multicrop")  # variants.py: 2 views (image, mirror) or 5 crops (corners, centre)
QUANTIZE_MODES = ("int8",)  # torch.ao dynamic post-training quantization of the Linear layers
# A chunk is this many batches unless chunk_size says otherwise: large enough that the per-chunk
# file costs nothing, small enough that an interrupted run loses little.
BATCHES_PER_CHUNK = 8


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_optional_bool(value: Any) -> bool:
    return value is None or isinstance(value, bool)


# (field, test, what it must be): one table, so every bad field gets the same one-line ValueError.
_CHECKS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("batch_size", lambda v: _is_int(v) and 1 <= v <= 65_536, "an integer from 1 to 65,536"),
    ("workers", lambda v: _is_int(v) and 0 <= v <= 256, "an integer from 0 to 256"),
    ("device", lambda v: isinstance(v, str) and v in DEVICES, f"one of {', '.join(DEVICES)}"),
    ("amp", _is_optional_bool, "None, True or False"),
    ("amp_dtype_name", lambda v: v is None or (isinstance(v, str) and v in AMP_DTYPES),
     f"None or one of {', '.join(AMP_DTYPES)}"),
    ("channels_last", _is_optional_bool, "None, True or False"),
    ("pretrained", lambda v: isinstance(v, bool), "True or False"),
    ("chunk_size", lambda v: v is None or (_is_int(v) and 1 <= v <= 10_000_000),
     "None or an integer from 1 to 10,000,000"),
    ("decode", lambda v: isinstance(v, str) and v in DECODE_MODES, f"one of {', '.join(DECODE_MODES)}"),
    ("progress", lambda v: isinstance(v, bool), "True or False"),
    ("dataset_info", lambda v: v is None or isinstance(v, dict), "None or a dict"),
    ("tta", lambda v: v is None or (isinstance(v, str) and v in TTA_MODES), f"None or one of {', '.join(TTA_MODES)}"),
    ("image_size", lambda v: v is None or (_is_int(v) and 32 <= v <= 1024), "None or an integer from 32 to 1024"),
    ("mc_dropout", lambda v: v is None or (_is_int(v) and 2 <= v <= 1000), "None or an integer from 2 to 1000"),
    ("mc_dropout_rate", lambda v: isinstance(v, float | int) and not isinstance(v, bool) and 0 < v < 1,
     "a number strictly between 0 and 1"),
    ("quantize", lambda v: v is None or (isinstance(v, str) and v in QUANTIZE_MODES),
     f"None or one of {', '.join(QUANTIZE_MODES)}"),
    ("seed", lambda v: _is_int(v) and v >= 0, "an integer of at least 0"),
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
    tta : {"flip", "multicrop"} or None
        Test-time augmentation (``variants``): the image and its mirror, or five crops (four corners
        and the centre) of the short-side-resized square; the stored logits are the log of the mean
        softmax probability over the views.
    image_size : int or None
        Input resolution instead of the model's own (the resize keeps the model's crop_pct).
    mc_dropout : int or None
        Monte-Carlo dropout (Gal & Ghahramani 2016): this many stochastic passes of dropout at
        ``mc_dropout_rate`` before the classifier; log of the mean softmax over the passes.
    mc_dropout_rate : float
        The dropout probability of MC dropout (0.2: EfficientNet-Lite0/1's training dropout).
    quantize : {"int8"} or None
        int8 dynamic post-training quantization (``torch.ao``) of the Linear layers; CPU only.
    corruption, severity : str and int, or None
        An ImageNet-C corruption (``datasets.corruptions``) applied to each network input; shifted data.
    seed : int
        Seed of the random parts (MC-dropout masks, Gaussian noise); fixed so a rerun is identical.
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
    tta: str | None = None
    image_size: int | None = None
    mc_dropout: int | None = None
    mc_dropout_rate: float = 0.2
    quantize: str | None = None
    corruption: str | None = None
    severity: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name, ok, expected in _CHECKS:
            value = getattr(self, name)
            if not ok(value):
                # repr squeezed onto one line: the CLI prints the message as its one error line
                raise ValueError(f"{name} must be {expected}, got {' '.join(quote(value).split())}")
        if (self.corruption is None) != (self.severity is None):
            raise ValueError("corruption and severity go together: give both or neither")
        if self.corruption is not None:
            try:
                check_corruption(self.corruption, self.severity)
            except CorruptionError as exc:
                raise ValueError(str(exc)) from None
        if self.tta is not None and self.mc_dropout is not None:
            raise ValueError("tta and mc_dropout are separate variants: give one of them")
        if self.quantize is not None and self.device == "cuda":
            raise ValueError("quantize int8 runs on the CPU only (torch.ao dynamic quantization); use --device cpu")
        if self.dataset_info is not None:
            object.__setattr__(self, "dataset_info", dict(self.dataset_info))  # frozen: copy, do not alias

    @property
    def images_per_chunk(self) -> int:
        """``chunk_size``, or ``BATCHES_PER_CHUNK`` batches when it is None."""
        return self.chunk_size or self.batch_size * BATCHES_PER_CHUNK

    @property
    def variant_tag(self) -> str:
        """A short file-name tag of the variant (``tta-flip``, ``size260``, ``gaussian_blur-3`` …); "" for none."""
        parts = []
        if self.tta:
            parts.append(f"tta-{self.tta}")
        if self.image_size:
            parts.append(f"size{self.image_size}")
        if self.mc_dropout:
            parts.append(f"mcdropout{self.mc_dropout}")
        if self.quantize:
            parts.append(self.quantize)
        if self.amp and self.amp_dtype_name:
            parts.append({"bfloat16": "bf16", "float16": "fp16"}[self.amp_dtype_name])
        if self.corruption:
            parts.append(f"{self.corruption}-{self.severity}")
        return "_".join(parts)

    @property
    def is_variant(self) -> bool:
        """True when an option changes what the model computes or sees (the manifest's ``variant``)."""
        explicit_amp = bool(self.amp and self.amp_dtype_name)  # asked for by name; CUDA's default AMP is not a variant
        return explicit_amp or any(v is not None for v in (self.tta, self.image_size, self.mc_dropout, self.quantize,
                                                           self.corruption))
