"""The one result schema: tidy (long) rows shared by ``hsc evaluate``, ``hsc report``, the
dashboard and every export, and the few reshapings that front ends show.

One row is one number::

    model, dataset, hierarchy_hash, subset, protocol, rule, loss, ts, temperature, dec,
    metric, value, ci_low, ci_high, coverage_low, coverage_high, n_resamples, n_eval, n_cal, seed, version,
    calibrator, confidence

=================  =============================================================================
metric             value
=================  =============================================================================
``top1``           top-1 accuracy of the evaluated samples (``rule`` and ``loss`` empty)
``temperature``    the fitted T (``ts`` true only; ``rule`` and ``loss`` empty)
``haurc``          area under the hierarchical RC curve, raw (tables show ×1000, as the paper)
``gain_percent``   hAURC reduction vs Selective with the same loss and TS setting, in % (0 for
                   Selective; NaN when Selective's hAURC is 0)
``excess_haurc``   hAURC minus the oracle ordering's (``core.selective_metrics``), raw
``achievable_…``   area under the convex hull of the rule's RC points, raw
``hf1_micro``      micro hierarchical F1 of the rule's predictions at θ = 0
``aurc_zhou``      flat AURC of the arg-max leaf, Zhou et al.'s estimator (``rule`` empty), raw
``augrc``          flat AUGRC of the arg-max leaf (``rule`` empty), raw
=================  =============================================================================

``coverage_low``/``coverage_high`` are set on the ``gain_percent`` row of a rule whose curve stops
short of Selective's coverage 1: the coverage range that gain is measured over, the range both
curves cover (``core.curves.COMMON_RANGE_NOTE``); empty: the paper's gain, over Selective's whole
range. Older results files without these columns read as empty.

``calibrator``/``confidence`` name the calibrator (``core.calibrators``) and confidence score
(``core.confidence``) of the row: ``none``/``temperature`` (``ts`` false/true) with ``softmax``
for the paper's two settings. They come last, so every older column keeps its position; an older
results file without them reads as those defaults (``with_score_columns``).

``ci_low``/``ci_high`` are 95 % paired bootstrap limits when computed (``n_resamples`` says how
many resamples), else empty. ``dec`` is empty for exact curves, else the authors' θ-grid decimals.
Every wide table is derived from these rows by ``wide_table`` with column names from
``column_label``, so a column means the same thing in every export.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..core.curves import coverage_range_text
from ..core.hierarchy import Hierarchy
from ..core.rules import RULE_LABELS, RULES
from ..core.validation import quote

ResultRow = dict[str, Any]

RESULT_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "hierarchy_hash", "subset", "protocol", "rule", "loss", "ts", "temperature", "dec",
    "metric", "value", "ci_low", "ci_high", "coverage_low", "coverage_high", "n_resamples", "n_eval", "n_cal",
    "seed", "version", "calibrator", "confidence",
)
METRICS: dict[str, str] = {
    "top1": "top-1 accuracy",
    "temperature": "T",
    "haurc": "hAURC×1000",
    "gain_percent": "gain %",
    # beyond the paper (``EvaluationSet.extra_results``; not in ``hsc evaluate``'s rows)
    "excess_haurc": "excess hAURC×1000",
    "achievable_haurc": "achievable hAURC×1000",
    "hf1_micro": "hF1 micro (θ = 0)",
    "aurc_zhou": "AURC×1000 (Zhou)",
    "augrc": "AUGRC×1000",
}
#: The column that says over which coverage range a rule's gain is measured, beside the gain, in
#: every table that shows a rule whose curve stops short of coverage 1 (``COMMON_RANGE_NOTE``).
GAIN_RANGE_COLUMN = "gain over"
#: The metrics of ``EvaluationSet.extra_results``, in table order.
EXTRA_METRICS: tuple[str, ...] = ("excess_haurc", "achievable_haurc", "hf1_micro", "aurc_zhou", "augrc")
#: How each metric is shown in tables (the paper prints hAURC ×1000).
DISPLAY_SCALE = {"haurc": 1000.0, "excess_haurc": 1000.0, "achievable_haurc": 1000.0, "aurc_zhou": 1000.0,
                 "augrc": 1000.0}
LOSS_LABELS = {"01": "", "severity": "severity"}

SUMMARY_COLUMNS: tuple[str, ...] = (
    "dataset", "loss", "ts", "rule", "n_models", "haurc_x1000_mean", "haurc_x1000_sem",
    "gain_percent_mean", "gain_percent_sem", "n_gain_on_common_range",
)


def toolkit_version() -> str:
    from .. import __version__
    return __version__


def hierarchy_hash(hierarchy: Hierarchy | None) -> str:
    """A content hash of a tree (node ids, names, parents, leaf order), 16 hex digits; "" for None.

    Two results with the same hash were computed on the same tree.
    """
    if hierarchy is None:
        return ""
    text = json.dumps(hierarchy.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def result_row(*, model: str, dataset: str, hierarchy_hash: str, subset: str, protocol: str, rule: str, loss: str,
               ts: bool, temperature: float, dec: int | None, metric: str, value: float,
               ci: tuple[float, float] | None, n_resamples: int | None, n_eval: int, n_cal: int,
               seed: int, coverage: tuple[float, float] | None = None, calibrator: str | None = None,
               confidence: str = "softmax") -> ResultRow:
    """One tidy row (keys: ``RESULT_COLUMNS``); ``coverage``: the range a gain is restricted to."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {quote(metric)}; choose one of {', '.join(METRICS)}")
    return {
        "model": model, "dataset": dataset, "hierarchy_hash": hierarchy_hash, "subset": subset,
        "protocol": protocol, "rule": rule, "loss": loss, "ts": bool(ts), "temperature": float(temperature),
        "dec": dec, "metric": metric, "value": float(value),
        "ci_low": None if ci is None else float(ci[0]), "ci_high": None if ci is None else float(ci[1]),
        "coverage_low": None if coverage is None else float(coverage[0]),
        "coverage_high": None if coverage is None else float(coverage[1]),
        "n_resamples": n_resamples or None, "n_eval": int(n_eval), "n_cal": int(n_cal), "seed": int(seed),
        "version": toolkit_version(),
        "calibrator": (("temperature" if ts else "none") if calibrator is None else calibrator),
        "confidence": confidence,
    }


def with_score_columns(row: dict[str, Any]) -> dict[str, Any]:
    """A row read from an older results file, with the ``calibrator``/``confidence`` it was
    computed with filled in when missing or empty (``none``/``temperature`` by ``ts``, ``softmax``)."""
    out = dict(row)
    ts = out.get("ts")
    ts = ts if isinstance(ts, (bool, np.bool_)) else str(ts).strip().lower() == "true"
    # missing, None, "" or a reader's NaN for an empty cell
    if not isinstance(out.get("calibrator"), str) or not out["calibrator"]:
        out["calibrator"] = "temperature" if ts else "none"
    if not isinstance(out.get("confidence"), str) or not out["confidence"]:
        out["confidence"] = "softmax"
    return out


def is_default_pair(row: dict[str, Any]) -> bool:
    """Whether a row is of one of the paper's two settings (``none``/``temperature`` by ``ts``, with
    ``softmax``), also for an older row without the columns. The paper's tables (``wide_table``,
    ``summary_rows``) show only these; the calibrator benchmark shows the others."""
    full = with_score_columns(row)
    ts = full.get("ts")
    ts = ts if isinstance(ts, (bool, np.bool_)) else str(ts).strip().lower() == "true"
    return full["confidence"] == "softmax" and full["calibrator"] == ("temperature" if ts else "none")


# ---------------------------------------------------------------------------- display names
def column_label(metric: str, rule: str = "", loss: str = "01", ts: bool | None = None) -> str:
    """The one display name of a number: e.g. ``"hAURC×1000 Climbing (TS)"``,
    ``"gain % Jumping severity (no TS)"``, ``"top-1 accuracy"``.

    >>> column_label("haurc", "climbing", ts=True)
    'hAURC×1000 Climbing (TS)'
    >>> column_label("gain_percent", "max_coverage", "severity")
    'gain % Max-Coverage severity'
    """
    parts = [METRICS.get(metric, metric)]
    if rule:
        parts.append(RULE_LABELS.get(rule, rule))
    if loss and LOSS_LABELS.get(loss, loss):
        parts.append(LOSS_LABELS.get(loss, loss))
    if ts is not None:
        parts.append("(TS)" if ts else "(no TS)")
    return " ".join(parts)


def gain_coverage(row: ResultRow) -> tuple[float, float] | None:
    """(low, high) coverage range of a gain row measured over a common range; None when over
    Selective's whole range (empty, missing or "" as read from a CSV written before the columns)."""
    low, high = row.get("coverage_low"), row.get("coverage_high")
    if low in (None, "") or high in (None, ""):
        return None
    return float(low), float(high)


def display_value(row: ResultRow, key: str = "value") -> float:
    """``row[key]`` in display units (hAURC ×1000); NaN when empty."""
    v = row.get(key)
    return float("nan") if v is None else float(v) * DISPLAY_SCALE.get(row["metric"], 1.0)


def wide_table(rows: Iterable[ResultRow], *, ts: bool | None = None, loss: str | None = "01",
               metrics: Sequence[str] = ("top1", "temperature", "haurc", "gain_percent"),
               intervals: bool = False, label_ts: bool = True) -> list[dict[str, Any]]:
    """One dict per model (in first-seen order): ``model``, ``n_eval``, then one column per
    (metric, rule[, loss][, TS]) in display units, named by ``column_label``.

    ts : keep only this TS setting (None: both, labelled "(TS)"/"(no TS)").
    loss : keep only this loss (None: every loss, severity columns labelled).
    intervals : add ``… low`` / ``… high`` columns for rows with bootstrap limits.
    Only the paper's two settings (``is_default_pair``) are shown.
    label_ts : with one ``ts`` setting, whether column names still say "(TS)"/"(no TS)".
    Selective's gain (0 by definition) is left out.
    """
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if not is_default_pair(r):
            continue
        if (ts is not None and r["ts"] != ts) or (loss is not None and r["loss"] not in ("", loss)):
            continue
        if r["metric"] not in metrics or (r["metric"] == "gain_percent" and r["rule"] == "selective"):
            continue
        key = (r["model"], r["dataset"], r["subset"])
        m = out.setdefault(key, {"model": r["model"], "n_eval": r["n_eval"]})
        if r["n_eval"] != m["n_eval"]:  # the paper's protocol: TS numbers on fewer samples than the others
            m[f"n_eval {'(TS)' if r['ts'] else '(no TS)'}"] = r["n_eval"]
        if r["metric"] in ("top1", "temperature"):
            # Model-level: one column. Top-1 is the same with and without TS under the project
            # protocol; under the paper's, the first seen (without TS: all samples) is kept.
            name = column_label(r["metric"])
            if name in m:
                continue
        else:
            tag = r["ts"] if (ts is None or label_ts) else None
            name = column_label(r["metric"], r["rule"], r["loss"] if loss is None else "01", tag)
        m[name] = display_value(r)
        span = gain_coverage(r)
        if span is not None:  # a gain over the common coverage range says which, beside it
            m[f"{name} {GAIN_RANGE_COLUMN}"] = coverage_range_text(*span)
        if intervals and r.get("ci_low") is not None:
            m[f"{name} low"] = display_value(r, "ci_low")
            m[f"{name} high"] = display_value(r, "ci_high")
    return list(out.values())


# ---------------------------------------------------------------------------- many models
def mean_sem(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean over the finite values (SEM NaN for one value).

    >>> mean_sem([1.0, 2.0, 3.0, float("nan")])
    (2.0, 0.5773502691896258)
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan")
    sem = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")
    return float(x.mean()), sem


def summary_rows(rows: Iterable[ResultRow]) -> list[dict[str, Any]]:
    """The paper's Table 1: mean ± SEM over models of hAURC×1000 and gain, per data set × loss ×
    TS × rule (``SUMMARY_COLUMNS``). ``n_gain_on_common_range`` counts the models whose gain is
    over the coverage range the rule's curve shares with Selective's (``coverage_low``/``high``
    set: a curve that stops short of coverage 1), not over the whole range; 0 for the paper's rules."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        if r["metric"] not in ("haurc", "gain_percent") or not is_default_pair(r):
            continue
        g = groups.setdefault((r["dataset"], r["loss"], r["ts"], r["rule"]), {"haurc": [], "gain_percent": []})
        g[r["metric"]].append(display_value(r))
        if r["metric"] == "gain_percent" and r.get("coverage_low") is not None:
            g.setdefault("restricted", []).append(1.0)
    order = {rule: k for k, rule in enumerate(RULES)}
    out = []
    for (ds, loss, ts, rule), g in sorted(groups.items(), key=lambda kv: (
            list(dict.fromkeys(k[0] for k in groups)).index(kv[0][0]), kv[0][1], kv[0][2], order.get(kv[0][3], 99))):
        h_mean, h_sem = mean_sem(g["haurc"])
        g_mean, g_sem = mean_sem(g["gain_percent"])
        out.append({"dataset": ds, "loss": loss, "ts": ts, "rule": rule, "n_models": len(g["haurc"]),
                    "haurc_x1000_mean": h_mean, "haurc_x1000_sem": h_sem,
                    "gain_percent_mean": g_mean, "gain_percent_sem": g_sem,
                    "n_gain_on_common_range": len(g.get("restricted", []))})
    return out


# ---------------------------------------------------------------------------- files
#: A cell starting with one of these is a formula in a spreadsheet (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """A value as CSV text: floats exactly (``repr``), booleans as true/false, None empty, and
    text that a spreadsheet would run as a formula prefixed with ``'`` (OWASP; the raw value is
    the text after that quote). Numbers are never prefixed: ``-0.5`` stays a number.

    >>> csv_cell(-0.5), csv_cell("=HYPERLINK(1)"), csv_cell(None), csv_cell(True)
    ('-0.5', "'=HYPERLINK(1)", '', 'true')
    """
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def formula_safe_texts(values: Iterable[Any]) -> np.ndarray:
    """A column of text cells as ``csv_cell`` writes them (a would-be formula prefixed with ``'``), for
    writers that take whole columns (pandas, pyarrow); an object array.

    >>> formula_safe_texts(["img_1.png", "=1+1", "-x"]).tolist()
    ['img_1.png', "'=1+1", "'-x"]
    """
    return np.array([("'" + t) if t.startswith(FORMULA_START) else t for t in map(str, values)], dtype=object)


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """CSV text with a header (``columns`` default: every key, first-seen order), cells by ``csv_cell``."""
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    for r in rows:
        writer.writerow([csv_cell(r.get(c)) for c in columns])
    return buf.getvalue()
