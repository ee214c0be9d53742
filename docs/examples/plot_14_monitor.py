"""
Monitoring a deployed θ under shift
===================================

A decision card certifies θ for data like its calibration set. After deployment, ``monitor_stream``
watches it on a stream: the shipped clean images, then the same images with Gaussian noise
(severity 5). The band is an anytime-valid confidence sequence of the accuracy since deployment;
the alarm rings when some recent window's accuracy is below the promise with confidence 1 − δ
(a false alarm has probability ≤ δ over the whole stream). ``hsc monitor`` runs the same code.
"""

import plotly.graph_objects as go

import hsc_core as hsc
from hsc_core.config import cached_logits_dir
from hsc_core.evaluation.monitor import detection_delays, held_out_rows, simulate_chunks

h = hsc.imagenet_hierarchy()
data = hsc.load_logits(cached_logits_dir() / "efficientnet_lite0.npz")
ev = hsc.ModelEvaluation.from_bundle(data, h)
card = hsc.decision_card(ev, target_accuracy=0.85, delta=0.1, method="theorem1_pac", reps=0, n_resamples=10)
stream = [("clean", 2000), ("gaussian_noise-5", 2000)]
res = hsc.monitor_stream(h, simulate_chunks(stream, model="efficientnet_lite0", rows=held_out_rows(ev, card)), card)
print(res.verdict)
print(detection_delays(res.frame))

# %%
# The same stream with θ adapting (ACI): θ rises under noise and the long-run accuracy stays at the target.
aci = hsc.monitor_stream(h, simulate_chunks(stream, model="efficientnet_lite0", rows=held_out_rows(ev, card)), card,
                         adapt="aci")
f, g = res.frame, aci.frame
fig = go.Figure()
fig.add_trace(go.Scatter(x=f["t"], y=f["accuracy_upper"], line_width=0, showlegend=False))
fig.add_trace(go.Scatter(x=f["t"], y=f["accuracy_lower"], fill="tonexty", line_width=0, name="band (fixed θ)"))
fig.add_trace(go.Scatter(x=f["t"], y=f["accuracy"], name="accuracy, fixed θ"))
fig.add_trace(go.Scatter(x=g["t"], y=g["accuracy"], name="accuracy, ACI"))
fig.add_trace(go.Scatter(x=g["t"], y=g["theta"], name="θ_t (ACI)", yaxis="y2"))
fig.add_hline(y=0.85, line_dash="dash", annotation_text="promised")
if res.first_alarm:
    fig.add_vline(x=res.first_alarm, line_color="red", annotation_text="alarm")
fig.update_layout(yaxis=dict(title="accuracy", range=[0.5, 1]), xaxis_title="sample t",
                  yaxis2=dict(title="θ", overlaying="y", side="right", range=[0, 1]))
fig.show()
# sphinx_gallery_thumbnail_path = 'overview.png'
