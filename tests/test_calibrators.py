"""Calibrator and confidence-score registries (issue 31): brute-force node scores on a toy tree,
monotonicity, the defaults' identity with today's settings, and ``hsc evaluate``'s new flags."""

from __future__ import annotations

import numpy as np
import pytest

from hsc_core.core.calibrators import (
    calibrator_names,
    fit_calibrator,
    get_calibrator,
    matrix_memory_bytes,
    subtree_max,
)
from hsc_core.core.confidence import (
    compatible,
    confidence_names,
    confidence_node_scores,
    energy,
    fit_node_scorer,
    get_confidence,
    outside_max,
)
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.logit_chunks import decision_paths_from_logits
from hsc_core.core.rules import decision_paths
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.thresholds import climbing_tight_thresholds
from hsc_core.evaluation.model import ModelEvaluation

# leaves 0-4; A = {0, 1} (5), B = {2, 3, 4} (6), C = {3, 4} under B (7)... root 8
TREE = Hierarchy.from_parents([5, 5, 6, 7, 7, 8, 8, 6, -1], n_leaves=5)
P = np.array([[0.4, 0.1, 0.2, 0.25, 0.05], [0.05, 0.05, 0.3, 0.3, 0.3], [1.0, 0.0, 0.0, 0.0, 0.0]])


def _coarsened(p: np.ndarray, leaves: list[int]) -> np.ndarray:
    """p with ``leaves`` merged into one class (first), the others kept."""
    rest = [y for y in range(p.size) if y not in leaves]
    return np.r_[p[leaves].sum(), p[rest]]


def _brute(name: str, p: np.ndarray, leaves: list[int]) -> float:
    q = _coarsened(p, leaves)
    if name == "softmax":
        return q[0]
    if name == "margin":
        return max(0.0, q[0] - (q[1:].max() if q.size > 1 else 0.0))
    if name == "entropy":
        nz = q[q > 0]
        return 1 - float(-(nz * np.log(nz)).sum()) / np.log(p.size)
    if name == "doctor":
        return float((q ** 2).sum())
    raise AssertionError(name)


def _leaves(v: int) -> list[int]:
    return [int(y) for y in np.flatnonzero(TREE.leaf_matrix[v].toarray()[0])]


@pytest.mark.parametrize("name", ["softmax", "margin", "entropy", "doctor"])
def test_node_scores_are_the_flat_score_of_the_coarsened_distribution(name):
    got = confidence_node_scores(name, TREE, P)
    for i, p in enumerate(P):
        for v in range(TREE.n_nodes):
            want = 1.0 if v == TREE.root else _brute(name, p, _leaves(v))
            if name != "softmax" and v < TREE.n_leaves and v != p.argmax():
                want = -1.0  # never predicted: the rules' arg-max leaf is the distribution's
            assert got[i, v] == pytest.approx(want, abs=1e-12), (name, i, v)


def test_hand_computed_margin_and_doctor():
    # sample 0: node A = {0, 1} has 0.5, the best leaf outside is 3 (0.25): margin 0.25
    assert confidence_node_scores("margin", TREE, P)[0, 5] == pytest.approx(0.25)
    # leaf 0 vs leaf 3: 0.4 − 0.25
    assert confidence_node_scores("margin", TREE, P)[0, 0] == pytest.approx(0.15)
    assert confidence_node_scores("margin", TREE, P)[0, 3] == -1.0  # not the arg-max: never predicted
    # Gini at B = {2, 3, 4}: 0.5² + 0.4² + 0.1² = 0.42
    assert confidence_node_scores("doctor", TREE, P)[0, 6] == pytest.approx(0.42)


@pytest.mark.parametrize("name", ["softmax", "margin", "entropy", "doctor", "energy"])
def test_every_score_lies_in_0_1_and_never_decreases_towards_the_root(name):
    h = Hierarchy.from_parents([8, 8, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, -1], n_leaves=8)
    logits, _ = synthetic_logits(h, 300, seed=1)
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    s = confidence_node_scores(name, h, p, z, {"m": 5.0, "s": 2.0})
    top = p.argmax(axis=1)
    # the rules' arg-max leaf is the distribution's; every score a rule can return lies in [0, 1]
    np.testing.assert_array_equal(s[:, :8].argmax(axis=1), top)
    real = s.copy()
    real[:, :8] = s[np.arange(300), top][:, None]
    assert real.min() >= 0 and s.max() <= 1 and (s[:, h.root] == 1).all()
    child = np.arange(h.n_nodes - 1)
    assert (s[:, h.parent[child]] >= s[:, child] - 1e-12).all()


def test_outside_max_and_subtree_max_by_brute_force():
    rng = np.random.default_rng(0)
    p = rng.random((4, 5))
    out = outside_max(TREE, p)
    sub = subtree_max(TREE, np.c_[p, np.zeros((4, 4))])
    for v in range(TREE.n_nodes):
        inside = _leaves(v)
        outside = [y for y in range(5) if y not in inside]
        np.testing.assert_allclose(out[:, v], p[:, outside].max(axis=1) if outside else 0.0)
        np.testing.assert_allclose(sub[:, v], p[:, inside].max(axis=1))


def test_energy_is_log_sum_exp_and_the_same_for_every_non_root_node():
    z = np.array([[1.0, 2.0, 3.0, 0.0, -1.0]])
    assert energy(z)[0] == pytest.approx(np.log(np.exp(z).sum()))
    s = confidence_node_scores("energy", TREE, np.array([[0.1, 0.1, 0.4, 0.2, 0.2]]), z, {"m": energy(z)[0], "s": 1.0})
    assert (s[0, 5:-1] == 0.5).all() and s[0, 2] == 0.5 and s[0, TREE.root] == 1.0


def test_unknown_names_raise_one_line_naming_the_choices():
    with pytest.raises(ValueError, match="unknown calibrator 'x'; choose one of none, temperature, vector"):
        get_calibrator("x")
    with pytest.raises(ValueError, match="unknown confidence score 'y'; choose one of softmax, margin"):
        get_confidence("y")
    assert calibrator_names() == ("none", "temperature", "vector", "matrix", "dirichlet", "isotonic",
                                  "depth_temperature")
    assert confidence_names() == ("softmax", "margin", "entropy", "doctor", "energy", "member_mean",
                                  "member_disagreement")
    assert not compatible("depth_temperature", "margin") and compatible("depth_temperature", "softmax")
    assert not compatible("isotonic", "energy") and compatible("isotonic", "margin")


def test_energy_after_isotonic_is_refused_in_one_line(toy_eval):
    """Isotonic's calibrated logits are log-probabilities: every energy is log 1 = 0 up to rounding, so the
    score would rank by floating-point noise (issue 41)."""
    from hsc_core.core.calibrators import fit_calibrator

    cal = fit_calibrator("isotonic", toy_eval.hierarchy, toy_eval.logits[:300], toy_eval.labels[:300])
    assert np.abs(energy(cal.logits(toy_eval.logits[:50]))).max() < 1e-12
    with pytest.raises(ValueError, match="confidence 'energy' after calibrator 'isotonic' is refused") as info:
        toy_eval.scored("isotonic", "energy").haurc("climbing")
    assert "\n" not in str(info.value)


def test_matrix_fit_refuses_a_class_count_over_the_memory_budget(monkeypatch):
    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", "1")
    h = Hierarchy.flat(300)
    assert matrix_memory_bytes(300) > 2**20
    with pytest.raises(ValueError, match="matrix scaling of 300 classes needs about 18 MB"):
        fit_calibrator("matrix", h, np.zeros((2, 300)), np.array([0, 1]))


def test_depth_temperature_on_a_flat_tree_is_temperature_scaling():
    h = Hierarchy.flat(6)
    logits, labels = synthetic_logits(h, 500, seed=2)
    t = fit_calibrator("temperature", h, logits, labels).params["T"]
    td = fit_calibrator("depth_temperature", h, logits, labels).params["T"]
    assert td[1] == pytest.approx(t, rel=2e-3)  # xatol 1e-3 on log T


def test_depth_temperature_scores_are_monotone_and_use_each_depths_t():
    logits, labels = synthetic_logits(TREE, 400, seed=4)
    cal = fit_calibrator("depth_temperature", TREE, logits, labels)
    s = cal.node_scores(TREE, logits[:50].astype(np.float64))
    child = np.arange(TREE.n_nodes - 1)
    assert (s[:, TREE.parent[child]] >= s[:, child]).all()
    # depth-1 node A's score is at least its own probability at T_1
    z = logits[:50].astype(np.float64) / cal.params["T"][1]
    q = np.exp(z - z.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    assert (s[:, 5] >= q[:, :2].sum(axis=1) - 1e-12).all()


def test_scorer_paths_equal_dense_rules_on_the_scores_and_tight_thresholds_hold():
    logits, labels = synthetic_logits(TREE, 300, seed=5)
    scorer = fit_node_scorer(TREE, "vector", "margin", logits[:100], labels[:100])
    dense = scorer(logits[100:].astype(np.float32))
    paths = decision_paths_from_logits(TREE, logits[100:], rules=("climbing",), chunk_size=37, scorer=scorer)
    ref = decision_paths(TREE, dense, "climbing")
    np.testing.assert_array_equal(paths["climbing"].nodes, ref.nodes)
    np.testing.assert_array_equal(paths["climbing"].values, ref.values)
    # a path-monotone score: Climbing is correct at θ iff θ > the sample's tight threshold
    tight = climbing_tight_thresholds(TREE, dense, labels[100:])
    for theta in (0.05, 0.3, 0.6, 0.9):
        nodes, _ = paths["climbing"].predict(theta)
        correct = TREE.is_ancestor(nodes, labels[100:])
        np.testing.assert_array_equal(correct, tight < theta)


@pytest.fixture(scope="module")
def toy_eval() -> ModelEvaluation:
    logits, labels = synthetic_logits(TREE, 2000, seed=6)
    return ModelEvaluation(TREE, logits, labels, name="toy")


def test_default_pairs_are_todays_settings(toy_eval):
    assert toy_eval.scored("none", "softmax") is toy_eval.setting(False)
    assert toy_eval.scored("temperature", "softmax") is toy_eval.setting(True)
    assert toy_eval.scorer("temperature", "softmax").calibration.temperature == toy_eval.temperature


FAST = tuple(c for c in calibrator_names() if c not in ("matrix", "dirichlet"))


@pytest.mark.parametrize("calibrator", FAST)
def test_every_calibrator_runs_every_rule(toy_eval, calibrator):
    _runs(toy_eval, calibrator)


@pytest.mark.parametrize("calibrator", ["matrix", "dirichlet"])
def test_matrix_calibrators_run_every_rule(toy_eval, calibrator):  # ~2 s of L-BFGS each: slow tier
    _runs(toy_eval, calibrator)


def _runs(toy_eval: ModelEvaluation, calibrator: str) -> None:
    es = toy_eval.scored(calibrator, "softmax")
    assert es.calibrator == calibrator and es.confidence == "softmax"
    rows = es.results(rules=("selective", "climbing"))
    assert {(r["calibrator"], r["confidence"]) for r in rows} == {(calibrator, "softmax")}
    assert ("temperature" in {r["metric"] for r in rows}) == (calibrator == "temperature")
    assert 0 < es.haurc("climbing") < 1


@pytest.mark.parametrize("confidence", [c for c in confidence_names() if not get_confidence(c).needs_members])
def test_every_confidence_runs_every_rule(toy_eval, confidence):
    es = toy_eval.scored("temperature", confidence)
    for rule in ("selective", "climbing", "jumping", "max_coverage"):
        assert 0 < es.haurc(rule) < 1
    if confidence == "energy":  # coarsening-invariant: every rule is Selective
        assert es.gain("climbing") == 0.0
    # every score predicts the same arg-max leaves as softmax over the same calibrated distribution
    np.testing.assert_array_equal(es.leaf_pred, toy_eval.setting(True).leaf_pred)
    assert es.haurc("selective") < 0.3


# ---------------------------------------------------------------------------- hsc evaluate
@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    from conftest import random_tree

    from hsc_core.datasets import logits_io

    root = tmp_path_factory.mktemp("calib")
    tree = random_tree(20, seed=1)
    tree.to_json(root / "tree.json")
    logits, labels = synthetic_logits(tree, 600, top1=0.6, seed=7)
    with pytest.MonkeyPatch.context() as mp:  # no library versions: recording them imports torch
        mp.setattr(logits_io, "library_versions", dict)
        logits_io.save_logits(root / "m.npz", logits, labels, np.array([f"s{i}" for i in range(600)]),
                              manifest={"model": "m"}, dtype="float32")
    return root


def _cli(capsys, *argv):
    from hsc_core.cli import main

    code = main([str(a) for a in argv], prog="hsc")
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("flag", "what", "good"), [("--calibrator", "calibrator", "vector"),
                                                   ("--confidence", "confidence score", "margin")])
def test_evaluate_unknown_name_exits_2_with_one_line_naming_the_choices(capsys, model_file, flag, what, good):
    code, _, err = _cli(capsys, "evaluate", model_file / "m.npz", "--hierarchy", model_file / "tree.json",
                        flag, f"{good},bogus", "--out", model_file / "x.csv", "--no-progress")
    assert code == 2 and err.count("\n") == 1
    assert f"{flag}: unknown {what} 'bogus'; choose one of" in err


def test_evaluate_rows_carry_calibrator_and_confidence(capsys, model_file):
    import csv

    out = model_file / "r.csv"
    code, stdout, err = _cli(capsys, "evaluate", model_file / "m.npz", "--hierarchy", model_file / "tree.json",
                             "--rules", "selective,climbing", "--calibrator", "none,isotonic,depth_temperature",
                             "--confidence", "softmax,margin", "--out", out, "--no-progress")
    assert code == 0, err
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    pairs = list(dict.fromkeys((r["calibrator"], r["confidence"]) for r in rows))
    # depth_temperature scores nodes directly: with softmax only
    assert pairs == [("none", "softmax"), ("none", "margin"), ("isotonic", "softmax"), ("isotonic", "margin"),
                     ("depth_temperature", "softmax")]
    assert {r["ts"] for r in rows if r["calibrator"] == "none"} == {"false"}
    assert {r["ts"] for r in rows if r["calibrator"] != "none"} == {"true"}
    # the same none/softmax numbers as a default run's without-TS rows
    default = model_file / "d.csv"
    assert _cli(capsys, "evaluate", model_file / "m.npz", "--hierarchy", model_file / "tree.json", "--rules",
                "selective,climbing", "--out", default, "--no-progress")[0] == 0
    base = [r for r in csv.DictReader(default.open(encoding="utf-8")) if r["ts"] == "false"]
    mine = [r for r in rows if (r["calibrator"], r["confidence"]) == ("none", "softmax")]
    assert [(r["metric"], r["rule"], r["loss"], r["value"]) for r in mine] == \
           [(r["metric"], r["rule"], r["loss"], r["value"]) for r in base]


def test_older_result_rows_read_as_the_two_ts_settings():
    from hsc_core.evaluation.results import is_default_pair, wide_table, with_score_columns

    old = {"ts": "true", "metric": "haurc", "value": 0.04}
    assert with_score_columns(old)["calibrator"] == "temperature"
    assert with_score_columns({"ts": False, "calibrator": float("nan")})["calibrator"] == "none"
    assert with_score_columns(old)["confidence"] == "softmax"
    assert is_default_pair(old) and not is_default_pair({**old, "calibrator": "vector"})
    row = {"model": "m", "dataset": "", "subset": "all", "n_eval": 9, "rule": "climbing", "loss": "01",
           "ts": True, "metric": "haurc", "value": 0.04}
    # the paper's tables keep showing the TS setting's number, not another pair's
    table = wide_table([row, {**row, "calibrator": "isotonic", "value": 0.5}])
    assert table[0]["hAURC×1000 Climbing (TS)"] == pytest.approx(40.0)
