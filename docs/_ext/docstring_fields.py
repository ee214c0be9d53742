"""Render this project's numpydoc fields as descriptions, not as types.

The library writes ``name : what it is, with its shape`` on one line (a sentence, not a type), and
numpydoc would print that sentence in bold italics as the parameter's *type*. This hook runs before
numpydoc and moves the text after `` : `` onto an indented description line, so it reads as prose.
"""

from __future__ import annotations

import re

SECTIONS = {"Parameters", "Returns", "Yields", "Attributes", "Other Parameters", "Raises", "Receives", "Warns"}
_FIELD = re.compile(r"^(?P<name>[^\s:][^:]*?) : (?P<text>.+)$")


def split_fields(lines: list[str]) -> list[str]:
    """``lines`` of a dedented docstring, with ``name : text`` fields split into name + indented text.

    >>> split_fields(["Parameters", "----------", "x : (n,) labels.", "    more.", "", "Notes", "-----", "a : b"])
    ['Parameters', '----------', 'x', '    (n,) labels.', '    more.', '', 'Notes', '-----', 'a : b']
    """
    out: list[str] = []
    in_fields = False
    for i, line in enumerate(lines):
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if line.strip() and nxt and set(nxt) == {"-"}:  # a section header
            in_fields = line.strip() in SECTIONS
            out.append(line)
            continue
        m = _FIELD.match(line) if in_fields else None
        out += [m["name"], "    " + m["text"]] if m else [line]
    return out


def _process(app, what, name, obj, options, lines):
    lines[:] = split_fields(list(lines))


def setup(app):
    app.connect("autodoc-process-docstring", _process, priority=400)  # numpydoc's hook runs at 500
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
