"""
Every guarantee side by side
============================

The same repeated calibration sets for every method: Algorithm 2 and its PAC version, conformal risk control,
Learn-then-Test (three multiple-testing procedures), conformal node sets, their Mondrian (per-superclass) versions
and DARTS. PAC methods promise a violation rate ≤ δ; marginal ones an accuracy ≥ 1 − α on average. (The dashboard
and ``hsc guarantees`` use 1,000 repetitions; 40 here keep the docs build fast.)
"""

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.report.guarantee_figures import accuracy_coverage_figure, violation_figure

h = hsc.imagenet_hierarchy()
es = hsc.ModelEvaluation.from_bundle(hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz"), h).setting(
    ts=True)
settings = hsc.GuaranteeSettings(alpha=0.1, delta=0.1)
result = hsc.shootout(es.guarantee_data(), settings, 500, reps=40, seed=0)
print(result.summary[["method", "kind", "violation_rate", "accuracy_mean", "coverage_mean"]].to_string(index=False))

# %%
violation_figure(result.summary, delta=0.1, title="Violation rate per method (40 calibration sets, n = 500)").show()

# %%
accuracy_coverage_figure(result.summary, target=0.9, title="Accuracy against coverage per method").show()
