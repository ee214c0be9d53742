"""The calibrator × confidence benchmark (issue 31): its numbers are the layer's, its weighted
ECE / CC area equal ``cc_summary`` at unit weights, best marks, CSV export, and CIFAR-100."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets.registry import load_dataset
from hsc_core.evaluation.calibrator_benchmark import (
    BENCHMARK_COLUMNS,
    benchmark_csv,
    benchmark_pairs,
    benchmark_table,
    calibrator_benchmark,
    mark_best,
    weighted_ece_and_cc_area,
)
from hsc_core.evaluation.model import ModelEvaluation


@pytest.fixture(scope="module")
def cifar() -> ModelEvaluation:
    """A synthetic model on the built-in CIFAR-100 tree (20 superclasses × 5): a non-ImageNet check."""
    tree = load_dataset("cifar100").hierarchy
    logits, labels = synthetic_logits(tree, 1500, top1=0.7, seed=11)
    return ModelEvaluation(tree, logits, labels, name="=cifar_net", dataset="cifar100")


def test_pairs_leave_out_what_cannot_be_scored():
    pairs = benchmark_pairs()
    # depth_temperature pairs with 3 of the 7 scores; energy after isotonic ranks noise (issue 41)
    assert len(pairs) == 7 * 7 - 4 - 1 and ("depth_temperature", "softmax") in pairs
    assert ("isotonic", "energy") not in pairs and ("isotonic", "margin") in pairs
    assert ("depth_temperature", "member_mean") in pairs  # member scores average node scores
    assert ("depth_temperature", "margin") not in pairs
    with pytest.raises(ValueError, match="unknown calibrator"):
        benchmark_pairs(["nope"])


@pytest.mark.parametrize(("cal", "conf"), [("temperature", "softmax"), ("isotonic", "entropy")])
def test_weighted_statistics_at_unit_weights_equal_cc_summary(cifar, cal, conf):
    es = cifar.scored(cal, conf)
    ece_leaves, cc_area = weighted_ece_and_cc_area(es, "climbing")
    summary = es.cc_summary(("climbing",))[0]
    w = np.ones((2, es.n))
    np.testing.assert_allclose(ece_leaves(w), summary["ECE at the lowest θ (leaves)"], rtol=1e-12)
    np.testing.assert_allclose(cc_area(w), summary["area under CC curve (lower is better)"], rtol=1e-10)
    # doubling every weight changes no ratio
    np.testing.assert_allclose(cc_area(2 * w), cc_area(w), rtol=1e-12)


def test_benchmark_rows_are_the_layers_numbers_with_intervals(cifar):
    rows = calibrator_benchmark(cifar, calibrators=["none", "temperature", "depth_temperature"],
                                confidences=["softmax", "doctor"], n_resamples=60)
    assert [(r["calibrator"], r["confidence"]) for r in rows] == [
        ("none", "softmax"), ("none", "doctor"), ("temperature", "softmax"), ("temperature", "doctor"),
        ("depth_temperature", "softmax")]
    ts = next(r for r in rows if (r["calibrator"], r["confidence"]) == ("temperature", "softmax"))
    assert ts["haurc"] == cifar.setting(True).haurc("climbing")
    assert ts["gain_percent"] == cifar.setting(True).gain("climbing")
    for r in rows:
        assert set(r) == set(BENCHMARK_COLUMNS)
        for m in ("haurc", "gain_percent", "ece_leaves", "cc_area"):
            assert r[f"{m}_low"] <= r[m] <= r[f"{m}_high"] or m == "gain_percent"
    assert sum("haurc" in r["best"].split(",") for r in rows) >= 1
    best = min(rows, key=lambda r: r["haurc"])
    assert "haurc" in best["best"]


def test_mark_best_per_model_and_ties():
    base = {"gain_percent": 1.0, "ece_leaves": 0.1, "cc_area": 0.2}
    rows = [{"model": "a", "haurc": 0.3, **base}, {"model": "a", "haurc": 0.2, **base, "gain_percent": 3.0},
            {"model": "b", "haurc": 0.9, **base}]
    mark_best(rows)
    assert rows[0]["best"] == "ece_leaves,cc_area"
    assert rows[1]["best"] == "haurc,gain_percent,ece_leaves,cc_area"
    assert rows[2]["best"] == "haurc,gain_percent,ece_leaves,cc_area"  # alone in its model


def test_csv_is_formula_safe_and_table_marks_the_best(cifar):
    rows = calibrator_benchmark(cifar, calibrators=["temperature"], confidences=["softmax", "margin"],
                                intervals=False)
    text = benchmark_csv(rows)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert list(parsed[0]) == list(BENCHMARK_COLUMNS)
    assert parsed[0]["model"] == "'=cifar_net"  # neutralised: a spreadsheet would run it
    assert parsed[0]["haurc_low"] == ""
    shown = benchmark_table(rows)
    assert sum(v.startswith("★") for r in shown for v in r.values() if isinstance(v, str)) >= 4


def test_report_section_shows_the_table_and_its_csv(cifar):
    import base64
    import re

    from hsc_core.report.html_report import calibrators_section

    html = calibrators_section(cifar, ["temperature", "isotonic"], ["softmax"], n_resamples=40)
    assert html.count("<tr>") == 3 and html.count("★") >= 4
    assert "Temperature scaling" in html and "Isotonic (top-1)" in html
    data = re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1)
    rows = list(csv.DictReader(io.StringIO(base64.b64decode(data).decode("utf-8"))))
    assert [r["calibrator"] for r in rows] == ["temperature", "isotonic"]
    assert rows[0]["model"] == "'=cifar_net"  # formula-safe inside the report too
