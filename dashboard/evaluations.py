"""The evaluations job: each model's one cached ``ModelEvaluation`` and what the pages draw from it.

Every number comes from the evaluation layer (``hsc_core.evaluation``): one ``ModelEvaluation``
per (file, file stamp, data set, subset) is kept with ``st.cache_resource`` (``evaluation``), and
its ``setting(ts)`` computes and keeps the decision paths, curves, intervals and thresholds, once,
under its own lock. Pages ask that ``EvaluationSet`` (``ModelContext.view``) every question about
samples and numbers. This module adds only what a page needs around it: progress bars for the long
jobs (``progress``), the ``ModelContext`` (the view plus the model's name, location, subset and
``Dataset``), decimated curves for plotting, and the node probabilities as a lazy matrix for the
repeated-split baselines (dense up to ``DENSE_LIMIT_BYTES``). Chunk sizes follow the one memory
budget, ``HSC_MEMORY_BUDGET_MB`` (``hsc_core.config``).

Evaluation protocol (``hsc_core.core.protocol``): T is fitted on a fixed, seeded, class-stratified
10 % calibration split of each file, and every metric, with or without TS, on the other 90 %.
Whatever is computed from this session's uploads (files or data sets) is cached for this session
only and released with it (``catalog.cache_resource``, ``session_memory``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from hsc_core.core.curves import RCCurve
from hsc_core.core.risk import Loss
from hsc_core.core.rule_registry import is_rule, rule_label
from hsc_core.core.rules import RULES
from hsc_core.core.validation import clip
from hsc_core.datasets.registry import Dataset
from hsc_core.evaluation import EvaluationSet, ModelEvaluation, column_label
from hsc_core.evaluation.results import GAIN_RANGE_COLUMN
from hsc_core.evaluation.subsets import ALL

from . import progress
from .catalog import (
    BUNDLES_KEPT,
    IMAGENET,
    SYNTHETIC_PREFIX,
    UPLOAD_PREFIX,
    DataError,
    _bundle,
    _dataset_key,
    _load_dataset,
    cache_resource,
    load_bundle,
    stamp,
    subset_mask,
)
from .progress import ProgressBar

DISPLAY_POINTS = 1500  # points per curve sent to the browser; metrics always use the full curve
DENSE_LIMIT_BYTES = 1_000_000_000  # most memory `ModelContext.node_probs` may take (50,000 × 1,372 float32: 0.27 GB)

V = TypeVar("V")


# ---------------------------------------------------------------------------- the evaluation
#: Models whose evaluation (and what was computed on it) the server keeps; a page that goes over every
#: listed model takes at most this many, or each run would evict what the last one computed.
EVALUATIONS_KEPT = BUNDLES_KEPT  # their files are kept as long (``catalog._bundle``)


@cache_resource(max_entries=EVALUATIONS_KEPT, show_spinner=False)
def _evaluation(location: str, file_stamp: tuple, dataset_key: tuple, subset: str, _model: str) -> ModelEvaluation:
    # Cheap to build: T, decision paths and curves are computed (once) when first asked for.
    with progress.in_floating_slot():  # the loads' own spinners
        bundle = _bundle(location, file_stamp)
    ds = _load_dataset(*dataset_key)
    mask = subset_mask(bundle, subset)
    return ModelEvaluation.from_bundle(bundle, ds.hierarchy, name=_model, dataset=ds.name,
                                       subset=None if mask.all() else mask, subset_name=subset,
                                       file=file_label(location), members_path=_members_path(location))


def _members_path(location: str) -> str:
    """The file whose manifest's ensemble members are read: a shipped or listed file; "" (none) for
    an upload or a synthetic model, which have no folder to find members in."""
    return "" if location.startswith((UPLOAD_PREFIX, SYNTHETIC_PREFIX)) else location


@cache_resource(max_entries=8, show_spinner=False)
def _sensitivity(_es: ModelContext, key: tuple, trees: tuple[str, ...]) -> list:
    from hsc_core.datasets.imagenet_trees import imagenet_tree
    from hsc_core.evaluation.sensitivity import hierarchy_sensitivity

    ev = _es.view.evaluation
    return hierarchy_sensitivity(ev.logits, ev.labels, {t: imagenet_tree(t) for t in trees}, name=_es.model,
                                 dataset=IMAGENET, ts=_es.view.ts, sample_ids=ev.sample_ids, sources=ev.sources,
                                 subset=ev.subset, subset_name=ev.subset_name)


def hierarchy_sensitivity(es: ModelContext, trees: tuple[str, ...]) -> list:
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
    with progress.in_floating_slot():  # its "Loading logits…" spinner
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


@dataclass(frozen=True, eq=False)
class ModelContext:
    """One model, subset and TS setting as a page holds it: the layer's ``EvaluationSet``
    (``view``: ask it every question about samples and numbers, ``view.labels``, ``view.paths``,
    ``view.ts``…) plus what only the dashboard knows: the model's name and location, the subset
    key and its ``Dataset`` (for the image folder), and the node probabilities as a guarded lazy
    matrix. Cheap: made on every call of ``model_context``; ``key`` identifies it for the pages'
    own caches."""

    model: str
    location: str
    subset: str
    dataset: Dataset = field(repr=False)
    view: EvaluationSet = field(repr=False)
    key: tuple  # (location, file stamp, data-set key, subset, ts): for the pages' own caches

    @property
    def image_dir(self) -> Path | None:
        return self.dataset.find_image_dir()

    @cached_property
    def node_probs(self) -> NodeProbabilities:
        """The node probabilities as a lazy (n, n_nodes) array: rows are computed when indexed."""
        return NodeProbabilities(self)


def model_context(model: str, location: str, subset: str = ALL, ts: bool = False) -> ModelContext:
    """The model's evaluation samples of one TS setting, their decision paths built (with a
    progress bar) the first time any session asks."""
    key = _evaluation_key(model, location, subset)
    ev = _evaluation(*key, model)
    n = ev.rows_for(ts).size
    with ProgressBar(f"Decision paths of {n:,} samples × {ev.hierarchy.n_nodes:,} nodes:") as bar:
        view = ev.setting(bool(ts), progress=bar)
    return ModelContext(model, location, subset, _load_dataset(*key[2]), view, (*key, bool(ts)))


class NodeProbabilities:
    """A ModelContext's node probabilities, shape (n, n_nodes), computed on demand
    (``EvaluationSet.node_probabilities``).

    Indexing rows (``p[i]``, ``p[i, :n_leaves]``, ``p[rows, v]``) computes only those rows;
    ``np.asarray(p)`` (the few library calls that need every row, e.g. the repeated-split baselines)
    builds the whole matrix once, refused with a DataError beyond ``DENSE_LIMIT_BYTES``.
    """

    ndim = 2

    def __init__(self, es: ModelContext):
        self._es = es
        self._dense: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self._es.view.n, self._es.view.hierarchy.n_nodes)

    @cached_property
    def dtype(self) -> np.dtype:
        return self._es.view.node_probabilities([0]).dtype  # the layer's precision

    def __len__(self) -> int:
        return self._es.view.n

    def _check_size(self, n_rows: int) -> None:
        size = n_rows * self._es.view.hierarchy.n_nodes * self.dtype.itemsize
        if size > DENSE_LIMIT_BYTES:
            raise DataError(f"{clip(self._es.model)}: {n_rows:,} samples × {self._es.view.hierarchy.n_nodes:,} nodes "
                            f"is too large to hold every node probability in memory ({size / 1e9:.1f} GB); "
                            "use a subset")

    def __getitem__(self, key):
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if self._dense is not None:
            return self._dense[key]
        if isinstance(rows, (int, np.integer)):
            return self._es.view.node_probabilities([int(rows)])[0][rest]
        idx = np.arange(self._es.view.n)[rows]
        self._check_size(idx.size)
        return self._es.view.node_probabilities(idx)[(slice(None),) + tuple(rest)]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._dense is None:
            self._check_size(self._es.view.n)
            self._dense = self._es.view.node_probabilities(np.arange(self._es.view.n))
        return self._dense if dtype is None else self._dense.astype(dtype)


# ---------------------------------------------------------------------------- what pages draw
@dataclass(frozen=True, eq=False)
class CurveSet:
    """Each rule's RC curve (the layer's, exact or on the authors' ``dec`` grid), a decimated copy
    (≤ DISPLAY_POINTS) for plotting, and the exact curves that give the operating point at any θ
    (the same as ``curves`` unless ``dec`` is set: a rounded-grid curve only has points at grid
    values of θ)."""

    es: ModelContext
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
        hAURC×1000 and gain % (``column_label`` names), and the curve's number of points; when a
        rule's curve stops short of coverage 1, a ``GAIN_RANGE_COLUMN`` says the coverage range its
        gain is over (``EvaluationSet.gain_range``), "" for the rules compared over the whole range."""
        v, loss, dec = self.es.view, self.loss, self.dec
        table = pd.DataFrame([{"rule": rule_label(rule), column_label("haurc"): 1000 * v.haurc(rule, loss, dec),
                               column_label("gain_percent"): v.gain(rule, loss, dec),
                               "points": int(self.curves[rule].coverage.size)}
                              for rule in rules])
        ranges = [v.gain_range(rule, loss, dec) if rule != "selective" else None for rule in rules]
        if any(g is not None and g.restricted for g in ranges):
            table.insert(3, GAIN_RANGE_COLUMN, [g.range_text() if g is not None and g.restricted else ""
                                                for g in ranges])
        return table


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


def _grid_bar(es: ModelContext) -> ProgressBar:
    return ProgressBar(f"The authors' θ grid over {es.view.n:,} samples × {es.view.hierarchy.n_nodes:,} nodes:")


def curve_set(es: ModelContext, loss: Loss = "01", dec: int | None = None) -> CurveSet:
    """The layer's RC curves of ``es`` with their plotting copies (in θ order, the curve's own, so
    non-monotone rules draw their true path)."""
    with progress.spinner("Computing risk–coverage curves…"), _grid_bar(es) as bar:
        given = es.view.curves(loss, dec, progress=bar)
        given_exact = es.view.curves(loss)
    curves = RuleCurves(given, lambda rule: es.view.curve(rule, loss, dec))
    exact = RuleCurves(given_exact, lambda rule: es.view.curve(rule, loss))
    display = RuleCurves({rule: decimate(c.coverage, c.risk) for rule, c in given.items()},
                         lambda rule: decimate(curves[rule].coverage, curves[rule].risk))
    return CurveSet(es, loss, dec, curves, display, exact)


def cc_curves(es: ModelContext, n_bins: int = 15) -> RuleCurves:
    """rule → calibration–coverage curve on the authors' 2-decimal θ grid (the layer's): the
    paper's four at once, any other registered rule on first use."""
    with progress.spinner("Computing calibration–coverage curves…"), _grid_bar(es) as bar:
        given = es.view.cc_curves(int(n_bins), progress=bar)
    return RuleCurves(given, lambda rule: es.view.cc_curve(rule, int(n_bins)))


def intervals_on_request(es: ModelContext) -> bool:
    """Whether this set's bootstrap waits for a request (many samples, or a deep tree whose
    decision paths make it as much work: ``uncertainty.intervals_on_request``)."""
    from hsc_core.core.rules import RULES
    from hsc_core.core.uncertainty import intervals_on_request as on_request

    view = es.view
    return on_request(view.n, max(int(view.decision_paths(r).nodes.shape[1]) for r in RULES))


def tight_thresholds(es: ModelContext) -> np.ndarray:
    """Each sample's minimal θ at which Climbing is correct (the layer's, with a progress bar)."""
    with ProgressBar(f"Tight Climbing thresholds of {es.view.n:,} samples:") as bar:
        return es.view.tight_thresholds(progress=bar)
