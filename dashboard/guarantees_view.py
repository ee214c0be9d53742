"""Guaranteed accuracy's sections (the page only arranges them): the manager's requirement (target
accuracy, confidence, method), one split's θ̂ and Theorem 1's ε with the sentence that answers "what can
we guarantee and how many samples get an answer", the decision card, and under "Advanced" the
calibration settings, the repetitions (Figure 3), the Theorem-1 solver and the shoot-out.

Each section is one function of the ``Requirement`` the controls set, so a section can be added or given
another calibration/test source without touching the others; the page runs them all in one fragment, so a
control's move updates every section at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from hsc_core.core.thresholds import solve_theorem1, theorem1_epsilon
from hsc_core.evaluation.card import DEFAULT_METHOD, card_json, card_markdown, decision_card
from hsc_core.evaluation.guarantee_methods import METHODS, GuaranteeSettings
from hsc_core.evaluation.repeated_splits import split_repetitions
from hsc_core.evaluation.shootout import SUMMARY_COLUMNS, shootout
from hsc_core.evaluation.threshold import ThresholdResult
from hsc_core.report.guarantee_figures import (
    METHOD_LABELS,
    accuracy_coverage_figure,
    accuracy_histogram,
    violation_figure,
)

from . import headlines, presenter, session_keys, state, widgets
from .evaluations import ModelContext
from .progress import spinner

QUANTILES = {"order_statistic": "order statistic ⌈(n+1)(1−α)⌉ (paper)", "quantile": "numpy quantile (authors' code)"}
RUNS = session_keys.GA_RUNS          # repetitions: key → table, the last few kept (moving α back finds its run)
SHOOTOUTS = session_keys.GA_SHOOTOUTS  # shoot-outs: key → ShootoutResult, the last few kept
CARDS = session_keys.GA_CARDS
KEEP = 6
TOL = 1e-9  # |accuracy − target| ≤ ε compared with a tolerance: 1.0 − 0.95 is 0.05000000000000004
# The sliders' and inputs' ranges are those of state.SETTINGS (state.bind passes them), which also
# vet the link's values, so a shared link can never hand a widget a value outside its range.


@dataclass(frozen=True)
class Requirement:
    """What the sliders at the top ask for."""

    target: float
    confidence: float
    n: int
    seed: int
    quantile: str  # θ̂'s rule for Algorithm 2 (order statistic or numpy quantile)
    method: str = DEFAULT_METHOD  # the method of the one split and the card (guarantees.METHODS)

    @property
    def options(self) -> dict:
        """The ``GuaranteeSettings`` options of the one split and the card (LTT with several risks needs one)."""
        return {"quantile": self.quantile, **({"min_coverage": 0.5} if self.method == "ltt_multi" else {})}

    @property
    def alpha(self) -> float:
        return round(1.0 - self.target, 6)

    @property
    def delta(self) -> float:
        return round(1.0 - self.confidence, 6)

    @property
    def root_only(self) -> bool:
        """(n+1)·α < 1: no order statistic ⌈(n+1)(1−α)⌉ exists, θ̂ = 1 (only nodes of probability 1)."""
        return (self.n + 1) * self.alpha < 1.0 - 1e-12

    def too_small(self) -> str:
        return (f"n = {self.n:,} is too small for a target of {self.target:.3f}: (n+1)·α < 1, so θ̂ = 1 and every "
                f"sample whose predicted node has probability below 1 is predicted as the root (nodes of "
                f"probability exactly 1 are still predicted, so coverage need not be 0). It needs n ≥ "
                f"{int(np.ceil(1 / self.alpha - 1)):,}.")


def _remember(store: str, key: tuple, value) -> None:
    runs = dict(st.session_state.get(store, {}))
    runs.pop(key, None)
    runs[key] = value
    st.session_state[store] = dict(list(runs.items())[-KEEP:])


@dataclass(frozen=True)
class Slots:
    """Where the first sections draw in presenter mode (one screen): the sliders' row (its last
    column holds the Run button), one split's numbers, the folded settings and the histogram."""

    sliders: list[Any]
    headline: Any  # Streamlit containers (DeltaGenerator)
    split: Any
    settings: Any
    chart: Any


# The link's parameters of the settings folded under "Advanced": a link that sets any opens it.
ADVANCED_PARAMS = ("n", "split_seed", "reps", "solve", "eps", "g_methods", "g_reps", "g_sampling", "g_cov", "g_depth",
                   "g_pv")


def advanced_asked() -> bool:
    """Did the session's link set any of the folded settings (then the expander opens, so what it
    asked for is on screen)?"""
    return any(state.from_url(k) is not None for k in ADVANCED_PARAMS)


def advanced_expander(label: str):
    return st.expander(label, expanded=advanced_asked(), icon=":material/tune:")


def presenter_slots() -> Slots:
    """Presenter mode's first screen: the manager's three controls and the Run button in one row; the
    sentence and numbers at the left above the folded settings; the histogram at the right."""
    sliders = st.columns([1, 1, 1.3, 0.8], vertical_alignment="bottom")
    headline = st.container()  # the sentence across the screen (in the narrow column it took 9 lines)
    left, right = st.columns([1, 2.2], gap="medium")
    with left:
        split = st.container()
        settings = advanced_expander("Advanced: n, seed, θ̂ rule, repetitions")
    return Slots(sliders, headline, split, settings, right.container())


def method_choice(method: str) -> str:
    """The method picker's words: its name and what it promises."""
    return headlines.method_words(METHODS[method].label, METHODS[method].kind)


def requirement(n_max: int, top: list, advanced) -> Requirement:
    """The manager's three controls (target accuracy, confidence, method) in ``top``'s first three
    columns; calibration size, split seed and θ̂ rule in ``advanced`` (a container)."""
    state.set("n", int(min(max(10, int(state.get("n"))), n_max)))
    with top[0]:
        target = state.bind(st.slider, "Target accuracy 1 − α", "acc", scope="ga", step=0.005, format="%.3f")
    with top[1]:
        conf = state.bind(st.slider, "Confidence 1 − δ", "conf", scope="ga", step=0.01, format="%.2f")
    with top[2]:
        method = state.bind(st.selectbox, "Method", "split_method", scope="ga", options=list(METHODS),
                            format_func=method_choice,
                            help="How θ is calibrated, and what it promises: on average over calibration sets, "
                                 "or with confidence 1 − δ for this one calibration. The decision card deploys the "
                                 "same method, so its θ is the θ shown here.")
    with advanced:
        r = st.columns([1.3, 0.8, 1.6]) if not presenter.presenter() else [st.container()] * 3
        with r[0]:
            n = state.bind(st.slider, "Calibration size n", "n", scope="ga", min_value=10, max_value=n_max, step=1)
        with r[1]:
            seed = state.bind(st.number_input, "Split seed", "split_seed", scope="ga", step=1)
        with r[2]:
            quantile = st.radio("θ̂ rule (Algorithm 2)", list(QUANTILES), format_func=QUANTILES.get, horizontal=True,
                                key="ga_method")
    return Requirement(float(target), float(conf), int(n), int(seed), str(quantile), str(method))


def page(es: ModelContext, n_max: int) -> None:
    """The page below its title and intro: the manager's controls, the sentence, θ and the card up
    front; everything else folded under one "Advanced" expander (presenter mode: the histogram of
    the repetitions shares the first screen, as before)."""
    if presenter.presenter():
        slots = presenter_slots()
        req = requirement(n_max, slots.sliders, slots.settings)
        eps = one_split(es, req, slots)
        repetitions(es, req, eps, slots)
        card_section(es, req)
        with advanced_expander("Advanced: the Theorem-1 solver and every method side by side"):
            solver(req)
            shootout_section(es, req)
        return
    top = st.columns([1, 1, 1.6])
    split, card = st.container(), st.container()
    with advanced_expander("Advanced: calibration size, seed, θ̂ rule, repetitions, the Theorem-1 solver and every "
                           "method side by side"):
        settings = st.container()
        req = requirement(n_max, top, settings)
        with split:
            eps = one_split(es, req)
        with card:
            card_section(es, req)
        repetitions(es, req, eps)
        solver(req)
        shootout_section(es, req)


def one_split(es: ModelContext, req: Requirement, slots: Slots | None = None) -> float:
    """θ̂, ε and the test numbers of one split (``EvaluationSet.threshold``: the decision card's
    calibration set and θ); returns Theorem 1's ε for n, α and δ (the band of every section)."""
    try:
        split = es.view.threshold(req.target, req.method, delta=req.delta, n=req.n, seed=req.seed, **req.options)
    except ValueError as exc:
        st.error(f"Cannot calibrate: {widgets.public_message(exc)}")
        st.stop()
    eps = theorem1_epsilon(req.n, req.alpha, req.delta)
    with slots.split if slots is not None else st.container():
        return _split_numbers(req, split, eps, grid=slots is not None,
                              headline=slots.headline if slots is not None else None)


def _split_numbers(req: Requirement, split: ThresholdResult, eps: float, *, grid: bool, headline=None) -> float:
    # presenter mode: two metrics a row in the narrow left column (the histogram takes the rest)
    with headline if headline is not None else st.container():
        st.info(headlines.guarantee_headline(split, req.confidence), icon=":material/verified:")
    m = [c for _ in range(3) for c in st.columns(2)] if grid else st.columns(5)
    for col, (label, value, delta, help_text) in zip(m, headlines.guarantee_metrics(split, eps), strict=False):
        col.metric(label, value, delta=delta, delta_color="off", help=help_text)
    lo, hi = max(0.0, req.target - eps), min(1.0, req.target + eps)
    band = f" Theorem 1's band (ε = {eps:.4f}): [{lo:.4f}, {hi:.4f}]." if split.method == "theorem1" else ""
    st.caption(f"One split: {split.n_cal:,} stratified calibration / {split.n_test:,} test samples (seed {req.seed}), "
               f"{split.label}.{band}")
    if not split.certified and split.note and not (req.root_only and split.method == "theorem1"):
        st.warning(f"**{split.label}**: {split.note}", icon=":material/block:")
    if req.root_only:
        st.warning(req.too_small(), icon=":material/warning:")
    return eps


def repetitions(es: ModelContext, req: Requirement, eps: float, slots: Slots | None = None) -> None:
    if slots is None:
        st.subheader("Repetitions (Figure 3 style)")
    r = st.columns([1.4, 1.4, 1]) if slots is None else [slots.settings, slots.settings, slots.sliders[3]]
    with r[0]:
        reps = int(state.bind(st.slider, "Repetitions", "reps", scope="ga", step=10))
    with r[1]:
        baselines = st.multiselect("Baselines", ["darts", "crc"], default=["darts", "crc"],
                                   format_func=lambda m: METHOD_LABELS.get(m, m), key="ga_baselines",
                                   help="DARTS re-fits its λ by a 25-step search per repetition, "
                                        "so it is the slow part.")
    key = (es.key, float(req.alpha), req.n, reps, req.seed, req.quantile, tuple(baselines))
    with r[2]:
        if slots is None:
            st.write("")
        run = widgets.job_button("Run repetitions", "ga_run_reps", key, type="primary", icon=":material/play_arrow:")
    chart = slots.chart if slots is not None else st.container()
    if run:
        with chart:
            bar = st.progress(0.0, text="Running repetitions…")
        last = [-1]

        def progress(frac: float) -> None:
            pct = int(frac * 100)
            if pct != last[0]:
                last[0] = pct
                bar.progress(min(frac, 1.0), text=f"Running repetitions… {pct}%")

        try:
            with widgets.job_work("ga_run_reps"):
                df = split_repetitions(es.view.guarantee_data(), [req.alpha], req.n, reps, seed=req.seed,
                                       method=req.quantile, baselines=tuple(baselines),  # type: ignore[arg-type]
                                       progress=progress)
                _remember(RUNS, key, df)
        except ValueError as exc:
            bar.empty()
            st.error(f"Cannot run the repetitions: {widgets.public_message(exc)}")
            return
        bar.empty()
    runs = st.session_state.get(RUNS, {})
    if key not in runs:
        chart.info(f"Press **Run repetitions** to draw {reps} stratified calibration sets of n = {req.n:,} "
                   "and compare the test accuracy of θ̂ with the baselines. Runs for other targets are kept: "
                   "moving the target back shows them again.")
        return
    df = runs[key]
    n_reps = int(df["rep"].nunique())
    with chart:
        # presenter mode: the whole figure, its x-axis title included, above the fold
        widgets.figure(accuracy_histogram(df, req.target, eps), f"guaranteed_accuracy_a{req.target:.3f}_n{req.n}",
                       key="ga_hist", context=widgets.export_context(es), height=presenter.fit_height(22.4),
                       title=f"Test accuracy over {n_reps:,} repetitions (target {req.target:.3f}, n = {req.n:,})")
    if slots is not None:
        st.subheader("Repetitions (Figure 3 style)")
    d = df.assign(abs_err=(df["accuracy"] - req.target).abs(),
                  inside=(df["accuracy"] - req.target).abs() <= eps + TOL)
    summary = d.groupby("method", sort=False).agg(
        mean_accuracy=("accuracy", "mean"), std_accuracy=("accuracy", "std"),
        mean_abs_error=("abs_err", "mean"), mean_coverage=("coverage", "mean"),
        fraction_within_eps=("inside", "mean")).reset_index()
    summary["method"] = summary["method"].map(lambda m: METHOD_LABELS.get(m, m))
    labels = {"method": "method", "mean_accuracy": "mean test accuracy", "std_accuracy": "std of test accuracy",
              "mean_abs_error": "mean |accuracy − target|", "mean_coverage": "mean test coverage",
              "fraction_within_eps": "share of repetitions within target ± ε"}
    st.dataframe(summary, hide_index=True, key="ga_summary", column_config={
        c: st.column_config.NumberColumn(labels[c], format="%.4f") for c in summary.columns[1:]})
    n_test = es.view.n - req.n
    noise = float(np.sqrt(req.target * (1 - req.target) / max(n_test, 1)))
    st.caption(f"Each repetition draws a stratified calibration set of {req.n:,} and tests on the other "
               f"{n_test:,}. Theorem 1 holds for the accuracy on new data with probability ≥ {req.confidence:.0%}; "
               f"the accuracy measured on only {n_test:,} test samples adds its own noise (std ≈ {noise:.4f} at the "
               f"target, vs ε = {eps:.4f}), so fewer repetitions than that may land inside the green band.")
    c1, c2 = st.columns(2)
    with c1:
        widgets.csv_download(summary, "repetitions_summary", key="dl_ga_summary", context=widgets.export_context(es))
    with c2:
        widgets.csv_download(df, "repetitions", key="dl_ga_raw", label="All repetitions (CSV)",
                             context=widgets.export_context(es))


def solver(req: Requirement) -> None:
    st.subheader("Solve Theorem 1 for one parameter")
    st.caption("Fix three of α, n, ε, δ; the fourth follows. The inputs start from the sliders above and follow "
               "them when they move.")
    labels = {"alpha": "target accuracy 1 − α", "n": "calibration size n", "epsilon": "margin ε",
              "delta": "confidence 1 − δ"}
    solve = state.bind(st.radio, "Solve for", "solve", scope="ga", options=list(labels), format_func=labels.get,
                       horizontal=True)
    # Each input follows its slider: when the slider's value changes, the input takes it.
    c = st.columns(4)
    inputs = {}
    if solve != "alpha":
        with c[0]:
            inputs["alpha"] = 1 - state.follow(st.number_input, "Target accuracy 1 − α", "solve_acc", req.target,
                                               min_value=0.5, max_value=0.9999, step=0.005, format="%.4f")
    if solve != "n":
        with c[1]:
            inputs["n"] = state.follow(st.number_input, "Calibration size n", "solve_n", req.n, min_value=1,
                                       max_value=10_000_000, step=100)
    if solve != "epsilon":
        with c[2]:
            inputs["epsilon"] = state.bind(st.number_input, "Margin ε", "eps", scope="ga", step=0.001,
                                           format="%.4f")
    if solve != "delta":
        with c[3]:
            inputs["delta"] = 1 - state.follow(st.number_input, "Confidence 1 − δ", "solve_conf", req.confidence,
                                               min_value=0.5, max_value=0.9999, step=0.01, format="%.4f")
    given: dict[str, Any] = {k: (round(float(v), 6) if k != "n" else int(v)) for k, v in inputs.items()}
    try:
        res = solve_theorem1(**given)
    except ValueError as exc:
        st.error(f"No solution: {widgets.public_message(exc)}")
        return
    solved = {"alpha": f"{1 - res['alpha']:.4f}", "n": f"{res['n']:,}", "epsilon": f"{res['epsilon']:.4f}",
              "delta": f"{1 - res['delta']:.4f}"}[solve]
    c[{"alpha": 0, "n": 1, "epsilon": 2, "delta": 3}[solve]].metric(f"{labels[solve]} (solved)", solved)
    m = st.columns(4)
    m[0].metric("1 − α", f"{1 - res['alpha']:.4f}")
    m[1].metric("n", f"{res['n']:,}")
    m[2].metric("ε", f"{res['epsilon']:.4f}")
    m[3].metric("1 − δ", f"{1 - res['delta']:.4f}")
    st.success(f"Solved **{labels[solve]}** = {solved}")
    if res["root_only"]:
        st.warning(res["note"], icon=":material/warning:")
    widgets.csv_download(pd.DataFrame([res]), "theorem1_solution", key="dl_solve")


P_VALUE_LABELS = {"binomial": "exact binomial", "hoeffding_bentkus": "Hoeffding–Bentkus"}
SUMMARY_LABELS = {
    "label": "method", "kind": "guarantee", "violation_rate": "violation rate", "violation_se": "± s.e.",
    "violation_high": "95 % upper limit", "guarantee_holds": "holds?", "accuracy_mean": "mean accuracy",
    "accuracy_std": "sd accuracy", "coverage_mean": "mean coverage", "coverage_std": "sd coverage",
    "set_size_mean": "mean leaves in node", "certified_share": "certified share", "seconds": "seconds",
}


def shootout_section(es: ModelContext, req: Requirement) -> None:
    st.subheader("Every guarantee side by side")
    st.caption("The same calibration sets for every method. *PAC* methods promise accuracy ≥ target with probability "
               "≥ 1 − δ: their violation rate must stay left of the δ line. *Marginal* ones promise it on average "
               "(about half the sets fall below, by design). Sets are drawn with replacement (*iid*, the data set "
               "plays the deployment distribution and the realised accuracy is on all of it) or as the paper's "
               "calibration/test splits.")
    with st.container():  # inside the Advanced expander (an expander cannot hold another)
        c = st.columns([2.2, 1, 1, 1])
        d = st.columns([1.5, 1, 2.7])
        with d[0]:
            p_value = state.bind(st.radio, "LTT p-values", "g_pv", scope="ga", options=list(P_VALUE_LABELS),
                                 horizontal=True, format_func=P_VALUE_LABELS.get)
        with d[1]:
            depth = int(state.bind(st.number_input, "Mondrian depth", "g_depth", scope="ga", step=1,
                                   help="Superclasses of the Mondrian methods: the predicted leaf's ancestor at "
                                        "this depth."))
        with c[0]:
            methods = state.bind(st.multiselect, "Methods", "g_methods", scope="ga", options=list(METHODS),
                                 format_func=lambda m: METHODS[m].label,
                                 help="DARTS refits λ by bisection per set (about 0.1 s each).")
        with c[1]:
            reps = int(state.bind(st.number_input, "Calibration sets", "g_reps", scope="ga", step=100))
        with c[2]:
            sampling = state.bind(st.radio, "Sampling", "g_sampling", scope="ga", options=["iid", "split"])
        with c[3]:
            cov = float(state.bind(st.number_input, "LTT: min coverage", "g_cov", scope="ga", step=0.05,
                                   format="%.2f", help="A second risk for 'LTT · several risks' (0: none)."))
    methods = [m for m in methods if m != "ltt_multi" or cov > 0]
    key = (es.key, req.target, req.delta, req.n, reps, req.seed, sampling, tuple(methods), cov, p_value, depth)
    if req.root_only:
        st.warning(req.too_small(), icon=":material/warning:")
    if widgets.job_button("Run the shoot-out", "ga_run_shootout", key, type="primary", icon=":material/play_arrow:",
                          disabled=not methods):
        bar = st.progress(0.0, text="Shoot-out…")
        try:
            with widgets.job_work("ga_run_shootout"):
                with spinner("Preparing the per-sample quantities…"):
                    gdata = es.view.guarantee_data()
                settings = GuaranteeSettings(alpha=req.alpha, delta=req.delta, min_coverage=cov or None,
                                             p_value=p_value, mondrian_depth=depth)

                def progress(done: int, total: int) -> None:
                    bar.progress(done / total, text=f"Shoot-out… {done}/{total}")

                res = shootout(gdata, settings, req.n, methods=methods, reps=reps, sampling=sampling,
                               seed=req.seed, progress=progress)
                _remember(SHOOTOUTS, key, res)
        except ValueError as exc:
            bar.empty()
            st.error(f"Cannot run the shoot-out: {widgets.public_message(exc)}")
            return
        bar.empty()
    res = st.session_state.get(SHOOTOUTS, {}).get(key)
    if res is None:
        st.info(f"Press **Run the shoot-out** for {reps:,} calibration sets of n = {req.n:,} "
                f"(all but DARTS: about 10 s for 1,000 on the shipped models).")
        return
    s = res.summary
    for _, r in s[s["certified_share"] < 1].iterrows():
        st.warning(f"**{r['label']}**: {r['note']}", icon=":material/block:")
    name = f"guarantees_a{req.target:.3f}_d{req.delta:.2f}_n{req.n}"
    # side by side on a desktop; one under the other in presenter mode, each the screen's width
    c1, c2 = (st.container(), st.container()) if presenter.presenter() else st.columns(2)
    with c1:
        widgets.figure(violation_figure(s, req.delta), f"{name}_violations", key="ga_violations",
                       context=widgets.export_context(es),
                       title=f"Violation rate over {res.reps:,} calibration sets vs δ")
    with c2:
        widgets.figure(accuracy_coverage_figure(s, req.target), f"{name}_accuracy_coverage", key="ga_scatter",
                       context=widgets.export_context(es), title="Accuracy against coverage (± 1 sd)")
    shown = s[[c for c in SUMMARY_COLUMNS if c in SUMMARY_LABELS]].copy()
    # "holds" and the guarantee's kind in words: a marginal method "holds" on average although many sets fall below.
    shown["guarantee_holds"] = [headlines.holds_text(str(k), h, float(v), req.delta)
                                for k, h, v in zip(s["kind"], s["guarantee_holds"], s["violation_rate"], strict=True)]
    shown["kind"] = shown["kind"].map(lambda k: headlines.kind_words(str(k)))
    st.dataframe(shown, hide_index=True, key="ga_shootout", column_config={
        c: (st.column_config.NumberColumn(SUMMARY_LABELS[c], format="%.4f")
            if c not in ("label", "kind", "guarantee_holds") else st.column_config.TextColumn(SUMMARY_LABELS[c]))
        for c in shown.columns})
    c1, c2 = st.columns(2)
    with c1:
        widgets.csv_download(s, f"{name}_summary", key="dl_ga_shootout", context=widgets.export_context(es))
    with c2:
        widgets.csv_download(lambda: res.repetitions, f"{name}_repetitions", key="dl_ga_shootout_reps",
                             label="Every calibration set (CSV)", context=widgets.export_context(es))


def card_section(es: ModelContext, req: Requirement) -> None:
    st.subheader("Decision card")
    st.caption("The θ to ship, the guarantee it carries and the evidence, as Markdown with YAML front matter "
               "(Hugging Face model-card convention) and its JSON twin. Calibrated on n samples drawn with the "
               "split seed, measured on the rest, with 200 calibration sets of evidence.")
    c = st.columns([2, 1, 1])
    method = req.method  # one method for the page and the card, so both state the same θ
    state.set("g_card", method)  # the link's older g_card= follows it
    with c[0]:
        st.markdown(f"Deploys **{METHODS[method].label}** with the settings above (choose it under *Method*): "
                    "the card's θ is the θ shown at the top.")
    key = (es.key, req.target, req.delta, req.n, req.seed, method, req.quantile)

    def card() -> dict:
        cards = st.session_state.get(CARDS, {})
        if key not in cards:
            cards = {**cards, key: decision_card(es.view.evaluation, target_accuracy=req.target, delta=req.delta,
                                                 method=method, n_cal=req.n, ts=es.view.ts, seed=req.seed,
                                                 data=es.view.guarantee_data(),
                                                 **replace(req, method=method).options)}
            st.session_state[CARDS] = dict(list(cards.items())[-KEEP:])
        return cards[key]

    stem = f"decision_card_{method}_a{req.target:.3f}"
    with c[1]:
        st.download_button("Card (Markdown)", lambda: card_markdown(card()).encode("utf-8"), file_name=f"{stem}.md",
                           mime="text/markdown", key="dl_ga_card_md", on_click="ignore", icon=":material/download:")
    with c[2]:
        st.download_button("Card (JSON)", lambda: card_json(card()).encode("utf-8"), file_name=f"{stem}.json",
                           mime="application/json", key="dl_ga_card_json", on_click="ignore",
                           icon=":material/download:")
