"""Item 3 of issue 29, an A/B experiment: the two large charts (Explorer tree, Risk–Coverage) drawn
with plotly.js's basic bundle through a Streamlit custom component instead of ``st.plotly_chart``.
On only with ``HSC_PLOTLY_COMPONENT=1`` (``hsc_core.config.plotly_component``; bench/browser_latency.py --ab):
it gained in an interleaved A/B (docs/guide/snapshots.md), but the browser tests still look for these two
charts in the page, not in the component's iframe.

The component (``static/plotly_component``: ``index.html``, ``main.js`` and the bundle) speaks Streamlit's
component protocol by hand (componentReady, render, setFrameHeight); ``static/theta_sweep.js`` finds the
chart inside its iframe (same origin) and drives it with the iframe's own Plotly."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

COMPONENT_DIR = Path(__file__).resolve().parent / "static" / "plotly_component"
#: The charts the component may draw (their widget keys).
CHARTS = frozenset({"explorer_tree", "rc_chart"})


def enabled(key: str | None) -> bool:
    """Whether chart ``key`` is drawn by the component (the experiment's switch is on)."""
    from hsc_core.config import plotly_component

    return key in CHARTS and plotly_component()


@functools.cache
def _component() -> Any:
    from streamlit.components.v1 import declare_component

    return declare_component("hsc_plotly", path=str(COMPONENT_DIR))


def chart(fig: Any, key: str, config: dict) -> None:
    """Draw ``fig`` (its frames included) in the component."""
    _component()(spec=fig.to_json(), config=config, key=key, default=None)
