"""The pages' one-sentence headlines (dashboard.headlines) on hand-made numbers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dashboard import headlines

# A toy tree: root 4 over inner 3 (leaves 0, 1) and leaf 2 → leaves under each node.
LEAF_COUNT = np.array([1, 1, 1, 2, 3])


def _split(**kw):
    base = dict(theta=0.8573, label="Algorithm 2 θ̂ (paper)", kind="marginal", method="theorem1",
                target_accuracy=0.95, test_nodes=np.array([0, 1, 3, 4]), test_accuracy=0.9461, certified=True,
                n_test=4)
    return SimpleNamespace(**{**base, **kw})


def test_answer_shares_count_the_root_as_no_answer_and_leaves_apart():
    assert headlines.answer_shares(np.array([0, 1, 3, 4]), LEAF_COUNT) == (0.75, 0.5)
    assert headlines.answer_shares(np.array([], dtype=int), LEAF_COUNT) == (0.0, 0.0)


def test_guarantee_headline_says_theta_share_level_and_the_kind_of_promise():
    marginal = headlines.guarantee_headline(_split(), LEAF_COUNT, 0.9)
    assert marginal.startswith("**Deploy θ = 0.8573**")
    assert "**75% of the samples get an answer** (50% at a leaf, 25% at a coarser node, 25% none" in marginal
    assert "a marginal statement" in marginal and "94.6% correct" in marginal
    pac = headlines.guarantee_headline(_split(kind="pac", label="Theorem 1, one-sided (PAC)"), LEAF_COUNT, 0.9)
    assert "with 90% confidence, at least 95.0% of the answers" in pac
    assert "cannot promise 95.0%" in headlines.guarantee_headline(_split(certified=False), LEAF_COUNT, 0.9)
    assert "**Deploy λ = " in headlines.guarantee_headline(_split(method="darts", kind="heuristic"), LEAF_COUNT, 0.9)


def test_holds_says_which_promise_was_kept():
    assert headlines.holds_text("marginal", True, 0.46, 0.1) == \
        "yes, on average (marginal): 46% of the sets fell below the target"
    assert headlines.holds_text("pac", True, 0.04, 0.1) == \
        "yes: 4% of the sets fell below the target, within δ = 10% (PAC)"
    assert headlines.holds_text("heuristic", "", 0.3, 0.1).startswith("no guarantee")
    assert headlines.kind_words("marginal").startswith("marginal: on average")
