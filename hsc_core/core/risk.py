"""Hierarchical correctness, 0/1 and LCA-severity losses, and coverage (definitions §2.2–2.4)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from .hierarchy import Hierarchy
from .validation import quote

Loss = Literal["01", "severity"]
LOSSES: tuple[Loss, ...] = ("01", "severity")


def _nodes(hierarchy: Hierarchy, predictions: np.ndarray) -> np.ndarray:
    pred = np.asarray(predictions, dtype=np.int64)
    if pred.size and (pred.min() < 0 or pred.max() >= hierarchy.n_nodes):
        raise ValueError(f"predictions must be node indices in [0, {hierarchy.n_nodes})")
    return pred


def hierarchical_correctness(hierarchy: Hierarchy, predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """True where the predicted node is the true leaf or one of its ancestors (the root always is)."""
    return hierarchy.is_ancestor(_nodes(hierarchy, predictions), np.asarray(labels, dtype=np.int64))


def severity_loss(hierarchy: Hierarchy, predictions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ℓ(v̂, y) = 1 − φ(LCA(v̂, y)) / φ(v̂), and 0 when v̂ is the root. Same shape as ``predictions``."""
    pred = _nodes(hierarchy, predictions)
    cov = hierarchy.coverage
    lca_cov = cov[hierarchy.lca(pred, np.asarray(labels, dtype=np.int64))]
    pred_cov = cov[pred]
    safe = np.where(pred_cov > 0, pred_cov, 1.0)
    return np.where(pred_cov > 0, 1.0 - lca_cov / safe, 0.0)


def sample_loss(hierarchy: Hierarchy, predictions: np.ndarray, labels: np.ndarray, loss: Loss = "01") -> np.ndarray:
    """Per-sample loss: 1 − correctness for ``"01"``, the LCA severity for ``"severity"``."""
    if loss == "01":
        return 1.0 - hierarchical_correctness(hierarchy, predictions, labels)
    if loss == "severity":
        return severity_loss(hierarchy, predictions, labels)
    raise ValueError(f"unknown loss {quote(loss)}; choose one of {', '.join(LOSSES)}")


def hierarchical_risk(hierarchy: Hierarchy, predictions: np.ndarray, labels: np.ndarray, loss: Loss = "01") -> float:
    """Mean loss over *all* samples; root predictions count as correct (§2.3)."""
    return float(sample_loss(hierarchy, predictions, labels, loss).mean())


def hierarchical_coverage(hierarchy: Hierarchy, predictions: np.ndarray) -> float:
    """Mean coverage φ of the predicted nodes."""
    return float(hierarchy.coverage[_nodes(hierarchy, predictions)].mean())
