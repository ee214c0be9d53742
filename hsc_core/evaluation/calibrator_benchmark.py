"""Which calibrator and confidence score serve hierarchical selective classification: every
(calibrator × confidence) pair of a model, judged by hAURC, gain, ECE at the leaves and the area
under the calibration–coverage curve, each with a 95 % paired bootstrap interval (issue 31).

One row per (model, calibrator, confidence) (``BENCHMARK_COLUMNS``); raw values (front ends show
hAURC ×1000 like every table). ``best`` names the columns in which the row is the model's best
(lowest hAURC, ECE and CC area; highest gain). ``hsc report``, the dashboard's Calibrators page and
``benchmark_csv`` show these rows, so a number means the same thing everywhere.

* hAURC and gain: ``EvaluationSet.haurc`` / ``gain`` of ``rule`` (default Climbing; gain vs
  Selective of the same pair), intervals from the layer's bootstrap (``EvaluationSet.bootstrap``).
* ECE at the leaves: the ECE (15 bins, §5.2) of the arg-max leaf's score against its correctness:
  the calibration–coverage curve at its lowest θ (``EvaluationSet.cc_summary``).
* CC area: the area under ``rule``'s calibration–coverage curve (``cc_summary``; lower is better).
  Both ECE numbers treat the node score as a probability: for scores that are not (margin,
  entropy, DOCTOR, energy) they measure how far the score is from one, not a calibration error.
  Their intervals come from ``metric_intervals.bootstrap_statistics`` with the same resamples count
  and seed (sample-weighted ECE and coverage at every θ of the 2-decimal grid).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core.calibrators import calibrator_names, get_calibrator
from ..core.confidence import compatible, confidence_names, get_confidence
from ..core.metric_intervals import batch_for, bootstrap_statistics
from ..core.risk import Loss, hierarchical_correctness
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES
from .model import EvaluationSet, ModelEvaluation
from .results import to_csv

Progress = Callable[[int, int], None]

#: The benchmark's metrics, each with ``_low``/``_high`` columns, and whether higher is better.
BENCHMARK_METRICS: dict[str, bool] = {"haurc": False, "gain_percent": True, "ece_leaves": False, "cc_area": False}
#: How tables name them (hAURC and the CC area ×1000, as the paper prints hAURC).
BENCHMARK_LABELS: dict[str, str] = {"haurc": "hAURC×1000", "gain_percent": "gain %",
                                    "ece_leaves": "ECE at the leaves", "cc_area": "CC area×1000"}
BENCHMARK_SCALE: dict[str, float] = {"haurc": 1000.0, "gain_percent": 1.0, "ece_leaves": 1.0, "cc_area": 1000.0}
BENCHMARK_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "calibrator", "confidence", "rule", "n_eval",
    *(c for m in BENCHMARK_METRICS for c in (m, f"{m}_low", f"{m}_high")), "best", "seconds",
)
N_BINS = 15


def benchmark_pairs(calibrators: Sequence[str] | None = None,
                    confidences: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(calibrator, confidence) pairs, calibrators outer (default: every listed one), without the
    pairs that cannot be scored (``confidence.compatible``)."""
    cals = [get_calibrator(c).key for c in (calibrator_names() if calibrators is None else calibrators)]
    confs = [get_confidence(c).key for c in (confidence_names() if confidences is None else confidences)]
    return [(a, b) for a in dict.fromkeys(cals) for b in dict.fromkeys(confs) if compatible(a, b)]


def weighted_ece_and_cc_area(es: EvaluationSet, rule: str, n_bins: int = N_BINS
                             ) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """f(w) → (B,) ECE at the leaves and f(w) → (B,) CC-curve area, for sample weights w (B, n);
    at w = 1 they equal ``cc_summary``'s "ECE at the lowest θ (leaves)" and area when the grid's
    lowest θ keeps every sample at its leaf."""
    paths = es.decision_paths(rule)
    grid = es.theta_grid(2)
    edges = np.linspace(0.0, 1.0, n_bins + 1)

    def gap_matrix(conf: np.ndarray, correct: np.ndarray) -> sp.csr_matrix:
        """(n, n_bins): conf − correct in each sample's bin (lower, upper]; conf 0 in none."""
        conf = np.asarray(conf, float)
        b = np.searchsorted(edges, conf, side="left") - 1
        ok = (b >= 0) & (b < n_bins)
        rows = np.flatnonzero(ok)
        return sp.csr_matrix(((conf - np.asarray(correct, float))[ok], (rows, b[ok])), shape=(conf.size, n_bins))

    leaf_gap = gap_matrix(paths.values[:, 0], paths.nodes[:, 0] == es.labels)
    per_theta = []
    for theta in grid:
        nodes, conf = paths.predict(float(theta))
        per_theta.append((gap_matrix(conf, hierarchical_correctness(es.hierarchy, nodes, es.labels)),
                          es.hierarchy.coverage[nodes].astype(float)))

    def ece_of(gaps: sp.csr_matrix, w: np.ndarray) -> np.ndarray:
        return np.abs(np.asarray((gaps.T @ w.T).T)).sum(axis=1) / w.sum(axis=1)

    def ece_leaves(w: np.ndarray) -> np.ndarray:
        return ece_of(leaf_gap, w)

    def cc_area(w: np.ndarray) -> np.ndarray:
        total = w.sum(axis=1)
        cov = np.stack([(w @ phi) / total for _, phi in per_theta], axis=1)  # (B, n_theta)
        ece = np.stack([ece_of(g, w) for g, _ in per_theta], axis=1)
        order = np.argsort(cov, axis=1, kind="stable")
        cov, ece = np.take_along_axis(cov, order, 1), np.take_along_axis(ece, order, 1)
        return np.sum(np.diff(cov, axis=1) * (ece[:, 1:] + ece[:, :-1]) / 2, axis=1)

    return ece_leaves, cc_area


def benchmark_row(ev: ModelEvaluation, calibrator: str, confidence: str, *, rule: str = "climbing",
                  loss: Loss = "01", intervals: bool = True, n_resamples: int = N_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """One row (``BENCHMARK_COLUMNS``, ``best`` empty) of one model's (calibrator, confidence) pair,
    computed once per set and settings (``EvaluationSet.cached``; a fresh dict each call)."""
    es = ev.scored(calibrator, confidence)
    key = _key(rule, loss, intervals, n_resamples, seed)
    return dict(es.cached(key, lambda: _row(ev, es, rule, loss, intervals, n_resamples, seed)))


def _key(rule: str, loss: Loss, intervals: bool, n_resamples: int, seed: int) -> tuple:
    return ("calibrator_benchmark", rule, loss, bool(intervals), int(n_resamples), int(seed))


def _row(ev: ModelEvaluation, es: EvaluationSet, rule: str, loss: Loss, intervals: bool, n_resamples: int,
         seed: int) -> dict[str, Any]:
    start = time.perf_counter()
    summary = es.cc_summary((rule,))[0]
    values = {"haurc": es.haurc(rule, loss), "gain_percent": es.gain(rule, loss),
              "ece_leaves": summary["ECE at the lowest θ (leaves)"],
              "cc_area": summary["area under CC curve (lower is better)"]}
    row: dict[str, Any] = {"model": ev.name, "dataset": ev.dataset, "calibrator": es.calibrator,
                           "confidence": es.confidence, "rule": rule, "n_eval": es.n}
    limits: dict[str, tuple[float, float]] = {}
    if intervals:
        boot = es.bootstrap(loss, n_resamples=n_resamples, seed=seed, rules=(rule,))
        limits["haurc"] = (boot.haurc[rule].low, boot.haurc[rule].high)
        if rule in boot.gain:
            limits["gain_percent"] = (boot.gain[rule].low, boot.gain[rule].high)
        ece_leaves, cc_area = weighted_ece_and_cc_area(es, rule)
        ci = bootstrap_statistics({"ece_leaves": ece_leaves, "cc_area": cc_area}, es.n, n_resamples=n_resamples,
                                  seed=seed, batch=batch_for(es.n * 4))
        limits.update({k: (v.low, v.high) for k, v in ci.items()})
    for m in BENCHMARK_METRICS:
        lo, hi = limits.get(m, (None, None))
        row.update({m: float(values[m]), f"{m}_low": lo, f"{m}_high": hi})
    row["best"] = ""
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row


def row_held(ev: ModelEvaluation, calibrator: str, confidence: str, *, rule: str = "climbing", loss: Loss = "01",
             intervals: bool = True, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> bool:
    """Whether ``benchmark_row`` of these settings is held already (then it costs nothing); nothing is
    fitted or computed to find out."""
    es = ev.built(calibrator, confidence)
    return es is not None and es.has_cached(_key(rule, loss, intervals, n_resamples, seed))


def mark_best(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set each row's ``best``: the metrics (comma list) in which it is its model's best (ties: all)."""
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        for r in mine:
            r["best"] = ""
        for m, higher in BENCHMARK_METRICS.items():
            vals = [r[m] for r in mine if np.isfinite(r[m])]
            if not vals:
                continue
            top = max(vals) if higher else min(vals)
            for r in mine:
                if r[m] == top:
                    r["best"] = ",".join(filter(None, [r["best"], m]))
    return rows


def calibrator_benchmark(evaluations: ModelEvaluation | Sequence[ModelEvaluation], *,
                         calibrators: Sequence[str] | None = None, confidences: Sequence[str] | None = None,
                         rule: str = "climbing", loss: Loss = "01", intervals: bool = True,
                         n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                         progress: Progress | None = None) -> list[dict[str, Any]]:
    """Every (calibrator × confidence) pair of one model or many: rows of ``BENCHMARK_COLUMNS``.

    Parameters
    ----------
    evaluations : one ``ModelEvaluation`` or several (each model's rows are marked on their own).
    calibrators, confidences : which (default: every listed one; incompatible pairs left out, and
        by default the member scores of a model without ensemble members; named explicitly, such
        a score raises ``MembersError`` for that model).
    rule : the rule whose hAURC, gain and CC curve are shown (default Climbing).
    intervals : 95 % paired bootstrap intervals (``n_resamples``, ``seed``).
    progress : ``progress(done, total)`` over (model, pair) items, called after each pair that
        had to be computed (a pair already held calls nothing, so a rerun shows no bar).

    Returns
    -------
    list of dict, one per (model, calibrator, confidence), with ``best`` marked.
    """
    evs = [evaluations] if isinstance(evaluations, ModelEvaluation) else list(evaluations)
    pairs = benchmark_pairs(calibrators, confidences)
    per_model = [[(a, b) for a, b in pairs if confidences is not None or ev.has_members
                  or not get_confidence(b).needs_members] for ev in evs]
    total = sum(map(len, per_model))
    key = _key(rule, loss, intervals, n_resamples, seed)
    rows = []
    for ev, ev_pairs in zip(evs, per_model, strict=True):
        for cal, conf in ev_pairs:
            held = ev.scored(cal, conf).has_cached(key)
            rows.append(benchmark_row(ev, cal, conf, rule=rule, loss=loss, intervals=intervals,
                                      n_resamples=n_resamples, seed=seed))
            if progress is not None and not held:
                progress(len(rows), total)
    return mark_best(rows)


def benchmark_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The benchmark rows as CSV text (``BENCHMARK_COLUMNS``; a cell a spreadsheet would run as a
    formula is neutralised by ``results.csv_cell``)."""
    return to_csv(rows, BENCHMARK_COLUMNS)


def benchmark_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Display rows: model, calibrator, confidence, then each metric in display units as
    "value [low, high]" with a ★ where the row is its model's best."""
    out = []
    for r in rows:
        best = set(str(r.get("best", "")).split(","))
        shown: dict[str, Any] = {"model": r["model"], "calibrator": get_calibrator(r["calibrator"]).label,
                                 "confidence": get_confidence(r["confidence"]).label}
        for m, label in BENCHMARK_LABELS.items():
            k = BENCHMARK_SCALE[m]
            text = f"{r[m] * k:.2f}" if m != "ece_leaves" else f"{r[m]:.4f}"
            if r.get(f"{m}_low") is not None:
                fmt = "{:.2f}" if m != "ece_leaves" else "{:.4f}"
                text += f" [{fmt.format(r[f'{m}_low'] * k)}, {fmt.format(r[f'{m}_high'] * k)}]"
            shown[label] = ("★ " if m in best else "") + text
        out.append(shown)
    return out
