"""Repeated calibration/test splits (definitions §6): fit θ̂ on a random stratified calibration set,
measure accuracy and coverage on the rest, many times; our method against the baselines.

In the evaluation layer (not the math core) because it runs whole protocols and returns a pandas table;
it uses the baselines, which themselves use ``thresholds``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..core.baselines import darts_lambda, darts_predict
from ..core.curves import hierarchical_rc_curve
from ..core.hierarchy import Hierarchy
from ..core.risk import hierarchical_correctness
from ..core.rules import DecisionPaths, decision_paths, theta_in_precision
from ..core.thresholds import (
    QuantileMethod,
    climbing_tight_thresholds,
    crc_threshold_from_last_incorrect,
    last_incorrect_values,
    select_threshold,
    stratified_split_sampler,
)
from ..core.validation import check_labels, quote


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
    """Repeat: draw a stratified calibration set of ``n_cal``, fit each method, test on the rest.

    Methods: ``"hsc"`` (Algorithm 2 with Climbing, always), ``"crc"`` (conformal risk control)
    and ``"darts"`` (slow: a 25-step bisection with a full prediction pass per step).
    Returns one row per (rep, alpha, method): threshold, test accuracy, test coverage.
    """
    probs = np.asarray(node_probs)
    labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
    unknown = set(baselines) - {"crc", "darts"}
    if unknown:
        raise ValueError(f"unknown baselines {quote(sorted(unknown, key=str))}; choose from 'crc', 'darts'")
    n = labels.size
    paths = decision_paths(hierarchy, probs, "climbing")
    tight = climbing_tight_thresholds(hierarchy, probs, labels)
    last_incorrect = last_incorrect_values(hierarchy, paths, labels)
    li_sorted = np.sort(last_incorrect)
    curve = hierarchical_rc_curve(hierarchy, probs, labels, "climbing", paths=paths)
    coverage_sum = curve.coverage * n
    node_cov = hierarchy.coverage
    draw = stratified_split_sampler(labels, n_cal, seed)
    n_test = n - n_cal
    rows: list[tuple] = []

    for rep in range(n_reps):
        cal = draw()
        cal_tight, cal_li = tight[cal], last_incorrect[cal]
        cal_paths = DecisionPaths("climbing", paths.nodes[cal], paths.values[cal], paths.lengths[cal])
        for alpha in alphas:
            fits = [("hsc", select_threshold(cal_tight, alpha, method))]
            if "crc" in baselines:
                fits.append(("crc", crc_threshold_from_last_incorrect(cal_li, alpha)))
            for name, theta in fits:
                # θ as predict() sees it (rounded to the probabilities' precision), so the
                # bookkeeping below and DecisionPaths.predict agree on every sample.
                theta = theta_in_precision(theta, paths.values.dtype)
                # Test = all − calibration, from the global sorted events (no pass over the test set).
                correct_all = np.searchsorted(li_sorted, theta, side="left")
                correct_cal = int((cal_li < theta).sum())
                cov_all = coverage_sum[curve.index_at(theta)]
                cov_cal = node_cov[cal_paths.predict(theta)[0]].sum()
                rows.append((rep, alpha, name, theta,
                             (correct_all - correct_cal) / n_test, (cov_all - cov_cal) / n_test))
            if "darts" in baselines:
                test = np.setdiff1d(np.arange(n), cal, assume_unique=True)
                lam = darts_lambda(hierarchy, probs[cal], labels[cal], alpha)
                pred = darts_predict(hierarchy, probs[test], lam)
                rows.append((rep, alpha, "darts", lam,
                             float(hierarchical_correctness(hierarchy, pred, labels[test]).mean()),
                             float(node_cov[pred].mean())))
        if progress is not None:
            progress((rep + 1) / n_reps)
    return pd.DataFrame(rows, columns=["rep", "alpha", "method", "threshold", "accuracy", "coverage"])


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
