"""The alternative ImageNet-1k trees, hierarchy sensitivity and the guarantee under shift."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hsc_core.core.hierarchy import Hierarchy, HierarchyError
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import build_imagenet_hierarchy as build
from hsc_core.datasets.imagenet import imagenet_hierarchy, imagenet_wnids
from hsc_core.datasets.imagenet_trees import TREES, imagenet_tree, induce_tree, permuted_leaves_tree
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.sensitivity import hierarchy_sensitivity, sensitivity_table
from hsc_core.evaluation.shift import guarantee_under_shift

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference"
IS_A = REFERENCE / "imagenet_wordnet_is_a.txt"
WORDNET = Path("/usr/share/wordnet/data.noun")


def _parent_ids(t: Hierarchy) -> dict[str, str | None]:
    """node id → parent id: independent of how tied internal nodes are numbered."""
    return {t.node_ids[i]: (t.node_ids[p] if p >= 0 and p != i else None) for i, p in enumerate(t.parent.tolist())}


# ---------------------------------------------------------------------------- the trees
def test_every_tree_has_the_1000_classes_in_order():
    for name in TREES:
        t = imagenet_tree(name)
        assert t.node_ids[:1000] == imagenet_wnids(), name
    with pytest.raises(ValueError, match="unknown ImageNet tree 'bogus'; known: wordnet, authors_is_a"):
        imagenet_tree("bogus")


def test_authors_tree_has_the_papers_shape():
    t = imagenet_tree("authors_is_a")
    # hsc_core/datasets/data/README.md: 1,361 nodes, root physical_entity, max leaf depth 13
    assert t.n_nodes == 1361 and t.node_ids[t.root] == "n00001930" and t.max_depth == 13
    assert dict(Counter(t.depth[:1000].tolist())) == {1: 1, 2: 14, 3: 38, 4: 109, 5: 202, 6: 193, 7: 143, 8: 99,
                                                      9: 78, 10: 36, 11: 52, 12: 33, 13: 2}


@pytest.mark.skipif(not IS_A.is_file(), reason="reference is-a file absent")
def test_authors_tree_equals_the_tree_from_imagenets_is_a_file():
    """The shipped tree (WordNet 3.0 + 44 shipped parent links) is the one the authors' code builds."""
    ref = Hierarchy.from_is_a_file(IS_A, imagenet_wnids())
    assert _parent_ids(imagenet_tree("authors_is_a")) == _parent_ids(ref)


@pytest.mark.skipif(not (IS_A.is_file() and WORDNET.is_file()), reason="is-a file or WordNet absent")
def test_overrides_and_authors_tree_rebuild_from_wordnet(tmp_path):
    hypernyms, names = build.parse_wordnet_nouns(WORDNET)
    derived = build.derive_is_a_overrides(IS_A, hypernyms, imagenet_wnids())
    assert derived == json.loads(build.OVERRIDES_FILE.read_text())
    assert len(derived["parents"]) == 44 and len(derived["not_in_wordnet"]) == 11
    rebuilt = build.tree_with_overrides(hypernyms, names, imagenet_wnids(), derived)
    out = tmp_path / "t.json"
    rebuilt.to_json(out)
    assert out.read_bytes() == build.AUTHORS_OUT.read_bytes()


def test_random_tree_keeps_the_shape_and_moves_the_classes():
    wn = imagenet_tree("wordnet")
    r0, r0b, r1 = permuted_leaves_tree(wn, 0), permuted_leaves_tree(wn, 0), permuted_leaves_tree(wn, 1)
    assert _parent_ids(r0) == _parent_ids(r0b) and _parent_ids(r0) != _parent_ids(r1)  # seeded
    assert sorted(r0.depth[:1000].tolist()) == sorted(wn.depth[:1000].tolist())  # the same depth profile
    assert np.array_equal(r0.leaf_count, wn.leaf_count)  # every internal node covers as many classes
    assert np.array_equal(np.sort(r0.depth), np.sort(wn.depth))
    moved = np.mean(r0.parent[:1000] != wn.parent[:1000])
    assert moved > 0.9  # the classes sit elsewhere
    # tench and goldfish are siblings in WordNet, almost surely not under the random control
    assert wn.parent[0] == wn.parent[1] and r0.parent[0] != r0.parent[1]


def test_induce_tree_groups_the_nearest_weight_vectors():
    # Two tight pairs of directions: (a, b) near x, (c, d) near y; scale does not matter (rows are normalised).
    w = np.array([[1.0, 0.05], [5.0, 0.0], [0.0, 1.0], [0.1, 3.0]])
    t = induce_tree(w, ["a", "b", "c", "d"])
    assert t.n_nodes == 7 and t.parent[0] == t.parent[1] and t.parent[2] == t.parent[3]
    assert t.parent[0] != t.parent[2] and t.parent[t.parent[0]] == t.root
    with pytest.raises(HierarchyError, match="one row per leaf"):
        induce_tree(w, ["a", "b"])


def test_shipped_induced_tree_is_binary_over_the_classes():
    t = imagenet_tree("induced_lite0")
    assert t.n_nodes == 1999 and all(len(c) == 2 for c in t.children[1000:])


def test_induced_tree_rebuilds_from_lite0s_weights(tmp_path):
    out = tmp_path / "induced.json"
    done = subprocess.run([sys.executable, "-m", "hsc_core.pipeline.induce_hierarchy", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _parent_ids(Hierarchy.from_json(out)) == _parent_ids(imagenet_tree("induced_lite0"))


# ---------------------------------------------------------------------------- hierarchy sensitivity
@pytest.fixture(scope="module")
def toy():
    deep = Hierarchy.from_parents([6, 6, 7, 7, 8, 8, 9, 9, 9, -1], 6)
    flat = Hierarchy.from_parents([6] * 6 + [-1], 6)
    logits, labels = synthetic_logits(deep, 400, seed=3)
    return deep, flat, logits, labels


def test_sensitivity_rows_are_each_trees_own_evaluation(toy):
    deep, flat, logits, labels = toy
    rows = hierarchy_sensitivity(logits, labels, {"deep": deep, "flat": flat}, name="m", n_resamples=200)
    for tree_name, tree in (("deep", deep), ("flat", flat)):
        es = ModelEvaluation(tree, logits, labels, name="m", dataset=f"data:{tree_name}").setting(False)
        mine = [r for r in rows if r["dataset"] == f"data:{tree_name}"]
        ref = es.results(intervals=True, n_resamples=200)
        assert [(r["rule"], r["metric"], r["value"], r["ci_low"]) for r in mine] == \
               [(r["rule"], r["metric"], r["value"], r["ci_low"]) for r in ref]
    table = {(d["tree"], d["rule"]): d for d in sensitivity_table(rows)}
    # A flat tree: every rule is Selective (gain 0); Selective's hAURC does not depend on the tree.
    assert table[("flat", "climbing")]["gain_percent"] == pytest.approx(0.0, abs=1e-9)
    assert table[("flat", "selective")]["haurc_x1000"] == pytest.approx(table[("deep", "selective")]["haurc_x1000"])
    assert table[("deep", "climbing")]["haurc_x1000_low"] <= table[("deep", "climbing")]["haurc_x1000"]


def test_sensitivity_refuses_trees_over_other_leaves(toy):
    deep, _, logits, labels = toy
    other = Hierarchy.from_parents([6] * 6 + [-1], 6, node_ids=[f"x{i}" for i in range(7)])
    with pytest.raises(ValueError, match="tree 'other' has other leaves than 'deep'"):
        hierarchy_sensitivity(logits, labels, {"deep": deep, "other": other})


def test_cli_hierarchy_sensitivity(tmp_path, capsys):
    from hsc_core.cli import main

    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 300, seed=0)
    f = save_logits(tmp_path / "m.npz", logits, labels, [f"s{i}" for i in range(300)], dtype="float32")
    out = tmp_path / "s.csv"
    assert main(["hierarchy-sensitivity", str(f), "--trees", "wordnet,random", "--n-resamples", "50",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "random          climbing" in printed and "wrote" in printed
    assert {line.split(",")[1] for line in out.read_text().splitlines()[1:]} == {"imagenet1k:wordnet",
                                                                                "imagenet1k:random"}
    assert main(["hierarchy-sensitivity", str(f), "--trees", "wordnet,oak"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: unknown tree 'oak'; known: wordnet, authors_is_a, induced_lite0, random"
    small = save_logits(tmp_path / "small.npz", logits[:, :10], labels % 10, [f"s{i}" for i in range(300)])
    assert main(["hierarchy-sensitivity", str(small)]) == 2
    assert "1000" in capsys.readouterr().err


# ---------------------------------------------------------------------------- the guarantee under shift
def test_guarantee_under_shift_without_shift_is_the_clean_split():
    """Shifted data identical to the clean data give the clean numbers, which are the page's single split."""
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 800, top1=0.8, seed=4)
    ids = np.array([f"s{i}" for i in range(800)])
    es = ModelEvaluation(h, logits, labels, sample_ids=ids).setting(False)
    same = ModelEvaluation(h, logits.copy(), labels, sample_ids=ids).setting(False)
    res = guarantee_under_shift(es, same, n_cal=300, alpha=0.1, delta=0.1, seed=2)
    assert res.shifted_accuracy == res.clean_accuracy and res.shifted_coverage == res.clean_coverage
    # by hand: the same stratified split and θ̂ as the Guaranteed-accuracy page and the decision card
    from hsc_core.core.thresholds import select_threshold, theorem1_epsilon
    from hsc_core.evaluation.threshold import calibration_draw

    cal, test = calibration_draw(es.labels, 300, 2)
    theta = select_threshold(es.tight_thresholds()[cal], 0.1)
    rows = np.flatnonzero(test)
    nodes = es.predict("climbing", theta)[0][rows]
    assert res.theta_hat == theta == es.threshold(0.9, "theorem1", n=300, seed=2).theta
    assert res.epsilon == theorem1_epsilon(300, 0.1, 0.1)
    assert res.clean_accuracy == pytest.approx(es.correctness(nodes, rows).mean())
    assert res.n_cal + res.n_test == es.n


def test_guarantee_fails_under_a_strong_shift():
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 800, top1=0.85, seed=4)
    worse, _ = synthetic_logits(h, 800, top1=0.3, seed=9)
    ids = np.array([f"s{i}" for i in range(800)])
    clean = ModelEvaluation(h, logits, labels, sample_ids=ids).setting(False)
    shifted = ModelEvaluation(h, worse, labels, sample_ids=ids).setting(False)
    res = guarantee_under_shift(clean, shifted, n_cal=400, alpha=0.1, delta=0.1)
    assert res.clean_holds and not res.shifted_holds
    assert res.as_row()["shifted_holds"] is False
    other = ModelEvaluation(h, worse, labels, sample_ids=ids[::-1].copy()).setting(False)
    with pytest.raises(ValueError, match="same images"):
        guarantee_under_shift(clean, other, n_cal=400, alpha=0.1, delta=0.1)
    with pytest.raises(ValueError, match="n_cal must be"):
        guarantee_under_shift(clean, shifted, n_cal=clean.n, alpha=0.1, delta=0.1)


@pytest.mark.skipif(not (REPO / "cached_logits" / "shifted").is_dir(), reason="no shipped shifted logits")
def test_shipped_shifted_logits_share_the_clean_images():
    clean = load_logits(REPO / "cached_logits" / "efficientnet_lite0.npz")
    for p in sorted((REPO / "cached_logits" / "shifted").glob("*.npz")):
        b = load_logits(p, require_manifest=True)
        assert b.sample_ids.tolist() == clean.sample_ids.tolist() and b.manifest["shifted"] is True
