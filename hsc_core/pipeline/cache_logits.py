"""``hsc cache-logits`` as it was imported before the split into ``hsc_core.pipeline.caching``.

The code lives in ``caching`` (``samples``, ``decoding``, ``store``, ``runner``, ``cli``); this
module keeps the public names importable from here and ``python -m hsc_core.pipeline.cache_logits``
(which ``torchrun -m`` needs) working. New code should import from ``caching``.
"""

from __future__ import annotations

import sys

from .caching.cli import build_parser, configure_parser, main, run
from .caching.decoding import (
    DECODE_CHECK_TOLERANCE,
    EncodedImageDataset,
    ImageDataset,
    check_device_decode,
    collate,
    collate_encoded,
    decode_batch,
)
from .caching.errors import CacheRunError, DatasetError
from .caching.options import CacheOptions
from .caching.runner import (
    amp_dtype,
    cache_logits,
    ray_cache_one,
    resolve_device,
    run_one,
)
from .caching.samples import (
    IMAGE_EXTENSIONS,
    SampleList,
    make_synthetic_jpegs,
    read_image_folder,
    read_labels_csv,
    read_samples,
)
from .caching.store import (
    PARTIAL_META,
    check_writable,
    existing_output,
    output_name,
    partial_dir,
)
from .inference import read_image

__all__ = [
    "DECODE_CHECK_TOLERANCE",
    "IMAGE_EXTENSIONS",
    "PARTIAL_META",
    "CacheOptions",
    "CacheRunError",
    "DatasetError",
    "EncodedImageDataset",
    "ImageDataset",
    "SampleList",
    "amp_dtype",
    "build_parser",
    "cache_logits",
    "check_device_decode",
    "check_writable",
    "collate",
    "collate_encoded",
    "configure_parser",
    "decode_batch",
    "existing_output",
    "main",
    "make_synthetic_jpegs",
    "output_name",
    "partial_dir",
    "ray_cache_one",
    "read_image",
    "read_image_folder",
    "read_labels_csv",
    "read_samples",
    "resolve_device",
    "run",
    "run_one",
]

if __name__ == "__main__":
    sys.exit(main())
