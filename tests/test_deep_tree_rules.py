"""Every rule on deep trees (issue 42, item 3): a 1,000-leaf caterpillar (depth 999) through
``hsc evaluate`` with the default rules, whose hFβ-optimal rules once asked for 2.77 TiB
(``_hf_mixed_scores`` was (leaf depths) × depth per candidate: quadratic in the depth)."""

from __future__ import annotations

import csv
import resource

import numpy as np
import pytest

from hsc_core.cli import main
from hsc_core.core import metric_rules
from hsc_core.core.metric_rules import ALL_RULES, EXTRA_RULES, any_decision_paths
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import logits_io
from hsc_core.datasets.formats import load_hierarchy


def caterpillar_newick(n_leaves: int) -> str:
    """``(l0,(l1,(l2,…(l{n-2},l{n-1}))));``: every internal node has one leaf and the rest below it."""
    text = f"l{n_leaves - 1}"
    for i in range(n_leaves - 2, -1, -1):
        text = f"(l{i},{text})"
    return text + ";"


def _caterpillar(tmp_path, n_leaves):
    tree = tmp_path / f"cat{n_leaves}.nwk"
    tree.write_text(caterpillar_newick(n_leaves), encoding="utf-8")
    classes = tmp_path / f"cat{n_leaves}_classes.txt"
    classes.write_text("\n".join(f"l{i}" for i in range(n_leaves)) + "\n", encoding="utf-8")
    return tree, classes, load_hierarchy(tree, classes)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_metric_rules_on_a_caterpillar_equal_the_unpruned_reference(tmp_path, beta):
    _, _, h = _caterpillar(tmp_path, 60)
    assert h.max_depth == 59 and np.unique(h.depth[: h.n_leaves]).size > metric_rules.HF_LEAF_DEPTH_CLASSES
    logits, _ = synthetic_logits(h, 150, top1=0.5, seed=2)
    probs = node_probabilities(h, softmax(logits))
    for rule in (f"hf{beta:g}", "min_severity", "max_information"):
        got = any_decision_paths(h, probs, rule)
        ref = any_decision_paths(h, probs, rule, pruned=False)
        assert np.array_equal(got.nodes, ref.nodes) and np.array_equal(got.values, ref.values), rule


def test_pair_scores_down_the_tree_equal_those_along_each_path(tmp_path):
    _, _, h = _caterpillar(tmp_path, 40)
    logits, _ = synthetic_logits(h, 30, seed=1)
    probs = node_probabilities(h, softmax(logits))
    r, c = np.divmod(np.arange(30 * h.n_nodes), h.n_nodes)  # every pair: the tree-wide sums win
    few = np.arange(30), np.full(30, h.n_leaves)  # one shallow pair per row: the paths win
    for metric in ("severity", "information", "hf"):
        full = metric_rules._pair_scores(h, probs, r, c, metric, 1.0)
        part = metric_rules._pair_scores(h, probs, *few, metric, 1.0)
        assert np.array_equal(full.reshape(30, h.n_nodes)[:, h.n_leaves], part), metric  # same bits


def test_default_rules_evaluate_a_1000_deep_caterpillar(monkeypatch, tmp_path, capsys):
    tree, classes, h = _caterpillar(tmp_path, 1000)
    assert h.max_depth == 999
    logits, labels = synthetic_logits(h, 300, top1=0.5, seed=0)
    monkeypatch.setattr(logits_io, "library_versions", dict)  # keep torch out of the manifest
    model = logits_io.save_logits(tmp_path / "m.npz", logits, labels, [f"s{i}" for i in range(300)])
    out = tmp_path / "res.csv"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = main(["evaluate", str(model), "--hierarchy", str(tree), "--classes", str(classes), "--out", str(out),
                 "--no-progress"], prog="hsc")
    assert code == 0, capsys.readouterr().err
    grown_gb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024**2
    assert grown_gb < 1.0  # the quadratic form asked for 2.77 TiB
    with out.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["metric"] == "haurc"]
    assert {r["rule"] for r in rows} == set(ALL_RULES)  # every rule, the paper's four and EXTRA_RULES
    assert len(rows) == len(ALL_RULES) * 2 * 2 and set(EXTRA_RULES) < set(ALL_RULES)
    assert all(0.0 <= float(r["value"]) <= 1.0 for r in rows)
