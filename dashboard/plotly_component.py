"""The dashboard's chart component: every θ-swept chart (the Explorer tree, Risk–Coverage, the guided
story's charts, Try an image's tree) and the static charts of the Overview, Compare models, the Model atlas
and Per-rank thresholds are drawn by one Streamlit custom component with plotly.js's basic bundle, in normal
and presenter mode alike (a live link and the cold start draw sooner than with ``st.plotly_chart``'s full
plotly.js: ``bench/browser_latency.py --ab``).

The component (``static/plotly_component``: ``index.html``, ``view.css``, ``main.js``, the theme and the
bundle) speaks Streamlit's component protocol by hand (componentReady, render, setFrameHeight,
setComponentValue). It draws with Streamlit's chart theme, scaled with the page's type (``rem``, sent by
the server), in Streamlit's own web font (its files' addresses, sent by the server). A swept chart's θ is
owned by the component (``dashboard/sweep.py`` gives it the server's side)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

COMPONENT_DIR = Path(__file__).resolve().parent / "static" / "plotly_component"
#: The static charts the component draws (their widget keys): the Overview's two (the first chart after
#: ``streamlit run app.py``: a cold start draws it about 1 s sooner than with the full plotly.js), Compare
#: models', the Model atlas's and Per-rank thresholds' two each (scatter and bar: the basic bundle's; drawn
#: 1.2–1.5 s after the page settled, cold, by st.plotly_chart). Every θ-swept chart is drawn by it too
#: (``sweep.theta_chart``). A chart of other trace types (the sunburst of Where it stops) stays st.plotly_chart.
CHARTS = frozenset({"overview_illustration", "overview_gains", "compare_chart", "compare_gains", "atlas_chart",
                    "atlas_regimes", "rank_rc", "rank_stops"})
#: The pages (url paths; "" is the Overview at "/") whose first chart it draws: a session landing there
#: needs no warm-up of Streamlit's full plotly.js (``widgets.warm_plotly``); any other page still gets one.
PAGES = frozenset({"explorer", "risk_coverage", "", "overview", "try_an_image", "compare_models", "monitor",
                   "model_atlas", "per_rank"})


def draws_landing_page(url: str) -> bool:
    """Whether the page at ``url`` (the browser's address) has its first chart drawn by the component."""
    from urllib.parse import urlparse

    if not url:  # no browser address (a script run without one)
        return False
    return urlparse(url).path.rstrip("/").rsplit("/", 1)[-1] in PAGES


@functools.cache
def fonts() -> tuple[dict[str, Any], ...]:
    """Streamlit's own web font files (Source Sans), as addresses relative to the app's root, so the
    chart is set in the page's type."""
    import streamlit

    media = Path(streamlit.__file__).resolve().parent / "static" / "static" / "media"
    found = sorted(media.glob("SourceSansVF-*.woff2")) if media.is_dir() else []
    return tuple({"src": f"static/media/{p.name}", "italic": "Italic" in p.name} for p in found)


def root_px() -> float:
    """The page's root font size in CSS pixels (presenter mode's type grows with the screen)."""
    from .presenter import DESIGN_REM_PX, presenter, presenter_scale

    return round(DESIGN_REM_PX * presenter_scale(), 2) if presenter() else 16.0


@functools.cache
def _component() -> Any:
    from streamlit.components.v1 import declare_component

    return declare_component("hsc_plotly", path=str(COMPONENT_DIR))


def chart(spec: str, key: str, config: dict, *, image: dict | None = None, sweep: dict | None = None,
          on_change: Any = None) -> Any:
    """Draw the figure ``spec`` (``Figure.to_json()``, its frames included) with widget key ``key``.
    ``image``: the camera button's format, file name and title; ``sweep``: a θ-swept chart's data
    (``sweep.theta_chart``), whose rests reach the server through ``on_change``."""
    from .presenter import presenter, viewport_known

    # Presenter mode before the browser has reported its size: the figure is built for the 1280×720 design
    # and the page reruns at the screen's size at once; the component keeps such a draw hidden (15 s at most).
    provisional = presenter() and not viewport_known()
    return _component()(spec=spec, config=config, rem=root_px(), fonts=list(fonts()), image=image, sweep=sweep,
                        provisional=provisional, key=key, default=None, on_change=on_change)
