"""The pages' one-sentence headlines (dashboard.headlines) on hand-made numbers."""

from __future__ import annotations

import numpy as np

from dashboard import headlines


def _split(method="theorem1", kind="marginal", quantity="hierarchical", label="Algorithm 2 θ̂ (paper)",
           certified=True, delta=None):
    """A ThresholdResult on the toy tree: 4 test samples at leaf 0 (right), leaf 1 (wrong), inner 3
    (right) and the root (abstain), so 2/4 at a leaf, 1/4 coarser, 1/4 abstained, 2 of 3 answers right."""
    from hsc_core.core.hierarchy import Hierarchy
    from hsc_core.evaluation.threshold import ThresholdResult, answer_breakdown

    h = Hierarchy.from_parents([3, 3, 4, 4, -1], 3)
    nodes, truth = np.array([0, 1, 3, 4]), np.array([0, 0, 1, 2])
    b = answer_breakdown(h, nodes, truth)
    return ThresholdResult(method=method, label=label, kind=kind, quantity=quantity, theta=0.8573, epsilon=None,
                           target_accuracy=0.95, delta=delta, n_cal=10, n_test=4, seed=0, certified=certified, note="",
                           test_accuracy=b["accuracy"], test_coverage=0.5, share_answered_below_root=b["answered"],
                           share_by_depth={0: 0.25, 1: 0.25, 2: 0.5}, guarantee="", breakdown=b, test_nodes=nodes)


def test_guarantee_headline_says_shares_answers_accuracy_and_the_kind_of_promise():
    marginal = headlines.guarantee_headline(_split(), 0.9)
    assert marginal.startswith("**Deploy θ = 0.8573**")
    assert ("Of the 4 test samples, 50.0% get an answer at a leaf, 25.0% at a coarser node and 25.0% abstain (the "
            "root); 66.7% of the answers are correct (75.0% counting the abstentions as correct") in marginal
    assert "**Guaranteed only on average over calibration sets" in marginal and "a marginal statement" in marginal
    assert "hierarchical accuracy on the test samples, 0.7500, is BELOW the target 0.95 (promised only on average" \
        in marginal
    pac = headlines.guarantee_headline(_split("ltt_selective", "pac", "answers", "LTT", delta=0.1), 0.9)
    assert "**Guaranteed with 90% confidence: at least 95.0% of the answers on new data are correct (abstentions " \
           "excluded)**" in pac
    assert "accuracy of the answers on the test samples, 0.6667, is BELOW the target" in pac
    assert "cannot promise 95.0%" in headlines.guarantee_headline(_split(certified=False), 0.9)
    assert "**Deploy λ = " in headlines.guarantee_headline(_split(method="darts", kind="heuristic"), 0.9)


def test_guarantee_metrics_show_the_guaranteed_quantity_and_the_band_only_for_the_papers_theta():
    marginal = {label: value for label, value, _, _ in headlines.guarantee_metrics(_split(), 0.3)}
    assert marginal["Hierarchical accuracy"] == "0.7500" and marginal["Within target ± ε (on average)"] == "yes"
    pac = {label: value for label, value, _, _ in headlines.guarantee_metrics(
        _split("ltt_selective", "pac", "answers", delta=0.1), 0.3)}
    assert pac["Accuracy of the answers"] == "0.6667" and pac["Meets the target"] == "no" and pac["Answered"] == "75.0%"
    assert not any(k.startswith("Within") for k in pac)


def test_holds_says_which_promise_was_kept():
    assert headlines.holds_text("marginal", True, 0.46, 0.1) == \
        "yes, on average (marginal): 46% of the sets fell below the target"
    assert headlines.holds_text("pac", True, 0.04, 0.1) == \
        "yes: 4% of the sets fell below the target, within δ = 10% (PAC)"
    assert headlines.holds_text("heuristic", "", 0.3, 0.1).startswith("no guarantee")
    assert headlines.kind_words("marginal").startswith("marginal: on average")


# A path from the top-1 leaf "tabby" up to the root: p = 0.40, 0.70, 0.95, 1.
PATH = ["tabby", "cat", "animal", "root"]
PROBS = np.array([0.40, 0.70, 0.95, 1.0])


def test_climb_headline_says_for_which_theta_backing_off_is_right():
    wrong = headlines.climb_headline(PATH, PROBS, np.array([False, True, True, True]))
    # θ ≤ 0.40: the wrong leaf; (0.40, 0.95]: cat or animal, both right; above 0.95: the root
    assert wrong == ("The model's top guess is **tabby** (p = 0.40), and it is wrong; backing off when unsure "
                     "(Climbing) answers correctly, with **cat** or coarser, for θ from 0.40 to 0.95 and rejects the "
                     "image above it.")
    right = headlines.climb_headline(PATH, PROBS, np.array([True, True, True, True]))
    assert "it is right" in right and "leaf for θ up to 0.40" in right and "coarser class for θ up to 0.95" in right
    hopeless = headlines.climb_headline(PATH, PROBS, np.array([False, False, False, True]))
    assert hopeless.endswith("can only reject it (for θ above 0.95).")
    unknown = headlines.climb_headline(PATH, PROBS, None)
    assert "keeps it for θ up to 0.40 and answers a coarser class for θ up to 0.95 and rejects" in unknown
    almost = headlines.climb_headline(PATH, np.array([0.4, 0.7, 0.9996, 1.0]), np.array([True] * 4))
    assert "coarser class for θ up to 0.9996 and rejects" in almost  # not "up to 1.00 and rejects above it"
    assert "leaf for θ up to 0.4000 and" in almost  # one format for both ends of the sentence
    # issue 45: "θ from 0.31 to 1.0000"; both ends in one format, and 0.99999 (below 1) never read as 1
    rescued = headlines.climb_headline(PATH, np.array([0.31, 0.7, 0.99999, 1.0]), np.array([False, True, True, True]))
    assert "for θ from 0.3100 to 0.9999 and rejects the image above it." in rescued
    sure = headlines.climb_headline(["a", "b", "root"], np.array([0.5, 1.0, 1.0]), np.array([True, True, True]))
    assert sure.endswith("never rejects it (every node on the path has probability 1).")


def test_story_calibrators_per_rank_and_sensitivity_headlines():
    story = headlines.story_headline(1705, 0.2463, 0.41, 0.5)
    assert ("wrong 25 % of the time; answering with a coarser class when unsure (Climbing, threshold 0.50) makes "
            "41 % of those mistakes right" in story)
    rows = [{"calibrator": "ts", "confidence": "softmax", "haurc": 0.040},
            {"calibrator": "none", "confidence": "entropy", "haurc": 0.050},
            {"calibrator": "x", "confidence": "y", "haurc": float("nan")}]
    cal = headlines.calibrators_headline(rows, str.upper, str.title)
    assert "**TS + Softmax** is best (hAURC 40.0 ×10⁻³), 20 % below the worst, **NONE + Entropy** (50.0)" in cal
    assert "Here" not in headlines.calibrators_headline(rows[:1], str.upper, str.title)
    share = {"genus": 0.1, "species": 0.7, "root (abstain)": 0.2}
    ranks = headlines.per_rank_headline(share, True, 0.9, 0.1, 0.93, 0.9125)  # 0.73 right of 0.8 answered
    assert ranks == ("**70% of the samples get an answer at species, 10% at a coarser rank and 20% abstain**; on this "
                     "table 91.2% of the answers are correct, 93.0% counting the abstentions as correct. **Guaranteed "
                     "with 90% confidence: hierarchical accuracy ≥ 90.0% on new data**, every sample counting and an "
                     "abstention counting as correct (not the answers' accuracy alone).")
    assert headlines.per_rank_headline(share, False, 0.99, 0.05, 1.0).startswith("**No θ per rank can promise 99.0%")
    answers = headlines.per_rank_headline(share, True, 0.9, 0.1, 0.93, 0.9125, "answers")
    assert answers.endswith("**Guaranteed with 90% confidence: at least 90.0% of the answers given on new data are "
                            "correct**, abstentions excluded (they are neither right nor wrong).")
    assert answers.startswith(ranks.split(" **Guaranteed")[0])
    gains = {"WordNet": 12.0, "Random": -3.0, "Induced": 15.0}
    assert headlines.sensitivity_headline(gains, "Climbing", "Random").endswith(
        "under the 2 real trees **Climbing** saves from 12.0 % (WordNet) to 15.0 % (Induced); with the classes "
        "shuffled (Random) it makes 3.0 % more: the gain comes from what the tree means.")
    assert headlines.sensitivity_headline({**gains, "Random": 13.0}, "Climbing", "Random").endswith(
        "it saves 13.0 %: part of the gain does not depend on what the tree means.")
    assert headlines.sensitivity_headline({"WordNet": 12.0}, "Climbing").endswith(
        "under the tree **Climbing** saves 12.0 % (WordNet).")


def test_the_sidebar_says_both_counts_in_words():
    """Issue 35: 1,894 in the sidebar vs 1,705 on the pages — the shipped sample's split, in words."""
    from pathlib import Path

    import pytest

    from dashboard import sidebar
    from hsc_core.datasets.logits_io import load_logits

    shipped = Path(__file__).resolve().parents[1] / "cached_logits" / "efficientnet_lite0.npz"
    if not shipped.is_file():
        pytest.skip("shipped logits absent")
    assert sidebar.split_counts(load_logits(shipped), "all") == (1894, 189)
    assert sidebar.split_words(1894, 189) == ("1,894 images: 189 fit the temperature T (10 % calibration split), "
                                              "1,705 are evaluated on every page.")


def test_rescued_share_is_climbing_walked_by_hand():
    """The story's numbers: the top-1 error, and the share of those mistakes Climbing at θ answers with a
    correct node below the root, against a walk up each sample's path (toy tree, synthetic logits)."""
    from dashboard import views
    from hsc_core.core.hierarchy import Hierarchy
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.evaluation.model import ModelEvaluation

    h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)  # leaves 0–3 under 4 and 5, root 6
    logits, labels = synthetic_logits(h, 400, top1=0.6, seed=3)
    view = ModelEvaluation(h, logits, labels, name="toy").setting(False)
    error, rescued = views.rescued_share(view, 0.7)
    wrong = [p for p in range(view.n) if view.leaf_pred[p] != view.labels[p]]
    hits = 0
    for p in wrong:
        row, node = view.node_row(p), int(view.leaf_pred[p])
        while row[node] < 0.7:  # Climbing: up from the top-1 leaf to the first node of probability ≥ θ
            node = int(h.parent[node])
        hits += node != h.root and bool(h.is_ancestor(node, int(view.labels[p])))
    assert error == len(wrong) / view.n and 0 < error < 1
    assert rescued == hits / len(wrong) and 0 < rescued < 1


def test_names_from_an_upload_are_shown_literally_in_the_sentences():
    """A node or rank name from an uploaded tree or table is text, never markdown (no link, no bold)."""
    evil = "[click](javascript:alert(1)) **x**"
    text = headlines.climb_headline([evil, "root"], np.array([0.4, 1.0]), None)
    assert "[click]" not in text and "\\[click\\]" in text and "\\*\\*x\\*\\*" in text
    text = headlines.per_rank_headline({"genus": 0.1, evil: 0.7, "root (abstain)": 0.2}, True, 0.9, 0.1, 0.93)
    assert "\\[click\\]" in text and "[click]" not in text
