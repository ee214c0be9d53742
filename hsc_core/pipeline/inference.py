"""Live inference: the logits of one image (e.g. an upload), computed on the CPU.

The model and its transform are loaded once per name and kept (``functools.lru_cache``), so
only the first call for a model is slow.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np
import torch
from PIL import Image

from ..datasets.images import ImageInput, ImageReadError, open_image_safely

DEFAULT_MODEL = "efficientnet_lite0"

# The decoding rules (pixel cap checked before decoding, 16-bit / palette / CMYK / alpha → 8-bit RGB)
# live in hsc_core.datasets.images, shared with the dashboard's display of images.
__all__ = ["ImageReadError", "read_image", "classify_image", "clear_model_cache"]


def read_image(image: ImageInput, name: str | None = None) -> Image.Image:
    """Decode ``image`` (bytes, path or PIL image) into an 8-bit RGB PIL image.

    ``hsc_core.datasets.images.open_image_safely``: refuses images above the pixel cap
    (``HSC_MAX_IMAGE_MEGAPIXELS``, default 40 MP) before decoding them, applies the EXIF
    orientation, composites alpha onto white and converts 16-bit greyscale, palette and CMYK
    images. Raises ImageReadError, naming ``name`` or the file, when it cannot.
    """
    return open_image_safely(image, name=name)


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
