"""Repeated calibration/test splits (definitions §6, the paper's Figure 3) as one table: θ̂ against
the baselines on many stratified calibration sets, each measured on the other samples.

The numbers are the shoot-out's (``guarantees.shootout(sampling="split")``: the same calibration
sets, the same calibration code); ``split_repetitions`` only lays them out as the Figure-3 table
(one row per rep, α and method, the methods named ``hsc``/``crc``/``darts``).
``repeated_split_evaluation`` is the old entry point on node probabilities, kept as a deprecated
wrapper.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..core.hierarchy import Hierarchy
from ..core.rules import theta_in_precision
from ..core.thresholds import QuantileMethod
from ..core.validation import quote
from .guarantee_methods import GuaranteeData, GuaranteeSettings
from .shootout import shootout

#: The Figure-3 table's method names → the shoot-out's.
SPLIT_METHODS = {"hsc": "theorem1", "crc": "crc", "darts": "darts"}
COLUMNS = ["rep", "alpha", "method", "threshold", "accuracy", "coverage"]


def split_repetitions(
    data: GuaranteeData,
    alphas: Sequence[float],
    n_cal: int,
    n_reps: int = 1000,
    seed: int = 0,
    method: QuantileMethod = "order_statistic",
    baselines: Sequence[str] = ("crc",),
    progress: Callable[[float], None] | None = None,
) -> pd.DataFrame:
    """Repeat: draw a stratified calibration set of ``n_cal``, fit each method, test on the rest.

    Parameters
    ----------
    data : per-sample quantities (``GuaranteeData``).
    alphas : the targets 1 − α; every α sees the same ``n_reps`` calibration sets.
    n_cal, n_reps, seed : the repetitions (``shootout(sampling="split")``).
    method : θ̂'s rule, ``"order_statistic"`` (the paper) or ``"quantile"`` (the authors' code).
    baselines : ``"crc"`` (conformal risk control) and/or ``"darts"`` (slow: a bisection per set);
        ``"hsc"`` (Algorithm 2 with Climbing) always runs.
    progress : ``progress(fraction done)``.

    Returns
    -------
    DataFrame with one row per (rep, alpha, method): ``COLUMNS`` (``threshold``: θ as the
    predictions compare it, in the probabilities' precision; DARTS: its λ).
    """
    unknown = set(baselines) - {"crc", "darts"}
    if unknown:
        raise ValueError(f"unknown baselines {quote(sorted(unknown, key=str))}; choose from 'crc', 'darts'")
    names = ["hsc", *(b for b in ("crc", "darts") if b in baselines)]
    dtype = data.paths["climbing"].values.dtype
    frames = []
    for i, alpha in enumerate(alphas):
        def step(done: int, total: int, i: int = i) -> None:
            if progress is not None:
                progress((i + done / total) / len(alphas))

        res = shootout(data, GuaranteeSettings(alpha=float(alpha), quantile=method), n_cal,
                       methods=[SPLIT_METHODS[m] for m in names], reps=int(n_reps), sampling="split", seed=seed,
                       progress=step)
        reps = res.repetitions
        for order, name in enumerate(names):
            r = reps[reps["method"] == SPLIT_METHODS[name]]
            theta = r["theta"].to_numpy(float)
            if name != "darts":  # θ as predict() sees it (rounded to the probabilities' precision)
                theta = np.array([theta_in_precision(t, dtype) for t in theta])
            frames.append(pd.DataFrame({"rep": r["rep"].to_numpy(), "alpha": alpha, "method": name,
                                        "threshold": theta, "accuracy": r["accuracy"].to_numpy(float),
                                        "coverage": r["coverage"].to_numpy(float), "_a": i, "_m": order}))
    df = pd.concat(frames, ignore_index=True).sort_values(["rep", "_a", "_m"], kind="stable")
    return df[COLUMNS].reset_index(drop=True)


def repeated_split_evaluation(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    alphas: Sequence[float],
    n_cal: int,
    n_reps: int = 1000,
    seed: int = 0,
    method: QuantileMethod = "order_statistic",
    baselines: Sequence[str] = ("crc",),
    progress: Callable[[float], None] | None = None,
) -> pd.DataFrame:
    """Deprecated: ``split_repetitions`` on ``GuaranteeData.from_arrays(hierarchy, node_probs, labels)``
    — the shoot-out's ``shootout(sampling="split")`` under the Figure-3 table's names (``hsc``,
    ``threshold``); call ``shootout`` (or ``split_repetitions``) instead."""
    warnings.warn("repeated_split_evaluation is shootout(sampling='split') under other names: call "
                  "hsc_core.evaluation.guarantees.shootout or repeated_splits.split_repetitions (it goes in 1.1)",
                  DeprecationWarning, stacklevel=2)
    unknown = set(baselines) - {"crc", "darts"}
    if unknown:
        raise ValueError(f"unknown baselines {quote(sorted(unknown, key=str))}; choose from 'crc', 'darts'")
    data = GuaranteeData.from_arrays(hierarchy, node_probs, labels)
    return split_repetitions(data, alphas, n_cal, n_reps, seed, method, baselines, progress)


def summarize_repetitions(results: pd.DataFrame, epsilon: dict[float, float] | float | None = None) -> pd.DataFrame:
    """Per (alpha, method): target, mean/std accuracy and coverage, both error definitions, and the
    fraction of repetitions with |accuracy − target| ≤ ε (when ε is given, per α or one value).

    ``acc_err_of_mean`` is the authors' |target − mean accuracy|; ``mean_abs_err`` the paper's wording.
    """
    df = results.copy()
    df["target"] = 1.0 - df["alpha"]
    df["abs_err"] = (df["accuracy"] - df["target"]).abs()
    if epsilon is not None:
        eps = df["alpha"].map(epsilon) if isinstance(epsilon, dict) else float(epsilon)
        df["inside"] = df["abs_err"] <= eps
    g = df.groupby(["alpha", "method"], sort=True)
    out = g.agg(
        target=("target", "first"),
        accuracy_mean=("accuracy", "mean"),
        accuracy_std=("accuracy", "std"),
        coverage_mean=("coverage", "mean"),
        coverage_std=("coverage", "std"),
        mean_abs_err=("abs_err", "mean"),
        **({"fraction_inside_eps": ("inside", "mean")} if epsilon is not None else {}),
    ).reset_index()
    out.insert(4, "acc_err_of_mean", (out["target"] - out["accuracy_mean"]).abs())
    return out
