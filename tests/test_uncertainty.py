"""Bootstrap intervals of hAURC and gain (``hsc_core.core.uncertainty``) against a slow, literal
bootstrap that resamples rows and recomputes every curve with ``hierarchical_rc_curve``."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TOY_LABELS, random_tree

from hsc_core.core.curves import hierarchical_gain, hierarchical_rc_curve
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.rules import RULES, decision_paths
from hsc_core.core.uncertainty import (
    bootstrap_haurc,
    counts_from_indices,
    rule_events,
    weighted_haurc,
)


def _data(h, n: int, seed: int, sharp: float = 3.0):
    """Logits that favour the true leaf and its siblings, so every rule has real work to do."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, h.n_leaves, n)
    logits = rng.normal(size=(n, h.n_leaves))
    logits[np.arange(n), labels] += sharp * rng.random(n)
    return node_probabilities(h, softmax(logits)), labels


@pytest.fixture(scope="module")
def tree():
    return random_tree(40, seed=3)


@pytest.mark.parametrize("loss", ["01", "severity"])
@pytest.mark.parametrize("rule", RULES)
def test_weights_reproduce_the_curve_of_the_resampled_rows(tree, rule, loss):
    """Counts w give exactly the hAURC of the data set that holds row i w[i] times."""
    probs, labels = _data(tree, 150, seed=1)
    paths = decision_paths(tree, probs, rule)
    events = rule_events(tree, paths, labels, loss)
    assert weighted_haurc(events, np.ones(150)) == pytest.approx(
        hierarchical_rc_curve(tree, probs, labels, rule, loss).haurc, abs=1e-12)
    rng = np.random.default_rng(7)
    idx = rng.integers(0, 150, size=(5, 150))
    got = weighted_haurc(events, counts_from_indices(idx, 150))
    want = [hierarchical_rc_curve(tree, probs[i], labels[i], rule, loss).haurc for i in idx]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_toy_tree_weights_by_hand(toy, toy_probs):
    """On the §9 toy, dropping a sample (weight 0) equals deleting its row."""
    for rule in RULES:
        events = rule_events(toy, decision_paths(toy, toy_probs, rule), TOY_LABELS)
        w = np.array([1.0, 0.0, 2.0, 1.0, 1.0])
        keep = np.array([0, 2, 2, 3, 4])
        want = hierarchical_rc_curve(toy, toy_probs[keep], TOY_LABELS[keep], rule).haurc
        assert weighted_haurc(events, w) == pytest.approx(want, abs=1e-12)


def _slow_bootstrap(h, probs, labels, n_resamples: int, seed: int):
    """The literal definition: resample rows, rebuild every curve, take percentiles."""
    rng = np.random.default_rng(seed)
    n = labels.size
    haurc = {r: [] for r in RULES}
    for _ in range(n_resamples):
        i = rng.integers(0, n, n)
        for r in RULES:
            haurc[r].append(hierarchical_rc_curve(h, probs[i], labels[i], r).haurc)
    out = {r: np.percentile(v, [2.5, 97.5]) for r, v in haurc.items()}
    gains = {r: np.percentile(100 * (np.array(haurc["selective"]) - np.array(haurc[r])) / np.array(haurc["selective"]),
                              [2.5, 97.5]) for r in RULES[1:]}
    return out, gains


def test_matches_a_slow_reference_bootstrap(tree):
    probs, labels = _data(tree, 120, seed=2)
    paths = {r: decision_paths(tree, probs, r) for r in RULES}
    res = bootstrap_haurc(tree, labels, paths, n_resamples=600, seed=5)
    slow, slow_gain = _slow_bootstrap(tree, probs, labels, n_resamples=600, seed=11)
    for r in RULES:
        iv = res.haurc[r]
        width = iv.high - iv.low
        assert width > 0
        # Two independent Monte Carlo runs of the same bootstrap: limits agree to a fraction of the width.
        assert abs(iv.low - slow[r][0]) < 0.2 * width and abs(iv.high - slow[r][1]) < 0.2 * width
    for r in RULES[1:]:
        g = res.gain[r]
        assert abs(g.low - slow_gain[r][0]) < 0.2 * (g.high - g.low)
        assert abs(g.high - slow_gain[r][1]) < 0.2 * (g.high - g.low)


def test_point_estimates_are_the_curves_and_inside_their_intervals(tree):
    probs, labels = _data(tree, 300, seed=4)
    paths = {r: decision_paths(tree, probs, r) for r in RULES}
    res = bootstrap_haurc(tree, labels, paths, n_resamples=300)
    sel = hierarchical_rc_curve(tree, probs, labels, "selective").haurc
    for r in RULES:
        h = hierarchical_rc_curve(tree, probs, labels, r).haurc
        iv = res.haurc[r]
        assert iv.estimate == pytest.approx(h, abs=1e-12)
        assert iv.low < iv.estimate < iv.high
    for r in RULES[1:]:
        g = res.gain[r]
        assert g.estimate == pytest.approx(hierarchical_gain(sel, res.haurc[r].estimate))
        assert g.low < g.estimate < g.high
    assert set(res.gain) == set(RULES[1:]) and res.n_samples == 300 and res.n_resamples == 300


def test_deterministic_for_a_seed_and_different_across_seeds(tree):
    probs, labels = _data(tree, 200, seed=6)
    paths = {r: decision_paths(tree, probs, r) for r in RULES}
    a = bootstrap_haurc(tree, labels, paths, n_resamples=200, seed=1)
    b = bootstrap_haurc(tree, labels, paths, n_resamples=200, seed=1)
    c = bootstrap_haurc(tree, labels, paths, n_resamples=200, seed=2)
    assert a.haurc == b.haurc and a.gain == b.gain
    assert a.haurc["climbing"].low != c.haurc["climbing"].low


def test_intervals_shrink_with_more_samples(tree):
    widths = []
    for n in (200, 3200):
        probs, labels = _data(tree, n, seed=8)
        paths = {r: decision_paths(tree, probs, r) for r in ("selective", "climbing")}
        res = bootstrap_haurc(tree, labels, paths, n_resamples=300)
        widths.append({r: iv.high - iv.low for r, iv in res.haurc.items()})
    for r in ("selective", "climbing"):
        # The width scales like 1/√n: 16× the samples, about a quarter of the width.
        assert widths[1][r] < 0.4 * widths[0][r]


def test_bad_arguments(tree):
    probs, labels = _data(tree, 30, seed=9)
    paths = {"selective": decision_paths(tree, probs, "selective")}
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_haurc(tree, labels, paths, confidence=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_haurc(tree, labels, paths, n_resamples=1)
    with pytest.raises(ValueError, match="no decision paths"):
        bootstrap_haurc(tree, labels, {})


def test_non_monotone_rule_on_the_imagenet_tree():
    """Jumping can move to a node with *fewer* leaves as θ rises (coverage climbs back); each
    resample must then sort its points by coverage, as ``area_under_rc`` does."""
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.imagenet import imagenet_hierarchy

    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 400, top1=0.6, seed=3)
    probs = node_probabilities(h, softmax(logits))
    events = rule_events(h, decision_paths(h, probs, "jumping"), labels)
    assert not events.monotone
    idx = np.random.default_rng(0).integers(0, 400, size=(3, 400))
    got = weighted_haurc(events, counts_from_indices(idx, 400))
    want = [hierarchical_rc_curve(h, probs[i], labels[i], "jumping").haurc for i in idx]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_intervals_wait_for_a_request_on_many_samples_or_a_deep_tree():
    from hsc_core.core.hierarchy import Hierarchy
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.core.uncertainty import ON_DEMAND_RECORDS, ON_DEMAND_SAMPLES, intervals_on_request

    assert (ON_DEMAND_SAMPLES, ON_DEMAND_RECORDS) == (20_000, 5)
    assert not intervals_on_request(20_000, 5)  # the sample bound alone, up to 5 records
    assert intervals_on_request(20_001, 2)
    assert intervals_on_request(20_000, 6)
    assert not intervals_on_request(100, 1_000) and intervals_on_request(101, 1_000)  # the same work
    assert not intervals_on_request(1_705, 17)  # the shipped ImageNet models: at once
    assert intervals_on_request(270, 1_001)  # the attack's 1,000-deep caterpillar (issue 42): on request
    # a 60-deep caterpillar: Climbing's paths hold every one of the 61 nodes above a deep leaf
    depth, n_leaves = 60, 61
    parent = np.r_[n_leaves + np.arange(depth), n_leaves + depth - 1, -1, n_leaves + np.arange(depth - 1)]
    h = Hierarchy.from_parents(parent, n_leaves)
    logits, labels = synthetic_logits(h, 200, seed=0)
    records = decision_paths(h, node_probabilities(h, softmax(logits)), "climbing").nodes.shape[1]
    assert records == depth + 1
    assert not intervals_on_request(200, records)
    assert intervals_on_request(20_000 * 5 // records + 1, records)
