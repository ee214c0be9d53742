"""Where the dashboard's models come from, and every heavy computation, cached.

A *model* is a cached-logits ``.npz`` file (``hsc_core.datasets.logits_io``), named by its file stem.
The catalog is every ``.npz`` in ``$HSC_CACHED_LOGITS_DIR`` (default ``<repo>/cached_logits``)
plus the files uploaded in this browser session. ``HSC_SYNTHETIC=<n>`` replaces the catalog with
one synthetic model of ``n`` samples on the ImageNet tree: for the benchmark and demos only.

Heavy results (node probabilities, decision paths, curves) are kept with ``st.cache_resource``:
they are large numpy arrays that must not be copied (``st.cache_data`` would pickle and copy
them on every rerun). Callers treat them as read-only.

Temperature scaling (TS): T is fitted on a fixed random half of the samples (seed 0, stratified
by data source) and every metric with TS is computed on the *other* half only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from hsc_core.core.curves import (
    CCCurve,
    RCCurve,
    calibration_coverage_curve,
    hierarchical_gain,
    hierarchical_rc_curve,
    rounded_threshold_grid,
)
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import LogitsBundle, LogitsFileError, list_cached_logits, load_logits
from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax
from hsc_core.core.risk import hierarchical_correctness
from hsc_core.core.rules import RULE_LABELS, RULES, DecisionPaths, decision_paths

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHED_LOGITS_ENV = "HSC_CACHED_LOGITS_DIR"
SYNTHETIC_ENV = "HSC_SYNTHETIC"
SYNTHETIC_PREFIX = "synthetic:"
SPLIT_SEED = 0
DEFAULT_MODEL = "efficientnet_lite0"
DISPLAY_POINTS = 1500  # points per curve sent to the browser; metrics always use the full curve

# The two sources of the shipped ImageNet sample, by their tags in the ``sources`` array.
KNOWN_SUBSETS = {
    "typical": ("RomanPlaud/hierarchical_decision_rules (224x224)", "Typical"),
    "easier": ("VeriSilicon/acuity-dataset (227x227)", "Easier"),
}
ALL = "all"


class DataError(ValueError):
    """A model's file cannot be used by the dashboard (the message says why)."""


LOAD_ERRORS = (LogitsFileError, DataError, ValueError, OSError)


# ---------------------------------------------------------------------------- catalog
def cached_logits_dir() -> Path:
    env = os.environ.get(CACHED_LOGITS_ENV)
    return Path(env) if env else REPO_ROOT / "cached_logits"


def synthetic_samples() -> int | None:
    """Samples of the synthetic model when ``HSC_SYNTHETIC`` is set (benchmark/demo only)."""
    raw = os.environ.get(SYNTHETIC_ENV, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        return None
    return n if n > 0 else None


def model_catalog(uploaded: dict[str, str] | None = None) -> dict[str, str]:
    """Model name → location (a file path, or ``synthetic:<n>``), in display order."""
    n = synthetic_samples()
    if n is not None:
        return {f"synthetic-{n}": f"{SYNTHETIC_PREFIX}{n}"}
    catalog = {p.stem: str(p) for p in list_cached_logits(cached_logits_dir())}
    for name, loc in (uploaded or {}).items():
        catalog.setdefault(name, loc)
    return catalog


def default_model(catalog: dict[str, str]) -> str | None:
    if DEFAULT_MODEL in catalog:
        return DEFAULT_MODEL
    return next(iter(catalog), None)


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


# ---------------------------------------------------------------------------- loading
@st.cache_resource(max_entries=8, show_spinner="Loading logits…")
def _bundle(location: str, file_stamp: tuple) -> LogitsBundle:
    if location.startswith(SYNTHETIC_PREFIX):
        from hsc_core.core.synthetic import synthetic_logits

        n = int(location[len(SYNTHETIC_PREFIX):])
        logits, labels = synthetic_logits(imagenet_hierarchy(), n, top1=0.8, seed=0)
        ids = np.array([f"synthetic_{i:06d}" for i in range(n)])
        manifest = {"model": "synthetic", "dataset": f"synthetic ({n} samples, seed 0)"}
        return LogitsBundle(logits, labels.astype(np.int64), ids, None, manifest, f"synthetic-{n}")
    bundle = load_logits(location)
    hierarchy_for(bundle)  # a class-count mismatch is an error at load time
    return bundle


def load_bundle(location: str) -> LogitsBundle:
    """The validated bundle at ``location`` (raises LogitsFileError / DataError with a message)."""
    return _bundle(location, stamp(location))


def hierarchy_for(bundle: LogitsBundle) -> Hierarchy:
    h = imagenet_hierarchy()
    if bundle.n_classes != h.n_leaves:
        raise DataError(
            f"{bundle.name}: the logits have {bundle.n_classes} classes but the ImageNet hierarchy has "
            f"{h.n_leaves} leaves; this dashboard needs ImageNet-1k logits in the standard class order"
        )
    return h


def validate_file(path: str) -> LogitsBundle:
    """Load and check an uploaded file without caching it (raises on any problem)."""
    bundle = load_logits(path)
    hierarchy_for(bundle)
    return bundle


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


def calibration_half(n: int, sources: np.ndarray | None, seed: int = SPLIT_SEED) -> np.ndarray:
    """Boolean mask of the half used to fit T: a random half of each source (fixed seed)."""
    rng = np.random.default_rng(seed)
    cal = np.zeros(n, dtype=bool)
    if sources is None:
        groups = [np.arange(n)]
    else:
        src = np.asarray(sources).astype(str)
        groups = [np.flatnonzero(src == tag) for tag in np.unique(src)]
    for idx in groups:
        perm = rng.permutation(idx)
        cal[perm[: len(idx) // 2]] = True
    return cal


# ---------------------------------------------------------------------------- evaluation sets
@dataclass(frozen=True, eq=False)
class EvalSet:
    """The samples one view evaluates, their node probabilities and each rule's decision paths.

    ``index`` selects rows of the bundle. With TS (``temperature`` fitted on ``n_fit`` other
    samples) or ``heldout`` these are the held-out half only.
    """

    model: str
    location: str
    subset: str
    ts: bool
    heldout: bool
    hierarchy: Hierarchy
    index: np.ndarray
    labels: np.ndarray
    sample_ids: np.ndarray
    sources: np.ndarray | None
    logits: np.ndarray
    temperature: float
    n_fit: int
    node_probs: np.ndarray
    paths: dict[str, DecisionPaths] = field(repr=False)

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @cached_property
    def leaf_pred(self) -> np.ndarray:
        return self.node_probs[:, : self.hierarchy.n_leaves].argmax(axis=1)

    @cached_property
    def leaf_conf(self) -> np.ndarray:
        return self.node_probs[np.arange(self.n), self.leaf_pred]

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

    def node_row(self, i: int) -> np.ndarray:
        """Node probabilities of row ``i`` as the rules see them (clipped to 1, root = 1)."""
        row = np.minimum(self.node_probs[i], 1.0)
        row[self.hierarchy.root] = 1.0
        return row


@st.cache_resource(max_entries=16, show_spinner=False)
def _temperature(location: str, file_stamp: tuple, subset: str) -> tuple[float, int]:
    bundle = _bundle(location, file_stamp)
    cal = calibration_half(bundle.n_samples, bundle.sources) & subset_mask(bundle, subset)
    if cal.sum() < 2:
        raise DataError(f"{bundle.name}: too few samples to fit a temperature on half of this subset")
    return fit_temperature(bundle.logits[cal], bundle.labels[cal]), int(cal.sum())


def temperature(location: str, subset: str) -> tuple[float, int]:
    """(T, samples it was fitted on) for the model at ``location`` and ``subset``."""
    return _temperature(location, stamp(location), subset)


@st.cache_resource(max_entries=12, show_spinner="Computing node probabilities and decision paths…")
def _eval_set(model: str, location: str, file_stamp: tuple, subset: str, ts: bool, heldout: bool) -> EvalSet:
    bundle = _bundle(location, file_stamp)
    h = hierarchy_for(bundle)
    mask = subset_mask(bundle, subset)
    if ts or heldout:
        mask = mask & ~calibration_half(bundle.n_samples, bundle.sources)
    index = np.flatnonzero(mask)
    if index.size == 0:
        raise DataError(f"{bundle.name}: no samples to evaluate in subset {subset!r}")
    t, n_fit = _temperature(location, file_stamp, subset) if ts else (1.0, 0)
    logits = bundle.logits[index]
    probs = node_probabilities(h, softmax(logits, t))
    paths = {rule: decision_paths(h, probs, rule) for rule in RULES}
    return EvalSet(
        model=model, location=location, subset=subset, ts=ts, heldout=bool(ts or heldout),
        hierarchy=h, index=index, labels=bundle.labels[index], sample_ids=bundle.sample_ids[index],
        sources=None if bundle.sources is None else bundle.sources[index], logits=logits,
        temperature=float(t), n_fit=n_fit, node_probs=probs, paths=paths,
    )


def eval_set(model: str, location: str, subset: str = ALL, ts: bool = False, heldout: bool = False) -> EvalSet:
    return _eval_set(model, location, stamp(location), subset, bool(ts), bool(heldout))


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


@st.cache_resource(max_entries=32, show_spinner="Computing risk–coverage curves…")
def _curve_set(model: str, location: str, file_stamp: tuple, subset: str, ts: bool, heldout: bool,
               loss: str, dec: int | None) -> CurveSet:
    es = _eval_set(model, location, file_stamp, subset, ts, heldout)
    exact = {
        rule: hierarchical_rc_curve(es.hierarchy, es.node_probs, es.labels, rule, loss=loss, dec=None,
                                    paths=es.paths[rule])
        for rule in RULES
    }
    if dec is None:
        curves = exact
    else:
        # (Derived from scratch: RCCurve.at() of a dec curve indexes its exact events, so the
        # operating points come from the exact curves, which agree at every grid θ.)
        curves = {
            rule: hierarchical_rc_curve(es.hierarchy, es.node_probs, es.labels, rule, loss=loss, dec=dec,
                                        paths=es.paths[rule])
            for rule in RULES
        }
    # Plot in θ order (the curve's own order), so non-monotone rules draw their true path.
    display = {rule: decimate(c.coverage, c.risk) for rule, c in curves.items()}
    return CurveSet(curves, display, exact)


def curve_set(es: EvalSet, loss: str = "01", dec: int | None = None) -> CurveSet:
    return _curve_set(es.model, es.location, stamp(es.location), es.subset, es.ts, es.heldout, loss, dec)


@st.cache_resource(max_entries=12, show_spinner="Computing calibration–coverage curves…")
def _cc_curves(model: str, location: str, file_stamp: tuple, subset: str, ts: bool, heldout: bool,
               n_bins: int) -> dict[str, CCCurve]:
    es = _eval_set(model, location, file_stamp, subset, ts, heldout)
    grid = rounded_threshold_grid(es.node_probs, 2)
    return {
        rule: calibration_coverage_curve(es.hierarchy, es.node_probs, es.labels, rule, thresholds=grid,
                                         n_bins=n_bins, paths=es.paths[rule])
        for rule in RULES
    }


def cc_curves(es: EvalSet, n_bins: int = 15) -> dict[str, CCCurve]:
    return _cc_curves(es.model, es.location, stamp(es.location), es.subset, es.ts, es.heldout, int(n_bins))


# ---------------------------------------------------------------------------- summaries
def model_summary(model: str, location: str, subset: str) -> dict:
    """One Overview row: top-1 (all samples of the subset), T, and hAURC×1000 / gain per rule
    without and with TS, both on the same held-out half so the two are comparable."""
    full = eval_set(model, location, subset)
    plain = eval_set(model, location, subset, ts=False, heldout=True)
    scaled = eval_set(model, location, subset, ts=True)
    row: dict = {"model": model, "samples": full.n, "top-1 accuracy": full.top1,
                 "T": scaled.temperature, "held-out samples": scaled.n}
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
@st.cache_resource(max_entries=6, show_spinner="Computing each sample's tight Climbing threshold…")
def _tight_thresholds(model: str, location: str, file_stamp: tuple, subset: str, ts: bool, heldout: bool) -> np.ndarray:
    from hsc_core.core.thresholds import climbing_tight_thresholds

    es = _eval_set(model, location, file_stamp, subset, ts, heldout)
    return np.asarray(climbing_tight_thresholds(es.hierarchy, es.node_probs, es.labels), dtype=float)


def tight_thresholds(es: EvalSet) -> np.ndarray:
    return _tight_thresholds(es.model, es.location, stamp(es.location), es.subset, es.ts, es.heldout)
