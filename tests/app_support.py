"""AppTest helpers shared by the dashboard page tests."""

from __future__ import annotations

import csv
import io
from pathlib import Path

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
