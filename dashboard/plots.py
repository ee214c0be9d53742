"""Plotly figures of the dashboard, and the modebar config that downloads them as PNG or SVG.

The modebar's camera button renders the image in the browser, so downloads need no kaleido.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.rules import RULE_LABELS, RULES

from .data import CurveSet
from .views import SampleView, node_name

RULE_COLORS = {
    "selective": "#7f7f7f",
    "climbing": "#1f77b4",
    "jumping": "#ff7f0e",
    "max_coverage": "#2ca02c",
}
RULE_SYMBOLS = {"selective": "circle", "climbing": "diamond", "jumping": "square", "max_coverage": "triangle-up"}
METHOD_COLORS = {"hsc": "#1f77b4", "darts": "#d62728", "crc": "#9467bd"}
METHOD_LABELS = {"hsc": "Ours (Algorithm 1)", "darts": "DARTS", "crc": "CRC"}
OK_COLOR, BAD_COLOR, NEUTRAL_COLOR = "#2e9e4f", "#d9534f", "#9aa5b1"
LOSS_LABELS = {"01": "hierarchical risk (0/1)", "severity": "hierarchical risk (LCA severity)"}


def plot_config(filename: str, fmt: str = "png") -> dict:
    """st.plotly_chart config: the camera button saves ``filename.png`` / ``.svg``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", filename).strip("_") or "figure"
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt if fmt in ("png", "svg") else "png",
                                 "filename": safe, "scale": 2},
    }


def _layout(fig: go.Figure, title: str | None = None, height: int = 460) -> go.Figure:
    fig.update_layout(
        title=dict(text=title) if title else None,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0),
        template="plotly_white",
    )
    return fig


# ---------------------------------------------------------------------------- RC / CC
def rc_figure(cs: CurveSet, points: pd.DataFrame | None = None, rules=RULES, loss: str = "01",
              title: str | None = None) -> go.Figure:
    """RC curves of ``rules`` with each rule's operating point (``points`` from
    ``views.operating_points``) as a marker."""
    traces = []
    for rule in rules:
        cov, risk = cs.display[rule]
        traces.append(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=RULE_COLORS[rule], width=2),
            name=f"{RULE_LABELS[rule]} (hAURC×1000 = {1000 * cs.curves[rule].haurc:.2f})",
            legendgroup=rule, hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + RULE_LABELS[rule] + "</extra>",
        ))
    if points is not None:
        for r in points.itertuples():
            traces.append(go.Scatter(
                x=[r.coverage], y=[r.risk], mode="markers", legendgroup=r.key, showlegend=False,
                marker=dict(color=RULE_COLORS[r.key], size=13, symbol=RULE_SYMBOLS[r.key],
                            line=dict(color="black", width=1)),
                hovertemplate=f"{r.rule} at θ = {r.θ:.2f}<br>coverage {r.coverage:.4f}<br>risk {r.risk:.4f}<extra></extra>",
            ))
    fig = go.Figure(traces)
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero")
    return _layout(fig, title)


def cc_figure(curves: dict, rules=RULES, title: str | None = None) -> go.Figure:
    fig = go.Figure()
    for rule in rules:
        c = curves[rule]
        fig.add_trace(go.Scatter(
            x=c.coverage, y=c.ece, mode="lines+markers", marker=dict(size=4, symbol=RULE_SYMBOLS[rule]),
            line=dict(color=RULE_COLORS[rule], width=2), name=RULE_LABELS[rule],
            customdata=c.thresholds,
            hovertemplate="θ %{customdata:.2f}<br>coverage %{x:.4f}<br>ECE %{y:.4f}<extra>" + RULE_LABELS[rule] + "</extra>",
        ))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text="ECE (hierarchical correctness)", rangemode="tozero")
    return _layout(fig, title)


def compare_figure(sets: dict[str, CurveSet], rule: str, loss: str = "01", title: str | None = None) -> go.Figure:
    fig = go.Figure()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for k, (model, cs) in enumerate(sets.items()):
        cov, risk = cs.display[rule]
        fig.add_trace(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=palette[k % len(palette)], width=2),
            name=f"{model} (hAURC×1000 = {1000 * cs.curves[rule].haurc:.2f})",
            hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + model + "</extra>",
        ))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero")
    return _layout(fig, title)


# ---------------------------------------------------------------------------- one sample's path
def _unique_labels(h: Hierarchy, nodes: list[int], probs: np.ndarray, tags: dict[int, str] | None = None) -> list[str]:
    labels, seen = [], {}
    for v in nodes:
        base = f"{node_name(h, v)} · cov {h.coverage[v]:.2f}"
        if tags and v in tags:
            base = f"{tags[v]} {base}"
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base} ({h.node_ids[v]})")
    return labels


def path_figure(h: Hierarchy, view: SampleView, title: str | None = None) -> go.Figure:
    """Figure 1, live: one bar per node (probability), the predicted leaf's path to the root on
    top (root first), then the true leaf's branch and any other chosen node. Green bars are
    hierarchically correct nodes (ancestors of the true leaf), red ones wrong; a dashed line
    marks θ and a lane per rule on the right marks the node that rule picks."""
    path = list(view.path[::-1])  # root … predicted leaf
    extra = [int(v) for v in view.true_branch[::-1]]  # just below the LCA … true leaf
    chosen = [c.node for c in view.choices.values()]
    others = [v for v in dict.fromkeys(chosen) if v not in path and v not in extra]
    nodes = path + extra + others
    tags = {}
    if view.true_leaf is not None:
        tags[view.true_leaf] = "<b>true leaf</b> ·"
    tags[view.pred_leaf] = "<b>top-1 = true leaf</b> ·" if view.pred_leaf == view.true_leaf else "<b>top-1</b> ·"
    labels = _unique_labels(h, nodes, view.probs, tags)
    probs = np.array([view.probs[v] for v in nodes], dtype=float)
    if view.true_leaf is None:
        colors = [NEUTRAL_COLOR] * len(nodes)
    else:
        ok = h.is_ancestor(np.array(nodes), view.true_leaf)
        colors = [OK_COLOR if o else BAD_COLOR for o in ok]
    group = (["predicted path"] * len(path) + ["true-label branch"] * len(extra) + ["other chosen"] * len(others))
    hover = [f"{node_name(h, v)} ({h.node_ids[v]})<br>p = {p:.4f}<br>coverage {h.coverage[v]:.3f}<br>"
             f"leaves {int(h.leaf_count[v])}<br>{g}" for v, p, g in zip(nodes, probs, group)]
    line_w = [3 if v == view.true_leaf or v == view.pred_leaf else 0 for v in nodes]
    fig = go.Figure(go.Bar(
        x=probs, y=labels, orientation="h", marker=dict(color=colors, line=dict(color="black", width=line_w)),
        text=[f"{p:.3f}" for p in probs], textposition=["inside" if p >= 0.15 else "outside" for p in probs],
        cliponaxis=False, hovertext=hover, hoverinfo="text",
        name="node probability", showlegend=False,
    ))
    # One lane per rule right of the bars, a marker at the row of the node it picks.
    lane = {rule: 1.08 + 0.07 * k for k, rule in enumerate(RULES)}
    index = {v: k for k, v in enumerate(nodes)}
    for rule, c in view.choices.items():
        fig.add_trace(go.Scatter(
            x=[lane[rule]], y=[labels[index[c.node]]], mode="markers", name=f"{RULE_LABELS[rule]} picks",
            marker=dict(color=RULE_COLORS[rule], size=14, symbol=RULE_SYMBOLS[rule], line=dict(color="black", width=1)),
            hovertemplate=f"{RULE_LABELS[rule]} → {node_name(h, c.node)} (p = {c.confidence:.3f})<extra></extra>",
        ))
    fig.add_vline(x=view.theta, line=dict(color="black", dash="dash", width=2),
                  annotation_text=f"θ = {view.theta:.2f}", annotation_position="bottom right")
    if extra or others:
        fig.add_hline(y=len(path) - 0.5, line=dict(color="#999", width=1, dash="dot"))
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(range=[0, 1.08 + 0.07 * len(RULES)], tickvals=[0, 0.25, 0.5, 0.75, 1.0] + list(lane.values()),
                     ticktext=["0", "0.25", "0.5", "0.75", "1"] + [RULE_LABELS[r][:2] for r in lane],
                     title_text="node probability (sum of its leaves' softmax) · rule lanes")
    return _layout(fig, title, height=max(320, 26 * len(nodes) + 120))


# ---------------------------------------------------------------------------- guaranteed accuracy
def accuracy_histogram(df: pd.DataFrame, target: float, epsilon: float, title: str | None = None) -> go.Figure:
    """Figure 3 style: test accuracy over repetitions per method, target ± ε band in green."""
    fig = go.Figure()
    lo, hi = target - epsilon, target + epsilon
    fig.add_vrect(x0=lo, x1=hi, fillcolor="rgba(72,159,72,0.18)", line_width=0, layer="below",
                  annotation_text=f"target ± ε = {target:.3f} ± {epsilon:.3f}", annotation_position="top left")
    xmin = float(np.nanmin(np.r_[df["accuracy"].to_numpy(float), lo])) - 0.01
    xmax = float(np.nanmax(np.r_[df["accuracy"].to_numpy(float), hi])) + 0.01
    bins = dict(start=xmin, end=xmax, size=(xmax - xmin) / 60)  # the same bins for every method
    for method in [m for m in ("hsc", "darts", "crc") if m in set(df["method"])]:
        acc = df.loc[df["method"] == method, "accuracy"].to_numpy(float)
        color = METHOD_COLORS.get(method)
        # CRC is drawn as an outline on top: for a 0/1 loss it often equals ours exactly, and
        # filled bars would hide ours completely.
        outline = method == "crc"
        fig.add_trace(go.Histogram(
            x=acc, name=f"{METHOD_LABELS.get(method, method)} (mean {np.nanmean(acc):.4f})", xbins=bins,
            marker=dict(color="rgba(0,0,0,0)" if outline else color, line=dict(color=color, width=2 if outline else 0)),
            opacity=1.0 if outline else 0.6,
        ))
    fig.add_vline(x=target, line=dict(color="#1b5e20", width=2), annotation_text="target",
                  annotation_position="bottom right")
    fig.add_vrect(x0=xmin, x1=lo, fillcolor="rgba(223,74,74,0.08)", line_width=0, layer="below")
    fig.add_vrect(x0=hi, x1=xmax, fillcolor="rgba(223,74,74,0.08)", line_width=0, layer="below")
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text="test accuracy (hierarchical)", range=[xmin, xmax])
    fig.update_yaxes(title_text="repetitions")
    return _layout(fig, title)


# ---------------------------------------------------------------------------- overview illustration
def illustration_figure(h: Hierarchy, leaf_name: str = "golden_retriever", theta: float = 0.8) -> go.Figure:
    """A hand-made example in the spirit of the paper's Figure 1: a low-confidence leaf, two
    siblings, and the probabilities summed up the path. The numbers are illustrative."""
    names = list(h.names[: h.n_leaves])
    leaf = names.index(leaf_name) if leaf_name in names else 0
    path = [int(v) for v in h.path_to_root(leaf)]
    base = [0.29, 0.62, 0.71, 0.76, 0.93, 0.95, 0.96]
    prob = {v: base[min(k, len(base) - 1)] for k, v in enumerate(path)}
    show = path[: min(len(path), len(base))][::-1]  # a few ancestors (top) … the leaf (bottom)
    siblings = [int(s) for s in h.children[path[1]] if s != leaf][:2] if len(path) > 1 else []
    sib_p = [0.24, 0.06]
    climbing = next((v for v in path if prob.get(v, 1.0) >= theta), path[-1])
    y = {v: k for k, v in enumerate(show[::-1])}  # leaf at y = 0, ancestors above
    fig = go.Figure()
    edges_x, edges_y = [], []
    for child, parent in zip(show[::-1][:-1], show[::-1][1:]):
        edges_x += [0, 0, None]
        edges_y += [y[child], y[parent], None]
    for j, s in enumerate(siblings):
        edges_x += [-1.6 * (j + 1), 0, None]
        edges_y += [0, 1, None]
    top = max(y.values())
    edges_x += [0, 0]
    edges_y += [top, top + 0.6]
    fig.add_trace(go.Scatter(x=edges_x, y=edges_y, mode="lines", line=dict(color="#c0c0c0", width=2),
                             hoverinfo="skip", showlegend=False))
    for v in show:
        pick, is_leaf = v == climbing, v == leaf
        note = "  ← Climbing predicts this" if pick else ("  ← top-1 leaf, below θ" if is_leaf else "")
        fig.add_trace(go.Scatter(
            x=[0], y=[y[v]], mode="markers+text", showlegend=False, hoverinfo="skip",
            marker=dict(size=22 if pick else 15, color=OK_COLOR if pick else ("#f0ad4e" if is_leaf else "#c7d2dd"),
                        line=dict(color="black", width=1)),
            text=[f"  {node_name(h, v)}: {prob[v]:.2f}{note}"], textposition="middle right",
        ))
    for j, s in enumerate(siblings):
        fig.add_trace(go.Scatter(
            x=[-1.6 * (j + 1)], y=[0], mode="markers+text", showlegend=False, hoverinfo="skip",
            marker=dict(size=13, color="#e6e6e6", line=dict(color="black", width=1)),
            text=[f"{node_name(h, s).replace(' ', '<br>')}<br>{sib_p[j]:.2f}"], textposition="bottom center",
        ))
    fig.add_annotation(x=0, y=top + 0.85, text=f"… up to the root ({node_name(h, path[-1])}: 1.00)",
                       showarrow=False, xanchor="left")
    fig.update_xaxes(visible=False, range=[-4.2, 4.0])
    fig.update_yaxes(visible=False, range=[-1.5, top + 1.2])
    return _layout(fig, f"Climbing at θ = {theta} (illustrative numbers)", height=430)


def top5_figure(names: list[str], probs: list[float], title: str | None = None) -> go.Figure:
    fig = go.Figure(go.Bar(x=probs[::-1], y=names[::-1], orientation="h", marker_color="#1f77b4",
                           text=[f"{p:.3f}" for p in probs[::-1]], textposition="auto"))
    fig.update_xaxes(title_text="softmax probability", range=[0, 1])
    return _layout(fig, title, height=300)
