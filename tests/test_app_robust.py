"""Issue 33: the dashboard under hostile input — a results table with a duplicated column or an
infinite sample count is one ``st.error`` line on the Model atlas page, and a link cannot ask for
unbounded work (the number of rules and the length of ``?atlas=`` are capped, said in one line)."""

from __future__ import annotations

import pytest
from app_support import open_page
from test_atlas_hostile import _authors_with_two_architectures, _models_csv, own_rows  # noqa: F401

ATLAS_PAGE = "app_pages/model_atlas.py"


@pytest.mark.parametrize("kind", ["duplicate", "inf", "1e400"])
def test_the_atlas_page_shows_one_error_line(own_rows, kind, monkeypatch, tmp_path):  # noqa: F811 (fixture)
    text = _authors_with_two_architectures() if kind == "duplicate" else _models_csv(own_rows, kind)
    (tmp_path / "hostile.csv").write_text(text)
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))
    at = open_page(ATLAS_PAGE, {"atlas": "hostile.csv"})  # open_page: no exception (traceback) on the page
    assert len(at.error) == 1, [e.value for e in at.error]
    assert "\n" not in at.error[0].value
    assert ("more than once" if kind == "duplicate" else f"row 3 has '{kind}'") in at.error[0].value
