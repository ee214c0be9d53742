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
    ``.spec`` (the figure's JSON): st.plotly_chart's and those the basic-bundle component draws
    (dashboard/plotly_component.py, unless HSC_PLOTLY_COMPONENT=0: the Explorer tree, Risk–Coverage, the Overview);
    app.py's invisible plotly.js warm-up chart left out."""
    found: list[SimpleNamespace] = []

    def walk(node) -> None:
        children = getattr(node, "children", None)
        for child in (children.values() if isinstance(children, dict) else []):
            kind, proto = getattr(child, "type", None), getattr(child, "proto", None)
            if kind == "plotly_chart" and "hsc_plotly_warm" not in proto.id:
                found.append(SimpleNamespace(id=proto.id, spec=proto.spec))
            elif kind == "component_instance" and proto.component_name.endswith("hsc_plotly"):
                found.append(SimpleNamespace(id=proto.id, spec=json.loads(proto.json_args)["spec"]))
            walk(child)

    walk(at._tree)
    return found
