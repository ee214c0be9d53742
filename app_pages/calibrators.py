"""Calibrators: which calibrator and confidence score serve hierarchical selective classification,
judged by hAURC, gain, ECE at the leaves and the calibration–coverage area (issue 31)."""

import streamlit as st

from dashboard import calibrators as cal
from dashboard import entry, headlines, presenter, sidebar, widgets
from hsc_core.core.rule_registry import rule_label, rule_names

entry.ensure_entrypoint(globals())

st.title("Calibrators and confidence scores")
with presenter.controls("Calibrators, scores and rule"):
    chosen_cals = st.multiselect("Calibrators", list(cal.CALIBRATOR_CHOICES), default=list(cal.DEFAULT_CALIBRATORS),
                                 format_func=cal.calibrator_label, key="calib_calibrators")
    chosen_scores = st.multiselect("Confidence scores", list(cal.CONFIDENCE_CHOICES),
                                   default=list(cal.DEFAULT_CONFIDENCES), format_func=cal.confidence_label,
                                   key="calib_confidences")
    left, right = st.columns(2)
with left:
    rule = st.selectbox("Rule", list(rule_names(paper=True)), index=1, format_func=rule_label, key="calib_rule")
with right:
    intervals = st.toggle("Bootstrap intervals", value=False, key="calib_intervals",
                          help="95 % paired bootstrap intervals (1,000 resamples): about a second per pair.")

es = sidebar.require_model_context(ts=True)
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
if not chosen_cals or not chosen_scores:
    st.info("Select at least one calibrator and one confidence score.")
    st.stop()
try:
    rows = cal.benchmark_rows(es, tuple(chosen_cals), tuple(chosen_scores), rule, intervals)
except ValueError as exc:  # e.g. matrix scaling over the memory budget at this class count
    st.error(str(exc))
    st.stop()
st.markdown(headlines.calibrators_headline(rows, cal.calibrator_label, cal.confidence_label))
st.dataframe(cal.shown_table(rows), hide_index=True, key="calib_table")
widgets.csv_download(lambda: cal.export_table(rows), "calibrator_benchmark", key="dl_calib",
                     context=widgets.export_context(es))
st.caption(
    "Each calibrator is fitted on the calibration split and every number is on the evaluation split. ★ marks "
    "the best of each column (lowest hAURC, ECE and CC area; highest gain over Selective). Internal nodes are "
    "scored on the leaf distribution with the node's leaves merged into one class; for scores that are not "
    "probabilities (margin, entropy, DOCTOR, energy) the ECE columns say how far the score is from one."
)
