"""AppTests of the Guaranteed-accuracy page's shoot-out, solver and small-n wording, each number
recomputed with the library (not through the dashboard's helpers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from app_support import open_page

from hsc_core.core.synthetic import synthetic_logits
from hsc_core.core.thresholds import theorem1_epsilon
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.evaluation.guarantee_methods import GuaranteeSettings
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.shootout import shootout

PAGE = "app_pages/guaranteed_accuracy.py"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cached_logits_ga")
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 600, top1=0.75, seed=1)
    save_logits(d / "alpha_net.npz", logits, labels, [f"i{i}" for i in range(600)], manifest={"model": "alpha_net"},
                dtype="float32")
    return d


@pytest.fixture
def page(model_dir, monkeypatch):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(model_dir))

    def open_(query: dict | None = None):
        return open_page(PAGE, query)
    return open_


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_small_n_is_said_in_words_and_the_band_agrees(page):
    at = page({"split_method": "theorem1"})  # Theorem 1's band is about the paper's θ̂
    at.slider(key="_w.ga.acc").set_value(0.95)
    at.slider(key="_w.ga.n").set_value(10).run()
    assert not at.exception
    assert _metric(at, "θ̂ (threshold)") == "1.0000" and _metric(at, "Hierarchical accuracy") == "1.0000"
    assert _metric(at, "Within target ± ε (on average)") == "yes"  # 1.0 − 0.95 ≤ 0.05, not a float artefact
    warnings = " ".join(w.value for w in at.warning)
    assert "n = 10 is too small" in warnings and "n ≥ 19" in warnings


def test_solver_follows_the_sliders_and_says_when_theta_is_the_root(page):
    at = page()
    at.slider(key="_w.ga.acc").set_value(0.9)
    at.slider(key="_w.ga.conf").set_value(0.8)
    at.slider(key="_w.ga.n").set_value(300).run()
    at.radio(key="_w.ga.solve").set_value("epsilon").run()
    assert not at.exception
    assert _metric(at, "margin ε (solved)") == f"{theorem1_epsilon(300, 0.1, 0.2):.4f}"
    assert not any(n.key == "_w.ga.eps" for n in at.number_input)  # no ε input beside the solved ε
    at.slider(key="_w.ga.n").set_value(200).run()  # the solver follows the slider
    assert _metric(at, "margin ε (solved)") == f"{theorem1_epsilon(200, 0.1, 0.2):.4f}"
    at.radio(key="_w.ga.solve").set_value("alpha").run()
    at.number_input(key="solve_n").set_value(10)
    at.number_input(key="_w.ga.eps").set_value(0.0001).run()
    warned = " ".join(w.value for w in at.warning)
    assert "θ̂ = 1" in warned and "only nodes of probability exactly 1 are predicted" in warned  # not "all root"


def test_a_run_survives_moving_the_target_and_back(page):
    at = page()
    at.slider(key="_w.ga.acc").set_value(0.9)
    at.slider(key="_w.ga.n").set_value(200)
    at.slider(key="_w.ga.reps").set_value(10)
    at.multiselect(key="ga_baselines").set_value(["crc"])
    next(b for b in at.button if b.label == "Run repetitions").click().run()
    assert any("share of repetitions" in str(d.proto) or "fraction_within_eps" in d.value.columns for d in at.dataframe)
    title = at.get("plotly_chart")[0].proto.spec
    assert "over 10 repetitions" in title
    at.slider(key="_w.ga.acc").set_value(0.92).run()
    assert not any("fraction_within_eps" in d.value.columns for d in at.dataframe)
    at.slider(key="_w.ga.acc").set_value(0.9).run()
    assert any("fraction_within_eps" in d.value.columns for d in at.dataframe)


def test_shootout_from_a_deep_link_matches_the_library(page, model_dir):
    at = page({"acc": "0.9", "conf": "0.9", "n": "250", "g_reps": "40",
               "g_methods": "theorem1,ltt_holm,crc,theorem1_mondrian", "g_sampling": "iid", "split_seed": "2",
               "g_pv": "hoeffding_bentkus", "g_depth": "1", "ts": "0"})
    methods = ["theorem1", "crc", "ltt_holm", "theorem1_mondrian"]
    assert at.multiselect(key="_w.ga.g_methods").value == methods
    next(b for b in at.button if b.label == "Run the shoot-out").click().run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "violation_rate" in d.value.columns)
    ev = ModelEvaluation.from_bundle(load_logits(model_dir / "alpha_net.npz"), imagenet_hierarchy())
    settings = GuaranteeSettings(alpha=0.1, delta=0.1, p_value="hoeffding_bentkus", mondrian_depth=1)
    res = shootout(ev.setting(False).guarantee_data(), settings, 250, methods=methods, reps=40, seed=2)
    np.testing.assert_allclose(table["violation_rate"].to_numpy(float), res.summary["violation_rate"].to_numpy(float))
    np.testing.assert_allclose(table["coverage_mean"].to_numpy(float), res.summary["coverage_mean"].to_numpy(float))
    assert len(at.get("plotly_chart")) >= 2
    assert at.query_params["g_reps"] in (["40"], "40")
    labels = [b.proto.label for b in at.get("download_button")]
    assert {"Card (Markdown)", "Card (JSON)"} <= set(labels), labels


@pytest.mark.parametrize("method", ["theorem1", "theorem1_pac", "crc"])
def test_one_splits_theta_is_the_decision_cards_theta(page, model_dir, method):
    """One engine: the page's one split, ``EvaluationSet.threshold`` and the decision card calibrate
    on the same stratified set, so θ̂ and the test numbers agree for the same settings."""
    from hsc_core.evaluation.card import decision_card

    at = page({"acc": "0.9", "conf": "0.85", "n": "250", "split_seed": "3", "split_method": method, "ts": "0"})
    assert at.selectbox(key="_w.ga.split_method").value == method
    ev = ModelEvaluation.from_bundle(load_logits(model_dir / "alpha_net.npz"), imagenet_hierarchy())
    card = decision_card(ev, target_accuracy=0.9, delta=0.15, method=method, n_cal=250, ts=False, seed=3, reps=0)
    res = ev.setting(False).threshold(0.9, method, delta=0.15, n=250, seed=3)
    assert res.theta == card["theta"] and res.test_accuracy == card["realised"]["accuracy"]
    assert _metric(at, "θ̂ (threshold)") == f"{card['theta']:.4f}"
    assert _metric(at, "Hierarchical accuracy") == f"{card['realised']['accuracy']:.4f}"
    assert _metric(at, "Hierarchical coverage") == f"{card['realised']['coverage']:.4f}"
    assert _metric(at, "Answered") == f"{card['realised']['answered']:.1%}"
    captions = " ".join(c.value for c in at.caption)
    # Theorem 1's band only beside the paper's θ̂ (its ε is about that method)
    assert (f"Theorem 1's band (ε = {theorem1_epsilon(250, 0.1, 0.15):.4f})" in captions) == (method == "theorem1")
    headline = next(i.value for i in at.info if "Deploy" in i.value)
    assert res.answer_sentence() in headline and res.target_sentence() in headline


def test_shipped_lite0_page_shows_the_cards_theta(monkeypatch, tmp_path):
    """The issue's example: Lite0, seed 0, n = 1,000, 1 − α = 0.95, Theorem 1. The page showed
    θ̂ = 0.8573 (an unstratified split); `hsc card … --method theorem1` ships θ = 0.856953."""
    shipped = Path(__file__).resolve().parents[1] / "cached_logits"
    if not (shipped / "efficientnet_lite0.npz").is_file():
        pytest.skip("shipped logits absent")
    for suffix in (".npz", ".json"):
        shutil.copy(shipped / f"efficientnet_lite0{suffix}", tmp_path / f"efficientnet_lite0{suffix}")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path))
    at = open_page(PAGE, {"acc": "0.95", "conf": "0.9", "n": "1000", "split_seed": "0", "split_method": "theorem1"})
    assert _metric(at, "θ̂ (threshold)") == "0.8570"  # 0.856953, the card's θ
    assert _metric(at, "Hierarchical accuracy") == "0.9447" and _metric(at, "Hierarchical coverage") == "0.7566"
    assert _metric(at, "Within target ± ε (on average)") == "yes"


def test_the_page_and_its_card_state_one_theta_and_the_managers_answer(page, model_dir):
    """Issue 35: the card deploys the page's method (an old link's g_card= sets it), and one sentence says
    the θ, the share of samples answered (at a leaf / coarser) and what is promised with what confidence."""
    from hsc_core.evaluation.card import decision_card

    ev = ModelEvaluation.from_bundle(load_logits(model_dir / "alpha_net.npz"), imagenet_hierarchy())
    for query, method in (({"split_method": "theorem1"}, "theorem1"), ({"g_card": "theorem1_pac"}, "theorem1_pac")):
        at = page({"acc": "0.9", "conf": "0.85", "n": "250", "split_seed": "3", "ts": "0", **query})
        card = decision_card(ev, target_accuracy=0.9, delta=0.15, method=method, n_cal=250, ts=False, seed=3, reps=0)
        res = ev.setting(False).threshold(0.9, method, delta=0.15, n=250, seed=3)
        count = ev.hierarchy.leaf_count[res.test_nodes]
        leaf, root = np.mean(count == 1), np.mean(res.test_nodes == ev.hierarchy.root)
        headline = next(i.value for i in at.info if "Deploy" in i.value)
        assert f"θ = {card['theta']:.4f}" in headline and _metric(at, "θ̂ (threshold)") == f"{card['theta']:.4f}"
        assert f"{leaf:.1%} get an answer at a leaf" in headline and f"{root:.1%} abstain (the root)" in headline
        assert f"{res.answered_accuracy:.1%} of the answers are correct" in headline
        assert ("Guaranteed with 85% confidence: the hierarchical accuracy on new data is at least 90.0% "
                "(abstentions count as correct)" in headline) == (method == "theorem1_pac")
        assert ("a marginal statement" in headline and "only on average" in headline) == (method == "theorem1")
        assert at.query_params["g_card"] in ([method], method)
    assert any("g_card= now sets" in str(e.value) for e in at.info)


def test_the_page_at_its_defaults_and_hsc_card_without_method_ship_one_theta(monkeypatch, tmp_path, capsys):
    """Issues 35 and 41: the page opened with no link (1 − α 0.95, 1 − δ 0.9, n 1,000, seed 0, its default
    method: LTT on the answers' accuracy) shows θ̂ 0.9000, and `hsc card` without --method, --delta or
    --n-cal deploys that method at δ = 0.1 on that calibration size and states that θ and the same
    sentence. (Before issue 41 the default was the marginal theorem1: θ̂ 0.8570, accuracy 0.9447 < 0.95.)"""
    from hsc_core.cli import main
    from hsc_core.evaluation.card import DEFAULT_METHOD

    shipped = Path(__file__).resolve().parents[1] / "cached_logits"
    if not (shipped / "efficientnet_lite0.npz").is_file():
        pytest.skip("shipped logits absent")
    for suffix in (".npz", ".json"):
        shutil.copy(shipped / f"efficientnet_lite0{suffix}", tmp_path / f"efficientnet_lite0{suffix}")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path))
    at = open_page(PAGE)
    assert not at.exception
    assert at.selectbox(key="_w.ga.split_method").value == DEFAULT_METHOD == "ltt_selective"
    assert _metric(at, "θ̂ (threshold)") == "0.9000"
    assert _metric(at, "Accuracy of the answers") == "0.9631" and _metric(at, "Hierarchical coverage") == "0.7169"
    assert _metric(at, "Meets the target") == "yes"
    headline = next(i.value for i in at.info if "Deploy" in i.value)
    assert "θ = 0.9000" in headline and "Guaranteed with 90% confidence: at least 95.0% of the answers" in headline
    out = tmp_path / "card.md"
    # neither --method, --delta nor --n-cal: the card's defaults are the page's (1,000 samples, δ = 0.1 here)
    assert main(["card", str(shipped / "efficientnet_lite0.npz"), "--target-accuracy", "0.95",
                 "--reps", "0", "--out", str(out)]) == 0
    card = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert (card["method"], card["delta"]) == ("ltt_selective", 0.1) and f"{card['theta']:.4f}" == "0.9000"
    assert f"{card['realised']['answered_accuracy']:.4f}" == "0.9631" and card["meets_target"] is True
    printed = capsys.readouterr().out
    assert "held-out accuracy of the answers 0.9631 meets the target 0.95" in printed
    # one sentence, the same numbers: θ, the shares answered and abstained, the answers' accuracy, the promise
    line = next(x for x in out.read_text(encoding="utf-8").splitlines() if x.startswith("**Deploy"))
    shares = headline.split(". ", 1)[1].split(" of the answers are correct")[0]
    shares = shares.replace("test samples", "held-out samples")
    assert line.startswith("**Deploy θ = 0.9000**") and shares.split("Of the 705 held-out samples, ")[1] in line
    assert "with 90% confidence: at least 95.0% of the answers on new data are correct" in line
