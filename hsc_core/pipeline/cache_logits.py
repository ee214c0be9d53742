"""Run a model over an image set once and cache its logits (``hsc_core.datasets.logits_io`` format).

Usage (``hsc cache-logits`` = ``python -m hsc_core cache-logits`` = ``python -m hsc_core.pipeline.cache_logits``)::

    hsc cache-logits --model efficientnet_lite0 \\
        --data ../shared/imagenet-val-sample/labels.csv --out cached_logits/efficientnet_lite0.npz
    hsc cache-logits --models resnet50,convnext_tiny --data DATA --out-dir cached_logits/ [--ray local|auto|ADDRESS]

``--data`` is either a ``labels.csv`` (columns ``file,wnid,label,source``; images in
``--images-dir``, by default the ``images/`` folder beside the CSV) or an ImageFolder directory
whose class folders are named by wnid.

The run is resumable. Each chunk of ``--chunk-size`` images is written atomically to
``<out>.partial/`` as soon as it is done. A rerun with the same arguments skips the finished
chunks. At the end the chunks are merged into ``<out>`` (written atomically) and the partial
folder is removed.

Multi-GPU: ``torchrun --nproc_per_node=K -m hsc_core.pipeline.cache_logits ...`` gives chunk ``i`` to
rank ``i % K``. Every rank writes its own chunks, and rank 0 merges them after a barrier.

Several models (``--models a,b,c`` with ``--out-dir``) run one after another, or with ``--ray`` as one Ray
task per model holding one GPU each (``distributed.map_ray_per_gpu``). Models already done in
``--out-dir`` are skipped; a failing model gets one error line and the others go on.

Decoding: ``--decode cpu`` decodes and resizes with PIL in the DataLoader workers; ``--decode gpu``
(the default on CUDA) has the workers read the bytes and decodes with nvJPEG on the GPU, then
resizes with ``models.make_tensor_transform`` (``decode_batch``). Before such a run a few JPEGs are
decoded both ways (``check_device_decode``); with ``auto``, a failure or a mismatch puts the run
back on the CPU path with one line on stderr.

Benchmark: ``--synthetic-jpegs N`` runs on N random JPEGs in a temporary folder (top-1 is
meaningless there; the images/s figure is the point).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from ..datasets.imagenet import imagenet_wnids
from ..datasets.images import max_image_pixels
from ..datasets.logits_io import LogitsFileError, load_logits, save_logits, write_json_atomic, write_npz_atomic
from .inference import ImageReadError, read_image
from .models import (
    ModelInfo,
    ModelLoadError,
    UnknownModelError,
    WeightsMismatchError,
    load_model,
    make_tensor_transform,
    make_transform,
    normalize_batch,
)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
PARTIAL_META = "meta.json"


class DatasetError(ValueError):
    """The image list is malformed (bad CSV, unknown wnid, missing image folder or files)."""


class CacheRunError(RuntimeError):
    """The run cannot go on as asked (no CUDA, a partial folder from another run, bad outputs)."""


@dataclass(frozen=True)
class SampleList:
    """The images to run, in output order."""

    paths: tuple[Path, ...]
    labels: np.ndarray
    sample_ids: tuple[str, ...]
    sources: tuple[str, ...] | None
    name: str

    def __len__(self) -> int:
        return len(self.paths)

    def head(self, n: int) -> SampleList:
        """The first ``n`` samples (for ``--limit``)."""
        return SampleList(self.paths[:n], self.labels[:n], self.sample_ids[:n],
                          None if self.sources is None else self.sources[:n], self.name)


# ---------------------------------------------------------------------------- image lists
def read_labels_csv(csv_path: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> SampleList:
    """Read a ``file,wnid,label,source`` CSV. ``label`` is the ImageNet class index; a row whose
    wnid disagrees with it is rejected, because a shifted label silently ruins every metric."""
    csv_path = Path(csv_path)
    if images_dir is None:
        images_dir = csv_path.parent / "images" if (csv_path.parent / "images").is_dir() else csv_path.parent
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise DatasetError(f"images directory {images_dir} not found")
    wnids = imagenet_wnids()
    index = {w: i for i, w in enumerate(wnids)}
    paths, labels, ids, sources = [], [], [], []
    try:
        fields, rows = _read_csv_rows(csv_path)
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise DatasetError(f"{csv_path}: not a readable labels CSV ({type(exc).__name__}: {exc})") from None
    if "file" not in fields or not ({"label", "wnid"} & fields):
        raise DatasetError(f"{csv_path}: needs columns file and label or wnid, has {sorted(fields)}")
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows, start=2):
        wnid = (row.get("wnid") or "").strip()
        raw = (row.get("label") or "").strip()
        try:
            label = int(raw) if raw else index[wnid]
        except (ValueError, KeyError):
            raise DatasetError(f"{csv_path}:{line}: bad label {raw!r} / wnid {wnid!r}") from None
        if not 0 <= label < len(wnids):
            raise DatasetError(f"{csv_path}:{line}: label {label} out of range [0, {len(wnids)})")
        if wnid and wnids[label] != wnid:
            raise DatasetError(f"{csv_path}:{line}: label {label} is {wnids[label]}, but the row says {wnid}")
        name = (row.get("file") or "").strip()
        if not name:
            raise DatasetError(f"{csv_path}:{line}: empty file name")
        if name in first_line:
            # Sample ids must be unique; finding out only when the file is saved would waste the run.
            raise DatasetError(f"{csv_path}:{line}: {name!r} is listed twice (first on line {first_line[name]})")
        first_line[name] = line
        paths.append(images_dir / name)
        labels.append(label)
        ids.append(name)
        sources.append((row.get("source") or "").strip())
    if not paths:
        raise DatasetError(f"{csv_path}: no rows")
    missing = [p for p in paths if not p.is_file()]
    if missing:
        # Checked before the model loads: a wrong --images-dir should fail at once, not on the first batch.
        raise DatasetError(f"{len(missing)} of {len(paths)} images listed in {csv_path} are not in {images_dir}, "
                           f"e.g. {missing[0].name}; is --images-dir right?")
    has_sources = "source" in fields and any(sources)
    return SampleList(tuple(paths), np.asarray(labels, dtype=np.int64), tuple(ids),
                      tuple(sources) if has_sources else None, csv_path.parent.name)


def _read_csv_rows(csv_path: Path) -> tuple[set[str], list[dict[str, str]]]:
    with csv_path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        fields = {f.strip() for f in reader.fieldnames or ()}
        rows = [{(k or "").strip(): v for k, v in row.items()} for row in reader]
    return fields, rows


def read_image_folder(root: str | os.PathLike) -> SampleList:
    """Read an ImageFolder tree ``root/<wnid>/<image>``; sample ids are ``<wnid>/<file>``."""
    root = Path(root)
    index = {w: i for i, w in enumerate(imagenet_wnids())}
    paths, labels, ids = [], [], []
    for class_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if class_dir.name not in index:
            hint = f"; for a labels CSV pass --data {root / 'labels.csv'}" if (root / "labels.csv").is_file() else ""
            raise DatasetError(f"{class_dir}: folder name is not an ImageNet-1k wnid "
                               f"(expected root/<wnid>/<image>){hint}")
        for f in sorted(class_dir.iterdir()):
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS:
                paths.append(f)
                labels.append(index[class_dir.name])
                ids.append(f"{class_dir.name}/{f.name}")
    if not paths:
        raise DatasetError(f"{root}: no images in wnid-named class folders")
    return SampleList(tuple(paths), np.asarray(labels, dtype=np.int64), tuple(ids), None, root.name)


def read_samples(data: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> SampleList:
    """A labels CSV or an ImageFolder directory, by what ``data`` is."""
    data = Path(data)
    if data.is_dir():
        return read_image_folder(data)
    if data.is_file():
        return read_labels_csv(data, images_dir)
    raise DatasetError(f"--data {data} is neither a labels CSV nor an image folder")


def make_synthetic_jpegs(n: int, directory: str | os.PathLike, size: tuple[int, int] = (500, 375),
                         seed: int = 0) -> Path:
    """Write ``n`` random JPEGs (ImageNet's typical 500×375) and a labels.csv; return the CSV path.

    Smooth random noise is used instead of white noise so that the files compress and decode like
    photographs, which keeps the throughput benchmark realistic.
    """
    from PIL import Image

    directory = Path(directory)
    (directory / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    wnids = imagenet_wnids()
    w, h = size
    rows = []
    for i in range(n):
        small = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((w, h), Image.BILINEAR)
        name = f"synthetic_{i:06d}.JPEG"
        img.save(directory / "images" / name, quality=90)
        label = int(rng.integers(0, len(wnids)))
        rows.append((name, wnids[label], label, "synthetic"))
    csv_path = directory / "labels.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "wnid", "label", "source"])
        writer.writerows(rows)
    return csv_path


class ImageDataset(Dataset):
    """Decodes, resizes and crops the images; item = (uint8 tensor, sample index)."""

    def __init__(self, paths: Sequence[Path], transform) -> None:
        self.paths = list(paths)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor | str, int]:
        path = self.paths[i]
        try:
            return self.transform(read_image(path, name=str(path))), i
        except ImageReadError as exc:
            # Pass the message back instead of raising in the worker: the DataLoader would wrap
            # it in a worker traceback; the main process raises it cleanly instead.
            return str(exc), i


def collate(items: list[tuple[torch.Tensor | str, int]]) -> tuple[torch.Tensor | None, torch.Tensor, str | None]:
    """Stack a batch into (images, indices, None), or (None, indices, message) when an image is
    unreadable. This runs inside the worker, so the error is reported, not raised, here."""
    idx = torch.as_tensor([i for _, i in items])
    for x, _ in items:
        if isinstance(x, str):
            return None, idx, x
    return torch.stack([x for x, _ in items]), idx, None


# ---------------------------------------------------------------------------- decoding on the device
# With CUDA, JPEG decoding in the CPU workers is the bottleneck (1.7k img/s end to end against 21k
# for the network alone on an H100). In the "gpu" mode the workers only read the files' bytes; a
# helper thread of the main process decodes each batch with nvJPEG (torchvision.io.decode_jpeg on
# CUDA), one batch ahead of the network, and resizes and crops it on the device as the model's
# transform does (models.make_tensor_transform).
def _is_plain_jpeg(data: bytes) -> bool:
    """True for a JPEG that decode_jpeg handles as PIL does: RGB or grey, no EXIF rotation, within
    the pixel cap of ``read_image``.

    Only the header is parsed (PIL's ``open`` is lazy), so this costs microseconds. CMYK/YCCK
    JPEGs, rotated phone photos, oversized images (refused there, with its message) and every
    other format take the PIL path instead."""
    if data[:3] != b"\xff\xd8\xff":
        return False
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            return (img.format == "JPEG" and img.mode in ("RGB", "L") and img.getexif().get(0x0112, 1) == 1
                    and img.width * img.height <= max_image_pixels())
    except Exception:  # undecodable header: the PIL path names the file in its error
        return False


class EncodedImageDataset(ImageDataset):
    """Item = (encoded JPEG bytes as a 1-D uint8 tensor, index) for plain JPEGs; for any other file the
    decoded and transformed (3, H, W) uint8 tensor, as ``ImageDataset`` gives (or its error text)."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor | str, int]:
        path = self.paths[i]
        try:
            data = path.read_bytes()
        except OSError as exc:
            return f"{path}: cannot read image ({type(exc).__name__}: {exc})", i
        if _is_plain_jpeg(data):
            return torch.frombuffer(bytearray(data), dtype=torch.uint8), i
        try:
            return self.transform(read_image(data, name=str(path))), i
        except ImageReadError as exc:
            return str(exc), i


def collate_encoded(items: list[tuple[torch.Tensor | str, int]]
                    ) -> tuple[list[torch.Tensor] | None, torch.Tensor, str | None]:
    """Like ``collate``, but keeps the (variously sized) tensors in a list: decoding comes later."""
    idx = torch.as_tensor([i for _, i in items])
    for x, _ in items:
        if isinstance(x, str):
            return None, idx, x
    return [x for x, _ in items], idx, None


# Images resized together at most; bounds the float32 buffer (64 × 3 × 375 × 500 × 4 B = 144 MB).
_RESIZE_GROUP = 64


def decode_batch(items: Sequence[torch.Tensor], paths: Sequence[Path], device: torch.device,
                 transform, tensor_transform) -> torch.Tensor:
    """Decode and transform one batch on ``device``; return uint8 (N, 3, H, W).

    ``items`` come from ``EncodedImageDataset``: 1-D tensors are encoded JPEGs, decoded here with
    ``torchvision.io.decode_jpeg`` (nvJPEG on CUDA, libjpeg-turbo on the CPU), 3-D ones are
    already transformed pixels. A JPEG the decoder rejects is read again with PIL and ``transform``
    (the PIL path's ``make_transform(..., uint8=True)``), so it gets the CPU path's result, or its
    ``ImageReadError``. Decoded images are grouped by size and ``tensor_transform``
    (``make_tensor_transform``, the same resize and crop to ±1 grey level) runs on each group as one batch.
    """
    from torchvision.io import ImageReadMode, decode_jpeg

    encoded = [k for k, x in enumerate(items) if x.ndim == 1]
    out: list[torch.Tensor | None] = [None if x.ndim == 1 else x.to(device, non_blocking=True) for x in items]
    decoded: dict[int, torch.Tensor] = {}
    with warnings.catch_warnings():
        # torchvision 0.29 marks its image codecs deprecated in favour of TorchCodec; they still work.
        warnings.simplefilter("ignore", DeprecationWarning)
        if encoded:
            try:
                decoded = dict(zip(encoded, decode_jpeg([items[k] for k in encoded], mode=ImageReadMode.RGB,
                                                        device=device)))
            except RuntimeError:
                # One bad file fails the whole batched call: retry one by one, the rest stay fast.
                for k in encoded:
                    try:
                        decoded[k] = decode_jpeg(items[k], mode=ImageReadMode.RGB, device=device)
                    except RuntimeError:
                        pass
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for k, img in decoded.items():
        groups[tuple(img.shape)].append(k)
    for ks in groups.values():
        for g in range(0, len(ks), _RESIZE_GROUP):
            part = ks[g:g + _RESIZE_GROUP]
            x = tensor_transform(torch.stack([decoded[k] for k in part]))
            for k, xk in zip(part, x):
                out[k] = xk
    for k in encoded:
        if out[k] is None:  # the decoder refused it: PIL decides, with the CPU path's error message
            out[k] = transform(read_image(paths[k], name=str(paths[k]))).to(device)
    return torch.stack(out)


# Mean |device − PIL| in grey levels above which the device decoder is not trusted. torchvision's
# own test allows a mean of 2 between nvJPEG and libjpeg-turbo; a broken decode is off by tens.
DECODE_CHECK_TOLERANCE = 3.0


def check_device_decode(paths: Sequence[Path], device: torch.device, transform, tensor_transform,
                        n: int = 8, scan: int = 64) -> tuple[str, str] | None:
    """Decode up to ``n`` plain JPEGs among the first ``scan`` of ``paths`` with ``decode_batch`` on
    ``device`` and with PIL; return None when they agree (mean |difference| at most
    ``DECODE_CHECK_TOLERANCE`` grey levels), else ("failed" or "differs", the reason in one line).

    Run once before a device-decoded run: nvJPEG's behaviour depends on the GPU, driver and CUDA
    build, none of which CI sees, so the run checks its own decoder instead of trusting it."""
    probe, pil = [], []
    for path in list(paths)[:scan]:
        try:
            data = Path(path).read_bytes()
            if _is_plain_jpeg(data):
                pil.append(transform(read_image(data, name=str(path))))
                probe.append((torch.frombuffer(bytearray(data), dtype=torch.uint8), Path(path)))
        except (OSError, ImageReadError):
            continue  # the run itself reports unreadable files, by name
        if len(probe) == n:
            break
    if not probe:
        return None  # no JPEG among them: PIL decodes these files either way
    try:
        dev = decode_batch([x for x, _ in probe], [q for _, q in probe], device, transform, tensor_transform)
        diff = float((dev.cpu().float() - torch.stack(pil).float()).abs().mean())
    except Exception as exc:  # noqa: BLE001 - any failure of the device path means "do not use it"
        return "failed", f"decoding {len(probe)} JPEGs on {device} failed ({type(exc).__name__}: {exc})"
    if not diff <= DECODE_CHECK_TOLERANCE:
        return "differs", (f"{len(probe)} JPEGs decoded on {device} differ from PIL's by {diff:.1f} grey levels "
                           f"on average (tolerance {DECODE_CHECK_TOLERANCE:g})")
    return None


def _use_device_decode(decode: str, device: torch.device, supported: bool) -> bool:
    """``auto`` decodes on the device when it is CUDA and the model's preprocessing has a tensor
    twin (``supported``); ``gpu`` insists on both; ``cpu`` never decodes on the device."""
    if decode not in ("auto", "gpu", "cpu"):
        raise CacheRunError(f"--decode must be auto, gpu or cpu, got {decode!r}")
    if decode == "gpu" and device.type != "cuda":
        raise CacheRunError("--decode gpu needs CUDA (the run is on the CPU); use --decode cpu or auto")
    if decode == "gpu" and not supported:
        raise CacheRunError("--decode gpu supports centre/squash crops of square inputs with bicubic or bilinear "
                            "resizing; this model's preprocessing needs --decode cpu")
    return decode == "gpu" or (decode == "auto" and device.type == "cuda" and supported)


# ---------------------------------------------------------------------------- chunks
def _chunk_ranges(n: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]


def partial_dir(out: Path) -> Path:
    """Where finished chunks of a run writing ``out`` are kept until the final file is written."""
    return out.with_name(out.name + ".partial")


def _chunk_path(partial: Path, chunk: int) -> Path:
    return partial / f"chunk_{chunk:06d}.npz"


def _write_chunk(partial: Path, chunk: int, indices: np.ndarray, logits: np.ndarray) -> None:
    """Persist one finished chunk atomically (float32, so the merge rounds only once).

    Uncompressed: zlib needs over a second per 2048×1000 chunk of float16-AMP logits (their
    zeroed low mantissa bits make it search hard), which halved GPU throughput; the chunks are
    temporary anyway."""
    write_npz_atomic(_chunk_path(partial, chunk), {"indices": indices.astype(np.int64),
                                                   "logits": logits.astype(np.float32)}, compress=False)


def _chunk_done(partial: Path, chunk: int, start: int, stop: int) -> bool:
    path = _chunk_path(partial, chunk)
    if not path.is_file():
        return False
    try:
        with np.load(path, allow_pickle=False) as z:
            idx = z["indices"]
            ok = np.array_equal(idx, np.arange(start, stop)) and np.isfinite(z["logits"]).all()
    except Exception:  # a damaged chunk is simply recomputed
        ok = False
    return ok


def _fingerprint(samples: SampleList, info: ModelInfo, chunk_size: int, amp: str | None, decode: str) -> dict:
    # Everything that changes the numbers: a resumed run must not mix chunks from another setup
    # (nvJPEG and libjpeg-turbo differ in the last bit of some pixels).
    digest = hashlib.sha256("\n".join(samples.sample_ids).encode()).hexdigest()
    return {"model": info.name, "weights": info.weights, "preprocessing": info.preprocessing(),
            "n_samples": len(samples), "sample_ids_sha256": digest, "chunk_size": chunk_size, "amp": amp,
            "decode": decode}


def _batches(pending: Sequence[tuple[int, int, int]], batch_size: int) -> list[list[int]]:
    # Batches never straddle two chunks, so each chunk completes on a batch boundary.
    out = []
    for _chunk, start, stop in pending:
        out.extend(list(range(s, min(s + batch_size, stop))) for s in range(start, stop, batch_size))
    return out


# ---------------------------------------------------------------------------- device, distributed
def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto`` → the local CUDA device when there is one, else CPU."""
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
    Non-finite outputs from a float16 overflow are caught and reported. On the CPU the default is
    bfloat16. ``dtype`` ("float16"/"bfloat16") overrides the default.
    """
    if amp is False or (amp is None and device.type != "cuda"):
        return None
    if dtype is not None:
        return {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    return torch.float16 if device.type == "cuda" else torch.bfloat16


@dataclass
class _Dist:
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


# ---------------------------------------------------------------------------- main work
def run_model(model: torch.nn.Module, loader: DataLoader, device: torch.device, info: ModelInfo,
              amp: torch.dtype | None, channels_last: bool, progress: bool = True, total: int | None = None,
              stats: dict[str, float] | None = None,
              decode: Callable[[list[torch.Tensor], torch.Tensor], torch.Tensor] | None = None,
              ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (sample indices, float32 logits) per batch of uint8 images, with a progress bar
    counting images. Normalisation happens here, on the device. ``stats`` accumulates the
    seconds spent waiting for data ("data"), waiting for device decoding ("decode") and running
    the model ("compute"), which shows whether a run is bound by decoding or by the network.
    ``decode(items, indices)`` turns a batch of ``collate_encoded`` items into uint8 images on
    the device (the "gpu" decode mode); it runs one batch ahead, see ``_decoded_batches``."""
    from tqdm import tqdm

    stats = stats if stats is not None else {}
    for key in ("data", "decode", "compute"):
        stats.setdefault(key, 0.0)
    batches = _decoded_batches(loader, decode, device, stats) if decode is not None else _loaded_batches(loader, stats)
    with torch.inference_mode(), tqdm(total=total, disable=not progress, unit="img", dynamic_ncols=True) as bar:
        for x, idx in batches:
            t1 = time.perf_counter()
            x = normalize_batch(x.to(device, non_blocking=True), info.mean, info.std)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(device_type=device.type, dtype=amp or torch.float32, enabled=amp is not None):
                out = model(x)
            logits = out.float().cpu().numpy()  # .cpu() waits for the GPU, so the timing is real
            stats["compute"] += time.perf_counter() - t1
            bar.update(len(idx))
            yield idx.numpy(), logits


def _loaded_batches(loader: DataLoader, stats: dict[str, float]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(uint8 images, indices) from the workers; an unreadable image raises its ImageReadError."""
    for x, idx, error in _raw_batches(loader, stats):
        if error is not None:
            raise ImageReadError(error)
        yield x, idx


def _decoded_batches(loader: DataLoader, decode: Callable, device: torch.device,
                     stats: dict[str, float]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Like ``_loaded_batches`` for encoded batches, decoded on the device one batch ahead: a helper
    thread (on its own CUDA stream) decodes batch i+1 while the model runs batch i, so neither the
    decoder's host-side work nor the network waits for the other. Errors keep their batch's turn."""
    from concurrent.futures import ThreadPoolExecutor

    side = torch.cuda.Stream(device) if device.type == "cuda" else None

    def work(items: list[torch.Tensor], idx: torch.Tensor):
        if side is None:
            return decode(items, idx), None
        # nvJPEG writes its output from a private stream that does not wait for the caller's stream
        # (pytorch/vision#9606), into memory the allocator may have just freed on ``side``: let the
        # previous batch's work on ``side`` finish first. The current CUDA device is per thread: name it.
        side.synchronize()
        with torch.cuda.device(device), torch.cuda.stream(side):
            x = decode(items, idx)
            done = torch.cuda.Event()
            done.record(side)
        return x, done

    def result(item):
        kind, payload, idx = item
        if kind == "error":
            raise ImageReadError(payload)
        t0 = time.perf_counter()
        x, done = payload.result()  # re-raises the decoder's ImageReadError here, in turn
        stats["decode"] += time.perf_counter() - t0
        if done is not None:
            main = torch.cuda.current_stream(device)
            main.wait_event(done)
            x.record_stream(main)  # the allocator must not reuse x while the main stream reads it
        return x, idx

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hsc-decode") as pool:
        ahead = None
        for item in _raw_batches(loader, stats):
            items, idx, error = item
            nxt = ("error", error, idx) if error is not None else ("ok", pool.submit(work, items, idx), idx)
            if ahead is not None:
                yield result(ahead)
            ahead = nxt
        if ahead is not None:
            yield result(ahead)


def _raw_batches(loader: DataLoader, stats: dict[str, float]) -> Iterator[tuple]:
    """The loader's batches as they come, timing the wait for each ("data")."""
    batches = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(batches)
        except StopIteration:
            return
        stats["data"] += time.perf_counter() - t0
        yield item


def cache_logits(
    model_name: str,
    samples: SampleList,
    out: str | os.PathLike,
    batch_size: int = 64,
    workers: int = 2,
    device: str = "auto",
    amp: bool | None = None,
    channels_last: bool | None = None,
    pretrained: bool = True,
    chunk_size: int | None = None,
    progress: bool = True,
    dataset_info: dict | None = None,
    amp_dtype_name: str | None = None,
    decode: str = "auto",
) -> dict:
    """Compute and save the logits; return a summary (images/s, top-1, paths, …).

    Finished chunks in ``<out>.partial/`` are reused. On rank 0 the final file is written and the
    partial folder removed; other ranks return after writing their chunks. ``decode``: "cpu"
    decodes with PIL in the DataLoader workers, "gpu" with nvJPEG on the CUDA device
    (``decode_batch``), "auto" picks "gpu" when the model runs on CUDA.
    """
    out = Path(out)
    if out.suffix != ".npz":
        raise CacheRunError(f"--out must end in .npz, got {out}")
    if len(samples) == 0:
        raise ValueError("no images to run")
    dist_state = _init_distributed(device)
    try:
        return _cache_logits(dist_state, model_name, samples, out, batch_size, workers, device, amp,
                             channels_last, pretrained, chunk_size, progress, dataset_info, amp_dtype_name,
                             decode)
    finally:
        if dist_state.world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def _cache_logits(dist_state: _Dist, model_name: str, samples: SampleList, out: Path, batch_size: int,
                  workers: int, device: str, amp: bool | None, channels_last: bool | None, pretrained: bool,
                  chunk_size: int | None, progress: bool, dataset_info: dict | None,
                  amp_dtype_name: str | None, decode: str) -> dict:
    dev = resolve_device(device, dist_state.local_rank)
    model, _, info = load_model(model_name, device=dev, pretrained=pretrained)
    n_classes = len(imagenet_wnids())
    if info.num_classes != n_classes:
        # The labels are ImageNet-1k class indices, so other heads (in21k, feature models) do not fit.
        raise CacheRunError(f"model {model_name!r} has {info.num_classes} outputs, but the labels are ImageNet-1k "
                            f"classes ({n_classes}); pick an ImageNet-1k checkpoint (a timm name ending in "
                            f"_in1k, or a registered model)")
    transform = make_transform(info.data_config, uint8=True)
    tensor_transform = make_tensor_transform(info)
    on_device = _use_device_decode(decode, dev, tensor_transform is not None)
    if on_device:
        problem = check_device_decode(samples.paths, dev, transform, tensor_transform)
        kind, reason = problem or (None, None)
        if problem and decode == "auto":
            print(f"[rank {dist_state.rank}] GPU decoding is off for this run: {reason}; PIL decodes in the "
                  f"CPU workers instead (--decode gpu forces it)", file=sys.stderr)
            on_device = False
        elif kind == "failed":
            raise CacheRunError(f"--decode gpu: {reason}; use --decode cpu or auto")
        elif kind == "differs":
            print(f"[rank {dist_state.rank}] warning: {reason}; going on because --decode gpu was asked for",
                  file=sys.stderr)
    decode_name = "gpu" if on_device else "cpu"
    if dev.type == "cuda":
        # Every batch has the same shape, so cuDNN's one-off algorithm search pays for itself.
        torch.backends.cudnn.benchmark = True
    amp_t = amp_dtype(dev, amp, amp_dtype_name)
    # channels_last by default on every device: on this project's 2-core CPU it ran
    # efficientnet_lite0 ≈1.6× faster (oneDNN), and on CUDA it feeds the tensor cores.
    cl = True if channels_last is None else channels_last
    if cl:
        model = model.to(memory_format=torch.channels_last)
    chunk_size = chunk_size or batch_size * 8
    amp_name = str(amp_t).replace("torch.", "") if amp_t is not None else None

    partial = partial_dir(out)
    fp = _fingerprint(samples, info, chunk_size, amp_name, decode_name)
    meta_path = partial / PARTIAL_META
    if dist_state.main:
        if meta_path.is_file():
            try:
                old = json.loads(meta_path.read_text())
            except (OSError, json.JSONDecodeError):
                old = None
            if old != fp:
                raise CacheRunError(
                    f"{partial} holds chunks from a different run (model, data, preprocessing or chunk "
                    f"size differ); delete it or rerun with the original arguments"
                )
        else:
            partial.mkdir(parents=True, exist_ok=True)
            write_json_atomic(meta_path, fp)
    _barrier(dist_state)

    ranges = _chunk_ranges(len(samples), chunk_size)
    mine = [(c, s, e) for c, (s, e) in enumerate(ranges) if c % dist_state.world == dist_state.rank]
    pending = [(c, s, e) for c, s, e in mine if not _chunk_done(partial, c, s, e)]
    skipped = len(mine) - len(pending)
    if skipped:
        print(f"[rank {dist_state.rank}] resuming: {skipped} of {len(mine)} chunks already done", file=sys.stderr)

    n_run = sum(e - s for _, s, e in pending)
    stats = {"data": 0.0, "decode": 0.0, "compute": 0.0, "write": 0.0}
    t0 = time.perf_counter()
    if pending:
        loader = DataLoader(
            (EncodedImageDataset if on_device else ImageDataset)(samples.paths, transform),
            batch_sampler=_batches(pending, batch_size),
            collate_fn=collate_encoded if on_device else collate,
            num_workers=workers,
            pin_memory=dev.type == "cuda",
            persistent_workers=False,
        )
        chunk_of = {}
        for c, s, e in pending:
            chunk_of.update(dict.fromkeys(range(s, e), c))
        bounds = {c: (s, e) for c, s, e in pending}
        buf: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        def decode_on_device(items: list[torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
            return decode_batch(items, [samples.paths[int(i)] for i in idx], dev, transform, tensor_transform)

        for idx, logits in run_model(model, loader, dev, info, amp_t, cl, progress and dist_state.main,
                                     total=n_run, stats=stats, decode=decode_on_device if on_device else None):
            if not np.isfinite(logits).all():
                bad = samples.sample_ids[int(idx[np.flatnonzero(~np.isfinite(logits).all(axis=1))[0]])]
                hint = "; rerun with --amp-dtype bfloat16 or --no-amp" if amp_t is not None else ""
                raise CacheRunError(f"non-finite logits (first for {bad}) with amp={amp_name}{hint}")
            c = chunk_of[int(idx[0])]
            buf.setdefault(c, []).append((idx, logits))
            s, e = bounds[c]
            if sum(len(i) for i, _ in buf[c]) == e - s:
                parts = buf.pop(c)
                t_w = time.perf_counter()
                _write_chunk(partial, c, np.concatenate([i for i, _ in parts]), np.concatenate([x for _, x in parts]))
                stats["write"] += time.perf_counter() - t_w
    elapsed = time.perf_counter() - t0
    _barrier(dist_state)

    summary = {"model": model_name, "n_samples": len(samples), "n_computed": n_run,
               "seconds": elapsed, "images_per_s": n_run / elapsed if n_run and elapsed > 0 else float("nan"),
               "device": str(dev), "amp": amp_name, "channels_last": cl, "decode": decode_name, "out": str(out),
               "seconds_data": stats["data"], "seconds_decode": stats["decode"],
               "seconds_compute": stats["compute"], "seconds_write": stats["write"]}
    if not dist_state.main:
        return summary

    logits = _merge_chunks(partial, ranges, info.num_classes)
    manifest = {
        "model": model_name,
        "timm_model": info.timm_name,
        "weights": info.weights,
        "pretrained": info.pretrained,
        "preprocessing": info.preprocessing(),
        "dataset": dataset_info or _dataset_info(samples),
        # ImageNet-1k labels (wnid order): names the data set whose tree evaluates these logits
        "dataset_id": "imagenet1k",
        "device": dev.type if dev.type != "cuda" else torch.cuda.get_device_name(dev),
        "amp": amp_name,
        "channels_last": cl,
        "decode": ("JPEGs by nvJPEG on the GPU (torchvision.io.decode_jpeg), other files by PIL" if on_device
                   else "PIL in CPU workers"),
        "batch_size": batch_size,
    }
    sources = None if samples.sources is None else np.asarray(samples.sources)
    try:
        save_logits(out, logits, samples.labels, np.asarray(samples.sample_ids), sources, manifest)
    except LogitsFileError as exc:
        if "overflow" not in str(exc):
            raise
        # |logit| > 65504 (seen with some random-init models): keep full precision instead.
        save_logits(out, logits, samples.labels, np.asarray(samples.sample_ids), sources, manifest, dtype="float32")
    # Verify what was written before deleting the chunks it was built from.
    bundle = load_logits(out, require_manifest=True)
    shutil.rmtree(partial, ignore_errors=True)
    summary.update(top1=bundle.top1(), top1_per_source=bundle.top1_per_source())
    return summary




def _merge_chunks(partial: Path, ranges: list[tuple[int, int]], n_classes: int) -> np.ndarray:
    n = ranges[-1][1] if ranges else 0
    logits = np.empty((n, n_classes), dtype=np.float32)
    for c, (s, e) in enumerate(ranges):
        path = _chunk_path(partial, c)
        if not _chunk_done(partial, c, s, e):
            raise CacheRunError(f"chunk {c} ({path}) is missing or damaged; rerun to recompute it")
        with np.load(path, allow_pickle=False) as z:
            logits[s:e] = z["logits"]
    return logits


def _dataset_info(samples: SampleList) -> dict:
    """Describe the data without machine-specific absolute paths."""
    info: dict = {"name": samples.name, "n_images": len(samples)}
    if samples.sources is not None:
        info["sources"] = dict(sorted(Counter(samples.sources).items()))
    return info


# ---------------------------------------------------------------------------- one model, as the CLI runs it
def output_name(model: str) -> str:
    """File name of a model's logits in ``--out-dir``: the model name, with anything but letters,
    digits, ``_ . -`` replaced (``hf-hub:org/x`` → ``hf-hub_org_x.npz``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model).strip(".") + ".npz"


def check_writable(out: Path) -> None:
    """Refuse, before the model loads, an ``out`` that cannot be created: its nearest existing
    ancestor must be a folder this process may write in."""
    if out.is_dir():
        raise CacheRunError(f"cannot write {out}: it is a folder")
    probe = out.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise CacheRunError(f"cannot write {out}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CacheRunError(f"cannot write {out}: no write permission in {probe}")


def existing_output(out: Path, model: str, samples: SampleList) -> str | None:
    """For ``--out-dir`` runs: "done" when ``out`` already holds this model's logits for exactly
    these samples (the run skips it), None when there is no file. A file from another run is an
    error, not overwritten."""
    if not out.exists():
        return None
    try:
        bundle = load_logits(out, require_manifest=True)
    except LogitsFileError as exc:
        raise CacheRunError(f"{out} exists but is not a valid logits file ({exc}); move it away to recompute") from None
    if bundle.manifest.get("model") != model or bundle.sample_ids.tolist() != list(samples.sample_ids):
        raise CacheRunError(f"{out} exists and holds another run (model {bundle.manifest.get('model')!r}, "
                            f"{bundle.n_samples} images); move it away or choose another --out-dir")
    return "done"


def run_one(model: str, samples: SampleList, out: Path, options: dict) -> dict:
    """``cache_logits`` for one model with the CLI's error handling; expected failures are returned,
    not raised, so that a multi-model run goes on with the other models.

    Returns ``{"model", "out", "code", "summary", "error"}``: code 0 (done), 1 (the run failed:
    unreadable image, model weights, a partial folder from another run …), 2 (usage: unknown model,
    unwritable output) or 130 (interrupted); ``error`` is the one-line reason.
    """
    result = {"model": model, "out": str(out), "code": 0, "summary": None, "error": None}
    try:
        check_writable(out)
        result["summary"] = cache_logits(model, samples, out, **options)
    except ImageReadError as exc:
        result.update(code=1, error=f"unreadable image: {exc}\n(finished chunks are kept in {partial_dir(out)}; "
                                    "replace the file with a readable copy and rerun to resume)")
    except (UnknownModelError, ModelLoadError, WeightsMismatchError, CacheRunError, LogitsFileError) as exc:
        # Usage and environment errors: the message says what to do, a traceback would bury it.
        unusable = isinstance(exc, UnknownModelError) or str(exc).startswith("cannot write")
        result.update(code=2 if unusable else 1, error=str(exc))
    except OSError as exc:  # e.g. the output folder turned read-only or the disk filled up mid-run
        where = f"{exc.filename}: " if exc.filename else ""
        result.update(code=2, error=f"cannot write or read {where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        partial = partial_dir(out)
        kept = len(list(partial.glob("chunk_*.npz"))) if partial.is_dir() else 0
        result.update(code=130, error=f"interrupted: {kept} finished chunk(s) kept in {partial}; "
                                      "rerun the same command to resume")
    return result


# ---------------------------------------------------------------------------- CLI
def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _npz_path(text: str) -> str:
    if Path(text).suffix != ".npz":
        raise argparse.ArgumentTypeError(f"must end in .npz, got {text}")
    return text


def _model_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("no model name given")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a model is listed twice in {text!r}")
    return names


def configure_parser(ap: argparse.ArgumentParser) -> None:
    """The options of ``hsc cache-logits`` (and ``python -m hsc_core.pipeline.cache_logits``)."""
    ap.add_argument("--model", "--models", dest="models", type=_model_list, required=True, metavar="NAME[,NAME…]",
                    help="registered name (efficientnet_lite0/1/2) or timm model name; several, comma-separated, "
                         "run one after another (or in parallel with --ray) into --out-dir")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="labels.csv (file,wnid,label,source) or ImageFolder directory (wnid folders)")
    src.add_argument("--synthetic-jpegs", type=_positive_int, metavar="N",
                     help="benchmark on N random JPEGs in a temp dir")
    ap.add_argument("--images-dir", help="image folder for a labels.csv (default: images/ beside it)")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--out", type=_npz_path, help="output .npz of one model (its manifest goes to the .json beside it)")
    out.add_argument("--out-dir", help="output folder: <model>.npz per model; models already done there are skipped")
    ap.add_argument("--batch-size", type=_positive_int, default=64)
    ap.add_argument("--chunk-size", type=_positive_int, default=None,
                    help="images per resumable chunk (default 8 batches)")
    ap.add_argument("--workers", type=_non_negative_int, default=min(8, os.cpu_count() or 1),
                    help="DataLoader worker processes")
    ap.add_argument("--limit", type=_positive_int, default=None, help="only the first N images")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--decode", choices=("auto", "gpu", "cpu"), default="auto",
                    help="where JPEGs are decoded and resized: gpu = nvJPEG on the CUDA device (workers only read "
                         "files), cpu = PIL in the workers; auto = gpu when the model runs on CUDA")
    ap.add_argument("--amp", action=argparse.BooleanOptionalAction, default=None,
                    help="autocast mixed precision (default: on for CUDA, off for CPU)")
    ap.add_argument("--amp-dtype", choices=("float16", "bfloat16"), default=None,
                    help="autocast dtype (default: float16 on CUDA, bfloat16 on CPU)")
    ap.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                    help="channels_last memory format (default: on)")
    ap.add_argument("--pretrained", dest="pretrained", action="store_true", default=True,
                    help="load the pretrained weights (default)")
    ap.add_argument("--random-init", dest="pretrained", action="store_false", help="random weights (benchmarking)")
    ap.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                    help="one Ray task per model, one GPU each when the cluster has GPUs: 'local' (the default "
                         "when the flag is given bare) starts Ray on this machine, 'auto' or host:port joins a "
                         "cluster (paths must be the same on every node)")
    ap.add_argument("--dataset-name", help="dataset name for the manifest (default: the data folder's name)")
    ap.add_argument("--dataset-description", help="free-text description for the manifest")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m hsc_core.pipeline.cache_logits",
                                 description="Cache models' ImageNet logits (resumable).")
    configure_parser(ap)
    return ap


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; returns the exit status (0 all done, 1 a run failed, 2 usage, 130 Ctrl-C)."""
    models: list[str] = args.models
    if len(models) > 1 and args.out:
        return _error("--out names one file; with several models use --out-dir")
    if args.data is not None and not (args.out or args.out_dir):
        return _error("--out or --out-dir is required with --data")
    tmp = None
    try:
        if args.synthetic_jpegs is not None:
            tmp = tempfile.TemporaryDirectory(prefix="hsc_synthetic_")
            data = make_synthetic_jpegs(args.synthetic_jpegs, tmp.name)
            out_dir = Path(args.out_dir) if args.out_dir else Path(tmp.name)
        else:
            data = Path(args.data)
            out_dir = Path(args.out_dir) if args.out_dir else None
        try:
            samples = read_samples(data, args.images_dir)
        except (DatasetError, OSError) as exc:
            return _error(str(exc))
        if args.limit is not None:
            samples = samples.head(args.limit)
        dataset_info = _dataset_info(samples)
        if args.dataset_name:
            dataset_info["name"] = args.dataset_name
        if args.dataset_description:
            dataset_info["description"] = args.dataset_description
        if args.synthetic_jpegs is not None:
            dataset_info["name"] = "synthetic"
        options = dict(batch_size=args.batch_size, workers=args.workers, device=args.device, amp=args.amp,
                       channels_last=args.channels_last, pretrained=args.pretrained, chunk_size=args.chunk_size,
                       progress=not args.no_progress, dataset_info=dataset_info, amp_dtype_name=args.amp_dtype,
                       decode=args.decode)
        jobs: list[tuple[str, Path]] = []
        codes = [0]
        for model in models:
            out = Path(args.out) if args.out else out_dir / output_name(model)
            if args.out_dir:
                try:
                    if existing_output(out, model, samples) == "done":
                        print(f"{model}: already done ({out}), skipped")
                        continue
                except CacheRunError as exc:
                    codes.append(_report({"model": model, "code": 2, "error": str(exc)}, several=len(models) > 1))
                    continue
            jobs.append((model, out))
        if args.ray:
            from .distributed import map_ray_per_gpu

            if args.device == "cuda" and args.ray == "local" and not torch.cuda.is_available():
                return _error("--device cuda requested but CUDA is not available")
            results = (r for _, r in map_ray_per_gpu(ray_cache_one, [(m, samples, o, options) for m, o in jobs],
                                                     args.ray, use_gpu=args.device != "cpu"))
        else:
            results = (run_one(m, samples, o, options) for m, o in jobs)
        for result in results:
            codes.append(_report(result, several=len(models) > 1))
            if result["code"] == 130:
                break
        return max(codes)
    finally:
        if tmp is not None:
            tmp.cleanup()


def ray_cache_one(model: str, samples: SampleList, out: Path, options: dict, use_gpu: bool) -> dict:
    """One model in a Ray task (``distributed.map_ray_per_gpu``): on the task's own GPU when
    ``use_gpu`` (Ray sets CUDA_VISIBLE_DEVICES), else on the CPU; no progress bar."""
    return run_one(model, samples, out, {**options, "device": "cuda" if use_gpu else "cpu", "progress": False})


def _report(result: dict, several: bool) -> int:
    """Print one model's outcome: its summary, or one ``error:`` line (named by model when there are several)."""
    if result["error"] is not None:
        prefix = f"{result['model']}: " if several else ""
        print(f"{'' if result['code'] == 130 else 'error: '}{prefix}{result['error']}", file=sys.stderr)
    else:
        _print_summary(result["summary"])
    return result["code"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hsc_core.pipeline.cache_logits`` (also under torchrun); returns the exit status."""
    return run(build_parser().parse_args(argv))


def _print_summary(s: dict) -> None:
    print(f"{s['model']}: {s['n_computed']} of {s['n_samples']} images computed in {s['seconds']:.1f} s "
          f"({s['images_per_s']:.1f} images/s) on {s['device']}, amp={s['amp']}, channels_last={s['channels_last']}, "
          f"decode={s['decode']}")
    if s["n_computed"]:
        decode = f"{s['seconds_decode']:.1f} s decoding on the device, " if s["decode"] == "gpu" else ""
        print(f"  time: {s['seconds_data']:.1f} s waiting for images, {decode}{s['seconds_compute']:.1f} s in the "
              f"model, {s['seconds_write']:.1f} s writing chunks")
    if "top1" in s:
        print(f"top-1 {100 * s['top1']:.2f}% over {s['n_samples']} images; wrote {s['out']}")
        for src, acc in s.get("top1_per_source", {}).items():
            print(f"  {src}: {100 * acc:.2f}%")


if __name__ == "__main__":
    sys.exit(main())
