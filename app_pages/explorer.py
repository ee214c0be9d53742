"""Explorer: the paper's Figure 1, live. One sample as a node-link tree, θ swept in the browser,
every rule's choice."""

import numpy as np
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluations,
    page_sentences,
    perturb,
    plots,
    presenter,
    session_keys,
    sidebar,
    state,
    sweep,
    views,
    widgets,
)

entry.ensure_entrypoint(globals())

es = sidebar.require_model_context()
h = es.view.hierarchy
st.title("Explorer")
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
# The page's sentence, once the sample is known (below its pickers). A container, not st.empty(): a rerun's
# st.empty() clears the last run's sentence until the new one comes, and under load that gap lifted the chart
# by the sentence's height for a moment; a container keeps its content until it is replaced.
lead = st.container()

PICKS = {**views.CURATED, "random": "Random (seeded)", "class": "By true class"}
DIRTY = session_keys.EXPLORER_RESAMPLE
CHART = "explorer_tree"
LIST_THETA = session_keys.EXPLORER_LIST_THETA  # the θ the curated list (and its "of N") was drawn at
PAGE_THETA = session_keys.EXPLORER_PAGE_THETA  # the θ the degraded-image part below the fragment was drawn at


def _es_key() -> tuple:
    return es.key


@catalog.cache_resource(max_entries=24, show_spinner=False)
def _curated(_es: evaluations.ModelContext, key: tuple, theta: float) -> dict[str, np.ndarray]:
    v = _es.view
    return views.curated_rows(v.hierarchy, v.paths, v.labels, v.leaf_pred, v.leaf_conf, theta)


@catalog.cache_resource(max_entries=8, show_spinner=False)
def _figure1(_es: evaluations.ModelContext, key: tuple) -> int | None:
    v = _es.view
    return views.figure1_example(v.hierarchy, _es.node_probs, v.paths, v.labels, v.leaf_pred, v.leaf_conf)


@catalog.cache_resource(max_entries=64, show_spinner=False)
def _tree(_es: evaluations.ModelContext, key: tuple, i: int, font_size: int, max_height: int | None, max_width: int,
          _theta: float, rules: tuple = ()):
    """The tree figure with its 101 θ frames, built once per sample; it opens at the θ it was first
    asked for, and the page shows any other θ by animating to its frame in the browser."""
    return plots.explorer_tree(_es, i, font_size, max_height, max_width, _theta, rules)


def _mark_dirty() -> None:
    st.session_state[DIRTY] = True


def _next_seed() -> None:
    st.session_state["seed"] = int(st.session_state["seed"]) + 1
    _mark_dirty()


FIGURE1 = _figure1(es, _es_key())


def _show_figure1() -> None:
    state.set("pick", "rescue")
    state.set("sample", str(es.view.sample_ids[FIGURE1]))
    state.set("theta", views.FIGURE1_THETA)


with presenter.controls("Pick a sample"):
    cols = st.columns([1.5, 1, 1.5])
with cols[0]:
    state.bind(st.selectbox, "Show me", "pick", scope="ex", options=list(PICKS), format_func=PICKS.get,
               on_change=_mark_dirty, help="Curated cases are found among all samples at the current θ.")
mode = state.get("pick")
sample = state.get("sample")
if sample is not None and sample not in es.view.id_index and sample == state.from_url("sample"):
    st.warning(f"Sample {widgets.plain(sample)} from the link is not among these {es.view.n:,} samples of the 90 % "
               "evaluation split (the 10 % calibration split only fits T and is never shown); showing another one.")
dirty = st.session_state.pop(DIRTY, False)
if mode == "random":
    with cols[1]:
        state.bind(st.number_input, "Seed", "seed", scope="ex", min_value=0, step=1, on_change=_mark_dirty)
    with cols[2]:
        st.write("")
        st.button("New random sample", on_click=_next_seed, icon=":material/casino:")
    if dirty or sample not in es.view.id_index:
        i = int(np.random.default_rng(int(state.get("seed"))).integers(es.view.n))
        sample = str(es.view.sample_ids[i])
elif mode in views.CURATED:
    st.session_state[LIST_THETA] = round(float(state.get("theta")), 4)
    rows = _curated(es, _es_key(), st.session_state[LIST_THETA])[mode]
    if rows.size == 0:
        with cols[1]:  # a widget of the same height as the picker it stands for: nothing above the chart moves
            st.number_input(f"Example (none at θ = {state.get('theta'):.2f})", value=0, disabled=True,
                            key="explorer_no_example",
                            help=f"No sample is a “{PICKS[mode]}” case at this θ; try another θ.")
        if sample not in es.view.id_index:
            sample = str(es.view.sample_ids[0])
    else:
        state.set("rank", int(min(max(1, state.get("rank")), rows.size)))
        with cols[1]:
            state.bind(st.number_input, f"Example (of {rows.size:,})", "rank", scope="ex", min_value=1,
                       max_value=int(rows.size), step=1, on_change=_mark_dirty,
                       help="1 = the clearest example; the list is recomputed when θ changes.")
        if dirty or sample not in es.view.id_index:
            sample = str(es.view.sample_ids[rows[int(state.get("rank")) - 1]])
    if FIGURE1 is not None:
        with cols[2]:
            st.write("")
            st.button("Figure-1-like example", on_click=_show_figure1, icon=":material/account_tree:",
                      help="An unsure, wrong top-1 leaf that Climbing lifts to a correct ancestor at θ = 0.5, "
                           "as in the paper's Figure 1.")
else:  # by class
    classes = sorted(es.view.rows_by_class, key=lambda c: h.names[c].lower())
    if state.get("cls") not in es.view.rows_by_class:
        cur = es.view.id_index.get(sample)
        state.set("cls", int(es.view.labels[cur]) if cur is not None else classes[0])
    with cols[1]:
        state.bind(st.selectbox, "True class", "cls", scope="ex", options=classes,
                   format_func=lambda c: f"{views.node_name(h, c)} ({len(es.view.rows_by_class[c])})",
                   on_change=_mark_dirty)
    ids = [str(es.view.sample_ids[r]) for r in es.view.rows_by_class[int(state.get("cls"))]]
    if dirty or sample not in ids:
        sample = ids[0]
    state.set("sample", sample)
    with cols[2]:
        state.bind(st.selectbox, "Sample", "sample", scope="ex", options=ids)
    sample = state.get("sample")
state.set("sample", sample)

i = es.view.id_index[sample]
true_leaf = int(es.view.labels[i])
pred_leaf = int(es.view.leaf_pred[i])
lead.markdown(page_sentences.climb(h, es.view.node_row(i), pred_leaf, true_leaf))

info, main = st.columns([1, 5] if presenter.presenter() else [1, 4], gap="small")
with info:
    widgets.sample_image(es, sample)
    st.markdown(widgets.sample_headline(h, true_leaf, pred_leaf, es.view.leaf_conf[i]))
    if es.view.sources is not None and not presenter.presenter():
        st.caption(f"Source: {widgets.plain(es.view.sources[i])}")


def _follow(theta: float) -> None:
    state.set("theta", round(min(max(theta, 0.0), 1.0), 2))


@catalog.cache_resource(max_entries=64, show_spinner=False)
def _texts(_es: evaluations.ModelContext, key: tuple, i: int, rules: tuple) -> dict[str, str]:
    """Every rule's pick at every θ of the grid, as the view shows it under the tree."""
    v = _es.view
    paths, row, label = views.selected_paths(v, rules), v.node_row(i), int(v.labels[i])
    return sweep.theta_texts(lambda th: views.choice_text(
        v.hierarchy, views.sample_view(v.hierarchy, row, paths, i, th, true_leaf=label)))


@state.fragment
def theta_view() -> None:
    now = round(float(state.get("theta")), 4)
    if (mode in views.CURATED and st.session_state.get(LIST_THETA) != now) or (
            state.get("degrade") != "none" and st.session_state.get(PAGE_THETA) != now):
        st.rerun()  # a sweep came to rest at another θ: the curated list (its count) and the degraded image follow
    theta = float(state.get("theta"))
    # One view owns θ: the tree, its ▶ Play, θ slider and keys, every rule's pick under it, the share link.
    width = presenter.fit_width(5 / 6 if presenter.presenter() else 4 / 5) - 30  # the info column takes the rest
    rules = tuple(state.get("rules"))
    fig = _tree(es, _es_key(), i, presenter.font_size(), presenter.fit_height(9.5), width, round(theta, 2), rules)
    sweep.theta_chart(fig, key=CHART, theta=theta, on_theta=_follow, name=f"explorer_{sample}",
                      context=widgets.export_context(es), title=f"Sample {sample}: every rule's pick",
                      texts=None if presenter.presenter() else _texts(es, _es_key(), i, rules),
                      share_page="explorer")
    if presenter.presenter():
        return  # the tree's headline already names every rule's pick at θ
    st.caption("The predicted leaf's path runs down from the root; the true label's branch hangs off their "
               "lowest common ancestor. ✓ = an ancestor of the true leaf (correct), ✗ = wrong; a hollow node "
               "is below θ. The marks left of a node show which rule picks it. Predicting the root means "
               "rejecting the sample.")
    with st.expander(f"Table of the picks (θ = {theta:.2f})"):
        view = views.sample_view(h, es.view.node_row(i), views.selected_paths(es.view, rules), i, theta,
                                 true_leaf=true_leaf)
        table = views.choice_table(h, view)
        st.dataframe(table, hide_index=True, key="explorer_table", column_config=widgets.CHOICE_COLUMNS)
        widgets.csv_download(table, f"explorer_{sample}", key="dl_explorer",
                             context=widgets.export_context(es, theta))


with main:
    # Set before the fragment runs: a full run draws the degraded part at this θ, so only a later
    # fragment-only rerun at another θ asks for a full one (set after it, every full run reran itself).
    st.session_state[PAGE_THETA] = round(float(state.get("theta")), 4)
    theta_view()
    perturb.explorer_section(es, sample, i, float(state.get("theta")))
