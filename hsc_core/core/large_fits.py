"""The calibrators' fits at iNat21 size (more than ``LARGE_CLASS_COUNT`` classes; issue 31).

At or below ``LARGE_CLASS_COUNT`` classes (ImageNet's 1,000 included) ``core.calibrators`` fits
exactly as it always did. Above it, where a fit must take ≤ 60 s on 2 cores at 10,000 classes
and 10,000 calibration rows (the protocol's 10 % of 100,000 samples), these forms take over:

* **vector**: the same objective, with every pass over the logits in float32 (sums of each row in
  float64): half the memory traffic of float64 and no float64 copy; L-BFGS stops after
  ``LARGE_VECTOR_MAX_ITER`` iterations (with about one sample per class the optimum lies at
  infinity, so the cap bounds the work and the overfitting, not convergence).
* **matrix / dirichlet**: a *structured* W = diag(d) + U Vᵀ with U, V ∈ ℝ^{C×r} (r =
  ``LOW_RANK``), V fixed to the calibration features' top r principal directions (so the fit
  stays convex, as full matrix scaling is), still ODIR-regularised: the penalty
  λ/(C(C−1)) Σ_{j≠k} W_jk² is exact on this W, computed from r × r Gram matrices. A full C × C
  matrix is 10⁸ parameters at 10,000 classes (~1e12 flops per pass, ~20 GB with L-BFGS's
  history), which no 60 s budget holds. The fit
  starts from temperature scaling (d = 1/T, U = 0), so its NLL is never above TS's, and stops
  after ``STRUCTURED_MAX_ITER`` L-BFGS iterations.
* **depth_temperature**: the same per-depth node-level NLL, minimised over β = 1/T ∈ [0.05, 20]
  by safeguarded Newton steps (exact first and second derivatives, bisection when a step leaves
  the bracket) instead of a derivative-free search. The logits are copied once into float32 in
  depth-first leaf order, so that every node's leaves are contiguous columns and each depth's
  node sums are one ``np.add.reduceat`` per chunk (the hierarchy's leaf → ancestor structure as
  column ranges, rather than dense per-node matrices).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

from ..config import rows_per_chunk
from .hierarchy import Hierarchy

#: Above this many classes the fits take the forms above; at or below it they are today's.
LARGE_CLASS_COUNT = 1024
#: L-BFGS iterations of vector scaling above ``LARGE_CLASS_COUNT`` (100 at or below it).
LARGE_VECTOR_MAX_ITER = 50
#: Rank of the off-diagonal part U Vᵀ of the structured matrix / Dirichlet fits.
LOW_RANK = 8
#: L-BFGS iterations of the structured fits: each evaluation is about 1.3 vector-scaling passes over
#: the calibration logits (x V is computed once) and the principal directions cost a few more, so
#: 30 keep the fit under 60 s of CPU at iNat21 size (40 took 57 s); with about one sample per
#: class, the cap bounds the work and the overfitting, not convergence.
STRUCTURED_MAX_ITER = 30
#: Newton's stopping rule on β = 1/T (relative step: 100 times finer than today's search, which
#: stops within 1e-3 of log T) and its bracket (T ∈ [0.05, 20], as today's).
NEWTON_RTOL = 1e-5
BETA_BOUNDS = (0.05, 20.0)


def is_large(n_classes: int) -> bool:
    """Whether ``n_classes`` takes the iNat21-size fits (more than ``LARGE_CLASS_COUNT``)."""
    return n_classes > LARGE_CLASS_COUNT


def nll_and_grad_of_scaled(z_of: Callable[[slice], np.ndarray], labels: np.ndarray, n: int, c: int,
                           backward: Callable[[slice, np.ndarray], None]) -> float:
    """Mean NLL of softmax(z') over row chunks, z' = ``z_of(rows)`` (n_rows, c) in its own precision;
    ``backward(rows, G)`` takes each chunk's dL/dz' = (softmax(z') − onehot) / n (computed in place
    in z'). Each row's log-sum and the total are float64."""
    total = 0.0
    step = rows_per_chunk(4 * 8 * c)
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        zp = z_of(rows)
        y = labels[rows]
        at = np.arange(y.size)
        top = zp.max(axis=1, keepdims=True)
        true = zp[at, y] - top[:, 0]
        zp -= top
        np.exp(zp, out=zp)
        s = zp.sum(axis=1, keepdims=True, dtype=np.float64)
        total += float(np.sum(np.log(s[:, 0]) - true))
        zp /= (s * n).astype(zp.dtype, copy=False)
        zp[at, y] -= zp.dtype.type(1.0 / n)
        backward(rows, zp)
    return total / n


def fit_vector_float32(logits: np.ndarray, labels: np.ndarray, start: np.ndarray, max_iter: int,
                       history: int) -> tuple[np.ndarray, float]:
    """Vector scaling's L-BFGS with float32 passes: ``(theta = [w, b] (2C,), mean NLL)``.

    Parameters
    ----------
    logits : (n, C) calibration logits (any float dtype; read as float32).
    labels : (n,) true leaves.
    start : (2C,) the starting [w, b] (temperature scaling's optimum).
    """
    z = np.asarray(logits, dtype=np.float32)
    n, c = z.shape

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:c].astype(np.float32), theta[c:].astype(np.float32)
        grad = np.zeros(2 * c)

        def back(rows: slice, g: np.ndarray) -> None:
            grad[:c] += np.einsum("ij,ij->j", g, z[rows])
            grad[c:] += g.sum(axis=0, dtype=np.float64)
        def forward(rows: slice) -> np.ndarray:
            zp = z[rows] * w
            zp += b
            return zp
        return nll_and_grad_of_scaled(forward, labels, n, c, back), grad

    res = minimize(f, start, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "maxcor": history})
    return res.x, float(res.fun)


def structured_logits(x: np.ndarray, params: dict) -> np.ndarray:
    """(n, C) x diag(d) + (x V) Uᵀ + b: the structured matrix map of features ``x`` (n, C)."""
    return x * params["d"] + (x @ params["V"]) @ params["U"].T + params["b"]


def offdiagonal_square_sum(u: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Σ_{j≠k} (U Vᵀ)_jk² = tr(UᵀU VᵀV) − Σ_j (u_j·v_j)² and its gradients with respect to U and V (C, r)."""
    uu, vv = u.T @ u, v.T @ v
    q = np.einsum("jr,jr->j", u, v)
    value = float(np.sum(uu * vv) - q @ q)
    return value, 2.0 * (u @ vv - q[:, None] * v), 2.0 * (v @ uu - q[:, None] * u)


def principal_directions(features_of: Callable[[slice], np.ndarray], n: int, c: int, rank: int,
                         seed: int = 0) -> np.ndarray:
    """(c, rank) orthonormal top right singular vectors of the (n, c) features, by a seeded
    randomized range finder (Halko et al. 2011: rank + 8 probes, one power iteration); two
    chunked passes over the features per product."""
    k = min(c, rank + 8)
    step = rows_per_chunk(8 * c)
    omega = np.random.default_rng(seed).standard_normal((c, k)).astype(np.float32)

    def times(mat: np.ndarray) -> np.ndarray:  # X @ mat, (n, k)
        return np.concatenate([features_of(slice(s, min(s + step, n))) @ mat for s in range(0, n, step)])

    def transposed_times(mat: np.ndarray) -> np.ndarray:  # Xᵀ @ mat, (c, k)
        out = np.zeros((c, mat.shape[1]), dtype=np.float64)
        for s in range(0, n, step):
            out += features_of(slice(s, min(s + step, n))).T @ mat[s:s + step]
        return out

    q = np.linalg.qr(times(omega).astype(np.float64))[0]
    q = np.linalg.qr(times(np.linalg.qr(transposed_times(q.astype(np.float32)))[0].astype(np.float32))
                     .astype(np.float64))[0]
    b = transposed_times(q.astype(np.float32)).T  # (k, c) = Qᵀ X
    return np.linalg.svd(b, full_matrices=False)[2][:rank].T


def fit_structured_matrix(features_of: Callable[[slice], np.ndarray], labels: np.ndarray, n: int, c: int,
                          temperature: float, lam: float, mu: float, rank: int = LOW_RANK,
                          max_iter: int = STRUCTURED_MAX_ITER, history: int = 10) -> dict:
    """ODIR-regularised matrix scaling with W = diag(d) + U Vᵀ, fitted by L-BFGS in float32 passes.

    V (c, rank) is fixed to the features' top principal directions (``principal_directions``), so
    x V is computed once and the objective stays convex in (d, b, U), as full matrix scaling's is
    in W; the off-diagonal interactions are those along the directions the logits vary most.

    Parameters
    ----------
    features_of : rows → (n_rows, c) float32 features (logits for ``matrix``, log-probabilities
        for ``dirichlet``).
    labels : (n,) true leaves.
    temperature : temperature scaling's T; the fit starts from d = 1/T, U = 0 (today's TS).
    lam, mu : ODIR weights of the off-diagonal entries and of the intercepts.

    Returns
    -------
    {"d": (c,), "b": (c,), "U": (c, rank), "V": (c, rank), "nll": float, "rank": int,
    "lambda": lam, "mu": mu}
    """
    rank = min(rank, c)
    scale_w, scale_b = lam / max(1, c * (c - 1)), mu / c
    v = principal_directions(features_of, n, c, rank)
    step = rows_per_chunk(8 * c)
    xv = np.concatenate([features_of(slice(s, min(s + step, n))) @ v.astype(np.float32) for s in range(0, n, step)])

    def unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return theta[:c], theta[c:2 * c], theta[2 * c:].reshape(c, rank)

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d, b, u = unpack(theta)
        d32, b32, u32 = (a.astype(np.float32) for a in (d, b, u))
        gd, gb, gu = np.zeros(c), np.zeros(c), np.zeros((c, rank))
        chunk: dict[int, np.ndarray] = {}  # the chunk's features between its forward and back

        def forward(rows: slice) -> np.ndarray:
            x = chunk[rows.start] = features_of(rows)
            zp = xv[rows] @ u32.T
            zp += b32
            zp += x * d32
            return zp

        def back(rows: slice, g: np.ndarray) -> None:
            x = chunk.pop(rows.start)
            gd[...] += np.einsum("ij,ij->j", g, x)
            gb[...] += g.sum(axis=0, dtype=np.float64)
            gu[...] += g.T @ xv[rows]
        loss = nll_and_grad_of_scaled(forward, labels, n, c, back)
        off, off_u, _ = offdiagonal_square_sum(u, v)
        loss += scale_w * off + scale_b * float(b @ b)
        gb += 2.0 * scale_b * b
        return loss, np.r_[gd, gb, (gu + scale_w * off_u).ravel()]

    start = np.r_[np.full(c, 1.0 / temperature), np.zeros(c), np.zeros(c * rank)]
    res = minimize(f, start, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "maxcor": history})
    d, b, u = unpack(res.x)
    return {"d": d, "b": b, "U": u, "V": v, "nll": float(res.fun), "rank": rank, "lambda": lam, "mu": mu}


def depth_first_leaves(hierarchy: Hierarchy) -> np.ndarray:
    """(C,) the leaves in depth-first order: every node's leaves are one contiguous run."""
    leaves = np.arange(hierarchy.n_leaves)
    keys = [hierarchy.ancestor_at_depth(leaves, np.minimum(hierarchy.depth[leaves], d))
            for d in range(hierarchy.max_depth, 0, -1)]
    return np.lexsort(keys) if keys else leaves


def shifted_depth_first(logits: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(n, C) float32 u = z − max z per row, columns in ``order`` (one copy, made once per fit)."""
    n, c = logits.shape
    out = np.empty((n, c), dtype=np.float32)
    step = rows_per_chunk(8 * c)
    for start in range(0, n, step):
        block = np.take(np.asarray(logits[start:start + step], dtype=np.float32), order, axis=1)
        block -= block.max(axis=1, keepdims=True)
        out[start:start + step] = block
    return out


def _depth_pass(u_all: np.ndarray, starts: np.ndarray, groups: np.ndarray, beta: float) -> tuple[float, float, float]:
    """The mean node NLL L(β), dL/dβ and d²L/dβ² at one depth, over row chunks in float32.

    With u = z − max z (``shifted_depth_first``), p ∝ exp(βu) and q = p restricted to the true
    node's leaves: L = mean[log Σ e − log Σ_{L(t)} e], L' = mean[E_p u − E_q u],
    L'' = mean[Var_p u − Var_q u]. ``groups`` (n,) is each row's true node as an index into the
    column runs ``starts``.
    """
    n, c = u_all.shape
    value = grad = hess = 0.0
    step = rows_per_chunk(4 * 4 * c)
    b32 = np.float32(beta)
    for start in range(0, n, step):
        u = u_all[start:start + step]
        e = np.multiply(u, b32)
        np.exp(e, out=e)
        eu = e * u
        euu = eu * u
        at, g = np.arange(u.shape[0]), groups[start:start + step]
        moments = []
        for a in (e, eu, euu):
            whole = a.sum(axis=1, dtype=np.float64)
            part = np.add.reduceat(a, starts, axis=1)[at, g].astype(np.float64)
            moments.append((whole, part))
        (s0, g0), (s1, g1), (s2, g2) = moments
        g0 = np.maximum(g0, 1e-300)
        m_all, m_part = s1 / s0, g1 / g0
        value += float(np.sum(np.log(s0) - np.log(g0)))
        grad += float(np.sum(m_all - m_part))
        hess += float(np.sum((s2 / s0 - m_all ** 2) - (g2 / g0 - m_part ** 2)))
    return value / n, grad / n, hess / n


def fit_depth_temperatures_newton(hierarchy: Hierarchy, logits: np.ndarray, labels: np.ndarray,
                                  max_steps: int = 60) -> np.ndarray:
    """(max_depth + 1,) one T per depth (T[0] = 1, unused), each minimising the node-level NLL of
    the true node at that depth by safeguarded Newton steps on β = 1/T ∈ ``BETA_BOUNDS``, each
    depth starting from the depth above's optimum (neighbouring depths' temperatures are close)."""
    leaves = order = depth_first_leaves(hierarchy)
    u_all = shifted_depth_first(logits, order)
    temps = np.ones(hierarchy.max_depth + 1)
    beta = 1.0
    for d in range(1, hierarchy.max_depth + 1):
        node_of_column = hierarchy.ancestor_at_depth(leaves, np.minimum(hierarchy.depth[leaves], d))
        starts = np.flatnonzero(np.r_[True, node_of_column[1:] != node_of_column[:-1]])
        run_of_node = np.full(hierarchy.n_nodes, -1)
        run_of_node[node_of_column[starts]] = np.arange(starts.size)
        targets = hierarchy.ancestor_at_depth(labels, np.minimum(hierarchy.depth[labels], d))
        groups = run_of_node[targets]
        lo, hi = BETA_BOUNDS
        for _ in range(max_steps):
            _, grad, hess = _depth_pass(u_all, starts, groups, beta)
            if grad > 0:
                hi = beta
            else:
                lo = beta
            new = beta - grad / hess if hess > 0 else np.nan
            if not lo < new < hi:  # a step out of the bracket (or uphill): bisect it instead
                new = float(np.sqrt(lo * hi))
            if abs(new - beta) <= NEWTON_RTOL * beta or hi - lo <= NEWTON_RTOL * lo:
                beta = new
                break
            beta = new
        temps[d] = 1.0 / beta
    return temps
