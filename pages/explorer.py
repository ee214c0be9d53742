"""Explorer: the paper's Figure 1, live. One sample, θ on a slider, every rule's choice."""

import numpy as np
import streamlit as st

from dashboard import plots, state, ui, views
from hsc_core.datasets.images import ImageReadError, display_image, open_image_safely, safe_image_path

ui.ensure_entrypoint()

es = ui.require_eval_set()
h = es.hierarchy
st.title("Explorer")
st.caption(ui.eval_caption(es))

PICKS = {"random": "Random (seeded)", "worst": "Most confident wrong", "class": "By true class"}
DIRTY = "_explorer_resample"


def _mark_dirty() -> None:
    st.session_state[DIRTY] = True


def _next_seed() -> None:
    st.session_state["seed"] = int(st.session_state["seed"]) + 1
    _mark_dirty()


cols = st.columns([1.3, 1, 1.6])
with cols[0]:
    state.bind(st.radio, "Pick a sample", "pick", scope="ex", options=list(PICKS), format_func=PICKS.get,
               horizontal=True, on_change=_mark_dirty)
mode = state.get("pick")
sample = state.get("sample")
if sample is not None and sample not in es.id_index and sample == state.from_url("sample"):
    st.warning(f"Sample {ui.plain(sample)} from the link is not among these {es.n:,} samples"
               + (" (with temperature scaling only the held-out half is shown)" if es.heldout else "")
               + "; showing another one.")
dirty = st.session_state.pop(DIRTY, False)
if mode == "random":
    with cols[1]:
        state.bind(st.number_input, "Seed", "seed", scope="ex", min_value=0, step=1, on_change=_mark_dirty)
    with cols[2]:
        st.write("")
        st.button("New random sample", on_click=_next_seed, icon=":material/casino:")
    if dirty or sample not in es.id_index:
        i = int(np.random.default_rng(int(state.get("seed"))).integers(es.n))
        sample = str(es.sample_ids[i])
elif mode == "worst":
    wrong = es.most_confident_wrong
    if wrong.size == 0:
        st.info("The model gets every sample right; showing a random one.")
        if sample not in es.id_index:
            sample = str(es.sample_ids[0])
    else:
        state.set("rank", int(min(max(1, state.get("rank")), wrong.size)))
        with cols[1]:
            state.bind(st.number_input, f"Rank among {wrong.size:,} wrong", "rank", scope="ex", min_value=1,
                       max_value=int(wrong.size), step=1, on_change=_mark_dirty,
                       help="1 = the wrong top-1 prediction with the highest confidence.")
        if dirty or sample not in es.id_index:
            sample = str(es.sample_ids[wrong[int(state.get("rank")) - 1]])
else:  # by class
    classes = sorted(es.rows_by_class, key=lambda c: h.names[c].lower())
    if state.get("cls") not in es.rows_by_class:
        cur = es.id_index.get(sample)
        state.set("cls", int(es.labels[cur]) if cur is not None else classes[0])
    with cols[1]:
        state.bind(st.selectbox, "True class", "cls", scope="ex", options=classes,
                   format_func=lambda c: f"{views.node_name(h, c)} ({len(es.rows_by_class[c])})",
                   on_change=_mark_dirty)
    ids = [str(es.sample_ids[r]) for r in es.rows_by_class[int(state.get("cls"))]]
    if dirty or sample not in ids:
        sample = ids[0]
    state.set("sample", sample)
    with cols[2]:
        state.bind(st.selectbox, "Sample", "sample", scope="ex", options=ids)
    sample = state.get("sample")
state.set("sample", sample)
state.write_query_params()

i = es.id_index[sample]
true_leaf = int(es.labels[i])
pred_leaf = int(es.leaf_pred[i])

info, main = st.columns([1, 3], gap="medium")
with info:
    # Sample ids may come from an upload: only image files inside the data set's image folder are read.
    image_path = safe_image_path(es.image_dir, sample)
    try:
        image = display_image(open_image_safely(image_path)) if image_path is not None else None
    except ImageReadError:
        image = None
    if image is not None:
        st.image(image, caption=ui.plain(sample), width="stretch")
    else:
        st.caption(f"Sample {ui.plain(sample)} (no image file available)")
    st.markdown(
        f"**True class:** {views.node_name(h, true_leaf)}  \n"
        f"**Top-1 leaf:** {views.node_name(h, pred_leaf)} (p = {es.leaf_conf[i]:.3f}) "
        + (":green[**correct**]" if pred_leaf == true_leaf else ":red[**wrong**]")
    )
    if es.sources is not None:
        st.caption(f"Source: {ui.plain(es.sources[i])}")


@st.fragment
def theta_view() -> None:
    state.write_query_params()
    theta = state.bind(st.slider, "Confidence threshold θ", "theta", scope="ex", min_value=0.0, max_value=1.0,
                       step=0.01, format="%.2f")
    view = views.sample_view(h, es.node_row(i), es.paths, i, theta, true_leaf=true_leaf)
    st.markdown(views.choice_text(h, view))
    ui.figure(plots.path_figure(h, view), f"explorer_{es.model}_{sample}_theta{theta:.2f}", key="explorer_path")
    st.caption("Bars: node probability along the predicted leaf's path to the root (root on top), then the true "
               "label's branch. Green = hierarchically correct (an ancestor of the true leaf), red = wrong. The "
               "markers on the right show the node each rule predicts at θ.")
    table = views.choice_table(h, view)
    st.dataframe(table, hide_index=True, key="explorer_table", column_config=ui.CHOICE_COLUMNS)
    ui.csv_download(table, f"explorer_{sample}_theta{theta:.2f}", key="dl_explorer")


with main:
    theta_view()
