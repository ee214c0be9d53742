"""AppTest helpers shared by the dashboard page tests."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from types import SimpleNamespace

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TIMEOUT = 180


def open_page(page: str, query: dict | None = None) -> AppTest:
    """Run app.py (with ``query`` as the link's parameters), then switch to ``page``; no exception on either."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def download_rows(payload) -> list[dict]:
    """The rows of a CSV download captured by the ``downloads`` fixture (bytes or a callable)."""
    text = (payload() if callable(payload) else payload).decode("utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def plotly_figures(at: AppTest) -> list[SimpleNamespace]:
    """The run's Plotly figures in page order, each as ``.id`` (the element id, its key at the end) and
    ``.spec`` (the figure's JSON): st.plotly_chart's and those the chart component draws
    (dashboard/plotly_component.py: every θ-swept view and its ``CHARTS``), whose ``.sweep`` holds
    a swept view's data (θ, texts, share link; None for a static chart), ``.component`` whether the
    component draws it and ``.image`` what its camera button saves (format, file name); app.py's invisible
    plotly.js warm-up chart left out."""
    found: list[SimpleNamespace] = []

    def walk(node) -> None:
        children = getattr(node, "children", None)
        for child in (children.values() if isinstance(children, dict) else []):
            kind, proto = getattr(child, "type", None), getattr(child, "proto", None)
            if kind == "plotly_chart" and "hsc_plotly_warm" not in proto.id:
                found.append(SimpleNamespace(id=proto.id, spec=proto.spec, sweep=None, component=False,
                                             image=json.loads(proto.config or "{}").get("toImageButtonOptions")))
            elif kind == "component_instance" and proto.component_name.endswith("hsc_plotly"):
                args = json.loads(proto.json_args)
                found.append(SimpleNamespace(id=proto.id, spec=args["spec"], sweep=args.get("sweep"), component=True,
                                             image=(args.get("sweep") or {}).get("image") or args.get("image")))
            walk(child)

    walk(at._tree)
    return found


def view_texts(at: AppTest) -> str:
    """The θ-dependent text every θ-swept view of the run shows at its θ (the component's HTML, its
    ``<strong>`` as markdown's ``**``, other tags dropped), one view a line."""
    import html
    import re

    out = []
    for fig in plotly_figures(at):
        texts = (fig.sweep or {}).get("texts")
        if texts:
            shown = texts[fig.sweep["theta"]].replace("<strong>", "**").replace("</strong>", "**")
            out.append(html.unescape(re.sub(r"<[^>]+>", "", shown)))
    return "\n".join(out)


def swept_view(at: AppTest, key: str) -> SimpleNamespace:
    """The θ-swept view drawn with widget key ``key`` (``sweep.theta_chart``): ``.id``, ``.spec``, ``.sweep``."""
    found = [f for f in plotly_figures(at) if f.sweep is not None and f.id.endswith(f"-{key}")]
    assert len(found) == 1, [f.id for f in plotly_figures(at)]
    return found[0]


def view_theta(at: AppTest, key: str) -> float:
    """The θ the server gives the swept view ``key`` (where it starts, or where it last came to rest)."""
    return float(swept_view(at, key).sweep["theta"])


_SEQ = [0]


def rest_view(at: AppTest, key: str, theta: float) -> AppTest:
    """Run the app as the browser does when the swept view ``key`` comes to rest at ``theta``: its
    component value ``{"theta": "0.70", "seq": n}`` sent with the page's other widget values."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    view = swept_view(at, key)
    states = at._tree.get_widget_states()
    _SEQ[0] += 1
    state = WidgetState(id=view.id, json_value=json.dumps({"theta": f"{theta:.2f}", "seq": _SEQ[0]}))
    states.widgets.append(state)
    return at._run(states)


def assert_component_draws_basic_traces(at: AppTest, url_path: str) -> None:
    """What the chart component draws uses only plotly.js's basic bundle's trace types (scatter, bar, pie),
    and a link to the page (``url_path``) skips the full plotly.js warm-up exactly when its first chart is
    the component's."""
    from dashboard import plotly_component
    from dashboard.snapshot_assets import BASIC_TRACES

    figs = plotly_figures(at)
    for fig in figs:
        assert fig.image and fig.image["filename"] and fig.image["format"] in ("png", "svg"), fig.id  # a named download
        if fig.component:
            spec = json.loads(fig.spec)
            types = {t.get("type", "scatter") for t in spec["data"]}
            types |= {t.get("type", "scatter") for f in spec.get("frames") or () for t in f["data"]}
            assert types <= BASIC_TRACES, (fig.id, types)
    if figs:
        assert plotly_component.draws_landing_page(f"http://h/{url_path}") is figs[0].component, url_path
