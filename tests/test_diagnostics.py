"""``hsc_core.evaluation.diagnostics``: per-node landing counts, the sunburst's node budget, the
LCA depth of mistakes and per-superclass RC curves, each against a literal per-sample reference
(the rules' own ``predict``, ``path_to_root``) or the dense curve of ``core.curves``."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from hsc_core.core.curves import hierarchical_rc_curve
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.rules import RULES, DecisionPaths, decision_paths, predict
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
from hsc_core.evaluation.diagnostics import (
    MAX_WEDGES,
    landing_counts,
    mistake_severity_histogram,
    samples_at_node,
    superclass_groups,
    superclass_rc_curves,
    wedge_nodes,
)


@pytest.fixture(scope="module")
def model():
    h = random_tree(40, seed=11)
    logits, labels = synthetic_logits(h, n_samples=600, top1=0.6, seed=4)
    probs = node_probabilities(h, softmax(logits))
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    return h, probs, labels, paths


def _ancestors(h, v) -> set[int]:
    return set(h.path_to_root(int(v)).tolist())


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("theta", [0.0, 0.35, 0.8, 1.0])
def test_landing_counts_match_a_per_sample_count(model, rule, theta):
    h, probs, labels, paths = model
    table = landing_counts(h, paths[rule], labels, theta)
    pred, _ = predict(h, probs, theta, rule)  # the dense reference rule
    stops = np.zeros(h.n_nodes, int)
    correct = np.zeros(h.n_nodes, int)
    samples = np.zeros(h.n_nodes, int)
    subtree = np.zeros(h.n_nodes, int)
    for p, y in zip(pred, labels, strict=True):
        stops[p] += 1
        correct[p] += p in _ancestors(h, y)
        for a in _ancestors(h, y):
            samples[a] += 1
        for a in _ancestors(h, p):
            subtree[a] += 1
    assert table["stops"].tolist() == stops.tolist()
    assert table["stops_correct"].tolist() == correct.tolist()
    assert table["samples"].tolist() == samples.tolist()
    assert table["stops_in_subtree"].tolist() == subtree.tolist()
    root = h.root
    assert table.loc[root, "samples"] == len(labels) and table.loc[root, "stops_in_subtree"] == len(labels)
    # at the root, "stopped here" is the rejection rate; at a leaf, its exact accuracy
    assert table.loc[root, "stopped_here"] == pytest.approx(np.mean(pred == root))
    leaf = int(np.bincount(labels).argmax())
    assert table.loc[leaf, "stopped_here"] == pytest.approx(np.mean(pred[labels == leaf] == leaf))


def test_samples_at_node_are_the_ones_counted(model):
    h, _, labels, paths = model
    theta = 0.6
    table = landing_counts(h, paths["climbing"], labels, theta)
    node = int(table.loc[h.n_leaves:, "stops"].idxmax())  # the busiest internal node
    at = samples_at_node(h, paths["climbing"], labels, theta, node)
    assert at.size == table.loc[node, "stops"] > 0
    assert (paths["climbing"].predict(theta)[0][at] == node).all()
    assert samples_at_node(h, paths["climbing"], labels, theta, node, where="subtree").size == \
        table.loc[node, "stops_in_subtree"]
    assert samples_at_node(h, paths["climbing"], labels, theta, node, where="true").size == table.loc[node, "samples"]
    with pytest.raises(ValueError, match="where must be"):
        samples_at_node(h, paths["climbing"], labels, theta, node, where="nope")


def test_mistake_histogram_matches_the_lca_by_hand(model):
    h, probs, labels, paths = model
    theta = 0.5
    hist = mistake_severity_histogram(h, paths, labels, theta)
    for rule in RULES:
        pred, _ = predict(h, probs, theta, rule)
        want = np.zeros(h.max_depth, int)
        for p, y in zip(pred, labels, strict=True):
            up_p, up_y = h.path_to_root(int(p)).tolist(), _ancestors(h, y)
            if int(p) in up_y:
                continue  # correct (or the root): not a mistake
            lca = next(a for a in up_p if a in up_y)
            want[h.depth[lca]] += 1
        got = hist[hist["rule"] == rule]
        assert got["mistakes"].tolist() == want.tolist()
        if want.sum():
            assert got["share"].sum() == pytest.approx(1.0)
    # θ = 1 with Climbing: every prediction at 1.0 is correct or the root, so no mistakes at all
    none = mistake_severity_histogram(h, paths, labels, 1.0, rules=["climbing"])
    assert none["mistakes"].sum() == 0 and none["share"].isna().all()


def test_superclass_curves_are_the_dense_curves_of_each_group(model):
    h, probs, labels, paths = model
    depth = 2
    sup = superclass_groups(h, labels, depth)
    assert all(int(s) in _ancestors(h, y) for s, y in zip(sup, labels, strict=True))
    curves = superclass_rc_curves(h, paths["climbing"], labels, depth, top=3)
    assert 1 <= len(curves) <= 3
    sizes = np.bincount(sup, minlength=h.n_nodes)
    assert list(curves) == sorted(curves, key=lambda g: -sizes[g])
    for g, curve in curves.items():
        rows = np.flatnonzero(sup == g)
        dense = hierarchical_rc_curve(h, probs[rows], labels[rows], "climbing")
        assert curve.haurc == pytest.approx(dense.haurc, abs=1e-12)
        np.testing.assert_allclose(curve.coverage, dense.coverage)


@pytest.fixture(scope="module")
def inat_like():
    return synthetic_taxonomy(10_000, seed=1)


def test_wedges_stay_within_budget_at_inat_scale(inat_like):
    h = inat_like
    rng = np.random.default_rng(0)
    labels = rng.integers(0, h.n_leaves, 50_000)
    leaf = np.zeros(h.n_nodes)
    leaf[: h.n_leaves] = np.bincount(labels, minlength=h.n_leaves)
    samples = leaf.copy()
    for v in h.topological_order[::-1]:
        if h.parent[v] >= 0:
            samples[h.parent[v]] += samples[v]
    assert h.n_nodes > 10_000
    for focus in (None, int(h.children[h.root][0])):
        nodes = wedge_nodes(h, samples, focus)
        assert 1 < nodes.size <= MAX_WEDGES
        seen = set()
        for v in nodes.tolist():
            assert v == nodes[0] or h.parent[v] in seen  # each after its parent: a drawable tree
            seen.add(v)
        assert len(seen) == nodes.size and (samples[nodes] > 0).all()


@settings(max_examples=25, deadline=None)
@given(n_leaves=st.integers(3, 60), seed=st.integers(0, 10_000), budget=st.integers(1, 80))
def test_wedges_are_whole_levels_then_the_largest(n_leaves, seed, budget):
    h = random_tree(n_leaves, seed)
    samples = np.random.default_rng(seed).integers(0, 5, h.n_nodes).astype(float)
    samples[h.root] = 1.0
    nodes = wedge_nodes(h, samples, max_wedges=budget)
    assert nodes.size <= budget and nodes[0] == h.root
    depth = h.depth[nodes]
    assert (np.diff(depth) >= 0).all()  # breadth first
    if depth.max() >= 1:
        # every level above the deepest drawn one is complete (all children with samples)
        for v in nodes:
            if h.depth[v] < depth.max() - 1:
                kids = [c for c in h.children[v] if samples[c] > 0]
                assert set(kids) <= set(nodes.tolist())


@pytest.fixture(scope="module")
def inat_paths(inat_like):
    """Selective-shaped records (leaf, then root) of 20,000 samples: cheap to make at this scale."""
    h, n = inat_like, 20_000
    rng = np.random.default_rng(7)
    labels = rng.integers(0, h.n_leaves, n)
    leaf = np.where(rng.random(n) < 0.6, labels, rng.integers(0, h.n_leaves, n))
    nodes = np.stack([leaf, np.full(n, h.root)], axis=1)
    values = np.stack([rng.random(n).astype(np.float32), np.ones(n, np.float32)], axis=1)
    return DecisionPaths("selective", nodes, values, np.full(n, 2)), labels


@pytest.mark.parametrize("kind", ["sunburst", "icicle"])
def test_tree_map_figure_draws_the_budget_at_inat_scale(inat_like, inat_paths, kind):
    """A 10,000-leaf tree (12,000+ nodes): the figure holds at most MAX_WEDGES sectors, sized by
    samples, grey where nothing lands. (Time at 100,000 samples: bench/diagnostics_bench.py.)"""
    from hsc_core.report.diagnostics_figures import NO_DATA_COLOUR, tree_map_figure

    h = inat_like
    paths, labels = inat_paths
    table = landing_counts(h, paths, labels, 0.6)
    nodes = wedge_nodes(h, table["samples"].to_numpy())
    fig = tree_map_figure(table, nodes, kind=kind, colour_by="accuracy_here")
    trace = fig.data[0]
    assert trace.type == kind and len(trace.ids) == nodes.size <= MAX_WEDGES
    assert trace.values[0] == labels.size
    no_landing = ~np.isfinite(table["accuracy_here"].to_numpy()[nodes])
    assert [c == NO_DATA_COLOUR for c in trace.marker.colors] == no_landing.tolist()
