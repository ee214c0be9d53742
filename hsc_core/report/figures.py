"""The plotly figures shared by the dashboard's pages and ``hsc report``, and the context that
makes an exported figure or table say what it shows.

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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.metric_rules import ALL_RULES
from hsc_core.core.rules import RULE_LABELS, RULES

from . import style

# Kept under the names the dashboard has always used; the values are THE palette.
RULE_COLORS: dict[str, str] = {rule: style.rule_colour(rule) for rule in ALL_RULES}
RULE_SYMBOLS: dict[str, str] = {rule: style.rule_symbol(rule) for rule in ALL_RULES}
RULE_DASHES: dict[str, str] = {rule: style.rule_dash(rule) for rule in ALL_RULES}
METHOD_COLORS = {"hsc": style.OKABE_ITO["blue"], "darts": style.OKABE_ITO["vermillion"],
                 "crc": style.OKABE_ITO["reddish_purple"]}
METHOD_LABELS = {"hsc": "Ours (Algorithm 1)", "darts": "DARTS", "crc": "CRC"}
OK_COLOR, BAD_COLOR, NEUTRAL_COLOR = style.CORRECT_COLOUR, style.WRONG_COLOUR, style.NEUTRAL_COLOUR
LOSS_LABELS = {"01": "hierarchical risk (0/1)", "severity": "hierarchical risk (LCA severity)"}
# Models overlaid in one figure: colour and dash both change from one model to the next.
_MODEL_COLOURS = [style.OKABE_ITO[c] for c in ("blue", "orange", "bluish_green", "vermillion", "reddish_purple",
                                                "sky_blue", "black", "yellow")]
_MODEL_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
RISK_NOTE = ("Hierarchical risk = wrong predictions / all samples; a prediction is correct when it is the true "
             "class or one of its ancestors, so the root (= reject) is always correct and covers nothing.")


# ---------------------------------------------------------------------------- export context
@dataclass(frozen=True)
class ExportContext:
    """What a figure or table shows, for its title, its file name and its CSV columns.

    ``ts`` None: the export covers both settings (e.g. a with/without-TS table); ``theta`` None:
    no single operating point.
    """

    model: str
    dataset: str = ""
    subset: str = "all"
    ts: bool | None = None
    temperature: float | None = None
    theta: float | None = None
    n_samples: int | None = None

    def describe(self, name_chars: int | None = None) -> str:
        """One line: ``efficientnet_lite0 · imagenet1k · all samples (1,705) · TS on (T = 1.234) · θ = 0.70``.
        ``name_chars`` cuts each name (model, data set, subset) to that many characters."""
        def name(text: str) -> str:
            return style.clip(text, name_chars)

        subset = "all samples" if self.subset in ("", "all") else f"subset {name(self.subset)}"
        if self.n_samples is not None:
            subset += f" ({self.n_samples:,} evaluated)"
        parts = [name(self.model)] + ([name(self.dataset)] if self.dataset else []) + [subset]
        if self.ts is True:
            parts.append("TS on" + (f" (T = {self.temperature:.3f})" if self.temperature is not None else ""))
        elif self.ts is False:
            parts.append("TS off")
        if self.theta is not None:
            parts.append(f"θ = {self.theta:.2f}")
        return " · ".join(parts)

    def slug(self) -> str:
        """The same facts for a file name: ``efficientnet_lite0_imagenet1k_all_TS_theta0.70``."""
        parts = [self.model] + ([self.dataset] if self.dataset else []) + [self.subset or "all"]
        if self.ts is not None:
            parts.append("TS" if self.ts else "noTS")
        if self.theta is not None:
            parts.append(f"theta{self.theta:.2f}")
        return safe_filename("_".join(parts))

    def columns(self) -> dict[str, Any]:
        """CSV columns saying the same (they lead every exported table)."""
        return {"model": self.model, "dataset": self.dataset, "subset": self.subset or "all",
                "temperature_scaling": "both" if self.ts is None else ("on" if self.ts else "off"),
                "temperature": self.temperature if self.ts else None,
                "theta": self.theta}


FILENAME_CHARS = 150  # file systems allow 255 bytes; a user's name may be far longer


def safe_filename(text: str, default: str = "figure") -> str:
    """Letters, digits, '.', '_' and '-' only (anything else becomes '_'), at most ``FILENAME_CHARS``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)[: 4 * FILENAME_CHARS]).strip("._")[:FILENAME_CHARS] or default


def export_name(name: str, context: ExportContext | None) -> str:
    """``name`` plus the context's slug, for a downloaded file (no extension)."""
    return safe_filename(name if context is None else f"{name}_{context.slug()}")


def with_context_columns(df: pd.DataFrame, context: ExportContext | None) -> pd.DataFrame:
    """``df`` with the context's columns in front (a column the table already has is kept as is)."""
    if context is None:
        return df
    front = {k: v for k, v in context.columns().items() if k not in df.columns}
    out = df.copy()
    for k, (col, value) in enumerate(front.items()):
        out.insert(k, col, value)
    return out


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
    rules: Sequence[str] = RULES,
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
        name = RULE_LABELS[rule] if haurc is None else f"{RULE_LABELS[rule]} (hAURC×1000 = {1000 * haurc[rule]:.2f})"
        end = float(np.max(cov)) if len(cov) else 1.0
        if haurc is not None and end < 1.0:
            name = f"{name[:-1]}, curve ends at coverage {end:.3f})"
        traces.append(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=RULE_COLORS[rule], width=2.5, dash=RULE_DASHES[rule]),
            name=name, legendgroup=rule,
            hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + RULE_LABELS[rule] + "</extra>",
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


def cc_figure(curves: Mapping[str, Any], rules: Sequence[str] = RULES, title: str | None = None) -> go.Figure:
    """ECE against coverage per rule; curves[rule] has ``thresholds``, ``coverage``, ``ece`` (a CCCurve)."""
    fig = go.Figure()
    for rule in rules:
        c = curves[rule]
        fig.add_trace(go.Scatter(
            x=c.coverage, y=c.ece, mode="lines+markers", marker=dict(size=6, symbol=RULE_SYMBOLS[rule]),
            line=dict(color=RULE_COLORS[rule], width=2, dash=RULE_DASHES[rule]), name=RULE_LABELS[rule],
            customdata=c.thresholds,
            hovertemplate=("θ %{customdata:.2f}<br>coverage %{x:.4f}<br>ECE %{y:.4f}"
                           "<extra>" + RULE_LABELS[rule] + "</extra>"),
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
        fig.add_trace(go.Scatter(
            x=est, y=[labels[k] for k in sub], mode="markers", name=RULE_LABELS.get(rule, rule),
            marker=dict(color=RULE_COLORS.get(rule, NEUTRAL_COLOR), symbol=RULE_SYMBOLS.get(rule, "circle"), size=12,
                        line=dict(color="black", width=1)),
            error_x=dict(type="data", symmetric=False, array=np.array([rows[k]["high"] for k in sub]) - est,
                         arrayminus=est - np.array([rows[k]["low"] for k in sub]), thickness=2, width=6),
            hovertemplate="%{y}: %{x:.2f} %<extra>" + RULE_LABELS.get(rule, rule) + "</extra>",
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
    lane: dict[str, float] = {rule: 1.08 + 0.07 * k for k, rule in enumerate(RULES)}
    index = {v: k for k, v in enumerate(nodes)}
    for rule, c in view.choices.items():
        fig.add_trace(go.Scatter(
            x=[lane[rule]], y=[labels[index[c.node]]], mode="markers", name=f"{RULE_LABELS[rule]} picks",
            marker=dict(color=RULE_COLORS[rule], size=14, symbol=RULE_SYMBOLS[rule], line=dict(color="black", width=1)),
            hovertemplate=f"{RULE_LABELS[rule]} → {shown_name(h, c.node)} (p = {c.confidence:.3f})<extra></extra>",
        ))
    fig.add_vline(x=view.theta, line=dict(color="black", dash="dash", width=2),
                  annotation_text=f"θ = {view.theta:.2f}", annotation_position="bottom right")
    if extra or others:
        fig.add_hline(y=len(path) - 0.5, line=dict(color="#999", width=1, dash="dot"))
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(range=[0, 1.08 + 0.07 * len(RULES)], tickvals=[0, 0.25, 0.5, 0.75, 1.0] + list(lane.values()),
                     ticktext=["0", "0.25", "0.5", "0.75", "1"] + [RULE_LABELS[r][:2] for r in lane],
                     title_text="node probability (sum of its leaves' softmax) · rule lanes")
    return layout(fig, title, height=max(320, 26 * len(nodes) + 120))


# ---------------------------------------------------------------------------- guaranteed accuracy
def accuracy_histogram(df: pd.DataFrame, target: float, epsilon: float, title: str | None = None) -> go.Figure:
    """Figure 3 style: test accuracy over repetitions per method, target ± ε band shaded."""
    fig = go.Figure()
    lo, hi = target - epsilon, target + epsilon
    fig.add_vrect(x0=lo, x1=hi, fillcolor="rgba(0,158,115,0.16)", line_width=0, layer="below",
                  annotation_text=f"target ± ε = {target:.3f} ± {epsilon:.3f}", annotation_position="top left")
    xmin = float(np.nanmin(np.r_[df["accuracy"].to_numpy(float), lo])) - 0.01
    xmax = float(np.nanmax(np.r_[df["accuracy"].to_numpy(float), hi])) + 0.01
    bins = dict(start=xmin, end=xmax, size=(xmax - xmin) / 60)  # the same bins for every method
    patterns = {"hsc": "", "darts": "/", "crc": ""}
    for method in [m for m in ("hsc", "darts", "crc") if m in set(df["method"])]:
        acc = df.loc[df["method"] == method, "accuracy"].to_numpy(float)
        color = METHOD_COLORS.get(method)
        # CRC is drawn as an outline on top: for a 0/1 loss it often equals ours exactly, and
        # filled bars would hide ours completely.
        outline = method == "crc"
        fig.add_trace(go.Histogram(
            x=acc, name=f"{METHOD_LABELS.get(method, method)} (mean {np.nanmean(acc):.4f})", xbins=bins,
            marker=dict(color="rgba(0,0,0,0)" if outline else color, line=dict(color=color, width=2 if outline else 0),
                        pattern=dict(shape=patterns.get(method, ""))),
            opacity=1.0 if outline else 0.6,
        ))
    fig.add_vline(x=target, line=dict(color="black", width=2), annotation_text="target",
                  annotation_position="bottom right")
    fig.add_vrect(x0=xmin, x1=lo, fillcolor="rgba(213,94,0,0.08)", line_width=0, layer="below")
    fig.add_vrect(x0=hi, x1=xmax, fillcolor="rgba(213,94,0,0.08)", line_width=0, layer="below")
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text="test accuracy (hierarchical)", range=[xmin, xmax])
    fig.update_yaxes(title_text="repetitions")
    return layout(fig, title)


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


# ---------------------------------------------------------------------------- guarantees shoot-out
# kind of guarantee → colour (Okabe–Ito); each method also has its own marker, and its label is
# written on the figure, so nothing rests on colour alone.
GUARANTEE_KIND_COLORS = {"pac": style.OKABE_ITO["blue"], "marginal": style.OKABE_ITO["orange"],
                         "marginal per group": style.OKABE_ITO["reddish_purple"],
                         "heuristic": style.OKABE_ITO["black"]}
_METHOD_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "triangle-down", "star", "hexagon", "cross",
                   "x", "pentagon", "hourglass", "bowtie"]


def violation_figure(summary: pd.DataFrame, delta: float, title: str | None = None) -> go.Figure:
    """Violation rate of every method (bars, ± 1.96 binomial standard errors) against the δ line.

    ``summary``: ``evaluation.guarantees.summarize`` rows. Only PAC methods promise a rate ≤ δ;
    marginal ones are drawn hatched, since their promise is about the mean accuracy.
    """
    fig = go.Figure()
    s = summary.iloc[::-1]
    labels = [f"{style.plain(x)} · {k} · {v:.0%}" for x, k, v in zip(s["label"], s["kind"], s["violation_rate"],
                                                                     strict=True)]
    colors = [GUARANTEE_KIND_COLORS.get(k, NEUTRAL_COLOR) for k in s["kind"]]
    fig.add_trace(go.Bar(
        x=s["violation_rate"].astype(float).tolist(), y=labels, orientation="h", marker=dict(
            color=colors, pattern=dict(shape=["" if k == "pac" else "/" for k in s["kind"]])),
        error_x=dict(type="data", array=(1.96 * s["violation_se"].to_numpy(float)).tolist(), color="#333"),
        showlegend=False,
        hovertemplate="%{y}: %{x:.1%} of the calibration sets fell below the target<extra></extra>"))
    fig.add_vline(x=delta, line=dict(color=BAD_COLOR, width=3, dash="dash"),
                  annotation_text=f"δ = {delta:.3g}", annotation_position="top")
    top = float(max(0.6, (s["violation_rate"] + 2 * s["violation_se"]).max() + 0.15))
    fig.update_xaxes(title_text="sets below target",
                     range=[0, min(1.05, top)], tickformat=".0%")
    fig.update_yaxes(automargin=True)
    return layout(fig, title, height=max(320, 44 * len(s) + 120))


def accuracy_coverage_figure(summary: pd.DataFrame, target: float, title: str | None = None) -> go.Figure:
    """Mean accuracy against mean coverage per method, bars ± one standard deviation over the
    repetitions, the target as a horizontal line: up and to the right is better."""
    fig = go.Figure()
    for k, (_, r) in enumerate(summary.iterrows()):
        fig.add_trace(go.Scatter(
            x=[r["coverage_mean"]], y=[r["accuracy_mean"]], mode="markers", name=style.plain(r["label"]),
            marker=dict(size=13, color=GUARANTEE_KIND_COLORS.get(r["kind"], NEUTRAL_COLOR),
                        symbol=_METHOD_SYMBOLS[k % len(_METHOD_SYMBOLS)], line=dict(color="white", width=1)),
            error_x=dict(type="data", array=[r["coverage_std"]], thickness=1),
            error_y=dict(type="data", array=[r["accuracy_std"]], thickness=1),
            hovertemplate=f"{style.plain(r['label'])}<br>accuracy %{{y:.4f}}, coverage %{{x:.4f}}<extra></extra>"))
    fig.add_hline(y=target, line=dict(color="black", width=2, dash="dash"), annotation_text=f"target {target:.3g}",
                  annotation_position="bottom right")
    fig.update_xaxes(title_text="mean coverage of the predicted nodes (higher = more specific)")
    fig.update_yaxes(title_text="mean accuracy")
    fig = layout(fig, title, height=560)
    fig.update_layout(legend=dict(orientation="v", yanchor="top", y=-0.18, xanchor="left", x=0.0))
    return fig
