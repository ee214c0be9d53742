"""Calibration–Coverage: ECE of each rule's confidences as θ trades coverage away (the paper's four
and the metric-optimal / Pareto ones)."""

import pandas as pd
import streamlit as st

from dashboard import entry, evaluations, page_sentences, presenter, sidebar, state, widgets
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.report.figures import cc_figure

entry.ensure_entrypoint(globals())

st.title("Calibration–coverage")
with presenter.controls("Rules, bins and scaling"):
    state.bind(st.multiselect, "Rules", "rules", scope="cc", options=list(rule_names()), format_func=rule_label)
    controls = st.columns([1.6, 1])
with controls[0]:
    state.bind(st.slider, "ECE bins", "bins", scope="cc", step=1)  # range: state.SETTINGS["bins"]
with controls[1]:
    state.bind(st.toggle, "Temp. scaling", "ts", scope="cc",
               help="Same switch as in the sidebar: T fitted on the calibration split, curves on the evaluation split.")

es = sidebar.require_model_context()
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
rules = [r for r in rule_names() if r in state.get("rules")]
if not rules:
    st.info("Select at least one rule.")
    st.stop()
bins = int(state.get("bins"))
curves = evaluations.cc_curves(es, bins)
table = pd.DataFrame(es.view.cc_summary(rules, bins))  # the layer's numbers; the page only names the rules
# the conclusion first, at the projector too (issue 35); the chart then fills the rest of the screen
st.markdown(page_sentences.calibration_coverage(table.to_dict("records")))
context = widgets.export_context(es)
widgets.figure(cc_figure(curves, rules), f"cc_bins{bins}", key="cc_chart", context=context,
               title=f"Calibration–coverage (ECE, {bins} bins)", height=presenter.fit_height(12.1))

table["rule"] = table["rule"].map(rule_label)
st.dataframe(table, hide_index=True, key="cc_table",
             column_config={c: st.column_config.NumberColumn(format="%.4f") for c in table.columns[1:]})
c1, c2 = st.columns(2)
with c1:
    widgets.csv_download(table, "cc_summary", key="dl_cc_table", context=context)
with c2:
    points = pd.concat([pd.DataFrame({"rule": rule_label(r), "theta": curves[r].thresholds,
                                      "coverage": curves[r].coverage, "ece": curves[r].ece}) for r in rules],
                       ignore_index=True)
    widgets.csv_download(points, "cc_curves", key="dl_cc_curves", label="Curve points (CSV)", context=context)
st.caption(
    "Each point is one θ of the authors' grid (node probabilities rounded to 2 decimals): the rule's predicted "
    "nodes give a coverage and an ECE (equal-width bins, correctness = the node is an ancestor of the true leaf; "
    "the root counts with confidence 1)."
)
