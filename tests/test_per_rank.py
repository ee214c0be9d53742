"""Per-rank scores: the reader, Climbing by rank (hand-computed toy, brute force), LTT per rank
(valid on its calibration set, the guarantee on synthetic data) and ``hsc ranks``."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from per_rank_support import synthetic_per_rank_frame

from hsc_core.cli import main
from hsc_core.core.ltt import binomial_p_values
from hsc_core.core.per_rank import answer_ranks, evaluate_thetas, rank_rc_curve, theta_paths
from hsc_core.datasets.logits_io import LogitsFileError
from hsc_core.datasets.per_rank import ScoresFileError, per_rank_from_frame, read_per_rank
from hsc_core.evaluation.per_rank import (
    HAND_PICKED,
    PerRankThresholds,
    compare_rank_thresholds,
    fit_rank_thresholds,
)

# Toy: families F1 = {G1 = {S1, S2}, G2 = {S3}}, F2 = {G3 = {S4, S5}}; 5 species, so
# φ(F1) = 1 − log 3/log 5 = 0.317394, φ(G3) = φ(F2) = 1 − log 2/log 5 = 0.569323, φ(G2) = 1 (one species).
TOY = """sample_id,true_family,pred_family,conf_family,true_genus,pred_genus,conf_genus,\
true_species,pred_species,conf_species
s1,F1,F1,0.9,G1,G1,0.7,S1,S2,0.5
s2,F1,F1,0.95,G1,G1,0.8,S2,S2,0.6
s3,F2,F1,0.4,G3,G2,0.3,S4,S3,0.2
s4,F2,F2,1.0,G3,G3,0.9,S5,S4,0.85
"""
PHI_F1, PHI_G3 = 1 - math.log(3) / math.log(5), 1 - math.log(2) / math.log(5)


@pytest.fixture()
def toy(tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text(TOY)
    return read_per_rank(path)


def test_toy_tree_correctness_and_coverage(toy):
    h = toy.hierarchy
    assert toy.ranks == ("family", "genus", "species")
    assert h.n_leaves == 5 and sorted(h.node_ids[:5]) == ["S1", "S2", "S3", "S4", "S5"]
    assert h.names[h.root] == "(root)"
    assert toy.correct.tolist() == [[True, True, False], [True, True, True], [False, False, False],
                                    [True, True, False]]
    np.testing.assert_allclose(toy.coverage, [[PHI_F1, PHI_G3, 1], [PHI_F1, PHI_G3, 1], [PHI_F1, 1, 1],
                                              [PHI_G3, PHI_G3, 1]])


def test_toy_curve_by_hand(toy):
    curve = rank_rc_curve(toy.conf, toy.correct, toy.coverage)
    # θ = 0: every sample at its species; s1, s3, s4 wrong.
    assert curve.at(0.0) == pytest.approx((1.0, 0.75))
    # θ = 0.5: s1 at S2 (wrong), s2 at S2, s3 abstains, s4 at S4 (wrong).
    assert curve.at(0.5) == pytest.approx((0.75, 0.5))
    # θ = 0.9: s1 and s2 at F1, s3 abstains, s4 at G3 (0.9 ≥ 0.9); all correct.
    assert curve.at(0.9) == pytest.approx(((2 * PHI_F1 + PHI_G3) / 4, 0.0))
    # θ = 1: only s4's family (confidence exactly 1) answers.
    assert curve.at(1.0) == pytest.approx((PHI_G3 / 4, 0.0))
    # no point beyond: a confidence equals 1, so θ ≤ 1 never abstains everywhere
    assert curve.coverage.min() == pytest.approx(PHI_G3 / 4)


def _brute_force_points(conf, correct, coverage):
    thetas = np.unique(np.r_[0.0, 1.0, conf.ravel(), np.clip(conf.ravel() + 1e-9, 0, 1)])
    pts = [evaluate_thetas(conf, correct, coverage, np.full(conf.shape[1], t)) for t in thetas]
    return thetas, np.array([p["coverage"] for p in pts]), np.array([1 - p["accuracy"] for p in pts])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curve_equals_brute_force_sweep(seed):
    rng = np.random.default_rng(seed)
    n, r = 60, 4
    conf = rng.choice(np.linspace(0, 1, 11), size=(n, r))  # ties on purpose
    correct = np.cumprod(rng.random((n, r)) < 0.8, axis=1).astype(bool)  # nested: wrong stays wrong below
    coverage = np.sort(rng.random((n, r)), axis=1)
    curve = rank_rc_curve(conf, correct, coverage)
    thetas, cov, risk = _brute_force_points(conf, correct, coverage)
    for t, c, k in zip(thetas, cov, risk, strict=True):
        assert curve.at(t) == pytest.approx((c, k), abs=1e-12)
    # hAURC: the trapezoid over the distinct operating points the sweep visits
    seen = sorted({(round(c, 12), round(k, 12), ) for c, k in zip(cov, risk, strict=True)})
    c, k = np.array(seen).T
    assert curve.haurc == pytest.approx(float(np.sum(np.diff(c) * (k[1:] + k[:-1]) / 2)), abs=1e-12)


def test_answer_ranks_per_rank_theta(toy):
    ranks = answer_ranks(toy.conf, [0.85, 0.75, 0.65])
    assert ranks.tolist() == [0, 1, -1, 2]  # s1 family, s2 genus (0.8), s3 root, s4 species (0.85)
    ev = evaluate_thetas(toy.conf, toy.correct, toy.coverage, [0.85, 0.75, 0.65])
    assert ev["accuracy"] == 0.75 and ev["answer_share"].tolist() == [0.25, 0.25, 0.25, 0.25]


def test_theta_paths_are_monotone():
    paths = theta_paths(3, 20)
    assert paths.shape == (4, 20, 3)
    assert (paths[:, 0] == 1).all() and (paths[:, -1] == 0).all()  # strictest first, most permissive last
    assert (np.diff(paths, axis=1) <= 0).all()
    assert (paths[0] == paths[0][:, :1]).all()  # the first tilt is one flat θ
    assert (paths[1:, 1:-1, 0] <= paths[1:, 1:-1, 2]).all()  # tilted: coarser ranks get lower θ


# ----------------------------------------------------------------------------------- reader errors
def _bad(tmp_path, text: str, **kw) -> str:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ScoresFileError) as info:
        read_per_rank(path, **kw)
    assert "\n" not in str(info.value) and isinstance(info.value, LogitsFileError)
    return str(info.value)


def test_bad_tables_one_line(tmp_path):
    assert "outside [0, 1]" in _bad(tmp_path, TOY.replace("0.85", "85"))
    assert "missing column 'conf_genus'" in _bad(tmp_path, TOY.replace("conf_genus", "confidence_genus"))
    assert "'sample_id'" in _bad(tmp_path, TOY.replace("sample_id", "id"))
    assert "'S4' has two parents" in _bad(tmp_path, TOY + "s5,F1,F1,0.5,G1,G1,0.5,S4,S4,0.5\n")
    assert "empty" in _bad(tmp_path, TOY.splitlines()[0] + "\n")
    assert "empty" in _bad(tmp_path, "")
    assert "not a number" in _bad(tmp_path, TOY.replace("0.85", "high"))
    assert "larger than the 100 bytes" in _bad(tmp_path, TOY, max_bytes=100)
    assert "row 3: true_species is empty" in _bad(tmp_path, TOY.replace("G3,G2,0.3,S4", "G3,G2,0.3,"))
    assert "occurs twice" in _bad(tmp_path, TOY.replace("s2,", "s1,"))


def test_percent_and_parquet(tmp_path, toy):
    frame = pd.read_csv(pd.io.common.StringIO(TOY))
    for rank in toy.ranks:
        frame[f"conf_{rank}"] *= 100
    as_percent = per_rank_from_frame(frame.astype(str), percent=True)
    np.testing.assert_allclose(as_percent.conf, toy.conf)
    pytest.importorskip("pyarrow")
    path = tmp_path / "toy.parquet"
    frame.to_parquet(path)
    assert read_per_rank(path, percent=True).correct.tolist() == toy.correct.tolist()


def test_hierarchy_file_gives_the_same_numbers(tmp_path, toy):
    edges = tmp_path / "tree.csv"
    edges.write_text("parent,child\nF1,G1\nF1,G2\nF2,G3\nG1,S1\nG1,S2\nG2,S3\nG3,S4\nG3,S5\n")
    path = tmp_path / "toy.csv"
    path.write_text(TOY)
    from_file = read_per_rank(path, hierarchy=edges)
    assert from_file.correct.tolist() == toy.correct.tolist()
    np.testing.assert_allclose(from_file.coverage, toy.coverage)
    edges.write_text("parent,child\nF1,G1\nF2,G2\nF2,G3\nG1,S1\nG1,S2\nG2,S3\nG3,S4\nG3,S5\n")  # G2 under F2
    # row 3 predicts F1 and G2, now under F2: independent heads (issue 41), accepted, each judged at its rank
    heads = read_per_rank(path, hierarchy=edges)
    assert heads.correct[2].tolist() == [False, False, False]
    assert heads.disagreement.tolist() == [False, False, True, False]
    # the truth must still nest: row 1's true genus G2 (under F2) under its true family F1 is refused
    path.write_text(TOY.replace("s1,F1,F1,0.9,G1,G1", "s1,F1,F1,0.9,G2,G1"))
    with pytest.raises(ScoresFileError, match="row 1: labels are not nested: true_genus 'G2' is not under"):
        read_per_rank(path, hierarchy=edges)


def test_independent_heads_are_read_and_each_rank_is_judged_at_that_rank(tmp_path):
    """A genus head and a species head that disagree (issue 41): s1's genus head says G1 while its species
    head says S4 (a species of G3): the table is read, with and without a hierarchy file; the final answer
    at θ is the finest rank whose confidence reaches it, judged at that rank only."""
    path = tmp_path / "heads.csv"
    path.write_text(TOY.replace("G1,G1,0.7,S1,S2,0.5", "G1,G1,0.7,S1,S4,0.5"))
    derived = read_per_rank(path)
    edges = tmp_path / "tree.csv"
    edges.write_text("parent,child\nF1,G1\nF1,G2\nF2,G3\nG1,S1\nG1,S2\nG2,S3\nG3,S4\nG3,S5\n")
    from_file = read_per_rank(path, hierarchy=edges)
    for scores in (derived, from_file):
        assert scores.correct.tolist()[0] == [True, True, False]  # F1 and G1 right, S4 wrong for S1
        assert scores.disagreement.tolist() == [True, False, False, False]
        # θ = 0.45 at every rank: s1 answers at species (S4, 0.5 ≥ 0.45) and is wrong, though its genus is right
        ev = evaluate_thetas(scores.conf, scores.correct, scores.coverage, [0.45, 0.45, 0.45])
        assert ev["ranks"].tolist() == [2, 2, -1, 2]
        assert ev["answered_accuracy"] == pytest.approx(1 / 3) and ev["accuracy"] == pytest.approx(0.5)
    assert derived.hierarchy.n_leaves == 5 and from_file.hierarchy.n_leaves == 5


def test_a_predicted_label_the_truth_never_names_hangs_under_its_most_common_parent(tmp_path):
    extra = ("s5,F1,F1,0.9,G1,G1,0.7,S1,S9,0.5\ns6,F1,F1,0.9,G1,G2,0.7,S1,S9,0.5\n"
             "s7,F1,F1,0.9,G1,G2,0.7,S1,S9,0.5\n")
    path = tmp_path / "extra.csv"
    path.write_text(TOY + extra)
    scores = read_per_rank(path)
    h = scores.hierarchy
    s9, g2 = h.node_ids.index("S9"), h.node_ids.index("G2")
    assert h.parent[s9] == g2 and h.n_leaves == 6  # G2 twice, G1 once


# ------------------------------------------------------------------------------------ LTT per rank
@pytest.fixture(scope="module")
def synthetic():
    return per_rank_from_frame(synthetic_per_rank_frame(4000, seed=3))


def test_ltt_vector_is_valid_on_its_calibration_set(synthetic):
    ctl = fit_rank_thresholds(synthetic, 0.9, 0.1)
    assert ctl.found_
    ev = ctl.evaluate(synthetic)
    errors = round((1 - ev["accuracy"]) * synthetic.n)
    # certified: its binomial p-value passed fixed-sequence testing at δ / (number of paths)
    assert binomial_p_values(errors, synthetic.n, 0.1) <= 0.1 / len(ctl.tilts)
    assert ev["accuracy"] >= 0.9
    # the most specific certified vector, by a plain walk down each path (no library FWER code)
    paths = ctl.vectors(3)
    best = -1.0
    for path in paths:
        for thetas in path:  # strictest first; stop at the first vector not certified
            e = evaluate_thetas(synthetic.conf, synthetic.correct, synthetic.coverage, thetas)
            k = round((1 - e["accuracy"]) * synthetic.n)
            if binomial_p_values(k, synthetic.n, 0.1) > 0.1 / len(paths):
                break
            best = max(best, e["coverage"])
    assert ev["coverage"] == pytest.approx(best)
    assert set(ctl.thetas_dict()) == {"family", "genus", "species"}
    assert (ctl.predict(synthetic) == answer_ranks(synthetic.conf, ctl.thetas_)).all()


def test_nothing_certified_abstains_everywhere(toy):
    ctl = PerRankThresholds(0.99, 0.05).fit(toy)
    assert not ctl.found_ and ctl.thetas_dict() == {"family": None, "genus": None, "species": None}
    assert (ctl.predict(toy) == -1).all() and ctl.evaluate(toy)["accuracy"] == 1.0


def test_guarantee_holds_over_splits_and_hand_picked_do_not(synthetic):
    delta, reps = 0.1, 400
    table = compare_rank_thresholds(synthetic, 0.9, delta, reps=reps, cal_fraction=0.25, seed=1).set_index("method")
    for name in ("LTT per rank", "LTT shared θ"):  # judged on the population (the whole table)
        assert table.loc[name, "violation_rate"] <= delta + 3 * math.sqrt(delta * (1 - delta) / reps)
        assert table.loc[name, "violation_rate_test"] >= table.loc[name, "violation_rate"]  # the test half's noise
    assert table.loc["LTT per rank", "test_noise"] == pytest.approx(math.sqrt(0.9 * 0.1 / 3000))
    ltt = table.loc["LTT per rank"]
    assert ltt["certified"] == 1.0 and ltt["mean_accuracy"] >= 0.9 and ltt["mean_coverage"] > 0.2
    for name in HAND_PICKED:  # this classifier is over-confident: hand-picked thresholds miss 90 %
        assert table.loc[name, "violation_rate"] > 0.5


def test_the_search_is_never_less_specific_than_a_shared_theta_ltt_at_its_share_of_delta(synthetic):
    """Issue 41: on every calibration set, the vector LTT per rank ships covers at least as much of the
    calibration set as a shared-θ LTT at δ·SHARED_SHARE (the shared path is in the search at that level),
    and the levels of the paths sum to δ."""
    from hsc_core.core.per_rank import SHARED_SHARE, ltt_select, path_levels, vector_outcomes

    assert path_levels(4, 0.1).sum() == pytest.approx(0.1) and path_levels(1, 0.1).tolist() == [0.1]
    paths = theta_paths(3, 100)
    errors, cov, _ = vector_outcomes(synthetic.conf, synthetic.correct, synthetic.coverage, paths)
    rng = np.random.default_rng(5)
    mask = np.zeros((300, synthetic.n), dtype=np.float32)
    for r in range(300):
        mask[r, rng.choice(synthetic.n, 600, replace=False)] = 1
    cal_e = np.rint(mask @ errors.T.astype(np.float32)).astype(np.int64).reshape(300, *paths.shape[:2])
    cal_c = (mask @ cov.T.astype(np.float32)).astype(float).reshape(300, *paths.shape[:2])
    for alpha in (0.1, 0.15):
        choice, found = ltt_select(cal_e, cal_c, 600, alpha, 0.1)
        flat, flat_found = ltt_select(cal_e[:, :1], cal_c[:, :1], 600, alpha, 0.1 * SHARED_SHARE)
        got = np.where(found, cal_c.reshape(300, -1)[np.arange(300), choice], 0.0)
        shared = np.where(flat_found, cal_c[:, 0][np.arange(300), flat], 0.0)
        assert (found >= flat_found).all() and (got >= shared - 1e-9).all()


def test_hand_picked_finest_three_leaves_coarser_ranks_silent():
    th = HAND_PICKED["0.8/0.6/0.4 (finest three ranks)"](4)
    assert th[0] == np.inf and th[1:].tolist() == [0.4, 0.6, 0.8]


# ------------------------------------------------------------------------------------------- CLI
def test_hsc_ranks_writes_the_card(tmp_path, capsys):
    scores = tmp_path / "syn.csv"
    synthetic_per_rank_frame(800, seed=4).to_csv(scores, index=False)
    out = tmp_path / "card.md"
    assert main(["ranks", str(scores), "--target-accuracy", "0.9", "--delta", "0.1", "--out", str(out),
                 "--reps", "1000"]) == 0
    card = json.loads(out.with_suffix(".json").read_text())
    scores_obj = read_per_rank(scores)
    ctl = fit_rank_thresholds(scores_obj, 0.9, 0.1)
    assert card["thetas"] == ctl.thetas_dict() and list(card["thetas"]) == ["family", "genus", "species"]
    assert card["realised_accuracy"] == ctl.evaluate(scores_obj)["accuracy"]
    assert sum(card["answer_share"].values()) == pytest.approx(1.0)
    assert [r["method"] for r in card["comparison"]] == ["LTT per rank", "LTT shared θ", *HAND_PICKED]
    flat = fit_rank_thresholds(scores_obj, 0.9, 0.1, tilts=(1.0,))
    assert card["shared_theta"]["theta"] == flat.thetas_dict()["family"]
    text = out.read_text()
    assert "Guaranteed with 90% confidence" in text and "an abstention counting as correct" in text
    assert "of the answers are correct" in text and "on the test half" in text
    assert all(r["reps"] == 1000 for r in card["comparison"])
    assert "| species |" in out.read_text()


@pytest.mark.parametrize("text, message", [(TOY.replace("0.85", "1.85"), "outside [0, 1]"),
                                           (TOY.replace("true_genus", "truth_genus"), "missing column")])
def test_hsc_ranks_bad_input_exits_2_with_one_line(tmp_path, capsys, text, message):
    scores = tmp_path / "bad.csv"
    scores.write_text(text)
    assert main(["ranks", str(scores), "--target-accuracy", "0.9", "--delta", "0.1",
                 "--out", str(tmp_path / "c.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("hsc ranks: error:")
