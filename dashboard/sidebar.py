"""The sidebar and the model context every page reads: the model picker with its .npz upload, the
model's data set (named by the file, picked, or uploaded), subset, shifted images, temperature
scaling and figure format; the current model and its evaluation (or an in-page error); the
notices about what a link asked for and did not get."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import streamlit as st

from hsc_core import config
from hsc_core.core.protocol import PROTOCOL_TEXT, calibration_mask
from hsc_core.core.risk import Loss
from hsc_core.core.validation import clip
from hsc_core.evaluation import subsets

from . import catalog as cat_
from . import evaluations, state, uploads
from . import session_keys as keys
from .widgets import count, plain, public_message

UPLOADED = keys.UPLOADED_MODELS  # name → location of .npz files uploaded in this session

# ---------------------------------------------------------------------------- model context
def catalog() -> dict[str, str]:
    return cat_.model_catalog(st.session_state.get(UPLOADED, {}))


def current_model() -> tuple[str | None, str | None]:
    cat = catalog()
    name = state.get("model")
    if name not in cat:
        if name is not None:
            st.session_state[state.MISSING_MODEL] = name  # explained in the page by notices()
        name = cat_.default_model(cat)
        state.set("model", name)
    return name, (cat.get(name) if name else None)


def notices() -> None:
    """In the page: why the view differs from what the link (or a vanished file) asked for. One block in
    every run, however many notices it holds, so the page's elements keep their places from run to run."""
    with st.container():
        _notices()


def _notices() -> None:
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
    for note in ss.get(state.URL_CAPPED) or ():
        st.info(note)  # built from the setting's key and counts only
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


def require_model_context(ts: bool | None = None) -> evaluations.ModelContext:
    """The current model's evaluation samples, or an in-page st.error and st.stop()."""
    name, location = cat_.shifted_model(*current_model(), state.get("shift"))
    if name is None or location is None:
        no_models_message()
        st.stop()
    try:
        return evaluations.model_context(name, location, state.get("subset"), state.get("ts") if ts is None else ts)
    except cat_.LOAD_ERRORS as exc:
        show_load_error(name, exc)
        st.stop()


def curve_set_or_stop(es: evaluations.ModelContext, loss: Loss = "01", dec: int | None = None) -> evaluations.CurveSet:
    try:
        return evaluations.curve_set(es, loss, dec)
    except cat_.LOAD_ERRORS as exc:
        show_load_error(es.model, exc)
        st.stop()


def show_load_error(name: str, exc: Exception) -> None:
    reason = _upload_reason(exc, name)  # the name once, in bold in front
    if isinstance(exc, cat_.UnknownDatasetError):  # not a fault: the file just does not say its data set
        st.info(f"**{plain(clip(name))}**: {plain(reason[:1].upper() + reason[1:])}.", icon="👈")
        return
    st.error(f"Cannot use model **{plain(clip(name))}**: {plain(reason)}")
    st.caption("The other models still work: pick one in the sidebar.")


def split_counts(bundle, subset: str) -> tuple[int, int]:
    """(samples of ``subset``, of them in the 10 % calibration split that only fits T): the protocol's
    split is drawn on the whole file (``calibration_mask``), so a subset's share is counted."""
    cal = calibration_mask(np.asarray(bundle.labels))
    mask = cat_.subset_mask(bundle, subset) if subset != subsets.ALL else np.ones(cal.size, dtype=bool)
    return int(mask.sum()), int((mask & cal).sum())


def split_words(n: int, n_cal: int) -> str:
    """The sidebar's count in words, so the pages' smaller count (the evaluation split) is no surprise.

    >>> split_words(1894, 189)
    '1,894 images: 189 fit the temperature T (10 % calibration split), 1,705 are evaluated on every page.'
    """
    return (f"{n:,} images: {n_cal:,} fit the temperature T (10 % calibration split), {n - n_cal:,} are evaluated "
            "on every page.")


def eval_caption(es: evaluations.ModelContext) -> str:
    n_all = es.view.n + es.view.evaluation.n_cal  # the sidebar's "Samples" count: both splits
    parts = [f"**{plain(es.model)}**", f"{es.view.n:,} samples (of the {n_all:,} in the sidebar's count)"]
    if es.subset != subsets.ALL:
        parts.append(f"subset *{plain(es.subset)}*")
    if es.view.ts:
        n_cal = es.view.evaluation.n_cal
        parts.append(f"temperature scaling T = {es.view.temperature:.3f} (fitted on the {n_cal:,}-sample calibration "
                     "split)")
    else:
        parts.append("no temperature scaling")
    parts.append("evaluation split (90 %; the other 10 % only fit T)")
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
                bundle = cat_.load_bundle(location)
            except cat_.LOAD_ERRORS as exc:
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
            options = cat_.subset_options(bundle)
            if state.get("subset") not in options:
                state.set("subset", subsets.ALL)
            state.bind(st.selectbox, "Samples", "subset", scope="sb", options=list(options),
                       format_func=options.get, help="Data subset by source tag.")
            with contextlib.suppress(cat_.DataError, ValueError):  # an unknown subset: the page says so
                st.caption(split_words(*split_counts(bundle, state.get("subset"))))
            shift_picker(name)
        state.bind(st.toggle, "Temperature scaling", "ts", scope="sb",
                   help=PROTOCOL_TEXT)
        if state.get("ts") and bundle is not None:
            assert location is not None  # as above
            try:
                t, n_fit = evaluations.temperature(location, state.get("subset"), name)
                st.caption(f"T = **{t:.3f}**, fitted on the 10 % calibration split ({n_fit:,} samples). "
                           "Every page, TS on or off, evaluates the other 90 %.")
            except cat_.DataError:
                pass  # no (fitting) data set yet: the picker above and the page say so
            except cat_.LOAD_ERRORS as exc:
                st.error(plain(public_message(exc)))
        state.bind(st.radio, "Figure download format", "fmt", scope="sb", options=["png", "svg"],
                   horizontal=True, format_func=str.upper,
                   help="The camera icon in each figure's toolbar saves it in this format.")


def shift_picker(model: str | None) -> None:
    """Clean images, or the same images under a corruption (cached_logits/shifted/), when the model has any."""
    shifts = cat_.shift_catalog(model)
    if not shifts:
        if state.get("shift") != cat_.CLEAN:
            state.set("shift", cat_.CLEAN)
        related = [m for m in catalog() if model and m.startswith(f"{model}__") and cat_.shift_catalog(m)]
        if related:  # e.g. the corrupted images were run in bf16: their clean reference is the bf16 variant
            st.caption(f"Corrupted copies of the images are cached for **{plain(related[0])}**: pick it to compare.")
        return
    options = [cat_.CLEAN, *shifts]
    if state.get("shift") not in options:
        state.set("shift", cat_.CLEAN)
    state.bind(st.selectbox, "Images", "shift", scope="sb", options=options, format_func=cat_.shift_label,
               help="The same images under an ImageNet-C corruption (Hendrycks & Dietterich 2019), cached by "
                    "`hsc cache-logits --corruption NAME --severity S`: the analysis pages show that shifted data.")


def shift_overlays(scope: str) -> dict[str, str]:
    """A picker of the current model's shifted data to overlay on a page's clean curves;
    returns name (the file's stem) → location of each chosen one."""
    model, _ = current_model()
    shifts = cat_.shift_catalog(model)
    if not shifts:
        return {}
    chosen = [k for k in state.get("shifts") if k in shifts]
    if chosen != state.get("shifts"):
        state.set("shifts", chosen)
    picked = state.bind(st.multiselect, f"Overlay {model} on corrupted images", "shifts", scope=scope,
                        options=list(shifts), format_func=cat_.shift_label,
                        help="Curves of the same model on the same images under ImageNet-C corruptions.")
    return {Path(shifts[k]).stem: shifts[k] for k in picked}


def _upload_widget() -> None:
    """Validate an uploaded .npz in memory and keep it in this session only (never on disk)."""
    ss = st.session_state
    limit_mb = max(1, -(-cat_.max_upload_bytes() // 1_000_000))  # whole MB, rounded up
    # Any file type is taken, so a wrong one gets a sentence below (Streamlit's own type filter only
    # shows a red icon without words).
    up = st.file_uploader("Logits file (.npz)", key=keys.NPZ_UPLOAD, max_upload_size=limit_mb,
                          help=f"A .npz written by `hsc cache-logits`, validated like the cached files (arrays up to "
                               f"{limit_mb} MB inflated); it stays in the model list for this browser session only.")
    if up is None:
        ss.pop(keys.UPLOAD_MSG, None)
        return
    if ss.get(keys.UPLOAD_ID) != up.file_id:
        ss[keys.UPLOAD_ID] = up.file_id
        try:
            if Path(up.name).suffix.lower() != ".npz":
                raise cat_.DataError(f"a logits file is a .npz archive (written by hsc cache-logits), not a "
                                     f"{Path(up.name).suffix or 'suffix-less'} file")
            bundle = uploads.validate_upload(up.getvalue(), up.name)
        except cat_.LOAD_ERRORS as exc:
            ss[keys.UPLOAD_MSG] = ("error", f"Cannot add **{plain(clip(up.name))}**: "
                                          f"{plain(_upload_reason(exc, up.name))}")
        else:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", bundle.name).strip("._") or "uploaded"
            name, k = stem, 1
            while name in catalog():  # never shadow a cached model or an earlier upload
                k += 1
                name = f"{stem} (uploaded{'' if k == 2 else f' {k - 1}'})"
            ss[UPLOADED][name] = uploads.keep_upload(bundle, up)
            state.set("model", name)
            ss[keys.UPLOAD_MSG] = ("success", f"Added **{plain(name)}** to the model list.")
    kind, msg = ss.get(keys.UPLOAD_MSG, ("info", ""))
    if msg:
        getattr(st, kind)(msg)


def _upload_reason(exc: Exception, name: str) -> str:
    """The loader's message about a model or an uploaded file, without repeating its name in front."""
    text = public_message(exc)
    for prefix in (f"{name}: ", f"{clip(name)}: ", f"{Path(name).stem}: ", f"{Path(name).name}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _dataset_classes(name: str) -> int | None:
    try:
        return int(cat_.get_dataset(name).hierarchy.n_leaves)
    except cat_.LOAD_ERRORS:
        return None


def dataset_picker(name: str, location: str, bundle) -> None:
    """The model's data set: named by its manifest, or picked here (kept for this session)."""
    try:
        known = cat_.manifest_dataset(location)
    except cat_.LOAD_ERRORS:
        return
    if known is not None:
        st.caption(f"Data set: **{plain(known)}** (named by the file)")
        state.set("dataset", None)  # the file says it: a link needs no `dataset`
        return
    choices = st.session_state.setdefault(keys.DATASET_CHOICES, {})
    _apply_link_dataset(choices, location, bundle.n_classes)
    # Only data sets whose class count matches the logits can be this model's: the others are not offered.
    fitting = [ds for ds in cat_.dataset_catalog() if _dataset_classes(ds) == bundle.n_classes]
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
        placeholder="Pick the data set of these logits…", key=keys.dataset_pick(location),
        help="The file's manifest has no `dataset_id`, so say which hierarchy and class list its logits use. "
             "Add your own below, or as a folder in the data-set folder.")
    if picked is not None:
        choices[location] = picked
    state.set("dataset", choices.get(location))  # mirrored in the URL, so a shared link carries it
    ignored = st.session_state.get(keys.URL_DATASET_MSG)
    if ignored is not None and ignored[0] == location and picked is None:  # until the user picks one
        st.warning(ignored[1])


def _apply_link_dataset(choices: dict, location: str, n_classes: int) -> None:
    """Once per session: the link's ``dataset`` becomes the pick for the current model if that data
    set exists and has as many classes as the logits; otherwise say why it was ignored."""
    ss = st.session_state
    wanted = state.from_url("dataset")
    if wanted is None or ss.get(keys.URL_DATASET_DONE):
        return
    ss[keys.URL_DATASET_DONE] = True
    if state.get("dataset") != wanted:  # refused by the setting's own check (reported with the link's notices)
        return
    reason: str | None
    if wanted not in cat_.dataset_catalog():
        reason = "there is no data set with this name"
    else:
        try:
            n = int(cat_.get_dataset(wanted).hierarchy.n_leaves)
        except cat_.LOAD_ERRORS as exc:
            reason = public_message(exc)
        else:
            reason = None if n == n_classes else f"it has {count(n, 'class')}, the logits have {n_classes:,}"
    if reason is None:
        choices[location] = wanted
    else:
        ss[keys.URL_DATASET_MSG] = (location, f"The link's data set **{plain(wanted)}** was ignored: {plain(reason)}.")


def _add_dataset() -> None:
    """The "Add data set" button's callback: runs before the script, so the new data set is in the
    sidebar's pickers in the same run."""
    ss = st.session_state
    name, tree, classes = ss.get(keys.DS_NAME, ""), ss.get(keys.DS_TREE), ss.get(keys.DS_CLASSES)
    if tree is None or not name:
        return
    try:
        added = uploads.add_session_dataset(name, tree.name, tree.getvalue(),
                                            None if classes is None else classes.getvalue(),
                                            header=_HEADER_CHOICES.get(ss.get(keys.DS_HEADER, "detect")))
    except cat_.LOAD_ERRORS as exc:
        ss[keys.DS_MSG] = ("error", f"Cannot add data set {plain(name)}: {plain(public_message(exc))}")
    else:  # kept in this session only: the parsed tree, never a file
        ss.setdefault(keys.SESSION_DATASET_OBJECTS, {})[added.location] = added.dataset
        ss.setdefault(keys.SESSION_DATASETS, {})[added.name] = added.location
        h = added.dataset.hierarchy
        done = (f"Added data set **{plain(added.name)}** "
                f"({count(h.n_leaves, 'class')}, {count(h.n_nodes, 'node')}) for this browser session.")
        # What the reader assumed (a first row taken as column names) is shown, not buried.
        redo = "If that row is a class, set **First row** to *a class (no header)* and add the file again."
        ss[keys.DS_MSG] = ("warning", " ".join([done, *(plain(n) for n in added.notes), redo])) if added.notes \
            else ("success", done)


# The "First row" setting of a CSV hierarchy → load_hierarchy's header argument.
_HEADER_CHOICES = {"detect": None, "header": True, "data": False}
_HEADER_LABELS = {"detect": "detect", "header": "column names", "data": "a class (no header)"}


def dataset_upload_widget() -> None:
    """Upload a hierarchy (+ class list): validated with the library, kept for this session."""
    st.caption("Or drop a folder `<name>/` with `hierarchy.*` (+ `classes.txt`, `images/`) into the "
               "`datasets/` folder next to `cached_logits/` (or the folder `HSC_DATASETS_DIR` names).")
    name = st.text_input("Name", key=keys.DS_NAME, max_chars=64, placeholder="e.g. my_tree")
    tree = st.file_uploader("Hierarchy file", key=keys.DS_TREE, type=list(uploads.HIERARCHY_SUFFIXES),
                            help="Edge list (CSV/TSV parent,child), levels CSV (coarse … class), JSON or Newick.")
    st.file_uploader("Class list (optional, one class per line, in logit order)", key=keys.DS_CLASSES, type=["txt"])
    st.radio("First row of a CSV file", list(_HEADER_CHOICES), key=keys.DS_HEADER, horizontal=True,
             format_func=_HEADER_LABELS.get,
             help="Whether the first row holds column names (`parent,child`, `superclass,class`) or is "
                  "already part of the tree. Detect: column names when its names occur nowhere else, "
                  "and the message says so.")
    st.button("Add data set", key=keys.DS_ADD, disabled=tree is None or not name, on_click=_add_dataset)
    kind, msg = st.session_state.get(keys.DS_MSG, ("info", ""))
    if msg:
        getattr(st, kind)(msg)


