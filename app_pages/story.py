"""Guided story: five steps from "the classifier is unsure" to "the guarantee", each a live view of
the current model's data and each deep-linkable as ``?step=N``."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluation_cache,
    evaluations,
    navigation,
    page_sentences,
    presenter,
    progress,
    session_keys,
    sidebar,
    state,
    sweep,
    views,
    widgets,
)
from hsc_core.core.rule_registry import rule_label
from hsc_core.core.thresholds import theorem1_epsilon
from hsc_core.report.figures import leaf_bars_figure
from hsc_core.report.sweep import operating_point_grid, rc_sweep_figure
from hsc_core.report.tree_figure import record_rows, tree_figure

entry.ensure_entrypoint(globals())

STEPS = navigation.STORY_STEPS
# The step bar's labels: short, so all five fit on one line at 1280 px (the heading has the title).
STEP_TABS = {1: "Unsure", 2: "Reject", 3: "Climb", 4: "All samples", 5: "Guarantee"}
THETA = views.FIGURE1_THETA
# Step 5 opens as the Guaranteed accuracy page opens (its defaults, n capped as that page caps it),
# so the story and the page show the same θ̂ and ε.
TARGET, DELTA = state.SETTINGS["acc"].default, round(1 - state.SETTINGS["conf"].default, 6)
N_CAL, SPLIT_SEED = int(state.SETTINGS["n"].default), int(state.SETTINGS["split_seed"].default)

es = sidebar.require_model_context()
h = es.view.hierarchy
SHOWN_STEP = session_keys.STORY_SHOWN_STEP  # session state: the step the last run showed
# The step control can be empty at the start of a run (its selected segment clicked again, or its
# widget value dropped while a chart's sweep reran the page): stay on the step on screen.
_asked = state.get("step")
step = int(min(max(1, st.session_state.get(SHOWN_STEP, 1) if _asked is None else _asked), len(STEPS)))
state.set("step", step)
st.session_state[SHOWN_STEP] = step


def _go(k: int) -> None:
    state.set("step", k)


st.title("Guided story")
# the page's sentence (two lines in presenter mode: the steps' figures leave it 3.2 rem)
st.markdown(page_sentences.story(es.view))
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


@catalog.cache_resource(max_entries=8, show_spinner=False)
def _example(_es: evaluations.ModelContext, key: tuple) -> int | None:
    v = _es.view
    return views.figure1_example(v.hierarchy, _es.node_probs, v.paths, v.labels, v.leaf_pred, v.leaf_conf)


key = es.key
i = _example(es, key)
font = presenter.font_size()


def _name(v: int) -> str:
    return widgets.plain(views.node_name(h, v))


def _leaf_bars(i: int, k: int = 5) -> go.Figure:
    """The top-k leaf probabilities, the true leaf marked ✓ (bluish green), the others ✗ (vermillion)."""
    leaf_p = es.node_probs[i, : h.n_leaves]
    top = np.argsort(-leaf_p, kind="stable")[:k]
    return leaf_bars_figure([views.node_name(h, v) for v in top], leaf_p[top], top == int(es.view.labels[i]), font)


def _gain_words(es) -> str:
    """Climbing's gain vs Selective in the Overview's words: with its 95 % interval, "no clear
    difference" when the interval contains 0 (the layer's bootstrap; a point estimate on large sets)."""
    if evaluations.intervals_on_request(es):
        g = es.view.gain("climbing")
        return f"Climbing's area is {abs(g):.1f} % {'smaller' if g >= 0 else 'larger'} (point estimate)."
    with progress.spinner("Bootstrapping 95 % intervals…"):  # the Overview's: from the result rows kept on disk
        iv = evaluation_cache.gain_interval(es.model, es.location, es.subset, es.view.ts, "climbing")
    ci = f"95 % CI {iv.low:+.1f} % to {iv.high:+.1f} %"
    if iv.low > 0:
        return f"Climbing's area is {iv.estimate:.1f} % smaller ({ci}): a clear gain."
    if iv.high < 0:
        return f"Climbing's area is {-iv.estimate:.1f} % larger ({ci}): Selective is better here."
    return (f"Climbing's area is {abs(iv.estimate):.1f} % {'smaller' if iv.estimate >= 0 else 'larger'}, but the "
            f"{ci} contains 0: no clear difference on this many images.")


# The story's charts are θ-swept views (``sweep.theta_chart``: keys and ▶ Play, the step's text at every θ
# in the view); where a sweep comes to rest becomes the step's θ. Each step opens at θ = 0.5; the θ is the
# story's own, not the link's.
STORY_THETA = session_keys.STORY_THETA  # session state: (step, θ)


def _theta() -> float:
    at, theta = st.session_state.get(STORY_THETA, (None, THETA))
    return float(theta) if at == step else THETA


def _stay(theta: float) -> None:
    st.session_state[STORY_THETA] = (step, round(min(max(theta, 0.0), 1.0), 2))


theta = _theta()


@catalog.cache_resource(max_entries=16, show_spinner=False)
def _tree(_es: evaluations.ModelContext, key: tuple, i: int, rules: tuple, font: int, max_height: int | None,
          max_width: int):
    v = _es.view
    return tree_figure(v.hierarchy, v.node_row(i), record_rows(v.paths, i), int(v.labels[i]), THETA,
                       font_size=font, rules=rules, max_height=max_height, max_width=max_width)


def _beside(text_width: float = 1.0):
    """(text column, chart column): side by side, so text, photo and chart share one screen."""
    return st.columns([text_width, 2.2], gap="medium")


def _photo() -> None:
    # Small beside the text: the photo says what the image is; the chart is the lesson.
    width = int(9 * presenter.DESIGN_REM_PX * presenter.presenter_scale()) if presenter.presenter() else 220
    widgets.sample_image(es, str(es.view.sample_ids[i]), width=width)


def _tree_step(rules: tuple, chart: str, text_at) -> None:
    # the photo, then one view: the step's text at θ and the tree (side by side on a projector, where the
    # height is short; the text above the tree otherwise, where the width is)
    left, right = _beside(0.5)
    with left:
        _photo()
    with right:
        side = presenter.presenter()
        fig = _tree(es, key, i, rules, font, presenter.fit_height(13.8),
                    int(presenter.fit_width(2.2 / 2.7) * (0.62 if side else 1.0)) - 30)
        sweep.theta_chart(fig, key=chart, theta=theta, on_theta=_stay, name=f"story_{chart}",
                          context=widgets.export_context(es),
                          title=f"Sample {es.view.sample_ids[i]}: " + " vs ".join(rule_label(r) for r in rules),
                          texts=_texts(es, key, chart, text_at), text_side="left" if side else "above",
                          text_ratio="36%" if side else None)


@catalog.cache_resource(max_entries=16, show_spinner=False)
def _texts(_es: evaluations.ModelContext, key: tuple, chart: str, _text_at) -> dict[str, str]:
    """A step's text at every θ (``chart`` names the step's text function)."""
    return sweep.theta_texts(_text_at)


def _selective_text(theta: float) -> str:
    p = float(es.view.leaf_conf[i])
    head = "A **selective** classifier accepts its top leaf only when the probability reaches a threshold θ. "
    if p >= theta:
        return (head + f"At θ = {theta:.2f} this leaf ({p:.2f}) reaches θ (its bar's fill ends right of the θ tick), "
                f"so it **accepts** it: **{_name(int(es.view.leaf_pred[i]))}**, which is {views.WRONG_MD}. Raise θ "
                "above the leaf's probability (▶ Play) and it rejects instead.")
    return (head + f"At θ = {theta:.2f} this leaf ({p:.2f}) is below θ (its bar's fill ends left of the θ tick), so it "
            "**rejects** the image: it predicts the root, which says nothing. Every rejected image is lost coverage.")


def _climbing_text(theta: float) -> str:
    climb = int(es.view.paths["climbing"].predict(theta)[0][i])
    head = ("**Climbing** walks up from the leaf to the first ancestor whose probability reaches θ (the leaves "
            "under a node share its probability). ")
    if climb == h.root:
        return head + (f"At θ = {theta:.2f} only the root reaches θ: Climbing **rejects** the image too, as "
                       "Selective does. Lower θ to see it stop at a correct ancestor.")
    ok = bool(h.is_ancestor(climb, int(es.view.labels[i])))
    return head + (f"At θ = {theta:.2f} it answers **{_name(climb)}** ({es.node_probs[i, climb]:.2f}), which is "
                   + (f"{views.CORRECT_MD}: less specific, but right. " if ok else f"{views.WRONG_MD}. ")
                   + "Press ▶ Play to sweep θ to 1 and watch the answer climb to the root.")


if i is None and step <= 3:
    st.info("This model has no unsure, wrong top-1 prediction that Climbing corrects at θ = 0.5, so steps 1–3 "
            "have no example here; try another model or subset in the sidebar.")
elif step == 1:
    true, pred = int(es.view.labels[i]), int(es.view.leaf_pred[i])
    right, left = _beside(1.2)
    with left:
        widgets.figure(_leaf_bars(i), f"story_step1_{es.view.sample_ids[i]}", key="story_bars",
                       context=widgets.export_context(es))
    with right:
        _photo()
        st.markdown(
            f"The model's best guess for this image is **{_name(pred)}**, with probability only "
            f"**{es.view.leaf_conf[i]:.2f}**. It is {views.WRONG_MD}: the image shows **{_name(true)}** "
            f"(probability {es.node_probs[i, true]:.2f}).\n\n"
            "A low top probability is the model telling us it is unsure. What should it answer?")
elif step == 2:
    _tree_step(("selective",), "story_tree_sel", _selective_text)
elif step == 3:
    _tree_step(("selective", "climbing"), "story_tree_climb", _climbing_text)
elif step == 4:
    cs = sidebar.curve_set_or_stop(es)
    rules = ("selective", "climbing")

    @catalog.cache_resource(max_entries=8, show_spinner=False)
    def _rc(_cs, key: tuple, font: int, height: int | None):
        points = {r: operating_point_grid(_cs.exact[r]) for r in rules}
        return rc_sweep_figure({r: _cs.display[r] for r in rules}, points,
                               {r: _cs.curves[r].haurc for r in rules}, THETA, font_size=font, height=height)

    sel, climb = cs.curves["selective"].haurc, cs.curves["climbing"].haurc
    left, right = _beside()
    with right:  # the chart first: the interval in the text may take a few seconds the first time
        sweep.theta_chart(_rc(cs, key, font, presenter.fit_height(13.7)), key="story_rc", theta=theta, on_theta=_stay,
                          name="story_step4", context=widgets.export_context(es),
                          title="Risk–coverage: Selective vs Climbing")
    with left:
        st.markdown(
            f"Every θ gives each rule a **coverage** (how much it still says, 1 = every leaf answered) and a "
            f"**risk** (how often it is wrong) over all {es.view.n:,} samples. Lower is better: the area under the "
            f"curve (hAURC) is {1000 * sel:.1f} ×10⁻³ for {rule_label('selective')} and {1000 * climb:.1f} ×10⁻³ "
            f"for {rule_label('climbing')}. {_gain_words(es)} Press ▶ Play to move θ.")
else:
    n_cal = int(min(max(10, N_CAL), max(20, int(es.view.n * 0.9))))  # as the Guaranteed accuracy page caps n
    # the Guaranteed-accuracy page's split and θ̂ (and the decision card's θ) for these settings
    split = es.view.threshold(TARGET, "theorem1", delta=DELTA, n=n_cal, seed=SPLIT_SEED)
    eps = theorem1_epsilon(n_cal, round(1 - TARGET, 6), DELTA)
    st.markdown(
        f"Which θ to use? Take **{n_cal:,}** labelled samples, ask for accuracy **{TARGET:.0%}** with confidence "
        f"**{1 - DELTA:.0%}**, and the threshold algorithm (Algorithm 1) returns θ̂ = **{split.theta:.3f}**. "
        f"Theorem 1: with probability ≥ {1 - DELTA:.0%}, Climbing at θ̂ is at least {TARGET:.0%} − ε accurate "
        f"on new samples, with ε = **{eps:.4f}** here; only **on average** over calibration sets is it "
        f"{TARGET:.0%} (about half the calibrations land below). The Guaranteed accuracy page's default promises "
        f"{TARGET:.0%} of the answers correct with confidence {1 - DELTA:.0%} instead.")
    cols = st.columns(4)
    cols[0].metric("θ̂", f"{split.theta:.3f}")
    cols[1].metric("ε (Theorem 1)", f"{eps:.4f}")
    cols[2].metric(f"accuracy on the other {split.n_test:,}", f"{split.test_accuracy:.1%}",
                   delta=f"{split.test_accuracy - TARGET:+.1%} vs target", delta_color="off")
    cols[3].metric("coverage", f"{split.test_coverage:.3f}")
    st.markdown("Repeat this on many random splits, and compare with DARTS, on the **Guaranteed accuracy** page.")

if i is not None and step <= 3 and not presenter.presenter():
    # No θ value here: the step's θ moves with its view, and only the step's text (in the view) names it.
    st.caption(f"The example: sample {widgets.plain(es.view.sample_ids[i])} of {widgets.plain(es.model)}, the most "
               "Figure-1-like image of this data (an unsure, wrong top-1 leaf that Climbing corrects where "
               "each step starts). Open it in the Explorer to change θ or pick another sample.")
