"""Model variants made from one set of weights, as ``cache_logits`` runs them: test-time augmentation,
MC dropout, int8 quantization, another input resolution, and ImageNet-C corrupted inputs.

Each option of ``CacheOptions`` changes one of three things, and this module is the one place that
says how:

* what the workers hand over (``variant_info`` and ``variant_transform``): the resolution, the
  square that multi-crop cuts its crops from, the corruption applied to the network input;
* what the model computes (``wrap_model``): the views of TTA or the passes of MC dropout, averaged
  as probabilities, and the quantized model;
* what the manifest says (``describe_variant``): ``variant_of``, the ``variant`` entry, and for
  corrupted inputs ``shifted: true`` with the corruption.

Views and passes are combined as the log of the mean softmax probability, so the stored "logits"
give exactly the averaged probabilities under a softmax (the ensemble of ``ensemble.py`` does the
same). References: TTA — Krizhevsky et al. 2012 (ten-crop), Simonyan & Zisserman 2015;
MC dropout — Gal & Ghahramani, ICML 2016; corruptions — Hendrycks & Dietterich, ICLR 2019.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...datasets import corruptions
from ..models import ModelInfo, make_tensor_transform, make_transform
from .errors import CacheRunError
from .options import CacheOptions

__all__ = ["VariantModel", "describe_variant", "variant_info", "variant_transform", "wrap_model"]


def variant_info(info: ModelInfo, options: CacheOptions) -> ModelInfo:
    """The model's description with the resolution of ``options.image_size`` (the resize keeps its
    crop_pct, as timm computes it: ``floor(size / crop_pct)``)."""
    if options.image_size is None:
        return info
    if info.input_hw is not None:
        raise CacheRunError(f"--image-size needs a model with a square input; {info.name} takes {info.input_hw}")
    size = options.image_size
    return dataclasses.replace(info, input_size=size, resize=int(size / info.crop_pct))


def _loader_info(info: ModelInfo, options: CacheOptions) -> ModelInfo:
    """What the workers produce: for multi-crop the whole short-side-resized centre square (resize × resize),
    from which ``wrap_model`` cuts the five crops; otherwise the network input itself."""
    if options.tta != "multicrop":
        return info
    return dataclasses.replace(info, input_size=info.resize, crop_pct=1.0)


class _Corrupted:
    """uint8 (3, H, W) tensor → the same image under an ImageNet-C corruption (a picklable worker transform)."""

    def __init__(self, transform: Callable, name: str, severity: int, seed: int) -> None:
        self.transform, self.name, self.severity, self.seed = transform, name, severity, seed

    def __call__(self, image: Any) -> torch.Tensor:
        x = self.transform(image).permute(1, 2, 0).numpy()
        y = corruptions.corrupt(np.ascontiguousarray(x), self.name, self.severity, seed=self.seed)
        return torch.from_numpy(np.ascontiguousarray(y)).permute(2, 0, 1).contiguous()


def variant_transform(info: ModelInfo, options: CacheOptions) -> tuple[Callable, Callable | None]:
    """(PIL image → uint8 (3, H, W) for the workers, its on-device twin or None) for ``options``.

    Corrupted inputs have no twin: the corruption runs on the CPU after PIL's resize and crop, as
    ImageNet-C corrupts the cropped network input."""
    loader = _loader_info(info, options)
    transform = make_transform(loader.data_config, uint8=True)
    if options.corruption is not None:
        assert options.severity is not None  # CacheOptions requires both
        return _Corrupted(transform, options.corruption, options.severity, options.seed), None
    return transform, make_tensor_transform(loader)


def _five_crops(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    """The four corner crops and the centre crop (torchvision's FiveCrop order) of (N, C, S, S)."""
    from torchvision.transforms.functional import five_crop

    return list(five_crop(x, [size, size]))


def _log_mean_softmax(logits: torch.Tensor) -> torch.Tensor:
    """(K, N, C) logits of K views → (N, C): log of the mean of the K softmax probabilities."""
    return torch.logsumexp(torch.log_softmax(logits.float(), dim=-1), dim=0) - math.log(logits.shape[0])


class VariantModel(torch.nn.Module):
    """The model under TTA or MC dropout: ``forward(x, sample_index)`` on normalised (N, 3, H, W) →
    (N, C) log mean probabilities. ``sample_index`` (N,) seeds each image's dropout masks, so the
    result does not depend on how the images are batched."""

    needs_sample_index = True

    def __init__(self, model: torch.nn.Module, options: CacheOptions, crop: int) -> None:
        super().__init__()
        self.model, self.tta, self.crop = model, options.tta, crop
        self.passes, self.rate, self.seed = options.mc_dropout, float(options.mc_dropout_rate), options.seed

    def _views(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.tta == "flip":
            return [x, x.flip(-1)]
        return _five_crops(x, self.crop)

    def _masks(self, sample_index: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
        """(passes, N, width) inverted-dropout masks, each image's drawn from its own seeded generator."""
        keep, passes = 1.0 - self.rate, int(self.passes or 0)
        rows = []
        for i in sample_index.tolist():
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + int(i))
            rows.append(torch.bernoulli(torch.full((passes, width), keep), generator=g) / keep)
        return torch.stack(rows, dim=1).to(device)

    def forward(self, x: torch.Tensor, sample_index: torch.Tensor) -> torch.Tensor:
        if self.passes is None:
            return _log_mean_softmax(torch.stack([self.model(v).float() for v in self._views(x)]))
        # Dropout sits only before the classifier in EfficientNet(-Lite) (timm's forward_head), so the
        # backbone runs once and only the head is sampled: the same passes at a fraction of the cost.
        model: Any = self.model
        pooled = model.forward_head(model.forward_features(x), pre_logits=True).float()
        masks = self._masks(sample_index, pooled.shape[-1], pooled.device)
        head = model.get_classifier()
        return _log_mean_softmax(torch.stack([head(pooled * m).float() for m in masks]))


def _quantized(model: torch.nn.Module) -> torch.nn.Module:
    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao (not installable here); the eager
        # dynamic API still works and is what this variant documents.
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def wrap_model(model: torch.nn.Module, info: ModelInfo, options: CacheOptions,
               device: torch.device) -> torch.nn.Module:
    """The model that ``run_model`` calls for ``options``: quantized, and/or wrapped in a ``VariantModel``."""
    if options.quantize is not None:
        if device.type != "cpu":
            raise CacheRunError("--quantize int8 runs on the CPU only; use --device cpu")
        model = _quantized(model)
    if options.tta is None and options.mc_dropout is None:
        return model
    if options.mc_dropout is not None and not all(hasattr(model, a) for a in ("forward_head", "get_classifier")):
        raise CacheRunError(f"--mc-dropout needs a timm model with forward_head/get_classifier; {info.name} has none")
    return VariantModel(model, options, info.input_size).eval()


def describe_variant(model_name: str, options: CacheOptions) -> dict[str, Any]:
    """The manifest entries of a variant: ``variant_of`` (the base model), ``variant`` (what was changed,
    in words and settings) and, for corrupted inputs, ``shifted: true`` and ``shift``. Empty for none."""
    if not options.is_variant:
        return {}
    changes: list[str] = []
    variant: dict[str, Any] = {"tag": options.variant_tag}
    aggregate = "log of the mean softmax probability over the views"
    if options.tta == "flip":
        changes.append("test-time augmentation: the image and its horizontal mirror")
        variant.update(tta="flip", views=2, aggregate=aggregate)
    elif options.tta == "multicrop":
        changes.append("test-time augmentation: five crops (four corners and centre) of the resized square")
        variant.update(tta="multicrop", views=5, aggregate=aggregate)
    if options.image_size:
        changes.append(f"input resolution {options.image_size}")
        variant["image_size"] = options.image_size
    if options.mc_dropout:
        changes.append(f"MC dropout: {options.mc_dropout} passes, p={options.mc_dropout_rate} before the classifier")
        variant.update(mc_dropout_passes=options.mc_dropout, mc_dropout_rate=options.mc_dropout_rate,
                       seed=options.seed, aggregate="log of the mean softmax probability over the passes")
    if options.quantize:
        changes.append("int8 dynamic post-training quantization (torch.ao) of the Linear layers")
        variant["quantize"] = {"dtype": "qint8", "method": "torch.ao.quantization.quantize_dynamic",
                               "layers": "torch.nn.Linear (the classifier); convolutions stay float32"}
    if options.amp and options.amp_dtype_name:
        changes.append(f"{options.amp_dtype_name} autocast inference (torch.autocast)")
        variant["precision"] = options.amp_dtype_name
    out: dict[str, Any] = {"variant_of": model_name}
    if options.corruption:
        changes.append(f"ImageNet-C {options.corruption} at severity {options.severity}")
        out["shifted"] = True
        out["shift"] = {"corruption": options.corruption, "severity": options.severity, "seed": options.seed,
                        "applied_to": "the resized, centre-cropped uint8 network input",
                        "implementation": "hsc_core.datasets.corruptions (Hendrycks & Dietterich, ICLR 2019)"}
    variant["description"] = "; ".join(changes)
    out["variant"] = variant
    return out
