"""Streamlit pieces shared by the pages: the sidebar, error handling, downloads, figures."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import streamlit as st

from hsc_core import config
from hsc_core.core.protocol import PROTOCOL_TEXT
from hsc_core.core.risk import Loss
from hsc_core.core.validation import clip
from hsc_core.evaluation import to_csv
from hsc_core.report.figures import ExportContext, export_name, titled

from . import data, state
from .plots import plot_config

UPLOADED = "_uploaded_models"  # name → path of .npz files uploaded in this session
ENTRY_FLAG = "_entered_via_app"


# ---------------------------------------------------------------------------- entry point
def mark_entry() -> None:
    """Called by app.py right before it runs the selected page."""
    st.session_state[ENTRY_FLAG] = True


def ensure_entrypoint() -> None:
    """First line of every page: inside app.py's navigation (which marks the run right before it
    runs the page) do nothing; when the page file is the main script itself (``streamlit run
    app_pages/explorer.py``, or ``AppTest.from_file`` on a page in the tests) do app.py's setup
    here, without the navigation, so the page still has its sidebar, state and URL.

    The pages live in ``app_pages/``, not ``pages/``, so Streamlit never runs a page file alone
    through its legacy "pages/ folder" mode: a deep link such as ``/explorer`` always runs app.py.
    """
    data.track_page(sys._getframe(1).f_globals.get("__file__", "page"), sys._getframe(1).f_globals)
    if st.session_state.pop(ENTRY_FLAG, False):
        return
    st.set_page_config(page_title="Hierarchical Selective Classification", layout="wide")
    state.init_state()
    sidebar()
    # Standing in for app.py's write, which this run does not reach: there is no end-of-run hook,
    # so what the page settles later reaches the URL when its fragment ends (state.fragment).
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
            f"Unknown model **{plain(clip(missing))}**: no such file in the cached-logits folder "
            "(files uploaded in another browser session are not shared)."
            + (f" Showing **{plain(shown)}** instead; available: {plain(', '.join(cat))}." if shown else "")
        )
    ignored = ss.get(state.URL_IGNORED)
    if ignored:
        st.warning("Ignored invalid link parameters (defaults used): " + "; ".join(
            f"**{plain(clip(key))}** = {plain(clip(value))} (must be {plain(accepts)})"
            for key, value, accepts in ignored))


def no_models_message() -> None:
    st.warning(
        "No cached logits found in the cached-logits folder. Add `.npz` files there "
        f"(set `{config.CACHED_LOGITS_DIR}` to use another folder) or upload one in the sidebar."
    )


def require_eval_set(ts: bool | None = None) -> data.EvalSet:
    """The current model's evaluation samples, or an in-page st.error and st.stop()."""
    name, location = data.shifted_model(*current_model(), state.get("shift"))
    if name is None or location is None:
        no_models_message()
        st.stop()
    try:
        return data.eval_set(name, location, state.get("subset"), state.get("ts") if ts is None else ts)
    except data.LOAD_ERRORS as exc:
        show_load_error(name, exc)
        st.stop()


def curve_set_or_stop(es: data.EvalSet, loss: Loss = "01", dec: int | None = None) -> data.CurveSet:
    try:
        return data.curve_set(es, loss, dec)
    except data.LOAD_ERRORS as exc:
        show_load_error(es.model, exc)
        st.stop()


def show_load_error(name: str, exc: Exception) -> None:
    reason = _upload_reason(exc, name)  # the name once, in bold in front
    if isinstance(exc, data.UnknownDatasetError):  # not a fault: the file just does not say its data set
        st.info(f"**{plain(clip(name))}**: {plain(reason[:1].upper() + reason[1:])}.", icon="👈")
        return
    st.error(f"Cannot use model **{plain(clip(name))}**: {plain(reason)}")
    st.caption("The other models still work: pick one in the sidebar.")


def eval_caption(es: data.EvalSet) -> str:
    parts = [f"**{plain(es.model)}**", f"{es.n:,} samples"]
    if es.subset != data.ALL:
        parts.append(f"subset *{plain(es.subset)}*")
    if es.ts:
        parts.append(f"temperature scaling T = {es.temperature:.3f} (fitted on the {es.n_cal:,}-sample calibration "
                     "split)")
    else:
        parts.append("no temperature scaling")
    parts.append("evaluation split (90 %)")
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
                st.caption("No `.npz` files in the cached-logits folder.")
            else:
                state.bind(st.selectbox, "Model (cached logits)", "model", scope="sb", options=list(cat),
                           help="Every .npz in the cached-logits folder, plus files you upload.")
                name, location = current_model()
        bundle = None
        if location is not None:
            try:
                bundle = data.load_bundle(location)
            except data.LOAD_ERRORS as exc:
                st.error(f"{plain(name)}: {plain(public_message(exc))}")
        if bundle is not None:
            assert name is not None and location is not None  # a bundle is loaded only for the picked model
            dataset_picker(name, location, bundle)
        with st.expander("Add a data set (hierarchy + class list)"):
            dataset_upload_widget()
        synthetic = config.synthetic_samples()
        if synthetic is not None:
            st.warning(f"Synthetic data ({config.SYNTHETIC}={synthetic}): for benchmarks and demos only.")
        if bundle is not None:
            options = data.subset_options(bundle)
            if state.get("subset") not in options:
                state.set("subset", data.ALL)
            state.bind(st.selectbox, "Samples", "subset", scope="sb", options=list(options),
                       format_func=options.get, help="Data subset by source tag.")
            shift_picker(name)
        state.bind(st.toggle, "Temperature scaling", "ts", scope="sb",
                   help=PROTOCOL_TEXT)
        if state.get("ts") and bundle is not None:
            assert location is not None  # as above
            try:
                t, n_fit = data.temperature(location, state.get("subset"), name)
                st.caption(f"T = **{t:.3f}**, fitted on the 10 % calibration split ({n_fit:,} samples). "
                           "Every page, TS on or off, evaluates the other 90 %.")
            except data.DataError:
                pass  # no (fitting) data set yet: the picker above and the page say so
            except data.LOAD_ERRORS as exc:
                st.error(plain(public_message(exc)))
        state.bind(st.radio, "Figure download format", "fmt", scope="sb", options=["png", "svg"],
                   horizontal=True, format_func=str.upper,
                   help="The camera icon in each figure's toolbar saves it in this format.")


def shift_picker(model: str | None) -> None:
    """Clean images, or the same images under a corruption (cached_logits/shifted/), when the model has any."""
    shifts = data.shift_catalog(model)
    if not shifts:
        if state.get("shift") != data.CLEAN:
            state.set("shift", data.CLEAN)
        related = [m for m in catalog() if model and m.startswith(f"{model}__") and data.shift_catalog(m)]
        if related:  # e.g. the corrupted images were run in bf16: their clean reference is the bf16 variant
            st.caption(f"Corrupted copies of the images are cached for **{plain(related[0])}**: pick it to compare.")
        return
    options = [data.CLEAN, *shifts]
    if state.get("shift") not in options:
        state.set("shift", data.CLEAN)
    state.bind(st.selectbox, "Images", "shift", scope="sb", options=options, format_func=data.shift_label,
               help="The same images under an ImageNet-C corruption (Hendrycks & Dietterich 2019), cached by "
                    "`hsc cache-logits --corruption NAME --severity S`: the analysis pages show that shifted data.")


def shift_overlays(scope: str) -> dict[str, str]:
    """A picker of the current model's shifted data to overlay on a page's clean curves;
    returns name (the file's stem) → location of each chosen one."""
    model, _ = current_model()
    shifts = data.shift_catalog(model)
    if not shifts:
        return {}
    chosen = [k for k in state.get("shifts") if k in shifts]
    if chosen != state.get("shifts"):
        state.set("shifts", chosen)
    picked = state.bind(st.multiselect, f"Overlay {model} on corrupted images", "shifts", scope=scope,
                        options=list(shifts), format_func=data.shift_label,
                        help="Curves of the same model on the same images under ImageNet-C corruptions.")
    return {Path(shifts[k]).stem: shifts[k] for k in picked}


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


def _upload_widget() -> None:
    """Validate an uploaded .npz in memory and keep it in this session only (never on disk)."""
    ss = st.session_state
    limit_mb = max(1, -(-data.max_upload_bytes() // 1_000_000))  # whole MB, rounded up
    up = st.file_uploader("Logits file", type=["npz"], key="_npz_upload", max_upload_size=limit_mb,
                          help=f"Validated like the cached files (arrays up to {limit_mb} MB inflated); it stays in "
                               "the model list for this browser session only.")
    if up is None:
        ss.pop("_upload_msg", None)
        return
    if ss.get("_upload_id") != up.file_id:
        ss["_upload_id"] = up.file_id
        try:
            bundle = data.validate_upload(up.getvalue(), up.name)
        except data.LOAD_ERRORS as exc:
            ss["_upload_msg"] = ("error", f"Cannot add **{plain(clip(up.name))}**: "
                                          f"{plain(_upload_reason(exc, up.name))}")
        else:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", bundle.name).strip("._") or "uploaded"
            name, k = stem, 1
            while name in catalog():  # never shadow a cached model or an earlier upload
                k += 1
                name = f"{stem} (uploaded{'' if k == 2 else f' {k - 1}'})"
            ss[UPLOADED][name] = data.keep_upload(bundle, up)
            state.set("model", name)
            ss["_upload_msg"] = ("success", f"Added **{plain(name)}** to the model list.")
    kind, msg = ss.get("_upload_msg", ("info", ""))
    if msg:
        getattr(st, kind)(msg)


def _upload_reason(exc: Exception, name: str) -> str:
    """The loader's message about a model or an uploaded file, without repeating its name in front."""
    text = public_message(exc)
    for prefix in (f"{name}: ", f"{clip(name)}: ", f"{Path(name).stem}: ", f"{Path(name).name}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/:'\"]+/)+")


def public_message(exc: Exception | str) -> str:
    """An error message for the page: any absolute server path is cut to its file name."""
    return _ABSOLUTE_PATH.sub("", str(exc))


# ---------------------------------------------------------------------------- output helpers
def export_context(es: data.EvalSet, theta: float | None = None,
                   ts: bool | None | Literal["es"] = "es") -> ExportContext:
    """What a figure/table of ``es`` shows (model, data set, subset, TS, θ), for self-describing exports.
    ``ts=None`` for an export that holds both TS settings."""
    scaled = es.ts if ts == "es" else ts
    return ExportContext(model=es.model, dataset=getattr(getattr(es, "dataset", None), "name", ""), subset=es.subset,
                         ts=scaled, temperature=es.temperature if scaled else None, theta=theta, n_samples=es.n)


def figure(fig, name: str, key: str | None = None, context: ExportContext | None = None,
           title: str | None = None, width: Literal["stretch", "content"] = "stretch",
           height: int | None = None) -> None:
    """st.plotly_chart with the PNG/SVG download button configured. With ``context`` the file name
    (and, with ``title``, the figure's title line) say which model, data set, subset, TS and θ.
    ``width="content"`` keeps a figure that sets its own width (the tree) at that width or less.
    ``height`` (e.g. ``fit_height``): the whole figure's height, title included; in presenter mode
    such a figure (built fresh for this call, never a cached one) also gets the presenter type size."""
    if title is not None:
        titled(fig, title, context)
    if height is not None:
        fig.update_layout(height=int(height))
        if presenter():
            size = font_size()
            fig.update_layout(font=dict(size=size), legend=dict(font=dict(size=int(size * 0.8))))
            if title is not None:
                fig.update_layout(title=dict(font=dict(size=size)))
    st.plotly_chart(fig, config=plot_config(export_name(name, context), state.get("fmt")), key=key, width=width)


def sample_image(es: data.EvalSet, sample: str, width: int | Literal["stretch"] = "stretch") -> None:
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


CHOICE_COLUMNS = {
    "confidence": st.column_config.NumberColumn(format="%.4f"),
    "coverage": st.column_config.NumberColumn(format="%.3f"),
}


# ---------------------------------------------------------------------------- data sets
# Characters that can start markdown/HTML syntax anywhere in a line: emphasis, code, links and
# images (all need "["), HTML and autolinks ("<"), entities, math, strike-through, Streamlit's
# ":red[…]" / ":emoji:" (broken by a word joiner after ":"). "_" between two letters or digits cannot
# (CommonMark's intraword rule), so names like alpha_net and plain prose stay readable.
_MARKDOWN_CHARS = re.compile(r"[\\`*{}\[\]<>|~$&]|(?<![^\W_])_|_(?![^\W_])")
# GFM turns bare URLs and e-mail addresses into links, and Streamlit ":smile:" into emoji, even
# when every character is escaped: an invisible word joiner after ":", "www" and "@" keeps them text.
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)|(?<=:)(?=\w)")
_LINE_START = re.compile(r"^(?:(\d+)(?=[.)])|(?=[#+\-=]))")  # lists, headings, rules at the start


def plain(text: object) -> str:
    """User-provided text (model and file names, sample ids, source tags, link values) for a
    markdown body, shown literally: one line, markdown/HTML syntax escaped, no autolinks."""
    one_line = _AUTOLINK.sub("\u2060", " ".join(str(text).split()))
    escaped = _MARKDOWN_CHARS.sub(lambda m: "\\" + m.group(0), one_line)
    return _LINE_START.sub(lambda m: (m.group(1) or "") + "\\", escaped, count=1)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 class``, ``1,000 classes``: the number with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else (plural or noun + ('es' if noun.endswith(('s', 'sh', 'ch', 'x')) else 's'))}"


def _dataset_classes(name: str) -> int | None:
    try:
        return int(data.get_dataset(name).hierarchy.n_leaves)
    except data.LOAD_ERRORS:
        return None


def dataset_picker(name: str, location: str, bundle) -> None:
    """The model's data set: named by its manifest, or picked here (kept for this session)."""
    try:
        known = data.manifest_dataset(location)
    except data.LOAD_ERRORS:
        return
    if known is not None:
        st.caption(f"Data set: **{plain(known)}** (named by the file)")
        state.set("dataset", None)  # the file says it: a link needs no `dataset`
        return
    choices = st.session_state.setdefault(data.DATASET_CHOICES, {})
    _apply_link_dataset(choices, location, bundle.n_classes)
    # Only data sets whose class count matches the logits can be this model's: the others are not offered.
    fitting = [ds for ds in data.dataset_catalog() if _dataset_classes(ds) == bundle.n_classes]
    labels = {ds: f"{ds} ({count(bundle.n_classes, 'class')})" for ds in fitting}
    options = list(labels)
    if not options:
        st.warning(f"No data set has {count(bundle.n_classes, 'class')} like the logits of {plain(name)}: add "
                   "its hierarchy and class list under *Add a data set* below.")
    current = choices.get(location)
    picked = st.selectbox(
        f"Data set of {name} ({count(bundle.n_classes, 'class')})", options,
        index=options.index(current) if current in options else None,
        format_func=cast(Callable[[Any], str], labels.get),  # every option has a label
        placeholder="Pick the data set of these logits…", key=f"_dataset_pick.{location}",
        help="The file's manifest has no `dataset_id`, so say which hierarchy and class list its logits use. "
             "Add your own below, or as a folder in the data-set folder.")
    if picked is not None:
        choices[location] = picked
    state.set("dataset", choices.get(location))  # mirrored in the URL, so a shared link carries it
    ignored = st.session_state.get("_url_dataset_msg")
    if ignored is not None and ignored[0] == location and picked is None:  # until the user picks one
        st.warning(ignored[1])


def _apply_link_dataset(choices: dict, location: str, n_classes: int) -> None:
    """Once per session: the link's ``dataset`` becomes the pick for the current model if that data
    set exists and has as many classes as the logits; otherwise say why it was ignored."""
    ss = st.session_state
    wanted = state.from_url("dataset")
    if wanted is None or ss.get("_url_dataset_done"):
        return
    ss["_url_dataset_done"] = True
    if state.get("dataset") != wanted:  # refused by the setting's own check (reported with the link's notices)
        return
    reason: str | None
    if wanted not in data.dataset_catalog():
        reason = "there is no data set with this name"
    else:
        try:
            n = int(data.get_dataset(wanted).hierarchy.n_leaves)
        except data.LOAD_ERRORS as exc:
            reason = public_message(exc)
        else:
            reason = None if n == n_classes else f"it has {count(n, 'class')}, the logits have {n_classes:,}"
    if reason is None:
        choices[location] = wanted
    else:
        ss["_url_dataset_msg"] = (location, f"The link's data set **{plain(wanted)}** was ignored: {plain(reason)}.")


def _add_dataset() -> None:
    """The "Add data set" button's callback: runs before the script, so the new data set is in the
    sidebar's pickers in the same run."""
    ss = st.session_state
    name, tree, classes = ss.get("_ds_name", ""), ss.get("_ds_tree"), ss.get("_ds_classes")
    if tree is None or not name:
        return
    try:
        added = data.add_session_dataset(name, tree.name, tree.getvalue(),
                                         None if classes is None else classes.getvalue(),
                                         header=_HEADER_CHOICES.get(ss.get("_ds_header", "detect")))
    except data.LOAD_ERRORS as exc:
        ss["_ds_msg"] = ("error", f"Cannot add data set {plain(name)}: {plain(public_message(exc))}")
    else:  # kept in this session only: the parsed tree, never a file
        ss.setdefault(data.SESSION_DATASET_OBJECTS, {})[added.location] = added.dataset
        ss.setdefault(data.SESSION_DATASETS, {})[added.name] = added.location
        h = added.dataset.hierarchy
        done = (f"Added data set **{plain(added.name)}** "
                f"({count(h.n_leaves, 'class')}, {count(h.n_nodes, 'node')}) for this browser session.")
        # What the reader assumed (a first row taken as column names) is shown, not buried.
        redo = "If that row is a class, set **First row** to *a class (no header)* and add the file again."
        ss["_ds_msg"] = ("warning", " ".join([done, *(plain(n) for n in added.notes), redo])) if added.notes \
            else ("success", done)


# The "First row" setting of a CSV hierarchy → load_hierarchy's header argument.
_HEADER_CHOICES = {"detect": None, "header": True, "data": False}
_HEADER_LABELS = {"detect": "detect", "header": "column names", "data": "a class (no header)"}


def dataset_upload_widget() -> None:
    """Upload a hierarchy (+ class list): validated with the library, kept for this session."""
    st.caption("Or drop a folder `<name>/` with `hierarchy.*` (+ `classes.txt`, `images/`) into the "
               "`datasets/` folder next to `cached_logits/` (or the folder `HSC_DATASETS_DIR` names).")
    name = st.text_input("Name", key="_ds_name", max_chars=64, placeholder="e.g. my_tree")
    tree = st.file_uploader("Hierarchy file", key="_ds_tree", type=list(data.HIERARCHY_SUFFIXES),
                            help="Edge list (CSV/TSV parent,child), levels CSV (coarse … class), JSON or Newick.")
    st.file_uploader("Class list (optional, one class per line, in logit order)", key="_ds_classes", type=["txt"])
    st.radio("First row of a CSV file", list(_HEADER_CHOICES), key="_ds_header", horizontal=True,
             format_func=_HEADER_LABELS.get,
             help="Whether the first row holds column names (`parent,child`, `superclass,class`) or is "
                  "already part of the tree. Detect: column names when its names occur nowhere else, "
                  "and the message says so.")
    st.button("Add data set", key="_ds_add", disabled=tree is None or not name, on_click=_add_dataset)
    kind, msg = st.session_state.get("_ds_msg", ("info", ""))
    if msg:
        getattr(st, kind)(msg)


# ---------------------------------------------------------------------------- first paint
WARM = "_plotly_warm"


def warm_plotly() -> None:
    """In a session's first run only: an invisible, empty Plotly chart sent before anything else,
    so the browser fetches and starts plotly.js (≈ 4.7 MB, seconds on a slow machine) while the
    server still computes the page; a shared link's chart then draws as soon as it arrives."""
    if st.session_state.get(WARM):
        return
    st.session_state[WARM] = True
    import plotly.graph_objects as go

    with st.container(key="hsc_plotly_warm", height=1, border=False):
        st.html("<style>.st-key-hsc_plotly_warm { display: none; }</style>")
        st.plotly_chart(go.Figure(layout=dict(width=10, height=10)), config={"staticPlot": True},
                        key="hsc_plotly_warm_chart")


# ---------------------------------------------------------------------------- teaching: presenter mode, θ sweep
def presenter() -> bool:
    return bool(state.get("presenter"))


# Presenter mode is laid out for a 1280×720 screen and scaled up to the real one: the page's type
# through CSS (1 rem = 1.5 % of the width or 2.67 % of the height, whichever is smaller: 19.2 px at
# 1280×720, 28.8 px at 1920×1080), the figures through ``presenter_scale`` (the same ratio, from the
# browser's viewport as reported by ``viewport_probe``), so text and charts grow together.
DESIGN_VIEWPORT = (1280, 720)
VIEWPORT_KEY = "_viewport"
DESIGN_REM_PX = 19.2


def viewport() -> tuple[int, int]:
    """The browser window's (width, height) in CSS pixels, as last reported by ``viewport_probe``;
    the design size until the browser has reported one."""
    size = getattr(st.session_state.get(VIEWPORT_KEY), "size", None)
    try:
        w, h = (int(v) for v in str(size).split("x"))
    except ValueError:
        return DESIGN_VIEWPORT
    return (w, h) if 200 <= w <= 10_000 and 200 <= h <= 10_000 else DESIGN_VIEWPORT


def presenter_scale() -> float:
    """How much bigger than the 1280×720 design the screen is (1 to 2.5, in steps of 1/8, so a
    window resized by a few pixels does not rebuild the figures)."""
    w, h = viewport()
    raw = min(w / DESIGN_VIEWPORT[0], h / DESIGN_VIEWPORT[1])
    return float(min(max(1.0, np.floor(raw * 8) / 8), 2.5))


def font_size() -> int:
    """Figure font size: projector-sized in presenter mode, growing with the screen."""
    from hsc_core.report import style

    return int(round(style.PRESENTER_FONT_SIZE * presenter_scale())) if presenter() else style.BASE_FONT_SIZE


def fit_height(reserved_rem: float, *, normal: int | None = None, least: int = 260) -> int | None:
    """A chart height (px) that leaves ``reserved_rem`` rem of the screen for the page's title,
    controls and text in presenter mode, so the chart's axis title stays above the fold; ``normal``
    outside presenter mode (None: the figure's own height)."""
    if not presenter():
        return normal
    _, h = viewport()
    rem = DESIGN_REM_PX * presenter_scale()
    return int(max(least * presenter_scale(), h - reserved_rem * rem))


NORMAL_MAIN_PX = 750  # the main column at 1280 px with the sidebar open (normal mode reports no viewport)


def fit_width(fraction: float = 1.0) -> int:
    """The pixels a chart in a column holding ``fraction`` of the page's main area can use: in
    presenter mode from the browser's width, otherwise the 1280-pixel layout with the sidebar open."""
    if not presenter():
        return int(NORMAL_MAIN_PX * fraction)
    w, _ = viewport()
    main = w - 4.4 * DESIGN_REM_PX * presenter_scale()  # the presenter CSS's side padding
    return int(main * fraction)


PRESENTER_CSS = """
html { font-size: clamp(16px, min(1.5vw, 2.667vh), 48px); }
[data-testid="stMainBlockContainer"] { padding: 2.6rem 2.2rem 0.5rem 2.2rem; max-width: 100%; }
[data-testid="stMainBlockContainer"] h1 { font-size: 1.45rem; padding: 0 0 0.1rem 0; }
[data-testid="stMainBlockContainer"] h2, [data-testid="stMainBlockContainer"] h3 { font-size: 1.15rem;
  padding: 0.1rem 0 0.2rem 0; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.55rem; }
[data-testid="stHeader"] { background: transparent; }
"""
# While a chart sweeps θ in the browser, the page's θ control and θ text show a stale θ: they are
# hidden until the server has caught up (``sweep_sync`` toggles the class), so one θ is on screen.
# The descendants too: Streamlit's element containers set their own visibility, which would show
# a stale θ's text inside a hidden box.
SWEEP_CSS = """
.hsc-stale, .hsc-stale * { visibility: hidden !important; }
"""


# Until the browser has reported its size, presenter mode's charts are drawn for the 1280×720
# design and redrawn at the real size a moment later: they stay invisible meanwhile, so no chart
# jumps from one size to the other (after 4 s they show anyway, should the report never come).
# In the run a report (or a resize) starts, the previous run's charts, drawn at the old size,
# stay hidden until the new ones replace them.
UNSIZED_CSS = """
@keyframes hsc-reveal { to { visibility: visible; } }
[data-testid="stPlotlyChart"] { visibility: hidden; animation: hsc-reveal 0s linear 4s forwards; }
"""
RESIZED_CSS = """
[data-stale="true"] [data-testid="stPlotlyChart"] { visibility: hidden; }
"""
VIEWPORT_FRESH = "_viewport_fresh"


def viewport_known() -> bool:
    """Has the browser reported its window size (``viewport_probe``) in this session?"""
    return getattr(st.session_state.get(VIEWPORT_KEY), "size", None) is not None


def presenter_style() -> None:
    """Bigger type and less padding, so a slider and its chart share a 1280×720 screen; the type
    grows with the screen. Also the sweep's "stale θ" style (every mode)."""
    resized = st.session_state.pop(VIEWPORT_FRESH, False)
    sizing = "" if not presenter() else UNSIZED_CSS if not viewport_known() else RESIZED_CSS if resized else ""
    st.html(f"<style>{SWEEP_CSS}{PRESENTER_CSS if presenter() else ''}{sizing}</style>")
    if presenter():
        viewport_probe()


_VIEWPORT_JS = """
export default function (component) {
  const { data, setStateValue } = component;
  const report = () => {
    const v = `${window.innerWidth}x${window.innerHeight}`;
    if (v !== data.known) setStateValue("size", v);
  };
  let timer = null;
  const onResize = () => { clearTimeout(timer); timer = setTimeout(report, 300); };
  window.addEventListener("resize", onResize);
  report();
  return () => { clearTimeout(timer); window.removeEventListener("resize", onResize); };
}
"""
_viewport_component = None


def viewport_probe() -> None:
    """Report the browser window's size to the server (``viewport``): once when presenter mode
    starts (the page reruns; its charts are hidden until then, ``UNSIZED_CSS``), then on resize.
    A changed size reruns the page at the new scale."""
    global _viewport_component
    if _viewport_component is None:
        _viewport_component = st.components.v2.component("hsc_viewport", js=_VIEWPORT_JS)
    # Nothing known yet: the browser reports at once (also a 1280×720 one), which shows the charts.
    known = getattr(st.session_state.get(VIEWPORT_KEY), "size", None) or ""
    _viewport_component(key=VIEWPORT_KEY, data={"known": known}, on_size_change=_size_reported, height=0)


def _size_reported() -> None:
    st.session_state[VIEWPORT_FRESH] = True


def controls(label: str = "Controls"):
    """Where a page's pickers go: inline normally, folded into an expander in presenter mode."""
    return st.expander(label, expanded=False) if presenter() else st.container()


# Plotly's own slider and play button move θ in the browser; this listener sends the θ where the
# sweep comes to rest (no new frame for ``delay`` ms) to the server, so the Streamlit slider
# follows on release. While the chart is ahead of the server, the page's θ slider and θ text
# (containers keyed ``<chart>_slider`` / ``<chart>_follow``) are hidden, so only one θ is ever on
# screen. Dragging the page's slider moves the chart with the thumb (its θ text hides until the
# release reaches the server). It also makes the chart focusable: ←/→ (±0.01), Page Up/Down
# (±0.1), Home/End animate to that frame (Plotly's slider moves with it). The camera button
# exports the figure without the sweep controls, with a title.
_SWEEP_JS = """
export default function (component) {
  const { data, setTriggerValue } = component;
  const selector = `.st-key-${data.chart} .js-plotly-plot`;
  const stale = (what, on) => document.querySelectorAll(what).forEach((el) => el.classList.toggle("hsc-stale", on));
  const follow = `.st-key-${data.chart}_follow`, pageSlider = `.st-key-${data.chart}_slider`;
  // This function runs again on every rerun: listeners are attached once per chart element and
  // read the latest server θ and trigger from it, so no stale θ is ever sent back.
  const show = (gd, k) => {
    const sl = gd._fullLayout.sliders[0];
    k = Math.max(0, Math.min(sl.steps.length - 1, k));
    if (window.Plotly && window.Plotly.animate) {
      window.Plotly.animate(gd, [sl.steps[k].value], { mode: "immediate", frame: { duration: 0, redraw: false },
                                                      transition: { duration: 0 } });
    }
  };
  const frameOf = (gd, v) => gd._fullLayout.sliders[0].steps.findIndex((s) => s.value === v);
  const exportImage = (gd, st) => {
    const fmt = (st.image && st.image.format) || "png";
    const title = st.image && st.image.title;
    const head = title ? 72 : 0;  // two title lines: what it is, and which model, data set, TS, θ
    const top = (gd.layout.margin && gd.layout.margin.t) || 0;
    // One font the export measures and draws alike (a web font still loading cut the legend's text).
    const font = Object.assign({}, gd.layout.font, { family: "Arial, Helvetica, sans-serif" });
    const layout = Object.assign({}, gd.layout, { sliders: [], updatemenus: [], font: font,
      margin: Object.assign({}, gd.layout.margin, { t: Math.max(20, top - st.controls) + head }) });
    if (gd.layout.legend) layout.legend = Object.assign({}, gd.layout.legend, { font: Object.assign({},
      gd.layout.legend.font, { family: font.family }) });
    if (title) layout.title = { text: title, x: 0.01, xanchor: "left", y: 0.995, yanchor: "top", yref: "container",
                                pad: { t: 12 }, font: { size: 16, family: font.family } };
    window.Plotly.downloadImage({ data: gd.data, layout: layout }, {
      format: fmt, filename: (st.image && st.image.filename) || "figure", scale: 2,
      width: gd._fullLayout.width, height: gd._fullLayout.height - st.controls + head });
  };
  const attach = (gd) => {
    const st = { timer: null };
    gd.__hscSweep = st;
    // Every frame shown (play, drag, key) restarts the timer: θ is sent once the sweep rests.
    gd.on("plotly_animatingframe", (e) => {
      clearTimeout(st.timer);
      if (e.name === st.fromPage) return;  // following the page's own slider
      if (e.name === st.server && !st.userMoved) return;  // the server's own θ, shown by sync()
      st.userMoved = true;  // a sweep in the browser: sync() leaves the chart alone until it rests
      stale(`${follow}, ${pageSlider}`, true);
      st.timer = setTimeout(() => {
        const v = parseFloat(e.name);
        if (e.name === st.server) { st.userMoved = false; stale(`${follow}, ${pageSlider}`, false); }
        else if (Number.isFinite(v)) st.send(v);
      }, st.delay);
    });
    gd.setAttribute("tabindex", "0");
    gd.setAttribute("aria-label", "θ sweep: arrow keys, Page Up/Down, Home and End move θ");
    gd.addEventListener("keydown", (ev) => {
      const sl = gd._fullLayout && gd._fullLayout.sliders && gd._fullLayout.sliders[0];
      if (!sl) return;
      const k = sl.active, n = sl.steps.length;
      const to = { ArrowRight: k + 1, ArrowUp: k + 1, ArrowLeft: k - 1, ArrowDown: k - 1,
                   PageUp: k + 10, PageDown: k - 10, Home: 0, End: n - 1 }[ev.key];
      if (to === undefined) return;
      ev.preventDefault();
      show(gd, to);
    });
    // The camera button: the figure without Play and its slider, titled (capture phase, before Plotly's own).
    gd.addEventListener("click", (ev) => {
      const btn = ev.target.closest && ev.target.closest(
        '.modebar-btn[data-title^="Download plot"]');
      if (!btn || !gd.contains(btn)) return;
      ev.preventDefault(); ev.stopPropagation();
      exportImage(gd, st);
    }, true);
    return st;
  };
  // The page slider's thumb label changes while it is dragged: the chart follows it at once.
  const watchPageSlider = (gd, st) => {
    const thumb = document.querySelector(`${pageSlider} [data-testid="stSliderThumbValue"]`);
    if (!thumb || thumb === st.thumb) return;
    st.thumb = thumb;
    if (st.thumbObs) st.thumbObs.disconnect();
    st.thumbObs = new MutationObserver(() => {
      const v = parseFloat(thumb.textContent);
      if (!Number.isFinite(v)) return;
      const name = v.toFixed(2), k = frameOf(gd, name);
      if (k < 0 || name === st.server) { stale(follow, false); return; }
      st.fromPage = name;
      stale(follow, true);
      show(gd, k);
    });
    st.thumbObs.observe(thumb, { childList: true, characterData: true, subtree: true });
  };
  // Only the newest call of this function acts (an earlier call's timer may still be running).
  const gens = (window.__hscSweepGen = window.__hscSweepGen || {});
  const gen = (gens[data.chart] = (gens[data.chart] || 0) + 1);
  let poll = null;
  const sync = () => {
    if (gens[data.chart] !== gen) { clearInterval(poll); return false; }
    const gd = document.querySelector(selector);
    if (!gd || typeof gd.on !== "function" || !gd._fullLayout || !gd._fullLayout.sliders) return false;
    const st = gd.__hscSweep || attach(gd);
    st.delay = data.delay;
    st.image = data.image;
    st.controls = data.controls;
    st.send = (v) => setTriggerValue("theta", v);
    if (st.server !== data.theta) {  // the server's θ changed
      st.server = data.theta;
      st.userMoved = false;
      st.fromPage = null;
    }
    watchPageSlider(gd, st);
    // Show the server's frame whenever the chart is not at it and the user is not sweeping: also
    // after Streamlit redraws the (cached) figure at its first θ, or before Plotly was ready.
    const sl = gd._fullLayout.sliders[0];
    const k = frameOf(gd, data.theta);
    if (!st.userMoved && !st.fromPage && k >= 0 && k !== sl.active) show(gd, k);
    if (!st.userMoved && (k === sl.active || k < 0)) stale(`${follow}, ${pageSlider}`, false);
    return true;
  };
  poll = setInterval(sync, 250);
  sync();
  return () => clearInterval(poll);
}
"""
_sweep_component = None


def sweep_sync(chart_key: str, theta: float, on_theta: Callable[[float], None], delay_ms: int = 600,
               *, image: str = "figure", title: str | None = None, context: ExportContext | None = None) -> None:
    """Mount the θ-sweep listener for the Plotly chart rendered with ``key=chart_key``: the chart
    shows the server's ``theta`` (its frame), and ``on_theta(θ)`` runs (as a callback) when an
    in-browser sweep comes to rest at θ. Put the page's θ slider in ``st.container(key=f"{chart_key}_slider")``
    and its θ-dependent text in ``…_follow`` (``theta_box``): they hide while the chart is ahead.
    ``image``/``title``/``context``: the camera button's file name and the exported image's title."""
    global _sweep_component
    if _sweep_component is None:
        _sweep_component = st.components.v2.component("hsc_theta_sweep", js=_SWEEP_JS)
    key = f"_sweep_{chart_key}"

    def follow() -> None:
        value = getattr(st.session_state.get(key), "theta", None)
        if value is not None:
            on_theta(float(value))

    from hsc_core.report import style

    head = "" if title is None else style.plain(title, None) + (
        f"<br><span style='font-size:12px'>{style.plain(context.describe(style.NAME_CHARS), None)}</span>"
        if context is not None else "")
    fmt = state.get("fmt")
    controls = int(round(30 + 2.2 * font_size()))  # the sweep controls' height (tree_figure.add_theta_sweep)
    _sweep_component(key=key, data={"chart": chart_key, "delay": int(delay_ms), "theta": f"{theta:.2f}",
                                    "controls": controls,
                                    "image": {"format": fmt if fmt in ("png", "svg") else "png",
                                              "filename": export_name(image, context), "title": head}},
                     on_theta_change=follow,
                     height=0)


def theta_box(chart_key: str, part: Literal["slider", "follow"]):
    """The container of a swept chart's page θ slider (``"slider"``) or θ-dependent text
    (``"follow"``): ``sweep_sync`` hides it while the chart shows a θ the server has not caught up with."""
    return st.container(key=f"{chart_key}_{part}")
