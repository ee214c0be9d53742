"""The dashboard's "Download report (HTML)" button: ``hsc report``'s file, built from the pages'
own cached ``ModelEvaluation`` (the same protocol, curves and intervals as the pages and the command
line, each computed once), only when the button is clicked."""

from __future__ import annotations

import streamlit as st

from hsc_core.evaluation import ModelEvaluation
from hsc_core.report.figures import safe_filename
from hsc_core.report.html_report import build_report

from . import data


def model_evaluation(model: str, location: str, subset: str) -> ModelEvaluation:
    """The model's cached evaluation on ``subset`` of its file, on its data set's tree."""
    return data.evaluation(model, location, subset)


def report_html(models: dict[str, str], subset: str) -> bytes:
    """The report of ``models`` (name → location); a model that cannot be used is left out."""
    evaluations, skipped = [], []
    for name, location in models.items():
        try:
            evaluations.append(model_evaluation(name, location, subset))
        except data.LOAD_ERRORS as exc:
            skipped.append(f"{name} ({exc})")
    if not evaluations:
        raise data.DataError("no model could be evaluated: " + "; ".join(skipped))
    title = "Hierarchical selective classification report — " + ", ".join(ev.name for ev in evaluations)
    return build_report(evaluations, title, command="dashboard download").encode("utf-8")


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
    if name is None or location is None:
        return
    with st.sidebar:
        download_button({name: location}, state.get("subset"), key="dl_report_sidebar")
