"""Overview: what HSC is, one picture, and a table of every cached model."""

import pandas as pd
import streamlit as st

from dashboard import data, plots, state, ui

ui.ensure_entrypoint()

st.title("Hierarchical Selective Classification")

left, right = st.columns([1, 1.1], gap="large")
with left:
    st.markdown(
        """
A classifier that is unsure should not have to choose between a wrong answer and no answer.
**Hierarchical selective classification (HSC)** lets it *back off* along the class tree instead:
every internal node gets the probability of its leaves summed (e.g. the WordNet tree over the 1,000
ImageNet classes, or CIFAR-100's 20 superclasses), and an **inference rule** returns a node whose probability is at least the
confidence threshold **θ**. *Climbing* starts at the most likely leaf and walks up towards the root
until it meets θ; *Selective* (ordinary selective classification) can only keep the leaf or reject,
i.e. predict the root.

A prediction is **correct** when it is the true leaf or one of its ancestors, and its
**coverage** φ = 1 − log|leaves under it| / log|all leaves| measures how specific it is (1 for a leaf,
0 for the root). Sweeping θ traces a **risk–coverage curve**; the area under it (**hAURC**, lower
is better) and the **hierarchical gain** (% hAURC saved relative to Selective) summarise a rule.
Finally, a threshold θ̂ computed on a calibration set *guarantees* a target accuracy with high
probability (the paper's Algorithm 1 and Theorem 1).
"""
    )
    st.caption(
        "Pages: **Explorer** (one sample, live Figure 1) · **Risk–Coverage** · **Calibration–Coverage** · "
        "**Guaranteed accuracy** · **Compare models** · **Try an image**. The model, data subset and "
        "temperature scaling in the sidebar apply everywhere, and the URL keeps every setting."
    )
with right:
    ui.figure(plots.illustration_figure(data.hierarchy_or_imagenet(*ui.current_model())), "hsc_illustration",
              key="overview_illustration")

st.subheader("Cached models")
subset = state.get("subset")
rows, errors = [], []
with st.spinner("Summarising models…"):
    for name, location in ui.catalog().items():
        try:
            rows.append(data.model_summary(name, location, subset))
        except data.LOAD_ERRORS as exc:
            errors.append((name, exc))
for name, exc in errors:
    st.error(f"**{name}** cannot be used: {exc}")
if not rows:
    if not errors:
        ui.no_models_message()
    st.stop()

df = pd.DataFrame(rows)
models = df[["model", "samples", "top-1 accuracy", "T", "held-out samples"]]
st.dataframe(models, hide_index=True, key="overview_table",
             column_config={"top-1 accuracy": st.column_config.NumberColumn(format="%.4f"),
                            "T": st.column_config.NumberColumn(format="%.3f")})
per_rule = data.per_rule_summary(rows)  # with/without-TS side by side: no sideways scrolling
st.dataframe(per_rule, hide_index=True, key="overview_rules", height=min(35 * (len(per_rule) + 1) + 3, 800),
             column_config={c: st.column_config.NumberColumn(format="%.2f") for c in per_rule.columns[2:]})
c1, c2 = st.columns(2)
with c1:
    ui.csv_download(per_rule, f"hsc_haurc_by_rule_{subset}", key="dl_overview_rules")
with c2:
    ui.csv_download(df, f"hsc_models_{subset}", key="dl_overview", label="Everything, one row per model (CSV)")
n_held = int(df["held-out samples"].iloc[0])
st.caption(
    f"Top-1 accuracy is on all samples of the selected subset. T is fitted on a fixed random half "
    f"(seed 0, stratified by data source); **both** hAURC columns (no TS / TS) are measured on the other, "
    f"held-out half ({n_held:,} samples for the first model) so that they are comparable. "
    "Hierarchical gain is the % hAURC reduction relative to Selective (0 for Selective itself); positive is better."
)
