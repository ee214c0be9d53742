"""
The RC curve and hAURC of one model
===================================

One call, ``rc_curve_and_haurc``, gives the exact hierarchical risk–coverage curve of a rule and the area under
it (hAURC), with the numbers the dashboard's Risk–Coverage page shows: temperature T fitted on the protocol's
10 % calibration split, every number measured on the other 90 %.
"""

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.figures import rc_figure

h = hsc.imagenet_hierarchy()
data = hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz")
curve, haurc = hsc.rc_curve_and_haurc(h, data.logits, data.labels, "climbing")
print(f"Climbing, with TS: hAURC×1000 = {1000 * haurc:.2f} over {curve.coverage.size:,} operating points")

# %%
# The curve is exact: one point per breakpoint of θ, no grid. ``curve.at(θ)`` is the operating point a
# threshold θ selects.
coverage, risk = curve.at(0.7)
print(f"at θ = 0.7: coverage {coverage:.3f}, risk {risk:.3f}")

fig = rc_figure({"climbing": (curve.coverage, curve.risk)}, {"climbing": haurc}, rules=["climbing"],
                title="EfficientNet-Lite0, Climbing, with temperature scaling")
fig.show()
# sphinx_gallery_thumbnail_path = 'risk_coverage.png'
