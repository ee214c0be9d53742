"""Does the guarantee survive a distribution shift? Calibrate θ̂ on clean data, test on shifted data.

Goren et al.'s Theorem 1 holds when calibration and test samples are exchangeable. Under a shift
(the same images blurred, noised, JPEG-compressed: ImageNet-C, Hendrycks & Dietterich 2019) they are
not, and the promised accuracy may fail. ``guarantee_under_shift`` makes one split of the images
(``threshold.calibration_draw``, the split of the Guaranteed-accuracy page and the decision card):
θ̂ is Algorithm 1's threshold from ``n_cal`` clean calibration images (``threshold.threshold``), and
Climbing at θ̂ is scored on the *other* images, clean and shifted alike, so the two test accuracies
differ only by the shift.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..core.thresholds import QuantileMethod, theorem1_epsilon
from .model import EvaluationSet
from .threshold import threshold

__all__ = ["ShiftGuarantee", "guarantee_under_shift"]


@dataclass(frozen=True)
class ShiftGuarantee:
    """One calibrate-on-clean, test-on-shifted split.

    ``*_accuracy`` / ``*_coverage``: Climbing at θ̂ on the n_test held-out images, clean or shifted;
    ``*_holds``: that accuracy is at least the target 1 − α minus Theorem 1's ε."""

    n_cal: int
    n_test: int
    target: float
    epsilon: float
    theta_hat: float
    clean_accuracy: float
    clean_coverage: float
    shifted_accuracy: float
    shifted_coverage: float

    @property
    def clean_holds(self) -> bool:
        return self.clean_accuracy >= self.target - self.epsilon

    @property
    def shifted_holds(self) -> bool:
        return self.shifted_accuracy >= self.target - self.epsilon

    def as_row(self) -> dict[str, Any]:
        """The fields and both verdicts, for a table or ``results.to_csv``."""
        return {**asdict(self), "clean_holds": self.clean_holds, "shifted_holds": self.shifted_holds}


def _climbing_at(es: EvaluationSet, theta: float, rows: np.ndarray) -> tuple[float, float]:
    nodes = es.predict("climbing", theta)[0][rows]
    return float(es.correctness(nodes, rows).mean()), float(es.hierarchy.coverage[nodes].mean())


def guarantee_under_shift(clean: EvaluationSet, shifted: EvaluationSet, *, n_cal: int, alpha: float, delta: float,
                          seed: int = 0, method: QuantileMethod = "order_statistic") -> ShiftGuarantee:
    """θ̂ from ``n_cal`` random clean images (Algorithm 1), tested on the remaining images clean and shifted.

    Parameters
    ----------
    clean, shifted : EvaluationSet
        The same model on the same images (same sample ids, same order), without and with the shift,
        in the same TS setting.
    n_cal : int
        Calibration images, 1 ≤ n_cal < n.
    alpha, delta : float
        Target accuracy 1 − α, confidence 1 − δ (Theorem 1's ε from n_cal, α, δ).
    seed : int
        The split (``threshold.calibration_draw``: stratified by the clean labels, as the
        Guaranteed-accuracy page and the decision card split).
    method : the θ̂ rule of ``thresholds.select_threshold``.
    """
    if clean.sample_ids is None or shifted.sample_ids is None or clean.n != shifted.n \
            or not np.array_equal(clean.sample_ids, shifted.sample_ids):
        raise ValueError("clean and shifted data must hold the same images in the same order (sample ids differ)")
    if clean.ts != shifted.ts:
        raise ValueError("clean and shifted evaluation sets must use the same temperature-scaling setting")
    if not 1 <= n_cal < clean.n:
        raise ValueError(f"n_cal must be from 1 to {clean.n - 1}, got {n_cal}")
    fit = threshold(clean.guarantee_data(), 1.0 - alpha, "theorem1", n=n_cal, seed=seed, quantile=method)
    theta_hat, test = fit.theta, fit.test_positions
    clean_acc, clean_cov = _climbing_at(clean, theta_hat, test)
    shifted_acc, shifted_cov = _climbing_at(shifted, theta_hat, test)
    return ShiftGuarantee(n_cal=fit.n_cal, n_test=fit.n_test, target=1.0 - alpha,
                          epsilon=theorem1_epsilon(n_cal, alpha, delta), theta_hat=float(theta_hat),
                          clean_accuracy=clean_acc, clean_coverage=clean_cov,
                          shifted_accuracy=shifted_acc, shifted_coverage=shifted_cov)
