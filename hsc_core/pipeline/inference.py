"""Live inference: the logits of one image (e.g. an upload), computed on the CPU.

The model and its transform are loaded once per name and kept (``functools.lru_cache``), so
only the first call for a model is slow.
"""

from __future__ import annotations

import io
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

DEFAULT_MODEL = "efficientnet_lite0"

# Decompression-bomb protection stays on (PIL's default limit). Uploads larger than that are refused.


class ImageReadError(ValueError):
    """The input is not a readable image."""


ImageInput = bytes | bytearray | memoryview | Image.Image | str | os.PathLike


def read_image(image: ImageInput, name: str | None = None) -> Image.Image:
    """Decode ``image`` (bytes, path or PIL image) into an RGB PIL image.

    It applies the EXIF orientation (phone photos are often stored rotated). Alpha is
    composited onto white, not dropped, because transparent pixels usually hold black. Grey,
    palette and CMYK images are converted to RGB. Raises ImageReadError, naming ``name`` or
    the path, when the data cannot be decoded.
    """
    label = name or (str(image) if isinstance(image, (str, os.PathLike)) else "image")
    try:
        if isinstance(image, Image.Image):
            img = image
        elif isinstance(image, (bytes, bytearray, memoryview)):
            if len(image) == 0:
                raise ImageReadError(f"{label}: empty image data")
            img = Image.open(io.BytesIO(bytes(image)))
        elif isinstance(image, (str, os.PathLike)):
            if not Path(image).is_file():
                raise ImageReadError(f"{label}: image file not found")
            img = Image.open(image)
        else:
            raise ImageReadError(f"{label}: expected bytes, a path or a PIL image, got {type(image).__name__}")
        # load() forces the full decode here, so a truncated file fails now, not in the transform.
        img.load()
        img = ImageOps.exif_transpose(img)
        return _to_rgb(img)
    except ImageReadError:
        raise
    except UnidentifiedImageError as exc:
        raise ImageReadError(f"{label}: cannot read image (not in a format Pillow can decode, "
                             "e.g. JPEG, PNG, WebP, BMP, GIF, TIFF)") from exc
    except Image.DecompressionBombError as exc:
        raise ImageReadError(f"{label}: cannot read image (too large: {exc})") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageReadError(f"{label}: cannot read image ({type(exc).__name__}: {exc})") from exc


def _to_rgb(img: Image.Image) -> Image.Image:
    if img.mode == "RGB":
        return img
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit greyscale: scale to 8 bits before RGB (PIL's convert would clip at 255).
        arr = np.asarray(img, dtype=np.float64)
        hi = arr.max() if arr.size else 0.0
        arr = (arr / hi * 255.0) if hi > 255 else arr
        img = Image.fromarray(arr.clip(0, 255).astype(np.uint8), mode="L")
    return img.convert("RGB")


@lru_cache(maxsize=4)
def _cached_model(model_name: str):
    from .models import load_model

    model, transform, info = load_model(model_name, device="cpu")
    # One lock per model: torch modules are safe to share, but keep a web server's threads from
    # oversubscribing the two CPU cores with concurrent forward passes.
    return model, transform, info, threading.Lock()


def classify_image(image: ImageInput, model_name: str = DEFAULT_MODEL) -> np.ndarray:
    """Return the float32 logits (num_classes,) of ``model_name`` for one image, on the CPU.

    Raises ImageReadError for data that is not a decodable image and models.UnknownModelError for
    an unknown model name.
    """
    img = read_image(image)
    model, transform, _info, lock = _cached_model(model_name)
    x = transform(img).unsqueeze(0)
    with lock, torch.inference_mode():
        logits = model(x)
    return logits[0].float().numpy().astype(np.float32)


def clear_model_cache() -> None:
    """Forget the loaded models (frees their memory)."""
    _cached_model.cache_clear()
