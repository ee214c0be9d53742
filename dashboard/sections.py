"""Page sections on the same model's corrupted images: its clean-vs-corrupted RC curves (Risk–Coverage)
and its guarantee under distribution shift (Guaranteed accuracy)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from hsc_core.core.risk import Loss

from . import state
from .catalog import LOAD_ERRORS, shift_catalog, shift_label
from .evaluations import ModelContext, curve_set, model_context
from .sidebar import current_model, shift_overlays
from .widgets import csv_download, export_context, figure, plain, public_message


def shift_overlay_section(es: ModelContext, rules: list[str], loss: Loss = "01", dec: int | None = None) -> None:
    """Risk–Coverage's "clean vs corrupted" part: the first selected rule's curve on the clean images and on
    each picked corruption, with a table (hAURC, top-1) per data and rule. Nothing for a model without shifts."""
    from hsc_core.core.rule_registry import rule_label
    from hsc_core.report.figures import compare_figure

    model, location = current_model()
    if not shift_catalog(model) or not rules or location is None or model is None:
        return
    st.subheader("Clean vs corrupted images")
    extra = shift_overlays("rc")
    if not extra:
        st.caption("Pick corrupted versions of the images above to overlay their curves.")
        return
    clean = model_context(model, location, state.get("subset"), es.view.ts)
    sets, tops = {clean.model: curve_set(clean, loss, dec)}, {clean.model: clean.view.top1}
    for name, loc in extra.items():
        try:
            shifted = model_context(name, loc, state.get("subset"), es.view.ts)
            sets[name], tops[name] = curve_set(shifted, loss, dec), shifted.view.top1
        except LOAD_ERRORS as exc:
            st.error(f"**{plain(name)}** is left out: {plain(public_message(exc))}")
    rule = rules[0]
    figure(compare_figure({m: cs.display[rule] for m, cs in sets.items()},
                          {m: cs.curves[rule].haurc for m, cs in sets.items()}, loss), f"rc_shift_{rule}_{loss}",
           key="rc_shift_chart",
           context=export_context(clean), title=f"{rule_label(rule)}: clean vs corrupted images")
    table = [{"data": name, "rule": rule_label(r), "top-1 accuracy": tops[name],
              "hAURC×1000": 1000 * cs.curves[r].haurc} for name, cs in sets.items() for r in rules]
    st.dataframe(pd.DataFrame(table), hide_index=True, key="rc_shift_table",
                 column_config={"hAURC×1000": st.column_config.NumberColumn(format="%.3f"),
                                "top-1 accuracy": st.column_config.NumberColumn(format="%.4f")})
    csv_download(table, f"rc_shift_{loss}", key="dl_rc_shift", context=export_context(clean))


def shift_guarantee_section(es: ModelContext) -> None:
    """Guaranteed accuracy's "under distribution shift" part: θ̂ calibrated on clean images (the page's
    α, δ, n and seed), Climbing tested on the other images clean and corrupted
    (``hsc_core.evaluation.shift.guarantee_under_shift``). Nothing for a model without shifted data."""
    from hsc_core.evaluation.shift import guarantee_under_shift

    model, location = current_model()
    shifts = shift_catalog(model)
    if not shifts or model is None or location is None:
        return
    st.subheader("Does the guarantee hold under distribution shift?")
    st.caption("θ̂ is calibrated on clean images, then Climbing at θ̂ is scored on the remaining images, clean and "
               "corrupted (the same split, so the difference is the shift). Theorem 1 assumes calibration and test "
               "data are exchangeable; corrupted test images break that.")
    options = [k for k in shifts]
    if state.get("ga_shift") not in options:
        state.set("ga_shift", options[0])
    key = state.bind(st.selectbox, "Test on", "ga_shift", scope="ga", options=options, format_func=shift_label)
    clean = model_context(model, location, state.get("subset"), es.view.ts)
    try:
        shifted = model_context(Path(shifts[key]).stem, shifts[key], state.get("subset"), es.view.ts)
        n_cal = int(min(max(10, int(state.get("n"))), clean.view.n - 1))
        res = guarantee_under_shift(clean.view, shifted.view, n_cal=n_cal, alpha=round(1 - state.get("acc"), 6),
                                    delta=round(1 - state.get("conf"), 6), seed=int(state.get("split_seed")))
    except (*LOAD_ERRORS, ValueError) as exc:
        st.error(plain(public_message(exc)))
        return
    m = st.columns(4)
    m[0].metric("θ̂ (from clean)", f"{res.theta_hat:.4f}")
    m[1].metric("Clean test accuracy", f"{res.clean_accuracy:.4f}", delta=f"{res.clean_accuracy - res.target:+.4f}",
                delta_color="off")
    m[2].metric(f"{shift_label(key)}", f"{res.shifted_accuracy:.4f}",
                delta=f"{res.shifted_accuracy - res.target:+.4f}", delta_color="off")
    m[3].metric("Guarantee (≥ 1 − α − ε) on shifted", "holds" if res.shifted_holds else "fails")
    st.caption(f"Target {res.target:.3f}, ε = {res.epsilon:.4f}, {res.n_cal:,} clean calibration / {res.n_test:,} "
               f"test images; coverage clean {res.clean_coverage:.3f}, corrupted {res.shifted_coverage:.3f}.")
    csv_download([{"shift": key, **res.as_row()}], f"guarantee_under_{key}", key="dl_ga_shift",
                 context=export_context(clean))
