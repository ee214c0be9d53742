"""
Your own data set and hierarchy
===============================

Nothing here is ImageNet-specific. A hierarchy is a file (edge list, levels CSV, Newick, ImageNet is-a or the
project's JSON; see the data-set guide), and logits are any (n_samples, n_classes) array whose columns are the
tree's leaves. Here: a small levels CSV, and synthetic logits standing in for your model's.
"""

import tempfile
from pathlib import Path

import hsc_core as hsc
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.report.figures import rc_figure

levels = """kingdom,group,class
animal,bird,sparrow
animal,bird,owl
animal,mammal,cat
animal,mammal,dog
animal,mammal,horse
plant,flower,rose
plant,flower,tulip
plant,tree,oak
plant,tree,pine
"""
folder = Path(tempfile.mkdtemp())
(folder / "tree.csv").write_text(levels)
h = hsc.load_hierarchy(folder / "tree.csv")
print(f"{h.n_leaves} classes, {h.n_nodes} nodes; leaves in column order: {h.names[:h.n_leaves]}")

# %%
# Your model's logits and labels would come from ``hsc.load_logits("mine.npz")`` (or ``np.load``); here a
# synthetic model with 70 % top-1 whose mistakes stay mostly within the right branch.
logits, labels = synthetic_logits(h, 2000, top1=0.7, seed=0)
ev = hsc.ModelEvaluation(h, logits, labels, name="my model", dataset="garden")
es = ev.setting(ts=True)
curves = es.curves()
print({rule: round(1000 * c.haurc, 2) for rule, c in curves.items()})
fig = rc_figure({r: (c.coverage, c.risk) for r, c in curves.items()}, {r: c.haurc for r, c in curves.items()},
                title="A 9-class tree of your own")
fig.show()
