"""
The θ for a target accuracy, with its guarantee
===============================================

``threshold_for_accuracy`` calibrates θ on a seeded calibration set drawn from the evaluation split and measures
it on the remaining samples. By default it guarantees the accuracy of the answers given with probability ≥ 1 − δ
(``"ltt_selective"``, δ = 0.1 unless given). The paper's Algorithm 2 (``"theorem1"``) needs no δ: its guarantee
holds only on average over calibration sets.
"""

import plotly.graph_objects as go

import hsc_core as hsc
from hsc_core.config import cached_logits_dir

h = hsc.imagenet_hierarchy()
data = hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz")

marginal = hsc.threshold_for_accuracy(h, data.logits, data.labels, 0.95, "theorem1", n=800)
pac = hsc.threshold_for_accuracy(h, data.logits, data.labels, 0.95, n=800)  # the default: the answers, PAC
for res in (marginal, pac):
    print(f"{res.label}: θ = {res.theta:.4f}; {res.answer_sentence()}\n  {res.guarantee}\n  {res.target_sentence()}")

# %%
# Where the test samples are answered: the share predicted at each depth of the tree (0 is the root, a
# rejection). The PAC θ is more cautious, so more samples climb.
fig = go.Figure([go.Bar(x=list(r.share_by_depth), y=list(r.share_by_depth.values()), name=r.label)
                 for r in (marginal, pac)])
fig.update_layout(title="Share of test samples by the depth of the predicted node (target accuracy 0.95)",
                  xaxis_title="depth of the predicted node", yaxis_title="share of test samples", barmode="group")
fig.show()
