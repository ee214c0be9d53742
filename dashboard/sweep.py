"""The θ-swept view of a teaching chart: one component (``plotly_component``) that owns θ in the browser
(its ▶ Play / ❚❚, θ slider, keys, θ-dependent text and share link), and the server's side of it.

State flows one way. The server gives the component the figure (one frame per θ of the 0.01 grid), the
text at every θ and the view's snapshot link, and the θ to start at; the component sends θ back only
when a sweep comes to rest (``on_theta`` then runs, as a widget callback). The server gives a θ again
only when something else moved it (a link, a button): it then raises ``rev``, which the component takes
when no sweep of its own is going. Nothing the server sends later moves a sweep in progress.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import streamlit as st

from hsc_core.report.export import ExportContext, export_name
from hsc_core.report.tree_figure import THETA_GRID

from . import plotly_component, state
from . import session_keys as keys
from .plots import plot_config
from .presenter import font_size
from .snapshot import markdown_html

#: The θ names of the frames, as the component shows and sends them.
THETA_NAMES = tuple(f"{t:.2f}" for t in THETA_GRID)

_SPECS: dict[int, tuple[weakref.ref, str]] = {}


def _spec(fig) -> str:
    """``fig.to_json()``, once per (cached, never changed) figure object: a swept figure holds 101 frames."""
    hit = _SPECS.get(id(fig))
    if hit is not None and hit[0]() is fig:
        return hit[1]
    spec, key = fig.to_json(), id(fig)
    _SPECS[key] = (weakref.ref(fig, lambda _r: _SPECS.pop(key, None)), spec)
    return spec


def theta_texts(markdown_at: Callable[[float], str]) -> dict[str, str]:
    """The θ-dependent text of a view at every θ of the grid (markdown, as the pages write it), as the
    component shows it: escaped HTML (``snapshot.markdown_html``)."""
    from .snapshot_views import theta_markdown

    return {name: markdown_html(text) for name, text in theta_markdown(markdown_at).items()}


def share_url(page: str | None, param: str = "theta") -> str | None:
    """The view's one share link: its snapshot (``s/<key>``, the view without its swept ``param``, which the
    component adds as ``?theta=``) as an absolute address; None for a page without snapshots or an upload."""
    if page is None:
        return None
    from urllib.parse import urljoin

    from . import snapshot_views

    if snapshot_views.shows_upload(page, st.session_state):
        return None
    params = {k: v for k, v in snapshot_views.current_params().items() if k != param}
    link = snapshot_views.share_link(page, params)
    if link is None:
        return None
    try:
        here = str(st.context.url or "")
    except Exception:  # no browser address (a script run without one)
        here = ""
    return urljoin(here, link) if here else None


def theta_chart(fig, *, key: str, theta: float, on_theta: Callable[[float], None], name: str,
                context: ExportContext | None = None, title: str | None = None,
                texts: Mapping[str, str] | None = None,
                text_side: Literal["below", "above", "right", "left"] = "below", text_ratio: str | None = None,
                share_page: str | None = None, delay_ms: int = 400) -> None:
    """Draw the swept figure ``fig`` (frames named ``"0.00"`` … ``"1.00"``, ``tree_figure.add_theta_sweep``)
    as one θ-owning view, starting at the server's ``theta``; ``on_theta(θ)`` runs when a sweep in the
    browser comes to rest at θ. ``texts``: the θ-dependent text (``theta_texts``) shown ``text_side`` of
    the chart (``text_ratio``: its share of the width beside the chart, e.g. ``"28%"``); ``share_page``: the
    page whose snapshot link the view offers; ``name``/``context``/``title``: the camera button's file
    name and the exported image's title."""
    swept_chart(fig, key=key, names=THETA_NAMES, value=f"{min(max(float(theta), 0.0), 1.0):.2f}",
                on_rest=lambda v: on_theta(float(v)), name=name, context=context, title=title, texts=texts,
                text_side=text_side, text_ratio=text_ratio, share_page=share_page, delay_ms=delay_ms)


def swept_chart(fig, *, key: str, names: Sequence[str], value: str, on_rest: Callable[[str], None], name: str,
                label: str = "θ", param: str = "theta", context: ExportContext | None = None,
                title: str | None = None, texts: Mapping[str, str] | None = None,
                text_side: Literal["below", "above", "right", "left"] = "below", text_ratio: str | None = None,
                share_page: str | None = None, delay_ms: int = 400, frame_ms: int = 30) -> None:
    """``theta_chart`` for any swept value: ``fig``'s frames are named ``names`` (in sweep order), the view
    starts at ``value`` and ``on_rest(name)`` runs where a sweep comes to rest; ``label`` names the value on
    screen (``"θ"``, ``"t"``) and ``param`` in the share link (``?theta=``)."""
    record = st.session_state.setdefault(keys.sweep(key), {"rev": 0, "theta": None, "ack": None})
    if record["theta"] != value:  # moved by something other than this view's own rest: the view takes it
        record["rev"] += 1
        record["theta"] = value
    allowed = frozenset(names)

    def rested() -> None:
        got = st.session_state.get(key)
        if not isinstance(got, dict) or got.get("theta") not in allowed:
            return  # not a rest this view sent
        record["theta"] = got["theta"]
        record["ack"] = got.get("seq")
        on_rest(str(got["theta"]))

    from hsc_core.report import style

    head = "" if title is None else style.plain(title, None) + (
        f"<br><span style='font-size:12px'>{style.plain(context.describe(style.NAME_CHARS), None)}</span>"
        if context is not None else "")
    fmt = state.get("fmt")
    sweep = {
        "names": list(names), "theta": value, "rev": record["rev"], "ack": record["ack"], "label": label,
        "param": param, "aria": f"{label} (arrow keys one step, Page Up/Down ten, Home/End)",
        "delay": int(delay_ms), "frame_ms": int(frame_ms),
        "controls": int(round(30 + 2.2 * font_size())),  # Plotly's slider and Play in the figure (not drawn here)
        "texts": dict(texts) if texts is not None else None, "text_side": text_side, "text_ratio": text_ratio,
        "share": share_url(share_page, param),
        "image": {"format": fmt if fmt in ("png", "svg") else "png", "filename": export_name(name, context),
                  "title": head},
    }
    plotly_component.chart(_spec(fig), key, plot_config(export_name(name, context), fmt), sweep=sweep,
                           on_change=rested)
