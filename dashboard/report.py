"""The dashboard's "Download report (HTML)" button: ``hsc report``'s file, built from the pages'
own cached ``ModelEvaluation`` (the same curves, intervals and protocol), only when the button is
clicked."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from hsc_core.report.figures import safe_filename
from hsc_core.report.html_report import ModelResult, build_report

from . import data


def model_result(model: str, location: str, subset: str) -> ModelResult:
    """One model's report section from its cached ``ModelEvaluation`` (TS off and on)."""
    ev = data.evaluation(model, location, subset)
    sets = {ts: ev.setting(ts) for ts in (False, True)}
    local = not location.startswith((data.SYNTHETIC_PREFIX, data.UPLOAD_PREFIX))
    return ModelResult(
        name=model, dataset=ev.dataset, subset=subset, n_samples=ev.n_samples, n_cal=ev.n_cal,
        n_eval=sets[True].n, temperature=ev.temperature, top1=sets[False].top1,
        curves={ts: es.curves() for ts, es in sets.items()},
        cc={ts: es.cc_curves() for ts, es in sets.items()},
        boot={ts: es.bootstrap() for ts, es in sets.items()},
        file=Path(location).name if local else "(uploaded in the dashboard)" if location.startswith(data.UPLOAD_PREFIX)
        else location, manifest=ev.manifest,
    )


def report_html(models: dict[str, str], subset: str) -> bytes:
    """The report of ``models`` (name → location); a model that cannot be used is left out."""
    results, skipped = [], []
    for name, location in models.items():
        try:
            results.append(model_result(name, location, subset))
        except data.LOAD_ERRORS as exc:
            skipped.append(f"{name} ({exc})")
    if not results:
        raise data.DataError("no model could be evaluated: " + "; ".join(skipped))
    title = "Hierarchical selective classification report — " + ", ".join(r.name for r in results)
    return build_report(results, title, command="dashboard download").encode("utf-8")


def report_file_name(models: dict[str, str], subset: str) -> str:
    """``hsc_report_<models>_<data sets>_<subset>.html``: the file says what it holds."""
    stem = "_".join(models) if len(models) <= 3 else f"{len(models)}_models"
    datasets = []
    for name, location in models.items():
        try:
            datasets.append(data.dataset_name_for(name, location))
        except data.LOAD_ERRORS:
            pass
    stem += "".join(f"_{d}" for d in dict.fromkeys(datasets))
    return f"{safe_filename(f'hsc_report_{stem}_{subset}')}.html"


def download_button(models: dict[str, str], subset: str, key: str, label: str = "Download report (HTML)") -> None:
    """A button that builds the report of ``models`` when clicked (a few seconds per model)."""
    if not models:
        return
    st.download_button(
        label, lambda: report_html(models, subset), file_name=report_file_name(models, subset),
        mime="text/html", key=key, on_click="ignore", icon=":material/summarize:",
        help="One self-contained HTML file (works offline): headline, protocol, every figure and table with 95 % "
             "bootstrap intervals, with and without temperature scaling.")


def sidebar_button() -> None:
    """The sidebar's button: the report of the model picked there, on the subset picked there."""
    from . import state, ui

    name, location = ui.current_model()
    if name is None:
        return
    with st.sidebar:
        download_button({name: location}, state.get("subset"), key="dl_report_sidebar")
