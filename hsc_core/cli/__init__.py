"""The ``hsc`` command (also ``python -m hsc_core``): one entry point, one module per subcommand.

Each subcommand is one module of this package (``hsc_core.cli.evaluate``, ``.report``, …) defining
``configure_parser(parser)`` and ``run(args) -> int``; the argument groups they share, one meaning
each, are in ``hsc_core.cli.args``. Only the chosen module is imported, so ``hsc evaluate`` never
loads torch or Streamlit. ``cli`` is the top layer: it may import every other layer, and none
imports it (the dashboard neither).
Bad input ends with exit code 2 and one line on stderr (``HSC_DEBUG=1`` shows the traceback); a
warning meant for the user (a ``UserWarning``, e.g. a CSV row taken as a header, or a calibration
split too small to fit on) is one line too, and so is a numpy ``RuntimeWarning`` (once each).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from .. import config

# name → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "dashboard": ("hsc_core.cli.dashboard", "start the Streamlit dashboard"),
    "cache-logits": ("hsc_core.cli.cache_logits", "run models over images and cache their logits"),
    "evaluate": ("hsc_core.cli.evaluate", "hAURC / gain of every rule for one or many logits files (CSV)"),
    "report": ("hsc_core.cli.report", "one self-contained offline HTML report"),
    "guarantees": ("hsc_core.cli.guarantees", "every accuracy guarantee side by side on repeated calibrations"),
    "card": ("hsc_core.cli.card", "a decision card: the θ to ship and its guarantee (Markdown + JSON)"),
    "monitor": ("hsc_core.cli.monitor", "watch a card's θ on a stream: anytime-valid bounds, an alarm, adaptive θ"),
    "ranks": ("hsc_core.cli.ranks", "one θ per rank with a guarantee, from per-rank confidences (any classifier)"),
    "atlas": ("hsc_core.cli.atlas", "the model atlas of a per-model results table (e.g. the authors' 1,116)"),
    "hierarchy-sensitivity": ("hsc_core.cli.hierarchy_sensitivity",
                              "hAURC / gain of one ImageNet-1k model under each built-in class tree"),
}


def _overview(prog: str) -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} COMMAND [options]   ({prog} COMMAND --help for its options; {prog} --version)", "",
             "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def build_parser(name: str, prog: str = "hsc") -> argparse.ArgumentParser:
    """The argument parser of command ``name`` (a key of ``COMMANDS``), as ``main`` runs it; the
    docs' CLI reference is generated from these parsers."""
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=COMMANDS[name][1])
    importlib.import_module(COMMANDS[name][0]).configure_parser(parser)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "hsc") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview(prog))
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from .. import __version__

        print(f"{prog} {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{prog}: error: unknown command {name!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    parser = build_parser(name, prog)
    args = parser.parse_args(rest)  # argparse itself exits 2 with one usage line
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default", UserWarning)  # each one once per run, even in a long-lived process
            warnings.simplefilter("default", RuntimeWarning)  # numpy's too: one line each, once
            warnings.showwarning = _one_line_warnings(f"{prog} {name}", warnings.showwarning)
            return int(module.run(args) or 0)
    except BrokenPipeError:  # `hsc evaluate … | head`: the reader left; the files are written
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"{prog} {name}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:  # HierarchyError, LogitsFileError … are ValueErrors
        if config.debug():
            raise
        print(f"{prog} {name}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # the inputs are bounded before they are decoded; this is the last resort
        if config.debug():
            raise
        shape = str(exc).split(" for an array with ")[-1] if " for an array with " in str(exc) else ""
        print(f"{prog} {name}: error: out of memory{f' ({shape})' if shape else ''}; give a smaller input or lower "
              f"{config.MAX_DECODED_MB}", file=sys.stderr)
        return 2


def _one_line_warnings(command: str, fallback):
    """``warnings.showwarning`` that prints a user-facing warning as ``hsc evaluate: warning: …``
    instead of Python's two lines with a source line; other categories go to ``fallback``."""
    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, UserWarning):
            print(f"{command}: warning: {message}", file=sys.stderr if file is None else file)
        elif issubclass(category, RuntimeWarning):  # numpy's "invalid value encountered …": one line, no source
            print(f"{command}: warning: {message} (in {Path(filename).stem})",
                  file=sys.stderr if file is None else file)
        else:
            fallback(message, category, filename, lineno, file, line)
    return show


def entry_point() -> None:
    """Console script ``hsc``."""
    sys.exit(main())
