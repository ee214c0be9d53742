"""Figures of the accuracy guarantees: the repeated-split accuracy histogram (the paper's Figure 3)
and the shoot-out of every guarantee side by side (violation rate, accuracy against coverage).

Colours are Okabe–Ito (``style``); each method also has its own marker and its label on the
figure, so nothing rests on colour alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import style
from .figures import BAD_COLOR, NEUTRAL_COLOR, layout

METHOD_COLORS = {"hsc": style.OKABE_ITO["blue"], "darts": style.OKABE_ITO["vermillion"],
                 "crc": style.OKABE_ITO["reddish_purple"]}
METHOD_LABELS = {"hsc": "Ours (Algorithm 1)", "darts": "DARTS", "crc": "CRC"}


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
