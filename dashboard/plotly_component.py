"""Item 3 of issue 29: the two large charts (Explorer tree, Risk–Coverage) and the Overview's two charts
drawn with plotly.js's basic bundle through a Streamlit custom component instead of ``st.plotly_chart``. A
live link drew faster this way in an interleaved A/B (docs/guide/snapshots.md; bench/browser_latency.py
--ab), and so does the cold start's first chart (the Overview's); on unless ``HSC_PLOTLY_COMPONENT=0``
(``hsc_core.config.plotly_component``), when ``st.plotly_chart`` draws them; presenter mode always does.
The component draws with Streamlit's chart theme, scaled with the page's type (presenter mode), in the
page's fonts (``main.js``, ``streamlit_theme.js``); browser tests find the chart wherever it is drawn
with ``tests/browser_support.find_chart``.

The component (``static/plotly_component``: ``index.html``, ``main.js`` and the bundle) speaks Streamlit's
component protocol by hand (componentReady, render, setFrameHeight); ``static/theta_sweep.js`` finds the
chart inside its iframe (same origin) and drives it with the iframe's own Plotly."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

COMPONENT_DIR = Path(__file__).resolve().parent / "static" / "plotly_component"
#: The charts the component may draw (their widget keys): the two large ones, and the Overview's two (the
#: first chart after ``streamlit run app.py``: a cold start draws it about 1 s sooner than with the full plotly.js).
CHARTS = frozenset({"explorer_tree", "rc_chart", "overview_illustration", "overview_gains"})
#: The pages (url paths; "" is the Overview at "/") whose charts it draws: a session landing there needs no
#: warm-up of Streamlit's full plotly.js (``widgets.warm_plotly``); any other page still gets one.
PAGES = frozenset({"explorer", "risk_coverage", "", "overview"})


def enabled(key: str | None) -> bool:
    """Whether chart ``key`` is drawn by the component: the switch is on and the page is not in
    presenter mode (presenter mode's fit-the-screen sizing is measured with ``st.plotly_chart``'s
    chart; the component's gain is for shared links, which open in normal mode)."""
    from hsc_core.config import plotly_component

    from .presenter import presenter

    return key in CHARTS and plotly_component() and not presenter()


def presenter_in_url(url: str) -> bool:
    """Whether the address ``url`` names presenter mode (``presenter=1``; an invalid value is not)."""
    from urllib.parse import parse_qs, urlparse

    from .state import SETTINGS, Invalid

    try:
        return bool(SETTINGS["presenter"].parse(parse_qs(urlparse(url).query).get("presenter", ["0"])[-1]))
    except Invalid:
        return False


def draws_landing_page(url: str) -> bool:
    """Whether the page at ``url`` (the browser's address) has its large chart drawn by the component."""
    from urllib.parse import urlparse

    from hsc_core.config import plotly_component

    if not url:  # no browser address (a script run without one)
        return False
    page = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1]
    # presenter mode draws with st.plotly_chart (``enabled``)
    return plotly_component() and page in PAGES and not presenter_in_url(url)


@functools.cache
def _component() -> Any:
    from streamlit.components.v1 import declare_component

    return declare_component("hsc_plotly", path=str(COMPONENT_DIR))


def chart(fig: Any, key: str, config: dict) -> None:
    """Draw ``fig`` (its frames included) in the component."""
    _component()(spec=fig.to_json(), config=config, key=key, default=None)
