"""From image files to uint8 (N, 3, H, W) batches: PIL in the DataLoader workers, or JPEG bytes
decoded on the device.

With CUDA, JPEG decoding in the CPU workers is the bottleneck (1.7k img/s end to end against 21k
for the network alone on an H100). In the "gpu" mode the workers only read the files' bytes; a
helper thread of the main process decodes each batch with nvJPEG (``torchvision.io.decode_jpeg`` on
CUDA), one batch ahead of the network, and resizes and crops it on the device as the model's
transform does (``models.make_tensor_transform``). ``decode_batch`` is the one place that decodes
on the device; ``check_device_decode`` compares it with PIL before a run trusts it.
"""

from __future__ import annotations

import io
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

import torch
from torch.utils.data import DataLoader, Dataset

from ...datasets.images import max_image_pixels
from ..inference import ImageReadError, read_image
from .errors import CacheRunError

__all__ = [
    "DECODE_CHECK_TOLERANCE",
    "EncodedImageDataset",
    "ImageDataset",
    "batches",
    "check_device_decode",
    "choose_decode",
    "collate",
    "collate_encoded",
    "decode_batch",
    "device_decoder",
    "make_loader",
]

# Mean |device − PIL| in grey levels above which the device decoder is not trusted. torchvision's
# own test allows a mean of 2 between nvJPEG and libjpeg-turbo; a broken decode is off by tens.
DECODE_CHECK_TOLERANCE = 3.0
# Images resized together at most; bounds the float32 buffer (64 × 3 × 375 × 500 × 4 B = 144 MB).
_RESIZE_GROUP = 64

Decoder = Callable[[list[torch.Tensor], torch.Tensor], torch.Tensor]


# ---------------------------------------------------------------------------- in the workers
class ImageDataset(Dataset):
    """Decodes, resizes and crops the images with PIL; item = (uint8 (3, H, W) tensor, sample index),
    or (the ``ImageReadError`` message, index) for an unreadable image."""

    def __init__(self, paths: Sequence[Path], transform: Callable) -> None:
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
    except Exception:  # noqa: BLE001 - an undecodable header: the PIL path names the file in its error
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


def collate(items: list[tuple[torch.Tensor | str, int]]) -> tuple[torch.Tensor | None, torch.Tensor, str | None]:
    """Stack a batch into (uint8 (N, 3, H, W), indices (N,), None), or (None, indices, message) when
    an image is unreadable. This runs inside the worker, so the error is reported, not raised, here."""
    images, idx, error = collate_encoded(items)
    return (None if images is None else torch.stack(images)), idx, error


def collate_encoded(items: list[tuple[torch.Tensor | str, int]]
                    ) -> tuple[list[torch.Tensor] | None, torch.Tensor, str | None]:
    """Like ``collate``, but keeps the (variously sized) tensors in a list: decoding comes later."""
    idx = torch.as_tensor([i for _, i in items])
    images: list[torch.Tensor] = []
    for x, _ in items:
        if isinstance(x, str):
            return None, idx, x
        images.append(x)
    return images, idx, None


def make_loader(paths: Sequence[Path], transform: Callable, batch_plan: list[list[int]], *, on_device: bool,
                workers: int, pin_memory: bool) -> DataLoader:
    """The DataLoader over ``paths`` in the batches of ``batch_plan`` (lists of sample indices):
    encoded JPEGs for device decoding (``on_device``), else PIL-decoded uint8 images."""
    return DataLoader(
        (EncodedImageDataset if on_device else ImageDataset)(paths, transform),
        batch_sampler=batch_plan,
        collate_fn=collate_encoded if on_device else collate,
        num_workers=workers,
        pin_memory=pin_memory,
        persistent_workers=False,
    )


# ---------------------------------------------------------------------------- on the device
def decode_batch(items: Sequence[torch.Tensor], paths: Sequence[Path], device: torch.device,
                 transform: Callable, tensor_transform: Callable) -> torch.Tensor:
    """Decode and transform one batch on ``device``; return uint8 (N, 3, H, W).

    ``items`` come from ``EncodedImageDataset``: 1-D tensors are encoded JPEGs, decoded here with
    ``torchvision.io.decode_jpeg`` (nvJPEG on CUDA, libjpeg-turbo on the CPU), 3-D ones are
    already transformed pixels. A JPEG the decoder rejects is read again with PIL and ``transform``
    (the PIL path's ``make_transform(..., uint8=True)``), so it gets the CPU path's result, or its
    ``ImageReadError``. Decoded images are grouped by size and ``tensor_transform``
    (``make_tensor_transform``, the same resize and crop to ±1 grey level) runs on each group as one batch.
    """
    encoded = [k for k, x in enumerate(items) if x.ndim == 1]
    out: list[torch.Tensor | None] = [None if x.ndim == 1 else x.to(device, non_blocking=True) for x in items]
    decoded = _decode_jpegs({k: items[k] for k in encoded}, device)
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for k, img in decoded.items():
        groups[tuple(img.shape)].append(k)
    for ks in groups.values():
        for g in range(0, len(ks), _RESIZE_GROUP):
            part = ks[g:g + _RESIZE_GROUP]
            x = tensor_transform(torch.stack([decoded[k] for k in part]))
            for k, xk in zip(part, x, strict=True):
                out[k] = xk
    images: list[torch.Tensor] = []
    for k, image in enumerate(out):
        if image is None:  # the decoder refused it: PIL decides, with the CPU path's error message
            image = transform(read_image(paths[k], name=str(paths[k]))).to(device)
        images.append(image)
    return torch.stack(images)


def _decode_jpegs(encoded: dict[int, torch.Tensor], device: torch.device) -> dict[int, torch.Tensor]:
    """{position: uint8 (3, h, w) on ``device``} for the JPEG bytes that decode; the others are left out."""
    if not encoded:
        return {}
    from torchvision.io import ImageReadMode, decode_jpeg

    with warnings.catch_warnings():
        # torchvision 0.29 marks its image codecs deprecated in favour of TorchCodec; they still work.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            images = decode_jpeg(list(encoded.values()), mode=ImageReadMode.RGB, device=device)
            return dict(zip(encoded, images, strict=True))
        except RuntimeError:
            pass
        # One bad file fails the whole batched call: retry one by one, the rest stay fast.
        decoded = {}
        for k, data in encoded.items():
            try:
                decoded[k] = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
            except RuntimeError:
                pass
        return decoded


def device_decoder(paths: Sequence[Path], device: torch.device, transform: Callable,
                   tensor_transform: Callable) -> Decoder:
    """``decode(items, indices)``: ``decode_batch`` for a ``collate_encoded`` batch of the samples
    ``indices`` (N,) of ``paths``; uint8 (N, 3, H, W) on ``device``."""
    def decode(items: list[torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        return decode_batch(items, [paths[int(i)] for i in idx], device, transform, tensor_transform)

    return decode


def check_device_decode(paths: Sequence[Path], device: torch.device, transform: Callable,
                        tensor_transform: Callable, n: int = 8, scan: int = 64) -> tuple[str, str] | None:
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
    twin (``supported``); ``gpu`` insists on both; ``cpu`` never decodes on the device.
    ``decode`` is one of ``options.DECODE_MODES`` (``CacheOptions`` checks it)."""
    if decode == "gpu" and device.type != "cuda":
        raise CacheRunError("--decode gpu needs CUDA (the run is on the CPU); use --decode cpu or auto")
    if decode == "gpu" and not supported:
        raise CacheRunError("--decode gpu supports centre/squash crops of square inputs with bicubic or bilinear "
                            "resizing; this model's preprocessing needs --decode cpu")
    return decode == "gpu" or (decode == "auto" and device.type == "cuda" and supported)


def choose_decode(decode: str, device: torch.device, paths: Sequence[Path], transform: Callable,
                  tensor_transform: Callable | None) -> tuple[bool, str | None]:
    """(decode on the device?, a one-line note for stderr or None) for the ``decode`` mode.

    A device decoder is used only after ``check_device_decode`` on ``paths``: with ``auto`` a failure
    or a mismatch puts the run back on PIL (the note says why); with ``gpu`` a failure raises
    CacheRunError and a mismatch only warns, since the user asked for it by name."""
    if not _use_device_decode(decode, device, tensor_transform is not None):
        return False, None
    # _use_device_decode is True only with a tensor transform
    problem = check_device_decode(paths, device, transform, cast(Callable, tensor_transform))
    if problem is None:
        return True, None
    kind, reason = problem
    if decode == "auto":
        return False, (f"GPU decoding is off for this run: {reason}; PIL decodes in the CPU workers instead "
                       f"(--decode gpu forces it)")
    if kind == "failed":
        raise CacheRunError(f"--decode gpu: {reason}; use --decode cpu or auto")
    return True, f"warning: {reason}; going on because --decode gpu was asked for"


# ---------------------------------------------------------------------------- batches, as the model takes them
def batches(loader: DataLoader, stats: dict[str, float], device: torch.device,
            decode: Decoder | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(uint8 images (N, 3, H, W), sample indices (N,)) per batch of ``loader``, decoded on ``device``
    by ``decode`` (``device_decoder``) when given; an unreadable image raises its ImageReadError in
    its batch's turn. ``stats`` accumulates the seconds spent waiting for the workers ("data") and
    for the device decoder ("decode")."""
    for key in ("data", "decode"):
        stats.setdefault(key, 0.0)
    if decode is None:
        return _loaded_batches(loader, stats)
    return _decoded_batches(loader, decode, device, stats)


def _loaded_batches(loader: DataLoader, stats: dict[str, float]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(uint8 images, indices) from the workers; an unreadable image raises its ImageReadError."""
    for x, idx, error in _raw_batches(loader, stats):
        if error is not None:
            raise ImageReadError(error)
        yield x, idx


def _decoded_batches(loader: DataLoader, decode: Decoder, device: torch.device,
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
        for items, idx, error in _raw_batches(loader, stats):
            nxt = ("error", error, idx) if error is not None else ("ok", pool.submit(work, items, idx), idx)
            if ahead is not None:
                yield result(ahead)
            ahead = nxt
        if ahead is not None:
            yield result(ahead)


def _raw_batches(loader: DataLoader, stats: dict[str, float]) -> Iterator[tuple]:
    """The loader's batches as they come, timing the wait for each ("data")."""
    it = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            return
        stats["data"] += time.perf_counter() - t0
        yield item
