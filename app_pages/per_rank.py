"""Per-rank thresholds: any hierarchical classifier's per-rank labels and confidences (an upload, or the
shipped ImageNet example) → the shared-θ RC curve, one θ per rank with a guarantee, and its card."""

import streamlit as st

from dashboard import entry, page_sentences, per_rank, presenter, progress, session_keys, state, widgets

entry.ensure_entrypoint(globals())

st.title("Per-rank thresholds")
# Presenter mode folds the table and the requirement away; normal mode folds only the table (the shipped example
# shows until one is uploaded), so the sentence and both figures start on a 1280×720 laptop's first screen.
with presenter.controls("Table and requirement"):
    with presenter.folded("Your own table: per-rank scores (CSV or Parquet)", icon=":material/upload_file:"):
        st.caption("Bring your own scores: a table with `sample_id` and, per rank from the coarsest to the finest, "
                   "`true_<rank>`, `pred_<rank>`, `conf_<rank>`. Climbing by rank answers at the finest rank whose "
                   "confidence reaches its θ (each rank's own head: when heads disagree, the finer head's label is "
                   "the answer, judged at that rank), else abstains; Learn then Test picks one θ per rank so that "
                   "the accuracy chosen under Guarantee ≥ the target with probability ≥ 1 − δ.")
        upload = st.file_uploader("Per-rank scores (CSV or Parquet)", type=["csv", "parquet"],
                                  key=session_keys.PER_RANK_UPLOAD, max_upload_size=per_rank.MAX_UPLOAD_MB)
        percent = st.toggle("Confidences are percentages (0–100)", value=False, key="rank_percent",
                            help="e.g. RDP/DADA2 bootstrap support")
    top = st.columns([1.6, 1.2, 1.2])
with top[0]:
    state.bind(st.radio, "Guarantee", "r_quantity", scope="pr", options=list(per_rank.QUANTITY_WORDS),
               format_func=per_rank.quantity_label, help="which accuracy the target is about")
with top[1]:
    state.bind(st.slider, "Target accuracy 1 − α", "r_acc", scope="pr", step=0.005, format="%.3f")
with top[2]:
    state.bind(st.slider, "δ (the guarantee may fail with this probability)", "r_delta", scope="pr", step=0.01,
               format="%.2f")

try:
    scores, source, digest = per_rank.load_scores(upload.name if upload else None,
                                                  upload.getvalue() if upload else None, percent)
except ValueError as exc:
    st.error(widgets.plain(widgets.public_message(exc)))
    st.stop()
st.markdown(f"**{scores.n:,} samples** from *{widgets.plain(source)}* · ranks "
            + " → ".join(widgets.plain(r) for r in scores.ranks)
            + f" · {scores.hierarchy.n_leaves:,} classes")

target, delta = float(state.get("r_acc")), float(state.get("r_delta"))
with progress.spinner(f"Calibrating and repeating over {per_rank.REPS:,} random splits…"):
    card = per_rank.card_for(scores, digest, source, target, delta, state.get("r_quantity"))
st.info(page_sentences.per_rank(card, target, delta), icon=":material/verified:")
left, right = st.columns(2)
# presenter mode: both figures, their axis labels included, above the fold at 1280×720 (issue 35)
with left:
    widgets.figure(per_rank.rc_figure(scores, presenter.font_size()), "per_rank_rc", key="rank_rc",
                   height=presenter.fit_height(17.5))
with right:
    widgets.figure(per_rank.stops_figure(card, presenter.font_size()), "per_rank_stops", key="rank_stops",
                   height=presenter.fit_height(17.5))

(st.success if card["certified"] else st.warning)(per_rank.verdict(card, target, delta, scores.n))
st.dataframe(per_rank.thetas_rows(card), hide_index=True, key="rank_thetas")
st.subheader(f"Against a shared-θ LTT and hand-picked thresholds ({per_rank.REPS:,} random calibration/test splits)")
st.caption("Violation rate: accuracy below the target on the whole table, the population the splits are drawn from "
           "(a guarantee bounds it by δ); on the test half alone the rate adds that half's binomial noise.")
st.dataframe(per_rank.comparison_rows(card), hide_index=True, key="rank_comparison")
markdown, as_json = per_rank.card_downloads(card)
cols = st.columns(2)
with cols[0]:
    st.download_button("Download the card (Markdown)", markdown, "rank_card.md", "text/markdown", key="dl_rank_md")
with cols[1]:
    st.download_button("Download the card (JSON)", as_json, "rank_card.json", "application/json", key="dl_rank_json")
