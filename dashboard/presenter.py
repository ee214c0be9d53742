"""Presenter mode: a 1280×720 layout scaled to the screen (type, padding, figure sizes from the
browser's reported viewport), and the page CSS every run injects (``presenter_style``)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from . import session_keys as keys
from . import state
from .assets import static_text

# The page's CSS (dashboard/static/): presenter mode's type and padding; the chart component's frame as a
# block (every mode); and presenter mode's chart hiding until the browser has reported its size
# (``unsized.css``: shown after 4 s anyway) or, in the run a resize starts, while the old-size charts are
# still on screen (``resized.css``).
PRESENTER_CSS = static_text("presenter.css")
CHART_FRAME_CSS = static_text("chart_frame.css")
UNSIZED_CSS = static_text("unsized.css")
RESIZED_CSS = static_text("resized.css")


def presenter() -> bool:
    return bool(state.get("presenter"))


# Presenter mode is laid out for a 1280×720 screen and scaled up to the real one: the page's type
# through CSS (1 rem = 1.5 % of the width or 2.67 % of the height, whichever is smaller: 19.2 px at
# 1280×720, 28.8 px at 1920×1080), the figures through ``presenter_scale`` (the same ratio, from the
# browser's viewport as reported by ``viewport_probe``), so text and charts grow together.
DESIGN_VIEWPORT = (1280, 720)
VIEWPORT_KEY = keys.VIEWPORT
DESIGN_REM_PX = 19.2


def viewport() -> tuple[int, int]:
    """The browser window's (width, height) in CSS pixels, as last reported by ``viewport_probe``;
    the design size until the browser has reported one."""
    size = getattr(st.session_state.get(VIEWPORT_KEY), "size", None)
    try:
        w, h = (int(v) for v in str(size).split("x"))
    except ValueError:
        return DESIGN_VIEWPORT
    return (w, h) if 200 <= w <= 10_000 and 200 <= h <= 10_000 else DESIGN_VIEWPORT


def presenter_scale() -> float:
    """How much bigger than the 1280×720 design the screen is (1 to 2.5, in steps of 1/8, so a
    window resized by a few pixels does not rebuild the figures)."""
    w, h = viewport()
    raw = min(w / DESIGN_VIEWPORT[0], h / DESIGN_VIEWPORT[1])
    return float(min(max(1.0, np.floor(raw * 8) / 8), 2.5))


def font_size() -> int:
    """Figure font size: projector-sized in presenter mode, growing with the screen."""
    from hsc_core.report import style

    return int(round(style.PRESENTER_FONT_SIZE * presenter_scale())) if presenter() else style.BASE_FONT_SIZE


def fit_height(reserved_rem: float, *, normal: int | None = None, least: int = 260) -> int | None:
    """A chart height (px) that leaves ``reserved_rem`` rem of the screen for the page's title,
    controls and text in presenter mode, so the chart's axis title stays above the fold; ``normal``
    outside presenter mode (None: the figure's own height)."""
    if not presenter():
        return normal
    _, h = viewport()
    rem = DESIGN_REM_PX * presenter_scale()
    return int(max(least * presenter_scale(), h - reserved_rem * rem))


NORMAL_MAIN_PX = 750  # the main column at 1280 px with the sidebar open (normal mode reports no viewport)


def fit_width(fraction: float = 1.0) -> int:
    """The pixels a chart in a column holding ``fraction`` of the page's main area can use: in
    presenter mode from the browser's width, otherwise the 1280-pixel layout with the sidebar open."""
    if not presenter():
        return int(NORMAL_MAIN_PX * fraction)
    w, _ = viewport()
    main = w - 4.4 * DESIGN_REM_PX * presenter_scale()  # the presenter CSS's side padding
    return int(main * fraction)



VIEWPORT_FRESH = keys.VIEWPORT_FRESH


def viewport_known() -> bool:
    """Has the browser reported its window size (``viewport_probe``) in this session?"""
    return getattr(st.session_state.get(VIEWPORT_KEY), "size", None) is not None


def presenter_style() -> None:
    """Bigger type and less padding, so a slider and its chart share a 1280×720 screen; the type
    grows with the screen. Also the chart component's frame style (every mode)."""
    resized = st.session_state.pop(VIEWPORT_FRESH, False)
    sizing = "" if not presenter() else UNSIZED_CSS if not viewport_known() else RESIZED_CSS if resized else ""
    if presenter() and viewport_known():  # the size this run laid the page out for (browser tests wait for it)
        sizing += ":root {{ --hsc-laid-out: '{}x{}'; }}".format(*viewport())
    st.html(f"<style>{CHART_FRAME_CSS}{PRESENTER_CSS if presenter() else ''}{sizing}</style>")
    if presenter():
        viewport_probe()


_viewport_component = None


def viewport_probe() -> None:
    """Report the browser window's size to the server (``viewport``): once when presenter mode
    starts (the page reruns; its charts are hidden until then, ``UNSIZED_CSS``), then on resize.
    A changed size reruns the page at the new scale."""
    global _viewport_component
    if _viewport_component is None:
        _viewport_component = st.components.v2.component("hsc_viewport", js=static_text("viewport.js"))
    # Nothing known yet: the browser reports at once (also a 1280×720 one), which shows the charts.
    known = getattr(st.session_state.get(VIEWPORT_KEY), "size", None) or ""
    _viewport_component(key=VIEWPORT_KEY, data={"known": known}, on_size_change=_size_reported, height=0)


def _size_reported() -> None:
    st.session_state[VIEWPORT_FRESH] = True
    state.resend_in_next_run()  # this run follows the first at once: its widgets get their values again


def switch() -> None:
    """The button at the top right of every page (in both modes) that turns presenter
    mode on or off. A button, not a toggle: it holds no value in the browser that could be sent back
    stale (the sidebar toggle it replaces was seen to report "off" with an unrelated click, Guaranteed
    accuracy's Run button, and the page left presenter mode mid-run)."""
    on = presenter()
    with st.container(key=keys.PRESENTER_SWITCH):
        st.button("Leave presenter mode" if on else "Presenter mode", key=f"{keys.PRESENTER_SWITCH}_button",
                  icon=":material/close_fullscreen:" if on else ":material/present_to_all:", on_click=_flip,
                  help="Bigger type for a projector, page controls folded away; the link keeps it (presenter=1).")


def _flip() -> None:
    state.set("presenter", not presenter())


def controls(label: str = "Controls"):
    """Where a page's pickers go: inline normally, folded into an expander in presenter mode."""
    return st.expander(label, expanded=False) if presenter() else st.container()


def folded(label: str, **kwargs):
    """Where a page's secondary input goes (an upload): folded into an expander in normal mode; in presenter
    mode inline, inside ``controls``' fold (Streamlit's expanders do not nest)."""
    return st.container() if presenter() else st.expander(label, **kwargs)

