"""AppTest of "Per-rank thresholds": the shipped example by default with the target and δ from the
link, the card equal to the library's (recomputed with ``hsc_core`` directly), an upload whose name is
shown as plain text, and a bad upload shown as one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from app_support import assert_component_draws_basic_traces, open_page
from per_rank_support import synthetic_per_rank_frame

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.datasets.per_rank import EXAMPLE, per_rank_from_frame, read_per_rank  # noqa: E402
from hsc_core.evaluation.per_rank import fit_rank_thresholds  # noqa: E402

PAGE = "app_pages/per_rank.py"


def test_example_card_by_deep_link(downloads):
    at = open_page(PAGE, {"r_acc": "0.92", "r_delta": "0.05"})
    assert not at.error, [e.value for e in at.error]
    assert [t.value for t in at.title] == ["Per-rank thresholds"]
    assert at.slider(key="_w.pr.r_acc").value == pytest.approx(0.92)
    assert at.slider(key="_w.pr.r_delta").value == pytest.approx(0.05)
    example = read_per_rank(EXAMPLE)
    ctl = fit_rank_thresholds(example, 0.92, 0.05)
    card = json.loads(downloads["dl_rank_json"])
    assert card["source"] == EXAMPLE.name and card["thetas"] == ctl.thetas_dict()
    assert card["realised_accuracy"] == ctl.evaluate(example)["accuracy"]
    shown = {row["rank"]: row["θ"] for row in at.dataframe[0].value.to_dict("records")}
    assert shown == {r: "never" if t is None else f"{t:.4f}" for r, t in card["thetas"].items()}
    assert "| class |" in downloads["dl_rank_md"]
    methods = at.dataframe[1].value["method"].tolist()
    assert methods[:2] == ["LTT per rank", "LTT shared θ"] and len(methods) == 5
    assert card["comparison"][0]["reps"] == 1000 and "on the test half (noisier)" in at.dataframe[1].value.columns
    assert_component_draws_basic_traces(at, "per_rank")


def test_upload_and_bad_upload(downloads):
    at = open_page(PAGE)
    frame = synthetic_per_rank_frame(600, seed=5)
    at.file_uploader(key="_per_rank_upload").upload("mine*b*.csv", frame.to_csv(index=False).encode(),
                                                    "text/csv").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("*mine\\*b\\*.csv*" in m.value for m in at.markdown)  # the name as plain text
    want = fit_rank_thresholds(per_rank_from_frame(frame.astype(str)), 0.9, 0.1).thetas_dict()
    assert json.loads(downloads["dl_rank_json"])["thetas"] == want
    frame.loc[3, "conf_genus"] = 1.5
    at.file_uploader(key="_per_rank_upload").upload("bad.csv", frame.to_csv(index=False).encode(), "text/csv").run()
    assert [e.value for e in at.error] == ["bad.csv: row 4: conf_genus = 1.5 is outside \\[0, 1\\]; for percentages "
                                           "0–100 say so (percent=True, --percent)"]


def test_answers_quantity_by_deep_link(downloads):
    """``r_quantity=answers``: the radio shows it, the card guarantees the accuracy of the answers given
    (the library's fit for that quantity), and the page's sentences say so."""
    at = open_page(PAGE, {"r_acc": "0.9", "r_delta": "0.1", "r_quantity": "answers"})
    assert not at.error, [e.value for e in at.error]
    assert at.radio(key="_w.pr.r_quantity").value == "answers"
    card = json.loads(downloads["dl_rank_json"])
    example = read_per_rank(EXAMPLE)
    assert card["quantity"] == "answers"
    assert card["thetas"] == fit_rank_thresholds(example, 0.9, 0.1, quantity="answers").thetas_dict()
    assert all(row["quantity"] == "answers" for row in card["comparison"])
    assert any("of the answers given on new data are correct" in m.value for m in at.info)
    assert any("of the answers given on new data are correct" in m.value for m in at.success)
    at.radio(key="_w.pr.r_quantity").set_value("hierarchical").run()
    assert json.loads(downloads["dl_rank_json"])["quantity"] == "hierarchical"
    assert any("hierarchical accuracy ≥ 90.0%" in m.value for m in at.info)
