"""Images named by untrusted text (sample ids of an uploaded file, user uploads), read safely.

Two rules keep a hostile name or file from reaching anything else on the server:

* ``safe_image_path`` only returns a file *inside* the image folder: a plain relative name
  (sub-folders allowed, e.g. ImageFolder's ``n01440764/x.JPEG``) with an image extension. Absolute
  paths, ``..``, drive letters, back-slashes, NUL bytes and symlinks that lead out of the folder
  give None. The caller shows "no image" and never learns whether any other file exists.
* ``open_image_safely`` decodes only images (Pillow), checks the pixel count from the header
  *before* decoding (a 12000 × 12000 PNG is 170 kB on disk and 430 MB decoded) and returns
  8-bit RGB, converting 16-bit greyscale, palette, CMYK and alpha images, so every decoded image
  can be displayed and fed to a model.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .. import config
from ..core.validation import clip, clip_path

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff"})
# 40 MP: every phone or camera photo up to 8K (7680 × 4320 = 33 MP) fits; decoded as RGB that is
# 120 MB, and classification only needs ~260 × 260 pixels of it.
MAX_IMAGE_PIXELS = int(config.DEFAULT_MAX_IMAGE_MEGAPIXELS * 1_000_000)
MAX_PIXELS_ENV = config.MAX_IMAGE_MEGAPIXELS


class ImageReadError(ValueError):
    """The input is not a readable image (or is larger than allowed)."""


ImageInput = bytes | bytearray | memoryview | Image.Image | str | os.PathLike


def max_image_pixels() -> int:
    """The pixel cap: ``$HSC_MAX_IMAGE_MEGAPIXELS`` million when set to a positive number, else 40 MP
    (read by :func:`hsc_core.config.max_image_pixels`)."""
    return config.max_image_pixels()


def safe_image_path(image_dir: str | os.PathLike | None, sample_id: object) -> Path | None:
    """The image file ``sample_id`` names inside ``image_dir``, or None.

    None when the folder is missing, the id is not a non-empty str, is absolute, contains ``..``,
    a back-slash, a drive or NUL, lacks an image extension, does not exist, or resolves (through
    symlinks) outside the folder.
    """
    if image_dir is None or not isinstance(sample_id, str) or not sample_id or len(sample_id) > 4096:
        return None
    if "\x00" in sample_id or "\\" in sample_id:
        return None
    posix = PurePosixPath(sample_id)
    if posix.is_absolute() or PureWindowsPath(sample_id).drive or any(p in ("..", "") for p in sample_id.split("/")):
        return None
    if posix.suffix.lower() not in IMAGE_SUFFIXES:
        return None
    try:
        root = Path(image_dir).resolve(strict=True)
        target = (root / posix).resolve(strict=True)
    except (OSError, RuntimeError):  # missing file, symlink loop
        return None
    if not target.is_relative_to(root) or not target.is_file() or target.suffix.lower() not in IMAGE_SUFFIXES:
        return None
    return target


def open_image_safely(image: ImageInput, name: str | None = None, max_pixels: int | None = None) -> Image.Image:
    """Decode ``image`` (bytes, a path or a PIL image) into an 8-bit RGB PIL image.

    The pixel count is checked from the header before any decoding (``max_pixels``, default
    ``max_image_pixels()``). EXIF orientation is applied (phone photos are often stored rotated);
    alpha is composited onto white (transparent pixels usually hold black); 16/32-bit greyscale
    is scaled to 8 bits; palette, CMYK, greyscale become RGB. Raises ImageReadError naming
    ``name`` (never a server path unless the caller passes one) when it cannot.
    """
    label = clip_path(name or (Path(image).name if isinstance(image, (str, os.PathLike)) else "image"))
    limit = max_image_pixels() if max_pixels is None else int(max_pixels)
    try:
        if isinstance(image, Image.Image):
            img = image
        elif isinstance(image, (bytes, bytearray, memoryview)):
            if len(image) == 0:
                raise ImageReadError(f"{label}: empty image data")
            img = _open(io.BytesIO(bytes(image)))
        elif isinstance(image, (str, os.PathLike)):
            if not Path(image).is_file():
                raise ImageReadError(f"{label}: image file not found")
            img = _open(image)
        else:
            raise ImageReadError(f"{label}: expected bytes, a path or a PIL image, got {type(image).__name__}")
        width, height = img.size
        if width * height > limit:
            raise ImageReadError(
                f"{label}: image is {width:,} × {height:,} = {width * height / 1e6:.0f} megapixels, more than the "
                f"{limit / 1e6:.0f} allowed (set {MAX_PIXELS_ENV} to change it); resize it first")
        # load() forces the full decode here, so a truncated file fails now, not in a transform.
        img.load()
        img = ImageOps.exif_transpose(img)
        return to_rgb8(img)
    except ImageReadError:
        raise
    except UnidentifiedImageError as exc:
        raise ImageReadError(f"{label}: cannot read image (not in a format Pillow can decode, "
                             "e.g. JPEG, PNG, WebP, BMP, GIF, TIFF)") from exc
    except Image.DecompressionBombError as exc:
        raise ImageReadError(f"{label}: cannot read image (too large: {clip(exc, 200)})") from exc
    except (OSError, SyntaxError, ValueError, MemoryError) as exc:
        raise ImageReadError(f"{label}: cannot read image ({type(exc).__name__}: {clip(exc, 200)})") from exc


def _open(source) -> Image.Image:
    # Pillow warns above its own 89 MP limit; the explicit cap below decides instead.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        return Image.open(source)


def to_rgb8(img: Image.Image) -> Image.Image:
    """``img`` as 8-bit RGB (alpha over white; 16/32-bit greyscale scaled, not clipped, to 8 bits)."""
    if img.mode == "RGB":
        return img
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if img.mode.startswith("I") or img.mode == "F":
        # 16/32-bit integer or float greyscale: PIL's convert would clip everything above 255.
        arr = np.asarray(img, dtype=np.float64)
        lo = float(arr.min()) if arr.size else 0.0
        hi = float(arr.max()) if arr.size else 0.0
        if hi > 255 or lo < 0:
            arr = (arr - min(lo, 0.0)) / max(hi - min(lo, 0.0), 1e-12) * 255.0
        img = Image.fromarray(arr.clip(0, 255).astype(np.uint8))  # 2-D uint8 → mode "L"
    return img.convert("RGB")


def display_image(img: Image.Image, max_side: int = 1024) -> Image.Image:
    """A copy of ``img`` no larger than ``max_side`` on its long side, for showing in a page."""
    if max(img.size) <= max_side:
        return img
    small = img.copy()
    small.thumbnail((max_side, max_side))
    return small
