"""The plotly figures shared by the dashboard's pages and ``hsc report``: risk– and
calibration–coverage curves, gains, one sample's path and the overview illustration (the
guarantees' figures are in ``guarantee_figures``, an export's context in ``export``).

Every builder takes plain data (curves as coverage/risk arrays, ``CCCurve``s, numbers) and returns
a ``go.Figure``; nothing here knows Streamlit. Colours, dashes and marker shapes come from
``style`` (Okabe–Ito): each rule differs in colour *and* dash *and* marker, correct/wrong in
colour *and* symbol, so no figure relies on colour alone.

Every user-provided string (class, node, model and data-set names, subsets, sample ids) reaches a
figure through ``style.plain``: escaped, so Plotly draws it as text and never as markup, and cut
to ``style.NAME_CHARS`` characters. Titles passed in are the caller's own text (they may hold
markup); user names belong in the ``ExportContext``, which is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, Protocol

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.rule_registry import is_rule, rule_label, rule_names

from . import style
from .export import ExportContext

#: The rules shown by default: the paper's four (``rule_registry``).
PAPER_RULES: tuple[str, ...] = rule_names(paper=True)

# Kept under the names the dashboard has always used; the values are THE palette.
RULE_COLORS: dict[str, str] = {rule: style.rule_colour(rule) for rule in rule_names()}
RULE_SYMBOLS: dict[str, str] = {rule: style.rule_symbol(rule) for rule in rule_names()}
RULE_DASHES: dict[str, str] = {rule: style.rule_dash(rule) for rule in rule_names()}
OK_COLOR, BAD_COLOR, NEUTRAL_COLOR = style.CORRECT_COLOUR, style.WRONG_COLOUR, style.NEUTRAL_COLOUR
LOSS_LABELS = {"01": "hierarchical risk (0/1)", "severity": "hierarchical risk (LCA severity)"}
# Models overlaid in one figure: colour and dash both change from one model to the next.
_MODEL_COLOURS = [style.OKABE_ITO[c] for c in ("blue", "orange", "bluish_green", "vermillion", "reddish_purple",
                                                "sky_blue", "black", "yellow")]
_MODEL_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
RISK_NOTE = ("Hierarchical risk = wrong predictions / all samples; a prediction is correct when it is the true "
             "class or one of its ancestors, so the root (= reject) is always correct and covers nothing.")


def titled(fig: go.Figure, title: str, context: ExportContext | None = None) -> go.Figure:
    """Give ``fig`` a title, with the context as a subtitle line, so an exported image says what it shows.
    ``title`` is the caller's own text; the context's names are escaped (``style.plain``) and cut."""
    subtitle = (dict(text=style.plain(context.describe(style.NAME_CHARS), limit=None),
                     font=dict(size=style.BASE_FONT_SIZE - 4)) if context else None)
    # Title at the very top, the legend at the very bottom: however long either gets, neither
    # covers the other or the plot.
    fig.update_layout(title=dict(text=title, subtitle=subtitle, y=0.985, yanchor="top", yref="container",
                                 x=0.01, xanchor="left"),
                      legend=dict(orientation="h", yref="container", y=0.01, yanchor="bottom", x=0.0, xanchor="left"),
                      margin=dict(t=90 if context is not None else 60, b=150),
                      height=(fig.layout.height or 460) + 130)
    return fig


def distinct(labels: Sequence[str]) -> list[str]:
    """``labels`` with repeats numbered ("name (2)"): names cut to the same text must not share a
    category row (a category axis would draw them as one)."""
    out: list[str] = []
    used: set[str] = set()
    for label in labels:
        candidate, k = label, 1
        while candidate in used:
            k += 1
            candidate = f"{label} ({k})"
        used.add(candidate)
        out.append(candidate)
    return out


def layout(fig: go.Figure, title: str | None = None, height: int = 460) -> go.Figure:
    fig.update_layout(
        title=dict(text=title) if title else None,
        height=height,
        margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="left", x=0.0),
        template="plotly_white",
        font=dict(size=style.BASE_FONT_SIZE - 2),
    )
    return fig


def model_style(k: int) -> tuple[str, str]:
    """(colour, dash) of the k-th model in an overlay: both change, so models stay apart in greyscale."""
    return _MODEL_COLOURS[k % len(_MODEL_COLOURS)], _MODEL_DASHES[k % len(_MODEL_DASHES)]


# ---------------------------------------------------------------------------- RC / CC
def rc_figure(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    haurc: Mapping[str, float] | None = None,
    points: pd.DataFrame | None = None,
    rules: Sequence[str] = PAPER_RULES,
    loss: str = "01",
    title: str | None = None,
) -> go.Figure:
    """RC curves of ``rules``: curves[rule] = (coverage, risk) in θ order (decimate first for the
    browser); ``haurc`` labels the legend; ``points`` (columns key, rule, θ, coverage, risk, as
    ``dashboard.views.operating_points``) marks each rule's operating point. A curve that stops
    short of coverage 1 says where it ends beside its hAURC: that area is over a shorter range, so
    it is not comparable with a full curve's (``core.curves.COMMON_RANGE_NOTE``)."""
    traces = []
    for rule in rules:
        cov, risk = curves[rule]
        name = rule_label(rule) if haurc is None else f"{rule_label(rule)} (hAURC×1000 = {1000 * haurc[rule]:.2f})"
        end = float(np.max(cov)) if len(cov) else 1.0
        if haurc is not None and end < 1.0:
            name = f"{name[:-1]}, curve ends at coverage {end:.3f})"
        traces.append(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=RULE_COLORS[rule], width=2.5, dash=RULE_DASHES[rule]),
            name=name, legendgroup=rule,
            hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + rule_label(rule) + "</extra>",
        ))
    if points is not None:
        for r in points.itertuples():
            traces.append(go.Scatter(
                x=[r.coverage], y=[r.risk], mode="markers", legendgroup=r.key, showlegend=False,
                marker=dict(color=RULE_COLORS[r.key], size=13, symbol=RULE_SYMBOLS[r.key],
                            line=dict(color="black", width=1)),
                hovertemplate=(f"{r.rule} at θ = {r.θ:.2f}<br>coverage {r.coverage:.4f}<br>"
                               f"risk {r.risk:.4f}<extra></extra>"),
            ))
    fig = go.Figure(traces)
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero")
    return layout(fig, title)


def cc_figure(curves: Mapping[str, Any], rules: Sequence[str] = PAPER_RULES, title: str | None = None) -> go.Figure:
    """ECE against coverage per rule; curves[rule] has ``thresholds``, ``coverage``, ``ece`` (a CCCurve)."""
    fig = go.Figure()
    for rule in rules:
        c = curves[rule]
        fig.add_trace(go.Scatter(
            x=c.coverage, y=c.ece, mode="lines+markers", marker=dict(size=6, symbol=RULE_SYMBOLS[rule]),
            line=dict(color=RULE_COLORS[rule], width=2, dash=RULE_DASHES[rule]), name=rule_label(rule),
            customdata=c.thresholds,
            hovertemplate=("θ %{customdata:.2f}<br>coverage %{x:.4f}<br>ECE %{y:.4f}"
                           "<extra>" + rule_label(rule) + "</extra>"),
        ))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text="ECE (hierarchical correctness)", rangemode="tozero")
    return layout(fig, title)


def compare_figure(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    haurc: Mapping[str, float] | None = None,
    loss: str = "01",
    title: str | None = None,
) -> go.Figure:
    """One rule's RC curve per model: curves[model] = (coverage, risk)."""
    fig = go.Figure()
    for k, (model, (cov, risk)) in enumerate(curves.items()):
        colour, dash = model_style(k)
        shown = style.plain(model)
        name = shown if haurc is None else f"{shown} (hAURC×1000 = {1000 * haurc[model]:.2f})"
        fig.add_trace(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=colour, width=2.5, dash=dash), name=name,
            hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + shown + "</extra>",
        ))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02])
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero")
    return layout(fig, title)


def gain_figure(rows: Sequence[dict], title: str | None = None) -> go.Figure:
    """Hierarchical gain vs Selective with its 95 % interval, one bar per row.

    rows: dicts with ``label`` (y axis: user text, escaped and cut in the middle so its end, the
    rule and TS setting, stays), ``rule``, ``estimate``, ``low``, ``high`` (percent).
    A dashed line marks 0: an interval that crosses it is no clear difference.
    """
    fig = go.Figure()
    labels = distinct([style.plain(r["label"], limit=style.NAME_CHARS + 30, tail=30) for r in rows])
    for rule in dict.fromkeys(r["rule"] for r in rows):
        sub = [k for k, r in enumerate(rows) if r["rule"] == rule]
        est = np.array([rows[k]["estimate"] for k in sub], float)
        label = rule_label(rule) if is_rule(rule) else rule
        fig.add_trace(go.Scatter(
            x=est, y=[labels[k] for k in sub], mode="markers", name=label,
            marker=dict(color=RULE_COLORS.get(rule, NEUTRAL_COLOR), symbol=RULE_SYMBOLS.get(rule, "circle"), size=12,
                        line=dict(color="black", width=1)),
            error_x=dict(type="data", symmetric=False, array=np.array([rows[k]["high"] for k in sub]) - est,
                         arrayminus=est - np.array([rows[k]["low"] for k in sub]), thickness=2, width=6),
            hovertemplate="%{y}: %{x:.2f} %<extra>" + (rule_label(rule) if is_rule(rule) else rule) + "</extra>",
        ))
    fig.add_vline(x=0, line=dict(color="black", dash="dash", width=1))
    fig.update_layout(showlegend=False)  # the y labels name the rules
    fig.update_xaxes(title_text="hierarchical gain vs Selective (%), 95 % bootstrap interval", zeroline=False)
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, height=max(260, 34 * len(rows) + 140))


# ---------------------------------------------------------------------------- one sample's path
class PathView(Protocol):
    """What ``path_figure`` reads from a sample (``dashboard.views.SampleView`` is one)."""

    path: np.ndarray
    true_branch: np.ndarray
    choices: Mapping[str, Any]
    true_leaf: int | None
    pred_leaf: int
    probs: np.ndarray
    theta: float


def node_name(h: Hierarchy, v: int) -> str:
    """A node's name as the hierarchy file has it ("_" as spaces): raw text, ``shown_name`` for a figure."""
    return h.names[int(v)].replace("_", " ")


def shown_name(h: Hierarchy, v: int, limit: int | None = style.NAME_CHARS) -> str:
    """A node's name for a figure: escaped and cut (``style.plain``)."""
    return style.plain(node_name(h, v), limit)


def _unique_labels(h: Hierarchy, nodes: list[int], tags: dict[int, str] | None = None,
                   marks: dict[int, str] | None = None) -> list[str]:
    labels: list[str] = []
    seen: dict[str, int] = {}
    for v in nodes:
        base = f"{shown_name(h, v)} · cov {h.coverage[v]:.2f}"
        if marks and v in marks:
            base = f"{marks[v]} {base}"
        if tags and v in tags:
            base = f"{tags[v]} {base}"
        seen[base] = seen.get(base, 0) + 1
        labels.append(base if seen[base] == 1 else f"{base} ({style.plain(h.node_ids[v], 40)})")
    return distinct(labels)


def path_figure(h: Hierarchy, view: PathView, title: str | None = None) -> go.Figure:
    """Figure 1, live: one bar per node (probability), the predicted leaf's path to the root on
    top (root first), then the true leaf's branch and any other chosen node. Hierarchically
    correct nodes (ancestors of the true leaf) are bluish green with ✓, wrong ones vermillion,
    hatched, with ✗; a dashed line marks θ and a lane per rule on the right marks the node that
    rule picks (its colour and shape)."""
    path = list(view.path[::-1])  # root … predicted leaf
    extra = [int(v) for v in view.true_branch[::-1]]  # just below the LCA … true leaf
    chosen = [c.node for c in view.choices.values()]
    others = [v for v in dict.fromkeys(chosen) if v not in path and v not in extra]
    nodes = path + extra + others
    tags = {}
    if view.true_leaf is not None:
        tags[view.true_leaf] = "<b>true leaf</b> ·"
    tags[view.pred_leaf] = "<b>top-1 = true leaf</b> ·" if view.pred_leaf == view.true_leaf else "<b>top-1</b> ·"
    probs = np.array([view.probs[v] for v in nodes], dtype=float)
    if view.true_leaf is None:
        colors, patterns, marks = [NEUTRAL_COLOR] * len(nodes), [""] * len(nodes), {}
    else:
        ok = h.is_ancestor(np.array(nodes), view.true_leaf)
        colors = [OK_COLOR if o else BAD_COLOR for o in ok]
        patterns = ["" if o else "/" for o in ok]
        marks = {v: style.CORRECT_MARK if o else style.WRONG_MARK for v, o in zip(nodes, ok, strict=True)}
    labels = _unique_labels(h, nodes, tags, marks)
    group = (["predicted path"] * len(path) + ["true-label branch"] * len(extra) + ["other chosen"] * len(others))
    hover = [f"{shown_name(h, v, style.HOVER_CHARS)} ({style.plain(h.node_ids[v], 40)})<br>p = {p:.4f}<br>"
             f"coverage {h.coverage[v]:.3f}<br>"
             f"leaves {int(h.leaf_count[v])}<br>{g}" for v, p, g in zip(nodes, probs, group, strict=True)]
    line_w = [3 if v == view.true_leaf or v == view.pred_leaf else 0 for v in nodes]
    fig = go.Figure(go.Bar(
        x=probs, y=labels, orientation="h",
        marker=dict(color=colors, line=dict(color="black", width=line_w), pattern=dict(shape=patterns)),
        text=[f"{p:.3f}" for p in probs], textposition=["inside" if p >= 0.15 else "outside" for p in probs],
        cliponaxis=False, hovertext=hover, hoverinfo="text",
        name="node probability", showlegend=False,
    ))
    # One lane per rule right of the bars, a marker at the row of the node it picks.
    lane: dict[str, float] = {rule: 1.08 + 0.07 * k for k, rule in enumerate(PAPER_RULES)}
    index = {v: k for k, v in enumerate(nodes)}
    for rule, c in view.choices.items():
        fig.add_trace(go.Scatter(
            x=[lane[rule]], y=[labels[index[c.node]]], mode="markers", name=f"{rule_label(rule)} picks",
            marker=dict(color=RULE_COLORS[rule], size=14, symbol=RULE_SYMBOLS[rule], line=dict(color="black", width=1)),
            hovertemplate=f"{rule_label(rule)} → {shown_name(h, c.node)} (p = {c.confidence:.3f})<extra></extra>",
        ))
    fig.add_vline(x=view.theta, line=dict(color="black", dash="dash", width=2),
                  annotation_text=f"θ = {view.theta:.2f}", annotation_position="bottom right")
    if extra or others:
        fig.add_hline(y=len(path) - 0.5, line=dict(color="#999", width=1, dash="dot"))
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(range=[0, 1.08 + 0.07 * len(PAPER_RULES)],
                     tickvals=[0, 0.25, 0.5, 0.75, 1.0] + list(lane.values()),
                     ticktext=["0", "0.25", "0.5", "0.75", "1"] + [rule_label(r)[:2] for r in lane],
                     title_text="node probability (sum of its leaves' softmax) · rule lanes")
    return layout(fig, title, height=max(320, 26 * len(nodes) + 120))


# ---------------------------------------------------------------------------- overview illustration
def illustration_figure(h: Hierarchy, leaf_name: str = "golden_retriever", theta: float = 0.8) -> go.Figure:
    """A hand-made example in the spirit of the paper's Figure 1: a low-confidence, wrong leaf, two
    siblings (the first is the true class), and the probabilities summed up the path. The numbers
    are illustrative."""
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
    edges_x: list[float | None] = []
    edges_y: list[float | None] = []
    for child, parent in pairwise(show[::-1]):
        edges_x += [0, 0, None]
        edges_y += [y[child], y[parent], None]
    for j in range(len(siblings)):
        edges_x += [-1.0 - 1.4 * j, 0, None]
        edges_y += [0, 1, None]
    top = max(y.values())
    edges_x += [0, 0]
    edges_y += [top, top + 0.6]
    fig.add_trace(go.Scatter(x=edges_x, y=edges_y, mode="lines", line=dict(color="#c0c0c0", width=2),
                             hoverinfo="skip", showlegend=False))
    for v in show:
        pick, is_leaf = v == climbing, v == leaf
        # The notes go on a second line, so the figure's half-width column never cuts them.
        note = (f"<br>  ← Climbing: ≥ θ, {style.CORRECT_MARK} right" if pick else
                f"<br>  ← top-1: < θ, {style.WRONG_MARK} wrong" if is_leaf else "")
        fig.add_trace(go.Scatter(
            x=[0], y=[y[v]], mode="markers+text", showlegend=False, hoverinfo="skip",
            marker=dict(size=22 if pick else 15,
                        color=(RULE_COLORS["climbing"] if pick
                               else style.OKABE_ITO["orange"] if is_leaf else "#c7d2dd"),
                        symbol=RULE_SYMBOLS["climbing"] if pick else "circle", line=dict(color="black", width=1)),
            text=[f"  {shown_name(h, v)}: {prob[v]:.2f}{note}"], textposition="middle right",
        ))
    for j, s in enumerate(siblings):
        fig.add_trace(go.Scatter(
            x=[-1.0 - 1.4 * j], y=[0], mode="markers+text", showlegend=False, hoverinfo="skip",
            marker=dict(size=13, color="#e6e6e6", line=dict(color="black", width=1)),
            # a word per line, hyphenated ones split too: "curly-coated" and "flat-coated" side by side fit
            text=["<br>".join(style.plain(word, None)
                              for word in style.clip(node_name(h, s)).replace("-", "- ").split(" "))
                  + f"<br>{sib_p[j]:.2f}" + (f"<br>{style.CORRECT_MARK} true class" if j == 0 else "")],
            textposition="bottom center",
        ))
    fig.add_annotation(x=0, y=top + 0.85, text=f"… up to the root ({shown_name(h, path[-1])}: 1.00)",
                       showarrow=False, xanchor="left")
    fig.update_xaxes(visible=False, range=[-3.3, 4.4])
    fig.update_yaxes(visible=False, range=[-2.5, top + 1.2])  # room for the siblings' 4 lines at projector size
    return layout(fig, f"Climbing at θ = {theta} (illustrative numbers)", height=430)


def top5_figure(names: list[str], probs: list[float], title: str | None = None) -> go.Figure:
    """The top classes of one image (``names``: user text, escaped and cut here), best on top."""
    labels = distinct([style.plain(n) for n in names])
    fig = go.Figure(go.Bar(x=probs[::-1], y=labels[::-1], orientation="h", marker_color=style.OKABE_ITO["blue"],
                           text=[f"{p:.3f}" for p in probs[::-1]], textposition="auto"))
    fig.update_xaxes(title_text="softmax probability", range=[0, 1])
    return layout(fig, title, height=300)


def leaf_bars_figure(names: Sequence[str], probs: Sequence[float], correct: Sequence[bool],
                     font_size: int = style.BASE_FONT_SIZE) -> go.Figure:
    """The guided story's top-k leaves of one sample, most likely on top: the true leaf bluish
    green with ✓, the others vermillion, hatched, with ✗. ``names``: user text (escaped and cut here)."""
    ok = list(correct)
    labels = distinct([f"{style.plain(n)} {style.CORRECT_MARK if o else style.WRONG_MARK}"
                       for n, o in zip(names, ok, strict=True)])
    p = np.asarray(probs, dtype=float)
    fig = go.Figure(go.Bar(
        x=p[::-1], y=labels[::-1], orientation="h",
        marker=dict(color=[style.CORRECT_COLOUR if o else style.WRONG_COLOUR for o in ok[::-1]],
                    pattern=dict(shape=["" if o else "/" for o in ok[::-1]])),
        text=[f"{v:.2f}" for v in p[::-1]], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
    fig.update_xaxes(range=[0, 1], title_text="softmax probability of the leaf class", title_font=dict(size=font_size),
                     tickfont=dict(size=font_size - 2))
    fig.update_yaxes(tickfont=dict(size=font_size))
    fig.update_layout(height=90 + 55 * len(labels), margin=dict(l=10, r=40, t=10, b=10), template="plotly_white",
                      font=dict(size=font_size), showlegend=False)
    return fig
