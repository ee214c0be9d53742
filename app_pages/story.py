"""Guided story: five steps from "the classifier is unsure" to "the guarantee", each a live view of
the current model's data and each deep-linkable as ``?step=N``."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard import data, state, ui, views
from hsc_core.core.rules import RULE_LABELS
from hsc_core.report.figures import leaf_bars_figure
from hsc_core.report.sweep import operating_point_grid, rc_sweep_figure
from hsc_core.report.tree_figure import record_rows, tree_figure

ui.ensure_entrypoint()

STEPS = {
    1: "The classifier is unsure",
    2: "A selective classifier can only reject",
    3: "Climb the hierarchy instead",
    4: "Across all samples: risk against coverage",
    5: "The guarantee",
}
# The step bar's labels: short, so all five fit on one line at 1280 px (the heading has the title).
STEP_TABS = {1: "Unsure", 2: "Reject", 3: "Climb", 4: "All samples", 5: "Guarantee"}
THETA = views.FIGURE1_THETA
TARGET, DELTA, N_CAL = 0.95, 0.1, 1000

es = ui.require_eval_set()
h = es.hierarchy
step = int(min(max(1, state.get("step")), len(STEPS)))
state.set("step", step)


def _go(k: int) -> None:
    state.set("step", k)


st.title("Guided story")
nav = st.columns([1, 6, 1], vertical_alignment="center")
with nav[0]:
    st.button("← Back", on_click=_go, args=(step - 1,), disabled=step == 1, key="story_back")
with nav[1]:
    state.bind(st.segmented_control, "Step", "step", scope="story", options=list(STEPS),
               format_func=lambda k: f"{k}. {STEP_TABS[k]}", label_visibility="collapsed")
    if state.get("step") is None:  # clicking the selected segment again clears it
        state.set("step", step)
with nav[2]:
    st.button("Next →", on_click=_go, args=(step + 1,), disabled=step == len(STEPS), key="story_next")
st.subheader(f"{step}. {STEPS[step]}")


@data.cache_resource(max_entries=8, show_spinner=False)
def _example(_es, key: tuple) -> int | None:
    return views.figure1_example(_es.hierarchy, _es.node_probs, _es.paths, _es.labels, _es.leaf_pred, _es.leaf_conf)


key = es.key
i = _example(es, key)
font = ui.font_size()


def _name(v: int) -> str:
    return ui.plain(views.node_name(h, v))


def _leaf_bars(i: int, k: int = 5) -> go.Figure:
    """The top-k leaf probabilities, the true leaf marked ✓ (bluish green), the others ✗ (vermillion)."""
    leaf_p = es.node_probs[i, : h.n_leaves]
    top = np.argsort(-leaf_p, kind="stable")[:k]
    return leaf_bars_figure([views.node_name(h, v) for v in top], leaf_p[top], top == int(es.labels[i]), font)


def _stay(theta: float) -> None:
    """The story's charts sweep θ in the browser only (keys and ▶ Play); its text stays at θ = 0.5."""


@data.cache_resource(max_entries=16, show_spinner=False)
def _tree(_es, key: tuple, i: int, rules: tuple, font: int):
    return tree_figure(_es.hierarchy, _es.node_row(i), record_rows(_es.paths, i), int(_es.labels[i]), THETA,
                       font_size=font, rules=rules)


if i is None and step <= 3:
    st.info("This model has no unsure, wrong top-1 prediction that Climbing corrects at θ = 0.5, so steps 1–3 "
            "have no example here; try another model or subset in the sidebar.")
elif step == 1:
    true, pred = int(es.labels[i]), int(es.leaf_pred[i])
    left, right = st.columns([3, 2])
    with left:
        ui.figure(_leaf_bars(i), f"story_step1_{es.sample_ids[i]}", key="story_bars",
                  context=ui.export_context(es))
    with right:
        st.markdown(
            f"The model's best guess for this image is **{_name(pred)}**, with probability only "
            f"**{es.leaf_conf[i]:.2f}**. It is {views.WRONG_MD}: the image shows **{_name(true)}** "
            f"(probability {es.node_probs[i, true]:.2f}).\n\n"
            "A low top probability is the model telling us it is unsure. What should it answer?")
elif step == 2:
    st.markdown(
        f"A **selective** classifier accepts its top leaf only when the probability reaches a threshold θ. At "
        f"θ = {THETA:.2f} this leaf ({es.leaf_conf[i]:.2f}) is below θ, so it **rejects** the image "
        "(in the tree: it predicts the root, which says nothing). Every rejected image is lost coverage.")
    ui.figure(_tree(es, key, i, ("selective",), font), "story_step2", key="story_tree_sel", width="content")
    ui.sweep_sync("story_tree_sel", THETA, _stay)
elif step == 3:
    climb = int(es.paths["climbing"].predict(THETA)[0][i])
    st.markdown(
        f"**Climbing** walks up from the leaf to the first ancestor whose probability reaches θ: the leaves "
        f"under a node share its probability. At θ = {THETA:.2f} it answers **{_name(climb)}** "
        f"({es.node_probs[i, climb]:.2f}), which is {views.CORRECT_MD}: less specific, but right. "
        "Press ▶ Play to sweep θ from where it is to 1 and watch the answer climb to the root.")
    ui.figure(_tree(es, key, i, ("selective", "climbing"), font), "story_step3", key="story_tree_climb",
              width="content")
    ui.sweep_sync("story_tree_climb", THETA, _stay)
elif step == 4:
    cs = ui.curve_set_or_stop(es)
    rules = ("selective", "climbing")

    @data.cache_resource(max_entries=8, show_spinner=False)
    def _rc(_cs, key: tuple, font: int):
        points = {r: operating_point_grid(_cs.exact[r]) for r in rules}
        return rc_sweep_figure({r: _cs.display[r] for r in rules}, points,
                               {r: _cs.curves[r].haurc for r in rules}, THETA, font_size=font)

    sel, climb = cs.curves["selective"].haurc, cs.curves["climbing"].haurc
    st.markdown(
        f"Every θ gives each rule a **coverage** (how much it still says, 1 = every leaf answered) and a **risk** "
        f"(how often it is wrong) over all {es.n:,} samples. Lower is better: the area under the curve (hAURC) "
        f"is {1000 * sel:.1f} ×10⁻³ for {RULE_LABELS['selective']} and {1000 * climb:.1f} ×10⁻³ for "
        f"{RULE_LABELS['climbing']}, a gain of {100 * (sel - climb) / sel:.1f} %. Press ▶ Play to move θ.")
    ui.figure(_rc(cs, key, font), "story_step4", key="story_rc", context=ui.export_context(es))
    ui.sweep_sync("story_rc", THETA, _stay)
else:
    tight = data.tight_thresholds(es)
    n_cal = int(min(N_CAL, es.n // 2))
    split = views.single_split_result(es, tight, n_cal, 0, 1 - TARGET, DELTA)
    st.markdown(
        f"Which θ to use? Take **{n_cal:,}** labelled samples, ask for accuracy **{TARGET:.0%}** with confidence "
        f"**{1 - DELTA:.0%}**, and the threshold algorithm (Algorithm 1) returns θ̂ = **{split.theta_hat:.3f}**. "
        f"Theorem 1: with probability ≥ {1 - DELTA:.0%}, Climbing at θ̂ is at least {TARGET:.0%} − ε accurate "
        f"on new samples, with ε = **{split.epsilon:.4f}** here.")
    cols = st.columns(4)
    cols[0].metric("θ̂", f"{split.theta_hat:.3f}")
    cols[1].metric("ε (Theorem 1)", f"{split.epsilon:.4f}")
    cols[2].metric(f"accuracy on the other {split.n_test:,}", f"{split.test_accuracy:.1%}",
                   delta=f"{split.test_accuracy - TARGET:+.1%} vs target", delta_color="off")
    cols[3].metric("coverage", f"{split.test_coverage:.3f}")
    st.markdown("Repeat this on many random splits, and compare with DARTS, on the **Guaranteed accuracy** page.")

if i is not None and step <= 3 and not ui.presenter():
    st.caption(f"The example: sample {ui.plain(es.sample_ids[i])} of {ui.plain(es.model)}, the most Figure-1-like "
               "image of this data (an unsure, wrong top-1 leaf that Climbing corrects at θ = 0.5). Open it in the "
               "Explorer to change θ or pick another sample.")
