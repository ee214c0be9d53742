"""One registry of rules (``core.rule_registry``) and the evaluation layer's one accessor per question.

The shipped logits' hAURC, grid hAURC and largest calibration ECE of every listed rule are pinned
(computed before the registry existed); the toy-tree tests check every accessor against the dense
library functions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hsc_core.core import metric_rules, rule_registry
from hsc_core.core.curves import (
    calibration_coverage_curve,
    gain_on_common_range,
    rc_curve_from_paths,
    rounded_threshold_grid,
)
from hsc_core.core.metric_rules import ALL_RULES, EXTRA_RULES, any_decision_paths, check_rule, parse_rule
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.rules import RULE_LABELS, RULES
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.uncertainty import bootstrap_haurc
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation import ModelEvaluation
from hsc_core.report import figures, style
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


# ---------------------------------------------------------------------------- the evaluation layer's accessors
@pytest.fixture(scope="module")
def toy_model():
    h = random_tree(30, seed=5)
    logits, labels = synthetic_logits(h, 500, top1=0.7, seed=2)
    return h, logits, labels


@pytest.mark.parametrize("ts", [False, True])
def test_every_accessor_of_every_rule_equals_the_dense_functions(toy_model, ts):
    h, logits, labels = toy_model
    es = ModelEvaluation(h, logits, labels, name="toy").setting(ts)
    probs = node_probabilities(h, softmax(logits[es.rows], es.temperature))
    y = labels[es.rows]
    grid = rounded_threshold_grid(probs, 2)
    sel_haurc = rc_curve_from_paths(h, any_decision_paths(h, probs, "selective"), y, "01").haurc
    for rule in (*LISTED, "hf0.5"):
        want = any_decision_paths(h, probs, rule)
        got = es.decision_paths(rule)
        assert got is es.rule_paths(rule)  # the old name is the same accessor (and cached)
        assert np.array_equal(got.nodes, want.nodes) and np.array_equal(got.values, want.values)
        assert np.array_equal(es.predict(rule, 0.6)[0], want.predict(0.6)[0])
        for loss in ("01", "severity"):
            curve = rc_curve_from_paths(h, want, y, loss)
            assert np.array_equal(es.curve(rule, loss).risk, curve.risk)
            assert es.haurc(rule, loss) == curve.haurc
        assert es.haurc(rule, dec=2) == rc_curve_from_paths(h, want, y, "01", grid).haurc
        if rule == "selective" or curve.coverage.max() == 1.0:  # the paper's gain of the raw areas
            gain = 0.0 if rule == "selective" else 100 * (sel_haurc - es.haurc(rule)) / sel_haurc
        else:  # stops short of coverage 1: over the common range (the dense functions' own)
            sel_curve = rc_curve_from_paths(h, any_decision_paths(h, probs, "selective"), y, "01")
            gain = gain_on_common_range(sel_curve, rc_curve_from_paths(h, want, y, "01")).gain
        assert es.gain(rule) == pytest.approx(gain, rel=1e-12)
        cc = calibration_coverage_curve(h, None, y, thresholds=grid, paths=want)
        assert np.array_equal(es.cc_curve(rule).ece, cc.ece) and np.array_equal(es.cc_curve(rule).coverage,
                                                                                 cc.coverage)
    # the conveniences: {rule: the single accessor's value}, the paper's four by default
    assert list(es.curves()) == list(LISTED[:4]) and list(es.cc_curves()) == list(LISTED[:4])
    assert all(es.curves(rules=LISTED)[r] is es.curve(r) for r in LISTED)
    assert all(es.curves(dec=2, rules=["pareto"])[r] is es.curve(r, dec=2) for r in ["pareto"])
    assert all(es.cc_curves(rules=LISTED)[r] is es.cc_curve(r) for r in LISTED)
    boot = es.bootstrap(rules=["hf1", "pareto"], n_resamples=50)
    dense = bootstrap_haurc(h, y, {r: any_decision_paths(h, probs, r) for r in ("selective", "hf1", "pareto")},
                            n_resamples=50)
    assert boot.haurc == dense.haurc and boot.gain == dense.gain


def test_unknown_rule_is_one_clear_error_from_every_accessor(toy_model):
    h, logits, labels = toy_model
    es = ModelEvaluation(h, logits, labels, name="toy").setting(False)
    for call in (es.decision_paths, es.curve, es.cc_curve, es.haurc, es.gain):
        with pytest.raises(ValueError, match="unknown rule 'greedy'; choose one of selective, .*pareto"):
            call("greedy")


# ---------------------------------------------------------------------------- the registry
def test_every_listed_rule_resolves_to_its_spec():
    assert rule_registry.rule_names() == LISTED
    assert rule_registry.rule_names(paper=True) == RULES == LISTED[:4]
    assert rule_registry.rule_names(paper=False) == EXTRA_RULES == LISTED[4:]
    assert ALL_RULES == LISTED
    for name in LISTED:
        spec = rule_registry.get_rule(name)
        assert spec.key == name and spec.paper == (name in RULES) and spec.source
        assert rule_registry.rule_label(name) == metric_rules.rule_label(name) == RULE_LABELS[name] == spec.label
        assert check_rule(name) == name
    # today's labels and groups, unchanged
    assert RULE_LABELS == {"selective": "Selective", "climbing": "Climbing", "jumping": "Jumping",
                           "max_coverage": "Max-Coverage", "hf1": "hF1-optimal", "min_severity": "Severity-optimal",
                           "max_information": "Information-optimal", "pareto": "Pareto (Valmadre)"}
    assert rule_registry.shared_pass("climbing") == RULES
    assert rule_registry.shared_pass("pareto") == EXTRA_RULES
    assert rule_registry.shared_pass("hf0.5") == ("hf0.5",)


def test_hf_beta_resolves_through_its_family():
    spec = rule_registry.get_rule("hf0.5")
    assert (spec.key, spec.label, spec.beta, spec.kind, spec.paper) == ("hf0.5", "hF0.5-optimal", 0.5, "hf", False)
    assert spec.style == rule_registry.get_rule("hf1").style  # one hF rule is shown at a time
    assert parse_rule("hf2") == ("hf", 2.0) and parse_rule("hf1") == ("hf", 1.0)
    assert parse_rule("min_severity") == ("min_severity", 1.0)
    assert "hf0.5" not in rule_registry.rule_names()  # resolved, not listed
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        rule_registry.get_rule("hf-1")


@pytest.mark.parametrize("name", ["greedy", "hfx", "hf", "", "Climbing", None, 3])
def test_unknown_names_give_one_line_naming_the_choices(name):
    with pytest.raises(ValueError) as err:
        rule_registry.get_rule(name)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("unknown rule ")
    assert msg.endswith("choose one of " + ", ".join(LISTED) + " (hf<β> for any β > 0)")
    assert not rule_registry.is_rule(name)


def test_styles_are_unique_per_rule_and_come_from_the_registry():
    styles = {name: rule_registry.get_rule(name).style for name in LISTED}
    assert len(set(styles.values())) == len(LISTED)
    # every pair differs in at least two of colour, dash and marker (no meaning rests on colour alone)
    for a in LISTED:
        for b in LISTED:
            if a < b:
                assert sum(x != y for x, y in zip(styles[a], styles[b], strict=True)) >= 2, (a, b)
    assert style.RULE_STYLE == styles
    assert style.rule_colour("hf0.5") == styles["hf1"][0] and style.rule_symbol("pareto") == "cross"
    assert figures.RULE_DASHES == {r: s[1] for r, s in styles.items()}


def test_registering_a_clashing_rule_is_refused():
    climbing = rule_registry.get_rule("climbing")
    with pytest.raises(ValueError, match="already registered"):
        rule_registry.register_rule(climbing)
    with pytest.raises(ValueError, match="style of climbing"):
        rule_registry.register_rule(dataclasses.replace(climbing, key="climbing_again"))
    assert rule_registry.rule_names() == LISTED
