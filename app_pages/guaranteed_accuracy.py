"""Guaranteed accuracy: the paper's Algorithm 1 threshold θ̂, Theorem 1's ε, and repetitions."""

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import data, plots, state, ui, views
from hsc_core.core.thresholds import solve_theorem1
from hsc_core.evaluation.repeated_splits import repeated_split_evaluation

ui.ensure_entrypoint()

es = ui.require_eval_set()
h = es.hierarchy
st.title("Guaranteed accuracy")
st.caption(ui.eval_caption(es))
st.markdown(
    "Pick a target accuracy **1 − α** and a confidence **1 − δ**. A random calibration set of **n** samples gives "
    "each sample's smallest θ at which Climbing is correct; θ̂ is their ⌈(n+1)(1−α)⌉-th smallest value. "
    "Theorem 1: with probability ≥ 1 − δ over the calibration set, the accuracy on new samples is within "
    "**ε** of the target. The remaining samples are the test set."
)
N = es.n
if N < 40:
    st.error(f"Only {N} samples: too few to split into calibration and test sets.")
    st.stop()
N_MAX = max(20, int(N * 0.9))
st.caption(
    f"{N:,} samples here: n goes up to {N_MAX:,} and the rest are the test set. The paper calibrates on 5,000 of the "
    "50,000 validation images and repeats 1,000 times; for the shipped 1,894-image sample n defaults to 1,000 and "
    "the repetitions to 200."
)
METHODS = {"order_statistic": "order statistic ⌈(n+1)(1−α)⌉ (paper)", "quantile": "numpy quantile (authors' code)"}
RESULTS = "_ga_results"
# The sliders' and inputs' ranges are those of state.SETTINGS (state.bind passes them), which also
# vet the link's values, so a shared link can never hand a widget a value outside its range.


@state.fragment
def threshold_view() -> None:
    state.set("n", int(min(max(10, int(state.get("n"))), N_MAX)))
    c = st.columns([1, 1, 1.3, 0.8])
    with c[0]:
        target = state.bind(st.slider, "Target accuracy 1 − α", "acc", scope="ga", step=0.005, format="%.3f")
    with c[1]:
        conf = state.bind(st.slider, "Confidence 1 − δ", "conf", scope="ga", step=0.01, format="%.2f")
    with c[2]:
        n = state.bind(st.slider, "Calibration size n", "n", scope="ga", min_value=10, max_value=N_MAX, step=1)
    with c[3]:
        seed = state.bind(st.number_input, "Split seed", "split_seed", scope="ga", step=1)
    method = st.radio("θ̂ rule", list(METHODS), format_func=METHODS.get, horizontal=True, key="ga_method")
    alpha, delta = round(1.0 - target, 6), round(1.0 - conf, 6)

    split = views.single_split_result(es, data.tight_thresholds(es), int(n), int(seed), alpha, delta, method)
    eps, test_acc = split.epsilon, split.test_accuracy
    inside = abs(test_acc - target) <= eps

    m = st.columns(5)
    m[0].metric("θ̂ (threshold)", f"{split.theta_hat:.4f}")
    m[1].metric("ε (Theorem 1)", f"{eps:.4f}")
    m[2].metric("Test accuracy", f"{test_acc:.4f}", delta=f"{test_acc - target:+.4f} vs target",
                delta_color="off")
    m[3].metric("Test coverage", f"{split.test_coverage:.4f}")
    m[4].metric("Within target ± ε", "yes" if inside else "no")
    st.caption(f"One split: {split.n_cal:,} calibration / {split.n_test:,} test samples (seed {int(seed)}). "
               f"Band: [{target - eps:.4f}, {target + eps:.4f}].")

    st.subheader("Repetitions (Figure 3 style)")
    r = st.columns([1.4, 1.4, 1])
    with r[0]:
        reps = state.bind(st.slider, "Repetitions", "reps", scope="ga", step=10)
    with r[1]:
        baselines = st.multiselect("Baselines", ["darts", "crc"], default=["darts", "crc"],
                                   format_func=plots.METHOD_LABELS.get, key="ga_baselines",
                                   help="DARTS re-fits its λ by a 25-step search per repetition, "
                                        "so it is the slow part.")
    key = (es.model, es.subset, es.ts, float(alpha), int(n), int(reps), int(seed), method, tuple(baselines))
    with r[2]:
        st.write("")
        run = st.button("Run repetitions", type="primary", icon=":material/play_arrow:")
    if run:
        bar = st.progress(0.0, text="Running repetitions…")
        last = [-1]

        def progress(frac: float) -> None:
            pct = int(frac * 100)
            if pct != last[0]:
                last[0] = pct
                bar.progress(min(frac, 1.0), text=f"Running repetitions… {pct}%")

        try:
            df = repeated_split_evaluation(h, es.node_probs, es.labels, [alpha], int(n), int(reps), seed=int(seed),
                                           method=method, baselines=tuple(baselines), progress=progress)
        except ValueError as exc:
            bar.empty()
            st.error(f"Cannot run the repetitions: {exc}")
            return
        bar.empty()
        st.session_state[RESULTS] = (key, df)
    stored = st.session_state.get(RESULTS)
    if stored is None or stored[0] != key:
        st.info(f"Press **Run repetitions** to draw {int(reps)} stratified calibration sets of n = {int(n):,} "
                "and compare the test accuracy of θ̂ with the baselines.")
        return
    df = stored[1]
    ui.figure(plots.accuracy_histogram(df, target, eps), f"guaranteed_accuracy_a{target:.3f}_n{int(n)}",
              key="ga_hist", context=ui.export_context(es),
              title=f"Test accuracy over {len(df):,} repetitions (target {target:.3f}, n = {int(n):,})")
    d = df.assign(target=target, abs_err=(df["accuracy"] - target).abs(),
                  inside=(df["accuracy"] - target).abs() <= eps)
    summary = d.groupby("method", sort=False).agg(
        mean_accuracy=("accuracy", "mean"), std_accuracy=("accuracy", "std"),
        mean_abs_error=("abs_err", "mean"), mean_coverage=("coverage", "mean"),
        fraction_within_eps=("inside", "mean")).reset_index()
    summary["method"] = summary["method"].map(lambda m: plots.METHOD_LABELS.get(m, m))
    st.dataframe(summary, hide_index=True, key="ga_summary",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in summary.columns[1:]})
    n_test = N - int(n)
    noise = float(np.sqrt(target * (1 - target) / max(n_test, 1)))
    st.caption(f"Each repetition draws a stratified calibration set of {int(n):,} and tests on the other "
               f"{n_test:,}. Theorem 1 holds for the accuracy on new data with probability ≥ {conf:.0%}; the accuracy "
               f"measured on only {n_test:,} test samples adds its own noise (std ≈ {noise:.4f} at the target, vs "
               f"ε = {eps:.4f}), so fewer repetitions than that may land inside the green band.")
    c1, c2 = st.columns(2)
    with c1:
        ui.csv_download(summary, "repetitions_summary", key="dl_ga_summary",
                        context=ui.export_context(es))
    with c2:
        ui.csv_download(df, "repetitions", key="dl_ga_raw", label="All repetitions (CSV)",
                        context=ui.export_context(es))


threshold_view()


@state.fragment
def solver_view() -> None:
    st.subheader("Solve Theorem 1 for one parameter")
    st.caption("Fix three of α, n, ε, δ; the fourth follows.")
    labels = {"alpha": "target accuracy 1 − α", "n": "calibration size n", "epsilon": "margin ε",
              "delta": "confidence 1 − δ"}
    solve = state.bind(st.radio, "Solve for", "solve", scope="ga", options=list(labels), format_func=labels.get,
                       horizontal=True)
    c = st.columns(4)
    acc = c[0].number_input("Target accuracy 1 − α", 0.5, 0.9999, float(state.get("acc")), 0.005, format="%.4f",
                            disabled=solve == "alpha", key="solve_acc")
    n = c[1].number_input("Calibration size n", 1, 10_000_000, int(state.get("n")), 100,
                          disabled=solve == "n", key="solve_n")
    with c[2]:
        eps = state.bind(st.number_input, "Margin ε", "eps", scope="ga", step=0.001, format="%.4f",
                         disabled=solve == "epsilon")
    conf = c[3].number_input("Confidence 1 − δ", 0.5, 0.9999, float(state.get("conf")), 0.01, format="%.4f",
                             disabled=solve == "delta", key="solve_conf")
    given = {"alpha": round(1 - acc, 6), "n": int(n), "epsilon": float(eps), "delta": round(1 - conf, 6)}
    given[solve] = None
    try:
        res = solve_theorem1(**given)
    except ValueError as exc:
        st.error(f"No solution: {exc}")
        return
    m = st.columns(4)
    m[0].metric("1 − α", f"{1 - res['alpha']:.4f}")
    m[1].metric("n", f"{res['n']:,}")
    m[2].metric("ε", f"{res['epsilon']:.4f}")
    m[3].metric("1 − δ", f"{1 - res['delta']:.4f}")
    st.success(f"Solved **{labels[solve]}** = " + {
        "alpha": f"{1 - res['alpha']:.4f}", "n": f"{res['n']:,}", "epsilon": f"{res['epsilon']:.4f}",
        "delta": f"{1 - res['delta']:.4f}"}[solve])
    ui.csv_download(pd.DataFrame([res]), "theorem1_solution", key="dl_solve")


solver_view()
ui.shift_guarantee_section(es)  # calibrate on clean, test on corrupted images (when the model has them)
