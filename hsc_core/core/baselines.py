"""Baselines for guaranteed hierarchical accuracy: DARTS (Deng et al. 2012, as the authors run it,
definitions §6.5) and conformal risk control (Angelopoulos et al.; our formulation, §6.6)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..config import rows_per_chunk
from .hierarchy import Hierarchy
from .risk import hierarchical_correctness
from .rules import decision_paths
from .thresholds import crc_threshold_from_last_incorrect, last_incorrect_values
from .validation import check_labels, check_node_probs


def darts_rewards(hierarchy: Hierarchy) -> np.ndarray:
    """r(v) = φ(v)·log2|L| = log2|L| − log2|L(v)|: information gain in bits, 0 at the root."""
    return hierarchy.coverage * np.log2(hierarchy.n_leaves)


def darts_predict(hierarchy: Hierarchy, node_probs: np.ndarray, lam: float) -> np.ndarray:
    """argmax_v (r(v) + λ)·f_v(x) per sample (first index on ties). Shape (n_samples,)."""
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    chunk = rows_per_chunk(probs.shape[1] * probs.itemsize)  # the product's temporary stays in the budget
    weight = (darts_rewards(hierarchy) + lam).astype(probs.dtype)
    out = np.empty(probs.shape[0], dtype=np.int64)
    for s in range(0, probs.shape[0], chunk):  # chunks keep the product's temporary small
        out[s: s + chunk] = (probs[s: s + chunk] * weight).argmax(axis=1)
    return out


def darts_lambda(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    alpha: float,
    n_steps: int = 25,
    interval: float = 0.90,
) -> float:
    """λ for DARTS reaching accuracy 1−α on calibration data, as in the authors' code.

    Bisection on [0, λ̄] with λ̄ = (r_max(1−α) − r_root)/α; a step counts as feasible when the
    lower end of the binomial ``interval`` (two-sided, so 90 % → 5th percentile) exceeds 1−α.
    Returns 0 when λ = 0 already reaches 1−α, and λ̄ when nothing is feasible.
    """
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    n = labels.size

    def accuracy(lam: float) -> float:
        return float(hierarchical_correctness(hierarchy, darts_predict(hierarchy, probs, lam), labels).mean())

    if accuracy(0.0) >= 1.0 - alpha:
        return 0.0
    rewards = darts_rewards(hierarchy)
    lam_lo, lam_hi = 0.0, (rewards.max() * (1.0 - alpha) - rewards[hierarchy.root]) / alpha
    for _ in range(n_steps):
        lam = (lam_lo + lam_hi) / 2
        lower = stats.binom.interval(interval, n, accuracy(lam))[0] / n
        lam_lo, lam_hi = (lam_lo, lam) if lower > 1.0 - alpha else (lam, lam_hi)
    return float(lam_hi)


def crc_threshold(hierarchy: Hierarchy, node_probs: np.ndarray, labels: np.ndarray, alpha: float) -> float:
    """Conformal risk control θ for Climbing: inf{θ : (n·R̂_n(θ) + 1)/(n+1) ≤ α} with the 0/1 loss.

    An assumption: the paper reports CRC results but neither it nor the authors' code specifies it.
    """
    probs = check_node_probs(node_probs, hierarchy.n_nodes)
    labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    paths = decision_paths(hierarchy, probs, "climbing")
    return crc_threshold_from_last_incorrect(last_incorrect_values(hierarchy, paths, labels), alpha)
