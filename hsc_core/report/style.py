"""One colour-blind-safe visual language for every figure: the Okabe–Ito palette, plus a dash
style and marker shape per rule so no meaning rests on colour alone (projectors, greyscale
print, deuteranopia)."""

from __future__ import annotations

import re

from ..core.rule_registry import get_rule, is_rule, rule_names

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

# rule → (colour, plotly dash, plotly marker symbol): each listed rule's, from the one registry of rules
RULE_STYLE: dict[str, tuple[str, str, str]] = {rule: get_rule(rule).style for rule in rule_names()}

# Correct vs wrong: blue-green ✓ vs vermillion ✗ — distinct in hue, lightness and shape.
CORRECT_COLOUR = OKABE_ITO["bluish_green"]
WRONG_COLOUR = OKABE_ITO["vermillion"]
CORRECT_SYMBOL = "circle"
WRONG_SYMBOL = "x"
CORRECT_MARK = "✓"
WRONG_MARK = "✗"
NEUTRAL_COLOUR = "#6E6E6E"

# Projector-readable minimums (px) for plotly fonts.
BASE_FONT_SIZE = 16
PRESENTER_FONT_SIZE = 22


def _rule_style(rule: str) -> tuple[str, str, str]:
    # any rule the registry resolves (hf<β> shares hF1's style); an unknown name draws as Selective
    return get_rule(rule).style if is_rule(rule) else RULE_STYLE["selective"]


def rule_colour(rule: str) -> str:
    return _rule_style(rule)[0]


def rule_dash(rule: str) -> str:
    return _rule_style(rule)[1]


def rule_symbol(rule: str) -> str:
    return _rule_style(rule)[2]


# ---------------------------------------------------------------------------- user text in figures
# Plotly draws a little HTML in every string of a figure (trace names, hover text, tick labels,
# annotations, titles): <a href> becomes a live link, <span style> restyles, <b>/<i>/<sub>… format.
# Class and node names, model and data-set names, sample ids, source tags and manifest fields are
# user-provided, so every one of them goes through ``plain`` before it reaches a figure; the figure
# code's own markup (<b>, <br>, its <span style>) is added around the escaped text and still works.
NAME_CHARS = 60  # the most characters of one user-provided name a figure draws ("…" marks the cut)
HOVER_CHARS = 160  # the same in hover text, where there is room for more
_PLOTLY_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;", "%": "&#37;"}
_ESCAPE = re.compile("[&<>\"'%]")


def clip(text: object, limit: int | None = NAME_CHARS, tail: int = 0) -> str:
    """``str(text)`` on one line, cut to at most ``limit`` characters with "…" (keeping the last
    ``tail`` characters after it, e.g. a label's suffix); None: no cap."""
    s = " ".join(str(text).splitlines())
    if limit is None or len(s) <= limit:
        return s
    limit = max(limit, 2)
    tail = min(max(tail, 0), limit - 2)
    return s[: limit - 1 - tail] + "…" + (s[len(s) - tail:] if tail else "")


def plain(text: object, limit: int | None = NAME_CHARS, tail: int = 0) -> str:
    """User-provided ``text`` for a Plotly figure, drawn literally: cut to ``limit`` characters
    (``clip``), then ``& < > " ' %`` as character references, which Plotly turns back into the
    characters when it draws the text (after it has parsed its tags, so none can form) and which a
    hover template never reads as ``%{…}``."""
    return _ESCAPE.sub(lambda m: _PLOTLY_ESCAPES[m.group(0)], clip(text, limit, tail))


def shown_text(markup: str) -> str:
    """What Plotly draws of ``markup``: tags removed, character references resolved (to size labels)."""
    import html

    return html.unescape(re.sub(r"</?[A-Za-z][^<>]*>", "", markup))
