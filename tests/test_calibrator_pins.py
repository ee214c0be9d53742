"""Numbers pinned before the calibrator / confidence-score registries (issue 31): the defaults
(``temperature`` and ``none`` with ``softmax``) must keep giving exactly these values."""

from __future__ import annotations

import pytest
from conftest import REPO

from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.resolve import resolve_hierarchy

# efficientnet_lite0, project protocol, exact curves; measured on main at 110de99.
T_PIN = 0.7884626764860745
PINS = {
    (False, "selective"): (0.047224396075025155, 0.0),
    (False, "climbing"): (0.04509161471825311, 4.516270262903318),
    (True, "selective"): (0.04626430801248699, 0.0),
    (True, "climbing"): (0.040427641657511754, 12.615916255355826),
}
CC_AREA_PINS = {(False, "climbing"): 0.04143297963739408, (True, "climbing"): 0.0072038006105514495,
                (True, "selective"): 0.01031255801286127}


@pytest.fixture(scope="module")
def lite0() -> ModelEvaluation:
    bundle = load_logits(REPO / "cached_logits" / "efficientnet_lite0.npz")
    dataset, tree = resolve_hierarchy(bundle, "lite0")
    return ModelEvaluation.from_bundle(bundle, tree, dataset=dataset)


def test_temperature_is_pinned(lite0):
    assert lite0.temperature == T_PIN


@pytest.mark.parametrize(("ts", "rule"), sorted(PINS))
def test_haurc_and_gain_are_pinned(lite0, ts, rule):
    es = lite0.setting(ts)
    assert (es.haurc(rule), es.gain(rule)) == PINS[(ts, rule)]


@pytest.mark.parametrize(("ts", "rule"), sorted(CC_AREA_PINS))
def test_cc_area_is_pinned(lite0, ts, rule):
    row = lite0.setting(ts).cc_summary((rule,))[0]
    assert row["area under CC curve (lower is better)"] == CC_AREA_PINS[(ts, rule)]


# The other calibrators at ImageNet size (1,000 classes: every fit's full form, float64), measured
# on h2-calib at 0ed9a69 before the iNat21-size fast paths; Climbing with softmax.
FIT_PINS = {
    "vector": (0.333325605818542, 2.8136930126994013),
    "depth_temperature": (0.03999005837356271, 13.396903618337817),
}
MATRIX_FIT_PINS = {
    "matrix": (0.0961606240606529, 11.142613877210737),
    "dirichlet": (0.38369221632931666, -0.34765913863818465),
}


@pytest.mark.parametrize("calibrator", sorted(FIT_PINS))
def test_imagenet_size_fits_are_pinned(lite0, calibrator):
    es = lite0.scored(calibrator, "softmax")
    assert (es.haurc("climbing"), es.gain("climbing")) == FIT_PINS[calibrator]


@pytest.mark.parametrize("calibrator", sorted(MATRIX_FIT_PINS))
def test_imagenet_size_matrix_fits_are_pinned(lite0, calibrator):  # ~2-5 s of L-BFGS each: slow tier
    es = lite0.scored(calibrator, "softmax")
    assert (es.haurc("climbing"), es.gain("climbing")) == MATRIX_FIT_PINS[calibrator]
