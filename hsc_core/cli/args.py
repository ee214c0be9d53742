"""The argument groups the ``hsc`` commands share, one meaning each.

=====================  ========================================================================
option                 meaning, in every command that takes it
=====================  ========================================================================
``--seed``             the seed of the calibration split or draw (``hsc evaluate``: the
                       calibration split that fits T; ``hsc guarantees`` / ``hsc card``: the
                       calibration draws)
``--bootstrap-seed``   the seed of the bootstrap resamples (95 % intervals)
``--n-resamples``      the number of bootstrap resamples (old spelling ``--resamples``)
``--ts / --no-ts``     with / without temperature scaling
``--subset``           a subset the file offers (``evaluation.subsets``): "all", or the names
                       the dashboard's "Samples" picker offers (e.g. "typical", "easier")
``--rules``            comma list of rules (default: every rule, ``rule_registry.rule_names()``;
                       ``hf<β>`` for any β > 0), each checked by ``metric_rules.check_rule``
``--hierarchy``        a class-tree file (default: the logits' built-in data set's tree)
``--classes``          the class list giving the logits' column order of its leaves
``--calibrator``       comma list of calibrators (``core.calibrators``: none, temperature,
                       vector, matrix, dirichlet, isotonic, depth_temperature), each fitted on
                       the calibration split
``--confidence``       comma list of confidence scores (``core.confidence``: softmax, margin,
                       entropy, doctor, energy)
=====================  ========================================================================

An old spelling keeps working for one release and prints one line on stderr
(``hsc report: warning: --resamples is deprecated; use --n-resamples``).

Every count option is bounded above as well as below (``count``, with the bounds below), so a
command never takes on work it cannot finish (``--reps 1000000000``): a value outside is one
usage line naming the range.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..core.calibrators import calibrator_names, get_calibrator
from ..core.confidence import confidence_names, get_confidence
from ..core.metric_rules import check_rule
from ..core.rule_registry import rule_names

__all__ = [
    "MAX_LAMBDAS", "MAX_REPS", "MAX_RESAMPLES", "MAX_WORKERS", "count",
    "DeprecatedAlias", "add_bootstrap", "add_hierarchy", "add_rules", "add_scores", "add_seed", "add_subset",
    "add_ts", "parse_calibrators", "parse_confidences", "parse_list", "parse_rules",
]


#: Upper bounds of the count options: random calibration/test splits or draws (``--reps``), bootstrap
#: resamples (``--n-resamples``), θ grid points (``--n-lambdas``) and local processes (``--workers``).
MAX_REPS = 100_000
MAX_RESAMPLES = 100_000
MAX_LAMBDAS = 100_000
MAX_WORKERS = 256


def count(flag: str, low: int = 1, high: int = MAX_REPS) -> Any:
    """An argparse ``type``: a whole number in [``low``, ``high``]; anything else is one usage line
    naming the range (``hsc ranks: error: argument --reps: --reps must be a whole number from 1 to
    100,000, got '1000000000'``).

    >>> count("--reps", 1, 10)("7")
    7
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number from {low:,} to {high:,}, "
                                             f"got {text[:40]!r}")
        return value
    return parse


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option: stores into the new option's ``dest`` and prints one
    deprecation line on stderr naming the new spelling (``instead``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, instead: str, note: str = "",
                 **kwargs: Any) -> None:
        self.instead = instead
        self.note = note
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        note = f" ({self.note})" if self.note else ""
        print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.instead}{note}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_seed(parser: argparse.ArgumentParser, default: int, what: str) -> None:
    """``--seed``: the seed of the calibration split or draw (``what`` says which, for the help)."""
    parser.add_argument("--seed", type=int, default=default, help=f"seed of {what} (default {default})")


def add_bootstrap(parser: argparse.ArgumentParser, *, n_resamples: int, seed: int | None = None,
                  old_seed: bool = False) -> None:
    """``--n-resamples`` (old ``--resamples``) and, with ``seed``, ``--bootstrap-seed``; with
    ``old_seed``, ``--seed`` is still the bootstrap seed for one release (``hsc report``'s old meaning)."""
    parser.add_argument("--n-resamples", type=count("--n-resamples", 1, MAX_RESAMPLES), default=n_resamples,
                        metavar="B", help=f"bootstrap resamples for the 95 %% intervals (default {n_resamples}, "
                                          f"at most {MAX_RESAMPLES:,})")
    parser.add_argument("--resamples", type=count("--resamples", 1, MAX_RESAMPLES), dest="n_resamples",
                        action=DeprecatedAlias, instead="--n-resamples",
                        metavar="B", help=argparse.SUPPRESS)
    if seed is None:
        return
    parser.add_argument("--bootstrap-seed", type=int, default=seed, metavar="SEED",
                        help=f"seed of the bootstrap resamples (default {seed})")
    if old_seed:
        parser.add_argument("--seed", type=int, dest="bootstrap_seed", action=DeprecatedAlias,
                            instead="--bootstrap-seed",
                            note="--seed will mean the calibration split, as in hsc evaluate",
                            help=argparse.SUPPRESS)


def add_ts(parser: argparse.ArgumentParser, default: bool) -> None:
    """``--ts`` / ``--no-ts``: with or without temperature scaling."""
    parser.add_argument("--ts", action=argparse.BooleanOptionalAction, default=default,
                        help=f"with temperature scaling (fitted on the calibration split) or without "
                             f"(default: {'with' if default else 'without'})")


def add_subset(parser: argparse.ArgumentParser) -> None:
    """``--subset``: checked per file by ``evaluation.subsets`` (one line naming the file's choices)."""
    parser.add_argument("--subset", default="all", metavar="NAME",
                        help="evaluate only these samples: all (default) or a subset the file offers by its source "
                             "tags, as the dashboard's Samples picker (e.g. typical, easier for the shipped logits)")


def add_rules(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``--rules``: a comma list, parsed by ``parse_rules`` (None: every rule)."""
    parser.add_argument("--rules", metavar="LIST",
                        help=f"comma-separated rules{what} (default: all: " + ",".join(rule_names())
                             + "; hf<β> for any β > 0, e.g. hf0.5)")


def add_hierarchy(parser: argparse.ArgumentParser, *, dag_and_header: bool = True) -> None:
    """``--hierarchy FILE`` and ``--classes FILE`` (and, for readers of any format, ``--first-parent``
    and ``--header/--no-header``)."""
    parser.add_argument("--hierarchy", metavar="FILE",
                        help="class tree (default: the built-in tree of the logits' data set, e.g. ImageNet-1k "
                             "for 1000 classes)")
    parser.add_argument("--classes", metavar="FILE",
                        help="class list giving the logits' column order of the hierarchy's leaves")
    if not dag_and_header:
        return
    parser.add_argument("--first-parent", action="store_true",
                        help="in a DAG hierarchy, keep each node's first listed parent")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="a CSV hierarchy's first row is column names (--header) or data (--no-header); "
                             "default: detected, with a warning when a row that could be a class is taken as names")


def parse_list(text: str | None, option: str) -> tuple[str, ...] | None:
    """A comma list (None when not given); a given but empty list is one ValueError."""
    if text is None:
        return None
    items = tuple(dict.fromkeys(t.strip() for t in str(text).split(",") if t.strip()))
    if not items:
        raise ValueError(f"{option}: give at least one name")
    return items


def parse_rules(text: str | None) -> tuple[str, ...]:
    """``--rules``: the rules named (default ``rule_names()``, every rule), each checked; an unknown one is one
    ValueError naming the choices."""
    rules = parse_list(text, "--rules")
    if rules is None:
        return tuple(rule_names())
    for rule in rules:
        try:
            check_rule(rule)  # its message names the choices (or what is wrong with an hf<β>)
        except ValueError as exc:
            raise ValueError(f"--rules: {exc}") from None
    return rules


def add_scores(parser: argparse.ArgumentParser, calibrators: str, confidences: str) -> None:
    """``--calibrator LIST`` and ``--confidence LIST`` (defaults named in the help; parsed by
    ``parse_calibrators`` / ``parse_confidences``, so an unknown name is one line naming the choices)."""
    parser.add_argument("--calibrator", metavar="LIST",
                        help="comma-separated calibrators, each fitted on the calibration split: "
                             + ",".join(calibrator_names()) + f" (default {calibrators})")
    parser.add_argument("--confidence", metavar="LIST",
                        help="comma-separated confidence scores: " + ",".join(confidence_names())
                             + f" (default {confidences})")


def _parse_names(text: str | None, option: str, default: tuple[str, ...], check: Any) -> tuple[str, ...]:
    names = parse_list(text, option)
    if names is None:
        return default
    for name in names:
        try:
            check(name)
        except ValueError as exc:
            raise ValueError(f"{option}: {exc}") from None
    return names


def parse_calibrators(text: str | None, default: tuple[str, ...] = ("none", "temperature")) -> tuple[str, ...]:
    """``--calibrator``: the calibrators named (default: none and temperature, the two TS settings)."""
    return _parse_names(text, "--calibrator", default, get_calibrator)


def parse_confidences(text: str | None, default: tuple[str, ...] = ("softmax",)) -> tuple[str, ...]:
    """``--confidence``: the confidence scores named (default: softmax)."""
    return _parse_names(text, "--confidence", default, get_confidence)
