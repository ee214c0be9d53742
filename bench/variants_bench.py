"""Cost of the model variants of ``hsc cache-logits``: images/s of the network alone, per variant.

    python bench/variants_bench.py [--model efficientnet_lite0] [--batch-size 32] [--repeats 3] [--random-init]

Feeds one ready (N, 3, H, W) batch (no decoding) to the model as ``cache_logits`` wraps it for each variant
(``pipeline.caching.variants``): float32, bfloat16 autocast, int8 dynamic quantization, flip TTA (2 views),
multi-crop TTA (5 crops of the resized square), MC dropout with 10 passes (backbone once), 260-px input.
Prints the best of ``--repeats`` timed runs after one warm-up. On a shared CPU the numbers move with the
load; their ratios are the point.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time

import torch

from hsc_core.pipeline.caching import variants
from hsc_core.pipeline.caching.options import CacheOptions
from hsc_core.pipeline.models import load_model

VARIANTS = {
    "float32": CacheOptions(),
    "bf16": CacheOptions(amp=True, amp_dtype_name="bfloat16"),
    "int8 (Linear)": CacheOptions(quantize="int8"),
    "flip TTA": CacheOptions(tta="flip"),
    "multicrop TTA": CacheOptions(tta="multicrop"),
    "MC dropout ×10": CacheOptions(mc_dropout=10),
    "260 px": CacheOptions(image_size=260),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--random-init", action="store_true", help="random weights (same cost, no weights needed)")
    args = ap.parse_args()
    base, _, info = load_model(args.model, pretrained=not args.random_init)
    base = base.to(memory_format=torch.channels_last)
    cpu = torch.device("cpu")
    print(f"{args.model}, batch {args.batch_size}, {torch.get_num_threads()} threads, model only")
    for name, options in VARIANTS.items():
        vinfo = variants.variant_info(info, options)
        side = vinfo.resize if options.tta == "multicrop" else vinfo.input_size
        x = torch.randn(args.batch_size, 3, side, side).contiguous(memory_format=torch.channels_last)
        model = variants.wrap_model(base, vinfo, dataclasses.replace(options), cpu)
        idx = torch.arange(args.batch_size)
        forward = functools.partial(_forward, model, x, idx, bool(options.amp))
        forward()
        best = min(_timed(forward) for _ in range(args.repeats))
        print(f"  {name:<16} {args.batch_size / best:8.1f} images/s")


def _forward(model: torch.nn.Module, x: torch.Tensor, idx: torch.Tensor, bf16: bool) -> None:
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        model(x, idx) if getattr(model, "needs_sample_index", False) else model(x)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
