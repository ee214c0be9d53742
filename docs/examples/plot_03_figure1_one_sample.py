"""
Figure 1 for one sample
=======================

The paper's Figure 1 as a tree, live: the predicted path from the root, the true label's branch, θ, and the node
each rule picks. Drag the slider or press ▶ to sweep θ (the figure is the Explorer page's).
"""

import numpy as np

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.tree_figure import record_rows, tree_figure

h = hsc.imagenet_hierarchy()
data = hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz")
es = hsc.ModelEvaluation.from_bundle(data, h).setting(ts=True)

# %%
# A sample whose leaf prediction is wrong but whose Climbing prediction at θ = 0.5 is right: the rule rescues it.
wrong = np.flatnonzero(es.leaf_pred != es.labels)
climbing = es.decision_paths("climbing")
nodes, _ = es.predict("climbing", 0.5)
rescued = wrong[h.is_ancestor(nodes[wrong], es.labels[wrong])]
i = int(rescued[0])
print(f"sample {es.sample_ids[i]}: true {h.names[es.labels[i]]}, predicted leaf {h.names[es.leaf_pred[i]]}")

paths = {rule: es.decision_paths(rule) for rule in hsc.RULES}
fig = tree_figure(h, es.node_row(i), record_rows(paths, i), true_leaf=int(es.labels[i]), theta=0.5,
                  title="Figure 1, live: one ImageNet sample")
fig.show()
# sphinx_gallery_thumbnail_path = 'explorer.png'
