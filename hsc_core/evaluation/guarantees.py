"""Every accuracy guarantee side by side: one interface, one vectorised shoot-out.

A *method* turns a calibration set into a rule that says which node to predict for a new sample:
a threshold θ on a nested node family (Climbing's path, or the LCA node of the flat conformal set),
one θ per superclass (Mondrian), or DARTS' λ. Every method is calibrated and applied through
``calibrate_weights`` (one row of weights per calibration set), so one calibration
(``calibrate``), the shoot-out over thousands of repeated calibration sets (``shootout``), the
``hsc guarantees`` and ``hsc card`` commands and the dashboard share one implementation.

Guarantees (``METHODS[name].kind``):

* ``pac`` — with probability ≥ 1 − δ over the calibration set, the accuracy on new data is
  ≥ 1 − α (LTT, Theorem 1 one-sided): the shoot-out's *violation rate* must be ≤ δ;
* ``marginal`` — on average over calibration set and new sample, accuracy ≥ 1 − α (the paper's
  Algorithm 2, CRC, conformal sets): about half the calibration sets fall below 1 − α, by design;
  what must hold is the *mean* accuracy;
* ``marginal per group`` — the same within every superclass (Mondrian);
* ``heuristic`` — DARTS' binomial stopping rule, no finite-sample guarantee.

Sampling: ``"iid"`` (default) draws the n calibration samples with replacement from the data set,
which then *is* the deployment distribution: a method's realised accuracy is its accuracy on the
whole data set, and every guarantee's law is exactly the one its proof assumes. ``"split"`` is the
paper's Figure 3: a stratified calibration set without replacement, numbers on the other samples —
their own sampling noise (a test set of m samples adds ≈ sqrt(a(1−a)/m)) is in no guarantee, so
violation rates of PAC methods read there are inflated.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..core.ltt import FWER_PROCEDURES
from .calibration import BatchFit, Calibration, apply_weights, calibrate, calibrate_weights, cannot_note
from .guarantee_methods import (
    DEFAULT_METHODS,
    METHODS,
    MONDRIAN_DEPTH,
    N_LAMBDAS,
    N_REPS,
    SAMPLINGS,
    SEED,
    GuaranteeData,
    GuaranteeSettings,
    Kind,
    MethodInfo,
    Sampling,
    check_methods,
    needs_delta,
)
from .shootout import SUMMARY_COLUMNS, ShootoutResult, draw_weights, shootout, summarize, violations


def __getattr__(name: str) -> Any:
    if name == "Settings":  # the class's old second name (0.3); one class, one name
        warnings.warn("hsc_core.evaluation.guarantees.Settings is now GuaranteeSettings: use that name "
                      "(the old one goes in 1.1)", DeprecationWarning, stacklevel=2)
        return GuaranteeSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_METHODS", "FWER_PROCEDURES", "METHODS", "MONDRIAN_DEPTH", "N_LAMBDAS", "N_REPS", "SAMPLINGS", "SEED",
    "SUMMARY_COLUMNS", "BatchFit", "Calibration", "GuaranteeData", "GuaranteeSettings", "Kind", "MethodInfo",
    "Sampling", "ShootoutResult", "apply_weights", "calibrate", "calibrate_weights", "cannot_note", "check_methods",
    "draw_weights", "needs_delta", "shootout", "summarize", "violations",
]
