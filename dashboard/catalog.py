"""Where the dashboard's models and data sets come from: the catalogs, loading one of each, and the
subsets (source tags) of a model's file.

A *model* is a cached-logits ``.npz`` file (``hsc_core.datasets.logits_io``), named by its file stem.
The catalog is every ``.npz`` in ``$HSC_CACHED_LOGITS_DIR`` (default ``<repo>/cached_logits``)
plus the files uploaded in this browser session. ``HSC_SYNTHETIC=<n>`` replaces the catalog with
one synthetic model of ``n`` samples on the ImageNet tree (with ``HSC_SYNTHETIC_TAXONOMY=1``: on
the 10,000-leaf iNat21-sized synthetic taxonomy): for the benchmark and demos only. The same
model on corrupted images (``cached_logits/shifted/``) is its *shift catalog*.

A *data set* (``hsc_core.datasets.registry``) is a hierarchy + class list (+ optional image
folder): the built-in ones, the folders in ``$HSC_DATASETS_DIR`` (default: ``datasets/`` next
to the cached-logits folder), and the ones uploaded in this session. A model's data set is the
one its manifest names (``dataset_id``; 1,000 classes without it means ImageNet-1k), else the
one the user picked for it in the sidebar (``session_keys.DATASET_CHOICES``).

Whatever is loaded from this session's uploads (files or data sets) is cached for this session
only (``cache_resource``) and released with it (``session_memory``).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import streamlit as st

from hsc_core import config
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.validation import bounded_message, clip, quote
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import LogitsBundle, LogitsFileError, list_cached_logits, load_logits
from hsc_core.datasets.registry import (
    Dataset,
    builtin_dataset_names,
    dataset_for_manifest,
    discover_datasets,
    load_dataset,
)
from hsc_core.evaluation import subsets

from . import progress
from . import session_keys as keys

# Every HSC_* variable is read by hsc_core.config; these names stay for the pages and tests.
CACHED_LOGITS_ENV = config.CACHED_LOGITS_DIR
SYNTHETIC_PREFIX = "synthetic:"
IMAGENET = "imagenet1k"
SYNTHETIC_TAXONOMY = "synthetic-taxonomy-10k"  # only in synthetic mode, never offered to users
DEFAULT_MODEL = "efficientnet_lite0"
SESSION_PREFIX = "session:"  # catalog "folder" of an uploaded data set: it lives in session state only
UPLOAD_PREFIX = "upload:"  # location of a file uploaded in this session: upload:<random token>/<name>


class DataError(ValueError):
    """A model's file cannot be used by the dashboard (the message says why)."""

    def __init__(self, message: object = "") -> None:  # bounded: built from user-provided names
        super().__init__(bounded_message(str(message)))


class UnknownDatasetError(DataError):
    """Nothing says which data set a model's logits belong to: the user must pick one."""


LOAD_ERRORS = (LogitsFileError, DataError, ValueError, OSError)


def _session_value(key: str) -> dict:
    """A dict kept in this browser session's state ({} outside a Streamlit session)."""
    try:
        value = st.session_state.get(key)
    except Exception:  # no script run context (benchmarks, plain Python)
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------- catalog
cached_logits_dir = config.cached_logits_dir
synthetic_samples = config.synthetic_samples  # samples of the synthetic model (benchmark/demo only)
max_upload_bytes = config.max_upload_bytes  # the cap on an upload's inflated arrays


def synthetic_dataset() -> str:
    """The synthetic model's data set: the ImageNet tree, or the 10,000-leaf synthetic taxonomy."""
    return SYNTHETIC_TAXONOMY if config.synthetic_taxonomy() else IMAGENET


def model_catalog(uploaded: dict[str, str] | None = None) -> dict[str, str]:
    """Model name → location (a file path, or ``synthetic:<n>:<data set>``), in display order."""
    n = synthetic_samples()
    if n is not None:
        ds = synthetic_dataset()
        name = f"synthetic-{n}" if ds == IMAGENET else f"synthetic-{n}-taxonomy"
        return {name: f"{SYNTHETIC_PREFIX}{n}:{ds}"}
    catalog = {p.stem: str(p) for p in list_cached_logits(cached_logits_dir())}
    # Model variants (TTA, ensemble, MC dropout, …: cached_logits/README.md) are models too, listed after.
    for p in list_cached_logits(cached_logits_dir() / VARIANTS_DIR):
        catalog.setdefault(p.stem, str(p))
    for name, loc in (uploaded or {}).items():
        catalog.setdefault(name, loc)
    return catalog


# ---------------------------------------------------------------------------- shifted data
VARIANTS_DIR = "variants"  # cached_logits/variants/: model variants, in the model picker
SHIFTED_DIR = "shifted"  # cached_logits/shifted/<model>__<corruption>-<severity>.npz: the same images corrupted
CLEAN = "clean"
_SHIFT_KEY = re.compile(r"([a-z_]+)-([1-5])")


def shift_catalog(model: str | None) -> dict[str, str]:
    """Shift key (``gaussian_blur-3``) → file of ``model``'s logits on corrupted images, ordered by
    corruption then severity; empty for a model without any (or for uploads, which have no folder)."""
    if not model:
        return {}
    found = {}
    for p in list_cached_logits(cached_logits_dir() / SHIFTED_DIR):
        base, sep, key = p.stem.rpartition("__")
        if sep and base == model and _SHIFT_KEY.fullmatch(key):
            found[key] = str(p)
    return dict(sorted(found.items(), key=lambda kv: (kv[0].rsplit("-", 1)[0], int(kv[0].rsplit("-", 1)[1]))))


def shift_label(key: str) -> str:
    """``gaussian_blur-3`` → "Gaussian blur, severity 3"; ``clean`` → "clean (original images)"."""
    m = _SHIFT_KEY.fullmatch(key)
    if key == CLEAN or m is None:
        return "clean (original images)"
    name = m.group(1).replace("_", " ")
    return f"{name[0].upper()}{name[1:]}, severity {m.group(2)}"


def shifted_model(model: str | None, location: str | None, shift: str | None) -> tuple[str | None, str | None]:
    """(name, location) of ``model`` on the ``shift``-corrupted images, or the model itself for
    ``clean`` or a shift it has no file for. The name is the file's stem, so exports say which data."""
    path = shift_catalog(model).get(shift or CLEAN)
    if model is None or path is None:
        return model, location
    return Path(path).stem, path


def default_model(catalog: dict[str, str]) -> str | None:
    if DEFAULT_MODEL in catalog:
        return DEFAULT_MODEL
    return next(iter(catalog), None)


def _file_stamp(p: Path) -> tuple[int, int]:
    try:
        s = p.stat()
        return (s.st_mtime_ns, s.st_size)
    except OSError:
        return (-1, -1)


def stamp(location: str) -> tuple[int, int, int]:
    """Changes whenever the file or its manifest changes, so caches see edited files."""
    if location.startswith(SYNTHETIC_PREFIX):
        return (0, 0, 0)
    p = Path(location)
    try:
        st_ = p.stat()
        m = p.with_suffix(".json")
        mt = m.stat().st_mtime_ns if m.exists() else 0
        return (st_.st_mtime_ns, st_.st_size, mt)
    except OSError:
        return (-1, -1, -1)


# ---------------------------------------------------------------------------- data sets
datasets_dir = config.datasets_dir  # the user's data-set folders


def dataset_catalog() -> dict[str, str]:
    """Data set name → the folder that holds it ("" for a built-in one), in display order:
    built-in, then the data-set folder's, then this session's uploads."""
    out = {name: "" for name in builtin_dataset_names()}
    if synthetic_samples() is not None and synthetic_dataset() == SYNTHETIC_TAXONOMY:
        out[SYNTHETIC_TAXONOMY] = ""
    folder = datasets_dir()
    if folder.is_dir():
        for name in discover_datasets(folder):  # reads nothing: a broken one errs when it is used
            out.setdefault(name, str(folder))
    for name, where in _session_value(keys.SESSION_DATASETS).items():
        out.setdefault(name, where)
    return out


def _folder_stamp(folder: str, name: str) -> tuple:
    """(file, mtime, size) of every file of one data-set folder, so edits reach the caches."""
    if not folder or folder.startswith(SESSION_PREFIX):
        return ()
    root = Path(folder) / name
    if not root.is_dir():
        return ()
    return tuple(sorted((str(p.relative_to(root)), *_file_stamp(p)) for p in root.iterdir() if p.is_file()))


@st.cache_resource(max_entries=16, show_spinner="Loading the data set…")
def _dataset(name: str, folder: str, folder_stamp: tuple) -> Dataset:
    if name == SYNTHETIC_TAXONOMY:
        from hsc_core.core.synthetic import synthetic_taxonomy

        h = synthetic_taxonomy(10_000, 7, seed=0)
        return Dataset(name, h, tuple(h.names[: h.n_leaves]), "synthetic iNat21-sized taxonomy (seed 0)", None)
    return load_dataset(name, user_dir=Path(folder) if folder else None)


def _load_dataset(name: str, folder: str, folder_stamp: tuple) -> Dataset:
    """A data set by its catalog entry: an uploaded one from this session's state (never cached
    across sessions), any other through the shared cache."""
    if folder.startswith(SESSION_PREFIX):
        ds = _session_value(keys.SESSION_DATASET_OBJECTS).get(folder)
        if ds is None:
            raise DataError(f"data set {quote(name)} was uploaded in another browser session; add it again")
        return ds
    with progress.in_floating_slot():  # its "Loading the data set…" spinner
        return _dataset(name, folder, folder_stamp)


def get_dataset(name: str) -> Dataset:
    """The data set called ``name`` (DataError when there is none; the loader's error when broken)."""
    cat = dataset_catalog()
    if name not in cat:
        raise DataError(f"unknown data set {quote(name)}; known: {clip(', '.join(cat), 240)}")
    return _load_dataset(name, cat[name], _folder_stamp(cat[name], name))


def manifest_dataset(location: str) -> str | None:
    """The data set a model's file says it belongs to (manifest ``dataset_id``, or 1,000 classes)."""
    if location.startswith(SYNTHETIC_PREFIX):
        return location.rsplit(":", 1)[1]
    bundle = load_bundle(location)
    return dataset_for_manifest(bundle.manifest, bundle.n_classes)


def chosen_datasets() -> dict[str, str]:
    """Model location → data set the user picked for it in this session."""
    return _session_value(keys.DATASET_CHOICES)


def dataset_name_for(model: str, location: str) -> str:
    """The data set of a model: its manifest's, else the user's pick (UnknownDatasetError if neither)."""
    name = manifest_dataset(location)
    if name is None:
        name = chosen_datasets().get(location)
    if name is None:
        bundle = load_bundle(location)
        raise UnknownDatasetError(
            f"{clip(model)}: the logits have {bundle.n_classes} classes and no manifest `dataset_id` says which data "
            "set they belong to; pick its data set in the sidebar"
        )
    return name


def dataset_for(model: str, location: str) -> Dataset:
    """The model's data set, checked against its logits (DataError with the reason)."""
    ds = get_dataset(dataset_name_for(model, location))
    n_classes = load_bundle(location).n_classes
    if n_classes != ds.hierarchy.n_leaves:
        raise DataError(
            f"{clip(model)}: the logits have {n_classes} classes but data set {quote(ds.name)} has "
            f"{ds.hierarchy.n_leaves} classes; pick the data set these logits belong to (or fix the manifest's "
            "`dataset_id`)"
        )
    return ds


def hierarchy_or_imagenet(model: str | None, location: str | None) -> Hierarchy:
    """The model's data-set hierarchy (for illustrations); ImageNet's when it has none (yet)."""
    if model is None or location is None:
        return imagenet_hierarchy()
    try:
        return dataset_for(model, location).hierarchy
    except LOAD_ERRORS:
        return imagenet_hierarchy()


def _dataset_key(model: str, location: str) -> tuple[str, str, tuple]:
    """(name, folder, stamp) of the model's checked data set: the cache key of its results."""
    ds = dataset_for(model, location)
    folder = dataset_catalog()[ds.name]
    return ds.name, folder, _folder_stamp(folder, ds.name)



# ---------------------------------------------------------------------------- loading
def _private(value) -> bool:
    """Whether a cache argument names something of this session only: an uploaded file
    (``upload:…``) or an uploaded data set (``session:…``, also inside a data-set key)."""
    if isinstance(value, str):
        return value.startswith((UPLOAD_PREFIX, SESSION_PREFIX))
    return isinstance(value, tuple) and any(_private(v) for v in value)


def cache_resource(**kwargs):
    """``st.cache_resource`` that keeps whatever is computed from this session's uploads (files or
    data sets) in a session-scoped cache: Streamlit drops it when the session disconnects, and no
    other session can reach it. Results for shared files stay in the global cache. A call is the
    session's when any argument (or any item of a tuple argument, e.g. an ``ModelContext.key``) names an
    upload (``upload:…``) or an uploaded data set (``session:…``): pages key their own caches of
    figures and arrays by ``ModelContext.key`` and use this decorator, so an upload's are never shared."""
    def wrap(func):
        shared = st.cache_resource(**kwargs)(func)
        private = st.cache_resource(scope="session", **kwargs)(func)

        @functools.wraps(func)
        def call(*args, **kw):
            return (private if _private((*args, *kw.values())) else shared)(*args, **kw)
        call.clear = shared.clear
        return call
    return wrap



def _uploaded_bundle(location: str) -> LogitsBundle:
    bundle = _session_value(keys.UPLOADED_BUNDLES).get(location)
    if bundle is None:
        raise DataError("this upload belongs to another (or an expired) browser session; upload the file again")
    return bundle


#: Models whose loaded file the server keeps: as many as their evaluations (``evaluations.EVALUATIONS_KEPT``,
#: which hold the same arrays), so a page that goes over every listed model (the Overview's table, its report
#: button) loads each file once, not once per pass as an 8-entry cache evicting in turn did.
BUNDLES_KEPT = 16


@cache_resource(max_entries=BUNDLES_KEPT, show_spinner="Loading logits…")
def _bundle(location: str, file_stamp: tuple) -> LogitsBundle:
    if location.startswith(UPLOAD_PREFIX):
        return _uploaded_bundle(location)
    if location.startswith(SYNTHETIC_PREFIX):
        from hsc_core.core.synthetic import synthetic_logits

        n_text, ds_name = location[len(SYNTHETIC_PREFIX):].split(":", 1)
        n = int(n_text)
        h = imagenet_hierarchy() if ds_name == IMAGENET else _dataset(ds_name, "", ()).hierarchy
        logits, labels = synthetic_logits(h, n, top1=0.8, seed=0)
        ids = np.array([f"synthetic_{i:06d}" for i in range(n)])
        manifest = {"model": "synthetic", "dataset": f"synthetic ({n} samples, seed 0)", "dataset_id": ds_name}
        return LogitsBundle(logits, labels.astype(np.int64), ids, None, manifest, f"synthetic-{n}")
    return load_logits(location)


def load_bundle(location: str) -> LogitsBundle:
    """The validated bundle at ``location`` (raises LogitsFileError / DataError with a message)."""
    with progress.in_floating_slot():  # its "Loading logits…" spinner
        return _bundle(location, stamp(location))


def sample_label(location: str | None, sample_id: str | None) -> int | None:
    """The label (leaf index) of sample ``sample_id`` in the cached logits at ``location`` (a shipped
    validation image's true class), None when there is no such file or sample."""
    if location is None or sample_id is None:
        return None
    try:
        bundle = load_bundle(location)
    except LOAD_ERRORS:
        return None
    hits = np.flatnonzero(np.asarray(bundle.sample_ids).astype(str) == sample_id)
    return int(bundle.labels[hits[0]]) if hits.size else None


# ---------------------------------------------------------------------------- a file's subsets
def subset_options(bundle: LogitsBundle) -> dict[str, str]:
    """Subset key → label with its sample count: ``subsets.file_subsets`` (``all`` always; one per source tag)."""
    out = {}
    for key, s in subsets.file_subsets(bundle.sources, bundle.n_samples).items():
        out[key] = (f"{s.label} ({s.n:,})" if key == subsets.ALL or key == s.tag else f"{s.label} ({s.n:,}; {s.tag})")
    return out


def subset_mask(bundle: LogitsBundle, subset: str) -> np.ndarray:
    """(n_samples,) mask of ``subset`` (``subsets.subset_mask``; DataError naming the choices when unknown)."""
    if bundle.sources is None:  # a model without tags in a many-model view of a subset: all its samples, as before
        return np.ones(bundle.n_samples, dtype=bool)
    try:
        mask = subsets.subset_mask(bundle.sources, bundle.n_samples, subset, where=bundle.name)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    return np.ones(bundle.n_samples, dtype=bool) if mask is None else mask
