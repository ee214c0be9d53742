"""``hsc report``: one self-contained, offline HTML file with every figure and table of some models.

::

    hsc report cached_logits/*.npz --out report.html [--hierarchy FILE [--classes FILE]] [--subset NAME]
                                   [--protocol {project,paper}] [--n-resamples B] [--bootstrap-seed S]

The command line of ``report.html_report.build_report``: each file is checked (classes, tree,
subset) before any long work, then read, evaluated and laid out one at a time. ``--subset`` takes
the names the dashboard's Samples picker offers (``evaluation.subsets``). ``--resamples`` and
``--seed`` (the bootstrap seed here, for one more release) are the old spellings of
``--n-resamples`` and ``--bootstrap-seed``.
"""

from __future__ import annotations

import argparse
import gc
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..core.calibrators import calibrator_names
from ..core.protocol import PROTOCOLS
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES
from ..core.validation import clip_path
from ..datasets.atomic_files import atomic_write
from ..datasets.logits_io import LogitsBundle, load_logits
from ..evaluation import ModelEvaluation
from ..evaluation.guarantee_methods import METHODS
from ..evaluation.resolve import expand_inputs, load_user_hierarchy, resolve_hierarchy
from ..evaluation.subsets import check_subset
from ..evaluation.subsets import subset_mask as named_subset_mask
from ..report.html_report import build_report
from .args import add_bootstrap, add_hierarchy, add_scores, add_subset, parse_calibrators, parse_confidences

__all__ = ["configure_parser", "run", "subset_mask"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="LOGITS",
                        help=".npz logits files, folders (every .npz inside) or quoted glob patterns")
    parser.add_argument("--out", default="report.html", metavar="HTML", help="the report file (default report.html)")
    add_hierarchy(parser)
    add_subset(parser)
    parser.add_argument("--protocol", choices=PROTOCOLS, default="project",
                        help="project (default): every metric on the 90 %% evaluation split; paper: as the "
                             "authors' code, metrics without TS on all samples")
    add_bootstrap(parser, n_resamples=N_RESAMPLES, seed=BOOTSTRAP_SEED, old_seed=True)
    parser.add_argument("--title", help="report title (default: names the models)")
    parser.add_argument("--card-target", type=float, metavar="A",
                        help="embed a decision card per model for accuracy ≥ A (see hsc card)")
    parser.add_argument("--card-delta", type=float, default=0.1, metavar="D",
                        help="the cards' failure probability δ (default 0.1)")
    parser.add_argument("--card-method", default="theorem1_pac", choices=list(METHODS),
                        help="the cards' method (default theorem1_pac)")
    # Either one adds each model's calibrator × confidence benchmark (the other defaults to every listed name).
    add_scores(parser, "every listed one, when --confidence is given; none: no benchmark section",
               "every listed one, when --calibrator is given")


def subset_mask(bundle: LogitsBundle, name: str) -> np.ndarray | None:
    """None for "all"; else the samples of the subset ``name`` (``evaluation.subsets``: one
    ValueError naming the file's choices when it offers no such subset)."""
    return named_subset_mask(bundle.sources, bundle.n_samples, name, where=bundle.name)


def _write_atomic(path: Path, text: str) -> None:
    """``text`` to ``path`` through a temp file renamed over it, with the permissions a plain
    ``open()`` gives (0644 under the usual umask 022), not mkstemp's 0600."""
    def write(fh) -> None:
        fh.write(text.encode("utf-8"))

    atomic_write(path, write)


def _check_args(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out must name an .html file, got {clip_path(args.out)}")
    if args.n_resamples < 100:
        raise ValueError(f"--n-resamples must be at least 100 for a 95 % interval, got {args.n_resamples}")
    if args.classes and not args.hierarchy:
        raise ValueError("--classes orders the leaves of --hierarchy FILE; pass --hierarchy too")
    if args.card_target is not None and not 0 < args.card_target < 1:
        raise ValueError(f"--card-target must lie in (0, 1), got {args.card_target}")
    if not 0 < args.card_delta < 1:
        raise ValueError(f"--card-delta must lie in (0, 1), got {args.card_delta}")
    return out


def _load(path: Path) -> LogitsBundle:
    # float16 files stay float16: the layer casts a chunk at a time, so the numbers are the same
    # and the logits take half the memory (2 GB instead of 4 GB at iNat21 size).
    return load_logits(path, keep_float16=True)


def _checked_jobs(args: argparse.Namespace) -> list[list]:
    """[file, data set, tree, bundle or None] of every input, each checked (classes, tree, subset)
    before any long work. A single file's bundle is kept for its evaluation (no second read);
    with several, each is read again when its turn comes, so one file's logits are held at a time."""
    tree = load_user_hierarchy(args.hierarchy, args.classes, args.first_parent, args.header) if args.hierarchy else None
    paths = expand_inputs(args.inputs)
    jobs = []
    for p in paths:
        bundle = _load(p)
        dataset, hierarchy = resolve_hierarchy(bundle, str(p), tree)
        subset_mask(bundle, args.subset)
        jobs.append([p, dataset, hierarchy, bundle if len(paths) == 1 else None])
        del bundle
    return jobs


def _progress(what: str):
    """``progress(done, total)`` for a long evaluation: ``  TS off: 10 % 20 % … 100 %`` on stderr,
    one line that reads the same in a terminal and in a log file."""
    shown = [0]

    def report(done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        if tenth > shown[0]:
            start = f"  {what}:" if shown[0] == 0 else ""
            print(start + "".join(f" {10 * k} %" for k in range(shown[0] + 1, tenth + 1)),
                  end="\n" if tenth == 10 else "", file=sys.stderr, flush=True)
            shown[0] = tenth
    return report


def _evaluations(jobs: list[list], args: argparse.Namespace) -> Iterator[ModelEvaluation]:
    """One ``ModelEvaluation`` per file, loaded only when the report asks for it."""
    for job in jobs:
        path, dataset, hierarchy, bundle = job
        job[3] = None  # the job list must not keep the logits alive
        if bundle is None:
            bundle = _load(path)
        print(f"{path}: evaluating ({bundle.n_samples:,} samples, {args.n_resamples:,} bootstrap resamples)…",
              file=sys.stderr, flush=True)
        ev = ModelEvaluation.from_bundle(bundle, hierarchy, dataset=dataset, subset=subset_mask(bundle, args.subset),
                                         subset_name=check_subset(bundle.sources, bundle.n_samples, args.subset).name,
                                         file=str(path), protocol=args.protocol)
        for ts in (False, True):  # build the decision paths now, with a progress line
            ev.setting(ts, progress=_progress("TS on" if ts else "TS off"))
        del bundle
        yield ev
        # Free this model's logits before the next file is read. Each EvaluationSet refers back to
        # its ModelEvaluation (a cycle), so reference counting alone would not.
        del ev
        gc.collect()


def _command(args: argparse.Namespace) -> str:
    return shlex.join(["hsc", "report", *args.inputs, "--out", args.out]
                      + (["--hierarchy", args.hierarchy] if args.hierarchy else [])
                      + (["--classes", args.classes] if args.classes else [])
                      + (["--subset", args.subset] if args.subset not in ("", "all") else [])
                      + (["--protocol", args.protocol] if args.protocol != "project" else [])
                      + (["--card-target", str(args.card_target), "--card-delta", str(args.card_delta),
                          "--card-method", args.card_method] if args.card_target is not None else [])
                      + (["--calibrator", args.calibrator] if args.calibrator else [])
                      + (["--confidence", args.confidence] if args.confidence else []))


def run(args: argparse.Namespace) -> int:
    out = _check_args(args)
    jobs = _checked_jobs(args)
    card = None if args.card_target is None else {
        "target_accuracy": args.card_target, "delta": args.card_delta, "method": args.card_method}
    scores = None
    if args.calibrator is not None or args.confidence is not None:  # the benchmark section, on request
        # Without --confidence: every score each model offers (the member scores for an ensemble only).
        scores = {"calibrators": parse_calibrators(args.calibrator, calibrator_names()),
                  "confidences": None if args.confidence is None else parse_confidences(args.confidence)}
    text = build_report(_evaluations(jobs, args), args.title, _command(args), n_resamples=args.n_resamples,
                        seed=args.bootstrap_seed, card=card, calibrators=scores)
    _write_atomic(out, text)
    print(f"{len(jobs)} model{'s' * (len(jobs) != 1)} → {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0
