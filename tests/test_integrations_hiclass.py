"""HiClass interop (``hsc_core.integrations.hiclass``, issue 44): a HiClass classifier's tree and
per-level probabilities become the toolkit's ``Hierarchy`` and node scores."""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("hiclass")
pytest.importorskip("sklearn")

from hiclass import LocalClassifierPerNode, LocalClassifierPerParentNode  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

import hsc_core as hsc  # noqa: E402
from hsc_core.evaluation.guarantee_methods import GuaranteeData  # noqa: E402
from hsc_core.evaluation.threshold import threshold  # noqa: E402
from hsc_core.integrations.hiclass import (  # noqa: E402
    hiclass_hierarchy,
    hiclass_labels,
    hiclass_leaf_probabilities,
    hiclass_node_scores,
)

logging.getLogger("hiclass").setLevel(logging.ERROR)
PATHS = [["animal", "bird"], ["animal", "cat"], ["plant", "rose"], ["plant", "oak"]]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    k = np.repeat(np.arange(4), 60)
    X = rng.normal(size=(k.size, 4)) + 1.5 * np.eye(4)[k]
    y = np.array(PATHS, dtype=object)[k]
    clf = LocalClassifierPerParentNode(local_classifier=LogisticRegression(), return_all_probabilities=True,
                                       probability_combiner=None).fit(X, y)
    return clf, X, y, k


def test_tree_scores_and_labels_are_hiclass_own(fitted):
    clf, X, y, k = fitted
    tree = hiclass_hierarchy(clf)
    assert tree.n_leaves == 4 and tree.n_nodes == 7
    assert sorted(tree.names[:4]) == ["bird", "cat", "oak", "rose"] and tree.names[tree.root] == "root"
    labels = hiclass_labels(clf, y, tree)
    assert [tree.names[i] for i in labels[[0, 60, 120, 180]]] == ["bird", "cat", "rose", "oak"]
    scores = hiclass_node_scores(clf, X, tree)
    levels = clf.predict_proba(X)
    assert np.all(scores[:, tree.root] == 1.0)
    for level, probs in enumerate(levels):  # every column of HiClass's output sits at its node
        for j, name in enumerate(clf.classes_[level].tolist()):
            node = tree.names.index(name)
            assert np.array_equal(scores[:, node], probs[:, j]), name
    # the scores feed every curve and guarantee of the toolkit
    curve = hsc.hierarchical_rc_curve(tree, scores, labels, "climbing")
    assert 0 < curve.haurc < 0.5 and curve.coverage.max() == 1.0
    res = threshold(GuaranteeData.from_arrays(tree, scores, labels), 0.9, n=150, seed=0)
    assert res.n_cal == 150 and 0.0 <= res.theta <= 1.0
    # leaf probabilities: the leaves' scores, renormalised (rows sum to 1), for every logits path
    leaf = hiclass_leaf_probabilities(scores, tree)
    assert np.allclose(leaf.sum(axis=1), 1.0)
    np.testing.assert_allclose(leaf * scores[:, :4].sum(axis=1, keepdims=True), scores[:, :4])


def test_local_classifier_per_node_and_bad_input(fitted):
    _, X, y, _ = fitted
    per_node = LocalClassifierPerNode(local_classifier=LogisticRegression(), return_all_probabilities=False).fit(X, y)
    with pytest.raises(ValueError, match="return_all_probabilities=True") as exc:
        hiclass_node_scores(per_node, X)
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="is not a fitted HiClass classifier"):
        hiclass_hierarchy(LogisticRegression())
    clf = fitted[0]
    with pytest.raises(ValueError, match="'animal / dog' \\(row 0\\) is not a leaf"):
        hiclass_labels(clf, [["animal", "dog"]])
