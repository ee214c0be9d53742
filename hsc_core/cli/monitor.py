"""``hsc monitor``: watch a deployed θ on a stream, alarm when its promise breaks, adapt θ.

::

    hsc monitor STREAM --card CARD.json [--labels-every K] [--adapt [aci|recalibrate]] [--out CSV]
    hsc monitor --simulate clean:2000,gaussian_blur-3:2000 --card CARD.json …

STREAM is a cached-logits ``.npz`` in arrival order (its labels, every K-th kept); ``--simulate``
plays the card's model's shipped clean and shifted sets instead (``cached_logits/shifted/``),
drawing from the images the card did not calibrate on. Writes a tidy CSV, chunk by chunk (t, θ_t,
each running estimate and its anytime-valid bounds, alarm), and prints a one-line verdict, plus
the alarm's delay after each segment's start for a simulated stream
(``hsc_core.evaluation.monitor``). Bad input: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import config
from ..core.validation import clip_path
from ..datasets.logits_io import load_logits
from ..evaluation.model import ModelEvaluation
from ..evaluation.monitor import (
    ADAPT,
    DEFAULT_GAMMA,
    DEFAULT_PERIOD,
    DEFAULT_WINDOW,
    Deployment,
    StreamMonitor,
    formula_safe_frame,
    held_out_rows,
    parse_simulation,
    simulate_chunks,
)
from ..evaluation.resolve import load_user_hierarchy, resolve_hierarchy
from .args import add_hierarchy, add_seed, count
from .guarantees import _check_out, _level

CHUNK = 50_000


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stream", metavar="STREAM", nargs="?",
                        help="cached-logits .npz in arrival order (or give --simulate)")
    parser.add_argument("--card", required=True, metavar="JSON", help="the decision card's JSON (hsc card)")
    parser.add_argument("--simulate", metavar="SPEC",
                        help="play the card model's shipped sets in order, e.g. clean:2000,gaussian_blur-3:2000")
    parser.add_argument("--labels-every", type=count("--labels-every", 1, 10**9), default=1, metavar="K",
                        help="a label arrives for every K-th sample only (default 1: all)")
    parser.add_argument("--adapt", nargs="?", const="aci", default="fixed", choices=ADAPT,
                        help="θ policy: fixed (default), aci (--adapt alone) or recalibrate")
    parser.add_argument("--gamma", type=float, default=DEFAULT_GAMMA, metavar="G",
                        help=f"ACI's step size (default {DEFAULT_GAMMA})")
    parser.add_argument("--window", type=count("--window", 1, 10**9), default=DEFAULT_WINDOW, metavar="K",
                        help=f"recalibrate on the last K labelled samples (default {DEFAULT_WINDOW})")
    parser.add_argument("--period", type=count("--period", 1, 10**9), default=DEFAULT_PERIOD, metavar="P",
                        help=f"… every P labelled samples (default {DEFAULT_PERIOD})")
    parser.add_argument("--delta", type=_level("--delta"), metavar="D",
                        help="the alarm's error probability (default: the card's δ, else 0.1)")
    parser.add_argument("--min-answered", type=_level("--min-answered"), metavar="S",
                        help="also promise a share answered ≥ S")
    parser.add_argument("--min-answered-accuracy", type=_level("--min-answered-accuracy"), metavar="A",
                        help="also promise an accuracy among answers ≥ A")
    parser.add_argument("--probabilities", action="store_true",
                        help="STREAM holds leaf probabilities, not logits (no temperature applied)")
    parser.add_argument("--out", default="monitor.csv", metavar="CSV", help="the tidy CSV (default monitor.csv)")
    parser.add_argument("--chunk-size", type=count("--chunk-size", 1, 10**7), default=CHUNK, metavar="N",
                        help=f"samples per chunk (default {CHUNK:,})")
    add_seed(parser, 0, "the simulated stream's draws")
    add_hierarchy(parser, dag_and_header=False)


def _read_card(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--card {clip_path(path)} not found")
    try:
        card = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--card {clip_path(path)} is not JSON ({str(exc)[:80]})") from None
    if not isinstance(card, dict):
        raise ValueError(f"--card {clip_path(path)} is not a decision card (expected a JSON object)")
    return card


def _model_of(bundle: Any) -> str:
    m = bundle.manifest or {}
    return str(m.get("variant_of") or m.get("model") or bundle.name)


def _chunks(args: argparse.Namespace, card: dict[str, Any], dep: Deployment) -> tuple[Any, Any]:
    """(hierarchy, chunk iterator) of the stream, after checking it is the card's model and tree."""
    tree = load_user_hierarchy(args.hierarchy, args.classes) if args.hierarchy else None
    if args.simulate:
        spec = parse_simulation(args.simulate)
        model = str(card.get("model", ""))
        path = config.cached_logits_dir() / f"{model}.npz"
        if not model or not path.is_file():
            raise ValueError(f"--simulate plays the card model's shipped sets; no {clip_path(path)}")
        bundle = load_logits(path, keep_float16=True)
        dataset, h = resolve_hierarchy(bundle, str(path), tree)
        dep.check_stream(h, _model_of(bundle))
        ev = ModelEvaluation.from_bundle(bundle, h, dataset=dataset, file=str(path),
                                         protocol=str(card.get("protocol", "project")))
        rows = held_out_rows(ev, card)
        return h, simulate_chunks(spec, model=model, rows=rows, labels_every=args.labels_every,
                                  chunk_size=args.chunk_size, seed=args.seed)
    path = Path(args.stream)
    if not path.is_file():
        raise ValueError(f"stream {clip_path(args.stream)} not found")
    bundle = load_logits(path, keep_float16=True)
    dataset, h = resolve_hierarchy(bundle, str(path), tree)
    dep.check_stream(h, _model_of(bundle))

    def gen() -> Any:
        n = bundle.n_samples
        for s in range(0, n, args.chunk_size):
            idx = np.arange(s, min(n, s + args.chunk_size))
            labels = np.where((idx + 1) % args.labels_every == 0, bundle.labels[idx], -1)
            yield {"scores": bundle.logits[idx], "labels": labels, "ids": None, "image": bundle.sample_ids[idx]}
    return h, gen()


def _write_csv(fh: Any, frame: pd.DataFrame, header: bool) -> None:
    """Append ``frame`` to the binary file ``fh`` as CSV, floats as float32 (7 significant digits):
    with pyarrow's writer when it is importable (ten times faster: the CSV would otherwise be most of
    the time), else pandas'. Text columns (a stream's sample ids) are formula-safe (``formula_safe_frame``)."""
    floats = {c: np.float32 for c in frame.columns if frame[c].dtype == np.float64}
    frame = frame.astype(floats)
    frame = formula_safe_frame(frame)
    try:
        import pyarrow as pa
        import pyarrow.csv as pa_csv
    except ImportError:
        fh.write(frame.to_csv(header=header, index=False, float_format="%.7g", lineterminator="\n").encode("utf-8"))
        return
    pa_csv.write_csv(pa.Table.from_pandas(frame, preserve_index=False), fh,
                     write_options=pa_csv.WriteOptions(include_header=header))


def run(args: argparse.Namespace) -> int:
    if bool(args.stream) == bool(args.simulate):
        raise ValueError("give a STREAM file or --simulate SPEC (one of them)")
    _check_out(args.out)
    card = _read_card(args.card)
    dep = Deployment.from_card(card, delta=args.delta, min_answered=args.min_answered,
                               min_answered_accuracy=args.min_answered_accuracy)
    if args.probabilities:
        dep = Deployment(dep.theta, dep.target, dep.promises, dep.delta, dep.rule, 1.0, dep.model, dep.hierarchy_hash)
    h, chunks = _chunks(args, card, dep)
    mon = StreamMonitor(h, dep, adapt=args.adapt, gamma=args.gamma, window=args.window, period=args.period,
                        inputs="probabilities" if args.probabilities else "logits")
    out = Path(args.out)
    segments: dict[str, list[int]] = {}  # segment → [start t, samples]
    with out.open("wb") as fh:
        for i, chunk in enumerate(chunks):
            rows = mon.update(chunk["scores"], chunk["labels"], ids=chunk.get("ids"))
            frame = pd.DataFrame({**({"segment": chunk["segment"]} if "segment" in chunk else {}),
                                  "image": chunk["image"], **rows})
            if "segment" in chunk:
                seg = frame["segment"].to_numpy()
                for name, first in zip(*np.unique(seg, return_index=True), strict=True):
                    segments.setdefault(str(name), [int(rows["t"][first]), 0])[1] += int((seg == name).sum())
            _write_csv(fh, frame, header=i == 0)
    if mon.t == 0:
        out.unlink(missing_ok=True)
        raise ValueError("the stream is empty: no samples to monitor")
    print(mon.verdict())
    for name, (start, n) in segments.items():
        delay = "no alarm" if mon.first_alarm is None else (
            f"alarm {mon.first_alarm - start:,} samples after its start" if mon.first_alarm >= start
            else "alarm before it began")
        print(f"  {name}: samples {start:,}–{start + n - 1:,}, {delay}")
    print(f"wrote {out} ({mon.t:,} rows)", file=sys.stderr)
    return 0
