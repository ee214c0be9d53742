"""One colour-blind-safe visual language for every figure: the Okabe–Ito palette, plus a dash
style and marker shape per rule so no meaning rests on colour alone (projectors, greyscale
print, deuteranopia)."""

from __future__ import annotations

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

# rule → (colour, plotly dash, plotly marker symbol)
RULE_STYLE: dict[str, tuple[str, str, str]] = {
    "selective": (OKABE_ITO["black"], "dot", "square"),
    "climbing": (OKABE_ITO["blue"], "solid", "circle"),
    "jumping": (OKABE_ITO["orange"], "dash", "triangle-up"),
    "max_coverage": (OKABE_ITO["reddish_purple"], "dashdot", "diamond"),
}

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


def rule_colour(rule: str) -> str:
    return RULE_STYLE[rule][0]


def rule_dash(rule: str) -> str:
    return RULE_STYLE[rule][1]


def rule_symbol(rule: str) -> str:
    return RULE_STYLE[rule][2]
