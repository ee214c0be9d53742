"""The evaluation protocol, stated once and used by every page, the CLI and the report.

A fixed, seeded, class-stratified **calibration split** (10 % of the samples, the paper's
temperature-scaling protocol) is used only to fit the temperature T. **Every** metric — with or
without temperature scaling — is computed on the remaining **evaluation split**, so a number
means the same thing wherever it is shown.
"""

from __future__ import annotations

import warnings

import numpy as np

from .thresholds import stratified_split_sampler
from .validation import quote

CALIBRATION_FRACTION = 0.10
SPLIT_SEED = 0
#: Fewer calibration samples than this, or labels of a single class, make every fitted calibrator
#: degenerate (``DegenerateFitWarning``).
MIN_CALIBRATION_SAMPLES = 10


class DegenerateFitWarning(UserWarning):
    """The calibration split is too small (or of one class) for a calibrator to mean anything: one
    warning, the numbers are still computed (the ``hsc`` command prints it as one line)."""

PROTOCOL_TEXT = (
    "T is fitted on a fixed, seeded, class-stratified 10 % calibration split; every metric "
    "(with or without temperature scaling) is computed on the other 90 %."
)


def calibration_mask(labels: np.ndarray, fraction: float = CALIBRATION_FRACTION, seed: int = SPLIT_SEED) -> np.ndarray:
    """Boolean (n_samples,) mask of the calibration split: ⌊fraction·n⌉ samples (at least 1,
    at most n − 1), class-stratified, deterministic for a given ``seed``.

    The rest (``~mask``) is the evaluation split.
    """
    labels = np.asarray(labels)
    n = labels.size
    if n < 2:
        raise ValueError(f"need at least 2 samples to split off a calibration set, got {n}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    n_cal = int(min(max(round(fraction * n), 1), n - 1))
    n_classes = int(np.unique(labels).size)
    if n_cal < MIN_CALIBRATION_SAMPLES or n_classes < 2:
        warnings.warn(DegenerateFitWarning(
            f"the calibration split holds {n_cal} sample{'s' * (n_cal != 1)} of {n} and the labels "
            f"{n_classes} class{'es' * (n_classes != 1)}: every calibrator is fitted on so little that the "
            f"calibrated numbers mean little (give at least {MIN_CALIBRATION_SAMPLES / fraction:,.0f} samples "
            "of 2 or more classes)"), stacklevel=2)
    mask = np.zeros(n, dtype=bool)
    mask[stratified_split_sampler(labels, n_cal, seed)()] = True
    return mask

PROTOCOLS = ("project", "paper")

PAPER_PROTOCOL_TEXT = (
    "As in the paper's code: T is fitted on a seeded, class-stratified 10 % calibration split; metrics "
    "without temperature scaling use all samples, metrics with it the other 90 %."
)


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is one of ``PROTOCOLS``, else a one-line ValueError."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {quote(protocol)}; choose one of {', '.join(PROTOCOLS)}")
    return protocol


def protocol_text(protocol: str = "project") -> str:
    """One sentence that says how the numbers of ``protocol`` are measured."""
    return PROTOCOL_TEXT if check_protocol(protocol) == "project" else PAPER_PROTOCOL_TEXT


def evaluation_mask(calibration: np.ndarray, *, ts: bool, protocol: str = "project") -> np.ndarray:
    """Boolean (n_samples,) mask of the samples whose metrics a setting reports.

    ``"project"`` (default): the evaluation split (``~calibration``) with and without temperature
    scaling, so the two settings are compared on the same samples. ``"paper"`` (the authors'
    ``arch_comparison.py``): every sample without temperature scaling, the held-out split with it,
    so numbers can be put beside the authors' published table.

    >>> cal = np.array([True, False, False])
    >>> evaluation_mask(cal, ts=False).tolist(), evaluation_mask(cal, ts=False, protocol="paper").tolist()
    ([False, True, True], [True, True, True])
    """
    cal = np.asarray(calibration, dtype=bool)
    if check_protocol(protocol) == "paper" and not ts:
        return np.ones_like(cal)
    return ~cal
