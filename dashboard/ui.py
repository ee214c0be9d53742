"""Page sections not yet split by job (phase 2 of issue 28): the clean-vs-corrupted sections and
the CSV downloads. The rest of what this module held moved by job: ``entry`` (page start),
``sidebar`` (model context and pickers), ``widgets`` (figures, text, images), ``presenter``
(presenter mode and page CSS), ``sweep`` (the θ sweep)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from hsc_core.core.risk import Loss
from hsc_core.evaluation import to_csv
from hsc_core.report.figures import ExportContext, export_name

from . import data, state

# The names this module's sections use, and the ones dashboard/views.py reads as ``ui.<name>``
# (re-exported until phase 2 moves views.py's and these sections' imports).
from .presenter import font_size  # noqa: F401  (re-exported for views.py)
from .sidebar import catalog, current_model, shift_overlays  # noqa: F401  (catalog: re-exported for views.py)
from .sweep import sweep_sync  # noqa: F401  (re-exported for views.py)
from .widgets import export_context, figure, plain, public_message


def shift_overlay_section(es: data.EvalSet, rules: list[str], loss: Loss = "01", dec: int | None = None) -> None:
    """Risk–Coverage's "clean vs corrupted" part: the first selected rule's curve on the clean images and on
    each picked corruption, with a table (hAURC, top-1) per data and rule. Nothing for a model without shifts."""
    from hsc_core.core.rules import RULE_LABELS

    from . import plots

    model, location = current_model()
    if not data.shift_catalog(model) or not rules or location is None or model is None:
        return
    st.subheader("Clean vs corrupted images")
    extra = shift_overlays("rc")
    if not extra:
        st.caption("Pick corrupted versions of the images above to overlay their curves.")
        return
    clean = data.eval_set(model, location, state.get("subset"), es.ts)
    sets, tops = {clean.model: data.curve_set(clean, loss, dec)}, {clean.model: clean.top1}
    for name, loc in extra.items():
        try:
            shifted = data.eval_set(name, loc, state.get("subset"), es.ts)
            sets[name], tops[name] = data.curve_set(shifted, loss, dec), shifted.top1
        except data.LOAD_ERRORS as exc:
            st.error(f"**{plain(name)}** is left out: {plain(public_message(exc))}")
    rule = rules[0]
    figure(plots.compare_figure(sets, rule, loss), f"rc_shift_{rule}_{loss}", key="rc_shift_chart",
           context=export_context(clean), title=f"{RULE_LABELS[rule]}: clean vs corrupted images")
    table = [{"data": name, "rule": RULE_LABELS[r], "top-1 accuracy": tops[name],
              "hAURC×1000": 1000 * cs.curves[r].haurc} for name, cs in sets.items() for r in rules]
    st.dataframe(pd.DataFrame(table), hide_index=True, key="rc_shift_table",
                 column_config={"hAURC×1000": st.column_config.NumberColumn(format="%.3f"),
                                "top-1 accuracy": st.column_config.NumberColumn(format="%.4f")})
    csv_download(table, f"rc_shift_{loss}", key="dl_rc_shift", context=export_context(clean))


def shift_guarantee_section(es: data.EvalSet) -> None:
    """Guaranteed accuracy's "under distribution shift" part: θ̂ calibrated on clean images (the page's
    α, δ, n and seed), Climbing tested on the other images clean and corrupted
    (``hsc_core.evaluation.shift.guarantee_under_shift``). Nothing for a model without shifted data."""
    from hsc_core.evaluation.shift import guarantee_under_shift

    model, location = current_model()
    shifts = data.shift_catalog(model)
    if not shifts or model is None or location is None:
        return
    st.subheader("Does the guarantee hold under distribution shift?")
    st.caption("θ̂ is calibrated on clean images, then Climbing at θ̂ is scored on the remaining images, clean and "
               "corrupted (the same split, so the difference is the shift). Theorem 1 assumes calibration and test "
               "data are exchangeable; corrupted test images break that.")
    options = [k for k in shifts]
    if state.get("ga_shift") not in options:
        state.set("ga_shift", options[0])
    key = state.bind(st.selectbox, "Test on", "ga_shift", scope="ga", options=options, format_func=data.shift_label)
    clean = data.eval_set(model, location, state.get("subset"), es.ts)
    try:
        shifted = data.eval_set(Path(shifts[key]).stem, shifts[key], state.get("subset"), es.ts)
        n_cal = int(min(max(10, int(state.get("n"))), clean.n - 1))
        res = guarantee_under_shift(clean.view, shifted.view, n_cal=n_cal, alpha=round(1 - state.get("acc"), 6),
                                    delta=round(1 - state.get("conf"), 6), seed=int(state.get("split_seed")))
    except (*data.LOAD_ERRORS, ValueError) as exc:
        st.error(plain(public_message(exc)))
        return
    m = st.columns(4)
    m[0].metric("θ̂ (from clean)", f"{res.theta_hat:.4f}")
    m[1].metric("Clean test accuracy", f"{res.clean_accuracy:.4f}", delta=f"{res.clean_accuracy - res.target:+.4f}",
                delta_color="off")
    m[2].metric(f"{data.shift_label(key)}", f"{res.shifted_accuracy:.4f}",
                delta=f"{res.shifted_accuracy - res.target:+.4f}", delta_color="off")
    m[3].metric("Guarantee (≥ 1 − α − ε) on shifted", "holds" if res.shifted_holds else "fails")
    st.caption(f"Target {res.target:.3f}, ε = {res.epsilon:.4f}, {res.n_cal:,} clean calibration / {res.n_test:,} "
               f"test images; coverage clean {res.clean_coverage:.3f}, corrupted {res.shifted_coverage:.3f}.")
    csv_download([{"shift": key, **res.as_row()}], f"guarantee_under_{key}", key="dl_ga_shift",
                 context=export_context(clean))


def csv_text(table, context: ExportContext | None = None) -> str:
    """``table`` (a DataFrame or a list of dicts) as CSV, the context's columns in front, written
    by the layer's ``to_csv``: exact floats, and a name a spreadsheet would run as a formula
    (``=``, ``+``, ``-``, ``@``…) neutralised."""
    if isinstance(table, pd.DataFrame):
        columns = [str(c) for c in table.columns]
        records = table.to_dict("records")
    else:
        columns = list(dict.fromkeys(k for r in table for k in r))
        records = list(table)
    front = {} if context is None else {k: v for k, v in context.columns().items() if k not in columns}
    return to_csv([{**front, **r} for r in records], [*front, *columns])


def csv_download(table, name: str, key: str, label: str = "Download table (CSV)",
                 context: ExportContext | None = None) -> None:
    """A CSV download button (``csv_text``); ``table`` may be a DataFrame, a list of dicts or a
    callable returning one (built only when the button is clicked, for large tables). With
    ``context`` the file name and leading columns say which model, data set, subset, TS and θ it holds."""
    safe = export_name(name, context) if context is not None else (
        re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "table")
    payload: Callable[[], bytes] | bytes
    if callable(table):
        make = table
        payload = lambda: csv_text(make(), context).encode("utf-8")  # noqa: E731
    else:
        payload = csv_text(table, context).encode("utf-8")
    st.download_button(label, payload, file_name=f"{safe}.csv", mime="text/csv", key=key, on_click="ignore",
                       icon=":material/download:")


