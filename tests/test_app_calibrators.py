"""The Calibrators page (issue 31): the calibrator × confidence table of the current model, best
marked, intervals on request, CSV download, and a clear message for an empty choice."""

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
    d = tmp_path_factory.mktemp("cached_logits")
    logits, labels = synthetic_logits(imagenet_hierarchy(), N, top1=0.75, seed=3)
    save_logits(d / "toy_net.npz", logits, labels, [f"img_{i:05d}.JPEG" for i in range(N)],
                manifest={"model": "toy_net"}, dtype="float32")
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

    at.toggle(key="calib_intervals").set_value(True).run()
    assert not at.exception
    assert all("[" in v for v in _table(at)["hAURC×1000"])

    at.multiselect(key="calib_confidences").set_value([]).run()
    assert not at.exception
    assert any("Select at least one" in i.value for i in at.info)
