"""Compare models: one rule's RC curves overlaid, and a sortable table of every model and the chosen
rules (the paper's four and the metric-optimal / Pareto ones)."""

import pandas as pd
import streamlit as st

from dashboard import (
    entry,
    evaluation_cache,
    evaluations,
    headlines,
    presenter,
    progress,
    sidebar,
    state,
    views,
    widgets,
)
from dashboard.catalog import LOAD_ERRORS
from hsc_core.core.curves import COMMON_RANGE_NOTE
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.evaluation.results import GAIN_RANGE_COLUMN
from hsc_core.report.export import ExportContext
from hsc_core.report.figures import compare_figure, gain_figure

entry.ensure_entrypoint(globals())

st.title("Compare models")
with presenter.controls("Rules, risk, curve and scaling"):
    # The table's rules (shared with Risk–Coverage and Calibration–Coverage) get a row of their own,
    # as there, so every chip shows its whole name; the chart draws one rule of every model.
    state.bind(st.multiselect, "Rules in the table", "rules", scope="cmp", options=list(rule_names()),
               format_func=rule_label)
    controls = st.columns([1.4, 1.2, 1.4, 1])
with controls[0]:
    state.bind(st.selectbox, "Rule on the chart", "cmp_rule", scope="cmp", options=list(rule_names()),
               format_func=rule_label)
with controls[1]:
    state.bind(st.radio, "Risk", "loss", scope="cmp", options=["01", "severity"],
               format_func={"01": "0/1 (hierarchical)", "severity": "LCA severity"}.get)
with controls[2]:
    state.bind(st.radio, "Curve", "dec", scope="cmp", options=["exact", "2"],
               format_func={"exact": "exact (every breakpoint)", "2": "authors' grid (θ to 2 decimals)"}.get)
with controls[3]:
    state.bind(st.toggle, "Temperature scaling", "ts", scope="cmp")

rule, loss = state.get("cmp_rule"), state.get("loss")
# The table always has Selective (the gains' reference) and the chart's rule.
table_rules = [r for r in rule_names() if r in state.get("rules") or r in ("selective", rule)]
dec = None if state.get("dec") == "exact" else 2
subset, ts = state.get("subset"), state.get("ts")
catalog = sidebar.catalog()
if not catalog:
    sidebar.no_models_message()
    st.stop()

catalog = {**catalog, **sidebar.shift_overlays("cmp")}  # the current model on corrupted images, when asked for
show_ci = st.toggle("95 % bootstrap intervals", key="cmp_ci",
                    help="Paired bootstrap over each model's evaluation samples (a few seconds per model the first "
                         "time). Intervals are for the exact curves.")
compared, ci_rows, errors = {}, [], []  # ci_rows: the layer's tidy result rows with intervals
with progress.spinner("Computing every model's curves…"):
    for name, location in catalog.items():
        try:
            # The table's rows and the chart's curve, kept on disk by content (evaluation_cache): a fresh
            # server draws every curve any server computed before without evaluating the models again.
            compared[name] = evaluation_cache.compared_model(name, location, subset, ts, loss, dec, rule,
                                                             tuple(table_rules))
            if show_ci:  # the paired bootstrap on the exact curves, kept on disk as Risk–Coverage's
                ci_rows += evaluation_cache.result_rows(name, location, subset, ts, intervals=True, losses=(loss,),
                                                        rules=tuple(table_rules))
        except LOAD_ERRORS as exc:
            errors.append((name, exc))
for name, exc in errors:
    st.error(f"**{widgets.plain(name)}** is left out: {widgets.plain(widgets.public_message(exc))}")
if not compared:
    st.stop()
rows = [r for c in compared.values() for r in c.rows]  # the layer's tidy result rows
datasets = [c.rows[0]["dataset"] for c in compared.values()]

context = ExportContext("all_models", "_".join(dict.fromkeys(datasets)), subset, bool(ts))
if not presenter.presenter():  # presenter mode: the sentence, then the chart fills the screen
    st.caption(f"{len(compared)} model(s) · subset *{widgets.plain(subset)}* · "
               + ("temperature scaling on (each model's own T)" if ts else "no temperature scaling")
               + " · every model on its protocol evaluation split")
st.markdown(headlines.compare_headline({widgets.plain(m): c.haurc for m, c in compared.items()}, rule_label(rule)))
widgets.figure(compare_figure({m: (c.coverage, c.risk) for m, c in compared.items()},
                              {m: c.haurc for m, c in compared.items()}, loss),
               f"compare_{rule}_{loss}_{state.get('dec')}", key="compare_chart", context=context,
               title=f"{rule_label(rule)} risk–coverage curves", height=presenter.fit_height(14.4))
# One row per model, the layer's column names (loss=None: a severity column says so): the CSV. On screen
# two narrow tables instead of one too wide for the page: the models, then one row per model and rule.
table = views.model_rows(rows, loss=None, limits=ci_rows)
models_df = pd.DataFrame([{k: r[k] for k in ("model", "dataset", "n_eval", "n_cal", "top-1 accuracy", "T") if k in r}
                          for r in table])
st.dataframe(models_df, hide_index=True, key="compare_models_table",
             column_config={"top-1 accuracy": st.column_config.NumberColumn(format="%.4f"),
                            "T": st.column_config.NumberColumn(format="%.3f"),
                            "n_eval": st.column_config.NumberColumn("evaluation samples"),
                            "n_cal": st.column_config.NumberColumn("calibration samples")})
# With intervals: the exact curves' values and limits (the bootstrap runs on them).
df = views.with_interval_text(views.rule_rows(ci_rows if show_ci else rows))
df = df.drop(columns=[c for c in ("TS",) if c in df.columns])
if GAIN_RANGE_COLUMN in df.columns:
    st.caption(COMMON_RANGE_NOTE)
st.dataframe(df, hide_index=True, key="compare_table",
             column_config={"hAURC×1000": st.column_config.NumberColumn(format="%.2f"),
                            "gain %": st.column_config.NumberColumn(format="%.2f")})
widgets.csv_download(table, f"compare_models_{loss}_{state.get('dec')}", key="dl_compare", context=context)
gains = views.gain_intervals(ci_rows, with_ts=False)
if gains:
    widgets.figure(gain_figure(gains), f"compare_gain_{loss}", key="compare_gains", context=context,
                   title="Hierarchical gain vs Selective, 95 % bootstrap intervals")
st.caption("Click a column header to sort. Gain = % hAURC reduction of the rule relative to Selective; an interval "
           "that contains 0 is no clear difference.")

if state.bind(st.toggle, "Metrics beyond the paper", "cmp_more", scope="cmp",
              help="Excess hAURC (vs the oracle ordering), achievable hAURC (convex hull), micro hF1 at θ = 0, and "
                   "the arg-max leaf's AURC (Zhou et al.'s estimator) and AUGRC; with the intervals toggle, 95 % "
                   "bootstrap intervals; for the rules in the table."):
    extra = [r for name in compared for r in evaluations.model_context(name, catalog[name], subset, ts).view
             .extra_results(tuple(table_rules), loss, intervals=show_ci)]
    # One row per model and rule (as the Overview's), not one very wide row per model.
    more = views.metric_rule_rows(extra)
    shown = views.with_interval_text(more)
    st.dataframe(views.dash_for_missing(shown), hide_index=True, key="compare_more_table")
    st.caption(views.MISSING_NOTE)
    widgets.csv_download(more, f"compare_more_{loss}", key="dl_compare_more", context=context)
