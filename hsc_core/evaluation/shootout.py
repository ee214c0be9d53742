"""The repeated shoot-out: every guarantee method on the same thousands of calibration sets, and
its per-method summary (violation rate, whether the guarantee holds, accuracy and coverage).

Sampling: ``"iid"`` (default) draws the n calibration samples with replacement from the data set,
which then *is* the deployment distribution; ``"split"`` is the paper's Figure 3 protocol (a
stratified calibration set without replacement, numbers on the other samples). See
``guarantees`` for what each kind of guarantee promises and so what "violated" means.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..config import memory_budget_bytes
from ..core.risk import hierarchical_correctness, severity_loss
from ..core.thresholds import stratified_split_sampler
from ..core.validation import quote
from .calibration import apply_weights, calibrate_weights, cannot_note
from .guarantee_methods import (
    DEFAULT_METHODS,
    METHODS,
    N_REPS,
    SAMPLINGS,
    SEED,
    GuaranteeData,
    GuaranteeSettings,
    Sampling,
    check_methods,
)


# ---------------------------------------------------------------------------- the shoot-out
def draw_weights(labels: np.ndarray, n_cal: int, reps: int, *, sampling: Sampling = "iid",
                 seed: int = SEED) -> Callable[[int], np.ndarray]:
    """Return ``draw(r) -> (r, n) weights`` of the next r calibration sets (seeded, reproducible).

    ``"iid"``: n_cal draws with replacement; ``"split"``: a stratified subset of n_cal
    (``stratified_split_sampler``, the paper's protocol).
    """
    n = int(np.asarray(labels).size)
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown sampling {quote(sampling)}; choose one of {', '.join(SAMPLINGS)}")
    if int(n_cal) != n_cal or not 0 < n_cal < n:
        raise ValueError(f"n_cal must be an integer in (0, {n}), got {n_cal}")
    if int(reps) != reps or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps}")
    if sampling == "split":
        sampler = stratified_split_sampler(labels, int(n_cal), seed)

        def draw_split(r: int) -> np.ndarray:
            w = np.zeros((r, n), dtype=np.int64)
            for i in range(r):
                w[i, sampler()] = 1
            return w
        return draw_split
    rng = np.random.default_rng(seed)

    def draw_iid(r: int) -> np.ndarray:
        idx = rng.integers(0, n, size=(r, int(n_cal)))
        w = np.zeros((r, n), dtype=np.int64)
        np.add.at(w, (np.repeat(np.arange(r), int(n_cal)), idx.ravel()), 1)
        return w
    return draw_iid


def _realised(data: GuaranteeData, nodes: np.ndarray, test: np.ndarray | None) -> dict[str, np.ndarray]:
    """Per calibration set: accuracy (hierarchical, the root counting as correct), coverage, set size
    (leaves), severity, the share answered (below the root) and the accuracy of those answers, of
    ``nodes`` (R, n) over every sample (``test`` None: the data set as the population).

    With ``test`` (R, n) (split sampling) the same measures are taken on the samples ``test`` marks,
    and ``accuracy_population`` / ``answered_accuracy_population`` over every sample: the guarantees
    are about the population, the test half adds its own binomial noise."""
    h = data.hierarchy
    correct = hierarchical_correctness(h, nodes, data.labels[None, :])
    answered = nodes != h.root
    per_sample = {
        "accuracy": correct.astype(float),
        "coverage": h.coverage[nodes],
        "set_size": h.leaf_count[nodes].astype(float),
        "severity": severity_loss(h, nodes, data.labels[None, :]),
        "answered": answered.astype(float),
    }
    answered_right = (correct & answered).astype(float)

    def over(mask: np.ndarray | None) -> dict[str, np.ndarray]:
        if mask is None:
            out = {k: v.mean(axis=1) for k, v in per_sample.items()}
            n_ans, n_right = answered.sum(axis=1), answered_right.sum(axis=1)
        else:
            m = mask.sum(axis=1)
            out = {k: (v * mask).sum(axis=1) / m for k, v in per_sample.items()}
            n_ans, n_right = (answered * mask).sum(axis=1), (answered_right * mask).sum(axis=1)
        # nothing answered: no answer is wrong (the claim about the answers is vacuous)
        out["answered_accuracy"] = np.where(n_ans > 0, n_right / np.maximum(n_ans, 1), 1.0)
        return out

    if test is None:
        return over(None)
    population = over(None)
    return {**over(test), "accuracy_population": population["accuracy"],
            "answered_accuracy_population": population["answered_accuracy"]}


def shootout(
    data: GuaranteeData,
    settings: GuaranteeSettings,
    n_cal: int,
    *,
    methods: Sequence[str] = DEFAULT_METHODS,
    reps: int = N_REPS,
    sampling: Sampling = "iid",
    seed: int = SEED,
    chunk: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ShootoutResult:
    """Every method on the same ``reps`` calibration sets of ``n_cal`` samples.

    Parameters
    ----------
    data : per-sample quantities (``GuaranteeData``).
    settings : target (α), δ, second risks and options.
    n_cal : calibration size.
    methods : names of ``METHODS`` (``ltt_multi`` needs a second risk in ``settings``).
    reps, sampling, seed : the repetitions (``draw_weights``).
    chunk : calibration sets processed at once; default: up to 100, fewer when the (chunk, n) tables
        (weights, nodes, four per-sample measures) would exceed the memory budget.
    progress : ``progress(done, total)`` after each chunk of each method.

    Returns
    -------
    ``ShootoutResult``: one row per (rep, method) and the per-method summary.
    """
    methods = check_methods(methods)
    draw = draw_weights(data.labels, n_cal, reps, sampling=sampling, seed=seed)
    if chunk is None:
        chunk = int(min(100, max(1, memory_budget_bytes() // max(1, data.n * 8 * 8))))
    sizes = [min(chunk, reps - s) for s in range(0, reps, chunk)]
    total = len(sizes) * len(methods)
    done = 0
    rows: list[pd.DataFrame] = []
    seconds = dict.fromkeys(methods, 0.0)
    start_rep = 0
    for size in sizes:
        w = draw(size)
        test = (w == 0) if sampling == "split" else None
        for method in methods:
            t0 = time.perf_counter()
            fit = calibrate_weights(method, data, w, settings)
            got = _realised(data, apply_weights(method, data, fit), test)
            seconds[method] += time.perf_counter() - t0
            theta = fit.lam if fit.lam is not None else (
                fit.theta.min(axis=1) if fit.theta is not None else np.full(size, np.nan))
            rows.append(pd.DataFrame({"rep": np.arange(start_rep, start_rep + size), "method": method,
                                      "theta": theta, "certified": fit.found, **got}))
            done += 1
            if progress is not None:
                progress(done, total)
        start_rep += size
    reps_df = pd.concat(rows, ignore_index=True)
    reps_df["violated"] = violations(reps_df, settings)
    if sampling == "split":
        reps_df["violated_on_test"] = violations(reps_df, settings, measured="test")
    return ShootoutResult(settings, int(n_cal), int(reps), sampling, int(seed), reps_df,
                          summarize(reps_df, settings, int(n_cal), seconds, sampling))


def violations(reps: pd.DataFrame, s: GuaranteeSettings, *, measured: str = "population") -> np.ndarray:
    """Whether each repetition missed the requirement on the quantity its method guarantees (the
    accuracy of the answers for ``METHODS[m].quantity == "answers"``, else hierarchical accuracy)
    < 1 − α, or (``ltt_multi``) a second risk over its bound. A calibration set on which an LTT
    method certified nothing claims nothing (we fall back to the root), so it cannot violate a claim.

    ``measured``: ``"population"`` (default) judges the accuracy on the deployment distribution
    (the whole data set: with i.i.d. sampling the only accuracy there is; with split sampling the
    ``*_population`` columns), ``"test"`` the accuracy measured on the split's test samples, which
    adds the test set's own binomial noise (no guarantee covers it)."""
    pop = measured == "population" and "accuracy_population" in reps.columns
    acc = reps["accuracy_population" if pop else "accuracy"].to_numpy()
    ans = reps["answered_accuracy_population" if pop else "answered_accuracy"].to_numpy() \
        if "answered_accuracy" in reps.columns else acc
    on_answers = reps["method"].map(lambda m: METHODS[str(m)].quantity == "answers").to_numpy(dtype=bool)
    certified = reps["certified"].to_numpy(dtype=bool)
    bad = np.where(on_answers, certified & (ans < s.target - 1e-12), acc < s.target - 1e-12)
    multi = (reps["method"] == "ltt_multi").to_numpy() & certified
    if s.min_coverage is not None:
        bad |= multi & (reps["coverage"].to_numpy() < s.min_coverage - 1e-12)
    if s.max_severity is not None:
        bad |= multi & (reps["severity"].to_numpy() > s.max_severity + 1e-12)
    return bad


SUMMARY_COLUMNS: tuple[str, ...] = (
    "method", "label", "kind", "target", "delta", "violation_rate", "violation_se", "violation_high",
    "guarantee_holds", "violation_rate_test", "accuracy_mean", "accuracy_std", "accuracy_q05", "accuracy_q95",
    "answered_mean", "answered_accuracy_mean", "coverage_mean", "coverage_std", "set_size_mean", "severity_mean",
    "certified_share", "seconds", "note")


def summarize(reps: pd.DataFrame, s: GuaranteeSettings, n_cal: int, seconds: Mapping[str, float],
              sampling: Sampling) -> pd.DataFrame:
    """One row per method (``SUMMARY_COLUMNS``).

    ``violation_rate`` ± ``violation_se`` (binomial standard error over the repetitions) and its
    one-sided 95 % Clopper–Pearson upper limit ``violation_high``, judged on the population
    (``violations``); ``violation_rate_test`` (split sampling only, else NaN): the rate when the
    accuracy is read on the test samples instead, inflated by their binomial noise.
    ``accuracy_*`` is the guaranteed quantity's mean (the answers' accuracy for a method on the
    answers), ``answered_mean`` the share answered below the root, ``answered_accuracy_mean`` the
    answers' accuracy. ``guarantee_holds``: for PAC
    methods, the violation count is not significantly above δ (exact binomial test at 1 %); for
    marginal ones, the mean accuracy is not significantly below 1 − α (one-sided z at 1 %);
    heuristic ones have no claim (empty).
    """
    out = []
    for method, g in reps.groupby("method", sort=False):
        info = METHODS[str(method)]
        r = len(g)
        k = int(g["violated"].sum())
        rate = k / r
        on_answers = info.quantity == "answers"
        acc = g["answered_accuracy" if on_answers else "accuracy"].to_numpy()
        if sampling == "split":  # the guarantee's quantity on the population, not the test half
            acc_pop = g["answered_accuracy_population" if on_answers else "accuracy_population"].to_numpy()
        else:
            acc_pop = acc
        if info.kind == "pac":
            holds: Any = bool(stats.binom.sf(k - 1, r, s.delta_for(str(method))) > 0.01)
        elif info.kind.startswith("marginal"):
            se = acc_pop.std(ddof=1) / np.sqrt(r) if r > 1 else 0.0
            holds = bool(acc_pop.mean() >= s.target - 2.326 * se - 1e-12)
        else:
            holds = ""
        note = cannot_note(str(method), n_cal, s, float(g["certified"].mean()))
        if info.kind.startswith("marginal"):
            note = (note + "; " if note else "") + "guarantee on average: about half the sets fall below 1 − α"
        rate_test = float(g["violated_on_test"].mean()) if "violated_on_test" in g.columns else float("nan")
        if sampling == "split":
            note = (note + "; " if note else "") + (
                f"split sampling: violations judged on the whole data set (the population); read on the test "
                f"samples alone the rate is {rate_test:.1%}, their binomial noise added")
        out.append({
            "method": method, "label": info.label, "kind": info.kind, "target": s.target, "delta": s.delta,
            "violation_rate": rate, "violation_se": float(np.sqrt(rate * (1 - rate) / r)),
            "violation_high": float(stats.beta.ppf(0.95, k + 1, r - k)) if k < r else 1.0,
            "guarantee_holds": holds, "violation_rate_test": rate_test, "accuracy_mean": float(acc.mean()),
            "accuracy_std": float(acc.std(ddof=1)) if r > 1 else 0.0,
            "accuracy_q05": float(np.quantile(acc, 0.05)), "accuracy_q95": float(np.quantile(acc, 0.95)),
            "answered_mean": float(g["answered"].mean()),
            "answered_accuracy_mean": float(g["answered_accuracy"].mean()),
            "coverage_mean": float(g["coverage"].mean()),
            "coverage_std": float(g["coverage"].std(ddof=1)) if r > 1 else 0.0,
            "set_size_mean": float(g["set_size"].mean()), "severity_mean": float(g["severity"].mean()),
            "certified_share": float(g["certified"].mean()), "seconds": float(seconds.get(str(method), 0.0)),
            "note": note,
        })
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))


@dataclass(frozen=True)
class ShootoutResult:
    """What ``shootout`` returns: its settings, one row per (rep, method), one per method."""

    settings: GuaranteeSettings
    n_cal: int
    reps: int
    sampling: Sampling
    seed: int
    repetitions: pd.DataFrame
    summary: pd.DataFrame



__all__ = [
    "SUMMARY_COLUMNS", "ShootoutResult", "draw_weights", "shootout", "summarize", "violations",
]
