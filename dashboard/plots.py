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

from . import views
from .evaluations import CurveSet, ModelContext


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


def explorer_tree(es: ModelContext, i: int, font_size: int, max_height: int | None, max_width: int, theta: float,
                  rules: tuple = ()) -> go.Figure:
    """The Explorer's tree of sample row ``i`` with its 101 θ frames (≈ 0.1–0.3 s), opening at
    ``theta``; ``rules``: the marked rules (the paper's four when empty). The live page and its
    snapshot (``snapshot_views``) both draw this."""
    from hsc_core.report.tree_figure import record_rows, tree_figure

    paths = views.selected_paths(es.view, rules)
    return tree_figure(es.view.hierarchy, es.view.node_row(i), record_rows(paths, i), int(es.view.labels[i]), theta,
                       font_size=font_size, rules=list(paths), max_height=max_height, max_width=max_width)


def rc_sweep(cs: CurveSet, rules: tuple, loss: str, font_size: int, height: int | None, theta: float) -> go.Figure:
    """Risk–Coverage's figure: the curves of ``rules`` with one frame per θ of the 0.01 grid
    (operating points from the exact curves), opening at ``theta``. The live page and its snapshot
    (``snapshot_views``) both draw this."""
    from hsc_core.report.sweep import operating_point_grid, rc_sweep_figure

    points = {r: operating_point_grid(cs.exact[r]) for r in rules}
    return rc_sweep_figure({r: cs.display[r] for r in rules}, points, {r: cs.curves[r].haurc for r in rules},
                           theta, loss=loss, font_size=font_size, height=height)
