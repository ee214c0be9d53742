"""Per-θ RC tables and operating points of any rule: one stable schema for every export.

RC table (``RC_TABLE_COLUMNS``), one row per exact operating point of a rule's curve::

    model, dataset, hierarchy_hash, subset, ts, rule, loss, theta, coverage, risk, n_accepted, n

=================  =============================================================================
column             meaning
=================  =============================================================================
``theta``          the largest θ that gives this operating point (it holds for every θ in
                   (previous row's θ, θ]; the last row, θ = 1.0, predicts the root or nodes of
                   probability 1)
``coverage``       mean coverage φ of the predicted nodes (the paper's hierarchical coverage)
``risk``           hierarchical risk: mean loss over all n samples (root predictions count as correct)
``n_accepted``     samples whose prediction is not the root at this θ
``n``              evaluated samples
=================  =============================================================================

Operating points (``POINT_COLUMNS``), one row per rule and user-given target::

    model, dataset, hierarchy_hash, subset, ts, rule, loss, target, point, theta, coverage, risk

``target`` is ``coverage`` (risk@coverage: the largest θ whose coverage is ≥ ``point``) or
``risk`` (coverage@risk: the largest coverage whose risk is ≤ ``point``); θ, coverage and risk
are that operating point's, NaN when no operating point reaches the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.risk import Loss
from ..core.rules import DecisionPaths
from ..core.selective_metrics import coverage_at_risk, risk_at_coverage
from .results import to_csv

if TYPE_CHECKING:
    from .model import EvaluationSet, ModelEvaluation

RC_TABLE_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "hierarchy_hash", "subset", "ts", "rule", "loss", "theta", "coverage", "risk", "n_accepted",
    "n",
)
POINT_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "hierarchy_hash", "subset", "ts", "rule", "loss", "target", "point", "theta", "coverage",
    "risk",
)
TABLE_FORMATS: tuple[str, ...] = (".csv", ".parquet")


def accepted_counts(paths: DecisionPaths, root: int, thetas: np.ndarray) -> np.ndarray:
    """Samples not predicting the root at each θ, compared in the records' precision. (len(thetas),)

    A sample leaves for the root once θ passes its last non-root record's probability.
    """
    real = np.arange(paths.nodes.shape[1])[None, :] < paths.lengths[:, None]
    non_root = real & (paths.nodes != root)
    last = np.where(non_root, paths.values, -np.inf).max(axis=1)  # values increase along a row
    last = np.sort(last)
    th = np.asarray(thetas, dtype=np.float64).astype(paths.values.dtype)
    return (last.size - np.searchsorted(last, th, side="left")).astype(np.int64)


def _base(es: EvaluationSet) -> dict[str, Any]:
    ev = es.evaluation
    return {"model": ev.name, "dataset": ev.dataset, "hierarchy_hash": ev.hierarchy_hash,
            "subset": ev.subset_name, "ts": es.ts}


def rc_table_rows(es: EvaluationSet, rules: Sequence[str], losses: Sequence[Loss] = ("01",),
                  dec: int | None = None) -> list[dict[str, Any]]:
    """Rows of the RC table (``RC_TABLE_COLUMNS``) of ``rules`` × ``losses`` on one setting: every
    exact operating point (``dec`` None), or the points of the authors' θ grid rounded to ``dec``
    decimals (``EvaluationSet.curve``). Every curve export (``hsc evaluate --rc-table``, the
    dashboard's full-curve CSV) is these rows."""
    base = _base(es)
    out: list[dict[str, Any]] = []
    for rule in rules:
        paths = es.rule_paths(rule)
        for loss in losses:
            curve = es.curve(rule, loss, dec)
            accepted = accepted_counts(paths, es.hierarchy.root, curve.thresholds)
            for k in range(curve.coverage.size):
                out.append({**base, "rule": rule, "loss": loss, "theta": float(curve.thresholds[k]),
                            "coverage": float(curve.coverage[k]), "risk": float(curve.risk[k]),
                            "n_accepted": int(accepted[k]), "n": es.n})
    return out


def operating_point_rows(es: EvaluationSet, rules: Sequence[str], *, coverages: Sequence[float] = (),
                         risks: Sequence[float] = (), losses: Sequence[Loss] = ("01",)) -> list[dict[str, Any]]:
    """risk@coverage and coverage@risk rows (``POINT_COLUMNS``) at the given targets in [0, 1]."""
    base = _base(es)
    out: list[dict[str, Any]] = []
    for rule in rules:
        for loss in losses:
            curve = es.curve(rule, loss)
            if len(coverages):
                r, th = risk_at_coverage(curve, coverages)
                for c, rk, t in zip(coverages, r, th, strict=True):
                    cov = float("nan") if np.isnan(t) else curve.at(float(t))[0]
                    out.append({**base, "rule": rule, "loss": loss, "target": "coverage", "point": float(c),
                                "theta": float(t), "coverage": cov, "risk": float(rk)})
            if len(risks):
                cv, th = coverage_at_risk(curve, risks)
                for rp, c, t in zip(risks, cv, th, strict=True):
                    rk = float("nan") if np.isnan(t) else curve.at(float(t))[1]
                    out.append({**base, "rule": rule, "loss": loss, "target": "risk", "point": float(rp),
                                "theta": float(t), "coverage": float(c), "risk": rk})
    return out


#: The numpy kind of each column when a table travels or is cached as arrays (``table_columns``).
COLUMN_KINDS: dict[str, str] = {
    "model": "U", "dataset": "U", "hierarchy_hash": "U", "subset": "U", "ts": "b", "rule": "U", "loss": "U",
    "theta": "f", "coverage": "f", "risk": "f", "n_accepted": "i", "n": "i", "target": "U", "point": "f",
}
_KIND_DTYPE = {"U": np.str_, "b": np.bool_, "f": np.float64, "i": np.int64}


def table_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Rows as one 1-D array per column (``COLUMN_KINDS``' types): how a worker sends a model's
    tables back and how ``hsc evaluate`` caches them; ``table_rows`` inverts it exactly."""
    return {c: np.array([r[c] for r in rows], dtype=_KIND_DTYPE[COLUMN_KINDS[c]]) for c in columns}


def table_rows(columns: dict[str, np.ndarray], **override: Any) -> list[dict[str, Any]]:
    """The rows of ``table_columns`` (Python bools, ints, floats and strs, as the layer made them),
    with ``override`` (e.g. ``model=``) in every row."""
    names = list(columns)
    values = [columns[c].tolist() for c in names]
    return [{**dict(zip(names, row, strict=True)), **override} for row in zip(*values, strict=True)]


def model_tables(ev: ModelEvaluation, rules: Sequence[str], *, coverages: Sequence[float] = (),
                 risks: Sequence[float] = (), losses: Sequence[Loss] = ("01", "severity"),
                 settings: Sequence[bool] = (False, True)) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(RC table rows, operating-point rows) of one model: every setting × rule × loss, the
    points only when targets are given."""
    table: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    for ts in settings:
        es = ev.setting(ts)
        table += rc_table_rows(es, rules, losses)
        if len(coverages) or len(risks):
            points += operating_point_rows(es, rules, coverages=coverages, risks=risks, losses=losses)
    return table, points


def parquet_available() -> bool:
    """Whether Parquet can be written (pyarrow importable)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def check_table_path(path: str | Path) -> Path:
    """A table path ending in .csv or .parquet (Parquet only with pyarrow), else one clear ValueError."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in TABLE_FORMATS:
        raise ValueError(f"a table path must end in .csv or .parquet, got {p.name!r}")
    if suffix == ".parquet" and not parquet_available():
        raise ValueError("writing .parquet needs pyarrow (pip install pyarrow); or give a .csv path")
    return p


def table_bytes(rows: Sequence[dict[str, Any]], columns: Sequence[str], suffix: str) -> bytes:
    """The table as file bytes: CSV through ``results.to_csv`` (formula-neutralised text), or
    Parquet with one typed column per name (text stays text: nothing there is run as a formula)."""
    if suffix.lower() == ".csv":
        return to_csv(rows, columns).encode("utf-8")
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows],
                                 schema=None) if rows else pa.table({c: [] for c in columns})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
