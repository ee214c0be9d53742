"""The dashboard's "Download report (HTML)" button: ``hsc report``'s file, built from the pages'
own cached ``ModelEvaluation`` (the same protocol, curves and intervals as the pages and the command
line, each computed once), only when the button is clicked.

Streamlit runs a download button's callable outside the script thread, where nothing of the
session can be read: not its state, and not the session-scoped caches that hold what is computed
from the session's uploads. So the button resolves every ``ModelEvaluation`` it needs in the script
thread, when it is drawn, and its callable (a ``ReportJob``) only lays them out. The job is released
with the session (``session_memory.release_with_session``), so a closed tab's button holds no upload's logits.
A failure while the file is built comes back as the file itself: a short HTML page that says what
went wrong (Streamlit would otherwise drop the download without a word).
"""

from __future__ import annotations

import html
import logging
import threading

import streamlit as st

from hsc_core.core.validation import clip
from hsc_core.evaluation import ModelEvaluation
from hsc_core.report.export import safe_filename
from hsc_core.report.html_report import build_report

from . import catalog, session_memory
from .evaluations import evaluation
from .widgets import public_message

_LOG = logging.getLogger(__name__)
TITLE = "Hierarchical selective classification report — "
ENDED = ("This browser session has ended, and with it the data the report is built from: reload the page and click "
         "the button again.")


def model_evaluation(model: str, location: str, subset: str) -> ModelEvaluation:
    """The model's cached evaluation on ``subset`` of its file, on its data set's tree."""
    return evaluation(model, location, subset)


def resolve(models: dict[str, str], subset: str) -> tuple[list[ModelEvaluation], list[str]]:
    """(the evaluations of ``models`` that can be used, "name (reason)" of those that cannot). In
    the script thread: reads the (session) caches."""
    evaluations, skipped = [], []
    for name, location in models.items():
        try:
            evaluations.append(model_evaluation(name, location, subset))
        except catalog.LOAD_ERRORS as exc:
            skipped.append(f"{clip(name)} ({_public(exc)})")
    return evaluations, skipped


def _public(exc: Exception | str) -> str:
    return clip(public_message(exc), 300)


def error_page(message: str) -> bytes:
    """A small, self-contained HTML file that says why there is no report."""
    text = html.escape(message)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>No report</title></head><body>'
            f"<h1>The report could not be built</h1><p>{text}</p></body></html>\n").encode()


class ReportJob:
    """A download button's callable: ``build_report`` over evaluations resolved in the script
    thread. Touches no Streamlit cache or session state, so it works in the thread Streamlit runs
    it in; any error becomes ``error_page``. ``release()`` (at the end of the session) drops the
    evaluations."""

    def __init__(self, evaluations: list[ModelEvaluation], skipped: list[str]):
        self._evaluations: list[ModelEvaluation] | None = list(evaluations)
        self.skipped = list(skipped)
        self.names = [ev.name for ev in evaluations]
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self._evaluations = None

    def __call__(self) -> bytes:
        with self._lock:
            evaluations = self._evaluations
        if evaluations is None:
            return error_page(ENDED)
        try:
            title = TITLE + ", ".join(self.names)
            return build_report(evaluations, title, command="dashboard download").encode("utf-8")
        except Exception as exc:  # noqa: BLE001 - anything: the user gets a file that says what failed
            _LOG.exception("building the dashboard's HTML report failed")
            return error_page(f"{type(exc).__name__}: {_public(exc)}"
                              + (f" (left out: {'; '.join(self.skipped)})" if self.skipped else ""))


def report_html(models: dict[str, str], subset: str) -> bytes:
    """The report of ``models`` (name → location); a model that cannot be used is left out. In
    the script thread (or where the caches can be read)."""
    evaluations, skipped = resolve(models, subset)
    if not evaluations:
        raise catalog.DataError("no model could be evaluated: " + "; ".join(skipped))
    return build_report(evaluations, TITLE + ", ".join(ev.name for ev in evaluations),
                        command="dashboard download").encode("utf-8")


def report_file_name(models: dict[str, str], subset: str) -> str:
    """``hsc_report_<models>_<data sets>_<subset>.html``: the file says what it holds."""
    stem = "_".join(m[:40] for m in models) if len(models) <= 3 else f"{len(models)}_models"
    datasets = []
    for name, location in models.items():
        try:
            datasets.append(catalog.dataset_name_for(name, location))
        except catalog.LOAD_ERRORS:
            pass
    stem += "".join(f"_{d}" for d in dict.fromkeys(datasets))
    return f"{safe_filename(f'hsc_report_{stem}_{subset[:40]}')}.html"


HELP = ("One self-contained HTML file (works offline): headline, protocol, every figure and table with 95 % "
        "bootstrap intervals, with and without temperature scaling.")


def download_button(models: dict[str, str], subset: str, key: str, label: str = "Download report (HTML)") -> None:
    """A button that builds the report of ``models`` when clicked (a few seconds per model). The
    evaluations are resolved now, in the script thread; a model that cannot be used is named in
    the help text, and with none the button is disabled and says why."""
    if not models:
        return
    evaluations, skipped = resolve(models, subset)
    note = f" Left out: {'; '.join(skipped)}." if skipped else ""
    if not evaluations:
        st.download_button(label, b"", file_name="hsc_report.html", mime="text/html", key=key, disabled=True,
                           icon=":material/summarize:", help=f"No report: no model can be evaluated.{note}")
        return
    job = ReportJob(evaluations, skipped)
    session_memory.release_with_session(job)
    st.download_button(label, job, file_name=report_file_name(models, subset), mime="text/html", key=key,
                       on_click="ignore", icon=":material/summarize:", help=HELP + note)


def sidebar_button() -> None:
    """The sidebar's button: the report of the model picked there, on the subset picked there."""
    from . import sidebar, state

    name, location = sidebar.current_model()
    if name is None or location is None:
        return
    with st.sidebar:
        download_button({name: location}, state.get("subset"), key="dl_report_sidebar")
