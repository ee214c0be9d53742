"""One registry of rules (``core.rule_registry``) and the evaluation layer's one accessor per question.

The shipped logits' hAURC, grid hAURC and largest calibration ECE of every listed rule are pinned
(computed before the registry existed); the toy-tree tests check every accessor against the dense
library functions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hsc_core.core.curves import calibration_coverage_curve, rc_curve_from_paths, rounded_threshold_grid
from hsc_core.core.metric_rules import any_decision_paths
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation import ModelEvaluation
from tests.conftest import random_tree

ROOT = Path(__file__).resolve().parent.parent
LISTED = ("selective", "climbing", "jumping", "max_coverage", "hf1", "min_severity", "max_information", "pareto")

# efficientnet_lite0.npz (ImageNet WordNet tree), printed by the code before the registry (repr of floats).
PINNED = {
    False: {
        "haurc": {"selective": 0.047224396075025155, "climbing": 0.04509161471825311,
                  "jumping": 0.04649715755133112, "max_coverage": 0.046274009670555324,
                  "hf1": 0.029537751382752452, "min_severity": 0.020238885585837387,
                  "max_information": 0.04117606257617126, "pareto": 0.046274009670555324},
        "dec2": {"selective": 0.04719034064034537, "climbing": 0.045077010681754834,
                 "jumping": 0.04647359823367773, "max_coverage": 0.04625109971478597,
                 "hf1": 0.02952303231683209, "min_severity": 0.02022283189572921,
                 "max_information": 0.04115776371120022, "pareto": 0.04625109971478597},
        "max_ece": {"selective": 0.07651040510348212, "climbing": 0.0833224096431061,
                    "jumping": 0.08239455988679813, "max_coverage": 0.08308416832227511,
                    "hf1": 0.0827287200958498, "min_severity": 0.07975466517059684,
                    "max_information": 0.08599621654430792, "pareto": 0.08308416832227511},
    },
    True: {
        "haurc": {"selective": 0.04626430801248699, "climbing": 0.040427641657511754,
                  "jumping": 0.0407656985397605, "max_coverage": 0.0406958892937302,
                  "hf1": 0.03141185539355421, "min_severity": 0.025009234767386448,
                  "max_information": 0.03797913111197435, "pareto": 0.0406958892937302},
        "dec2": {"selective": 0.04622990858351751, "climbing": 0.040570826310844806,
                 "jumping": 0.04090708601440819, "max_coverage": 0.040835700786496947,
                 "hf1": 0.03155615243439727, "min_severity": 0.02515603041894242,
                 "max_information": 0.03811651882277611, "pareto": 0.040835700786496947},
        "max_ece": {"selective": 0.0319885657985539, "climbing": 0.03327908430281273,
                    "jumping": 0.033381869628632176, "max_coverage": 0.033364441073185536,
                    "hf1": 0.03318486972288652, "min_severity": 0.030590976158544815,
                    "max_information": 0.033330513357766565, "pareto": 0.033364441073185536},
    },
}


@pytest.fixture(scope="module")
def shipped() -> ModelEvaluation:
    b = load_logits(ROOT / "cached_logits" / "efficientnet_lite0.npz")
    return ModelEvaluation.from_bundle(b, imagenet_hierarchy())


@pytest.mark.parametrize("ts", [False, True])
def test_shipped_numbers_of_every_rule_are_unchanged(shipped, ts):
    es = shipped.setting(ts)
    want = PINNED[ts]
    assert {r: es.haurc(r) for r in LISTED} == want["haurc"]
    assert {r: es.haurc(r, dec=2) for r in LISTED} == want["dec2"]
    assert {r: float(es.cc_curve(r).ece.max()) for r in LISTED} == want["max_ece"]
