"""The model atlas's figures: accuracy against hAURC or gain, one marker per model, coloured and
shaped by training regime (the paper's Figure 4 question: which kind of model to deploy), and the
regimes' means ± SEM.

Each regime has an Okabe–Ito colour *and* a marker shape, so the regimes stay apart in greyscale
and for colour-blind readers; a suspect row (``atlas.suspect_reasons``) is drawn open; the user's
own models are large black-edged stars with their names beside them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..core.rule_registry import is_rule, rule_label
from ..evaluation.atlas import PLAIN, REGIMES, metric_column
from . import style
from .figures import layout

# regime → (colour, marker symbol); plain ImageNet-1k is the grey background cloud.
REGIME_STYLE: dict[str, tuple[str, str]] = {
    "clip_zero_shot": (style.OKABE_ITO["yellow"], "hexagram"),
    "clip_finetuned": (style.OKABE_ITO["orange"], "star-diamond"),
    "masked_image": (style.OKABE_ITO["reddish_purple"], "pentagon"),
    "semi_self": (style.OKABE_ITO["sky_blue"], "triangle-up"),
    "distillation": (style.OKABE_ITO["bluish_green"], "diamond"),
    "in21k_pretraining": (style.OKABE_ITO["blue"], "square"),
    "adversarial": (style.OKABE_ITO["vermillion"], "x"),
    PLAIN.key: ("#B0B0B0", "circle"),
}
YOURS_COLOUR = style.OKABE_ITO["black"]
# A browser draws ~20,000 markers in well under a second; 200,000 (a 35 MB table) made a 25 MB figure that
# took most of a minute to build and send. Beyond this the figure draws a fixed random sample of the models,
# says so on the chart, and the legend's counts, the means and the tables still use every model.
MAX_POINTS = 20_000
Y_METRICS = {"haurc": "hAURC×1000 (lower: better)", "gain_percent": "gain % (higher: better)"}


MAX_NAMED_STARS = 4  # your models named beside their stars when there are at most this many

def primary_regime(keys: str) -> str:
    """The first of a model's ``;``-joined regime keys (the one its marker shows)."""
    return keys.split(";")[0] if keys else PLAIN.key


def atlas_figure(table: pd.DataFrame, *, rule: str = "climbing", loss: str = "01", ts: bool = True,
                 y: str = "haurc", yours: pd.DataFrame | None = None, title: str | None = None,
                 font_size: int = style.BASE_FONT_SIZE, height: int = 520,
                 max_points: int = MAX_POINTS) -> go.Figure:
    """Top-1 accuracy (%) against ``rule``'s hAURC×1000 or gain % (``y``), one trace per regime.

    table : the atlas table (``atlas.load_atlas_table``), with ``regimes`` and ``suspect``.
    max_points : beyond this many models a fixed random sample of ``max_points`` is drawn (noted on
        the chart); the legend counts every model of each regime, whether drawn or not, and counts a
        model with several regimes in each (as ``atlas.regime_summary``), while drawing it in its first.
    yours : the user's own models in the same shape, drawn as stars on the same axes.
    """
    if y not in Y_METRICS:
        raise ValueError(f"y must be one of {', '.join(Y_METRICS)}")
    column = metric_column(y, rule, loss, ts)
    fig = go.Figure()
    prim = table["regimes"].map(primary_regime)
    # The legend counts every model of a regime, as the regime means (atlas.regime_summary) do; a model
    # with several regimes is drawn once, in its first (39 markers of 41 masked-image models in the authors' table).
    keys = [set(r.split(";")) if r else {PLAIN.key} for r in table["regimes"]]
    n_per_regime = {reg.key: sum(reg.key in k for k in keys) for reg in (PLAIN, *REGIMES)}
    drawn = table if len(table) <= max_points else table.sample(n=max_points, random_state=0).sort_index()
    drawn_prim = prim.loc[drawn.index]
    for regime in (PLAIN, *REGIMES):
        part = drawn[drawn_prim == regime.key]
        if part.empty or column not in part:
            continue
        colour, symbol = REGIME_STYLE[regime.key]
        suspect = part["suspect"].astype(bool).to_numpy()
        symbols = [f"{symbol}-open" if s and not symbol.endswith("-open") else symbol for s in suspect]
        hover = [f"<b>{style.plain(m)}</b><br>{style.plain(r.replace(';', ', '))}"
                 + (f"<br>⚠ {style.plain(s, style.HOVER_CHARS)}" if s else "")
                 for m, r, s in zip(part["model"], part["regimes"], part["suspect"], strict=True)]
        fig.add_trace(go.Scatter(
            x=part["top-1 accuracy"].to_numpy(float) * 100, y=part[column].to_numpy(float), mode="markers",
            name=f"{regime.label} ({int(n_per_regime.get(regime.key, 0))})", text=hover,
            hovertemplate="%{text}<br>top-1 %{x:.2f} %<br>%{y:.2f}<extra></extra>",
            marker=dict(color=colour, symbol=symbols, size=7 if regime is PLAIN else 9,
                        opacity=0.55 if regime is PLAIN else 0.9, line=dict(width=0.5, color="#404040"))))
    if yours is not None and not yours.empty and column in yours:
        names = [style.plain(m, 24) for m in yours["model"]]
        # Nearby stars (one family of models) would print their names over each other: alternate sides.
        sides = ["top left", "bottom right", "top right", "bottom left"]
        fig.add_trace(go.Scatter(
            x=yours["top-1 accuracy"].to_numpy(float) * 100, y=yours[column].to_numpy(float),
            # more names than that print over each other in one unreadable smudge: hover names them
            mode="markers+text" if len(names) <= MAX_NAMED_STARS else "markers", name="your models", text=names,
            textposition=[sides[k % len(sides)] for k in range(len(names))],
            hovertemplate="<b>%{text}</b> (yours)<br>top-1 %{x:.2f} %<br>%{y:.2f}<extra></extra>",
            marker=dict(color=YOURS_COLOUR, symbol="star", size=18, line=dict(width=2, color="white"))))
    layout(fig, title, height=height)
    fig.update_layout(font=dict(size=font_size - 2))
    if len(drawn) < len(table):
        fig.add_annotation(text=f"a random {len(drawn):,} of {len(table):,} models drawn", xref="paper",
                           yref="paper", x=1, y=1, xanchor="right", yanchor="bottom", showarrow=False)
    fig.update_xaxes(title_text="top-1 accuracy (%)")
    tag = "TS" if ts else "no TS"
    # Two short lines, not one long one: at a projector's type size a one-line title is taller than
    # the plot and runs into the chart's title.
    fig.update_yaxes(title_text=f"{Y_METRICS[y]}<br>{(rule_label(rule) if is_rule(rule) else rule)} · {tag}"
                     + (" · severity" if loss == "severity" else ""))
    return fig


def regime_means_figure(summary: Sequence[dict], *, value: str = "haurc_x1000", title: str | None = None,
                        font_size: int = style.BASE_FONT_SIZE) -> go.Figure:
    """Each regime's mean ± SEM (``atlas.regime_summary`` rows) as a marker with an error bar."""
    labels = [f"{s['label']} ({s['n_models']})" for s in summary]
    means = np.array([s[f"{value}_mean"] for s in summary], dtype=float)
    sems = np.array([s[f"{value}_sem"] for s in summary], dtype=float)
    colours = [REGIME_STYLE[s["regime"]][0] for s in summary]
    symbols = [REGIME_STYLE[s["regime"]][1] for s in summary]
    fig = go.Figure(go.Scatter(
        x=means, y=labels, mode="markers", error_x=dict(type="data", array=np.nan_to_num(sems), visible=True),
        marker=dict(color=colours, symbol=symbols, size=14, line=dict(width=1, color="#404040")),
        hovertemplate="%{y}: %{x:.2f}<extra></extra>", showlegend=False))
    layout(fig, title, height=80 + 42 * max(len(labels), 1))
    fig.update_layout(font=dict(size=font_size - 2))
    fig.update_xaxes(title_text={"haurc_x1000": "hAURC×1000, mean ± SEM", "gain_percent": "gain %, mean ± SEM",
                                 "top1_percent": "top-1 %, mean ± SEM"}.get(value, value))
    fig.update_yaxes(autorange="reversed")
    return fig
