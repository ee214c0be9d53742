"""
Metric-optimal rules against the paper's
========================================

Beyond the paper: rules that pick the node with the best expected hF1, mistake severity or information
(``hf1``, ``min_severity``, ``max_information``) and Valmadre's Pareto rule. A rule whose curve stops short of
coverage 1 is compared with Selective only over the coverage range both curves cover (the "gain over" range).
"""

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.figures import rc_figure

h = hsc.imagenet_hierarchy()
es = hsc.ModelEvaluation.from_bundle(hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz"), h).setting(
    ts=True)
rules = ["selective", "climbing", *[r for r in hsc.rule_names() if r not in hsc.RULES]]
for rule in rules[1:]:
    g = es.gain_range(rule)
    print(f"{hsc.rule_label(rule):>22}: gain {g.gain:+6.1f} % over coverage {g.low:.3f}–{g.high:.3f}")

# %%
curves = es.curves(rules=rules)
fig = rc_figure({r: (c.coverage, c.risk) for r, c in curves.items()}, {r: c.haurc for r, c in curves.items()},
                rules=rules, title="EfficientNet-Lite0 with TS: the paper's rules and the rules beyond it")
fig.show()
