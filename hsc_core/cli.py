"""The ``hsc`` command (also ``python -m hsc_core``): one entry point, one module per subcommand.

Each subcommand module defines ``configure_parser(parser)`` and ``run(args) -> int``. Only the
chosen module is imported, so ``hsc evaluate`` never loads torch or Streamlit.
Bad input ends with exit code 2 and one line on stderr (``HSC_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import config

# name → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "dashboard": ("hsc_core.dashboard_launcher", "start the Streamlit dashboard"),
    "cache-logits": ("hsc_core.pipeline.caching.cli", "run models over images and cache their logits"),
    "evaluate": ("hsc_core.pipeline.evaluate", "hAURC / gain of every rule for one or many logits files (CSV)"),
    "report": ("hsc_core.report.html_report", "one self-contained offline HTML report"),
}


def _overview(prog: str) -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} COMMAND [options]   ({prog} COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, prog: str = "hsc") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview(prog))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"{prog}: error: unknown command {name!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=COMMANDS[name][1])
    module.configure_parser(parser)
    args = parser.parse_args(rest)  # argparse itself exits 2 with one usage line
    try:
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


def entry_point() -> None:
    """Console script ``hsc``."""
    sys.exit(main())
