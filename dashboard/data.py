"""Where the dashboard's models and data sets come from, and the one cached evaluation of each.

A *model* is a cached-logits ``.npz`` file (``hsc_core.datasets.logits_io``), named by its file stem.
The catalog is every ``.npz`` in ``$HSC_CACHED_LOGITS_DIR`` (default ``<repo>/cached_logits``)
plus the files uploaded in this browser session. ``HSC_SYNTHETIC=<n>`` replaces the catalog with
one synthetic model of ``n`` samples on the ImageNet tree (with ``HSC_SYNTHETIC_TAXONOMY=1``: on
the 10,000-leaf iNat21-sized synthetic taxonomy): for the benchmark and demos only.

A *data set* (``hsc_core.datasets.registry``) is a hierarchy + class list (+ optional image
folder): the built-in ones, the folders in ``$HSC_DATASETS_DIR`` (default: ``datasets/`` next
to the cached-logits folder), and the ones uploaded in this session. A model's data set is the
one its manifest names (``dataset_id``; 1,000 classes without it means ImageNet-1k), else the
one the user picked for it in the sidebar (``DATASET_CHOICES`` in the session state).

Every number comes from the evaluation layer (``hsc_core.evaluation``): one ``ModelEvaluation``
per (file, file stamp, data set, subset) is kept with ``st.cache_resource`` (``evaluation``), and
its ``setting(ts)`` computes and keeps the decision paths, curves, intervals and thresholds, once,
under its own lock. This module adds only what a page needs around them: progress bars for the long
jobs, the ``EvalSet`` view (the layer's ``EvaluationSet`` plus the model's name, location, subset
and ``Dataset``), decimated curves for plotting, and the node probabilities as a lazy matrix for
the repeated-split baselines (dense up to ``DENSE_LIMIT_BYTES``). Chunk sizes follow the one memory
budget, ``HSC_MEMORY_BUDGET_MB`` (``hsc_core.config``).

Evaluation protocol (``hsc_core.core.protocol``): T is fitted on a fixed, seeded, class-stratified
10 % calibration split of each file, and every metric, with or without TS, on the other 90 %.
Whatever is computed from this session's uploads (files or data sets) is cached for this session
only and released with it (``cache_resource``, ``_release_uploads``).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import re
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from hsc_core import config
from hsc_core.core.curves import RCCurve
from hsc_core.core.hierarchy import LIMITS, Hierarchy, file_too_large
from hsc_core.core.risk import Loss
from hsc_core.core.rule_registry import is_rule, rule_label
from hsc_core.core.rules import RULES
from hsc_core.core.validation import bounded_message, clip, quote
from hsc_core.datasets.formats import HIERARCHY_SUFFIXES, load_hierarchy_with_notes
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import (
    LogitsBundle,
    LogitsFileError,
    list_cached_logits,
    load_logits,
    load_logits_bytes,
)
from hsc_core.datasets.registry import (
    Dataset,
    builtin_dataset_names,
    dataset_for_manifest,
    discover_datasets,
    load_dataset,
)
from hsc_core.evaluation import EvaluationSet, ModelEvaluation, column_label, subsets

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

# Every HSC_* variable is read by hsc_core.config; these names stay for the pages and tests.
CACHED_LOGITS_ENV = config.CACHED_LOGITS_DIR
SYNTHETIC_PREFIX = "synthetic:"
IMAGENET = "imagenet1k"
SYNTHETIC_TAXONOMY = "synthetic-taxonomy-10k"  # only in synthetic mode, never offered to users
DEFAULT_MODEL = "efficientnet_lite0"
DISPLAY_POINTS = 1500  # points per curve sent to the browser; metrics always use the full curve
PROGRESS_MIN_CHUNKS = 4  # show a progress bar only for jobs of at least this many chunks
DENSE_LIMIT_BYTES = 1_000_000_000  # the most memory `EvalSet.node_probs` may take (50,000 × 1,372 float32: 0.27 GB)
DATASET_CHOICES = "_dataset_choices"  # session state: model location → data set picked in the sidebar
SESSION_DATASETS = "_session_datasets"  # session state: data set name → "session:<token>" of an uploaded one
SESSION_DATASET_OBJECTS = "_session_dataset_objects"  # session state: "session:<token>" → its parsed Dataset
SESSION_PREFIX = "session:"  # catalog "folder" of an uploaded data set: it lives in session state only

# The two sources of the shipped ImageNet sample, by their tags in the ``sources`` array (the layer's).
KNOWN_SUBSETS = subsets.KNOWN_SOURCES
ALL = subsets.ALL


V = TypeVar("V")

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
    for name, where in _session_value(SESSION_DATASETS).items():
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
        ds = _session_value(SESSION_DATASET_OBJECTS).get(folder)
        if ds is None:
            raise DataError(f"data set {quote(name)} was uploaded in another browser session; add it again")
        return ds
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
    return _session_value(DATASET_CHOICES)


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
    n_classes = _bundle(location, stamp(location)).n_classes
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


DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class AddedDataset:
    name: str
    location: str  # "session:<token>": the catalog entry of a data set kept in session state
    dataset: Dataset
    notes: tuple[str, ...] = ()  # what the reader assumed (e.g. a CSV's first row taken as column names)


def add_session_dataset(name: str, filename: str, hierarchy: bytes, classes: bytes | None = None,
                        header: bool | None = None) -> AddedDataset:
    """Parse an uploaded hierarchy (+ class list) with the library. The bytes go to a temporary
    folder that is deleted as soon as they are parsed; only the parsed data set is returned, for
    the caller to keep in session state. A file the library rejects raises DataError (one line:
    a file over the hierarchy size limits is refused before it is written or parsed).

    header : whether a CSV file's first row is column names (None: detected; what detection
    assumed comes back in ``notes``)."""
    name = name.strip()
    if not DATASET_NAME.fullmatch(name):
        raise DataError("a data set name is 1–64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if name in dataset_catalog():
        raise DataError(f"there is already a data set called {name!r}")
    suffix = Path(filename).suffix.lower()
    if suffix not in HIERARCHY_SUFFIXES:
        raise DataError(f"{clip(Path(filename).name)}: a hierarchy file ends in {', '.join(HIERARCHY_SUFFIXES)}")
    for upload in (hierarchy, classes):
        if upload is not None and len(upload) > LIMITS.max_file_bytes:
            raise DataError(f"{clip(Path(filename).name) if upload is hierarchy else 'the class list'}: "
                            f"{file_too_large(len(upload))}")
    # The readers take paths, so the upload spends a moment on disk; the folder never outlives this call.
    with tempfile.TemporaryDirectory(prefix="hsc_upload_") as tmp:
        tree_file, class_file = Path(tmp) / f"hierarchy{suffix}", Path(tmp) / "classes.txt"
        tree_file.write_bytes(hierarchy)
        if classes is not None:
            class_file.write_bytes(classes)
        def public(text: str) -> str:  # messages name the file as uploaded, never the temp folder
            text = text.replace(str(tree_file), clip(Path(filename).name)).replace(str(class_file), "the class list")
            return text.replace(str(tmp) + os.sep, "").replace(str(tmp), "")

        try:
            tree, notes = load_hierarchy_with_notes(tree_file, class_file if classes is not None else None,
                                                    header=header)
        except Exception as exc:  # any reader error on untrusted input: report it without the temp path
            raise DataError(bounded_message(public(str(exc)))) from None
        notes = [public(n) for n in notes]
    ds = Dataset(name, tree, tuple(tree.names[: tree.n_leaves]),
                 f"{tree.n_leaves} classes uploaded in this session", None)
    return AddedDataset(name, f"{SESSION_PREFIX}{uuid.uuid4().hex}", ds, tuple(notes))


# ---------------------------------------------------------------------------- loading
UPLOAD_PREFIX = "upload:"  # location of a file uploaded in this session: upload:<random token>/<name>
UPLOADED_BUNDLES = "_uploaded_bundles"  # session state: upload location → its validated LogitsBundle
MAX_UPLOAD_ENV = config.MAX_UPLOAD_MB


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
    session's when any argument (or any item of a tuple argument, e.g. an ``EvalSet.key``) names an
    upload (``upload:…``) or an uploaded data set (``session:…``): pages key their own caches of
    figures and arrays by ``EvalSet.key`` and use this decorator, so an upload's are never shared."""
    def wrap(func):
        shared = st.cache_resource(**kwargs)(func)
        private = st.cache_resource(scope="session", **kwargs)(func)

        @functools.wraps(func)
        def call(*args, **kw):
            return (private if _private((*args, *kw.values())) else shared)(*args, **kw)
        call.clear = shared.clear
        return call
    return wrap


def validate_upload(data: bytes, name: str) -> LogitsBundle:
    """Check an uploaded ``.npz`` in memory (nothing is written to disk): headers against sizes and
    the ``max_upload_bytes()`` cap before inflating, then every check of ``load_logits``, and the
    data set its class count implies. Messages name the file as the user did."""
    bundle = load_logits_bytes(data, name, max_bytes=max_upload_bytes())
    ds_name = dataset_for_manifest(bundle.manifest, bundle.n_classes)
    if ds_name is not None:
        ds = get_dataset(ds_name)
        if ds.hierarchy.n_leaves != bundle.n_classes:
            raise DataError(f"{clip(name)}: the logits have {bundle.n_classes} classes but data set {quote(ds_name)} "
                            f"has {ds.hierarchy.n_leaves}")
    return bundle


# ---------------------------------------------------------------------------- a session's memory
# Streamlit keeps a closed tab's session for reconnecting (``server.disconnectedSessionTTL``), and
# never shuts one down when it expires: it is dropped only when a later session disconnects. So
# everything large that a session holds is released here, when its tab disconnects (Streamlit then
# clears the session-scoped caches and calls ``_release_uploads``): its uploaded logits and data
# sets, the upload's raw bytes, the evaluations of its uploads (session-scoped caches), the objects
# its last page run left in that page's globals (reachable from fragments, widget callbacks and
# deferred downloads, which Streamlit keeps with the session), its report buttons' jobs and its
# media files. The freed heap then goes back to the operating system (``release_memory``).
@dataclass(eq=False)
class _SessionUploads:
    """What one browser session holds beyond small values in its state, released together."""

    session_id: str
    bundles: dict  # the dict in this session's state: upload location → LogitsBundle
    datasets: dict = field(default_factory=dict)  # the dict in its state: "session:<token>" → Dataset
    files: weakref.WeakSet = field(default_factory=weakref.WeakSet)  # uploaded files (their bytes) in its state
    pages: dict = field(default_factory=dict)  # page → the globals of its latest run
    jobs: weakref.WeakSet = field(default_factory=weakref.WeakSet)  # objects with .release(), e.g. report jobs


def _release_uploads(uploads: _SessionUploads) -> None:
    """Release what the session holds (see above), then return the freed heap (``release_memory``)."""
    uploads.bundles.clear()
    uploads.datasets.clear()
    for job in list(uploads.jobs):
        job.release()
    for f in list(uploads.files):
        f.close()  # a BytesIO: drops its buffer, the upload's raw bytes (widget state keeps the object)
    uploads.files.clear()
    try:
        from streamlit.runtime import Runtime

        rt = Runtime.instance()
        rt.uploaded_file_mgr.remove_session_files(uploads.session_id)
        # What AppSession.shutdown() would do, which an expiring session never gets: its media
        # files and deferred downloads (whose callables reach the page's data) are let go.
        rt.media_file_mgr.clear_session_refs(uploads.session_id)
        rt.media_file_mgr.remove_orphaned_files()
    except Exception:  # no runtime (AppTest, plain Python): nothing else holds the bytes
        pass
    # The session's last page runs: only its fragments, callbacks and deferred downloads can still
    # reach them, and the session that would run those has ended (a reconnecting tab reruns its page).
    for page_globals in uploads.pages.values():
        page_globals.clear()
    uploads.pages.clear()
    release_memory()


_TRIM_DELAYS_S = (1.0, 9.0)  # after a session ends: once its caches are cleared, and again 9 s later
_trim_lock = threading.Lock()
_trim_timer: threading.Timer | None = None


def release_memory(delays: tuple[float, ...] = _TRIM_DELAYS_S) -> None:
    """After ``delays[0]`` seconds (once Streamlit has cleared all of an ended session's caches,
    which it does right after this module's release hook), then each further delay after the last
    pass (for what stopping threads let go later): collect garbage and give the freed heap back to
    the operating system (``trim_heap``). Calls while a pass is pending share it."""
    global _trim_timer
    with _trim_lock:
        if _trim_timer is None and delays:
            _trim_timer = threading.Timer(delays[0], _release_now, args=(tuple(delays[1:]),))
            _trim_timer.daemon = True
            _trim_timer.start()


def _release_now(later: tuple[float, ...]) -> None:
    global _trim_timer
    with _trim_lock:
        _trim_timer = None
    gc.collect()
    trim_heap()
    if later:
        release_memory(later)


# glibc raises its mmap threshold (up to 32 MB) each time a large array is freed, and then keeps up
# to twice that at the top of each thread's malloc arena: after a session's large arrays are gone,
# each arena a script thread used could hold 64 MB that ``malloc_trim`` does not return. Fixed
# thresholds keep arrays of 4 MB and more in their own mappings (returned the moment they are
# freed) and let an arena keep at most 16 MB of free top.
MMAP_THRESHOLD_BYTES = 4 << 20
TRIM_THRESHOLD_BYTES = 16 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


@functools.cache
def configure_malloc() -> bool:
    """Set glibc's fixed mmap and trim thresholds (above) for this process, once; False where there
    is no glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                   TRIM_THRESHOLD_BYTES))


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS, Windows: they return memory on their own terms)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim(0)``): without it,
    memory freed by a session's many medium-sized arrays stays in the process's malloc arenas. False
    where there is no glibc."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


configure_malloc()


@st.cache_resource(scope="session", on_release=_release_uploads, show_spinner=False)
def _session_uploads() -> _SessionUploads:
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    return _SessionUploads(ctx.session_id if ctx else "", st.session_state.setdefault(UPLOADED_BUNDLES, {}))


def _this_session() -> _SessionUploads | None:
    """This session's ``_SessionUploads`` with its state's dicts attached; None outside a session."""
    try:
        uploads = _session_uploads()
        uploads.bundles = st.session_state.setdefault(UPLOADED_BUNDLES, {})  # this session state's own dicts
        uploads.datasets = st.session_state.setdefault(SESSION_DATASET_OBJECTS, {})
    except Exception:  # no script run context (plain Python, benchmarks)
        return None
    return uploads


def keep_upload(bundle: LogitsBundle, source=None) -> str:
    """Keep a validated upload in this session's state, released when the session disconnects
    (``_release_uploads``), with ``source`` (the uploaded file, whose bytes Streamlit's widget state
    keeps) closed then; its location."""
    location = f"{UPLOAD_PREFIX}{uuid.uuid4().hex}/{bundle.name}"
    uploads = _this_session()
    if uploads is None:
        raise DataError("uploads need a browser session")
    uploads.bundles[location] = bundle
    if source is not None:
        uploads.files.add(source)
    return location


def track_page(page: str, page_globals: dict) -> None:
    """Remember the globals of this run of ``page`` (they replace its last run's): when the session
    ends they are emptied, so what the page computed (evaluation views, curves, tables) goes with it
    although Streamlit keeps the page's fragments and callbacks with the session."""
    uploads = _this_session()
    if uploads is not None:
        uploads.pages[page] = page_globals
        track_uploaded_files(uploads)


def track_uploaded_files(uploads: _SessionUploads | None = None) -> None:
    """Note every uploaded file in this session's state (``st.file_uploader`` values: each run makes
    new file objects over the upload's bytes), so that ``_release_uploads`` closes them all."""
    uploads = uploads or _this_session()
    if uploads is None:
        return
    from streamlit.runtime.uploaded_file_manager import UploadedFile

    for key in list(st.session_state.keys()):
        try:
            value = st.session_state[key]
        except Exception:  # a widget of another page whose value cannot be read now
            continue
        for f in value if isinstance(value, list) else [value]:
            if isinstance(f, UploadedFile):
                uploads.files.add(f)


def release_with_session(obj) -> None:
    """Call ``obj.release()`` when this browser session ends (held weakly until then)."""
    uploads = _this_session()
    if uploads is not None:
        uploads.jobs.add(obj)


def _uploaded_bundle(location: str) -> LogitsBundle:
    bundle = _session_value(UPLOADED_BUNDLES).get(location)
    if bundle is None:
        raise DataError("this upload belongs to another (or an expired) browser session; upload the file again")
    return bundle


@cache_resource(max_entries=8, show_spinner="Loading logits…")
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
    return _bundle(location, stamp(location))


# ---------------------------------------------------------------------------- subsets
def subset_options(bundle: LogitsBundle) -> dict[str, str]:
    """Subset key → label with its sample count: ``subsets.file_subsets`` (``all`` always; one per source tag)."""
    out = {}
    for key, s in subsets.file_subsets(bundle.sources, bundle.n_samples).items():
        out[key] = (f"{s.label} ({s.n:,})" if key == ALL or key == s.tag else f"{s.label} ({s.n:,}; {s.tag})")
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


# ---------------------------------------------------------------------------- progress
class _ProgressBar:
    """The layer's ``progress(done, total)`` callback as a throttled st.progress (about 20
    updates), removed when the job ends (use it as a context manager). Small jobs show nothing:
    the bar appears once the first chunk says the job has at least ``PROGRESS_MIN_CHUNKS`` chunks.
    A value the layer already holds calls nothing, so no bar flashes on a rerun."""

    def __init__(self, text: str):
        self.text = text
        self.bar: DeltaGenerator | None = None
        self.chunks: int | None = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if done <= 0 or total <= 0:
            return
        if self.chunks is None:  # the first chunk's size gives the number of chunks
            self.chunks = -(-total // done)
            if self.chunks >= PROGRESS_MIN_CHUNKS:
                self.bar = st.progress(0.0, text=f"{self.text} 0%")
        frac = min(done / total, 1.0)
        step = int(frac * 20)
        if self.bar is not None and step > self.shown:
            self.shown = step
            self.bar.progress(frac, text=f"{self.text} {frac:.0%}")

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.empty()


# ---------------------------------------------------------------------------- the evaluation
@cache_resource(max_entries=12, show_spinner=False)
def _evaluation(location: str, file_stamp: tuple, dataset_key: tuple, subset: str, _model: str) -> ModelEvaluation:
    # Cheap to build: T, decision paths and curves are computed (once) when first asked for.
    bundle = _bundle(location, file_stamp)
    ds = _load_dataset(*dataset_key)
    mask = subset_mask(bundle, subset)
    return ModelEvaluation.from_bundle(bundle, ds.hierarchy, name=_model, dataset=ds.name,
                                       subset=None if mask.all() else mask, subset_name=subset,
                                       file=file_label(location))


@cache_resource(max_entries=8, show_spinner=False)
def _sensitivity(_es: EvalSet, key: tuple, trees: tuple[str, ...]) -> list:
    from hsc_core.datasets.imagenet_trees import imagenet_tree
    from hsc_core.evaluation.sensitivity import hierarchy_sensitivity

    ev = _es.view.evaluation
    return hierarchy_sensitivity(ev.logits, ev.labels, {t: imagenet_tree(t) for t in trees}, name=_es.model,
                                 dataset=IMAGENET, ts=_es.ts, sample_ids=ev.sample_ids, sources=ev.sources,
                                 subset=ev.subset, subset_name=ev.subset_name)


def hierarchy_sensitivity(es: EvalSet, trees: tuple[str, ...]) -> list:
    """Tidy rows of ``es``'s model under each ImageNet-1k tree (``evaluation.sensitivity``), cached per
    model, data, subset, TS setting and trees."""
    return _sensitivity(es, es.key, tuple(trees))


def file_label(location: str) -> str:
    """What provenance (the report) says a model's file is: its name, never a server path."""
    if location.startswith(UPLOAD_PREFIX):
        return "(uploaded in the dashboard)"
    return location if location.startswith(SYNTHETIC_PREFIX) else Path(location).name


def _evaluation_key(model: str, location: str, subset: str) -> tuple:
    """(location, file stamp, data-set key, subset): what one ``ModelEvaluation`` is cached by."""
    file_stamp = stamp(location)
    _bundle(location, file_stamp)  # a broken file's own error first
    return (location, file_stamp, _dataset_key(model, location), subset)


def evaluation(model: str, location: str, subset: str = ALL) -> ModelEvaluation:
    """The model's one ``ModelEvaluation`` on ``subset`` (cached per file, file stamp, data set and
    subset; a session's uploads in that session's cache only)."""
    return _evaluation(*_evaluation_key(model, location, subset), model)


def temperature(location: str, subset: str = ALL, model: str | None = None) -> tuple[float, int]:
    """(T, samples it was fitted on) of the model at ``location`` (the same for every ``subset``)."""
    ev = evaluation(model or load_bundle(location).name, location, subset)
    return ev.temperature, ev.n_cal


def _forward(name: str) -> property:
    """A read-only attribute of an ``EvalSet`` that is its view's (the layer's) attribute ``name``."""
    return property(lambda self: getattr(self.view, name), doc=f"``EvaluationSet.{name}`` of the view.")


@dataclass(frozen=True, eq=False)
class EvalSet:
    """What a page shows of one model, subset and TS setting: the layer's ``EvaluationSet``
    (``view``, which computes and keeps every number) plus the dashboard's context: the model's
    name and location, the subset key and its ``Dataset`` (for the image folder). Cheap: made on
    every call of ``eval_set``; ``key`` identifies it for the pages' own caches."""

    model: str
    location: str
    subset: str
    dataset: Dataset = field(repr=False)
    view: EvaluationSet = field(repr=False)
    key: tuple  # (location, file stamp, data-set key, subset, ts): for the pages' own caches

    # The layer's samples and numbers that pages read, by the layer's names.
    ts = _forward("ts")
    temperature = _forward("temperature")
    hierarchy = _forward("hierarchy")
    n = _forward("n")
    labels = _forward("labels")
    sample_ids = _forward("sample_ids")
    sources = _forward("sources")
    paths = _forward("paths")
    leaf_pred = _forward("leaf_pred")
    leaf_conf = _forward("leaf_conf")
    top1 = _forward("top1")
    id_index = _forward("id_index")
    most_confident_wrong = _forward("most_confident_wrong")
    rows_by_class = _forward("rows_by_class")

    @property
    def n_cal(self) -> int:
        """Samples T was fitted on (the calibration split)."""
        return self.view.evaluation.n_cal

    @property
    def image_dir(self) -> Path | None:
        return self.dataset.find_image_dir()

    def node_row(self, i: int) -> np.ndarray:
        """Node probabilities of sample ``i`` as the rules see them (clipped to 1, root = 1)."""
        return self.view.node_row(i)

    def correctness(self, nodes: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
        """Hierarchical correctness of ``nodes`` for the samples at ``positions`` (all)."""
        return self.view.correctness(nodes, positions)

    @cached_property
    def node_probs(self) -> NodeProbabilities:
        """The node probabilities as a lazy (n, n_nodes) array: rows are computed when indexed."""
        return NodeProbabilities(self)


def eval_set(model: str, location: str, subset: str = ALL, ts: bool = False) -> EvalSet:
    """The model's evaluation samples of one TS setting, their decision paths built (with a
    progress bar) the first time any session asks."""
    key = _evaluation_key(model, location, subset)
    ev = _evaluation(*key, model)
    n = ev.rows_for(ts).size
    with _ProgressBar(f"Decision paths of {n:,} samples × {ev.hierarchy.n_nodes:,} nodes:") as bar:
        view = ev.setting(bool(ts), progress=bar)
    return EvalSet(model, location, subset, _load_dataset(*key[2]), view, (*key, bool(ts)))


class NodeProbabilities:
    """An EvalSet's node probabilities, shape (n, n_nodes), computed on demand
    (``EvaluationSet.node_probabilities``).

    Indexing rows (``p[i]``, ``p[i, :n_leaves]``, ``p[rows, v]``) computes only those rows;
    ``np.asarray(p)`` (the few library calls that need every row, e.g. the repeated-split baselines)
    builds the whole matrix once, refused with a DataError beyond ``DENSE_LIMIT_BYTES``.
    """

    ndim = 2

    def __init__(self, es: EvalSet):
        self._es = es
        self._dense: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self._es.n, self._es.hierarchy.n_nodes)

    @cached_property
    def dtype(self) -> np.dtype:
        return self._es.view.node_probabilities([0]).dtype  # the layer's precision

    def __len__(self) -> int:
        return self._es.n

    def _check_size(self, n_rows: int) -> None:
        size = n_rows * self._es.hierarchy.n_nodes * self.dtype.itemsize
        if size > DENSE_LIMIT_BYTES:
            raise DataError(f"{clip(self._es.model)}: {n_rows:,} samples × {self._es.hierarchy.n_nodes:,} nodes "
                            f"is too large to hold every node probability in memory ({size / 1e9:.1f} GB); "
                            "use a subset")

    def __getitem__(self, key):
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if self._dense is not None:
            return self._dense[key]
        if isinstance(rows, (int, np.integer)):
            return self._es.view.node_probabilities([int(rows)])[0][rest]
        idx = np.arange(self._es.n)[rows]
        self._check_size(idx.size)
        return self._es.view.node_probabilities(idx)[(slice(None),) + tuple(rest)]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._dense is None:
            self._check_size(self._es.n)
            self._dense = self._es.view.node_probabilities(np.arange(self._es.n))
        return self._dense if dtype is None else self._dense.astype(dtype)


# ---------------------------------------------------------------------------- what pages draw
@dataclass(frozen=True, eq=False)
class CurveSet:
    """Each rule's RC curve (the layer's, exact or on the authors' ``dec`` grid), a decimated copy
    (≤ DISPLAY_POINTS) for plotting, and the exact curves that give the operating point at any θ
    (the same as ``curves`` unless ``dec`` is set: a rounded-grid curve only has points at grid
    values of θ)."""

    es: EvalSet
    loss: Loss
    dec: int | None
    curves: Mapping[str, RCCurve]
    display: Mapping[str, tuple[np.ndarray, np.ndarray]]
    exact: Mapping[str, RCCurve]

    def at(self, rule: str, theta: float) -> tuple[float, float]:
        """(coverage, risk) of ``rule`` at θ: ``exact[rule].at(theta)``."""
        return self.exact[rule].at(theta)

    def haurc_table(self, rules: Sequence[str] = RULES) -> pd.DataFrame:
        """One row per rule (default the paper's four; any registered rule): the layer's
        hAURC×1000 and gain % (``column_label`` names), and the curve's number of points."""
        v, loss, dec = self.es.view, self.loss, self.dec
        return pd.DataFrame([{"rule": rule_label(rule), column_label("haurc"): 1000 * v.haurc(rule, loss, dec),
                              column_label("gain_percent"): v.gain(rule, loss, dec),
                              "points": int(self.curves[rule].coverage.size)}
                             for rule in rules])


class RuleCurves(Mapping[str, V]):
    """rule → value, the paper's four given, any other registered rule (``rule_registry``: listed,
    or hf<β>) computed by the layer on first use: pages pick rules from one list and never build
    curves. Iterates over the given rules only; an unknown name is a KeyError."""

    def __init__(self, given: dict[str, V], compute: Callable[[str], V]) -> None:
        self._given, self._compute = given, compute
        self._more: dict[str, V] = {}
        self._lock = threading.Lock()

    def __getitem__(self, rule: str) -> V:
        if rule in self._given:
            return self._given[rule]
        if not is_rule(rule):
            raise KeyError(rule)
        with self._lock:
            if rule not in self._more:
                self._more[rule] = self._compute(rule)
            return self._more[rule]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)


def decimate(x: np.ndarray, y: np.ndarray, max_points: int = DISPLAY_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points, evenly spaced along the curve, first and last kept."""
    n = x.size
    if n <= max_points:
        return np.asarray(x, float), np.asarray(y, float)
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return np.asarray(x[idx], float), np.asarray(y[idx], float)


def _grid_bar(es: EvalSet) -> _ProgressBar:
    return _ProgressBar(f"The authors' θ grid over {es.n:,} samples × {es.hierarchy.n_nodes:,} nodes:")


def curve_set(es: EvalSet, loss: Loss = "01", dec: int | None = None) -> CurveSet:
    """The layer's RC curves of ``es`` with their plotting copies (in θ order, the curve's own, so
    non-monotone rules draw their true path)."""
    with st.spinner("Computing risk–coverage curves…"), _grid_bar(es) as bar:
        given = es.view.curves(loss, dec, progress=bar)
        given_exact = es.view.curves(loss)
    curves = RuleCurves(given, lambda rule: es.view.curve(rule, loss, dec))
    exact = RuleCurves(given_exact, lambda rule: es.view.curve(rule, loss))
    display = RuleCurves({rule: decimate(c.coverage, c.risk) for rule, c in given.items()},
                         lambda rule: decimate(curves[rule].coverage, curves[rule].risk))
    return CurveSet(es, loss, dec, curves, display, exact)


def cc_curves(es: EvalSet, n_bins: int = 15) -> RuleCurves:
    """rule → calibration–coverage curve on the authors' 2-decimal θ grid (the layer's): the
    paper's four at once, any other registered rule on first use."""
    with st.spinner("Computing calibration–coverage curves…"), _grid_bar(es) as bar:
        given = es.view.cc_curves(int(n_bins), progress=bar)
    return RuleCurves(given, lambda rule: es.view.cc_curve(rule, int(n_bins)))


def haurc_intervals(es: EvalSet, loss: Loss = "01"):
    """95 % paired bootstrap intervals of every rule's hAURC and gain (the layer's)."""
    with st.spinner("Bootstrapping 95 % intervals…"):
        return es.view.bootstrap(loss)


def tight_thresholds(es: EvalSet) -> np.ndarray:
    """Each sample's minimal θ at which Climbing is correct (the layer's, with a progress bar)."""
    with _ProgressBar(f"Tight Climbing thresholds of {es.n:,} samples:") as bar:
        return es.view.tight_thresholds(progress=bar)
