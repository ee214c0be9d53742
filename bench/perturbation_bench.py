"""Benchmark of the live perturbation view: time per degradation step with EfficientNet-Lite0 on the
CPU, limited to 2 threads (target ≤ 1 s per step).

    .venv/bin/python bench/perturbation_bench.py [--model efficientnet_lite0] [--threads 2] [--image FILE]

Prints, median of 5 runs after one warm-up (the model load is reported apart): one step
(degrade + forward pass of one image), and the whole sweep of severities 0–5 as one batch (what the
page computes once per image, model and corruption), for blur and noise. The image is the first of
``../shared/imagenet-val-sample/images`` when present, else a seeded random 500×375 photo-sized
array. Wall-clock on whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from PIL import Image  # noqa: E402

from hsc_core.pipeline.inference import _cached_model  # noqa: E402
from hsc_core.pipeline.perturbation import degrade, degraded_images, degraded_logits, network_scale  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "imagenet-val-sample" / "images"


def median_time(fn, repeat: int = 5) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="efficientnet_lite0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--image")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.image:
        image = Image.open(args.image).convert("RGB")
    elif SAMPLE.is_dir():
        image = Image.open(sorted(SAMPLE.iterdir())[0]).convert("RGB")
    else:
        image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (375, 500, 3), dtype=np.uint8))
    t = time.perf_counter()
    _cached_model(args.model)
    print(f"{args.model}, {torch.get_num_threads()} threads, image {image.size[0]}×{image.size[1]}; "
          f"model load (once): {time.perf_counter() - t:.2f} s")
    base = network_scale(image)
    for kind in ("blur", "noise"):
        step = median_time(lambda k=kind: degraded_logits([degrade(base, k, 3)], args.model))
        sweep = median_time(lambda k=kind: degraded_logits(degraded_images(image, k), args.model))
        print(f"{kind:5s}: one step (degrade + forward) {1000 * step:6.0f} ms · sweep of 6 severities in one batch "
              f"{1000 * sweep:6.0f} ms ({1000 * sweep / 6:.0f} ms per step)")


if __name__ == "__main__":
    main()
