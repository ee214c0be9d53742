"""Hierarchy sensitivity: one ImageNet-1k model's hAURC and gain under each built-in class tree."""

import pandas as pd
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluation_cache,
    page_sentences,
    presenter,
    progress,
    sidebar,
    state,
    views,
    widgets,
)
from hsc_core.core.rule_registry import rule_label
from hsc_core.datasets.imagenet_trees import TREES
from hsc_core.evaluation.sensitivity import sensitivity_table
from hsc_core.report.figures import gain_figure

entry.ensure_entrypoint(globals())

st.title("Hierarchy sensitivity")
with presenter.controls("Trees and temperature scaling"):
    controls = st.columns([3, 1])
with controls[0]:
    state.bind(st.multiselect, "Trees", "trees", scope="hs", options=list(TREES),
               format_func=lambda t: TREES[t].label)
with controls[1]:
    state.bind(st.toggle, "Temp. scaling", "ts", scope="hs", help="Same switch as in the sidebar.")

es = sidebar.require_model_context()
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
if es.dataset.name != catalog.IMAGENET:
    st.info("The built-in alternative trees are ImageNet-1k's; this model's data set is "
            f"*{widgets.plain(es.dataset.name)}*.")
    st.stop()
trees = [t for t in TREES if t in state.get("trees")]
if not trees:
    st.info("Select at least one tree.")
    st.stop()
with progress.spinner("Evaluating every rule under each tree, with bootstrap intervals (a few seconds per tree)…"):
    # Kept on disk by content: a fresh server shows a table computed before at once.
    rows = evaluation_cache.sensitivity_rows(es, tuple(trees))
table = sensitivity_table(rows)
context = widgets.export_context(es)
gains = views.sensitivity_gains(table)
st.markdown(page_sentences.sensitivity(table, trees))
# presenter mode: the whole figure, its x-axis title included, above the fold (issue 35 at 1280×720)
widgets.figure(gain_figure(gains), "hierarchy_sensitivity_gain", key="hs_gain", context=context,
               title="Hierarchical gain vs Selective under each tree, 95 % bootstrap intervals",
               height=presenter.fit_height(11.5))
shown = pd.DataFrame([{"tree": TREES[d["tree"]].label, "rule": rule_label(d["rule"]),
                       "hAURC×1000": d["haurc_x1000"], "hAURC low": d["haurc_x1000_low"],
                       "hAURC high": d["haurc_x1000_high"], "gain %": d["gain_percent"],
                       "gain low": d["gain_percent_low"], "gain high": d["gain_percent_high"]} for d in table])
# "—" where there is no interval (Selective's gain is 0 by definition), not "None"
st.dataframe(shown.style.format("{:.2f}", subset=list(shown.columns[2:]), na_rep="—"), hide_index=True, key="hs_table")
widgets.csv_download(rows, f"hierarchy_sensitivity_{'ts' if es.view.ts else 'nots'}", key="dl_hs", context=context)
st.caption("Selective ignores the tree, so its hAURC is the same under every tree. The random tree has WordNet's exact "
           "shape with the classes shuffled: a gain that survives it is not due to the tree's meaning. The induced "
           "tree is built from Lite0's own classifier weights, so it flatters Lite0 (and its variants) most.")
with st.expander("Where each tree comes from"):
    for name in trees:
        st.markdown(f"**{widgets.plain(TREES[name].label)}** (`{name}`): {widgets.plain(TREES[name].provenance)}")
