"""Where the dashboard's models and data sets come from, and every heavy computation, cached.

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

Heavy results (decision paths, curves) are kept with ``st.cache_resource``: they are large numpy
arrays that must not be copied (``st.cache_data`` would pickle and copy them on every rerun).
Callers treat them as read-only. Nothing holds a samples × nodes matrix: node probabilities are
computed a chunk of rows at a time (``CHUNK_BYTES``) and reduced to each rule's decision paths,
the authors' θ grid or tight thresholds on the way; a page that needs one sample's probabilities
computes that row (``EvalSet.node_probs``). Only the repeated-split baselines build the whole
matrix, up to ``DENSE_LIMIT_BYTES``.

Evaluation protocol (``hsc_core.core.protocol``): T is fitted on a fixed, seeded, class-stratified
10 % calibration split of each file, and every metric, with or without TS, on the other 90 %.
"""

from __future__ import annotations

import functools
import os
import uuid
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from hsc_core import config
from hsc_core.core.curves import (
    CCCurve,
    RCCurve,
    calibration_coverage_curve,
    hierarchical_gain,
    rc_curve_from_paths,
    threshold_grid_keys,
)
from hsc_core.core.evaluation import auto_chunk_size, node_probabilities_rows
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.protocol import calibration_mask
from hsc_core.core.probabilities import fit_temperature
from hsc_core.core.risk import hierarchical_correctness
from hsc_core.core.rules import RULE_LABELS, RULES, DecisionPaths, argmax_leaf, concat_decision_paths, decision_paths
from hsc_core.datasets.formats import HIERARCHY_SUFFIXES, load_hierarchy
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

REPO_ROOT = Path(__file__).resolve().parent.parent
# Every HSC_* variable is read by hsc_core.config; these names stay for the pages and tests.
CACHED_LOGITS_ENV = config.CACHED_LOGITS_DIR
DATASETS_ENV = config.DATASETS_DIR
SYNTHETIC_ENV = config.SYNTHETIC
SYNTHETIC_TAXONOMY_ENV = config.SYNTHETIC_TAXONOMY
SYNTHETIC_PREFIX = "synthetic:"
IMAGENET = "imagenet1k"
SYNTHETIC_TAXONOMY = "synthetic-taxonomy-10k"  # only in synthetic mode, never offered to users
SPLIT_SEED = 0
DEFAULT_MODEL = "efficientnet_lite0"
DISPLAY_POINTS = 1500  # points per curve sent to the browser; metrics always use the full curve
CHUNK_BYTES = 64 * 2**20  # working memory of one chunk of samples (``evaluation.auto_chunk_size``)
PROGRESS_MIN_CHUNKS = 4  # show a progress bar only for jobs of at least this many chunks
DATASET_CHOICES = "_dataset_choices"  # session state: model location → data set picked in the sidebar
SESSION_DATASETS = "_session_datasets"  # session state: data set name → "session:<token>" of an uploaded one
SESSION_DATASET_OBJECTS = "_session_dataset_objects"  # session state: "session:<token>" → its parsed Dataset
SESSION_PREFIX = "session:"  # catalog "folder" of an uploaded data set: it lives in session state only

# The two sources of the shipped ImageNet sample, by their tags in the ``sources`` array.
KNOWN_SUBSETS = {
    "typical": ("RomanPlaud/hierarchical_decision_rules (224x224)", "Typical"),
    "easier": ("VeriSilicon/acuity-dataset (227x227)", "Easier"),
}
ALL = "all"


class DataError(ValueError):
    """A model's file cannot be used by the dashboard (the message says why)."""


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
def cached_logits_dir() -> Path:
    """``$HSC_CACHED_LOGITS_DIR``, else ``<repo>/cached_logits`` (:func:`hsc_core.config.cached_logits_dir`)."""
    return config.cached_logits_dir()


def synthetic_samples() -> int | None:
    """Samples of the synthetic model when ``HSC_SYNTHETIC`` is set (benchmark/demo only)."""
    return config.synthetic_samples()


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
    for name, loc in (uploaded or {}).items():
        catalog.setdefault(name, loc)
    return catalog


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
def datasets_dir() -> Path:
    """The user's data-set folders: ``$HSC_DATASETS_DIR``, else ``datasets/`` beside the logits folder
    (:func:`hsc_core.config.datasets_dir`, the default the library and the ``hsc`` command use too)."""
    return config.datasets_dir()


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
            raise DataError(f"data set {name!r} was uploaded in another browser session; add it again")
        return ds
    return _dataset(name, folder, folder_stamp)


def get_dataset(name: str) -> Dataset:
    """The data set called ``name`` (DataError when there is none; the loader's error when broken)."""
    cat = dataset_catalog()
    if name not in cat:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(cat)}")
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
            f"{model}: the logits have {bundle.n_classes} classes and no manifest `dataset_id` says which data "
            "set they belong to; pick its data set in the sidebar"
        )
    return name


def dataset_for(model: str, location: str) -> Dataset:
    """The model's data set, checked against its logits (DataError with the reason)."""
    ds = get_dataset(dataset_name_for(model, location))
    n_classes = _bundle(location, stamp(location)).n_classes
    if n_classes != ds.hierarchy.n_leaves:
        raise DataError(
            f"{model}: the logits have {n_classes} classes but data set {ds.name!r} has {ds.hierarchy.n_leaves} "
            "classes; pick the data set these logits belong to (or fix the manifest's `dataset_id`)"
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


def add_session_dataset(name: str, filename: str, hierarchy: bytes, classes: bytes | None = None) -> AddedDataset:
    """Parse an uploaded hierarchy (+ class list) with the library. The bytes go to a temporary
    folder that is deleted as soon as they are parsed; only the parsed data set is returned, for
    the caller to keep in session state. A file the library rejects raises DataError."""
    name = name.strip()
    if not DATASET_NAME.fullmatch(name):
        raise DataError("a data set name is 1–64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if name in dataset_catalog():
        raise DataError(f"there is already a data set called {name!r}")
    suffix = Path(filename).suffix.lower()
    if suffix not in HIERARCHY_SUFFIXES:
        raise DataError(f"{Path(filename).name}: a hierarchy file ends in {', '.join(HIERARCHY_SUFFIXES)}")
    # The readers take paths, so the upload spends a moment on disk; the folder never outlives this call.
    with tempfile.TemporaryDirectory(prefix="hsc_upload_") as tmp:
        tree_file, class_file = Path(tmp) / f"hierarchy{suffix}", Path(tmp) / "classes.txt"
        tree_file.write_bytes(hierarchy)
        if classes is not None:
            class_file.write_bytes(classes)
        try:
            tree = load_hierarchy(tree_file, class_file if classes is not None else None)
        except Exception as exc:  # any reader error on untrusted input: report it without the temp path
            raise DataError(str(exc).replace(str(tmp) + os.sep, "").replace(str(tmp), "")) from None
    ds = Dataset(name, tree, tuple(tree.names[: tree.n_leaves]),
                 f"{tree.n_leaves} classes uploaded in this session", None)
    return AddedDataset(name, f"{SESSION_PREFIX}{uuid.uuid4().hex}", ds)


# ---------------------------------------------------------------------------- loading
UPLOAD_PREFIX = "upload:"  # location of a file uploaded in this session: upload:<random token>/<name>
UPLOADED_BUNDLES = "_uploaded_bundles"  # session state: upload location → its validated LogitsBundle
MAX_UPLOAD_ENV = config.MAX_UPLOAD_MB
MAX_UPLOAD_MB = int(config.DEFAULT_MAX_UPLOAD_MB)  # default cap on an uploaded file's arrays, inflated


def max_upload_bytes() -> int:
    """The cap on an upload's inflated arrays: ``$HSC_MAX_UPLOAD_MB`` MB when set, else 200 MB
    (:func:`hsc_core.config.max_upload_bytes`; the shipped files hold 11 MB)."""
    return config.max_upload_bytes()


def _cache_resource(**kwargs):
    """``st.cache_resource`` that keeps whatever is computed from this session's uploads in a
    session-scoped cache: Streamlit drops it when the session disconnects, and no other session
    can reach it. Results for shared files stay in the global cache."""
    def wrap(func):
        shared = st.cache_resource(**kwargs)(func)
        private = st.cache_resource(scope="session", **kwargs)(func)

        @functools.wraps(func)
        def call(*args, **kw):
            uploaded = any(isinstance(a, str) and a.startswith(UPLOAD_PREFIX) for a in (*args, *kw.values()))
            return (private if uploaded else shared)(*args, **kw)
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
            raise DataError(f"{name}: the logits have {bundle.n_classes} classes but data set {ds_name!r} has "
                            f"{ds.hierarchy.n_leaves}")
    return bundle


@dataclass
class _SessionUploads:
    session_id: str
    bundles: dict  # the dict in this session's state: upload location → LogitsBundle


def _release_uploads(uploads: _SessionUploads) -> None:
    # Streamlit keeps a closed tab's session (and its uploaded bytes) for reconnecting, and never
    # shuts down one that expires; so drop the bundles and the raw upload when the tab disconnects.
    uploads.bundles.clear()
    try:
        from streamlit.runtime import Runtime

        Runtime.instance().uploaded_file_mgr.remove_session_files(uploads.session_id)
    except Exception:  # no runtime (AppTest, plain Python): nothing else holds the bytes
        pass


@st.cache_resource(scope="session", on_release=_release_uploads, show_spinner=False)
def _session_uploads() -> _SessionUploads:
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    return _SessionUploads(ctx.session_id if ctx else "", st.session_state.setdefault(UPLOADED_BUNDLES, {}))


def keep_upload(bundle: LogitsBundle) -> str:
    """Keep a validated upload in this session's state, released when the session disconnects
    (``_release_uploads``); its location."""
    location = f"{UPLOAD_PREFIX}{uuid.uuid4().hex}/{bundle.name}"
    uploads = _session_uploads()
    uploads.bundles = st.session_state.setdefault(UPLOADED_BUNDLES, {})  # this session state's own dict
    uploads.bundles[location] = bundle
    return location


def _uploaded_bundle(location: str) -> LogitsBundle:
    bundle = _session_value(UPLOADED_BUNDLES).get(location)
    if bundle is None:
        raise DataError("this upload belongs to another (or an expired) browser session; upload the file again")
    return bundle


@_cache_resource(max_entries=8, show_spinner="Loading logits…")
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


# ---------------------------------------------------------------------------- subsets & split
def subset_options(bundle: LogitsBundle) -> dict[str, str]:
    """Subset key → label with its sample count. ``all`` always; one entry per source tag."""
    out = {ALL: f"All samples ({bundle.n_samples:,})"}
    if bundle.sources is None:
        return out
    tags, counts = np.unique(bundle.sources.astype(str), return_counts=True)
    known = {tag: (key, label) for key, (tag, label) in KNOWN_SUBSETS.items()}
    for tag, count in zip(tags.tolist(), counts.tolist()):
        key, label = known.get(tag, (tag, tag))
        out[key] = f"{label} ({count:,}; {tag})" if key != tag else f"{tag} ({count:,})"
    return out


def subset_mask(bundle: LogitsBundle, subset: str) -> np.ndarray:
    if subset == ALL or bundle.sources is None:
        return np.ones(bundle.n_samples, dtype=bool)
    tag = KNOWN_SUBSETS[subset][0] if subset in KNOWN_SUBSETS else subset
    mask = bundle.sources.astype(str) == tag
    if not mask.any():
        raise DataError(f"{bundle.name}: no samples with source {tag!r}")
    return mask


def calibration_split(bundle: LogitsBundle) -> np.ndarray:
    """The protocol's calibration split of the whole file (``core.protocol.calibration_mask``): T is
    fitted on it, and no page evaluates it, with or without temperature scaling."""
    return calibration_mask(bundle.labels)


# ---------------------------------------------------------------------------- chunked node probabilities
# The library's ``decision_paths_from_logits`` scans consecutive rows of a logits array; a view
# evaluates a row subset (the protocol's evaluation split, a data subset), and copying those rows
# would double the logits' memory (3.6 GB more at iNat21 size). So the chunk loop lives here, over
# row indices, built from the same library pieces (``node_probabilities_rows``, ``decision_paths``,
# ``concat_decision_paths``, ``threshold_grid_keys``): the results are the unchunked ones exactly.
def chunk_rows(h: Hierarchy) -> int:
    """Samples per chunk: one chunk's temporaries stay near ``CHUNK_BYTES`` whatever the tree size."""
    return auto_chunk_size(h, budget_bytes=CHUNK_BYTES)


def _n_chunks(h: Hierarchy, n: int) -> int:
    return -(-n // chunk_rows(h))


def node_probability_chunks(h: Hierarchy, logits: np.ndarray, index: np.ndarray, temperature: float,
                            progress: Callable[[float], None] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """(start, node probabilities of rows ``index[start:start + size]``), a chunk at a time."""
    n = index.size
    size = chunk_rows(h)
    for s in range(0, n, size):
        yield s, node_probabilities_rows(h, logits, index[s: s + size], temperature)
        if progress is not None:
            progress(min(s + size, n) / n)


class _ProgressBar:
    """A throttled st.progress for a long job (about 20 updates), removed when done. Small jobs
    show nothing. It runs inside cached functions, so its few messages are replayed on cache hits,
    ending with the removal: nothing stays on the page."""

    def __init__(self, text: str, n_chunks: int):
        self.text = text
        self.bar = st.progress(0.0, text=f"{text} 0%") if n_chunks >= PROGRESS_MIN_CHUNKS else None
        self.shown = 0

    def __call__(self, frac: float) -> None:
        step = int(frac * 20)
        if self.bar is not None and step > self.shown:
            self.shown = step
            self.bar.progress(min(frac, 1.0), text=f"{self.text} {frac:.0%}")

    def done(self) -> None:
        if self.bar is not None:
            self.bar.empty()


def chunked_decision_paths(h: Hierarchy, logits: np.ndarray, index: np.ndarray, temperature: float,
                           progress: Callable[[float], None] | None = None
                           ) -> tuple[dict[str, DecisionPaths], np.ndarray]:
    """Every rule's decision paths for rows ``index`` of ``logits``, and each row's top-1 leaf
    probability, one chunk of rows at a time."""
    parts: dict[str, list[DecisionPaths]] = {rule: [] for rule in RULES}
    leaf_conf = np.empty(index.size)
    for s, probs in node_probability_chunks(h, logits, index, temperature, progress):
        leaf = argmax_leaf(h, probs)
        leaf_conf[s: s + leaf.size] = probs[np.arange(leaf.size), leaf]
        for rule in RULES:
            parts[rule].append(decision_paths(h, probs, rule, leaf=leaf))
    return {rule: concat_decision_paths(parts[rule]) for rule in RULES}, leaf_conf


# ---------------------------------------------------------------------------- evaluation sets
DENSE_LIMIT_BYTES = 1_000_000_000  # the most memory `EvalSet.node_probs` may take (50,000 × 1,372 float32: 0.27 GB)


@dataclass(frozen=True, eq=False)
class EvalSet:
    """The samples one view evaluates and each rule's decision paths (never their node probabilities).

    ``index`` selects rows of the bundle's ``source_logits`` (shared, not copied). With TS
    (``temperature`` fitted on ``n_fit`` other samples) or without, these are the protocol's evaluation
    split only (``heldout`` is always True).
    """

    model: str
    location: str
    subset: str
    ts: bool
    heldout: bool
    dataset: Dataset = field(repr=False)
    index: np.ndarray
    labels: np.ndarray
    sample_ids: np.ndarray
    sources: np.ndarray | None
    source_logits: np.ndarray = field(repr=False)
    temperature: float
    n_fit: int
    paths: dict[str, DecisionPaths] = field(repr=False)
    leaf_conf: np.ndarray = field(repr=False)

    @property
    def hierarchy(self) -> Hierarchy:
        return self.dataset.hierarchy

    @property
    def image_dir(self) -> Path | None:
        return self.dataset.find_image_dir()

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @cached_property
    def leaf_pred(self) -> np.ndarray:
        return self.paths["selective"].nodes[:, 0]  # every rule starts at the arg-max leaf

    @cached_property
    def top1(self) -> float:
        return float((self.leaf_pred == self.labels).mean())

    @cached_property
    def id_index(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.sample_ids.tolist())}

    @cached_property
    def most_confident_wrong(self) -> np.ndarray:
        """Rows whose top-1 leaf is wrong, most confident first."""
        wrong = np.flatnonzero(self.leaf_pred != self.labels)
        return wrong[np.argsort(-self.leaf_conf[wrong], kind="stable")]

    @cached_property
    def rows_by_class(self) -> dict[int, np.ndarray]:
        order = np.argsort(self.labels, kind="stable")
        classes, starts = np.unique(self.labels[order], return_index=True)
        return dict(zip(classes.tolist(), np.split(order, starts[1:])))

    def node_probs_rows(self, rows: np.ndarray) -> np.ndarray:
        """Node probabilities of some rows, shape (len(rows), n_nodes), computed on demand."""
        rows = np.asarray(rows, dtype=np.int64)
        return node_probabilities_rows(self.hierarchy, self.source_logits, self.index[rows], self.temperature)

    def node_row(self, i: int) -> np.ndarray:
        """Node probabilities of row ``i`` as the rules see them (clipped to 1, root = 1)."""
        row = np.minimum(self.node_probs_rows(np.array([i]))[0], 1.0)
        row[self.hierarchy.root] = 1.0
        return row

    @cached_property
    def node_probs(self) -> NodeProbabilities:
        """The node probabilities as a lazy (n, n_nodes) array: rows are computed when indexed."""
        return NodeProbabilities(self)


class NodeProbabilities:
    """An EvalSet's node probabilities, shape (n, n_nodes), computed on demand.

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

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32 if self._es.source_logits.dtype in (np.float16, np.float32) else np.float64)

    def __len__(self) -> int:
        return self._es.n

    def _check_size(self, n_rows: int) -> None:
        size = n_rows * self._es.hierarchy.n_nodes * self.dtype.itemsize
        if size > DENSE_LIMIT_BYTES:
            raise DataError(f"{self._es.model}: {n_rows:,} samples × {self._es.hierarchy.n_nodes:,} nodes is too large to "
                            f"hold every node probability in memory ({size / 1e9:.1f} GB); use a subset")

    def __getitem__(self, key):
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if self._dense is not None:
            return self._dense[key]
        if isinstance(rows, (int, np.integer)):
            return self._es.node_probs_rows(np.array([int(rows)]))[0][rest]
        idx = np.arange(self._es.n)[rows]
        self._check_size(idx.size)
        return self._es.node_probs_rows(idx)[(slice(None), *rest)]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._dense is None:
            self._check_size(self._es.n)
            self._dense = self._es.node_probs_rows(np.arange(self._es.n))
        return self._dense if dtype is None else self._dense.astype(dtype)


@_cache_resource(max_entries=16, show_spinner=False)
def _temperature(location: str, file_stamp: tuple, subset: str) -> tuple[float, int]:
    # One T per model, as `hsc evaluate` fits it (``subset`` only picks the samples evaluated).
    bundle = _bundle(location, file_stamp)
    cal = calibration_split(bundle)
    return fit_temperature(bundle.logits[cal], bundle.labels[cal]), int(cal.sum())


def temperature(location: str, subset: str) -> tuple[float, int]:
    """(T, samples it was fitted on) for the model at ``location`` (the same for every ``subset``)."""
    return _temperature(location, stamp(location), subset)


@_cache_resource(max_entries=12, show_spinner=False)  # a progress bar when it takes long
def _eval_set(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
              heldout: bool) -> EvalSet:
    bundle = _bundle(location, file_stamp)
    ds = _load_dataset(*dataset_key)
    h = ds.hierarchy
    mask = subset_mask(bundle, subset) & ~calibration_split(bundle)  # the protocol's evaluation split
    index = np.flatnonzero(mask)
    if index.size == 0:
        raise DataError(f"{bundle.name}: no samples to evaluate in subset {subset!r}")
    t, n_fit = _temperature(location, file_stamp, subset) if ts else (1.0, 0)
    bar = _ProgressBar(f"Decision paths of {index.size:,} samples × {h.n_nodes:,} nodes:", _n_chunks(h, index.size))
    paths, leaf_conf = chunked_decision_paths(h, bundle.logits, index, t, bar)
    bar.done()
    return EvalSet(
        model=model, location=location, subset=subset, ts=ts, heldout=bool(ts or heldout), dataset=ds,
        index=index, labels=bundle.labels[index], sample_ids=bundle.sample_ids[index],
        sources=None if bundle.sources is None else bundle.sources[index], source_logits=bundle.logits,
        temperature=float(t), n_fit=n_fit, paths=paths, leaf_conf=leaf_conf,
    )


def eval_set(model: str, location: str, subset: str = ALL, ts: bool = False, heldout: bool = False) -> EvalSet:
    file_stamp = stamp(location)
    _bundle(location, file_stamp)  # a broken file's own error first
    # Every set is the protocol's evaluation split: ``heldout`` is kept for callers, and always True.
    return _eval_set(model, location, file_stamp, _dataset_key(model, location), subset, bool(ts), True)


def _es_key(es: EvalSet) -> tuple:
    """The cache key of ``es`` (to rebuild it inside other cached functions)."""
    return (es.model, es.location, stamp(es.location), _dataset_key(es.model, es.location), es.subset, es.ts,
            es.heldout)


@_cache_resource(max_entries=12, show_spinner=False)  # a progress bar when it takes long
def _theta_grid(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
                heldout: bool, dec: int) -> np.ndarray:
    """The authors' rounded θ grid over every node probability of the view, chunk by chunk."""
    es = _eval_set(model, location, file_stamp, dataset_key, subset, ts, heldout)
    present = np.zeros(10**dec + 1, dtype=bool)
    bar = _ProgressBar(f"The authors' θ grid over {es.n:,} samples × {es.hierarchy.n_nodes:,} nodes:",
                       _n_chunks(es.hierarchy, es.n))
    for _, probs in node_probability_chunks(es.hierarchy, es.source_logits, es.index, es.temperature, bar):
        if threshold_grid_keys(probs, dec, present).all():
            break  # every grid value is present: the rest cannot add any
    bar.done()
    return np.flatnonzero(present) / 10**dec


# ---------------------------------------------------------------------------- curves
@dataclass(frozen=True, eq=False)
class CurveSet:
    """Each rule's RC curve, a decimated copy (≤ DISPLAY_POINTS) for plotting, and the exact
    curves that give the operating point at any θ (the same as ``curves`` unless ``dec`` is set:
    a rounded-grid curve only has points at grid values of θ)."""

    curves: dict[str, RCCurve]
    display: dict[str, tuple[np.ndarray, np.ndarray]]
    exact: dict[str, RCCurve]

    def at(self, rule: str, theta: float) -> tuple[float, float]:
        """(coverage, risk) of ``rule`` at θ: ``exact[rule].at(theta)``."""
        return self.exact[rule].at(theta)

    def haurc_table(self) -> pd.DataFrame:
        sel = self.curves["selective"].haurc
        rows = []
        for rule, c in self.curves.items():
            rows.append({
                "rule": RULE_LABELS[rule],
                "hAURC ×1000": 1000 * c.haurc,
                "hierarchical gain vs Selective (%)": 0.0 if rule == "selective" else hierarchical_gain(sel, c.haurc),
                "points": int(c.coverage.size),
            })
        return pd.DataFrame(rows)


def decimate(x: np.ndarray, y: np.ndarray, max_points: int = DISPLAY_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points, evenly spaced along the curve, first and last kept."""
    n = x.size
    if n <= max_points:
        return np.asarray(x, float), np.asarray(y, float)
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return np.asarray(x[idx], float), np.asarray(y[idx], float)


@_cache_resource(max_entries=32, show_spinner="Computing risk–coverage curves…")
def _curve_set(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
               heldout: bool, loss: str, dec: int | None) -> CurveSet:
    es = _eval_set(model, location, file_stamp, dataset_key, subset, ts, heldout)
    exact = {rule: rc_curve_from_paths(es.hierarchy, es.paths[rule], es.labels, loss) for rule in RULES}
    if dec is None:
        curves = exact
    else:
        # (Derived from scratch: RCCurve.at() of a dec curve indexes its exact events, so the
        # operating points come from the exact curves, which agree at every grid θ.)
        grid = _theta_grid(model, location, file_stamp, dataset_key, subset, ts, heldout, dec)
        curves = {rule: rc_curve_from_paths(es.hierarchy, es.paths[rule], es.labels, loss, grid) for rule in RULES}
    # Plot in θ order (the curve's own order), so non-monotone rules draw their true path.
    display = {rule: decimate(c.coverage, c.risk) for rule, c in curves.items()}
    return CurveSet(curves, display, exact)


def curve_set(es: EvalSet, loss: str = "01", dec: int | None = None) -> CurveSet:
    return _curve_set(*_es_key(es), loss, dec)


@_cache_resource(max_entries=12, show_spinner="Computing calibration–coverage curves…")
def _cc_curves(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
               heldout: bool, n_bins: int) -> dict[str, CCCurve]:
    es = _eval_set(model, location, file_stamp, dataset_key, subset, ts, heldout)
    grid = _theta_grid(model, location, file_stamp, dataset_key, subset, ts, heldout, 2)
    return {  # with the paths and the grid given, no node probabilities are read
        rule: calibration_coverage_curve(es.hierarchy, None, es.labels, rule, thresholds=grid, n_bins=n_bins,
                                         paths=es.paths[rule])
        for rule in RULES
    }


def cc_curves(es: EvalSet, n_bins: int = 15) -> dict[str, CCCurve]:
    return _cc_curves(*_es_key(es), int(n_bins))


@_cache_resource(max_entries=16, show_spinner="Bootstrapping 95 % intervals…")
def _intervals(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
               heldout: bool, loss: str):
    from hsc_core.core.uncertainty import bootstrap_haurc

    es = _eval_set(model, location, file_stamp, dataset_key, subset, ts, heldout)
    return bootstrap_haurc(es.hierarchy, es.labels, es.paths, loss=loss)


def haurc_intervals(es: EvalSet, loss: str = "01"):
    """95 % paired bootstrap intervals of every rule's hAURC and gain (``core.uncertainty``)."""
    return _intervals(*_es_key(es), loss)


# ---------------------------------------------------------------------------- summaries
def model_summary(model: str, location: str, subset: str) -> dict:
    """One Overview row: top-1, T, and hAURC×1000 / gain per rule without and with TS, all on the
    protocol's evaluation split of the subset (so the two settings are comparable)."""
    plain = eval_set(model, location, subset, ts=False)
    scaled = eval_set(model, location, subset, ts=True)
    row: dict = {"model": model, "samples": plain.n, "top-1 accuracy": plain.top1,
                 "T": scaled.temperature, "calibration samples": scaled.n_fit}
    for tag, es in (("no TS", plain), ("TS", scaled)):
        cs = curve_set(es)
        sel = cs.curves["selective"].haurc
        for rule in RULES:
            row[f"hAURC×1000 {RULE_LABELS[rule]} ({tag})"] = 1000 * cs.curves[rule].haurc
        for rule in RULES[1:]:
            row[f"gain % {RULE_LABELS[rule]} ({tag})"] = hierarchical_gain(sel, cs.curves[rule].haurc)
    return row


def per_rule_summary(rows: list[dict]) -> pd.DataFrame:
    """``model_summary`` rows reshaped to one row per (model, rule): hAURC×1000 and gain without
    and with TS side by side (Selective's gain is 0)."""
    out = []
    for row in rows:
        for rule in RULES:
            label = RULE_LABELS[rule]
            entry = {"model": row["model"], "rule": label}
            for tag in ("no TS", "TS"):
                entry[f"hAURC×1000 ({tag})"] = row[f"hAURC×1000 {label} ({tag})"]
            for tag in ("no TS", "TS"):
                entry[f"gain % ({tag})"] = row.get(f"gain % {label} ({tag})", 0.0)
            out.append(entry)
    return pd.DataFrame(out)


def compare_row(es: EvalSet, loss: str, dec: int | None) -> dict:
    cs = curve_set(es, loss, dec)
    sel = cs.curves["selective"].haurc
    row: dict = {"model": es.model, "samples": es.n, "top-1 accuracy": es.top1,
                 "T": es.temperature if es.ts else float("nan")}
    for rule in RULES:
        row[f"hAURC×1000 {RULE_LABELS[rule]}"] = 1000 * cs.curves[rule].haurc
    for rule in RULES[1:]:
        row[f"gain % {RULE_LABELS[rule]}"] = hierarchical_gain(sel, cs.curves[rule].haurc)
    return row


def correctness(es: EvalSet, nodes: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    labels = es.labels if rows is None else es.labels[rows]
    return hierarchical_correctness(es.hierarchy, nodes, labels)


# ---------------------------------------------------------------------------- guaranteed accuracy
@_cache_resource(max_entries=6, show_spinner=False)  # a progress bar when it takes long
def _tight_thresholds(model: str, location: str, file_stamp: tuple, dataset_key: tuple, subset: str, ts: bool,
                      heldout: bool) -> np.ndarray:
    from hsc_core.core.thresholds import climbing_tight_thresholds

    es = _eval_set(model, location, file_stamp, dataset_key, subset, ts, heldout)
    out = np.empty(es.n)
    bar = _ProgressBar(f"Tight Climbing thresholds of {es.n:,} samples:", _n_chunks(es.hierarchy, es.n))
    for s, probs in node_probability_chunks(es.hierarchy, es.source_logits, es.index, es.temperature, bar):
        out[s: s + probs.shape[0]] = climbing_tight_thresholds(es.hierarchy, probs, es.labels[s: s + probs.shape[0]])
    bar.done()
    return out


def tight_thresholds(es: EvalSet) -> np.ndarray:
    return _tight_thresholds(*_es_key(es))
