"""Monitor: watch the θ the Guaranteed-accuracy page ships on a stream (clean images, then a shipped
shift; or the model's file in its order), with anytime-valid bounds, the alarm, θ adapting (ACI or
recalibration), ▶ Play over the stream (a swept view), and one sentence (``dashboard.monitor``)."""

import streamlit as st

from dashboard import entry, monitor, presenter, progress, sidebar, state, sweep, uploads, widgets
from dashboard import session_keys as keys
from dashboard.catalog import DataError, shift_label
from dashboard.snapshot import markdown_html
from hsc_core.evaluation.monitor import shift_names

entry.ensure_entrypoint(globals())

es = sidebar.require_model_context()
st.title("Monitor")
with presenter.controls("Stream and promise"):
    st.caption("After deployment: the θ certified for a target accuracy watched on a stream. The band holds the "
               "accuracy since deployment at every sample at once; the alarm rings when some recent window's "
               "accuracy is below the promise with confidence 1 − δ (a false alarm has probability ≤ δ over the "
               "whole stream). θ can adapt: ACI nudges it after every label (long-run accuracy ≥ target − "
               "(1 + γ − θ₁)/(γT)); recalibration re-fits it on the last 500 labels.")
    cols = st.columns(4)
shifts = shift_names(es.model)  # the model's shipped shifts (run with its bf16 variant)
options = shifts + [monitor.IN_ORDER, monitor.UPLOADED]
if state.get("m_stream") not in options:
    state.set("m_stream", options[0])
with cols[0]:
    state.bind(st.selectbox, "Stream", "m_stream", scope="mon", options=options,
               format_func=lambda k: {monitor.IN_ORDER: "this model's file, in order",
                                      monitor.UPLOADED: "a stream file you upload"}.get(k)
               or f"clean, then {shift_label(k)}")
    up = None if state.get("m_stream") != monitor.UPLOADED else st.file_uploader(
        "Stream (.npz)", key="monitor_stream_file", help="Logits of this model's classes, samples in arrival "
        "order (as `hsc cache-logits` writes them); kept for this browser session only.")
    state.bind(st.slider, "Samples per part", "m_n", scope="mon", min_value=200, max_value=5000, step=100)
with cols[1]:
    state.bind(st.slider, "Promised accuracy", "m_acc", scope="mon", step=0.005, format="%.3f")
    state.bind(st.slider, "δ (false-alarm probability)", "m_delta", scope="mon", step=0.01, format="%.2f")
with cols[2]:
    state.bind(st.slider, "A label for every K-th sample", "m_labels", scope="mon", min_value=1, max_value=50)
with cols[3]:
    state.bind(st.radio, "θ", "m_adapt", scope="mon", options=["fixed", "aci", "recalibrate"],
               format_func={"fixed": "fixed (the card's)", "aci": "adaptive (ACI)",
                            "recalibrate": "recalibrated"}.get)
try:
    with progress.spinner("Playing the stream…"):
        res = monitor.run(es, float(state.get("m_acc")), float(state.get("m_delta")), str(state.get("m_stream")),
                          int(state.get("m_n")), int(state.get("m_labels")), str(state.get("m_adapt")),
                          upload=uploads.session_stream(up),
                          session_runs=st.session_state.setdefault(keys.MONITOR_UPLOAD_RUNS, {}))
except (ValueError, DataError) as exc:
    st.error(widgets.plain(widgets.public_message(exc)))
    st.stop()
n = len(res.frame)
times = monitor.play_times(res)
# One view plays the stream (▶ Play, its slider, keys), its sentence at each time above the chart; the
# time where it rests reaches the link (m_t, 0 = the end).
at = int(state.get("m_t")) or n
shown = str(min(times, key=lambda tt: abs(tt - at)))
fig = monitor.figure(res, int(shown), presenter.font_size())
sweep.swept_chart(fig, key="monitor_fig", names=[str(v) for v in times], value=shown,
                  on_rest=lambda v: state.set("m_t", int(v) if int(v) < n else 0), name="monitor",
                  label="t", param="m_t", context=widgets.export_context(es), title="Monitoring the deployed θ",
                  texts={k: markdown_html(v) for k, v in monitor.sentences(res).items()}, text_side="above",
                  share_page="monitor", frame_ms=60)
st.caption(f"Verdict over the whole stream: {res.verdict}. Deployed θ = {res.deployment.theta:.4f} "
           f"(Theorem 1, one-sided: accuracy ≥ {res.deployment.target:.3g} with probability ≥ 1 − δ); "
           + ("the stream is your file's first samples, in its order. The same run from the command line: "
              "`hsc monitor STREAM.npz --card CARD.json`." if up is not None else "the stream draws from the images "
              "it was not calibrated on. The same run from the command line: `hsc monitor --simulate … --card "
              "CARD.json`."))
st.download_button("Download the rows (CSV)", monitor.csv_text(res), "monitor.csv", "text/csv",
                   key="dl_monitor")
