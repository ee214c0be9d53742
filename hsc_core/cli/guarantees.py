"""``hsc guarantees`` (every guarantee side by side) and ``hsc card`` (the decision card to deploy).

::

    hsc guarantees LOGITS --target-accuracy A [--delta D] [--n-cal N] [--reps R] [--methods M …]
                   [--sampling iid|split] [--min-coverage C] [--max-severity S] [--out summary.csv]
    hsc card LOGITS --target-accuracy A [--delta D] [--method M] [--n-cal N] [--out card.md]

Thin front ends of ``hsc_core.evaluation.guarantees`` and ``.card``: one model's logits, its
built-in (or ``--hierarchy``) tree, the evaluation split of the project protocol, with temperature
scaling unless ``--no-ts``. Bad input: one line on stderr, exit code 2 (``hsc_core.cli``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core.ltt import P_VALUES
from ..core.validation import clip_path
from ..datasets.logits_io import load_logits
from ..evaluation.card import CARD_REPS, card_json, card_markdown, decision_card, promise_words, realised_words
from ..evaluation.guarantee_methods import (
    DEFAULT_METHODS,
    METHODS,
    MONDRIAN_DEPTH,
    N_LAMBDAS,
    N_REPS,
    SAMPLINGS,
    GuaranteeSettings,
    check_methods,
    needs_delta,
)
from ..evaluation.model import ModelEvaluation
from ..evaluation.resolve import load_user_hierarchy, resolve_hierarchy
from ..evaluation.results import to_csv
from ..evaluation.shootout import SUMMARY_COLUMNS, shootout
from ..evaluation.threshold import DEFAULT_DELTA, DEFAULT_METHOD, default_n_cal
from .args import MAX_LAMBDAS, MAX_REPS, add_hierarchy, add_seed, add_ts, count

N_CAL_EPILOG = ("--n-cal defaults to 1,000, at most 90 % of the evaluation split (as the dashboard's Guaranteed "
                "accuracy page).")


def _level(flag: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number in (0, 1), got {text[:40]!r}") from None
        if not 0.0 < v < 1.0:
            raise argparse.ArgumentTypeError(f"{flag} must lie in (0, 1), got {text[:40]!r}")
        return v
    return parse


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logits", metavar="LOGITS", help="one cached-logits .npz file")
    parser.add_argument("--target-accuracy", required=True, type=_level("--target-accuracy"), metavar="A",
                        help="the accuracy 1 − α to guarantee, e.g. 0.95")
    parser.add_argument("--delta", type=_level("--delta"), metavar="D",
                        help="failure probability δ of the PAC guarantees (ltt_selective, theorem1_pac, LTT), "
                             "e.g. 0.1; needed when such a method is named (hsc card's default method takes "
                             f"δ = {DEFAULT_DELTA} unless given)")
    parser.add_argument("--n-cal", type=count("--n-cal", 1, 10**9), metavar="N",
                        help="calibration size (default: see below; at most the evaluation split's samples)")
    add_seed(parser, 0, "the calibration draws")
    add_hierarchy(parser, dag_and_header=False)
    add_ts(parser, default=True)
    parser.add_argument("--min-coverage", type=_level("--min-coverage"), metavar="C",
                        help="second risk of ltt_multi: mean coverage ≥ C")
    parser.add_argument("--max-severity", type=_level("--max-severity"), metavar="S",
                        help="second risk of ltt_multi: mean severity ≤ S")
    parser.add_argument("--p-value", choices=P_VALUES, default="binomial",
                        help="LTT p-values: exact binomial tail (default) or Hoeffding–Bentkus")
    parser.add_argument("--mondrian-depth", type=count("--mondrian-depth", 0, 10_000), default=MONDRIAN_DEPTH,
                        metavar="D",
                        help=f"depth of the superclasses of the Mondrian methods (default {MONDRIAN_DEPTH})")
    parser.add_argument("--n-lambdas", type=count("--n-lambdas", 1, MAX_LAMBDAS), default=N_LAMBDAS, metavar="M",
                        help=f"LTT grid size (default {N_LAMBDAS}, at most {MAX_LAMBDAS:,})")


def load_evaluation(args: argparse.Namespace) -> ModelEvaluation:
    """The model of ``args.logits`` under the project protocol, on its tree."""
    path = Path(args.logits)
    if not path.is_file():
        raise ValueError(f"logits file {clip_path(args.logits)} not found")
    bundle = load_logits(path)
    tree = load_user_hierarchy(args.hierarchy, args.classes) if args.hierarchy else None
    dataset, hierarchy = resolve_hierarchy(bundle, str(path), tree)
    return ModelEvaluation.from_bundle(bundle, hierarchy, dataset=dataset, file=str(path))


def _check_out(path: str | None) -> None:
    """Fail before the long work when the output's folder does not exist."""
    if path and not Path(path).resolve().parent.is_dir():
        raise ValueError(f"--out {clip_path(path)}: its folder does not exist")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"min_coverage": args.min_coverage, "max_severity": args.max_severity, "p_value": args.p_value,
            "n_lambdas": args.n_lambdas, "mondrian_depth": args.mondrian_depth}


def _require_delta(methods: list[str], delta: float | None) -> None:
    """One line, before any work, when a method that reads δ runs without --delta."""
    pac = [m for m in methods if needs_delta(m)]
    if pac and delta is None:
        raise ValueError(f"--delta is needed for {', '.join(pac)} (a PAC guarantee holds with probability "
                         "≥ 1 − δ); give --delta D, or pick methods without δ with --methods / --method")


def _bar(desc: str):
    from tqdm.auto import tqdm

    state: dict[str, Any] = {}

    def progress(done: int, total: int) -> None:
        if "bar" not in state:
            state["bar"] = tqdm(total=total, desc=desc, unit="step", file=sys.stderr, leave=False, disable=None)
        state["bar"].update(done - state["bar"].n)
        if done >= total:
            state["bar"].close()
    return progress


# ---------------------------------------------------------------------------- hsc guarantees
def configure_parser(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.description = ("Every accuracy guarantee on the same repeated calibration sets: violation rate vs δ, "
                          "accuracy, coverage, specificity and run time per method.")
    parser.add_argument("--reps", type=count("--reps", 1, MAX_REPS), default=N_REPS, metavar="R",
                        help=f"calibration sets drawn (default {N_REPS}, at most {MAX_REPS:,})")
    parser.add_argument("--methods", nargs="+", metavar="M", default=None,
                        help=f"methods (default: all but ltt_multi, which joins with a second risk): "
                             f"{', '.join(METHODS)}")
    parser.add_argument("--sampling", choices=SAMPLINGS, default="iid",
                        help="iid (default): draws with replacement, realised numbers on the whole data set (the "
                             "guarantees' own law); split: the paper's calibration/test splits")
    parser.add_argument("--out", metavar="CSV", help="write the summary here (and every repetition to CSV.reps.csv)")
    parser.epilog = N_CAL_EPILOG


def _format(summary) -> str:
    cols = [("method", 20, "s"), ("kind", 9, "s"), ("quantity", 8, "s"), ("violation_rate", 9, ".3f"),
            ("violation_se", 7, ".3f"), ("guarantee_holds", 5, "s"),
            ("accuracy_mean", 8, ".4f"), ("accuracy_std", 7, ".4f"), ("answered_mean", 8, ".3f"),
            ("answered_accuracy_mean", 8, ".4f"), ("coverage_mean", 8, ".4f"),
            ("set_size_mean", 8, ".1f"), ("seconds", 7, ".2f")]
    head = "  ".join(f"{c[:w]:>{w}}" if f != "s" else f"{c[:w]:<{w}}" for c, w, f in
                     [("method", 20, "s"), ("guarantee", 9, "s"), ("on", 8, "s"), ("viol.", 9, ""), ("± se", 7, ""),
                      ("holds", 5, "s"), ("acc", 8, ""), ("acc sd", 7, ""), ("answered", 8, ""), ("ans. acc", 8, ""),
                      ("coverage", 8, ""), ("leaves", 8, ""), ("s", 7, "")])
    lines = [head]
    for _, r in summary.iterrows():
        kind = {"marginal per group": "per group"}.get(r["kind"], r["kind"])
        shown = {"kind": kind, "guarantee_holds": {True: "yes", False: "NO"}.get(r["guarantee_holds"], "–"),
                 "quantity": "answers" if METHODS[r["method"]].quantity == "answers" else "all"}
        lines.append("  ".join(f"{str(shown[c] if c in shown else r[c])[:w]:<{w}}" if f == "s" else f"{r[c]:>{w}{f}}"
                               for c, w, f in cols))
    notes = [f"- {r['method']}: {r['note']}" for _, r in summary.iterrows() if r["note"]]
    legend = ("acc: the guaranteed quantity (on answers: the accuracy of the answers given, abstentions excluded; "
              "on all: hierarchical accuracy, an abstention counting as correct); answered: share below the root; "
              "ans. acc: accuracy of the answers.")
    return "\n".join(lines + ["", legend] + ([""] + notes if notes else []))


def run(args: argparse.Namespace) -> int:
    methods = list(args.methods) if args.methods else [m for m in DEFAULT_METHODS]
    if args.methods is None and (args.min_coverage is not None or args.max_severity is not None):
        methods.append("ltt_multi")
    methods = list(check_methods(methods))
    _require_delta(methods, args.delta)
    _check_out(args.out)
    settings = GuaranteeSettings(alpha=1.0 - args.target_accuracy, delta=args.delta, **_settings(args))
    ev = load_evaluation(args)
    es = ev.setting(args.ts)
    n_cal = int(args.n_cal or default_n_cal(es.n))
    if n_cal >= es.n:
        raise ValueError(f"--n-cal must be below the evaluation split's {es.n:,} samples, got {n_cal:,}")
    data = es.guarantee_data()
    res = shootout(data, settings, n_cal, methods=methods, reps=args.reps, sampling=args.sampling, seed=args.seed,
                   progress=_bar("guarantees"))
    delta = "" if settings.delta is None else f", δ = {settings.delta:.4g}"
    print(f"{ev.name}: accuracy ≥ {settings.target:.4g}{delta}, n_cal = {n_cal:,} of {es.n:,}, "
          f"{args.reps:,} {args.sampling} repetitions (seed {args.seed})")
    print(_format(res.summary))
    if args.out:
        out = Path(args.out)
        out.write_text(to_csv(res.summary.to_dict("records"), list(SUMMARY_COLUMNS)), encoding="utf-8")
        reps = res.repetitions
        Path(f"{out}.reps.csv").write_text(to_csv(reps.to_dict("records"), list(reps.columns)), encoding="utf-8")
        print(f"wrote {out} and {out}.reps.csv", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- hsc card
def configure_card_parser(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.description = "A decision card: the θ to ship, its guarantee and the evidence (Markdown + JSON)."
    parser.add_argument("--method", default=None, choices=list(METHODS),
                        help=f"the method to deploy (default {DEFAULT_METHOD}: LTT on the accuracy of the answers "
                             f"given, with confidence 1 − δ; theorem1 is the paper's θ̂, on average only)")
    parser.add_argument("--reps", type=count("--reps", 0, MAX_REPS), default=CARD_REPS, metavar="R",
                        help=f"repetitions of the evidence shoot-out (default {CARD_REPS}; 0: none; at most "
                             f"{MAX_REPS:,})")
    parser.add_argument("--out", default="decision_card.md", metavar="MD",
                        help="the Markdown card (default decision_card.md); its JSON twin goes next to it")
    parser.epilog = N_CAL_EPILOG


def run_card(args: argparse.Namespace) -> int:
    method, delta = args.method, args.delta
    if method is None:  # the default: the answers' accuracy with confidence 1 − δ
        method, delta = DEFAULT_METHOD, DEFAULT_DELTA if delta is None else delta
    _require_delta([method], delta)
    _check_out(args.out)
    ev = load_evaluation(args)
    progress = _bar("card")
    progress(0, 1)
    card = decision_card(ev, target_accuracy=args.target_accuracy, delta=delta, method=method,
                         n_cal=args.n_cal, ts=args.ts, seed=args.seed, reps=args.reps, **_settings(args))
    progress(1, 1)
    out = Path(args.out)
    out.write_text(card_markdown(card), encoding="utf-8")
    out.with_suffix(".json").write_text(card_json(card), encoding="utf-8")
    print(card_line(card))
    print(f"wrote {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0


def card_line(card: dict[str, Any]) -> str:
    """``hsc card``'s summary: θ, where the held-out answers land, their accuracy, what is guaranteed
    (which quantity, with what confidence or only on average) and whether the held-out value meets
    the target."""
    r = card["realised"]
    acc = "none answered" if r["answered_accuracy"] is None else f"accuracy of the answers {r['answered_accuracy']:.4f}"
    head = (f"{card['model']}: ship θ = {card['theta']:.6g} ({card['method']}); held-out: "
            f"{r['answered_at_leaf']:.1%} answered at a leaf, {r['answered_coarser']:.1%} at a coarser node, "
            f"{r['abstained']:.1%} abstained; {acc}, hierarchical accuracy {r['accuracy']:.4f} (abstentions correct), "
            f"coverage {r['coverage']:.4f}")
    if not card["certified"]:
        return head + f" — NOT certified: {card['note']}"
    return f"{head}\n  {promise_words(card)}\n  {realised_words(card)}"
