"""Rules and exact curves against slow literal implementations, plus the paper's properties."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_rules import RULE_FUNCTIONS

from hsc_core.core.curves import flat_aurc, hierarchical_rc_curve
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.risk import hierarchical_correctness, sample_loss
from hsc_core.core.rules import RULES, decision_paths


def _data(seed: int, n_leaves: int = 12, n: int = 40, sharp: float = 2.0):
    h = random_tree(n_leaves, seed)
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, n_leaves)) * sharp
    labels = rng.integers(0, n_leaves, n)
    return h, node_probabilities(h, softmax(logits)), labels


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rule=st.sampled_from(RULES), theta=st.floats(0, 1))
def test_vectorised_rules_match_literal_definitions(seed, rule, theta):
    h, probs, _ = _data(seed)
    nodes, _ = decision_paths(h, probs, rule).predict(theta)
    expected = [RULE_FUNCTIONS[rule](h, probs[i], theta) for i in range(probs.shape[0])]
    assert nodes.tolist() == expected


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), rule=st.sampled_from(RULES), loss=st.sampled_from(["01", "severity"]))
def test_exact_curve_has_every_breakpoint(seed, rule, loss):
    """At each event value and just above it, the curve equals a direct evaluation."""
    h, probs, labels = _data(seed)
    paths = decision_paths(h, probs, rule)
    curve = hierarchical_rc_curve(h, probs, labels, rule, loss, paths=paths)
    probes = np.unique(np.clip(np.r_[0.0, curve.events, np.nextafter(curve.events, 2), 1.0], 0, 1))
    for theta in probes:
        nodes, _ = paths.predict(theta)
        cov, risk = curve.at(theta)
        assert cov == pytest.approx(h.coverage[nodes].mean(), abs=1e-12)
        assert risk == pytest.approx(sample_loss(h, nodes, labels, loss).mean(), abs=1e-12)
    # Consecutive points differ: no redundant breakpoints in the exact curve.
    assert np.all(np.diff(curve.events) > 0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), t1=st.floats(0, 1), t2=st.floats(0, 1))
def test_climbing_monotone_in_theta(seed, t1, t2):
    """Raising θ never makes Climbing wrong where it was right, nor raises coverage (paper §4)."""
    lo, hi = sorted((t1, t2))
    h, probs, labels = _data(seed)
    paths = decision_paths(h, probs, "climbing")
    n_lo, _ = paths.predict(lo)
    n_hi, _ = paths.predict(hi)
    ok_lo = hierarchical_correctness(h, n_lo, labels)
    ok_hi = hierarchical_correctness(h, n_hi, labels)
    assert np.all(ok_hi >= ok_lo)
    assert np.all(h.coverage[n_hi] <= h.coverage[n_lo] + 1e-12)
    assert np.all(h.is_ancestor(n_hi, n_lo))  # the higher-θ node is on the way up


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), t1=st.floats(0, 1), t2=st.floats(0, 1))
def test_max_coverage_monotone_in_coverage(seed, t1, t2):
    lo, hi = sorted((t1, t2))
    h, probs, _ = _data(seed)
    paths = decision_paths(h, probs, "max_coverage")
    assert np.all(h.coverage[paths.predict(hi)[0]] <= h.coverage[paths.predict(lo)[0]] + 1e-12)


def test_flat_hierarchy_reduces_to_selective_classification():
    h = Hierarchy.flat(10)
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(300, 10)) * 2
    labels = rng.integers(0, 10, 300)
    probs = node_probabilities(h, softmax(logits))
    p_max = probs[:, :10].max(axis=1)
    correct = probs[:, :10].argmax(axis=1) == labels
    curves = {r: hierarchical_rc_curve(h, probs, labels, r) for r in RULES}
    for r in RULES:  # with only leaves and a root every rule is Selective
        np.testing.assert_allclose(curves[r].coverage, curves["selective"].coverage)
        np.testing.assert_allclose(curves[r].risk, curves["selective"].risk)
    sel = curves["selective"]
    for theta in (0.0, 0.2, 0.5, 0.8, 1.0):
        accepted = p_max >= theta
        cov, risk = sel.at(theta)
        assert cov == pytest.approx(accepted.mean())  # coverage = fraction accepted
        assert risk == pytest.approx((accepted & ~correct).mean())  # risk = c · selective risk
    # §8.1: hAURC(Selective) = ∫ c·R(c) dc, below the flat AURC.
    assert sel.haurc < flat_aurc(p_max, correct)


def test_climbing_beats_selective_on_hierarchical_confusions():
    """When confusions sit among siblings, retreating to the parent lowers hAURC (the paper's gain)."""
    from hsc_core.core.synthetic import synthetic_logits

    h = random_tree(200, 7)
    logits, labels = synthetic_logits(h, 4000, top1=0.7, seed=1)
    probs = node_probabilities(h, softmax(logits))
    sel = hierarchical_rc_curve(h, probs, labels, "selective").haurc
    climb = hierarchical_rc_curve(h, probs, labels, "climbing").haurc
    assert climb < sel
    assert abs((logits.argmax(1) == labels).mean() - 0.7) < 0.03
