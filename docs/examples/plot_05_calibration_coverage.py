"""
Calibration–coverage
====================

How well calibrated is each rule's confidence at each coverage? The expected calibration error (ECE, 15 bins) of
the predicted nodes, as θ moves the rule from the leaves (coverage 1) to the root. Temperature scaling lowers it.
"""

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.figures import cc_figure

h = hsc.imagenet_hierarchy()
ev = hsc.ModelEvaluation.from_bundle(hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz"), h)
for ts in (False, True):
    for row in ev.setting(ts=ts).cc_summary(rules=["climbing"]):
        print("with TS   " if ts else "without TS", {k: v for k, v in row.items() if isinstance(v, float)})

# %%
fig = cc_figure(ev.setting(ts=False).cc_curves(), title="EfficientNet-Lite0 without TS: ECE against coverage")
fig.show()
