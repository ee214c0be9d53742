"""Item 3 of issue 29, an A/B experiment: the two large charts (Explorer tree, Risk–Coverage) drawn
with plotly.js's basic bundle through a Streamlit custom component instead of ``st.plotly_chart``.
On only with ``HSC_PLOTLY_COMPONENT=1`` (bench/browser_latency.py --ab)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

COMPONENT_DIR = Path(__file__).resolve().parent / "static" / "plotly_component"
#: The charts the component may draw (their widget keys).
CHARTS = frozenset({"explorer_tree", "rc_chart"})


def enabled(key: str | None) -> bool:
    """Whether chart ``key`` is drawn by the component (the experiment's switch is on)."""
    return key in CHARTS and os.environ.get("HSC_PLOTLY_COMPONENT") == "1"


@functools.cache
def _component() -> Any:
    from streamlit.components.v1 import declare_component

    return declare_component("hsc_plotly", path=str(COMPONENT_DIR))


def chart(fig: Any, key: str, config: dict) -> None:
    """Draw ``fig`` (its frames included) in the component."""
    _component()(spec=fig.to_json(), config=config, key=key, default=None)
