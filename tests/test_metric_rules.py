"""Metric-optimal rules and Valmadre's Pareto rule: hand-checked toy values, a literal brute-force
argmax over all nodes, hierulz's characterisation of severity decoding, and curve properties."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TOY_LABELS, TOY_LEAF_PROBS, random_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from hsc_core.core.curves import hierarchical_rc_curve, rc_curve_from_paths
from hsc_core.core.evaluation import decision_paths_from_logits
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.metric_rules import (
    ALL_RULES,
    EXTRA_RULES,
    any_decision_paths,
    check_rule,
    parse_rule,
    rule_label,
)
from hsc_core.core.node_scores import expected_scores, node_scores
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.risk import sample_loss

#: Leaves a, b under X; c, d under Y; root r. All leaves at depth 2.
PAIRS = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], n_leaves=4, node_ids=list("abcdXYr"))
METRIC_OF = {"min_severity": "severity", "max_information": "information"}


def unbalanced_tree(n_leaves: int, seed: int) -> Hierarchy:
    """A random tree with leaves at different depths: each pass merges only some of the nodes."""
    rng = np.random.default_rng(seed)
    parent_of: dict[str, str] = {}
    level = [f"leaf{i}" for i in range(n_leaves)]
    k = 0
    while len(level) > 1:
        rng.shuffle(level)
        size = int(rng.integers(2, min(4, len(level)) + 1))
        name = f"node{k}"
        k += 1
        for child in level[:size]:
            parent_of[child] = name
        level = level[size:] + [name]
    return Hierarchy.from_parent_map(parent_of, [f"leaf{i}" for i in range(n_leaves)])


def literal_choice(h: Hierarchy, probs: np.ndarray, rule: str, theta: float) -> int:
    """Literal reference: expected score of every node by a sum over all leaves, then the argmax
    over every node with probability ≥ θ (ties: more probable, then lower index)."""
    kind, beta = parse_rule(rule)
    p = np.minimum(np.round(probs.astype(np.float64), 12), 1.0)
    p[h.root] = 1.0
    leaf_p = probs[: h.n_leaves].astype(np.float64)
    best, best_key = -1, None
    for v in range(h.n_nodes):
        if p[v] < theta:
            continue
        if kind == "pareto":
            score = -np.log2(h.leaf_count[v])
        else:
            metric = "hf" if kind == "hf" else METRIC_OF[kind]
            s = node_scores(h, np.full(h.n_leaves, v), np.arange(h.n_leaves), metric, beta=beta)
            score = float(leaf_p @ s)
            if metric == "severity":
                score = -score
        key = (round(score, 9), p[v], -v)
        if best_key is None or key > best_key:
            best, best_key = v, key
    return best


# ------------------------------------------------------------------ hand-checked toy values


def test_hand_checked_expected_scores_and_choices():
    # P: a .3, b .25, c .25, d .2, X .55, Y .45, r 1
    p = node_probabilities(PAIRS, np.array([[0.30, 0.25, 0.25, 0.20]]))
    hf1 = expected_scores(PAIRS, p, "hf")[0]
    # E hF1(a) = .3·1 + .25·(2·1/4) = .425; E hF1(X) = .55·2/3; E hF1(c) = .25 + .2·.5 = .35
    assert hf1.tolist() == pytest.approx([0.425, 0.4, 0.35, 0.325, 0.55 * 2 / 3, 0.3, 0.0])
    hf05 = expected_scores(PAIRS, p, "hf", beta=0.5)[0]
    # β = 0.5 favours precision: E hF0.5(X) = 1.25·.55/1.5 = .4583 beats E hF0.5(a) = 1.25·.85/2.5 = .425
    assert hf05[4] == pytest.approx(1.25 * 0.55 / 1.5) and hf05[0] == pytest.approx(0.425)
    info = expected_scores(PAIRS, p, "information")[0]
    # I(leaf) = 2, I(pair) = 1: E(a) = .3·1 + .25·(2·1/4) = .425; E(X) = .55·2/3
    assert info[0] == pytest.approx(0.425) and info[4] == pytest.approx(0.55 * 2 / 3)
    sev = expected_scores(PAIRS, p, "severity")[0]
    # 2·Σ P(ancestors) − depth: a: 2·.85 − 2 = −.3; X: 2·.55 − 1 = .1; root 0
    assert sev[[0, 4, 6]].tolist() == pytest.approx([-0.3, 0.1, 0.0])

    def records(rule):
        return any_decision_paths(PAIRS, p, rule).nodes[0].tolist()

    assert records("hf1") == [0, 4, 6]           # a (.3) → X (.55) → root
    assert records("hf0.5") == [4, 6]            # X from θ = 0
    assert records("min_severity") == [4, 6]     # deepest node with P > 0.5
    assert records("max_information") == [0, 4, 6]
    assert records("pareto") == [0, 4, 6]


def test_knob_sweeps_from_metric_optimum_to_root():
    p = node_probabilities(PAIRS, np.array([[0.30, 0.25, 0.25, 0.20]]))
    paths = any_decision_paths(PAIRS, p, "hf1")
    assert paths.predict(0.0)[0].tolist() == [0]
    assert paths.predict(0.3)[0].tolist() == [0]          # accepted when P ≥ θ
    assert paths.predict(0.31)[0].tolist() == [4]
    assert paths.predict(0.56)[0].tolist() == [6]
    assert paths.predict(1.0)[0].tolist() == [6]
    assert paths.values[0].tolist() == pytest.approx([0.3, 0.55, 1.0])


# ------------------------------------------------------------------ brute force


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), rule=st.sampled_from(list(EXTRA_RULES) + ["hf0.5", "hf2"]),
       theta=st.floats(0, 1), sharp=st.sampled_from([0.5, 2.0, 6.0]), balanced=st.booleans())
def test_choice_matches_literal_argmax_over_all_nodes(seed, rule, theta, sharp, balanced):
    h = random_tree(9, seed) if balanced else unbalanced_tree(9, seed)
    rng = np.random.default_rng(seed)
    probs = node_probabilities(h, softmax(rng.normal(size=(12, h.n_leaves)) * sharp))
    paths = any_decision_paths(h, probs, rule)
    for t in (theta, 0.0, *np.unique(paths.values).tolist()):
        got = paths.predict(t)[0]
        want = [literal_choice(h, probs[i], rule, t) for i in range(probs.shape[0])]
        assert got.tolist() == want, (rule, t)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), rule=st.sampled_from(["hf1", "hf0.5", "hf3", "min_severity", "max_information"]),
       sharp=st.sampled_from([0.3, 1.0, 3.0, 8.0]), tree=st.sampled_from(["balanced", "unbalanced", "chains"]),
       f32=st.booleans())
def test_pruned_candidates_give_the_dense_front_bit_for_bit(seed, rule, sharp, tree, f32):
    """Scoring only the nodes that can be on a front (the speed-up) changes nothing, also on trees
    with single-child chains (every leaf at one depth, as iNat21's species)."""
    from hsc_core.core.synthetic import synthetic_taxonomy

    h = {"balanced": lambda: random_tree(30, seed), "unbalanced": lambda: unbalanced_tree(30, seed),
         "chains": lambda: synthetic_taxonomy(30, 4, seed=seed, collapse=False)}[tree]()
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(40, h.n_leaves)) * sharp
    probs = node_probabilities(h, softmax(logits.astype(np.float32) if f32 else logits))
    fast = any_decision_paths(h, probs, rule)
    dense = any_decision_paths(h, probs, rule, pruned=False)
    assert fast.nodes.tolist() == dense.nodes.tolist()
    assert fast.values.tolist() == dense.values.tolist() and fast.values.dtype == dense.values.dtype


def test_toy_tree_of_the_definitions_brute_force(toy, toy_probs):
    for rule in EXTRA_RULES + ("hf0.5", "hf3"):
        paths = any_decision_paths(toy, toy_probs, rule)
        for t in np.linspace(0, 1, 41):
            want = [literal_choice(toy, toy_probs[i], rule, t) for i in range(toy_probs.shape[0])]
            assert paths.predict(t)[0].tolist() == want


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_severity_optimum_is_hierulz_rule_deepest_node_above_half(seed):
    """hierulz (Plaud et al., 2025) decodes mistake severity as the nodes with P > 0.5: the
    deepest of them is the optimum."""
    h = unbalanced_tree(10, seed)
    rng = np.random.default_rng(seed)
    probs = node_probabilities(h, softmax(rng.normal(size=(20, h.n_leaves)) * 3))
    got = any_decision_paths(h, probs, "min_severity").predict(0.0)[0]
    for i, v in enumerate(got):
        above = np.flatnonzero(probs[i] > 0.5)
        assert h.depth[v] == h.depth[above].max()
        assert probs[i, v] > 0.5 or v == h.root


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_valmadre_pareto_with_information_equals_max_coverage(seed):
    """Two implementations of one idea: Max-Coverage groups nodes by coverage level; the Pareto
    front sorts (information, probability) per sample. Without ties they choose alike."""
    h = unbalanced_tree(12, seed)
    rng = np.random.default_rng(seed)
    probs = node_probabilities(h, softmax(rng.normal(size=(30, h.n_leaves)) * 2))
    a = any_decision_paths(h, probs, "pareto")
    b = any_decision_paths(h, probs, "max_coverage")
    for t in np.linspace(0, 1, 33):
        assert a.predict(t)[0].tolist() == b.predict(t)[0].tolist()


# ------------------------------------------------------------------ curves through the same machinery


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), rule=st.sampled_from(EXTRA_RULES))
def test_exact_rc_curve_of_new_rules(seed, rule):
    h = unbalanced_tree(10, seed)
    rng = np.random.default_rng(seed)
    probs = node_probabilities(h, softmax(rng.normal(size=(40, h.n_leaves)) * 2))
    labels = rng.integers(0, h.n_leaves, 40)
    paths = any_decision_paths(h, probs, rule)
    curve = rc_curve_from_paths(h, paths, labels, "01")
    for t in np.unique(np.r_[0.0, curve.events, np.nextafter(curve.events, 2), 1.0].clip(0, 1)):
        nodes, _ = paths.predict(t)
        cov, risk = curve.at(t)
        assert cov == pytest.approx(h.coverage[nodes].mean(), abs=1e-12)
        assert risk == pytest.approx(sample_loss(h, nodes, labels, "01").mean(), abs=1e-12)
    assert curve.coverage[-1] == pytest.approx(0.0) and curve.risk[-1] == pytest.approx(0.0)  # θ = 1: the root


def test_chunked_paths_equal_dense(toy):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, toy.n_leaves)) * 2
    dense_probs = node_probabilities(toy, softmax(logits))
    chunked = decision_paths_from_logits(toy, logits, rules=EXTRA_RULES + ("hf2",), chunk_size=7,
                                         precision="float64")
    for rule, paths in chunked.items():
        dense = any_decision_paths(toy, dense_probs, rule)
        for t in np.linspace(0, 1, 21):
            assert paths.predict(t)[0].tolist() == dense.predict(t)[0].tolist()


def test_float32_and_shipped_toy_labels(toy):
    probs = node_probabilities(toy, TOY_LEAF_PROBS.astype(np.float32))
    paths = any_decision_paths(toy, probs, "hf1")
    assert paths.values.dtype == np.float32
    curve = hierarchical_rc_curve(toy, probs, TOY_LABELS, "climbing")
    assert curve.haurc >= 0  # the paper rule is untouched by the new dispatch


# ------------------------------------------------------------------ names and bad input


def test_rule_names_and_labels():
    assert ALL_RULES[:4] == ("selective", "climbing", "jumping", "max_coverage")
    assert rule_label("hf1") == "hF1-optimal" and rule_label("hf0.5") == "hF0.5-optimal"
    assert rule_label("pareto") == "Pareto (Valmadre)" and rule_label("climbing") == "Climbing"
    assert check_rule("hf2.5") == "hf2.5"


@pytest.mark.parametrize(("rule", "message"), [
    ("hf0", "beta must be a finite number > 0, got 0.0"),
    ("hf-1", "beta must be a finite number > 0"),
    ("hfx", "unknown rule 'hfx'"),
    ("greedy", "unknown rule 'greedy'"),
])
def test_bad_rule_names(rule, message):
    with pytest.raises(ValueError, match=message):
        check_rule(rule)
    with pytest.raises(ValueError, match=message):
        decision_paths_from_logits(PAIRS, np.zeros((2, 4)), rules=(rule,))


def test_bad_metric_and_beta():
    with pytest.raises(ValueError, match="unknown metric 'wu_palmer'"):
        node_scores(PAIRS, [0], [0], "wu_palmer")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        expected_scores(PAIRS, np.ones((1, 7)), "hf", beta=-2)


def test_every_selectable_rule_has_a_colour_blind_safe_style():
    """No meaning on colour alone: any two rules differ in at least two of colour, dash and marker."""
    from itertools import combinations

    from hsc_core.report import style

    styles = {r: (style.rule_colour(r), style.rule_dash(r), style.rule_symbol(r)) for r in ALL_RULES}
    for a, b in combinations(ALL_RULES, 2):
        assert sum(x != y for x, y in zip(styles[a], styles[b], strict=True)) >= 2, (a, b)
    assert style.rule_colour("hf0.5") == style.rule_colour("hf1")
