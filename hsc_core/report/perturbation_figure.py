"""The predicted path climbing as an image degrades: for each severity of a corruption, the depth
of the node each rule picks at θ, animated one severity at a time (▶ Play), node names beside the
points. Rules keep their colour, dash and marker (``style.RULE_STYLE``); correct/wrong picks are
also ✓/✗ in the hover and a filled/open marker."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..core.hierarchy import Hierarchy
from ..core.rule_registry import rule_label, rule_names
from . import style
from .figures import layout
from .tree_figure import pick_index

#: The rules shown by default: the paper's four (``rule_registry``).
PAPER_RULES: tuple[str, ...] = rule_names(paper=True)


def picks_by_severity(records: Sequence[dict[str, tuple[np.ndarray, np.ndarray]]], theta: float
                      ) -> dict[str, list[int]]:
    """rule → the node it picks at θ, per severity (``records[k]``: ``tree_figure.record_rows`` of
    severity k; the one θ comparison, ``pick_index``)."""
    out: dict[str, list[int]] = {}
    for rec in records:
        for rule, (nodes, values) in rec.items():
            out.setdefault(rule, []).append(int(nodes[int(pick_index(values, theta))]))
    return out


def degradation_figure(h: Hierarchy, records: Sequence[dict[str, tuple[np.ndarray, np.ndarray]]], theta: float,
                       *, true_leaf: int | None = None, kind: str = "blur", rules: Sequence[str] = PAPER_RULES,
                       font_size: int = style.BASE_FONT_SIZE, title: str | None = None) -> go.Figure:
    """Depth of each rule's pick at θ against severity 0…len(records)−1, with one frame per
    severity (the path so far) and a Play button. Depth 0 is the root (a rejection)."""
    picks = picks_by_severity(records, theta)
    n = len(records)
    sev = np.arange(n)
    fig = go.Figure()

    def trace(rule: str, upto: int) -> go.Scatter:
        colour, dash, symbol = style.RULE_STYLE[rule]
        nodes = picks[rule][: upto + 1]
        ok = [None if true_leaf is None else bool(h.is_ancestor(v, int(true_leaf))) for v in nodes]
        mark = ["" if c is None else (f" {style.CORRECT_MARK}" if c else f" {style.WRONG_MARK}") for c in ok]
        names = [style.plain(h.names[v].replace("_", " "), 22) for v in nodes]
        # a name only where the pick changes (repeated names printed over each other), and kept inside the
        # plot at both ends
        text = [f"{nm}{mk}" if k == 0 or nodes[k] != nodes[k - 1] else ""
                for k, (nm, mk) in enumerate(zip(names, mark, strict=True))]
        where = ["top right" if k == 0 else "top left" if k == n - 1 else "top center" for k in range(len(nodes))]
        return go.Scatter(
            x=sev[: upto + 1], y=h.depth[nodes], mode="lines+markers+text" if rule == "climbing" else "lines+markers",
            name=rule_label(rule), line=dict(color=colour, dash=dash, width=2.5),
            marker=dict(symbol=[symbol if c is not False else f"{symbol}-open" for c in ok], size=11, color=colour),
            text=text if rule == "climbing" else None,
            textposition=where, hovertemplate=[f"severity %{{x}}: {nm}{mk}<extra>{rule_label(rule)}</extra>"
                                                      for nm, mk in zip(names, mark, strict=True)])

    shown = [r for r in rules if r in picks]
    for rule in shown:
        fig.add_trace(trace(rule, n - 1))
    fig.frames = [go.Frame(name=str(k), data=[trace(r, k) for r in shown]) for k in range(n)]
    fig.update_layout(updatemenus=[dict(
        type="buttons", direction="left", x=0.0, y=1.02, xanchor="left", yanchor="bottom", showactive=False,
        buttons=[dict(label="▶ Play", method="animate",
                      args=[[str(k) for k in range(n)], dict(frame=dict(duration=700, redraw=True),
                                                             fromcurrent=False, mode="immediate",
                                                             transition=dict(duration=250))])])])
    layout(fig, title, height=380)
    fig.update_layout(font=dict(size=font_size - 2), margin=dict(t=90 if title else 60))
    fig.update_xaxes(title_text=f"{kind} severity (0 = the original)", dtick=1, range=[-0.3, n - 0.7])
    fig.update_yaxes(title_text=f"depth of the pick at θ = {theta:.2f} (0 = reject)", dtick=1,
                     range=[-0.5, float(h.max_depth) + 0.8])
    return fig
