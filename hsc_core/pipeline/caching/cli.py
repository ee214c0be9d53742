"""``hsc cache-logits``: run models over an image set once and cache their logits
(``hsc_core.datasets.logits_io`` format).

Usage (``hsc cache-logits`` = ``python -m hsc_core cache-logits`` = ``python -m hsc_core.pipeline.cache_logits``)::

    hsc cache-logits --model efficientnet_lite0 \\
        --data ../shared/imagenet-val-sample/labels.csv --out cached_logits/efficientnet_lite0.npz
    hsc cache-logits --models resnet50,convnext_tiny --data DATA --out-dir cached_logits/ [--ray local|auto|ADDRESS]

``--data`` is either a ``labels.csv`` (columns ``file,wnid,label,source``; images in
``--images-dir``, by default the ``images/`` folder beside the CSV) or an ImageFolder directory
whose class folders are named by wnid.

The run is resumable: finished chunks are kept in ``<out>.partial/`` and a rerun with the same
arguments skips them (``store``). Multi-GPU: ``torchrun --nproc_per_node=K -m
hsc_core.pipeline.cache_logits ...`` (``runner``).

Several models (``--models a,b,c`` with ``--out-dir``) run one after another, or with ``--ray`` as one Ray
task per model holding one GPU each (``distributed.map_ray_per_gpu``). Models already done in
``--out-dir`` are skipped; a failing model gets one error line and the others go on.

Decoding: ``--decode cpu`` decodes and resizes with PIL in the DataLoader workers; ``--decode gpu``
(``auto`` on CUDA) has the workers read the bytes and decodes them on the GPU, after checking a
few JPEGs against PIL (``decoding``).

Benchmark: ``--synthetic-jpegs N`` runs on N random JPEGs in a temporary folder (top-1 is
meaningless there; the images/s figure is the point).

Torch is imported only once the samples are read, so ``--help`` and bad input answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...core.validation import clip_path, quote
from .errors import CacheRunError, DatasetError
from .options import AMP_DTYPES, DECODE_MODES, DEVICES, CacheOptions
from .samples import SampleList, describe_dataset, make_synthetic_jpegs, read_samples
from .store import existing_output, output_name

__all__ = ["build_parser", "configure_parser", "main", "run"]


# ---------------------------------------------------------------------------- the options
#: The largest count any option takes (images, a batch, a chunk): more is never work that finishes.
MAX_COUNT = 10_000_000


def _positive_int(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_COUNT:,}, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 256:
        raise argparse.ArgumentTypeError(f"must be from 0 to 256, got {value}")
    return value


def _npz_path(text: str) -> str:
    if Path(text).suffix != ".npz":
        raise argparse.ArgumentTypeError(f"must end in .npz, got {clip_path(text)}")
    return text


def _model_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("no model name given")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a model is listed twice in {quote(text)}")
    return names


class _OldSeed(argparse.Action):
    """``--seed``, the old spelling of ``--variant-seed``: stores it, with one deprecation line on stderr."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: warning: --seed is deprecated; use --variant-seed", file=sys.stderr)
        setattr(namespace, self.dest, values)


def configure_parser(ap: argparse.ArgumentParser) -> None:
    """The options of ``hsc cache-logits`` (and ``python -m hsc_core.pipeline.cache_logits``)."""
    ap.add_argument("--model", "--models", dest="models", type=_model_list, metavar="NAME[,NAME…]",
                    help="registered name (efficientnet_lite0/1/2) or timm model name; several, comma-separated, "
                         "run one after another (or in parallel with --ray) into --out-dir")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--data", help="labels.csv (file,wnid,label,source) or ImageFolder directory (wnid folders)")
    src.add_argument("--synthetic-jpegs", type=_positive_int, metavar="N",
                     help="benchmark on N random JPEGs in a temp dir")
    ap.add_argument("--images-dir", help="image folder for a labels.csv (default: images/ beside it)")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--out", type=_npz_path,
                     help="output .npz of one model (its manifest goes to the .json beside it)")
    out.add_argument("--out-dir", help="output folder: <model>.npz per model; models already done there are skipped")
    ap.add_argument("--batch-size", type=_positive_int, default=64)
    ap.add_argument("--chunk-size", type=_positive_int, default=None,
                    help="images per resumable chunk (default 8 batches)")
    ap.add_argument("--workers", type=_non_negative_int, default=min(8, os.cpu_count() or 1),
                    help="DataLoader worker processes")
    ap.add_argument("--limit", type=_positive_int, default=None, help="only the first N images")
    ap.add_argument("--device", choices=DEVICES, default="auto")
    ap.add_argument("--decode", choices=DECODE_MODES, default="auto",
                    help="where JPEGs are decoded and resized: gpu = nvJPEG on the CUDA device (workers only read "
                         "files), cpu = PIL in the workers; auto = gpu when the model runs on CUDA")
    ap.add_argument("--amp", action=argparse.BooleanOptionalAction, default=None,
                    help="autocast mixed precision (default: on for CUDA, off for CPU)")
    ap.add_argument("--amp-dtype", choices=AMP_DTYPES, default=None,
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
    var = ap.add_argument_group("variants", "what the model sees or computes (recorded in the manifest, "
                                            "with variant_of; see cached_logits/README.md)")
    # Plain strings, checked by CacheOptions: a bad name gets one `error:` line, exit 2.
    var.add_argument("--tta", metavar="flip|multicrop",
                     help="test-time augmentation: image + mirror, or 5 crops; log of the mean probability")
    var.add_argument("--image-size", type=int, metavar="N", help="input resolution instead of the model's own")
    var.add_argument("--mc-dropout", type=int, metavar="PASSES", help="MC dropout with this many passes")
    var.add_argument("--mc-dropout-rate", type=float, default=0.2, metavar="P",
                     help="dropout probability before the classifier for --mc-dropout (default 0.2)")
    var.add_argument("--quantize", metavar="int8",
                     help="int8 dynamic post-training quantization (torch.ao) of the Linear layers, CPU only")
    var.add_argument("--corruption", metavar="NAME",
                     help="ImageNet-C corruption of the inputs: gaussian_noise, gaussian_blur, jpeg_compression "
                          "(shifted data)")
    var.add_argument("--severity", type=int, metavar="1-5", help="severity of --corruption")
    var.add_argument("--variant-seed", dest="seed", type=int, default=0, metavar="SEED",
                     help="seed of MC-dropout masks and noise (default 0)")
    # `--seed` is the calibration split's seed in the evaluation commands (hsc_core/cli/args.py): here it is
    # the old spelling of --variant-seed, kept for one release.
    var.add_argument("--seed", dest="seed", type=int, action=_OldSeed, help=argparse.SUPPRESS)
    var.add_argument("--ensemble", type=_model_list, metavar="A,B[,C…]",
                     help="mean of the members' probabilities into --out; members are cached .npz files "
                          "(no inference) or model names (cached first beside --out, with --data)")


def build_parser() -> argparse.ArgumentParser:
    """The stand-alone parser of ``python -m hsc_core.pipeline.cache_logits``."""
    ap = argparse.ArgumentParser(prog="python -m hsc_core.pipeline.cache_logits",
                                 description="Cache models' ImageNet logits (resumable).")
    configure_parser(ap)
    return ap


def _options(args: argparse.Namespace, samples: SampleList) -> CacheOptions:
    """The parsed flags as ``CacheOptions``, with the manifest's dataset entry."""
    dataset_info = describe_dataset(samples)
    if args.dataset_name:
        dataset_info["name"] = args.dataset_name
    if args.dataset_description:
        dataset_info["description"] = args.dataset_description
    if args.synthetic_jpegs is not None:
        dataset_info["name"] = "synthetic"
    return dataclasses.replace(_variant_options(args), dataset_info=dataset_info)


def _variant_options(args: argparse.Namespace) -> CacheOptions:
    """The flags as ``CacheOptions`` (without the dataset entry); raises ValueError with one line."""
    return CacheOptions(batch_size=args.batch_size, workers=args.workers, device=args.device, amp=args.amp,
                        amp_dtype_name=args.amp_dtype, channels_last=args.channels_last,
                        pretrained=args.pretrained, chunk_size=args.chunk_size, decode=args.decode,
                        progress=not args.no_progress, tta=args.tta, image_size=args.image_size,
                        mc_dropout=args.mc_dropout, mc_dropout_rate=args.mc_dropout_rate, quantize=args.quantize,
                        corruption=args.corruption, severity=args.severity, seed=args.seed)


# ---------------------------------------------------------------------------- the command
def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; returns the exit status (0 all done, 1 a run failed, 2 usage, 130 Ctrl-C)."""
    try:
        options = _variant_options(args)  # bad variant names and ranges answer before any file is read
    except ValueError as exc:
        return _error(str(exc))
    if args.ensemble is not None:
        return _run_ensemble(args, options)
    if not args.models:
        return _error("--model or --ensemble is required")
    if args.data is None and args.synthetic_jpegs is None:
        return _error("--data or --synthetic-jpegs is required")
    if len(args.models) > 1 and args.out:
        return _error("--out names one file; with several models use --out-dir")
    if args.data is not None and not (args.out or args.out_dir):
        return _error("--out or --out-dir is required with --data")
    out_dir: Path | None
    with contextlib.ExitStack() as stack:
        if args.synthetic_jpegs is not None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="hsc_synthetic_"))
            data, out_dir = make_synthetic_jpegs(args.synthetic_jpegs, tmp), Path(args.out_dir or tmp)
        else:
            data, out_dir = Path(args.data), Path(args.out_dir) if args.out_dir else None
        try:
            samples = read_samples(data, args.images_dir)
        except (DatasetError, OSError) as exc:
            return _error(str(exc))
        if args.limit is not None:
            samples = samples.head(args.limit)
        return _run_models(args, samples, _options(args, samples), out_dir)


def _run_models(args: argparse.Namespace, samples: SampleList, options: CacheOptions, out_dir: Path | None) -> int:
    """Run every model not done yet, in turn or on Ray; print each outcome; return the worst exit code."""
    several = len(args.models) > 1
    codes = [0]
    jobs: list[tuple[str, Path]] = []
    for model in args.models:
        if args.out:
            out = Path(args.out)
        else:
            assert out_dir is not None  # run() requires --out or --out-dir (synthetic data makes one)
            out = out_dir / output_name(model, options.variant_tag)
        try:
            if args.out_dir and existing_output(out, model, samples) == "done":
                print(f"{model}: already done ({out}), skipped")
                continue
        except CacheRunError as exc:
            codes.append(_report({"model": model, "code": 2, "error": str(exc)}, several))
            continue
        jobs.append((model, out))
    if args.ray and args.device == "cuda" and args.ray == "local" and not _cuda_available():
        return _error("--device cuda requested but CUDA is not available")
    for result in _results(args, samples, options, jobs):
        codes.append(_report(result, several))
        if result["code"] == 130:
            break
    return max(codes)


def _run_ensemble(args: argparse.Namespace, options: CacheOptions) -> int:
    """``--ensemble a,b,c --out e.npz``: cache the members given by model name (beside ``--out``, skipping
    those done), then average every member's probabilities into ``--out``."""
    from .ensemble import write_ensemble

    if args.models or not args.out:
        return _error("--ensemble takes its members from the list and writes one --out file (no --model, no --out-dir)")
    if options.is_variant:
        return _error("--ensemble combines cached files; make variants of its members first")
    out = Path(args.out)
    files = [Path(m) for m in args.ensemble if m.endswith(".npz")]
    names = [m for m in args.ensemble if not m.endswith(".npz")]
    if names:
        if args.data is None:
            return _error(f"--ensemble member(s) {quote(','.join(names))} are model names, so --data is needed "
                          "to compute them (or give their cached .npz files)")
        members = args.ensemble
        args.models, args.out, args.out_dir, args.ensemble = names, None, str(out.parent), None
        code = run(args)
        args.models, args.out, args.out_dir, args.ensemble = None, str(out), None, members
        if code != 0:
            return code
    paths = [Path(m) if m.endswith(".npz") else out.parent / output_name(m) for m in args.ensemble]
    missing = [p for p in files if not p.is_file()]
    if missing:
        return _error(f"ensemble member {clip_path(missing[0])} not found")
    try:
        bundle = write_ensemble(paths, out)
    except CacheRunError as exc:
        return _error(str(exc))
    print(f"ensemble of {len(paths)}: top-1 {100 * bundle.top1():.2f}% over {bundle.n_samples} images; wrote {out}")
    return 0


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _results(args: argparse.Namespace, samples: SampleList, options: CacheOptions,
             jobs: list[tuple[str, Path]]) -> Iterable[dict]:
    """``runner.run_one``'s result per job, as they finish (on Ray: one task per model)."""
    from .runner import ray_cache_one, run_one

    if not args.ray:
        return (run_one(m, samples, o, options) for m, o in jobs)
    from ..distributed import map_ray_per_gpu

    return (r for _, r in map_ray_per_gpu(ray_cache_one, [(m, samples, o, options) for m, o in jobs],
                                          args.ray, use_gpu=args.device != "cpu"))


def _report(result: dict, several: bool) -> int:
    """Print one model's outcome: its summary, or one ``error:`` line (named by model when there are several)."""
    if result["error"] is not None:
        prefix = f"{result['model']}: " if several else ""
        print(f"{'' if result['code'] == 130 else 'error: '}{prefix}{result['error']}", file=sys.stderr)
    else:
        _print_summary(result["summary"])
    return result["code"]


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hsc_core.pipeline.cache_logits`` (also under torchrun); returns the exit status."""
    return run(build_parser().parse_args(argv))
