"""Every guarantee: LTT against MAPIE (the oracle), the conformal node family against a brute-force
LCA, the batched calibrations against the one-set reference functions, and every method's
guarantee measured empirically over repeated calibration sets (synthetic data and the shipped
logits)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hsc_core.core.conformal import lca_set_paths, mondrian_groups, weighted_order_statistic
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.ltt import (
    binomial_p_values,
    fwer_reject,
    hoeffding_bentkus_p_values,
    ltt_theta_grid,
)
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
from hsc_core.core.thresholds import (
    crc_threshold_from_last_incorrect,
    select_threshold,
    solve_theorem1,
)
from hsc_core.evaluation.calibration import calibrate, calibrate_weights
from hsc_core.evaluation.guarantee_methods import METHODS, GuaranteeData, GuaranteeSettings
from hsc_core.evaluation.shootout import draw_weights, shootout

mapie_fwer = pytest.importorskip("mapie.risk_control.fwer_control")
mapie_methods = pytest.importorskip("mapie.risk_control.methods")
mapie_base = pytest.importorskip("mapie.risk_control._base_controller")

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"
TOY = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)  # leaves 0–3 under 4 and 5, root 6


def _data(hierarchy: Hierarchy, n: int, seed: int, top1: float = 0.75) -> GuaranteeData:
    logits, labels = synthetic_logits(hierarchy, n, top1=top1, seed=seed)
    probs = node_probabilities(hierarchy, softmax(logits.astype(np.float64)))
    return GuaranteeData.from_arrays(hierarchy, probs, labels)


# ---------------------------------------------------------------------------- LTT vs MAPIE
@pytest.mark.parametrize("binary", [True, False])
def test_hoeffding_bentkus_p_values_equal_mapie(binary):
    rng = np.random.default_rng(0)
    n = 250
    risk = rng.integers(0, 80, 40) / n
    for alpha in (0.05, 0.1, 0.3):
        want = mapie_methods.compute_hoeffding_bentkus_p_value(risk, n, alpha, binary=binary)[:, 0]
        np.testing.assert_allclose(hoeffding_bentkus_p_values(risk, n, alpha, binary=binary), want, rtol=1e-12)


def test_exact_binomial_p_value_is_mapies_binary_p_value():
    """For a 0/1 loss MAPIE takes min(Hoeffding, exact binomial tail); the tail is always the smaller.
    (MAPIE rounds n·R̂ up, so 7/400·400 = 7.000000000000001 counts 8 errors: it is handed the
    counts just below, as our exact p-value counts them.)"""
    n, errors = 400, np.arange(0, 60)
    for alpha in (0.05, 0.1):
        want = mapie_methods.compute_hoeffding_bentkus_p_value(np.maximum(errors - 1e-9, 0) / n, n, alpha,
                                                              binary=True)[:, 0]
        np.testing.assert_allclose(binomial_p_values(errors, n, alpha), want, rtol=1e-12)
        assert binomial_p_values(np.array([n * alpha]), n, alpha)[0] == pytest.approx(
            stats.binom.cdf(n * alpha, n, alpha))


@pytest.mark.parametrize("ours, theirs", [("bonferroni", "bonferroni"), ("holm", "bonferroni_holm"),
                                          ("fixed_sequence", "fixed_sequence")])
def test_fwer_procedures_equal_mapie(ours, theirs):
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = int(rng.integers(1, 30))
        p = np.sort(rng.uniform(0, 0.2, m) ** rng.uniform(0.5, 3))  # ascending: fixed sequence gets far
        p = p if rng.random() < 0.5 else rng.permutation(p)
        want = np.zeros(m, dtype=bool)
        want[mapie_fwer.control_fwer(p, 0.1, fwer_method=theirs)] = True
        np.testing.assert_array_equal(fwer_reject(p, 0.1, ours), want)
    # vectorised over repetitions: the same per row
    ps = rng.uniform(0, 0.05, (7, 12))
    np.testing.assert_array_equal(fwer_reject(ps, 0.1, ours), np.stack([fwer_reject(r, 0.1, ours) for r in ps]))


@pytest.mark.parametrize("method, fwer", [("ltt_bonferroni", "bonferroni"), ("ltt_holm", "bonferroni_holm"),
                                          ("ltt_fixed_sequence", "fixed_sequence")])
@pytest.mark.parametrize("p_value", ["binomial", "hoeffding_bentkus"])
def test_ltt_on_a_flat_tree_selects_mapies_threshold(method, fwer, p_value):
    """A flat tree: Climbing predicts the arg-max leaf when its probability is ≥ θ, else the root
    (always correct). The risk at each grid θ is counted by brute force and handed to MAPIE's
    ``ltt_procedure``; our θ is the most specific of the θ MAPIE validates."""
    h = Hierarchy.flat(10)
    data = _data(h, 3000, seed=2, top1=0.7)
    rng = np.random.default_rng(3)
    probs = data.probabilities()[:, : h.n_leaves]
    pmax = probs.max(axis=1).astype(np.float64)
    wrong = probs.argmax(axis=1) != data.labels
    settings = GuaranteeSettings(alpha=0.1, delta=0.1, p_value=p_value, n_lambdas=60)
    grid = ltt_theta_grid(60)
    for _ in range(5):
        cal = rng.choice(data.n, 500, replace=False)
        errors = (wrong[cal, None] & (pmax[cal, None] >= grid[None, :])).sum(axis=0)
        # MAPIE rounds n·R̂ up: hand it counts a hair below the integers for the exact binomial
        risk = np.maximum(errors - 1e-9 * (p_value == "binomial"), 0) / 500
        valid, p_values = mapie_base.ltt_procedure(
            risk[None, :], np.array([[0.1]]), 0.1, np.full((1, grid.size), 500),
            binary=True, fwer_method=fwer)
        if p_value == "binomial":
            np.testing.assert_allclose(binomial_p_values(errors, 500, 0.1), p_values[:, 0], rtol=1e-12)
        w = np.zeros((1, data.n), dtype=np.int64)
        w[0, cal] = 1
        fit = calibrate_weights(method, data, w, settings)
        want = grid[min(valid[0])] if valid[0] else 1.0
        assert fit.theta[0, 0] == want and bool(fit.found[0]) == bool(valid[0])


# ---------------------------------------------------------------------------- the conformal node family
def test_lca_set_nodes_equal_a_brute_force_lca():
    h = synthetic_taxonomy(40, depth=4, seed=1)
    rng = np.random.default_rng(4)
    leaf = rng.dirichlet(np.full(h.n_leaves, 0.3), 60)
    paths = lca_set_paths(h, leaf)
    for theta in (0.0, 0.3, 0.6, 0.9, 0.99, 1.0):
        got = paths.predict(theta)[0]
        for i in range(leaf.shape[0]):
            members = {int(leaf[i].argmax())} | set(np.flatnonzero(leaf[i] > 1 - theta).tolist())
            node = members.pop()
            for m in members:
                node = int(h.lca(node, m))
            assert got[i] == node, (theta, i)


def test_lca_set_cap_ends_on_the_root_and_stays_nested():
    h = Hierarchy.flat(30)
    leaf = np.random.default_rng(5).dirichlet(np.ones(30), 20)
    paths = lca_set_paths(h, leaf, max_records=3)
    assert (paths.nodes[np.arange(20), paths.lengths - 1] == h.root).all()
    assert (np.diff(paths.values, axis=1) >= 0).all()


def test_weighted_order_statistic_equals_sorting_the_multiset():
    rng = np.random.default_rng(6)
    values = np.sort(rng.normal(size=50))
    w = rng.integers(0, 3, (20, 50))
    for k in (1, 5, 30):
        got = weighted_order_statistic(values, w, k)
        for r in range(20):
            multiset = np.repeat(values, w[r])
            assert got[r] == (multiset[k - 1] if k <= multiset.size else np.inf)


def test_mondrian_groups_on_the_toy_tree():
    np.testing.assert_array_equal(mondrian_groups(TOY, np.array([0, 1, 2, 3]), 1), [4, 4, 5, 5])
    np.testing.assert_array_equal(mondrian_groups(TOY, np.array([0, 3]), 0), [6, 6])


# ---------------------------------------------------------------------------- batched == one-set references
def test_batched_theorem1_and_crc_equal_the_reference_functions():
    data = _data(synthetic_taxonomy(50, depth=4, seed=2), 1200, seed=7)
    draw = draw_weights(data.labels, 300, 10, sampling="split", seed=1)
    w = draw(10)
    s = GuaranteeSettings(alpha=0.1, delta=0.1)
    t1 = calibrate_weights("theorem1", data, w, s).theta[:, 0]
    crc = calibrate_weights("crc", data, w, s).theta[:, 0]
    li = data.last_incorrect["climbing"].astype(data.paths["climbing"].values.dtype)
    for r in range(10):
        cal = np.flatnonzero(w[r])
        assert t1[r] == select_threshold(data.tight[cal], 0.1)
        assert crc[r] == crc_threshold_from_last_incorrect(li[cal], 0.1)


def test_one_calibration_predicts_what_the_paths_predict():
    data = _data(synthetic_taxonomy(50, depth=4, seed=2), 800, seed=8)
    rows = np.arange(0, 800, 2)
    fit = calibrate("theorem1", data, rows, GuaranteeSettings(alpha=0.1, delta=0.1))
    np.testing.assert_array_equal(fit.predict(data), data.paths["climbing"].predict(fit.theta)[0])
    mondrian = calibrate("conformal_mondrian", data, rows, GuaranteeSettings(alpha=0.1, delta=0.1, mondrian_depth=1))
    groups = mondrian_groups(data.hierarchy, data.leaf_pred, 1)
    want = np.array([data.paths["lca_set"].predict(mondrian.thetas_by_group[int(g)])[0][i]
                     for i, g in enumerate(groups)])
    np.testing.assert_array_equal(mondrian.predict(data), want)


def test_split_sampling_measures_on_the_other_samples():
    data = _data(synthetic_taxonomy(30, depth=3, seed=3), 600, seed=9)
    s = GuaranteeSettings(alpha=0.15, delta=0.1)
    res = shootout(data, s, 200, methods=["theorem1"], reps=3, sampling="split", seed=4)
    w = draw_weights(data.labels, 200, 3, sampling="split", seed=4)(3)
    for r in range(3):
        test = np.flatnonzero(w[r] == 0)
        theta = select_threshold(data.tight[np.flatnonzero(w[r])], 0.15)
        nodes = data.paths["climbing"].predict(theta)[0][test]
        row = res.repetitions.iloc[r]
        assert row["accuracy"] == pytest.approx(data.hierarchy.is_ancestor(nodes, data.labels[test]).mean())
        assert row["coverage"] == pytest.approx(data.hierarchy.coverage[nodes].mean())


# ---------------------------------------------------------------------------- the guarantees hold
def _check_guarantees(res, s: GuaranteeSettings) -> None:
    for _, row in res.summary.iterrows():
        kind = METHODS[row["method"]].kind
        k = int(round(row["violation_rate"] * res.reps))
        if kind == "pac":  # violations ≤ δ within binomial error (exact one-sided test at 0.1 %)
            assert stats.binom.sf(k - 1, res.reps, s.delta) > 1e-3, row["method"]
        elif kind.startswith("marginal"):  # mean accuracy ≥ 1 − α within 3.3 standard errors
            se = row["accuracy_std"] / np.sqrt(res.reps)
            assert row["accuracy_mean"] >= s.target - 3.3 * se, row["method"]


def test_every_guarantee_holds_on_synthetic_data():
    data = _data(synthetic_taxonomy(60, depth=4, seed=4), 3000, seed=10, top1=0.7)
    s = GuaranteeSettings(alpha=0.1, delta=0.1, min_coverage=0.3, mondrian_depth=1)
    methods = [m for m in METHODS if m != "darts"]
    res = shootout(data, s, 400, methods=methods, reps=1000, seed=5)
    _check_guarantees(res, s)
    # the PAC methods are not vacuous: they certify and predict below the root
    pac = res.summary[res.summary["kind"] == "pac"]
    assert (pac["certified_share"] > 0.9).all() and (pac["coverage_mean"] > 0.3).all()
    # conformal node sets reach their nominal coverage on average, and not grossly more
    lca = res.summary.set_index("method").loc["conformal_lca"]
    assert s.target - 0.01 < lca["accuracy_mean"] < s.target + 0.03


def test_mondrian_holds_within_every_superclass():
    data = _data(synthetic_taxonomy(40, depth=3, seed=5), 4000, seed=11, top1=0.6)
    s = GuaranteeSettings(alpha=0.2, delta=0.1, mondrian_depth=1)
    w = draw_weights(data.labels, 1500, 300, seed=6)(300)
    groups = mondrian_groups(data.hierarchy, data.leaf_pred, 1)
    for method in ("theorem1_mondrian", "conformal_mondrian"):
        fit = calibrate_weights(method, data, w, s)
        nodes = data.paths[METHODS[method].family].values  # noqa: F841 — shape check below
        from hsc_core.evaluation.calibration import apply_weights
        correct = data.hierarchy.is_ancestor(apply_weights(method, data, fit), data.labels[None, :])
        for g in np.unique(groups):
            members = groups == g
            if members.sum() < 100:
                continue
            acc = correct[:, members].mean(axis=1)
            assert acc.mean() >= s.target - 3.3 * acc.std(ddof=1) / np.sqrt(acc.size), (method, g)


def test_too_small_n_says_so_in_words():
    data = _data(synthetic_taxonomy(30, depth=3, seed=6), 500, seed=12)
    s = GuaranteeSettings(alpha=0.05, delta=0.1)
    res = shootout(data, s, 10, methods=["theorem1", "theorem1_pac", "ltt_holm"], reps=20)
    notes = res.summary.set_index("method")["note"]
    assert "needs n ≥ 19" in notes["theorem1"] and "θ̂ = 1" in notes["theorem1"]
    assert "needs n ≥ 45" in notes["theorem1_pac"] and "root" in notes["theorem1_pac"]
    assert "root" in notes["ltt_holm"]
    assert (res.repetitions["theta"] == 1.0).all() and not res.repetitions["certified"].any()


def test_solve_theorem1_says_when_theta_is_the_root():
    r = solve_theorem1(n=10, epsilon=1e-6, delta=0.1)
    assert r["root_only"] and r["alpha"] < 1 / 11 and "root" in r["note"]
    ok = solve_theorem1(alpha=0.1, n=1000, delta=0.1)
    assert not ok["root_only"] and ok["note"] == ""


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="alpha must lie in"):
        GuaranteeSettings(alpha=1.5, delta=0.1)
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        shootout(_data(TOY, 50, 0), GuaranteeSettings(alpha=0.1, delta=0.1), 10, methods=["nope"], reps=2)
    with pytest.raises(ValueError, match="ltt_multi needs a second risk"):
        calibrate("ltt_multi", _data(TOY, 50, 0), np.arange(20), GuaranteeSettings(alpha=0.1, delta=0.1))


# ---------------------------------------------------------------------------- shipped logits
@pytest.fixture(scope="module")
def shipped():
    from hsc_core.datasets.logits_io import load_logits
    from hsc_core.evaluation.model import ModelEvaluation
    from hsc_core.evaluation.resolve import resolve_hierarchy

    if not SHIPPED.is_file():
        pytest.skip("shipped logits absent")
    bundle = load_logits(SHIPPED)
    name, h = resolve_hierarchy(bundle, str(SHIPPED))
    ev = ModelEvaluation.from_bundle(bundle, h, dataset=name, file=str(SHIPPED))
    return ev, GuaranteeData.from_evaluation_set(ev.setting(True))


def test_every_guarantee_holds_on_the_shipped_logits(shipped):
    _, data = shipped
    s = GuaranteeSettings(alpha=0.08, delta=0.1, min_coverage=0.6)
    methods = [m for m in METHODS if m != "darts"]
    res = shootout(data, s, 800, methods=methods, reps=1000, seed=7)
    _check_guarantees(res, s)
    # the exact one-sided Theorem 1 is not conservative: its violation rate is near δ
    assert 0.05 < res.summary.set_index("method").loc["theorem1_pac", "violation_rate"] <= 0.13


def test_cli_guarantees_and_card(shipped, tmp_path, capsys):
    import yaml

    from hsc_core.cli import main

    out = tmp_path / "summary.csv"
    assert main(["guarantees", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--reps", "30",
                 "--methods", "theorem1", "ltt_holm", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ltt_holm" in text and out.is_file() and Path(f"{out}.reps.csv").is_file()
    card_md = tmp_path / "card.md"
    assert main(["card", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--reps", "20",
                 "--out", str(card_md)]) == 0
    md = card_md.read_text(encoding="utf-8")
    front = yaml.safe_load(md.split("---\n")[1])
    card = json.loads(card_md.with_suffix(".json").read_text(encoding="utf-8"))
    # the page's default since issue 41: LTT on the answers' accuracy, with the δ given
    assert front["hsc_decision_card"]["theta"] == card["theta"] and card["method"] == "ltt_selective"
    assert front["hsc_decision_card"]["quantity"] == "answers" and card["delta"] == 0.1
    assert card["meets_target"] == (card["realised"]["answered_accuracy"] >= 0.9)
    line = capsys.readouterr().out
    assert "guaranteed with 90% confidence: at least 90.0% of the answers on new data are correct" in line
    assert f"held-out accuracy of the answers {card['realised']['answered_accuracy']:.4f} meets the target 0.9" in line
    assert front["model-index"][0]["results"][0]["metrics"][0]["value"] == pytest.approx(
        card["realised"]["accuracy"], abs=1e-6)
    lo, hi = card["realised"]["accuracy_interval"]
    assert lo <= card["realised"]["accuracy"] <= hi
    assert card["weights"].startswith("efficientnet-lite0") and len(card["hierarchy_hash"]) == 16


@pytest.mark.parametrize("argv, message", [
    (["guarantees", "missing.npz", "--target-accuracy", "0.9", "--delta", "0.1"], "not found"),
    (["guarantees", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--methods", "x"], "unknown method"),
    (["guarantees", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--n-cal", "99999"], "--n-cal"),
    (["card", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--method", "ltt_multi"], "second risk"),
    (["card", str(SHIPPED), "--target-accuracy", "0.9", "--delta", "0.1", "--out", "/no/such/dir/c.md"],
     "folder does not exist"),
    (["report", str(SHIPPED), "--card-target", "2"], "--card-target must lie in (0, 1)"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, message, capsys):
    from hsc_core.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_card_escapes_a_hostile_model_name(shipped):
    from hsc_core.evaluation.card import card_markdown, decision_card

    ev, data = shipped
    card = decision_card(ev, target_accuracy=0.9, delta=0.1, reps=0, data=data)
    card["model"] = "<script>alert(1)</script> [x](http://e) *b*\n# h"
    md = card_markdown(card)
    body = md.split("---\n", 2)[2]
    assert "<script>" not in body and "[x](http" not in body and "\\[x\\](http" in body and "\n# h" not in body
    import yaml
    assert yaml.safe_load(md.split("---\n")[1])["model_name"] == card["model"]


def test_report_embeds_the_card_escaped():
    import base64
    import re

    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.evaluation.model import ModelEvaluation
    from hsc_core.report.html_report import build_report

    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 500, top1=0.75, seed=3)
    ev = ModelEvaluation(h, logits, labels, name="<b>evil</b> & co")
    text = build_report([ev], n_resamples=100, card={"target_accuracy": 0.9, "delta": 0.1, "method": "ltt_holm"})
    assert "Decision card: &lt;b&gt;evil&lt;/b&gt; &amp; co" in text and "<b>evil</b>" not in text
    md = base64.b64decode(re.search(r"data:text/markdown;base64,([A-Za-z0-9+/=]+)", text).group(1)).decode()
    assert 'method: "ltt_holm"' in md and "<b>" not in md.split("---\n", 2)[2]


def test_top_down_nodes_equal_a_greedy_descent():
    from hsc_core.core.conformal import top_down_paths

    h = synthetic_taxonomy(40, depth=4, seed=7)
    leaf = np.random.default_rng(8).dirichlet(np.full(h.n_leaves, 0.3), 50)
    probs = node_probabilities(h, leaf)
    paths = top_down_paths(h, probs)
    for theta in (0.0, 0.2, 0.5, 0.8, 1.0):
        got = paths.predict(theta)[0]
        for i in range(50):
            node = h.root
            while h.children[node].size:
                kid = h.children[node][np.argmax(probs[i, h.children[node]])]
                if probs[i, kid] < theta:
                    break
                node = int(kid)
            assert got[i] == node, (theta, i)


def test_multi_risk_with_severity_holds_and_is_stricter():
    data = _data(synthetic_taxonomy(60, depth=4, seed=9), 2000, seed=13, top1=0.7)
    s = GuaranteeSettings(alpha=0.15, delta=0.1, max_severity=0.1)
    res = shootout(data, s, 500, methods=["ltt_holm", "ltt_multi"], reps=300, seed=8)
    _check_guarantees(res, s)
    by = res.summary.set_index("method")
    assert by.loc["ltt_multi", "severity_mean"] <= 0.1 + 0.01
    assert by.loc["ltt_multi", "coverage_mean"] <= by.loc["ltt_holm", "coverage_mean"] + 1e-12


def test_a_calibration_applies_to_other_data_of_the_same_tree():
    """Calibrate on one data set, deploy on another (e.g. clean → shifted): θ and per-group θ carry over."""
    h = synthetic_taxonomy(50, depth=4, seed=2)
    clean, shifted = _data(h, 600, seed=14), _data(h, 400, seed=15, top1=0.55)
    s = GuaranteeSettings(alpha=0.1, delta=0.1, mondrian_depth=1)
    for method in ("ltt_holm", "conformal_lca", "theorem1_mondrian"):
        fit = calibrate(method, clean, np.arange(600), s)
        family = METHODS[method].family
        if fit.thetas_by_group:
            groups = mondrian_groups(h, shifted.leaf_pred, 1)
            want = np.array([shifted.paths[family].predict(fit.thetas_by_group.get(int(g), 1.0))[0][i]
                             for i, g in enumerate(groups)])
        else:
            want = shifted.paths[family].predict(fit.theta)[0]
        np.testing.assert_array_equal(fit.predict(shifted), want)


def test_card_says_shares_answers_accuracy_and_which_promise():
    """Issue 41: the default method (LTT on the answers' accuracy, δ = 0.1) and the paper's marginal
    θ̂ (no δ) both render, evidence included; the sentence states the shares answered at a leaf, at a
    coarser node and abstained, the accuracy of the answers, what is promised about which quantity
    with what confidence, and whether the held-out value meets the target."""
    from hsc_core.core.hierarchy import Hierarchy
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.evaluation.card import answer_line, card_markdown, decision_card
    from hsc_core.evaluation.model import ModelEvaluation

    h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)  # leaves 0–3 under 4 and 5, root 6
    logits, labels = synthetic_logits(h, 600, seed=0)
    ev = ModelEvaluation(h, logits, labels, name="toy")
    default = decision_card(ev, target_accuracy=0.9, n_cal=200, reps=5, n_resamples=50)
    assert (default["method"], default["kind"], default["quantity"], default["delta"]) == (
        "ltt_selective", "pac", "answers", 0.1)
    assert "with 90% confidence: at least 90.0% of the answers on new data are correct (abstentions excluded)" \
        in answer_line(default)
    card = decision_card(ev, target_accuracy=0.9, method="theorem1", n_cal=200, reps=5, n_resamples=50)
    assert card["method"] == "theorem1" and card["delta"] is None and card["evidence"]["reps"] == 5
    md = card_markdown(card)
    assert "δ =" not in md.split("## Evidence")[1].split("##")[0]
    res = ev.setting(card["ts"]).threshold(0.9, "theorem1", n=200, seed=0)
    count = h.leaf_count[res.test_nodes]
    leaf, root = float(np.mean(count == 1)), float(np.mean(res.test_nodes == h.root))
    r = card["realised"]
    assert (r["answered_at_leaf"], r["abstained"]) == (leaf, root)
    assert r["answered_coarser"] == pytest.approx(1 - leaf - root)
    assert r["answered_accuracy"] == pytest.approx(res.answered_accuracy)
    line = answer_line(card)
    assert line in md and line.startswith(f"**Deploy θ = {res.theta:.4f}**")
    assert f"{leaf:.1%} get an answer at a leaf" in line and f"{root:.1%} abstain (the root)" in line
    assert f"{res.answered_accuracy:.1%} of the answers are correct" in line
    assert "**Guaranteed only on average over calibration sets" in line
    assert ("meets the target" if res.test_accuracy >= 0.9 else "is BELOW the target") in line
    assert "Certified" not in md and "only on average" in md  # a marginal card is never "Certified"
    old = {k: v for k, v in card.items() if k != "meets_target"}
    old["realised"] = {k: v for k, v in card["realised"].items() if not k.startswith("answered") and k != "abstained"}
    assert answer_line(old) == (f"**Deploy θ = {res.theta:.4f}**: guaranteed only on average over calibration "
                                "sets: the hierarchical accuracy on new data is at least 90.0% (abstentions count "
                                "as correct); this one calibration can fall below it (a marginal statement, no "
                                "confidence).")
