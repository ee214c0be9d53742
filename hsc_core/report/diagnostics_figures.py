"""Figures of "where in the tree": the hierarchy as a sunburst or icicle sized by samples and
coloured by where a rule's predictions land, the LCA depth of mistakes per rule, and RC curves per
superclass.

Colours: the sequential Cividis scale (readable with every colour-vision deficiency, and in
greyscale, since its lightness rises monotonically); nodes where nothing lands are grey and say so
on hover. Rules keep their colour *and* a bar pattern; superclasses their colour and dash.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from ..core.curves import RCCurve
from ..core.rule_registry import is_rule, rule_label
from . import style
from .figures import LOSS_LABELS, layout, model_style

COLOUR_SCALE = "Cividis"
NO_DATA_COLOUR = "#D9D9D9"
COLOUR_BY = {
    "stopped_here": "of the node's samples, share whose prediction stops exactly here",
    "accuracy_here": "of the predictions landing here, share correct",
}
RULE_PATTERNS = {"selective": "", "climbing": "/", "jumping": ".", "max_coverage": "x"}


def tree_map_figure(table: pd.DataFrame, nodes: np.ndarray, *, colour_by: str = "stopped_here",
                    kind: str = "sunburst", title: str | None = None, font_size: int = style.BASE_FONT_SIZE,
                    height: int = 560, levels: int = 5) -> go.Figure:
    """The nodes ``nodes`` (``diagnostics.wedge_nodes``: first the focus, each after its parent)
    of a ``diagnostics.landing_counts`` table as a sunburst or icicle: area = samples, colour =
    ``colour_by``. At most ``len(nodes)`` wedges, whatever the tree's size; ``levels`` rings are
    shown at once (clicking a wedge zooms in and shows the rings below it)."""
    if colour_by not in COLOUR_BY:
        raise ValueError(f"colour_by must be one of {', '.join(COLOUR_BY)}")
    if kind not in ("sunburst", "icicle"):
        raise ValueError("kind must be 'sunburst' or 'icicle'")
    rows = table.iloc[nodes]
    drawn = set(int(v) for v in nodes)
    ids = [str(int(v)) for v in nodes]
    parents = ["" if k == 0 or int(p) not in drawn else str(int(p)) for k, p in enumerate(rows["parent"])]
    labels = [style.plain(n, 28) for n in rows["name"]]
    value = rows[colour_by].to_numpy(float)
    colours = [NO_DATA_COLOUR if not np.isfinite(v) else c
               for v, c in zip(value, sample_colorscale(COLOUR_SCALE, np.nan_to_num(np.clip(value, 0, 1))),
                               strict=True)]
    hover = [f"<b>{style.plain(n, style.HOVER_CHARS)}</b><br>{s:,} samples · {k:,} predictions land here "
             f"({c:,} correct)<br>"
             + (f"{COLOUR_BY[colour_by]}: {v:.1%}" if np.isfinite(v) else "no prediction lands here")
             for n, s, k, c, v in zip(rows["name"], rows["samples"], rows["stops"], rows["stops_correct"], value,
                                      strict=True)]
    common = dict(ids=ids, labels=labels, parents=parents, values=rows["samples"].to_numpy(), branchvalues="total",
                  marker=dict(colors=colours, line=dict(width=0.5, color="white")), hovertext=hover,
                  hoverinfo="text", textinfo="label", sort=False, maxdepth=levels)
    trace = (go.Sunburst(**common, insidetextorientation="radial") if kind == "sunburst"
             else go.Icicle(**common, tiling=dict(orientation="v")))
    fig = go.Figure(trace)
    # A colour bar for the scale (an invisible marker carries it; the tree trace has explicit colours).
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                             marker=dict(colorscale=COLOUR_SCALE, cmin=0, cmax=1, color=[0.5], showscale=True,
                                         colorbar=dict(title=dict(text="share", side="right"), tickformat=".0%",
                                                       len=0.8))))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    layout(fig, title, height=height)
    fig.update_layout(font=dict(size=font_size - 2), margin=dict(l=10, r=10, t=50 if title else 10, b=10))
    return fig


def severity_figure(hist: pd.DataFrame, *, per: str = "share", title: str | None = None,
                    font_size: int = style.BASE_FONT_SIZE) -> go.Figure:
    """Grouped bars: per LCA depth (0 = the mistake meets the truth only at the root), each rule's
    share of its mistakes (``per="share"``) or mistakes per sample (``"per_sample"``)."""
    fig = go.Figure()
    for rule, part in hist.groupby("rule", sort=False):
        label = rule_label(rule) if is_rule(rule) else str(rule)
        fig.add_trace(go.Bar(
            x=part["lca_depth"], y=part[per], name=f"{label} ({int(part['mistakes'].sum()):,})",
            marker=dict(color=style.rule_colour(rule), pattern=dict(shape=RULE_PATTERNS.get(rule, ""))),
            customdata=part["mistakes"], hovertemplate="LCA depth %{x}: %{customdata:,} mistakes (%{y:.1%})"
            "<extra>" + label + "</extra>"))
    layout(fig, title, height=380)
    fig.update_layout(barmode="group", font=dict(size=font_size - 2))
    fig.update_xaxes(title_text="depth of LCA(prediction, truth) — deeper = nearer miss", dtick=1)
    fig.update_yaxes(title_text="share of the rule's mistakes" if per == "share" else "mistakes per sample",
                     tickformat=".0%")
    return fig


def superclass_rc_figure(curves: Mapping[str, RCCurve], *, loss: str = "01", title: str | None = None,
                         font_size: int = style.BASE_FONT_SIZE, max_points: int = 2000) -> go.Figure:
    """One RC curve per superclass (name → curve on that superclass's samples), hAURC in the legend."""
    fig = go.Figure()
    for k, (name, curve) in enumerate(curves.items()):
        colour, dash = model_style(k)
        idx = np.unique(np.linspace(0, curve.coverage.size - 1, min(max_points, curve.coverage.size)).astype(int))
        shown = style.plain(name, 40)
        fig.add_trace(go.Scatter(
            x=curve.coverage[idx], y=curve.risk[idx], mode="lines", line=dict(color=colour, dash=dash, width=2.5),
            name=f"{shown} (hAURC×1000 = {1000 * curve.haurc:.1f})",
            hovertemplate="coverage %{x:.3f}<br>risk %{y:.3f}<extra>" + shown + "</extra>"))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero")
    layout(fig, title, height=420)
    fig.update_layout(font=dict(size=font_size - 2))
    return fig
