"""Compare models: one rule's RC curves overlaid, and a sortable table of every model."""

import pandas as pd
import streamlit as st

from dashboard import data, plots, state, ui
from hsc_core.core.rules import RULE_LABELS, RULES
from hsc_core.report.figures import ExportContext

ui.ensure_entrypoint()

st.title("Compare models")
controls = st.columns([1.4, 1.2, 1.4, 1])
with controls[0]:
    state.bind(st.selectbox, "Rule", "cmp_rule", scope="cmp", options=list(RULES), format_func=RULE_LABELS.get)
with controls[1]:
    state.bind(st.radio, "Risk", "loss", scope="cmp", options=["01", "severity"],
               format_func={"01": "0/1 (hierarchical)", "severity": "LCA severity"}.get)
with controls[2]:
    state.bind(st.radio, "Curve", "dec", scope="cmp", options=["exact", "2"],
               format_func={"exact": "exact (every breakpoint)", "2": "authors' grid (θ to 2 decimals)"}.get)
with controls[3]:
    state.bind(st.toggle, "Temperature scaling", "ts", scope="cmp")

rule, loss = state.get("cmp_rule"), state.get("loss")
dec = None if state.get("dec") == "exact" else 2
subset, ts = state.get("subset"), state.get("ts")
catalog = ui.catalog()
if not catalog:
    ui.no_models_message()
    st.stop()

show_ci = st.toggle("95 % bootstrap intervals", key="cmp_ci",
                    help="Paired bootstrap over each model's evaluation samples (a few seconds per model the first "
                         "time). Intervals are for the exact curves.")
sets, rows, errors, gains, datasets = {}, [], [], [], []
with st.spinner("Computing every model's curves…"):
    for name, location in catalog.items():
        try:
            es = data.eval_set(name, location, subset, ts)
            sets[name] = data.curve_set(es, loss, dec)
            row = data.compare_row(es, loss, dec)
            datasets.append(es.dataset.name)
            if show_ci:
                boot = data.haurc_intervals(es, loss)
                for r in RULES:
                    iv = boot.haurc[r]
                    row[f"hAURC×1000 {RULE_LABELS[r]} 95 % CI"] = f"[{1000 * iv.low:.2f}, {1000 * iv.high:.2f}]"
                for r in RULES[1:]:
                    g = boot.gain[r]
                    row[f"gain % {RULE_LABELS[r]} 95 % CI"] = f"[{g.low:+.1f}, {g.high:+.1f}]"
                    gains.append({"label": f"{name} · {RULE_LABELS[r]}", "rule": r, "estimate": g.estimate,
                                  "low": g.low, "high": g.high})
            rows.append(row)
        except data.LOAD_ERRORS as exc:
            errors.append((name, exc))
for name, exc in errors:
    st.error(f"**{ui.plain(name)}** is left out: {ui.plain(ui.public_message(exc))}")
if not sets:
    st.stop()

context = ExportContext("all_models", "_".join(dict.fromkeys(datasets)), subset, bool(ts))
st.caption(f"{len(sets)} model(s) · subset *{ui.plain(subset)}* · "
           + ("temperature scaling on (each model's own T)" if ts else "no temperature scaling")
           + " · every model on its protocol evaluation split")
ui.figure(plots.compare_figure(sets, rule, loss), f"compare_{rule}_{loss}_{state.get('dec')}", key="compare_chart",
          context=context, title=f"{RULE_LABELS[rule]} risk–coverage curves")
df = pd.DataFrame(rows)
if not ts:
    df = df.drop(columns="T")
cfg = {c: st.column_config.NumberColumn(format="%.2f") for c in df.columns
       if c.startswith(("hAURC", "gain")) and not c.endswith("CI")}
cfg["top-1 accuracy"] = st.column_config.NumberColumn(format="%.4f")
cfg["T"] = st.column_config.NumberColumn(format="%.3f")
st.dataframe(df, hide_index=True, column_config=cfg, key="compare_table")
ui.csv_download(df, f"compare_models_{loss}_{state.get('dec')}", key="dl_compare", context=context)
if gains:
    ui.figure(plots.gain_figure(gains), f"compare_gain_{loss}", key="compare_gains", context=context,
              title="Hierarchical gain vs Selective, 95 % bootstrap intervals")
st.caption("Click a column header to sort. Gain = % hAURC reduction of the rule relative to Selective; an interval "
           "that contains 0 is no clear difference.")
