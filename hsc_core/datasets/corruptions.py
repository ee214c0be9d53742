"""ImageNet-C corruptions of one image: Gaussian noise, Gaussian blur and JPEG compression at
severities 1–5, with the constants and formulas of Hendrycks & Dietterich, "Benchmarking Neural
Network Robustness to Common Corruptions and Perturbations", ICLR 2019
(https://github.com/hendrycks/robustness, ``ImageNet-C/create_c/make_imagenet_c.py``).

Why not the ``imagecorruptions`` wheel (1.1.2): it imports ``pkg_resources`` at import time, which
current setuptools no longer ships, so it does not import in this environment. The tests compare
these functions with its code (``tests/test_corruptions.py``), which is the same as the paper's.

One difference on purpose: Gaussian noise draws from a ``numpy.random.Generator`` seeded from the
image's own pixels and the severity (``noise_seed``), not from the global RNG, so a corrupted image
is the same whatever order or batch it is processed in, and a cached run can be regenerated exactly.

>>> import numpy as np
>>> img = np.full((8, 8, 3), 128, dtype=np.uint8)
>>> corrupt(img, "gaussian_blur", 3).shape
(8, 8, 3)
>>> int(corrupt(img, "gaussian_blur", 3)[0, 0, 0])   # a flat image stays flat under blur
128
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable

import numpy as np

from ..core.validation import quote

__all__ = ["CORRUPTIONS", "SEVERITIES", "CorruptionError", "check_corruption", "corrupt", "noise_seed"]

SEVERITIES = (1, 2, 3, 4, 5)

# The per-severity constants of make_imagenet_c.py (Hendrycks & Dietterich 2019).
_NOISE_SCALE = (0.08, 0.12, 0.18, 0.26, 0.38)  # std of the added noise, pixels in [0, 1]
_BLUR_SIGMA = (1, 2, 3, 4, 6)  # skimage.filters.gaussian sigma, in pixels
_JPEG_QUALITY = (25, 18, 15, 10, 7)  # PIL JPEG quality


class CorruptionError(ValueError):
    """An unknown corruption name or a severity outside 1–5."""


def noise_seed(image: np.ndarray, severity: int, seed: int = 0) -> int:
    """A seed drawn from the image's pixels, the severity and ``seed``: the same image always gets
    the same noise."""
    return zlib.crc32(np.ascontiguousarray(image).tobytes()) ^ (severity << 24) ^ (seed & 0xFFFFFF)


def _gaussian_noise(x: np.ndarray, severity: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(noise_seed(x, severity, seed))
    y = x / 255.0
    return np.clip(y + rng.normal(size=y.shape, scale=_NOISE_SCALE[severity - 1]), 0, 1) * 255


def _gaussian_blur(x: np.ndarray, severity: int, seed: int) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    # skimage.filters.gaussian(x, sigma, channel_axis=-1) as ImageNet-C calls it: each channel
    # filtered alone, edges by 'nearest', kernel truncated at 4 sigma.
    sigma = _BLUR_SIGMA[severity - 1]
    y = gaussian_filter(x / 255.0, sigma=(sigma, sigma, 0), mode="nearest", truncate=4.0)
    return np.clip(y, 0, 1) * 255


def _jpeg_compression(x: np.ndarray, severity: int, seed: int) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(x).save(buf, "JPEG", quality=_JPEG_QUALITY[severity - 1])
    buf.seek(0)
    with Image.open(buf) as img:
        return np.asarray(img.convert("RGB"), dtype=np.float64)


_FUNCS: dict[str, Callable[[np.ndarray, int, int], np.ndarray]] = {
    "gaussian_noise": _gaussian_noise,
    "gaussian_blur": _gaussian_blur,
    "jpeg_compression": _jpeg_compression,
}
CORRUPTIONS = tuple(_FUNCS)
#: ImageNet-C's constant per corruption and severity 1..5 (noise σ on [0, 1], blur σ in pixels, JPEG quality).
SEVERITY_CONSTANTS: dict[str, tuple[float, ...]] = {
    "gaussian_noise": _NOISE_SCALE, "gaussian_blur": _BLUR_SIGMA, "jpeg_compression": _JPEG_QUALITY,
}


def check_corruption(name: object, severity: object) -> None:
    """Raise CorruptionError (one line) unless ``name`` is in CORRUPTIONS and ``severity`` in 1–5."""
    if name not in _FUNCS:
        raise CorruptionError(f"unknown corruption {quote(name)}; known: {', '.join(CORRUPTIONS)}")
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer) or severity not in SEVERITIES:
        raise CorruptionError(f"severity must be an integer from 1 to 5, got {quote(severity)}")


def corrupt(image: np.ndarray, name: str, severity: int, *, seed: int = 0) -> np.ndarray:
    """The image corrupted by ``name`` at ``severity``.

    Parameters
    ----------
    image : uint8 array (H, W, 3)
        RGB pixels; ImageNet-C corrupts the resized, centre-cropped network input.
    name : {"gaussian_noise", "gaussian_blur", "jpeg_compression"}
    severity : int, 1–5
    seed : int
        Mixed into the noise seed (``noise_seed``); only Gaussian noise is random.

    Returns
    -------
    uint8 array (H, W, 3)
        Cut to uint8 as ``imagecorruptions.corrupt`` does (``np.uint8`` of values clipped to [0, 255]).
    """
    check_corruption(name, severity)
    x = np.asarray(image)
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[2] != 3:
        raise CorruptionError(f"image must be uint8 (H, W, 3), got {x.dtype} {x.shape}")
    return np.uint8(np.clip(_FUNCS[name](x, int(severity), seed), 0, 255))
