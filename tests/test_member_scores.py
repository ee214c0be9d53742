"""The member confidence scores (issue 31): hand-computed on a toy tree, monotone, loaded through
an ensemble's manifest with one-line errors, on the shipped ensemble, and in ``hsc evaluate``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import REPO

from hsc_core.core.calibrators import FittedCalibrator
from hsc_core.core.confidence import compatible, member_node_scores
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import logits_io
from hsc_core.datasets.logits_io import load_logits
from hsc_core.datasets.members import MembersError, load_members, member_names
from hsc_core.evaluation.calibrator_benchmark import calibrator_benchmark
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.resolve import resolve_hierarchy

# leaves 0-4; A = {0, 1} (5), B = {2, 3, 4} (6), C = {3, 4} under B (7), root 8
TREE = Hierarchy.from_parents([5, 5, 6, 7, 7, 8, 8, 6, -1], n_leaves=5)
M1 = np.array([[0.5, 0.1, 0.1, 0.2, 0.1]])  # top leaf 0
M2 = np.array([[0.1, 0.1, 0.1, 0.3, 0.4]])  # top leaf 4
ENSEMBLE = REPO / "cached_logits" / "variants" / "efficientnet_lite012__ensemble.npz"


def _nodes(p: np.ndarray) -> np.ndarray:
    return node_probabilities(TREE, p)


def test_member_mean_and_disagreement_by_hand():
    members = [_nodes(M1), _nodes(M2)]
    mean = member_node_scores("member_mean", TREE, members)
    # A: (0.6 + 0.2) / 2; B: (0.4 + 0.8) / 2; C: (0.3 + 0.7) / 2; leaf 4: (0.1 + 0.4) / 2
    np.testing.assert_allclose(mean[0, [5, 6, 7, 4, 8]], [0.4, 0.6, 0.5, 0.25, 1.0])
    agree = member_node_scores("member_disagreement", TREE, members)
    # votes: member 1 for leaf 0 (in A), member 2 for leaf 4 (in C ⊂ B); the mean is the third vote
    np.testing.assert_allclose(agree[0, [0, 4, 5, 6, 7, 2, 8]],
                               [(1 + 0.3) / 3, (1 + 0.25) / 3, (1 + 0.4) / 3, (1 + 0.6) / 3, (1 + 0.5) / 3,
                                (0 + 0.1) / 3, 1.0])


@pytest.mark.parametrize("name", ["member_mean", "member_disagreement"])
def test_member_scores_never_decrease_towards_the_root(name):
    rng = np.random.default_rng(4)
    members = [_nodes(rng.dirichlet(np.ones(5), size=50)) for _ in range(3)]
    s = member_node_scores(name, TREE, members)
    for v in range(TREE.n_nodes - 1):
        assert (s[:, TREE.parent[v]] >= s[:, v] - 1e-12).all(), v
    assert (s >= 0).all() and (s <= 1 + 1e-12).all() and np.allclose(s[:, TREE.root], 1.0)
    assert compatible("depth_temperature", name)  # means of node scores: any calibrator


def test_member_names_come_from_the_manifest():
    assert member_names({"member_files": [{"file": "a"}, {"file": "b"}]}) == ("a", "b")
    assert member_names({"variant": {"ensemble": ["x", "y"]}}) == ("x", "y")
    assert member_names({"variant": {"tag": "mcdropout10", "mc_dropout_passes": 10}}) == ()


@pytest.fixture(scope="module")
def ensemble_dir(tmp_path_factory):
    """An ensemble of two synthetic members in variants/, its members one folder up (the shipped layout)."""
    root = tmp_path_factory.mktemp("ens")
    (root / "variants").mkdir()
    logits, labels = synthetic_logits(TREE, 200, top1=0.6, seed=1)
    ids = np.array([f"s{i}" for i in range(200)])
    with pytest.MonkeyPatch.context() as mp:  # no library versions: recording them imports torch
        mp.setattr(logits_io, "library_versions", dict)
        for k, name in enumerate(("m1", "m2")):
            logits_io.save_logits(root / f"{name}.npz", logits + k, labels, ids, manifest={"model": name},
                                  dtype="float32")
        logits_io.save_logits(root / "variants" / "ens.npz", logits, labels, ids, dtype="float32",
                              manifest={"model": "ens", "member_files": [{"file": "m1"}, {"file": "m2"}]})
        logits_io.save_logits(root / "shuffled.npz", logits[::-1], labels[::-1], ids[::-1], dtype="float32",
                              manifest={"model": "shuffled"})
    return root


def test_members_load_beside_or_above_the_variant_and_are_checked(ensemble_dir):
    variant = load_logits(ensemble_dir / "variants" / "ens.npz")
    found = load_members(ensemble_dir / "variants" / "ens.npz", variant.manifest, variant.sample_ids,
                         variant.labels, 5)
    assert list(found) == ["m1", "m2"]
    np.testing.assert_allclose(found["m2"], variant.logits + 1, rtol=1e-6)

    def fails(manifest, match):
        with pytest.raises(MembersError, match=match) as info:
            load_members(ensemble_dir / "variants" / "ens.npz", manifest, variant.sample_ids, variant.labels, 5)
        assert "\n" not in str(info.value)
    fails({"member_files": [{"file": "gone"}]}, "member gone.npz of ens.npz is neither beside it")
    fails({"member_files": [{"file": "shuffled"}]}, "does not hold the same samples in the same order")
    fails({"member_files": [{"file": "../m1"}]}, "must be a file name, not a path")
    fails({"model": "ens"}, "ens.npz has no ensemble members")
    with pytest.raises(MembersError, match="has 5 classes, not 7"):
        load_members(ensemble_dir / "variants" / "ens.npz", variant.manifest, variant.sample_ids, variant.labels, 7)


def test_member_scores_of_an_ensemble_through_the_layer(ensemble_dir):
    path = ensemble_dir / "variants" / "ens.npz"
    bundle = load_logits(path)
    ev = ModelEvaluation.from_bundle(bundle, TREE, file=str(path))
    assert ev.has_members
    es = ev.scored("temperature", "member_mean")
    # the same calibrator maps each member: the mean of the two members' calibrated node scores
    cal = ev.fitted_calibrator("temperature")
    want = np.mean([cal.node_scores(TREE, m[es.rows[:3]].astype(np.float32)) for m in ev.member_logits()], axis=0)
    np.testing.assert_allclose(es.node_probabilities([0, 1, 2]), want, rtol=1e-6)
    rows = calibrator_benchmark(ev, calibrators=["temperature"], intervals=False)
    assert [r["confidence"] for r in rows][-2:] == ["member_mean", "member_disagreement"]
    plain = ModelEvaluation(TREE, bundle.logits, bundle.labels, name="plain")
    assert not plain.has_members
    assert "member_mean" not in {r["confidence"] for r in calibrator_benchmark(
        plain, calibrators=["temperature"], intervals=False)}
    with pytest.raises(MembersError, match="plain has no ensemble members"):
        plain.scored("temperature", "member_disagreement")
    given = ModelEvaluation(TREE, bundle.logits, bundle.labels, members={"a": bundle.logits, "b": bundle.logits})
    assert isinstance(given.fitted_calibrator("none"), FittedCalibrator)
    # two identical members, no calibration: their mean is the model's own softmax
    assert given.scored("none", "member_mean").haurc("climbing") == pytest.approx(
        given.scored("none", "softmax").haurc("climbing"), abs=1e-12)


def test_shipped_ensemble_member_mean_is_its_own_softmax():
    bundle = load_logits(ENSEMBLE)
    dataset, tree = resolve_hierarchy(bundle, "ens")
    ev = ModelEvaluation.from_bundle(bundle, tree, dataset=dataset, file=str(ENSEMBLE))
    assert ev.has_members and len(ev.member_logits()) == 3
    # the file stores log mean softmax of the members (float16): without calibration, the same ranking
    mean, own = ev.scored("none", "member_mean"), ev.scored("none", "softmax")
    assert mean.haurc("climbing") == pytest.approx(own.haurc("climbing"), abs=5e-4)


def _cli(capsys, *argv):
    from hsc_core.cli import main

    code = main([str(a) for a in argv], prog="hsc")
    out, err = capsys.readouterr()
    return code, out, err


def test_evaluate_member_score_on_a_model_without_members_exits_2_saying_why(capsys, ensemble_dir, tmp_path):
    tree = tmp_path / "tree.json"
    TREE.to_json(tree)
    code, _, err = _cli(capsys, "evaluate", ensemble_dir / "m1.npz", "--hierarchy", tree,
                        "--confidence", "member_mean", "--out", tmp_path / "x.csv", "--no-progress")
    assert code == 2 and err.count("\n") == 1
    assert "m1 has no ensemble members" in err
    for suffix in (".npz", ".json"):  # the variant alone: its members are neither beside it nor above
        shutil.copy(ensemble_dir / "variants" / f"ens{suffix}", tmp_path / f"ens{suffix}")
    code, _, err = _cli(capsys, "evaluate", tmp_path / "ens.npz", "--hierarchy", tree,
                        "--confidence", "member_mean", "--out", tmp_path / "y.csv", "--no-progress")
    assert code == 2 and "member m1.npz of ens.npz is neither beside it" in err
    code, out, err = _cli(capsys, "evaluate", ensemble_dir / "variants" / "ens.npz", "--hierarchy", tree,
                          "--confidence", "softmax,member_disagreement", "--calibrator", "temperature",
                          "--out", tmp_path / "z.csv", "--no-progress")
    assert code == 0, err
    assert "member_disagreement" in (tmp_path / "z.csv").read_text()


def test_report_benchmark_offers_the_member_scores_to_the_ensemble_only(capsys, ensemble_dir, tmp_path):
    tree = tmp_path / "tree.json"
    TREE.to_json(tree)
    for model, members in (("variants/ens.npz", True), ("m1.npz", False)):
        out = tmp_path / f"{members}.html"
        code, _, err = _cli(capsys, "report", ensemble_dir / model, "--hierarchy", tree, "--calibrator", "temperature",
                            "--out", out, "--n-resamples", "100")
        assert code == 0, err
        assert ("Member agreement" in out.read_text(encoding="utf-8")) == members


def test_evaluate_cache_recomputes_member_scores_when_a_member_file_changes(capsys, ensemble_dir, tmp_path):
    """The resumable cache keys member-score rows by the member files too: a changed member
    recomputes them, an unchanged one reuses them (softmax-only keys ignore the members)."""
    import pandas as pd

    root = tmp_path / "ens"
    shutil.copytree(ensemble_dir, root)
    tree = tmp_path / "tree.json"
    TREE.to_json(tree)
    out = tmp_path / "r.csv"

    def haurc() -> dict:
        code, _, err = _cli(capsys, "evaluate", root / "variants" / "ens.npz", "--hierarchy", tree,
                            "--confidence", "softmax,member_mean", "--calibrator", "none", "--out", out,
                            "--no-progress")
        assert code == 0, err
        rows = pd.read_csv(out)
        rows = rows[(rows["metric"] == "haurc") & (rows["rule"] == "selective")]
        return dict(zip(rows["confidence"], rows["value"], strict=True))

    first = haurc()
    assert haurc() == first  # resumed from the cache
    bundle = logits_io.load_logits(root / "m2.npz")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logits_io, "library_versions", dict)
        logits_io.save_logits(root / "m2.npz", bundle.logits * 3.0, bundle.labels, bundle.sample_ids,
                              manifest={"model": "m2"}, dtype="float32")
    second = haurc()
    assert second["softmax"] == first["softmax"]  # the ensemble's own logits did not change
    assert second["member_mean"] != first["member_mean"]
