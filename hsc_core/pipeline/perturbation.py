"""Live perturbation: an image degraded step by step (blur or noise) and the model's logits at
every step, for watching the predicted path climb the hierarchy as the image gets worse.

The corruptions are ImageNet-C's Gaussian blur and Gaussian noise at severities 1–5 (Hendrycks &
Dietterich, "Benchmarking Neural Network Robustness to Common Corruptions and Perturbations",
ICLR 2019), with the constants of their reference package ``imagecorruptions`` (blur σ = 1, 2, 3,
4, 6 px; noise σ = .08, .12, .18, .26, .38 of the 0–1 range), applied like ImageNet-C to the image
at the network's scale (short side 256 px, as ImageNet-C's 224 crops come from). Severity 0 is the
image itself. ``tests/test_perturbation.py`` checks both against ``imagecorruptions`` / scikit-image.

All severities go through the network as one batch (``degraded_logits``): on 2 CPU cores one
EfficientNet-Lite0 step costs well under a second (``bench/perturbation_bench.py``).
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from ..datasets.corruptions import SEVERITY_CONSTANTS, corrupt
from ..datasets.images import ImageInput, open_image_safely
from .inference import _cached_model

__all__ = ["CORRUPTIONS", "KINDS", "SEVERITIES", "degrade", "degraded_images", "degraded_logits", "network_scale"]

#: The live view's two corruptions: the shifted-data pipeline's own (``datasets.corruptions``).
KINDS = {"blur": "gaussian_blur", "noise": "gaussian_noise"}
#: ImageNet-C's constants per kind, severity 1..5 (blur σ in pixels, noise σ on [0, 1]).
CORRUPTIONS: dict[str, tuple[float, ...]] = {
    kind: tuple(float(c) for c in SEVERITY_CONSTANTS[name]) for kind, name in KINDS.items()
}
SEVERITIES = tuple(range(6))  # 0 = the clean image
SHORT_SIDE = 256


def network_scale(image: Image.Image, short_side: int = SHORT_SIDE) -> Image.Image:
    """``image`` resized (bicubic, antialiased) so its short side is ``short_side`` pixels: the scale
    the network sees, where ImageNet-C's pixel constants mean what they meant there."""
    w, h = image.size
    scale = short_side / min(w, h)
    if abs(scale - 1.0) < 1e-9:
        return image
    return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BICUBIC)


def degrade(image: Image.Image, kind: str, severity: int, *, seed: int = 0) -> Image.Image:
    """``image`` (8-bit RGB) under ImageNet-C's ``kind`` ("blur" or "noise") at ``severity`` 0–5.

    Severity 0 is the image itself; 1–5 are ``datasets.corruptions.corrupt`` (the same code that
    makes the shipped shifted data): blur is a Gaussian of σ pixels on each channel (edges repeated,
    kernel to 4σ, as scikit-image's ``gaussian``); noise adds N(0, σ²) to x/255, seeded by the image,
    the severity and ``seed``, clipped to [0, 1].
    """
    if kind not in CORRUPTIONS:
        raise ValueError(f"kind must be one of {', '.join(CORRUPTIONS)}, got {kind!r:.40}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of 0–5, got {severity!r:.40}")
    if severity == 0:
        return image
    return Image.fromarray(corrupt(np.asarray(image.convert("RGB")), KINDS[kind], int(severity), seed=seed))


def degraded_images(image: ImageInput, kind: str, *, seed: int = 0,
                    severities: tuple[int, ...] = SEVERITIES) -> list[Image.Image]:
    """The image at the network's scale, once per severity (decoded with ``open_image_safely``)."""
    base = network_scale(open_image_safely(image) if not isinstance(image, Image.Image) else image.convert("RGB"))
    return [degrade(base, kind, s, seed=seed) for s in severities]


def degraded_logits(images: list[Image.Image], model_name: str) -> np.ndarray:
    """Logits of ``model_name`` for each image, shape (len(images), n_classes), float32, on the
    CPU in one batch (the model is loaded once per name, as ``inference.classify_image`` does)."""
    model, transform, _info, lock = _cached_model(model_name)
    x = torch.stack([transform(im) for im in images])
    with lock, torch.inference_mode():
        logits = model(x)
    return logits.float().numpy().astype(np.float32)
