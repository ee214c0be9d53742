"""The dashboard's view of the shared figures (``hsc_core.report.figures``), and the modebar
config that downloads them as PNG or SVG.

The figure builders live in ``hsc_core.report.figures`` so that ``hsc report`` draws exactly what
the pages draw (pages import them from there); this module adapts the cached ``CurveSet``s.
The modebar's camera button renders the image in the browser, so downloads need no kaleido.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from hsc_core.core.rules import RULES
from hsc_core.report import figures
from hsc_core.report.export import safe_filename

from .evaluations import CurveSet


def plot_config(filename: str, fmt: str = "png") -> dict:
    """st.plotly_chart config: the camera button saves ``filename.png`` / ``.svg``."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt if fmt in ("png", "svg") else "png",
                                 "filename": safe_filename(filename), "scale": 2},
    }


def rc_figure(cs: CurveSet, points: pd.DataFrame | None = None, rules=RULES, loss: str = "01",
              title: str | None = None) -> go.Figure:
    """RC curves of ``rules`` from a cached ``CurveSet``, each rule's operating point (``points``
    from ``views.operating_points``) as a marker."""
    return figures.rc_figure(cs.display, {r: c.haurc for r, c in cs.curves.items()}, points, rules, loss, title)


def compare_figure(sets: dict[str, CurveSet], rule: str, loss: str = "01", title: str | None = None) -> go.Figure:
    """``rule``'s RC curve of every model."""
    return figures.compare_figure({m: cs.display[rule] for m, cs in sets.items()},
                                  {m: cs.curves[rule].haurc for m, cs in sets.items()}, loss, title)
