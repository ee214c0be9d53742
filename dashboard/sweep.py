"""The θ sweep of a teaching chart: the browser-side listener (``static/theta_sweep.js``) that keeps
a Plotly chart's θ animation and the page's θ slider in step, and the page's θ containers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import streamlit as st

from hsc_core.report.export import ExportContext, export_name

from . import session_keys as keys
from . import state
from .assets import static_text
from .presenter import font_size

# Plotly's own slider and play button move θ in the browser; the listener (static/theta_sweep.js) sends the θ where the
# sweep comes to rest (no new frame for ``delay`` ms) to the server, so the Streamlit slider
# follows on release. While the chart is ahead of the server, the page's θ slider and θ text
# (containers keyed ``<chart>_slider`` / ``<chart>_follow``) are hidden, so only one θ is ever on
# screen. Dragging the page's slider moves the chart with the thumb (its θ text hides until the
# release reaches the server). It also makes the chart focusable: ←/→ (±0.01), Page Up/Down
# (±0.1), Home/End animate to that frame (Plotly's slider moves with it). The camera button
# exports the figure without the sweep controls, with a title. A θ sent that an idle server has not
# answered for 9 s reloads the page at that θ (with ``link``: the tab had stopped sending its changes).
_sweep_component = None


def sweep_sync(chart_key: str, theta: float, on_theta: Callable[[float], None], delay_ms: int = 600,
               *, image: str = "figure", title: str | None = None, context: ExportContext | None = None,
               link: str | None = None) -> None:
    """Mount the θ-sweep listener for the Plotly chart rendered with ``key=chart_key``: the chart
    shows the server's ``theta`` (its frame), and ``on_theta(θ)`` runs (as a callback) when an
    in-browser sweep comes to rest at θ. Put the page's θ slider in ``st.container(key=f"{chart_key}_slider")``
    and its θ-dependent text in ``…_follow`` (``theta_box``): they hide while the chart is ahead.
    ``image``/``title``/``context``: the camera button's file name and the exported image's title.
    ``link``: the URL parameter that mirrors θ (``"theta"``), so a link left behind by a lost rerun is
    written again."""
    global _sweep_component
    if _sweep_component is None:
        _sweep_component = st.components.v2.component("hsc_theta_sweep", js=static_text("theta_sweep.js"))
    key = keys.sweep(chart_key)

    def follow() -> None:
        value = getattr(st.session_state.get(key), "theta", None)
        if value is not None:
            on_theta(float(value))

    from hsc_core.report import style

    head = "" if title is None else style.plain(title, None) + (
        f"<br><span style='font-size:12px'>{style.plain(context.describe(style.NAME_CHARS), None)}</span>"
        if context is not None else "")
    fmt = state.get("fmt")
    controls = int(round(30 + 2.2 * font_size()))  # the sweep controls' height (tree_figure.add_theta_sweep)
    _sweep_component(key=key, data={"chart": chart_key, "delay": int(delay_ms), "theta": f"{theta:.2f}",
                                    "controls": controls, "link": link,
                                    "image": {"format": fmt if fmt in ("png", "svg") else "png",
                                              "filename": export_name(image, context), "title": head}},
                     on_theta_change=follow,
                     height=0)


def theta_box(chart_key: str, part: Literal["slider", "follow"]):
    """The container of a swept chart's page θ slider (``"slider"``) or θ-dependent text
    (``"follow"``): ``sweep_sync`` hides it while the chart shows a θ the server has not caught up with."""
    return st.container(key=f"{chart_key}_{part}")
