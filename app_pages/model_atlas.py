"""Model atlas: a per-model results table (the authors' 1,116 ImageNet models, or hsc evaluate's)
by training regime — accuracy against hAURC or gain, the paper's Table 1 and Figure 4 as means ±
SEM, suspect rows, and the user's own models on the same axes."""

import pandas as pd
import streamlit as st

from dashboard import atlas, entry, headlines, presenter, session_keys, state, widgets
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.evaluation.atlas import (
    MAX_TABLE_BYTES,
    PLAIN,
    REGIMES,
    paper_table1,
    regime_labels,
    regime_summary,
    rule_summary,
)
from hsc_core.report.atlas_cli import sample_note
from hsc_core.report.atlas_figure import atlas_figure, regime_means_figure
from hsc_core.report.export import ExportContext

entry.ensure_entrypoint(globals())

# Presenter mode: the screen's height (rem) the title, the folded controls, the caption and the
# sentence take above the chart.
ATLAS_RESERVED_REM = 16
REGIME_NAMES = {"all": "all regimes", **{r.key: r.label for r in (*REGIMES, PLAIN)}}
DOWNLOAD_HINT = ("the authors' table: `results/models_comparison/models_comparison_full.csv` of "
                 "github.com/shanigoren/Hierarchical-Selective-Classification (1,116 ImageNet models; not shipped "
                 "here, the repository has no license)")

st.title("Model atlas")
files = atlas.table_files()
with presenter.controls("Table, rule and axes"):
    top = st.columns([2.2, 1.2, 1.2, 1.0])
with top[0]:
    options = files + (["(none: your models only)"] if files else [])
    if state.get("atlas") is None and files:
        state.set("atlas", next((f for f in files if "models_comparison" in f), files[0]))
    if files:
        if state.get("atlas") not in options:
            options = [state.get("atlas"), *options]  # a link's name: checked (and refused) below
        state.bind(st.selectbox, "Results table", "atlas", scope="atl", options=options,
                   help="CSV files in the results folder (HSC_RESULTS_DIR).")
    # folded in normal mode too, so the chart starts on a 1280×720 laptop's first screen
    with presenter.folded("…or upload a results table (CSV)"):
        upload = st.file_uploader("…or upload a results table (CSV)", type=["csv"], key=session_keys.ATLAS_UPLOAD,
                                  max_upload_size=MAX_TABLE_BYTES // 2**20)
ATLAS_RULES = rule_names(paper=True)  # the atlas table has the paper's four rules only
if state.get("cmp_rule") not in ATLAS_RULES:
    st.info(f"The atlas table has no {widgets.plain(rule_label(state.get('cmp_rule')))} column: showing "
            f"{rule_label(state.SETTINGS['cmp_rule'].default)}, one of the paper's four rules.")
    state.set("cmp_rule", state.SETTINGS["cmp_rule"].default)
with top[1]:
    state.bind(st.selectbox, "Rule", "cmp_rule", scope="atl", options=list(ATLAS_RULES), format_func=rule_label)
    state.bind(st.radio, "y axis", "atlas_y", scope="atl", options=["gain_percent", "haurc"],
               format_func={"haurc": "hAURC×1000", "gain_percent": "gain %"}.get, horizontal=True,
               help="Gain %: the % of Selective's hAURC the rule saves (what the sentence compares; Climbing's "
                    "for Selective, whose gain is 0). hAURC×1000: the area itself, lower is better.")
with top[2]:
    state.bind(st.radio, "Risk", "loss", scope="atl", options=["01", "severity"],
               format_func={"01": "0/1 (hierarchical)", "severity": "LCA severity"}.get)
    state.bind(st.toggle, "Temp. scaling", "ts", scope="atl", help="Same switch as in the sidebar.")
with top[3]:
    state.bind(st.selectbox, "Regime", "regime", scope="atl", options=list(REGIME_NAMES),
               format_func=REGIME_NAMES.get, help="Show only models of this training regime.")
    show_yours = st.toggle("Your models", value=True, key="atlas_yours",
                           help="The cached-logits models of this dashboard, on the same axes.")

rule, loss, ts, y = state.get("cmp_rule"), state.get("loss"), bool(state.get("ts")), state.get("atlas_y")
table, source_name = None, ""
chosen = state.get("atlas")
try:
    if upload is not None:
        table, source_name = atlas.table_from_upload(upload.name, upload.getvalue()), upload.name
    elif chosen and not chosen.startswith("(none"):
        table, source_name = atlas.table_from_folder(chosen), chosen  # refuses a name outside the folder
except ValueError as exc:
    st.error(widgets.plain(widgets.public_message(exc)))

yours, left_out = (atlas.your_models(state.get("subset")) if show_yours else (pd.DataFrame(), []))
if left_out:
    st.caption("Not placed (another data set than ImageNet-1k, or a file that fails): "
               + ", ".join(widgets.plain(n) for n in left_out[:5]))
if table is None:
    if yours.empty:
        st.info(f"No results table yet. Put {DOWNLOAD_HINT} in the results folder "
                f"(`{widgets.plain(atlas.results_folder() or 'set HSC_RESULTS_DIR')}`) or upload it, or upload "
                "`hsc evaluate`'s results.csv.")
        st.stop()
    st.info(f"No results table: showing your models only. For the paper's 1,116 models use {DOWNLOAD_HINT}.")
    table, source_name, yours = yours, "your models", pd.DataFrame()

shown = table if state.get("regime") == "all" else table[
    table["regimes"].str.split(";").map(lambda ks: state.get("regime") in ks)]
context = ExportContext(model=f"atlas_{source_name}", dataset="imagenet1k", subset=state.get("regime"), ts=ts)
sizes = sorted({int(v) for v in table["n_eval"] if v == v})
st.caption(f"**{len(table):,} models** from *{widgets.plain(source_name)}*"
           + (f", {len(shown):,} of them {REGIME_NAMES[state.get('regime')]}" if state.get("regime") != "all" else "")
           + f" · evaluated on {', '.join(f'{s:,}' for s in sizes[:3])} images"
           + (" without TS (45,000 with TS, after fitting T on 5,000)" if sizes == [50_000] else "")
           + f" · {rule_label(rule)}, {'with' if ts else 'without'} TS")
lead = headlines.atlas_headline(regime_summary(shown, rule=atlas.gain_rule(rule), loss=loss, ts=ts), len(shown),
                                rule_label(atlas.gain_rule(rule)))
st.markdown(lead)
note = sample_note(yours)
if note:
    (st.caption if presenter.presenter() else st.warning)(f"⚠ {note}")

plotted = atlas.chart_rule(rule, y)  # the sentence's gain, or the picked rule's hAURC
size = presenter.font_size()  # presenter mode: the chart fills the screen below the sentence
widgets.figure(atlas_figure(shown, rule=plotted, loss=loss, ts=ts, y=y, yours=yours if not yours.empty else None,
                            font_size=size, height=520),
               f"atlas_{plotted}_{loss}_{y}", key="atlas_chart", context=context,
               title=f"Top-1 accuracy vs {rule_label(plotted)} {'hAURC' if y == 'haurc' else 'gain'} "
                     "by training regime",
               height=presenter.fit_height(ATLAS_RESERVED_REM, least=300),
               layout=atlas.presenter_layout(size) if presenter.presenter() else None)
st.caption("Each marker is a model: colour and shape say its training regime (a model with several shows its "
           "first; hover for all), an open marker is a suspect row, stars are your models. The legend counts every "
           "model of a regime, as the regime means below do.")

tabs = st.tabs(["Regimes (Figure 4)", "Table 1", "Suspect rows", "All models"])
with tabs[0]:
    summary = regime_summary(table, rule=rule, loss=loss, ts=ts)
    widgets.figure(regime_means_figure(summary, value="haurc_x1000" if y == "haurc" else "gain_percent",
                                  font_size=presenter.font_size()),
              f"atlas_regimes_{rule}_{loss}", key="atlas_regimes", context=context,
              title=f"{rule_label(rule)} by training regime, mean ± SEM")
    st.dataframe(pd.DataFrame(summary), hide_index=True, key="atlas_regime_table")
    widgets.csv_download(summary, "atlas_regimes", key="dl_atlas_regimes", context=context)
    st.caption("Regimes are read from the model names by a checked table (hsc_core.evaluation.atlas.REGIMES); "
               "a model counts in each of its regimes. The paper's Figure 4 compares pairs of otherwise identical "
               "models; these are plain means over every model of a regime.")
with tabs[1]:
    t1 = paper_table1(table)
    st.markdown("**Table 1 as the paper prints it** (Selective and Max-Coverage without TS, Climbing with TS; "
                "gains against Selective without TS)")
    st.dataframe(pd.DataFrame(t1), hide_index=True, key="atlas_table1")
    widgets.csv_download(t1, "atlas_table1", key="dl_atlas_t1", context=ExportContext(
        model=f"atlas_{source_name}", dataset="imagenet1k", ts=None))
    t7 = rule_summary(table, loss=loss)
    st.markdown("**Every rule without and with TS** (the paper's Table 7; Table 8 for the severity loss)")
    st.dataframe(pd.DataFrame(t7), hide_index=True, key="atlas_table7")
    widgets.csv_download(t7, "atlas_rules", key="dl_atlas_t7", context=ExportContext(
        model=f"atlas_{source_name}", dataset="imagenet1k", ts=None))
with tabs[2]:
    suspect = table[table["suspect"] != ""][["model", "T", "suspect"]]
    st.markdown(f"**{len(suspect)} suspect row(s)**: a non-finite hAURC or gain, or a temperature at the "
                "optimiser's starting point 1.5, below 0.1 or above 100. They stay in every mean, as in the paper.")
    st.dataframe(suspect, hide_index=True, key="atlas_suspect")
with tabs[3]:
    full = shown.assign(regimes=shown["regimes"].map(regime_labels))
    st.dataframe(full, hide_index=True, key="atlas_models")
    widgets.csv_download(lambda: pd.concat([full, yours]) if not yours.empty else full, "atlas_models",
                         key="dl_atlas_models", context=context)
