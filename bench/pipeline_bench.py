"""Throughput of the logit-caching pipeline: images/s, end to end and for the model alone.

    python bench/pipeline_bench.py [--images 256] [--batch-size 64] [--workers N] [--device auto]
                                   [--decode cpu|gpu|both] [--best-only]

It runs efficientnet_lite0 and timm's resnet50 at random init (no download needed) on
synthetic 500×375 JPEGs, for every combination of AMP on/off and channels_last on/off
(``--best-only``: AMP + channels_last only), on whatever device is present. "pipeline" is the
real ``hsc_core.pipeline.caching`` path: read, decode, resize and crop, transfer, forward.
``--decode cpu`` decodes with PIL in the DataLoader workers; ``--decode gpu`` (CUDA only) has the
workers read the bytes and decodes them with nvJPEG on the GPU (``cache_logits --decode gpu``);
``both`` (the default on CUDA) measures the two side by side. "model only" feeds ready tensors, so
the difference shows whether decoding or the network is the bottleneck. The pipeline figure
includes DataLoader start-up and the first batch, as a real run does.

The GPU-decode figures in docs/guide/performance.md come from

    python bench/pipeline_bench.py --decode both --best-only --workers 15
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsc_core.pipeline.caching.runner import amp_dtype, cache_logits, resolve_device
from hsc_core.pipeline.caching.samples import make_synthetic_jpegs, read_samples
from hsc_core.pipeline.models import load_model

MODELS = ("efficientnet_lite0", "resnet50")


def model_only(name: str, device: torch.device, amp: bool, channels_last: bool, batch: int, iters: int) -> float:
    """Images/s of the forward pass alone, on a fixed random batch."""
    model, _, info = load_model(name, device=device, pretrained=False)
    dt = amp_dtype(device, amp)
    x = torch.randn(batch, 3, info.input_size, info.input_size, device=device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    ctx = torch.autocast(device_type=device.type, dtype=dt) if dt is not None else torch.autocast(
        device_type=device.type, enabled=False)

    def step() -> None:
        with torch.inference_mode(), ctx:
            model(x)

    step()  # warm-up: cuDNN/oneDNN pick their kernels on the first call
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return batch * iters / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=None, help="synthetic JPEGs (default 256 on CPU, 8192 on GPU)")
    ap.add_argument("--batch-size", type=int, default=None, help="default 32 on CPU, 256 on GPU")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--iters", type=int, default=None, help="model-only batches (default 4 on CPU, 30 on GPU)")
    ap.add_argument("--decode", choices=("cpu", "gpu", "both"), default=None,
                    help="where JPEGs are decoded (default: both on CUDA, cpu otherwise)")
    ap.add_argument("--best-only", action="store_true", help="only AMP on + channels_last (the CUDA default)")
    args = ap.parse_args(argv)

    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    decode = args.decode or ("both" if gpu else "cpu")
    if decode != "cpu" and not gpu:
        ap.error("--decode gpu needs CUDA")
    decodes = ("cpu", "gpu") if decode == "both" else (decode,)
    configs = [(True, True)] if args.best_only else [(a, c) for a in (False, True) for c in (False, True)]
    torch.backends.cudnn.benchmark = gpu  # as cache_logits does on CUDA
    # Enough images on a GPU that the first batch (decoded by one worker alone) is amortised.
    n_images = args.images or (8192 if gpu else 256)
    batch = args.batch_size or (256 if gpu else 32)
    iters = args.iters or (30 if gpu else 4)
    where = (torch.cuda.get_device_name(device) if gpu
             else f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)")
    print(f"device: {where}; torch {torch.__version__}; {n_images} synthetic JPEGs 500x375, "
          f"batch {batch}, {args.workers} workers")
    print(f"{'model':<20} {'amp':<9} {'ch_last':<8} {'decode':<7} {'pipeline img/s':>15} {'model only img/s':>17}"
          f" {'data wait s':>12} {'decode s':>9} {'model s':>8}")
    with tempfile.TemporaryDirectory(prefix="hsc_bench_") as tmp:
        samples = read_samples(make_synthetic_jpegs(n_images, tmp))
        for name in args.models:
            for amp, cl in configs:
                # Model-only first: it also warms the process up (CUDA loads each kernel on first
                # use, cuDNN picks algorithms), so the pipeline figure is not charged for that.
                mo = model_only(name, device, amp, cl, batch, iters)
                for dec in decodes:
                    out = Path(tmp) / f"{name}_{amp}_{cl}_{dec}.npz"
                    s = cache_logits(name, samples, out, batch_size=batch, workers=args.workers,
                                     device=device.type, amp=amp, channels_last=cl, pretrained=False,
                                     progress=False, decode=dec)
                    amp_name = s["amp"] or "off"
                    print(f"{name:<20} {amp_name:<9} {cl!s:<8} {s['decode']:<7} {s['images_per_s']:>15.1f}"
                          f" {mo:>17.1f} {s['seconds_data']:>12.2f} {s['seconds_decode']:>9.2f}"
                          f" {s['seconds_compute']:>8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
