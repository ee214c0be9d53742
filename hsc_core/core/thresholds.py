"""Optimal threshold algorithm (paper §5, Algorithms 2–3) and Theorem 1's ε (definitions §6).

Climbing at θ is hierarchically correct iff θ > the largest probability of a *wrong* node on the
sample's path ("last incorrect"). Every quantity here is derived from that one number per sample,
which is why thousands of random splits take seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

from .hierarchy import Hierarchy
from .risk import hierarchical_correctness
from .rules import DecisionPaths
from .validation import check_labels, quote

QuantileMethod = Literal["order_statistic", "quantile"]


def climbing_tight_thresholds(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    eps_tight: float = 1e-6,
    formula: Literal["code", "paper"] = "code",
) -> np.ndarray:
    """Per-sample minimal θ at which Climbing is correct (definitions §6.1).

    ``"code"`` (default, the authors' code): θ_i = f_last + eps_tight·(f_LCA − f_last);
    ``"paper"`` (Algorithm 3): θ_i = f_last + eps_tight·f_LCA, where f_last is the probability of
    the last wrong node on the path and the LCA is its parent. θ_i = 0 when the argmax leaf is
    right. Uses the raw (unclipped) probabilities, as the authors' threshold code. Shape (n_samples,).
    """
    if formula not in ("code", "paper"):
        raise ValueError(f"formula must be 'code' or 'paper', got {quote(formula)}")
    probs = np.asarray(node_probs)
    labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
    leaf = probs[:, : hierarchy.n_leaves].argmax(axis=1)
    rows = np.arange(probs.shape[0])
    first_correct = probs[rows, hierarchy.lca(leaf, labels)]
    path = np.take_along_axis(probs, hierarchy.paths_to_root(leaf), axis=1)
    last_incorrect = np.where(path >= first_correct[:, None], 0.0, path).max(axis=1)
    gap = first_correct - last_incorrect if formula == "code" else first_correct
    theta = last_incorrect + eps_tight * gap
    return np.where(leaf == labels, 0.0, theta)


def selective_thresholds(hierarchy: Hierarchy, node_probs: np.ndarray, labels: np.ndarray,
                         eps_tight: float = 1e-6) -> np.ndarray:
    """Selective's per-sample minimal correct θ: p_max + eps_tight if the top leaf is wrong, else 0."""
    probs = np.asarray(node_probs)[:, : hierarchy.n_leaves]
    labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
    leaf = probs.argmax(axis=1)
    return np.where(leaf == labels, 0.0, probs.max(axis=1) + eps_tight)


def last_incorrect_values(hierarchy: Hierarchy, paths: DecisionPaths, labels: np.ndarray) -> np.ndarray:
    """Largest record value of a wrong node per sample; −inf when the first record is right.

    The rule is correct at θ iff θ > this value (for Climbing, whose path is monotone in correctness).
    """
    correct = hierarchical_correctness(hierarchy, paths.nodes, labels[:, None])
    return np.where(correct, -np.inf, paths.values).max(axis=1)


def select_threshold(sample_thresholds: np.ndarray, alpha: float, method: QuantileMethod = "order_statistic") -> float:
    """θ̂ from calibration thresholds θ_1…θ_n.

    ``"order_statistic"``: the paper's θ_(⌈(n+1)(1−α)⌉), and 1.0 when that index exceeds n.
    ``"quantile"``: the authors' code, ``numpy.quantile(θ, 1−α)`` (linear interpolation).
    """
    t = np.asarray(sample_thresholds, dtype=float)
    if t.ndim != 1 or t.size == 0:
        raise ValueError("sample_thresholds must be a non-empty 1-D array")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if method == "quantile":
        return float(np.quantile(t, 1.0 - alpha))
    if method != "order_statistic":
        raise ValueError(f"unknown method {quote(method)}; use 'order_statistic' or 'quantile'")
    k = int(np.ceil((t.size + 1) * (1.0 - alpha) - 1e-9))
    return 1.0 if k > t.size else float(np.partition(t, k - 1)[k - 1])


# ---------------------------------------------------------------------------------------------
# Theorem 1: C(n, α) ~ Beta(k, n+1−k) with k = ⌈(n+1)(1−α)⌉; ε is the half-width around 1−α
# that holds C with probability ≥ 1−δ.


def _coverage_mass(n: int, alpha: float, epsilon: float) -> float:
    """P(|C − (1−α)| ≤ ε) for the Beta law of the marginal coverage."""
    k = int(np.ceil((n + 1) * (1.0 - alpha) - 1e-9))
    if k > n:  # (n+1)α < 1: θ̂ = 1 and C = 1 surely
        return 1.0 if epsilon >= alpha else 0.0
    dist = stats.beta(k, n + 1 - k)
    return float(dist.cdf(1.0 - alpha + epsilon) - dist.cdf(1.0 - alpha - epsilon))


def _check(alpha: float | None, n: int | None, epsilon: float | None, delta: float | None) -> None:
    if alpha is not None and not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if n is not None and (int(n) != n or n < 1):
        raise ValueError(f"n must be a positive integer, got {n}")
    if epsilon is not None and not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must lie in (0, 1), got {epsilon}")
    if delta is not None and not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def theorem1_epsilon(n: int, alpha: float, delta: float) -> float:
    """Smallest ε with ``P(|C − (1−α)| ≤ ε) ≥ 1−δ`` (paper Theorem 1 / appendix D).

    >>> round(theorem1_epsilon(n=1000, alpha=0.1, delta=0.1), 5)
    0.01555
    """
    _check(alpha, n, None, delta)
    k = int(np.ceil((n + 1) * (1.0 - alpha) - 1e-9))
    if k > n:
        return float(alpha)
    f = lambda e: _coverage_mass(n, alpha, e) - (1.0 - delta)  # noqa: E731
    return float(optimize.brentq(f, 1e-12, 1.0, xtol=1e-12))


def theorem1_delta(n: int, alpha: float, epsilon: float) -> float:
    """δ = P(|C − (1−α)| > ε)."""
    _check(alpha, n, epsilon, None)
    return float(min(max(1.0 - _coverage_mass(n, alpha, epsilon), 0.0), 1.0))


def theorem1_n(alpha: float, epsilon: float, delta: float, n_max: int = 10_000_000) -> int:
    """Smallest calibration size n whose ε(n, α, δ) ≤ ε."""
    _check(alpha, None, epsilon, delta)
    ok = lambda n: theorem1_epsilon(n, alpha, delta) <= epsilon  # noqa: E731
    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > n_max:
            raise ValueError(f"no n ≤ {n_max} reaches ε = {epsilon} at α = {alpha}, δ = {delta}")
    lo = hi // 2
    while hi - lo > 1:  # ε(n) decreases in n up to discreteness; bisection finds the boundary
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def theorem1_alpha(n: int, epsilon: float, delta: float) -> float:
    """Largest α ≤ 0.5 (the lowest target accuracy 1−α) whose ε(n, α, δ) ≤ ε.

    Small α concentrates C near 1, so ε shrinks as the target rises.
    """
    _check(None, n, epsilon, delta)
    ok = lambda a: theorem1_epsilon(n, a, delta) <= epsilon  # noqa: E731
    lo, hi = 1e-9, 0.5
    if ok(hi):
        return hi
    if not ok(lo):
        raise ValueError(f"no α reaches ε = {epsilon} with n = {n}, δ = {delta}")
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def solve_theorem1(
    alpha: float | None = None,
    n: int | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
) -> dict[str, Any]:
    """Given three of (α, n, ε, δ), solve for the fourth.

    Returns all four, and ``root_only`` with a ``note``: when (n+1)·α < 1 the order statistic
    ⌈(n+1)(1−α)⌉ does not exist, so θ̂ = 1 and only nodes whose probability is exactly 1 in the
    probabilities' precision are predicted, every other sample gets the root (e.g. n = 10 and a
    tiny ε). That is not "everything is the root": on confident float32 data many nodes, leaves
    too, round to probability 1, so coverage and errors need not be 0.

    >>> r = solve_theorem1(n=10, epsilon=1e-6, delta=0.1)
    >>> r["root_only"], r["note"][:40]
    (True, 'θ̂ = 1 for every calibration set: with n')
    """
    given = {"alpha": alpha, "n": n, "epsilon": epsilon, "delta": delta}
    missing = [k for k, v in given.items() if v is None]
    if len(missing) != 1:
        raise ValueError(f"give exactly three of alpha, n, epsilon, delta (missing: {missing or 'none'})")
    # Exactly one is None (checked above): the asserts tell the type checker which.
    if alpha is None:
        assert n is not None and epsilon is not None and delta is not None
        alpha = theorem1_alpha(int(n), epsilon, delta)
    elif n is None:
        assert epsilon is not None and delta is not None
        n = theorem1_n(alpha, epsilon, delta)
    elif epsilon is None:
        assert delta is not None
        epsilon = theorem1_epsilon(int(n), alpha, delta)
    else:
        delta = theorem1_delta(int(n), alpha, epsilon)
    root_only = (int(n) + 1) * float(alpha) < 1.0 - 1e-12
    note = (f"θ̂ = 1 for every calibration set: with n = {int(n):,} the target 1 − α = {1 - float(alpha):.6g} needs "
            f"(n+1)·α ≥ 1, i.e. n ≥ {int(np.ceil(1 / float(alpha) - 1)):,}; only nodes of probability exactly 1 are "
            "predicted, every other sample gets the root (no accuracy guarantee)") if root_only else ""
    return {"alpha": float(alpha), "n": int(n), "epsilon": float(epsilon), "delta": float(delta),
            "root_only": bool(root_only), "note": note}


def optimal_threshold(
    hierarchy: Hierarchy,
    node_probs: np.ndarray,
    labels: np.ndarray,
    alpha: float,
    method: QuantileMethod = "order_statistic",
) -> float:
    """Algorithm 2: θ̂ for Climbing from a calibration set so that accuracy ≥ 1−α (marginally)."""
    return select_threshold(climbing_tight_thresholds(hierarchy, node_probs, labels), alpha, method)


# ---------------------------------------------------------------------------------------------
# Repeated random calibration/test splits.


def stratified_split_sampler(labels: np.ndarray, n_cal: int, seed: int = 0) -> Callable[[], np.ndarray]:
    """Return a function drawing calibration indices: ``n_cal`` samples with the class mix of ``labels``.

    Class c gets ⌊n_cal·n_c/n⌋ slots plus one more with probability equal to the remainder, by
    systematic sampling over a random class order on every draw: the total is exactly n_cal and
    every sample is drawn with probability n_cal/n. (Fixed largest-remainder quotas would keep the
    same small classes out of every calibration set, so calibration and test samples would no
    longer be exchangeable, which Theorem 1 needs.)
    """
    labels = np.asarray(labels)
    n = labels.size
    if not 0 < n_cal < n:
        raise ValueError(f"n_cal must lie in (0, {n}), got {n_cal}")
    classes, counts = np.unique(labels, return_counts=True)
    scaled = counts.astype(np.int64) * n_cal  # integer arithmetic: remainders sum to exactly a multiple of n
    base = scaled // n
    remainder = scaled % n
    # Class-by-slot table of sample indices (padded); a draw shuffles each row and keeps the
    # first quota[c] slots — many small sorts are much faster than one argsort over all samples.
    by_class = np.argsort(np.searchsorted(classes, labels), kind="stable")
    width = int(counts.max())
    slot = np.arange(by_class.size) - np.repeat(np.r_[0, np.cumsum(counts)[:-1]], counts)
    members = np.full((classes.size, width), -1, dtype=np.int64)
    members[np.repeat(np.arange(classes.size), counts), slot] = by_class
    padding = members < 0
    rng = np.random.default_rng(seed)

    def quotas() -> np.ndarray:
        order = rng.permutation(classes.size)
        ends = np.cumsum(remainder[order])
        u = int(rng.integers(0, n))
        # Points u, u+n, u+2n, … each fall in one class's interval [end − remainder, end).
        hits = -((u - ends) // n) - (-((u - (ends - remainder[order])) // n))
        quota = base.copy()
        quota[order] += hits
        return quota

    def draw() -> np.ndarray:
        keys = rng.random(members.shape)
        keys[padding] = 2.0
        keep = np.arange(width)[None, :] < quotas()[:, None]
        return np.take_along_axis(members, keys.argsort(axis=1), axis=1)[keep]

    return draw


def crc_threshold_from_last_incorrect(last_incorrect: np.ndarray, alpha: float) -> float:
    """Conformal risk control (B = 1) for Climbing's 0/1 loss: inf{θ : (n·R̂(θ) + 1)/(n+1) ≤ α}.

    R̂(θ) is the fraction of calibration samples with last_incorrect ≥ θ. Assumption (the paper
    gives no specification; definitions §6.6).
    """
    li = np.asarray(last_incorrect)
    li = li if li.dtype == np.float32 else li.astype(float)  # the next θ up in the records' precision
    n = li.size
    allowed = int(np.floor(alpha * (n + 1) - 1 + 1e-9))  # errors tolerated on the calibration set
    if allowed < 0:
        return 1.0
    wrong = np.sort(li[np.isfinite(li)])[::-1]
    if allowed >= wrong.size:
        return 0.0
    return float(min(np.nextafter(wrong[allowed], np.inf), 1.0))
