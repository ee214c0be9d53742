"""Calibrators: which calibrator and confidence score serve hierarchical selective classification,
judged by hAURC, gain, ECE at the leaves and the calibration–coverage area (issue 31). Every choice
is a link setting (c_cals, c_scores, c_rule, c_ci, c_scope)."""

import streamlit as st

from dashboard import calibrators as cal
from dashboard import entry, page_sentences, presenter, report, sidebar, state, widgets
from hsc_core.core.rule_registry import rule_label, rule_names

entry.ensure_entrypoint(globals())

st.title("Calibrators and confidence scores")
es = sidebar.require_model_context(ts=True)
scores = cal.confidence_choices(es.view.evaluation.has_members)
state.set("c_scores", cal.offered(state.get("c_scores"), scores))  # a link's member scores on a plain model
with presenter.controls("Calibrators, scores and rule"):
    chosen_cals = state.bind(st.multiselect, "Calibrators", "c_cals", scope="calib",
                             options=list(cal.CALIBRATOR_CHOICES), format_func=cal.calibrator_label)
    chosen_scores = state.bind(st.multiselect, "Confidence scores", "c_scores", scope="calib", options=list(scores),
                               format_func=cal.confidence_label)
    left, middle, right = st.columns(3)
with left:
    rule = state.bind(st.selectbox, "Rule", "c_rule", scope="calib", options=list(rule_names()),
                      format_func=rule_label)
with middle:
    scope = state.bind(st.radio, "Models", "c_scope", scope="calib", options=list(cal.SCOPES),
                       format_func=cal.SCOPES.get, horizontal=True)
with right:
    intervals = state.bind(st.toggle, "Bootstrap intervals", "c_ci", scope="calib",
                           help="95 % paired bootstrap intervals (1,000 resamples): about a second per pair.")

if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
if not chosen_cals or not chosen_scores:
    st.info("Select at least one calibrator and one confidence score.")
    st.stop()
listed, left_out = cal.scope_models(sidebar.catalog())
models = es if scope == "model" else report.resolve(listed, es.subset)[0]
if scope != "model" and left_out:
    st.caption(left_out)
try:  # at most cal.RUN_BUDGET_S of new work a run (any link): the rest waits for the next run
    bench = cal.benchmark(models, tuple(chosen_cals), tuple(chosen_scores), rule, intervals)
except ValueError as exc:  # e.g. an ensemble member that no longer matches its variant
    st.error(str(exc))
    st.stop()
for line in bench.refused:
    st.warning(line, icon=":material/hourglass_disabled:")
if cal.left_note(bench):
    st.info(cal.left_note(bench), icon=":material/hourglass_top:")
    st.button("Compute the next pairs", key="calib_more")  # a click is a run: it adds the next pairs
if not bench.rows:
    st.stop()
rows = bench.rows
st.markdown(page_sentences.calibrators(rows))
st.dataframe(cal.shown_table(rows), hide_index=True, key="calib_table")
widgets.csv_download(lambda: cal.export_table(rows), "calibrator_benchmark", key="dl_calib",
                     context=widgets.export_context(es))
st.caption(
    "Each calibrator is fitted on the calibration split and every number is on the evaluation split. ★ marks "
    "each model's best of each column (lowest hAURC, ECE and CC area; highest gain over Selective). Internal "
    "nodes are scored on the leaf distribution with the node's leaves merged into one class; for scores that are "
    "not probabilities (margin, entropy, DOCTOR, energy) the ECE columns say how far the score is from one. The "
    "member scores appear for an ensemble whose manifest names its members."
)
