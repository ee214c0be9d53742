"""
The four rules compared
=======================

Selective (the leaf or the root), Climbing, Jumping and Max-Coverage on one model: their exact RC curves and the
gain of each over Selective (percent hAURC reduction), with and without temperature scaling.
"""

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.figures import rc_figure

h = hsc.imagenet_hierarchy()
ev = hsc.ModelEvaluation.from_bundle(hsc.load_logits(cached_logits_dir() / "efficientnet_lite1.npz"), h)
for ts in (False, True):
    es = ev.setting(ts=ts)
    gains = ", ".join(f"{rule} {es.gain(rule):+.1f} %" for rule in hsc.RULES[1:])
    print(f"{'with' if ts else 'without'} TS: {gains}")

# %%
# Without TS a rule can do worse than Selective; with TS every rule gains on this model.
es = ev.setting(ts=True)
curves = es.curves()
fig = rc_figure({r: (c.coverage, c.risk) for r, c in curves.items()}, {r: c.haurc for r, c in curves.items()},
                title="EfficientNet-Lite1, the paper's four rules, with TS")
fig.show()
