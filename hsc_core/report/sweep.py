"""Risk–coverage curves whose operating points sweep θ in the browser.

The RC curves are static; each rule's operating point (coverage, risk) at θ is precomputed for
every θ of a grid (``RCCurve.at``, exact) and stored as one Plotly frame per θ, driven by Plotly's
own slider and play button (``tree_figure.add_theta_sweep``). Moving θ there needs no server.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from hsc_core.core.curves import RCCurve
from hsc_core.core.rule_registry import rule_label

from . import style
from .tree_figure import THETA_GRID, add_theta_sweep

LOSS_LABELS = {"01": "hierarchical risk (0/1)", "severity": "hierarchical risk (LCA severity)"}


def operating_point_grid(curve: RCCurve, grid: np.ndarray = THETA_GRID) -> np.ndarray:
    """(len(grid), 2) array of (coverage, risk) of ``curve`` at each θ of ``grid``."""
    return np.array([curve.at(float(th)) for th in grid], dtype=float).reshape(len(grid), 2)


def _point(rule: str, th: float, cov: float, risk: float) -> dict:
    label = rule_label(rule)
    risk = 0.0 if abs(risk) < 5e-13 else risk  # running sums leave −1e-13 at θ = 1
    cov = 0.0 if abs(cov) < 5e-13 else cov
    return dict(x=[cov], y=[risk],
                hovertemplate=f"{label} at θ = {th:.2f}<br>coverage {cov:.4f}<br>risk {risk:.4f}<extra></extra>")


def rc_sweep_figure(curves: dict[str, tuple[np.ndarray, np.ndarray]], points: dict[str, np.ndarray],
                    haurc: dict[str, float], theta: float, *, grid: np.ndarray = THETA_GRID, loss: str = "01",
                    font_size: int = style.BASE_FONT_SIZE, animate: bool = True,
                    title: str | None = None, height: int | None = None) -> go.Figure:
    """RC curves (``curves``: rule → (coverage, risk) to draw) in each rule's colour and dash,
    and each rule's operating point at θ (``points``: rule → ``operating_point_grid``) as a
    marker of the rule's shape; with ``animate``, one frame per θ of ``grid``. ``height``: the whole
    figure's height in pixels, sweep controls included (default: grows with the font)."""
    rules = [r for r in curves if r in points]
    k0 = int(np.argmin(np.abs(np.asarray(grid) - theta)))
    traces = []
    for rule in rules:
        cov, risk = curves[rule]
        colour, dash, _ = style.RULE_STYLE[rule]
        traces.append(go.Scatter(
            x=cov, y=risk, mode="lines", line=dict(color=colour, width=3, dash=dash), legendgroup=rule,
            name=f"{rule_label(rule)} (hAURC×1000 = {1000 * haurc[rule]:.2f})",
            hovertemplate="coverage %{x:.4f}<br>risk %{y:.4f}<extra>" + rule_label(rule) + "</extra>",
        ))
    for k, rule in enumerate(rules):
        colour, _, symbol = style.RULE_STYLE[rule]
        cov, risk = points[rule][k0]
        # Later rules draw smaller markers on top, so rules at the same point all stay visible.
        marker_px = int(round(font_size * (1.45 - 0.2 * k)))
        traces.append(go.Scatter(mode="markers", legendgroup=rule, showlegend=False,
                                 marker=dict(color=colour, size=marker_px, symbol=symbol,
                                             line=dict(color="white", width=1.5)),
                                 **_point(rule, float(grid[k0]), cov, risk)))


    fig = go.Figure(traces)
    small = max(11, int(round(font_size * 0.8)))
    fig.update_xaxes(title_text="hierarchical coverage", range=[-0.02, 1.02], title_font=dict(size=font_size),
                     tickfont=dict(size=small))
    fig.update_yaxes(title_text=LOSS_LABELS.get(loss, "risk"), rangemode="tozero", title_font=dict(size=font_size),
                     tickfont=dict(size=small))
    fig.update_layout(title=dict(text=title, font=dict(size=font_size), x=0.01, xanchor="left") if title else None,
                      # add_theta_sweep adds the controls' height back
                      height=int(330 + 6 * font_size) if height is None else int(
                          height - (30 + 2.2 * font_size if animate else 0)),
                      margin=dict(l=10, r=10, t=50 if title else 10, b=10),
                      template="plotly_white",
                      font=dict(size=font_size),
                      # upper left is empty on an RC curve (risk grows with coverage); the top holds the slider
                      legend=dict(orientation="v", yanchor="top", y=0.99, xanchor="left", x=0.01,
                                  bgcolor="rgba(255,255,255,0.85)", font=dict(size=small)))
    if animate:
        n = len(rules)
        frames = [go.Frame(name=f"{th:.2f}", traces=list(range(n, 2 * n)),
                           data=[_point(r, float(th), *points[r][k]) for r in rules])
                  for k, th in enumerate(grid)]
        add_theta_sweep(fig, grid, theta, font_size, frames)
    return fig
