"""One model over the samples: load it, stream the batches through it, keep the chunks, write the
file and its manifest, and say what happened (``cache_logits``, ``run_one``).

Multi-GPU: under ``torchrun --nproc_per_node=K`` chunk ``i`` goes to rank ``i % K``. Every rank
writes its own chunks, and rank 0 merges them after a barrier.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ...core.validation import clip_path, quote
from ...datasets.imagenet import imagenet_wnids
from ...datasets.logits_io import LogitsFileError
from ..inference import ImageReadError
from ..models import (
    ModelInfo,
    ModelLoadError,
    UnknownModelError,
    WeightsMismatchError,
    load_model,
    normalize_batch,
)
from . import decoding, store, variants
from .errors import CacheRunError
from .options import CacheOptions
from .samples import SampleList, describe_dataset

__all__ = ["amp_dtype", "cache_logits", "ray_cache_one", "resolve_device", "run_model", "run_one"]


# ---------------------------------------------------------------------------- device, precision, ranks
def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto`` → the local CUDA device when there is one, else CPU; ``cuda`` → CUDA device ``local_rank``."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise CacheRunError("--device cuda requested but CUDA is not available")
        return torch.device("cuda", local_rank)
    return torch.device(device)


def amp_dtype(device: torch.device, amp: bool | None, dtype: str | None = None) -> torch.dtype | None:
    """The autocast dtype, or None for full precision.

    With ``amp=None`` (auto), CUDA gets AMP and the CPU stays in float32: CPU autocast only
    pays off on CPUs with bfloat16 matrix units, and it costs accuracy. On CUDA the default is
    float16: it has 3 more mantissa bits than bfloat16, so its logits are closer to float32 ones.
    Non-finite outputs from a float16 overflow stop the run with a hint (``_check_finite``). On
    the CPU the default is bfloat16. ``dtype`` ("float16"/"bfloat16") overrides the default.
    """
    if amp is False or (amp is None and device.type != "cuda"):
        return None
    if dtype is not None:
        return {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    return torch.float16 if device.type == "cuda" else torch.bfloat16


@dataclass(frozen=True)
class _Dist:
    """This process's place in a torchrun job (the defaults: a single process)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def _init_distributed(device: str) -> _Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return _Dist()
    import torch.distributed as dist

    use_cuda = device in ("auto", "cuda") and torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return _Dist(dist.get_rank(), dist.get_world_size(), local_rank)


def _barrier(d: _Dist) -> None:
    if d.world > 1:
        import torch.distributed as dist

        dist.barrier()


# ---------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class _Setup:
    """The loaded model and every setting resolved for this device."""

    model: torch.nn.Module
    info: ModelInfo
    device: torch.device
    transform: Callable  # PIL image → uint8 (3, H, W), in the workers
    tensor_transform: Callable | None  # uint8 (N, 3, h, w) → (N, 3, H, W) on the device, if it has a twin
    on_device: bool  # JPEGs decoded on the device
    amp: torch.dtype | None
    channels_last: bool
    chunk_size: int

    @property
    def amp_name(self) -> str | None:
        return str(self.amp).replace("torch.", "") if self.amp is not None else None

    @property
    def decode_name(self) -> str:
        return "gpu" if self.on_device else "cpu"


def _load_imagenet_model(model_name: str, device: torch.device, pretrained: bool) -> tuple[torch.nn.Module, ModelInfo]:
    model, _, info = load_model(model_name, device=device, pretrained=pretrained)
    n_classes = len(imagenet_wnids())
    if info.num_classes != n_classes:
        # The labels are ImageNet-1k class indices, so other heads (in21k, feature models) do not fit.
        raise CacheRunError(f"model {quote(model_name)} has {info.num_classes} outputs, but the labels are ImageNet-1k "
                            f"classes ({n_classes}); pick an ImageNet-1k checkpoint (a timm name ending in "
                            f"_in1k, or a registered model)")
    return model, info


def _set_up(model_name: str, samples: SampleList, options: CacheOptions, d: _Dist) -> _Setup:
    device = resolve_device(options.device, d.local_rank)
    model, info = _load_imagenet_model(model_name, device, options.pretrained)
    info = variants.variant_info(info, options)
    transform, tensor_transform = variants.variant_transform(info, options)
    on_device, note = decoding.choose_decode(options.decode, device, samples.paths, transform, tensor_transform)
    if note:
        print(f"[rank {d.rank}] {note}", file=sys.stderr)
    if device.type == "cuda":
        # Every batch has the same shape, so cuDNN's one-off algorithm search pays for itself.
        torch.backends.cudnn.benchmark = True
    # channels_last by default on every device: on this project's 2-core CPU it ran
    # efficientnet_lite0 ≈1.6× faster (oneDNN), and on CUDA it feeds the tensor cores.
    channels_last = True if options.channels_last is None else options.channels_last
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = variants.wrap_model(model, info, options, device)
    return _Setup(model, info, device, transform, tensor_transform, on_device,
                  amp_dtype(device, options.amp, options.amp_dtype_name), channels_last, options.images_per_chunk)


def run_model(model: torch.nn.Module, batches: Iterator[tuple[torch.Tensor, torch.Tensor]], device: torch.device,
              info: ModelInfo, *, amp: torch.dtype | None, channels_last: bool, progress: bool = True,
              total: int | None = None,
              stats: dict[str, float] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (sample indices (N,), float32 logits (N, C)) per batch of uint8 images (N, 3, H, W)
    from ``batches`` (``decoding.batches``), with a progress bar counting images.

    Normalisation happens here, on the device. ``stats["compute"]`` accumulates the seconds spent
    in the model; with the loader's "data" and "decode" it shows what bounds a run."""
    from tqdm import tqdm

    stats = stats if stats is not None else {}
    stats.setdefault("compute", 0.0)
    with torch.inference_mode(), tqdm(total=total, disable=not progress, unit="img", dynamic_ncols=True) as bar:
        for x, idx in batches:
            t1 = time.perf_counter()
            x = normalize_batch(x.to(device, non_blocking=True), info.mean, info.std)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device_type=device.type, dtype=amp or torch.float32, enabled=amp is not None):
                # variants.VariantModel seeds each image's MC-dropout masks by its sample index
                out = model(x, idx) if getattr(model, "needs_sample_index", False) else model(x)
            logits = out.float().cpu().numpy()  # .cpu() waits for the GPU, so the timing is real
            stats["compute"] += time.perf_counter() - t1
            bar.update(len(idx))
            yield idx.numpy(), logits


def _check_finite(idx: np.ndarray, logits: np.ndarray, samples: SampleList, setup: _Setup) -> None:
    """Refuse non-finite logits (N, C) at once, naming the first sample: a float16 overflow under AMP."""
    if np.isfinite(logits).all():
        return
    bad = samples.sample_ids[int(idx[np.flatnonzero(~np.isfinite(logits).all(axis=1))[0]])]
    hint = "; rerun with --amp-dtype bfloat16 or --no-amp" if setup.amp is not None else ""
    raise CacheRunError(f"non-finite logits (first for {bad}) with amp={setup.amp_name}{hint}")


# ---------------------------------------------------------------------------- one run
def cache_logits(model_name: str, samples: SampleList, out: str | os.PathLike, options: CacheOptions | None = None,
                 **overrides: Any) -> dict:
    """Compute and save the logits of ``model_name`` for ``samples`` into ``out`` (.npz + manifest .json).

    Parameters
    ----------
    model_name : str
        A registered model or a timm model name (``models.load_model``) with an ImageNet-1k head.
    samples : SampleList
        The N images and their labels (``samples.read_samples``).
    out : path
        The ``.npz`` to write; finished chunks of an interrupted run in ``<out>.partial/`` are reused.
    options : CacheOptions, optional
        The run's settings; the defaults when None.
    **overrides
        ``CacheOptions`` fields that replace those of ``options``
        (``cache_logits(name, samples, out, batch_size=32, pretrained=False)``).

    Returns
    -------
    dict
        The summary: model, n_samples, n_computed, seconds, images_per_s, device, amp,
        channels_last, decode, out, seconds_data/decode/compute/write, and on rank 0 top1 and
        top1_per_source. Other ranks return after writing their chunks.

    Raises
    ------
    CacheRunError, DatasetError, ImageReadError, models.UnknownModelError, models.ModelLoadError,
    datasets.logits_io.LogitsFileError, ValueError (bad options, no samples).
    """
    if options is not None and not isinstance(options, CacheOptions):
        raise TypeError(f"options must be a CacheOptions, got {type(options).__name__}; pass settings by keyword")
    options = dataclasses.replace(options or CacheOptions(), **overrides)
    out = Path(out)
    if out.suffix != ".npz":
        raise CacheRunError(f"--out must end in .npz, got {clip_path(out)}")
    if len(samples) == 0:
        raise ValueError("no images to run")
    d = _init_distributed(options.device)
    try:
        return _cache_on_rank(model_name, samples, out, options, d)
    finally:
        if d.world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def _cache_on_rank(model_name: str, samples: SampleList, out: Path, options: CacheOptions, d: _Dist) -> dict:
    setup = _set_up(model_name, samples, options, d)
    partial = store.partial_dir(out)
    ranges = store.chunk_ranges(len(samples), setup.chunk_size)
    if d.main:
        fp = store.fingerprint(samples, setup.info, setup.chunk_size, setup.amp_name, setup.decode_name,
                               variant=variants.describe_variant(model_name, options))
        store.open_partial(partial, fp)
    _barrier(d)
    pending, n_mine = store.pending_chunks(partial, ranges, d.rank, d.world)
    if len(pending) < n_mine:
        print(f"[rank {d.rank}] resuming: {n_mine - len(pending)} of {n_mine} chunks already done", file=sys.stderr)
    timing = _compute(setup, samples, partial, pending, options, progress=options.progress and d.main)
    _barrier(d)
    summary = _summary(model_name, samples, out, setup, timing)
    if not d.main:
        return summary
    bundle = store.write_final(out, partial, ranges, samples, setup.info.num_classes,
                               _manifest(model_name, samples, setup, options))
    summary.update(top1=bundle.top1(), top1_per_source=bundle.top1_per_source())
    return summary


def _compute(setup: _Setup, samples: SampleList, partial: Path, pending: list[store.Chunk], options: CacheOptions,
             progress: bool) -> dict[str, float]:
    """Run the model over the ``pending`` chunks, writing each as it completes; return the timing:
    n_computed, seconds, and the seconds waiting for data, decoding, computing and writing."""
    n_run = sum(e - s for _, s, e in pending)
    stats = {"data": 0.0, "decode": 0.0, "compute": 0.0, "write": 0.0}
    t0 = time.perf_counter()
    if pending:
        loader = decoding.make_loader(samples.paths, setup.transform, store.batch_plan(pending, options.batch_size),
                                      on_device=setup.on_device, workers=options.workers,
                                      pin_memory=setup.device.type == "cuda")
        # on_device is chosen only when the model's preprocessing has a tensor twin (choose_decode)
        decode = (decoding.device_decoder(samples.paths, setup.device, setup.transform,
                                          cast(Callable, setup.tensor_transform))
                  if setup.on_device else None)
        collector = store.ChunkCollector(partial, pending)
        for idx, logits in run_model(setup.model, decoding.batches(loader, stats, setup.device, decode),
                                     setup.device, setup.info, amp=setup.amp, channels_last=setup.channels_last,
                                     progress=progress, total=n_run, stats=stats):
            _check_finite(idx, logits, samples, setup)
            t_w = time.perf_counter()
            collector.add(idx, logits)
            stats["write"] += time.perf_counter() - t_w
    return {"n_computed": n_run, "seconds": time.perf_counter() - t0, **stats}


def _summary(model_name: str, samples: SampleList, out: Path, setup: _Setup, timing: dict[str, float]) -> dict:
    n_run, elapsed = timing["n_computed"], timing["seconds"]
    return {"model": model_name, "n_samples": len(samples), "n_computed": n_run,
            "seconds": elapsed, "images_per_s": n_run / elapsed if n_run and elapsed > 0 else float("nan"),
            "device": str(setup.device), "amp": setup.amp_name, "channels_last": setup.channels_last,
            "decode": setup.decode_name, "out": str(out),
            "seconds_data": timing["data"], "seconds_decode": timing["decode"],
            "seconds_compute": timing["compute"], "seconds_write": timing["write"]}


def _manifest(model_name: str, samples: SampleList, setup: _Setup, options: CacheOptions) -> dict:
    """The descriptive part of the manifest (``save_logits`` adds the counts, top-1, dtype, date)."""
    info, dev = setup.info, setup.device
    return {
        "model": model_name,
        "timm_model": info.timm_name,
        "weights": info.weights,
        "pretrained": info.pretrained,
        "preprocessing": info.preprocessing(),
        "dataset": options.dataset_info or describe_dataset(samples),
        # ImageNet-1k labels (wnid order): names the data set whose tree evaluates these logits
        "dataset_id": "imagenet1k",
        "device": dev.type if dev.type != "cuda" else torch.cuda.get_device_name(dev),
        "amp": setup.amp_name,
        "channels_last": setup.channels_last,
        "decode": ("JPEGs by nvJPEG on the GPU (torchvision.io.decode_jpeg), other files by PIL" if setup.on_device
                   else "PIL in CPU workers"),
        "batch_size": options.batch_size,
        **variants.describe_variant(model_name, options),
    }


# ---------------------------------------------------------------------------- one model, as the CLI runs it
def run_one(model: str, samples: SampleList, out: Path, options: CacheOptions) -> dict:
    """``cache_logits`` for one model with the CLI's error handling; expected failures are returned,
    not raised, so that a multi-model run goes on with the other models.

    Returns ``{"model", "out", "code", "summary", "error"}``: code 0 (done), 1 (the run failed:
    unreadable image, model weights, a partial folder from another run …), 2 (usage: unknown model,
    unwritable output) or 130 (interrupted); ``error`` is the one-line reason.
    """
    result = {"model": model, "out": str(out), "code": 0, "summary": None, "error": None}
    try:
        store.check_writable(out)
        result["summary"] = cache_logits(model, samples, out, options)
    except ImageReadError as exc:
        result.update(code=1, error=f"unreadable image: {exc}\n(finished chunks are kept in "
                                    f"{store.partial_dir(out)}; replace the file with a readable copy and rerun "
                                    "to resume)")
    except (UnknownModelError, ModelLoadError, WeightsMismatchError, CacheRunError, LogitsFileError) as exc:
        # Usage and environment errors: the message says what to do, a traceback would bury it.
        unusable = isinstance(exc, UnknownModelError) or str(exc).startswith("cannot write")
        result.update(code=2 if unusable else 1, error=str(exc))
    except OSError as exc:  # e.g. the output folder turned read-only or the disk filled up mid-run
        where = f"{exc.filename}: " if exc.filename else ""
        result.update(code=2, error=f"cannot write or read {where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        partial = store.partial_dir(out)
        kept = len(list(partial.glob("chunk_*.npz"))) if partial.is_dir() else 0
        result.update(code=130, error=f"interrupted: {kept} finished chunk(s) kept in {partial}; "
                                      "rerun the same command to resume")
    return result


def ray_cache_one(model: str, samples: SampleList, out: Path, options: CacheOptions, use_gpu: bool) -> dict:
    """One model in a Ray task (``distributed.map_ray_per_gpu``): on the task's own GPU when
    ``use_gpu`` (Ray sets CUDA_VISIBLE_DEVICES), else on the CPU; no progress bar."""
    return run_one(model, samples, out, dataclasses.replace(options, device="cuda" if use_gpu else "cpu",
                                                            progress=False))
