"""``.. hsc-cli::``: the CLI reference, generated from the real argument parsers.

Every command of ``hsc_core.cli.COMMANDS`` gets a section: its one-line help, its usage line and
one entry per option (flags, metavar, default, help), taken from ``hsc_core.cli.build_parser`` —
the parser ``hsc`` itself runs, so the reference cannot drift from the command.
"""

from __future__ import annotations

import argparse
import re

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

_SPECIAL = re.compile(r"([\\`*_|\[\]])")


def _escape(text: str) -> str:
    """Plain text as reStructuredText (no accidental emphasis, links or substitutions)."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _option_lines(action: argparse.Action) -> list[str]:
    if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
        return []
    if action.option_strings:
        flags = ", ".join(action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or (action.dest.upper() if not action.choices else
                                         "{" + ",".join(map(str, action.choices)) + "}")
            flags += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
    else:
        flags = action.metavar if isinstance(action.metavar, str) else action.dest
    help_text = (action.help or "") % {"default": action.default} if action.help else ""
    extra = []
    if action.choices and not isinstance(action, argparse.BooleanOptionalAction):
        extra.append("choices: " + ", ".join(f"``{c}``" for c in action.choices))
    if action.required:
        extra.append("required")
    elif action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        extra.append(f"default: ``{action.default}``")
    elif isinstance(action, argparse.BooleanOptionalAction) and action.default is not None:
        extra.append(f"default: ``{'--' if action.default else '--no-'}{action.dest.replace('_', '-')}``")
    body = _escape(help_text) + (f" ({'; '.join(extra)})" if extra else "")
    return [f"``{flags}``", f"   {body or '—'}", ""]


def command_rst(name: str, one_line: str, parser: argparse.ArgumentParser) -> list[str]:
    """The reStructuredText section of one command."""
    title = f"hsc {name}"
    lines = [title, "-" * len(title), "", _escape(one_line[:1].upper() + one_line[1:]) + ".", ""]
    if parser.description and parser.description != one_line:
        lines += [_escape(parser.description), ""]
    usage = parser.format_usage().strip()
    lines += ["::", ""] + ["   " + line for line in usage.splitlines()] + [""]
    for action in parser._actions:
        lines += _option_lines(action)
    if parser.epilog:
        lines += [_escape(parser.epilog), ""]
    return lines


class HscCli(Directive):
    has_content = False

    def run(self):
        from hsc_core.cli import COMMANDS, build_parser

        lines: list[str] = []
        for name, (_, one_line) in COMMANDS.items():
            lines += command_rst(name, one_line, build_parser(name))
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="hsc-cli"), node)
        return node.children


def setup(app):
    app.add_directive("hsc-cli", HscCli)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
