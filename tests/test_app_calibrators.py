"""The Calibrators page (issue 31): the calibrator × confidence table of the current model or every
listed one, best marked, intervals on request, CSV download, a clear message for an empty choice,
every choice round-tripped through the link (invalid values fall back to the defaults), and the
member scores offered for an ensemble only."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import open_page

from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import save_logits
from hsc_core.evaluation.calibrator_benchmark import calibrator_benchmark
from hsc_core.evaluation.model import ModelEvaluation

N = 400


@pytest.fixture(scope="module")
def logits_dir(tmp_path_factory) -> Path:
    """toy_net, and an ensemble variant (variants/toy_ens) of two members beside toy_net."""
    d = tmp_path_factory.mktemp("cached_logits")
    (d / "variants").mkdir()
    logits, labels = synthetic_logits(imagenet_hierarchy(), N, top1=0.75, seed=3)
    ids = [f"img_{i:05d}.JPEG" for i in range(N)]
    save_logits(d / "toy_net.npz", logits, labels, ids, manifest={"model": "toy_net"}, dtype="float32")
    save_logits(d / "toy_net2.npz", 1.5 * logits, labels, ids, manifest={"model": "toy_net2"}, dtype="float32")
    save_logits(d / "variants" / "toy_ens.npz", 1.2 * logits, labels, ids, dtype="float32",
                manifest={"model": "toy_ens", "member_files": [{"file": "toy_net"}, {"file": "toy_net2"}]})
    return d


@pytest.fixture
def use_dir(monkeypatch, logits_dir):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(logits_dir))
    return logits_dir


def _table(at):
    return next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)


def test_page_shows_every_pair_with_the_layers_numbers_and_marks_the_best(use_dir):
    at = open_page("app_pages/calibrators.py", {"model": "toy_net"})
    table = _table(at)
    # 4 default calibrators × 4 default scores, depth_temperature with softmax only
    assert len(table) == 13
    assert set(table["calibrator"]) == {"No calibration", "Temperature scaling", "Isotonic (top-1)",
                                        "Temperature per depth"}
    for column in ("hAURC×1000", "gain %", "ECE at the leaves", "CC area×1000"):
        assert table[column].str.startswith("★").any(), column
    # the page's number is the library's
    ev = ModelEvaluation(imagenet_hierarchy(), *synthetic_logits(imagenet_hierarchy(), N, top1=0.75, seed=3))
    row = calibrator_benchmark(ev, calibrators=["temperature"], confidences=["softmax"], intervals=False)[0]
    shown = table[(table["calibrator"] == "Temperature scaling") & (table["confidence"] == "Softmax response")]
    assert shown["hAURC×1000"].iloc[0].lstrip("★ ") == f"{row['haurc'] * 1000:.2f}"

    assert "Member mean" not in at.multiselect(key="_w.calib.c_scores").options  # no members
    at.toggle(key="_w.calib.c_ci").set_value(True).run()
    assert not at.exception
    assert all("[" in v for v in _table(at)["hAURC×1000"])
    assert at.query_params["c_ci"] == "1"

    at.multiselect(key="_w.calib.c_scores").set_value([]).run()
    assert not at.exception
    assert any("Select at least one" in i.value for i in at.info)


def test_every_choice_round_trips_through_the_link(use_dir):
    link = {"model": "toy_net", "c_cals": "isotonic,temperature", "c_scores": "margin", "c_rule": "selective",
            "c_scope": "all"}
    at = open_page("app_pages/calibrators.py", link)
    assert at.multiselect(key="_w.calib.c_cals").value == ["temperature", "isotonic"]  # registry order
    assert at.multiselect(key="_w.calib.c_scores").value == ["margin"]
    assert at.selectbox(key="_w.calib.c_rule").value == "selective"
    assert at.radio(key="_w.calib.c_scope").value == "all"
    table = _table(at)
    # every listed model (toy_ens offers the member scores, but the link chose margin only)
    assert sorted(set(table["model"])) == ["toy_ens", "toy_net", "toy_net2"] and len(table) == 6
    assert {k: at.query_params[k] for k in link if k != "model"} == {
        "c_cals": "temperature,isotonic", "c_scores": "margin", "c_rule": "selective", "c_scope": "all"}


def test_invalid_link_values_fall_back_to_the_defaults(use_dir):
    at = open_page("app_pages/calibrators.py", {"model": "toy_net", "c_cals": "temperature,bogus", "c_scores": "",
                                                "c_rule": "nope", "c_ci": "maybe", "c_scope": "galaxy"})
    assert at.multiselect(key="_w.calib.c_cals").value == ["none", "temperature", "isotonic", "depth_temperature"]
    assert at.multiselect(key="_w.calib.c_scores").value == ["softmax", "margin", "entropy", "doctor"]
    assert at.selectbox(key="_w.calib.c_rule").value == "climbing"
    assert at.toggle(key="_w.calib.c_ci").value is False and at.radio(key="_w.calib.c_scope").value == "model"


def test_an_ensemble_offers_and_shows_the_member_scores(use_dir):
    at = open_page("app_pages/calibrators.py", {"model": "toy_ens", "c_cals": "temperature",
                                                "c_scores": "softmax,member_mean,member_disagreement"})
    assert not at.error, [e.value for e in at.error]
    assert {"Member mean", "Member agreement"} <= set(at.multiselect(key="_w.calib.c_scores").options)
    assert list(_table(at)["confidence"]) == ["Softmax response", "Member mean", "Member agreement"]


def test_the_shipped_ensemble_shows_its_member_scores(monkeypatch):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.delenv("HSC_CACHED_LOGITS_DIR", raising=False)
    at = open_page("app_pages/calibrators.py", {"model": "efficientnet_lite012__ensemble", "c_cals": "none",
                                                "c_scores": "softmax,member_mean"})
    assert not at.error, [e.value for e in at.error]
    table = _table(at)
    assert list(table["confidence"]) == ["Softmax response", "Member mean"]
    # without calibration the member mean is the ensemble file's own softmax (log mean softmax, float16)
    a, b = (float(v.lstrip("★ ")) for v in table["hAURC×1000"])
    assert abs(a - b) < 0.5
