"""Small output pieces every page uses: user text shown literally (``plain``), error messages
without server paths, counted nouns, figures with their download settings, sample images,
table column formats, CSV downloads, and the first run's plotly.js warm-up."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Literal

import pandas as pd
import streamlit as st

from hsc_core.evaluation import to_csv
from hsc_core.report.export import ExportContext, export_name
from hsc_core.report.figures import titled

from . import session_keys as keys
from . import state
from .plain_text import plain
from .plots import plot_config
from .presenter import font_size, presenter

if TYPE_CHECKING:
    from .evaluations import ModelContext

_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/:'\"]+/)+")


def public_message(exc: Exception | str) -> str:
    """An error message for the page: any absolute server path is cut to its file name."""
    return _ABSOLUTE_PATH.sub("", str(exc))


def job_button(label: str, key: str, job: Hashable, **kwargs) -> bool:
    """A button that starts a long job (seconds of work in the run it starts): True until the page says
    the job is done (``job_work``).

    A plain ``st.button`` is True only in the run its click starts; if that run stops before the work is
    done (a rerun asked for meanwhile: another click, presenter mode's size report, a reconnect), the
    click is lost and the page looks as if it was never pressed. Here the click is kept in the session
    (``session_keys.JOBS_ASKED``) with ``job``, the page's settings when the work starts, and every run
    with those settings carries on until the work is done. Settings changed before then drop the job,
    as a plain button's next run would.
    """
    asked = st.session_state.setdefault(keys.JOBS_ASKED, {})
    st.button(label, key=key, on_click=_ask_job, args=(key,), **kwargs)
    if asked.get(key) is True:  # clicked: the job is what the page shows now
        asked[key] = job
    elif key in asked and asked[key] != job:
        del asked[key]
    return key in asked


def _ask_job(key: str) -> None:
    st.session_state.setdefault(keys.JOBS_ASKED, {})[key] = True


@contextlib.contextmanager
def job_work(key: str) -> Iterator[None]:
    """Around a ``job_button``'s work: done when the block ends or fails, still asked for when the run
    is stopped inside it (Streamlit's stop and rerun are ``BaseException``s, not ``Exception``s)."""
    try:
        yield
    except Exception:
        st.session_state.get(keys.JOBS_ASKED, {}).pop(key, None)
        raise
    st.session_state.get(keys.JOBS_ASKED, {}).pop(key, None)


def export_context(es: ModelContext, theta: float | None = None,
                   ts: bool | None | Literal["es"] = "es") -> ExportContext:
    """What a figure/table of ``es`` shows (model, data set, subset, TS, θ), for self-describing exports.
    ``ts=None`` for an export that holds both TS settings."""
    v = es.view
    scaled = v.ts if ts == "es" else ts
    return ExportContext(model=es.model, dataset=getattr(getattr(es, "dataset", None), "name", ""), subset=es.subset,
                         ts=scaled, temperature=v.temperature if scaled else None, theta=theta, n_samples=v.n)


def figure(fig, name: str, key: str | None = None, context: ExportContext | None = None,
           title: str | None = None, width: Literal["stretch", "content"] = "stretch",
           height: int | None = None, layout: dict | None = None) -> None:
    """st.plotly_chart with the PNG/SVG download button configured. With ``context`` the file name
    (and, with ``title``, the figure's title line) say which model, data set, subset, TS and θ.
    ``width="content"`` keeps a figure that sets its own width (the tree) at that width or less.
    ``height`` (e.g. ``fit_height``): the whole figure's height, title included; in presenter mode
    such a figure (built fresh for this call, never a cached one) also gets the presenter type size.
    ``layout``: layout updates applied last (e.g. a legend beside the plot instead of the title's
    default one below it)."""
    if title is not None:
        titled(fig, title, context)
    if height is not None:
        fig.update_layout(height=int(height))
        if presenter():
            size = font_size()
            fig.update_layout(font=dict(size=size), legend=dict(font=dict(size=int(size * 0.8))))
            if title is not None:
                fig.update_layout(title=dict(font=dict(size=size)))
    if layout:
        fig.update_layout(**layout)
    config = plot_config(export_name(name, context), state.get("fmt"))
    from . import plotly_component

    if key in plotly_component.CHARTS:
        # its camera button saves what st.plotly_chart's would: this file name, in the chosen format
        plotly_component.chart(fig.to_json(), str(key), config, image=dict(config["toImageButtonOptions"]))
        return
    st.plotly_chart(fig, config=config, key=key, width=width)


def sample_image(es: ModelContext, sample: str, width: int | Literal["stretch"] = "stretch") -> None:
    """A sample's image with its id as caption: the one place that reads one (inside the data set's
    image folder only); a caption says why when there is none."""
    from hsc_core.datasets.images import ImageReadError, display_image, open_image_safely, safe_image_path

    if es.image_dir is None:
        st.caption(f"Sample {plain(sample)} (no image folder for this data set: set `HSC_IMAGE_DIR`, or add "
                   "`images/` to the data set's folder)")
        return
    # None also for an id that is not a plain file name inside the folder (e.g. "../x.png").
    image_path = safe_image_path(es.image_dir, sample)
    try:
        image = display_image(open_image_safely(image_path)) if image_path is not None else None
    except ImageReadError:
        image = None
    if image is not None:
        st.image(image, caption=plain(sample), width=width)
    elif image_path is None:
        st.caption(f"Sample {plain(sample)} (no image with this name in the image folder)")
    else:
        st.caption(f"Sample {plain(sample)} (its image file cannot be read)")


def sample_headline(h, true_leaf: int, pred_leaf: int, confidence: float) -> str:
    """The Explorer's lines beside the image (markdown): the true class, the top-1 leaf with its
    probability and whether it is right; names shown literally. The page and its snapshot show this."""
    from .views import node_name, verdict_md

    return (f"**True class:** {plain(node_name(h, true_leaf))}  \n"
            f"**Top-1 leaf:** {plain(node_name(h, pred_leaf))} (p = {confidence:.3f}) "
            + verdict_md(pred_leaf == true_leaf))


CHOICE_COLUMNS = {
    "confidence": st.column_config.NumberColumn(format="%.4f"),
    "coverage": st.column_config.NumberColumn(format="%.3f"),
}

def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 class``, ``1,000 classes``: the number with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else (plural or noun + ('es' if noun.endswith(('s', 'sh', 'ch', 'x')) else 's'))}"


# ---------------------------------------------------------------------------- first paint
WARM = keys.PLOTLY_WARM


def warm_plotly() -> None:
    """In a session's first run only: an invisible, empty Plotly chart sent before anything else,
    so the browser fetches and starts plotly.js (≈ 4.7 MB, seconds on a slow machine) while the
    server still computes the page; a shared link's chart then draws as soon as it arrives. Not for
    a link to a page whose first chart the chart component draws (it brings its own plotly.js). Its
    container is sent in every run, empty after the first: the page's elements keep their places from
    run to run, so the browser never mounts a chart component (its frame) anew."""
    from .plotly_component import draws_landing_page

    slot = st.container(key="hsc_plotly_warm", height=1, border=False)
    if st.session_state.get(WARM):
        return
    st.session_state[WARM] = True
    try:
        url = str(st.context.url or "")
    except Exception:  # no browser address (a script run without one): warm as before
        url = ""
    if draws_landing_page(url):
        return
    import plotly.graph_objects as go

    with slot:  # hidden by chart_frame.css (presenter.presenter_style, every run)
        st.plotly_chart(go.Figure(layout=dict(width=10, height=10)), config={"staticPlot": True},
                        key="hsc_plotly_warm_chart")


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
