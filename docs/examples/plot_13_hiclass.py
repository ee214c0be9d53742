"""
A HiClass classifier's per-level probabilities as scores
========================================================

HiClass trains one local classifier per parent node (or per node, or per level) and, with
``return_all_probabilities=True``, gives one probability table per level. ``hsc_core.integrations.hiclass`` turns its
fitted tree into a ``Hierarchy`` and its tables into node scores, so every rule, curve and guarantee of the toolkit
reads them. Here: the digits under two levels of the shipped tree induced from a model's confusion.
"""

import logging

import numpy as np
from hiclass import LocalClassifierPerParentNode
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

import hsc_core as hsc
from hsc_core.datasets.imagenet_trees import DIGITS_TREE_JSON
from hsc_core.evaluation.guarantee_methods import GuaranteeData
from hsc_core.evaluation.threshold import threshold
from hsc_core.integrations.hiclass import (
    hiclass_hierarchy,
    hiclass_labels,
    hiclass_leaf_probabilities,
    hiclass_node_scores,
)
from hsc_core.report.figures import rc_figure

logging.getLogger("hiclass").setLevel(logging.ERROR)
X, y = load_digits(return_X_y=True)
digits_tree = hsc.Hierarchy.from_json(DIGITS_TREE_JSON)
# HiClass takes each sample's path as a row: the digit's group at depth 1, then the digit itself
group = digits_tree.ancestor_at_depth(np.asarray(y), 1)
paths = np.array([[digits_tree.names[g], str(d)] for g, d in zip(group.tolist(), y.tolist(), strict=True)],
                 dtype=object)
X_tr, X_te, p_tr, p_te = train_test_split(X / 16.0, paths, test_size=0.5, random_state=0, stratify=y)
clf = LocalClassifierPerParentNode(local_classifier=LogisticRegression(max_iter=1000), return_all_probabilities=True,
                                   probability_combiner="multiply").fit(X_tr, p_tr)

# %%
# HiClass's tree and its per-level probabilities, as the toolkit's ``Hierarchy`` and (n, n_nodes) node scores.
tree = hiclass_hierarchy(clf)
scores = hiclass_node_scores(clf, X_te, tree)
labels = hiclass_labels(clf, p_te, tree)
print(f"{tree.n_leaves} leaves, {tree.n_nodes} nodes; groups: "
      + ", ".join(f"{tree.names[v]} = {{{' '.join(tree.names[i] for i in range(10) if tree.parent[i] == v)}}}"
                  for v in range(tree.n_leaves, tree.n_nodes) if v != tree.root))

# %%
# The exact curves of the per-level scores, and a θ for 97 % hierarchical accuracy from the guarantee engine (its
# default method, calibrated on half of the test samples and measured on the rest).
curves = {rule: hsc.hierarchical_rc_curve(tree, scores, labels, rule) for rule in ("selective", "climbing")}
print({rule: round(1000 * c.haurc, 2) for rule, c in curves.items()})
res = threshold(GuaranteeData.from_arrays(tree, scores, labels), 0.97, n=len(labels) // 2, seed=0)
print(f"θ = {res.theta:.4f} ({res.method}): realised accuracy {res.test_accuracy:.4f}, "
      f"{res.share_answered_below_root:.1%} answered below the root")

# %%
# Or as leaf probabilities (the leaves' scores, renormalised), which enter every logits path, e.g. the protocol's
# one-call hAURC with temperature scaling.
leaf = hiclass_leaf_probabilities(scores, tree)
_, haurc = hsc.rc_curve_and_haurc(tree, np.log(np.maximum(leaf, 1e-300)), labels, "climbing")
print(f"Climbing hAURC×1000 from the leaf probabilities (protocol, TS): {1000 * haurc:.2f}")

fig = rc_figure({r: (c.coverage, c.risk) for r, c in curves.items()}, {r: c.haurc for r, c in curves.items()},
                rules=("selective", "climbing"), title="HiClass (local classifier per parent node) on digits")
fig.show()
