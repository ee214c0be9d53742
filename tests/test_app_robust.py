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


def test_a_link_carries_at_most_12_rules_and_says_so_in_one_line():
    # the 13th entry (Max-Coverage) is past the cap: dropped, and one line says why
    listed = "selective,climbing" + ",selective" * 10 + ",max_coverage" + ",jumping" * 30
    at = open_page("app_pages/risk_coverage.py", {"rules": listed})
    assert at.session_state["rules"] == ["selective", "climbing"]
    notes = [i.value for i in at.info if "rules=" in i.value]
    assert notes == ["The link's rules= named 43 entries; only the first 12 are used (a link carries at most 12)."]
    assert not at.error and not at.warning, [w.value for w in (*at.error, *at.warning)]
    at = open_page("app_pages/risk_coverage.py", {"rules": "selective,jumping"})  # under the cap: no note
    assert at.session_state["rules"] == ["selective", "jumping"]
    assert not [i.value for i in at.info if "rules=" in i.value]


def test_a_long_atlas_name_in_a_link_is_refused_before_any_file_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))
    (tmp_path / ("a" * 124 + ".csv")).write_text("x,y\n1,2\n")  # 128 characters: still a name a link may give
    at = open_page(ATLAS_PAGE, {"atlas": "a" * 296 + ".csv"})
    warned = [w.value for w in at.warning if "Ignored invalid link parameters" in w.value]
    assert len(warned) == 1 and "must be a file name of 1 to 128 printable characters" in warned[0]
    assert at.session_state["atlas"] == "a" * 124 + ".csv"  # the folder's own table, not the link's
    assert len(at.error) == 1 and "is not a results table" in at.error[0].value
    at = open_page(ATLAS_PAGE, {"atlas": "a" * 124 + ".csv"})
    assert not [w.value for w in at.warning if "Ignored invalid link parameters" in w.value]


def test_capped_list_cuts_a_links_list_and_says_so():
    from dashboard import state

    assert state.capped_list("rules", "a,b,c", 2) == (
        "a,b", "The link's rules= named 3 entries; only the first 2 are used (a link carries at most 2).")
    assert state.capped_list("rules", "a,b", 2) == ("a,b", "")
    assert state.capped_list("rules", "", 2) == ("", "")
    assert state.capped_list("theta", "0.5", None) == ("0.5", "")
    assert state.SETTINGS["rules"].max_items == state.MAX_LINK_RULES == 12
    assert state.SETTINGS["atlas"].parse("x" * 124 + ".csv") == "x" * 124 + ".csv"
    with pytest.raises(state.Invalid, match="a file name of 1 to 128"):
        state.SETTINGS["atlas"].parse("x" * 125 + ".csv")
