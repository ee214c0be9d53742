"""
The model atlas from a results table
====================================

The atlas puts many models on one chart, top-1 accuracy against hAURC, coloured by training regime (read from
the timm name). Its input is any per-model results table: ``hsc evaluate``'s ``results.csv`` or the authors'
table of 1,116 models (which you download yourself). Here a small synthetic table: eight made-up "models" on a
small tree, evaluated by the toolkit itself and written as ``hsc evaluate`` would.
"""

import tempfile
from pathlib import Path

import hsc_core as hsc
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.report.atlas_figure import atlas_figure

h = hsc.Hierarchy.from_parents([10, 10, 10, 11, 11, 11, 12, 12, 13, 13, 14, 14, 14, 14, -1], 10)
models = {"resnet50.a1_in1k": 0.72, "resnet50.fb_ssl_yfcc100m_ft_in1k": 0.78, "deit_small_distilled_patch16_224": 0.76,
          "vit_base_patch16_clip_224.laion2b_ft_in1k": 0.83, "convnext_tiny.in12k_ft_in1k": 0.81,
          "tf_efficientnet_b0.ap_in1k": 0.74, "beit_base_patch16_224.in22k_ft_in22k_in1k": 0.84,
          "mobilenetv3_small_100.lamb_in1k": 0.66}
rows = []
for k, (name, top1) in enumerate(models.items()):
    logits, labels = synthetic_logits(h, 600, top1=top1, seed=k)
    rows += hsc.ModelEvaluation(h, logits, labels, name=name, dataset="toy").results(losses=("01",))
table_file = Path(tempfile.mkdtemp()) / "results.csv"
table_file.write_text(hsc.to_csv(rows))
atlas = hsc.load_atlas_table(table_file)
print(atlas[["model", "regimes"]].to_string(index=False))

# %%
fig = atlas_figure(atlas, rule="climbing", ts=True, title="Eight synthetic models: top-1 against Climbing's hAURC")
fig.show()
