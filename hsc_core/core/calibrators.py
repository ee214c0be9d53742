"""Every calibrator the toolkit knows, named in one place (in the style of ``rule_registry``).

A calibrator is fitted on the protocol's calibration split (``core.protocol``) and then maps a
chunk of logits to calibrated *node* probabilities, so every rule, curve and threshold reads it
exactly as it reads today's temperature-scaled softmax:

=====================  ======================================================================
key                    what it fits (all by NLL on the calibration split)
=====================  ======================================================================
``none``               nothing: softmax(z)
``temperature``        one T, softmax(z / T) (Guo et al. 2017; today's default, unchanged:
                       ``probabilities.fit_temperature``)
``vector``             w, b ∈ R^C: softmax(w ⊙ z + b) (vector scaling, Guo et al. 2017)
``matrix``             W ∈ R^{C×C}, b: softmax(W z + b), ODIR-regularised (Kull et al. 2019)
``dirichlet``          matrix scaling of the log-probabilities log softmax(z), ODIR (Kull et al.)
``isotonic``           an isotonic map of the top-1 softmax probability to its accuracy; the
                       other classes share the rest of the mass in their old proportions
``depth_temperature``  one T_d per tree depth d, each minimising the NLL of the true node at
                       depth d (leaves shallower than d are their own node there); node v is
                       scored by softmax(z / T_depth(v)) summed over L(v), then made monotone
                       along root paths (the largest score in its subtree)
=====================  ======================================================================

``depth_temperature`` fits and scores one softmax per depth, work that grows as depth × n × C (on a
caterpillar, where C grows with the depth, as depth²): it accepts trees at most
``MAX_TEMPERATURE_DEPTHS`` (64) deep and refuses a deeper one in one line (``calibrator_limit``), before
any work; every other calibrator's work does not depend on the depth.

The vector, matrix and Dirichlet fits use L-BFGS (``scipy.optimize.minimize``) with analytic
gradients, float64 sums over row chunks of the memory budget (``config.rows_per_chunk``); the
matrix and Dirichlet fits refuse a class count whose C × C parameters and L-BFGS history would
not fit the budget (``HSC_MEMORY_BUDGET_MB``), with one line saying how much they need.

Above ``large_fits.LARGE_CLASS_COUNT`` (1,024) classes, iNat21's 10,000 for one, the fits take
the forms of ``core.large_fits`` so that each takes ≤ 60 s on 2 cores: vector scaling in float32
passes and 50 L-BFGS iterations; matrix and Dirichlet scaling with a *structured*
W = diag(d) + U Vᵀ (rank 8, V the features' principal directions, ODIR on its off-diagonal
entries; ``params`` {"d", "b", "U", "V"} in place of {"W", "b"}); the per-depth temperatures by
Newton steps. At or below it (ImageNet's 1,000 classes) every fit is as before.

Examples
--------
>>> calibrator_names()
('none', 'temperature', 'vector', 'matrix', 'dirichlet', 'isotonic', 'depth_temperature')
>>> get_calibrator("matrix").label
'Matrix scaling (ODIR)'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression, minimize, minimize_scalar

from ..config import memory_budget_bytes, rows_per_chunk
from .hierarchy import Hierarchy
from .large_fits import (
    LARGE_VECTOR_MAX_ITER,
    fit_depth_temperatures_newton,
    fit_structured_matrix,
    fit_vector_float32,
    is_large,
    nll_and_grad_of_scaled,
    structured_logits,
)
from .named_registry import NamedRegistry
from .probabilities import fit_temperature, node_probabilities, softmax
from .validation import check_labels, check_logits

#: L-BFGS history pairs (scipy's default ``maxcor``); the matrix fits' memory is ~(2m + 6) C².
LBFGS_HISTORY = 10
#: ODIR weights of the off-diagonal entries and the intercepts (Kull et al. 2019 pick them by
#: cross-validation; these are the middle of their grid).
ODIR_LAMBDA = 1e-2
ODIR_MU = 1e-2
#: L-BFGS iterations of vector scaling (each is ~3 passes over the calibration logits).
VECTOR_MAX_ITER = 100


@dataclass(frozen=True)
class FittedCalibrator:
    """A fitted calibrator: its key, its parameters and how it maps logits.

    Attributes
    ----------
    key : the calibrator's registry key.
    params : the fitted parameters (``temperature``: {"T": float}; ``vector``: {"w", "b"} (C,);
        ``matrix`` / ``dirichlet``: {"W"} (C, C) and {"b"} (C,), or above 1,024 classes the
        structured {"d", "b"} (C,), {"U", "V"} (C, r) with W = diag(d) + U Vᵀ; ``isotonic``: {"x", "y"} the
        knots of the map; ``depth_temperature``: {"T": (max_depth + 1,)} with T[0] unused}.
    """

    key: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def temperature(self) -> float:
        """The single T of ``temperature`` (1.0 for every other calibrator)."""
        return float(self.params.get("T", 1.0)) if self.key == "temperature" else 1.0

    @property
    def gives_leaf_distribution(self) -> bool:
        """Whether the node scores are sums of one leaf distribution (all but ``depth_temperature``)."""
        return self.key != "depth_temperature"

    def logits(self, logits: np.ndarray) -> np.ndarray:
        """(n, C) calibrated logits (log-probabilities up to a per-row constant), in float64.

        ``isotonic`` returns the log of its calibrated probabilities; ``depth_temperature`` has no
        one set of logits (ValueError).
        """
        z = np.asarray(logits, dtype=np.float64)
        p = self.params
        if self.key == "none":
            return z
        if self.key == "temperature":
            return z / p["T"]
        if self.key == "vector":
            return z * p["w"] + p["b"]
        if self.key in ("matrix", "dirichlet"):
            x = z if self.key == "matrix" else _log_softmax(z)
            return x @ p["W"].T + p["b"] if "W" in p else structured_logits(x, p)
        if self.key == "isotonic":
            with np.errstate(divide="ignore"):
                return np.log(self.leaf_probs(z))
        raise ValueError("depth_temperature has one temperature per depth, so no single calibrated logits")

    def leaf_probs(self, logits: np.ndarray) -> np.ndarray:
        """(n, C) calibrated leaf probabilities in the logits' precision (float32 for float16/32)."""
        arr = np.asarray(logits)
        dtype = np.float32 if arr.dtype in (np.float16, np.float32) else np.float64
        if self.key in ("none", "temperature"):  # today's code path, bit for bit
            return softmax(arr.astype(dtype, copy=False), self.temperature)
        if self.key == "isotonic":
            return _isotonic_probs(softmax(arr.astype(np.float64)), self.params["x"], self.params["y"]).astype(dtype)
        return softmax(self.logits(arr)).astype(dtype)

    def node_scores(self, hierarchy: Hierarchy, logits: np.ndarray) -> np.ndarray:
        """(n, n_nodes) calibrated node probabilities f_v, in the logits' precision."""
        if self.key != "depth_temperature":
            return node_probabilities(hierarchy, self.leaf_probs(logits))
        return _depth_node_scores(hierarchy, np.asarray(logits), self.params["T"])


@dataclass(frozen=True)
class CalibratorSpec:
    """One calibrator: key, display label, citation, its fit ``(hierarchy, logits, labels) → FittedCalibrator``
    and ``limit(hierarchy)``: why it cannot be fitted on that tree (one line), None when it can."""

    key: str
    label: str
    source: str
    fit: Callable[[Hierarchy, np.ndarray, np.ndarray], FittedCalibrator]
    limit: Callable[[Hierarchy], str | None] = field(default=lambda hierarchy: None)


_CALIBRATORS = NamedRegistry[CalibratorSpec]("calibrator")


def register_calibrator(spec: CalibratorSpec) -> CalibratorSpec:
    """List ``spec`` under a new key. Returns it."""
    return _CALIBRATORS.register(spec)


def calibrator_names() -> tuple[str, ...]:
    """The listed calibrators, in registration order."""
    return _CALIBRATORS.names()


def get_calibrator(name: str) -> CalibratorSpec:
    """The spec of a listed calibrator; one ValueError naming the choices otherwise."""
    return _CALIBRATORS.get(name)


#: The deepest tree ``depth_temperature`` accepts (its work grows as depth × n × C).
MAX_TEMPERATURE_DEPTHS = 64


def calibrator_limit(name: str, hierarchy: Hierarchy) -> str | None:
    """Why calibrator ``name`` cannot be fitted on ``hierarchy`` (one line), None when it can; nothing
    is computed (a front end leaves such a calibrator out before any work).

    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> chain = Hierarchy.from_parents([3, 3, 4, 4, -1], n_leaves=3)
    >>> calibrator_limit("depth_temperature", chain) is None
    True
    """
    return get_calibrator(name).limit(hierarchy)


def fit_calibrator(name: str, hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    """Fit calibrator ``name`` on (calibration-split) ``logits`` (n, C) and ``labels`` (n,); a tree it
    cannot take (``calibrator_limit``) is one ValueError."""
    spec = get_calibrator(name)
    why = spec.limit(hierarchy)
    if why is not None:
        raise ValueError(why)
    logits = check_logits(logits, hierarchy.n_leaves)
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    return spec.fit(hierarchy, logits, labels)


# ---------------------------------------------------------------------------- fits
def _fit_none(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    return FittedCalibrator("none")


def _fit_temperature(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    return FittedCalibrator("temperature", {"T": float(fit_temperature(logits, labels))})


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _fit_vector(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    n, c = logits.shape
    # From temperature scaling's optimum (w = 1/T, b = 0): a better start than w = 1; with about
    # one sample per class (iNat21's split) the unregularised optimum lies at infinity, so
    # ``VECTOR_MAX_ITER`` bounds the work (and the overfitting) rather than convergence.
    start = np.r_[np.full(c, 1.0 / fit_temperature(logits, labels)), np.zeros(c)]
    if is_large(c):  # iNat21 size: float32 passes (``core.large_fits``)
        theta, nll = fit_vector_float32(logits, labels, start, LARGE_VECTOR_MAX_ITER, LBFGS_HISTORY)
        return FittedCalibrator("vector", {"w": theta[:c], "b": theta[c:], "nll": nll})
    z = logits.astype(np.float64)

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:c], theta[c:]
        grad = np.zeros(2 * c)

        def back(rows: slice, g: np.ndarray) -> None:
            grad[:c] += np.einsum("ij,ij->j", g, z[rows])
            grad[c:] += g.sum(axis=0)
        loss = nll_and_grad_of_scaled(lambda rows: z[rows] * w + b, labels, n, c, back)
        return loss, grad

    res = minimize(f, start, jac=True, method="L-BFGS-B",
                   options={"maxiter": VECTOR_MAX_ITER, "maxcor": LBFGS_HISTORY})
    return FittedCalibrator("vector", {"w": res.x[:c], "b": res.x[c:], "nll": float(res.fun)})


def matrix_memory_bytes(n_classes: int) -> int:
    """Bytes a matrix / Dirichlet fit holds: W, its gradient, L-BFGS's history and temporaries (~(2m + 6) C² floats)."""
    return int((2 * LBFGS_HISTORY + 6) * 8 * n_classes * n_classes)


def _fit_matrix_of(key: str, features: Callable[[np.ndarray], np.ndarray], lam: float = ODIR_LAMBDA,
                   mu: float = ODIR_MU) -> Callable[[Hierarchy, np.ndarray, np.ndarray], FittedCalibrator]:
    def fit(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
        n, c = logits.shape
        if is_large(c):  # iNat21 size: W = diag(d) + U Vᵀ (``core.large_fits``)
            return FittedCalibrator(key, fit_structured_matrix(
                _structured_features(key, logits), labels, n, c, fit_temperature(logits, labels), lam, mu))
        need, budget = matrix_memory_bytes(c), memory_budget_bytes()
        if need > budget:
            raise ValueError(f"{key} scaling of {c} classes needs about {need / 2**20:,.0f} MB (C × C parameters "
                             f"and L-BFGS history), over the memory budget of {budget / 2**20:,.0f} MB "
                             "(HSC_MEMORY_BUDGET_MB)")
        x = features(logits.astype(np.float64))
        off = 1.0 - np.eye(c)
        scale_w = lam / max(1, c * (c - 1))
        scale_b = mu / c

        def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w, b = theta[: c * c].reshape(c, c), theta[c * c:]
            gw = 2.0 * scale_w * (w * off)
            gb = 2.0 * scale_b * b

            def back(rows: slice, g: np.ndarray) -> None:
                gw[...] += g.T @ x[rows]
                gb[...] += g.sum(axis=0)
            loss = nll_and_grad_of_scaled(lambda rows: x[rows] @ w.T + b, labels, n, c, back)
            loss += scale_w * float(np.sum((w * off) ** 2)) + scale_b * float(b @ b)
            return loss, np.r_[gw.ravel(), gb]

        res = minimize(f, np.r_[np.eye(c).ravel(), np.zeros(c)], jac=True, method="L-BFGS-B",
                       options={"maxiter": 500, "maxcor": LBFGS_HISTORY})
        return FittedCalibrator(key, {"W": res.x[: c * c].reshape(c, c), "b": res.x[c * c:], "nll": float(res.fun),
                                 "lambda": lam, "mu": mu})
    return fit


def _structured_features(key: str, logits: np.ndarray) -> Callable[[slice], np.ndarray]:
    """rows → float32 features of the structured fit: the logits (matrix) or log softmax (dirichlet)."""
    z = np.asarray(logits)
    if key == "matrix":
        return lambda rows: np.asarray(z[rows], dtype=np.float32)
    step = rows_per_chunk(8 * z.shape[1])
    lse = np.concatenate([_logsumexp(z[s:s + step].astype(np.float64)) for s in range(0, z.shape[0], step)])
    lse32 = lse.astype(np.float32)[:, None]  # float32 throughout: one pass per chunk, no float64 temporary
    return lambda rows: np.asarray(z[rows], dtype=np.float32) - lse32[rows]


def _logsumexp(z: np.ndarray) -> np.ndarray:
    top = z.max(axis=1)
    return top + np.log(np.exp(z - top[:, None]).sum(axis=1))


def _isotonic_knots(conf: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots (x ascending, y non-decreasing) of the isotonic regression of ``correct`` on ``conf``:
    ties in x merged (weighted mean), then pool-adjacent-violators; prediction interpolates
    linearly between knots and clips outside them (as scikit-learn's ``IsotonicRegression``)."""
    x, inverse, counts = np.unique(conf, return_inverse=True, return_counts=True)
    y = np.bincount(inverse, weights=correct.astype(np.float64)) / counts
    fitted = isotonic_regression(y, weights=counts.astype(np.float64), increasing=True).x
    return x, np.asarray(fitted)


def _fit_isotonic(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    probs = softmax(logits.astype(np.float64))
    top = probs.argmax(axis=1)
    x, y = _isotonic_knots(probs[np.arange(top.size), top], top == labels)
    return FittedCalibrator("isotonic", {"x": x, "y": y})


def _isotonic_probs(probs: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The top-1 probability mapped through the knots; the others rescaled to share the rest."""
    n = probs.shape[0]
    top = probs.argmax(axis=1)
    p_top = probs[np.arange(n), top]
    new_top = np.clip(np.interp(p_top, x, y), 0.0, 1.0)
    rest = 1.0 - p_top
    # Where the old top took all the mass, the rest is spread evenly (no proportions to keep).
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(rest > 0, (1.0 - new_top) / rest, 0.0)
    out = probs * scale[:, None]
    flat = rest <= 0
    if flat.any() and probs.shape[1] > 1:
        out[flat] = ((1.0 - new_top[flat]) / (probs.shape[1] - 1))[:, None]
    out[np.arange(n), top] = new_top
    return out


def _depth_targets(hierarchy: Hierarchy, labels: np.ndarray, d: int) -> np.ndarray:
    """The true node at depth d of each label (the label itself when it is shallower)."""
    return hierarchy.ancestor_at_depth(labels, np.minimum(hierarchy.depth[labels], d))


def _node_nll(hierarchy: Hierarchy, logits: np.ndarray, targets: np.ndarray, temperature: float) -> float:
    """Mean −log f_target(softmax(z / T)) over row chunks: exponentials in float32 (half the time
    of float64 at iNat21 size; the fit's tolerance, 0.1 % of T, is far above float32's noise),
    each row's log-ratio and the sum in float64."""
    n, c = logits.shape
    total = 0.0
    rows = rows_per_chunk(8 * 4 * (c + hierarchy.n_nodes))
    inv_t = np.float32(1.0 / temperature)
    for start in range(0, n, rows):
        z = logits[start:start + rows].astype(np.float32) * inv_t
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        tot = e.sum(axis=1, dtype=np.float64)
        t = targets[start:start + rows]
        leaf = t < hierarchy.n_leaves
        num = np.empty(t.size)
        num[leaf] = e[leaf, t[leaf]]
        if (~leaf).any():
            num[~leaf] = _subset_sums(hierarchy, e, np.flatnonzero(~leaf), t[~leaf])
        total += float(np.sum(np.log(tot) - np.log(np.maximum(num, 1e-300))))
    return total / n


def _subset_sums(hierarchy: Hierarchy, e: np.ndarray, rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Σ_{y∈L(target_i)} e[row_i, y] for each i: per target node a dense gather when few nodes
    are targets (near the root, where L(v) is large and a sparse product would copy most of e),
    else one sparse elementwise product (deep levels: many small leaf sets)."""
    nodes, inverse = np.unique(targets, return_inverse=True)
    if nodes.size > 64:
        sub = hierarchy.leaf_matrix[targets]  # (k, C) indicator rows of L(target)
        return np.asarray(sub.multiply(e[rows]).sum(axis=1), dtype=np.float64)[:, 0]
    out = np.empty(rows.size)
    for k, v in enumerate(nodes):
        mine = np.flatnonzero(inverse == k)
        leaves = hierarchy.leaf_matrix[v].indices
        out[mine] = e[np.ix_(rows[mine], leaves)].sum(axis=1, dtype=np.float64)
    return out


def _fit_depth_temperature(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray) -> FittedCalibrator:
    if is_large(hierarchy.n_leaves):  # iNat21 size: Newton steps in float32 (``core.large_fits``)
        return FittedCalibrator("depth_temperature", {"T": fit_depth_temperatures_newton(hierarchy, logits, labels)})
    temps = np.ones(hierarchy.max_depth + 1)
    for d in range(1, hierarchy.max_depth + 1):
        targets = _depth_targets(hierarchy, labels, d)
        res = minimize_scalar(lambda log_t, t=targets: _node_nll(hierarchy, logits, t, float(np.exp(log_t))),
                              bounds=(np.log(0.05), np.log(20.0)), method="bounded", options={"xatol": 1e-3})
        temps[d] = float(np.exp(res.x))
    return FittedCalibrator("depth_temperature", {"T": temps})


def _depth_limit(hierarchy: Hierarchy) -> str | None:
    if hierarchy.max_depth <= MAX_TEMPERATURE_DEPTHS:
        return None
    return (f"depth_temperature fits one temperature per depth: this tree is {hierarchy.max_depth:,} deep, over the "
            f"{MAX_TEMPERATURE_DEPTHS} it accepts (its work grows as depth × samples × classes); use temperature")


def _depth_node_scores(hierarchy: Hierarchy, logits: np.ndarray, temps: np.ndarray) -> np.ndarray:
    """Node v scored by softmax(z / T_depth(v)) summed over L(v), then the largest score in v's
    subtree (monotone along every root path, as Climbing and the tight thresholds need)."""
    dtype = np.float32 if logits.dtype in (np.float16, np.float32) else np.float64
    out = np.empty((logits.shape[0], hierarchy.n_nodes), dtype=dtype)
    depth = hierarchy.depth
    for t in np.unique(temps[1:]):
        cols = np.flatnonzero(temps[depth] == t)
        cols = cols[depth[cols] > 0]
        probs = node_probabilities(hierarchy, softmax(logits.astype(dtype, copy=False), float(t)))
        out[:, cols] = probs[:, cols]
    out[:, hierarchy.root] = 1.0
    return subtree_max(hierarchy, out)


def subtree_max(hierarchy: Hierarchy, scores: np.ndarray) -> np.ndarray:
    """(n, n_nodes): each node's largest score over its subtree (itself included), in place."""
    for nodes, parents, starts in reversed(depth_groups(hierarchy)):
        best = np.maximum.reduceat(scores[:, nodes], starts, axis=1)
        scores[:, parents] = np.maximum(scores[:, parents], best)
    return scores


def depth_groups(hierarchy: Hierarchy) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per depth d = 1 … max_depth: (nodes at d sorted by parent, their distinct parents, where
    each parent's children start), cached on the hierarchy."""
    def compute() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        out = []
        for d in range(1, hierarchy.max_depth + 1):
            nodes = np.flatnonzero(hierarchy.depth == d)
            nodes = nodes[np.argsort(hierarchy.parent[nodes], kind="stable")]
            par = hierarchy.parent[nodes]
            starts = np.flatnonzero(np.r_[True, par[1:] != par[:-1]])
            out.append((nodes, par[starts], starts))
        return out
    return hierarchy.memo(("depth_groups",), compute)


for _spec in (
    CalibratorSpec("none", "No calibration", "softmax of the raw logits", _fit_none),
    CalibratorSpec("temperature", "Temperature scaling", "Guo et al., \"On calibration of modern neural "
                   "networks\" (ICML 2017)", _fit_temperature),
    CalibratorSpec("vector", "Vector scaling", "Guo et al. (ICML 2017)", _fit_vector),
    CalibratorSpec("matrix", "Matrix scaling (ODIR)", "Kull et al., \"Beyond temperature scaling\" "
                   "(NeurIPS 2019)", _fit_matrix_of("matrix", lambda z: z)),
    CalibratorSpec("dirichlet", "Dirichlet calibration (ODIR)", "Kull et al. (NeurIPS 2019)",
                   _fit_matrix_of("dirichlet", _log_softmax)),
    CalibratorSpec("isotonic", "Isotonic (top-1)", "Zadrozny & Elkan (KDD 2002), on the top-1 probability",
                   _fit_isotonic),
    CalibratorSpec("depth_temperature", "Temperature per depth", "this toolkit: one T per tree depth, "
                   "node-level NLL", _fit_depth_temperature, _depth_limit),
):
    register_calibrator(_spec)
