"""Streamlit pieces shared by the pages: the sidebar, error handling, downloads, figures."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import streamlit as st

from . import data, state
from .plots import plot_config

UPLOADED = "_uploaded_models"  # name → path of .npz files uploaded in this session
ENTRY_FLAG = "_entered_via_app"


# ---------------------------------------------------------------------------- entry point
def mark_entry() -> None:
    """Called by app.py right before it runs the selected page."""
    st.session_state[ENTRY_FLAG] = True


def ensure_entrypoint() -> None:
    """First line of every page: make sure the page runs inside app.py's navigation.

    Streamlit still honours its legacy "pages/ folder" mode until some run calls st.navigation:
    the first request of a fresh server for e.g. ``/explorer`` executes ``pages/explorer.py``
    alone, without app.py (no sidebar, no state). Switch the process to st.navigation and rerun;
    the URL paths of app.py's pages equal the file names, so the same page is shown.
    """
    if st.session_state.pop(ENTRY_FLAG, False):
        return
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
    # The page file is the main script itself (``streamlit run pages/explorer.py`` or
    # ``AppTest.from_file`` on a page): do app.py's setup here, without the navigation.
    st.set_page_config(page_title="Hierarchical Selective Classification", layout="wide")
    state.init_state()
    sidebar()
    state.write_query_params()
    notices()


# ---------------------------------------------------------------------------- model context
def catalog() -> dict[str, str]:
    return data.model_catalog(st.session_state.get(UPLOADED, {}))


def current_model() -> tuple[str | None, str | None]:
    cat = catalog()
    name = state.get("model")
    if name not in cat:
        if name is not None:
            st.session_state[state.MISSING_MODEL] = name  # explained in the page by notices()
        name = data.default_model(cat)
        state.set("model", name)
    return name, (cat.get(name) if name else None)


def notices() -> None:
    """In the page: why the view differs from what the link (or a vanished file) asked for."""
    ss = st.session_state
    missing = ss.get(state.MISSING_MODEL)
    if missing is not None:
        cat = catalog()
        shown = state.get("model")
        st.error(
            f"Unknown model **{missing}**: there is no `{missing}.npz` in `{data.cached_logits_dir()}` "
            "(files uploaded in another browser session are not shared)."
            + (f" Showing **{shown}** instead; available: {', '.join(cat)}." if shown else "")
        )
    ignored = ss.get(state.URL_IGNORED)
    if ignored:
        st.warning("Ignored invalid link parameters (defaults used): " + ", ".join(f"`{x}`" for x in ignored))


def no_models_message() -> None:
    st.warning(
        f"No cached logits found in `{data.cached_logits_dir()}`. Add `.npz` files there "
        f"(set `{data.CACHED_LOGITS_ENV}` to use another folder) or upload one in the sidebar."
    )


def require_eval_set(ts: bool | None = None, heldout: bool = False) -> data.EvalSet:
    """The current model's evaluation samples, or an in-page st.error and st.stop()."""
    name, location = current_model()
    if name is None:
        no_models_message()
        st.stop()
    try:
        return data.eval_set(name, location, state.get("subset"), state.get("ts") if ts is None else ts, heldout)
    except data.LOAD_ERRORS as exc:
        show_load_error(name, exc)
        st.stop()


def curve_set_or_stop(es: data.EvalSet, loss: str = "01", dec: int | None = None) -> data.CurveSet:
    try:
        return data.curve_set(es, loss, dec)
    except data.LOAD_ERRORS as exc:
        show_load_error(es.model, exc)
        st.stop()


def show_load_error(name: str, exc: Exception) -> None:
    st.error(f"Cannot use model **{name}**: {exc}")
    st.caption("The other models still work: pick one in the sidebar.")


def eval_caption(es: data.EvalSet) -> str:
    parts = [f"**{es.model}**", f"{es.n:,} samples"]
    if es.subset != data.ALL:
        parts.append(f"subset *{es.subset}*")
    if es.ts:
        parts.append(f"temperature scaling T = {es.temperature:.3f} (fitted on the other half, {es.n_fit:,} samples)")
    elif es.heldout:
        parts.append("held-out half, no temperature scaling")
    else:
        parts.append("no temperature scaling")
    return " · ".join(parts)


# ---------------------------------------------------------------------------- sidebar
def sidebar() -> None:
    """Model picker (+ .npz upload), data subset, temperature scaling, figure format."""
    ss = st.session_state
    ss.setdefault(UPLOADED, {})
    with st.sidebar:
        st.markdown("### Model & data")
        picker = st.container()
        with st.expander("Add a logits file (.npz)"):
            _upload_widget()
        cat = catalog()
        name, location = current_model()
        with picker:
            if not cat:
                st.caption(f"No `.npz` files in `{data.cached_logits_dir()}`.")
            else:
                state.bind(st.selectbox, "Model (cached logits)", "model", scope="sb", options=list(cat),
                           help="Every .npz in the cached-logits folder, plus files you upload.")
                name, location = current_model()
        bundle = None
        if location is not None:
            try:
                bundle = data.load_bundle(location)
            except data.LOAD_ERRORS as exc:
                st.error(f"{name}: {exc}")
        if data.synthetic_samples() is not None:
            st.warning(f"Synthetic data (HSC_SYNTHETIC={data.synthetic_samples()}): for benchmarks and demos only.")
        if bundle is not None:
            options = data.subset_options(bundle)
            if state.get("subset") not in options:
                state.set("subset", data.ALL)
            state.bind(st.selectbox, "Samples", "subset", scope="sb", options=list(options),
                       format_func=options.get, help="Data subset by source tag.")
        state.bind(st.toggle, "Temperature scaling", "ts", scope="sb",
                   help="Fit T on a random half (seed 0, stratified by source); evaluate on the other half.")
        if state.get("ts") and bundle is not None:
            try:
                t, n_fit = data.temperature(location, state.get("subset"))
                st.caption(f"T = **{t:.3f}**, fitted on a random half ({n_fit:,} samples, seed 0, stratified by "
                           "source). With TS on, every metric uses only the other half.")
            except data.LOAD_ERRORS as exc:
                st.error(str(exc))
        state.bind(st.radio, "Figure download format", "fmt", scope="sb", options=["png", "svg"],
                   horizontal=True, format_func=str.upper,
                   help="The camera icon in each figure's toolbar saves it in this format.")


def _upload_widget() -> None:
    ss = st.session_state
    up = st.file_uploader("Logits file", type=["npz"], key="_npz_upload",
                          help="Validated like the cached files; it stays in the model list for this session.")
    if up is None:
        ss.pop("_upload_msg", None)
        return
    if ss.get("_upload_id") != up.file_id:
        ss["_upload_id"] = up.file_id
        folder = Path(ss.setdefault("_upload_dir", tempfile.mkdtemp(prefix="hsc_upload_")))
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(up.name).stem).strip("._") or "uploaded"
        path = folder / f"{stem}.npz"
        k = 1
        while path.exists():
            k += 1
            path = folder / f"{stem}_{k}.npz"
        path.write_bytes(up.getvalue())
        try:
            data.validate_file(str(path))
        except data.LOAD_ERRORS as exc:
            path.unlink(missing_ok=True)
            ss["_upload_msg"] = ("error", f"Cannot add **{up.name}**: {_upload_reason(exc, path, up.name)}")
        else:
            name = path.stem if path.stem not in data.model_catalog() else f"{path.stem} (uploaded)"
            ss[UPLOADED][name] = str(path)
            state.set("model", name)
            ss["_upload_msg"] = ("success", f"Added **{name}** to the model list.")
    kind, msg = ss.get("_upload_msg", ("info", ""))
    if msg:
        getattr(st, kind)(msg)


def _upload_reason(exc: Exception, path: Path, name: str) -> str:
    """The loader's message about the uploaded file, naming it as the user did (not by its temp path)."""
    text = str(exc).replace(str(path), name)
    for prefix in (f"{name}: ", f"{path.stem}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


# ---------------------------------------------------------------------------- output helpers
def figure(fig, name: str, key: str | None = None) -> None:
    """st.plotly_chart with the PNG/SVG download button configured."""
    st.plotly_chart(fig, config=plot_config(name, state.get("fmt")), key=key)


def csv_download(df, name: str, key: str, label: str = "Download table (CSV)") -> None:
    """A CSV download button; ``df`` may be a DataFrame or a callable returning one (built only
    when the button is clicked, for large tables)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "table"
    if callable(df):
        make = df
        payload = lambda: make().to_csv(index=False).encode("utf-8")  # noqa: E731
    else:
        payload = df.to_csv(index=False).encode("utf-8")
    st.download_button(label, payload, file_name=f"{safe}.csv", mime="text/csv", key=key, on_click="ignore",
                       icon=":material/download:")


CHOICE_COLUMNS = {
    "confidence": st.column_config.NumberColumn(format="%.4f"),
    "coverage": st.column_config.NumberColumn(format="%.3f"),
}
