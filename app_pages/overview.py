"""Overview: the message in one sentence, what HSC is, how the numbers are measured, and every
cached model's hAURC and gain with 95 % bootstrap intervals."""

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluation_cache,
    evaluations,
    headlines,
    navigation,
    presenter,
    progress,
    report,
    session_keys,
    sidebar,
    state,
    views,
    widgets,
)
from dashboard.progress import ProgressBar
from hsc_core.core.curves import COMMON_RANGE_NOTE
from hsc_core.core.protocol import PROTOCOL_TEXT
from hsc_core.core.rule_registry import rule_label
from hsc_core.core.uncertainty import CONFIDENCE, N_RESAMPLES, ON_DEMAND_SAMPLES
from hsc_core.report.export import ExportContext
from hsc_core.report.figures import RISK_NOTE, gain_figure, illustration_figure
from hsc_core.report.html_report import HEADLINE_RULE, headline_sentence, worse_rules, worse_sentence, worse_summary

entry.ensure_entrypoint(globals())

st.title("Hierarchical Selective Classification")
subset = state.get("subset")
name, location = sidebar.current_model()
CI_REQUESTED = session_keys.OVERVIEW_CI_REQUESTED  # session state: models whose large-set intervals were asked for


def intervals_ready(model: str, es: evaluations.ModelContext) -> bool:
    """Bootstrap this evaluation set now? Small sets always; large ones (minutes of resampling)
    only once asked for, so the page first shows its point estimates quickly."""
    return not evaluations.intervals_on_request(es) or model in st.session_state.get(CI_REQUESTED, set())


def point_sentence(es: evaluations.ModelContext, ts: bool) -> str:
    """The headline without its interval (plain text): the point estimate, labelled as such."""
    g = es.view.gain(HEADLINE_RULE)
    where = f"On {es.dataset.name} ({es.view.n:,} evaluation images, {name}), " + (
        "with temperature scaling" if ts else "without temperature scaling")
    if not np.isfinite(g):
        return f"{where}, plain selective classification makes no errors."
    return (f"{where}, {rule_label(HEADLINE_RULE)} "
            f"{'lowers' if g >= 0 else 'raises'} the risk–coverage area by {abs(g):.1f} % vs plain selective "
            "classification (point estimate; its 95 % interval is not computed yet).")


def _illustration() -> None:
    # Presenter mode: the screen's height below the title (the figure has no axes to keep).
    widgets.figure(illustration_figure(catalog.hierarchy_or_imagenet(*sidebar.current_model())),
                   "hsc_illustration",
                   key="overview_illustration", height=presenter.fit_height(6.2))


# ---------------------------------------------------------------------------- the headline
def message_box(box, lead: str, sentence: str) -> None:
    """The plain-language ``lead`` and the technical ``sentence`` (plain text). Presenter mode shares one
    screen with the illustration: the lead alone, in the box (issue 35: the projector's first words are
    the plain ones); otherwise the lead as a heading above the sentence's box."""
    if PRESENTER:
        box(lead, icon=":material/campaign:")
        return
    st.markdown("#### " + lead)
    box(widgets.plain(sentence), icon=":material/campaign:")


def headline(slot) -> None:
    """One sentence computed from the current model's data (TS on), honest about its interval, in
    ``slot``: the point estimate (with a button) while a large set's intervals wait for a request,
    else the sentence with its interval."""
    if name is None:
        return
    try:
        sets = {ts: evaluations.model_context(name, location, subset, ts) for ts in (True, False)}
        if not intervals_ready(name, sets[True]):
            with slot.container():
                lead = headlines.overview_lead(rule_label(HEADLINE_RULE), sets[True].view.gain(HEADLINE_RULE))
                message_box(st.info, lead, point_sentence(sets[True], True))
                st.caption(widgets.plain(point_sentence(sets[False], False)))
                if st.button(f"Compute 95 % intervals ({N_RESAMPLES:,} bootstrap resamples)",
                             key="overview_compute_ci", icon=":material/bar_chart:",
                             help=f"{sets[True].view.n:,} evaluation samples: above {ON_DEMAND_SAMPLES:,} (or fewer on "
                                  "a very deep tree) the intervals are computed on request (tens of seconds per TS "
                                  "setting), then kept."):
                    st.session_state.setdefault(CI_REQUESTED, set()).add(name)
                    st.rerun()
            return
        with progress.spinner("Bootstrapping 95 % intervals…"):
            # From the rows kept on disk (the table below reads them too): bootstrapped once per content.
            gains = {ts: evaluation_cache.gain_interval(name, location, subset, ts, HEADLINE_RULE)
                     for ts in (True, False)}
    except catalog.LOAD_ERRORS:
        return  # said once, in the models' list below
    on = sets[True]
    gain = gains[True]
    text = headline_sentence(name, on.dataset.name, on.view.n, True, gain)
    box = st.success if gain.low > 0 else (st.warning if gain.high < 0 else st.info)
    with slot.container():
        message_box(box, headlines.overview_lead(rule_label(HEADLINE_RULE), gain.estimate, gain.low, gain.high), text)
        st.caption(widgets.plain(headline_sentence(name, on.dataset.name, on.view.n, False, gains[False])))


# Presenter mode: the message (the headline and its no-TS twin) beside the
# illustration, so both fit one 1280×720 screen; the explanation folds into an expander below.
PRESENTER = presenter.presenter()
message, picture = st.columns([1, 1.1], gap="large") if PRESENTER else (st.container(), None)
if picture is not None:  # first: the headline's intervals may take a few seconds
    with picture:
        _illustration()
with message:
    # The headline is written once the page's first chart is on screen (below): on content no server
    # has seen, the model's evaluation and its bootstrap intervals take seconds. A container, not
    # st.empty(): a rerun keeps the last sentence until the new one replaces it (no jump).
    headline_slot = st.container()
with st.expander("How these numbers are measured (one protocol for every page)"):
    st.markdown(
        f"**Protocol.** {PROTOCOL_TEXT} The split is the same on every page, so a number means the same "
        "thing wherever it appears.\n\n"
        f"**Hierarchical risk.** {RISK_NOTE} hAURC is the area under the risk–coverage curve (lower is "
        "better; shown ×1000); the hierarchical gain is the % of Selective's hAURC a rule saves (positive is "
        "better).\n\n"
        f"**Uncertainty.** Intervals are {CONFIDENCE:.0%} paired percentile bootstrap intervals over the evaluation "
        f"samples ({N_RESAMPLES:,} resamples, seed 0): every rule is scored on the same resample. An interval "
        "that contains 0 means no clear difference on this many images. Above "
        f"{ON_DEMAND_SAMPLES:,} evaluation samples (fewer on a very deep tree) they are computed only on request (the "
        "button under the "
        "headline, or the switch below), so the page first shows the point estimates."
    )

left, right = (st.expander("What hierarchical selective classification is"), None) if PRESENTER else \
    st.columns([1, 1.1], gap="large")
with left:
    st.markdown(
        """
A classifier that is unsure should not have to choose between a wrong answer and no answer.
**Hierarchical selective classification (HSC)** lets it *back off* along the class tree instead:
every internal node gets the probability of its leaves summed (e.g. the WordNet tree over the 1,000
ImageNet classes, or CIFAR-100's 20 superclasses), and an **inference rule** returns a node whose
probability is at least the confidence threshold **θ**. *Climbing* starts at the most likely leaf
and walks up towards the root until it meets θ; *Selective* (ordinary selective classification)
can only keep the leaf or reject, i.e. predict the root.

A prediction is **correct** when it is the true leaf or one of its ancestors, and its
**coverage** φ = 1 − log|leaves under it| / log|all leaves| measures how specific it is (1 for a leaf,
0 for the root). Sweeping θ traces a **risk–coverage curve**; the area under it (**hAURC**, lower
is better) and the **hierarchical gain** (% hAURC saved relative to Selective) summarise a rule.
Finally, a threshold θ̂ computed on a calibration set *guarantees* a target accuracy with high
probability (the paper's Algorithm 2 and Theorem 1; Algorithm 1 is Climbing).
"""
    )
    st.markdown("**The pages** (grouped the same way in the sidebar):\n\n" + navigation.landing_markdown())
    st.caption("The model, data subset and temperature scaling in the sidebar apply everywhere, and the URL keeps "
               "every setting.")
if right is not None:
    with right:
        _illustration()
headline(headline_slot)

st.subheader("Cached models")
all_ci = st.toggle("95 % intervals for every model", key="overview_all_ci",
                   help="Bootstrap intervals for each model (a few seconds per model the first time, then cached). "
                        "The model picked in the sidebar always has them.")
rows, errors = [], []  # the layer's tidy result rows of every model
models_listed = sidebar.catalog()
with progress.spinner("Summarising models…"), ProgressBar("Summarising models:") as summarising:
    for k, (model, loc) in enumerate(models_listed.items()):
        summarising(k, len(models_listed))  # a bar from 4 models up: each first visit evaluates every file
        try:
            # Each model's rows come from the on-disk cache when its file was evaluated before.
            want_ci = all_ci or (model == name and intervals_ready(model, evaluations.model_context(model, loc,
                                                                                                    subset, True)))
            rows += [r for ts in (False, True) for r in evaluation_cache.result_rows(model, loc, subset, ts, want_ci)]
        except catalog.LOAD_ERRORS as exc:
            errors.append((model, exc))
for model, exc in errors:
    sidebar.show_load_error(model, exc)
if not rows:
    if not errors:
        sidebar.no_models_message()
    st.stop()

models = views.model_rows(rows, metrics=("top1", "temperature"))
st.dataframe(pd.DataFrame(models), hide_index=True, key="overview_table",
             column_config={"n_eval": st.column_config.NumberColumn("evaluation samples"),
                            "n_cal": st.column_config.NumberColumn("calibration samples"),
                            "top-1 accuracy": st.column_config.NumberColumn(format="%.4f"),
                            "T": st.column_config.NumberColumn(format="%.3f")})
worse = worse_sentence(rows)
if worse:  # about the models listed above (the same rows), not the first screen's one model: folded here
    with st.expander(f"Rules that do worse than Selective, among the {widgets.count(len(models), 'model')} above",
                     icon=":material/trending_down:"):
        st.warning(widgets.plain(worse_summary(rows) + " "
                                 + headlines.worse_conclusion(worse_rules(rows), HEADLINE_RULE, rule_label)))
        st.markdown(widgets.plain(worse))
per_rule = views.rule_rows(rows)
shown = views.with_interval_text(per_rule)
st.dataframe(shown, hide_index=True, key="overview_rules", height=min(35 * (len(shown) + 1) + 3, 700),
             column_config={"hAURC×1000": st.column_config.NumberColumn(format="%.2f"),
                            "gain %": st.column_config.NumberColumn(format="%.2f")})
dataset_of = {m["model"]: m["dataset"] for m in models}
datasets = "_".join(dict.fromkeys(dataset_of.values()))
gains = views.gain_intervals(rows)
if gains:
    shown_for = "all_models" if all_ci else name
    widgets.figure(gain_figure(gains), "hsc_gain_intervals", key="overview_gains",
                   context=ExportContext(shown_for, datasets if all_ci else dataset_of[name], subset, None),
                   title="Hierarchical gain vs Selective, 95 % bootstrap intervals")
everything = ExportContext("all_models", datasets, subset, None)
c1, c2, c3 = st.columns(3)
with c1:
    widgets.csv_download(per_rule, "hsc_haurc_by_rule", key="dl_overview_rules", context=everything)
with c2:
    widgets.csv_download(views.model_rows(rows, intervals=True), "hsc_models", key="dl_overview",
                         label="Everything, one row per model (CSV)", context=everything)
with c3:
    report.download_button(sidebar.catalog(), subset, key="dl_overview_report", label="Report of every model (HTML)")
st.caption(
    "Every number is on the evaluation split of the selected subset (see *How these numbers are measured* above); "
    "T is each model's temperature, fitted on its calibration split. Gain is the % hAURC reduction relative to "
    "Selective (0 for Selective itself); positive is better. CI columns are empty for models without intervals "
    f"(switch them on above; above {ON_DEMAND_SAMPLES:,} evaluation samples, or on a very deep tree, they wait for "
    "a request)."
)

if state.bind(st.toggle, "Metrics beyond the paper (the model picked in the sidebar, with TS)", "ov_more",
              scope="ov", help="Per rule, the paper's four and the metric-optimal / Pareto ones: excess hAURC (vs the "
                               "oracle ordering), achievable hAURC (convex hull), micro hF1 at θ = 0; and the arg-max "
                               "leaf's AURC (Zhou et al.'s estimator) and AUGRC. Intervals as for hAURC."):
    es_more = evaluations.model_context(name, location, subset, True)
    st.caption(COMMON_RANGE_NOTE)
    more_box = st.empty()  # the values first (about a second), then the same table with intervals

    def show_more(with_intervals: bool) -> None:
        more = views.with_fair_gain(views.metric_rule_rows(es_more.view.extra_results(intervals=with_intervals)),
                                    es_more.view)
        shown = views.with_interval_text(more)
        with more_box.container():
            st.dataframe(views.dash_for_missing(shown), hide_index=True,
                         key=f"overview_more{'_ci' if with_intervals else ''}")
            st.caption(views.MISSING_NOTE)
            widgets.csv_download(more, "hsc_more_metrics", key=f"dl_overview_more{'_ci' if with_intervals else ''}",
                                 context=ExportContext(name, dataset_of.get(name, ""), subset, True))

    show_more(False)
    if intervals_ready(name, es_more):
        with progress.spinner("Bootstrap intervals of the metrics beyond the paper (1,000 resamples per rule)…"):
            show_more(True)
