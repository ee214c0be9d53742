"""
A decision card
===============

The θ to ship, the guarantee it carries and the evidence, as Markdown with YAML front matter (the Hugging Face
model-card convention) and JSON: ``decision_card`` is ``hsc card``. The card's θ is the one
``threshold_for_accuracy`` gives for the same settings.
"""

import plotly.graph_objects as go

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.evaluation.card import card_markdown

h = hsc.imagenet_hierarchy()
data = hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz")
ev = hsc.ModelEvaluation.from_bundle(data, h)
card = hsc.decision_card(ev, target_accuracy=0.9, delta=0.1, method="theorem1_pac", reps=50, n_resamples=200)
print(card_markdown(card)[:1500])

# %%
# The realised accuracy on the test samples, with its 95 % interval, against the target.
low, high = card["realised"]["accuracy_interval"]
acc = card["realised"]["accuracy"]
fig = go.Figure(go.Bar(x=["realised accuracy"], y=[acc], error_y=dict(type="data", array=[high - acc],
                                                                       arrayminus=[acc - low])))
fig.add_hline(y=card["target_accuracy"], line_dash="dash", annotation_text="target 1 − α")
fig.update_layout(title=f"θ = {card['theta']:.4f} ({card['method_label']}), coverage "
                        f"{card['realised']['coverage']:.3f}", yaxis_range=[0.8, 1.0])
fig.show()
# sphinx_gallery_thumbnail_path = 'overview.png'
