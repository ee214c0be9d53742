"""Leaf softmax, node probabilities f_v(x) = Σ_{y∈L(v)} p_y(x), and temperature scaling."""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize_scalar

from ..config import chunk_threads, rows_per_block, rows_per_chunk
from .hierarchy import Hierarchy
from .parallel import ordered_map
from .validation import check_labels, check_logits, check_temperature


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature``.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes)
    temperature : float > 0; a divisor (T < 1 sharpens).

    Returns
    -------
    probs : array of shape (n_samples, n_classes); float32 for float16/32 input, else float64
    """
    logits = check_logits(logits)
    temperature = check_temperature(temperature)
    out: np.ndarray = np.empty(logits.shape, dtype=logits.dtype)
    for rows in _cache_blocks(logits.shape[0], out.itemsize * logits.shape[1]):
        bad = _softmax_into(out[rows], logits[rows], temperature)
        if bad >= 0:  # the logits are finite (check_logits): dividing by T overflowed
            raise ValueError(f"logits / temperature overflow {out.dtype} (first: row {rows.start + bad})")
    return out


class NonFiniteLogits(ValueError):
    """Logits with NaN or inf; ``row`` is the first such row of the array given."""

    def __init__(self, row: int) -> None:
        super().__init__(f"logits contain NaN or inf (first: row {row})")
        self.row = row


def softmax_node_probabilities(hierarchy: Hierarchy, logits: np.ndarray, temperature: float = 1.0,
                               dtype: type = np.float32) -> np.ndarray:
    """``node_probabilities(hierarchy, softmax(logits, temperature))`` in ``dtype``, the same bits,
    in one pass over ``logits`` (any float dtype: a float16 chunk is cast a few rows at a time).

    Each cache block of rows (``config.rows_per_block``) is cast and scaled, checked, normalised and
    summed per node while it stays in the core's cache, written straight into the node columns:
    no float32 copy of the chunk, no separate leaf array (three times faster than the passes
    over a whole chunk at iNat21 size). Raises ``NonFiniteLogits`` (a ValueError) for NaN or inf.

    Returns
    -------
    (n_samples, n_nodes) C-contiguous node probabilities; columns ``0 … n_leaves-1`` are the leaves'.
    """
    arr = np.asarray(logits)
    if arr.ndim != 2 or arr.shape[1] != hierarchy.n_leaves:
        raise ValueError(f"logits must have shape (n_samples, {hierarchy.n_leaves}), got {arr.shape}")
    temperature = check_temperature(temperature)
    out: np.ndarray = np.empty((arr.shape[0], hierarchy.n_nodes), dtype=dtype)
    leaves = out[:, : hierarchy.n_leaves]
    for rows in _cache_blocks(arr.shape[0], out.itemsize * hierarchy.n_nodes):
        bad = _softmax_into(leaves[rows], arr[rows], temperature)  # float16 → float32 is exact
        if bad >= 0:
            raise NonFiniteLogits(rows.start + bad)
        _fill_internal(hierarchy, out[rows])
    return out


def _cache_blocks(n: int, bytes_per_row: int) -> list[slice]:
    """Consecutive row slices of ``config.rows_per_block`` rows covering ``range(n)``."""
    step = rows_per_block(bytes_per_row)
    return [slice(a, min(a + step, n)) for a in range(0, n, step)]


def _softmax_into(out: np.ndarray, logits: np.ndarray, temperature: float) -> int:
    """softmax(logits / T) row-wise into ``out`` (cast to its dtype as they are scaled): the
    operations of a plain softmax, in the same order, so every row's bits are the same for any
    block of rows (each row's max and pairwise sum are its own).

    Returns the first row whose scaled logits are not all finite (NaN or ±inf: its maximum or
    minimum is not finite, one reduction instead of a test of every value), −1 when there is none.
    """
    np.divide(logits, temperature, out=out, dtype=out.dtype)
    top = out.max(axis=1, keepdims=True)
    bad = ~(np.isfinite(top[:, 0]) & np.isfinite(out.min(axis=1)))
    if bad.any():  # ``out`` is left as it is: the caller raises
        return int(np.flatnonzero(bad)[0])
    out -= top
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)
    return -1


#: The smallest probability ``probability_logits`` keeps: a 0 becomes log(1e-300) ≈ −690.8, finite.
PROBABILITY_FLOOR = 1e-300


def probability_logits(probs: np.ndarray) -> np.ndarray:
    """Logits of a classifier that outputs probabilities: their logarithm (float64).

    ``softmax(probability_logits(p))`` gives back ``p`` (rows that sum to 1) up to rounding, so a
    model that only has ``predict_proba`` (scikit-learn, HiClass) enters every logits path of the
    toolkit. A probability of 0 is floored at ``PROBABILITY_FLOOR`` so its logit stays finite.

    Parameters
    ----------
    probs : (n_samples, n_classes) probabilities, non-negative; any float dtype.

    Returns
    -------
    logits : (n_samples, n_classes) float64, log(max(p, 1e-300)).

    Examples
    --------
    >>> z = probability_logits(np.array([[0.25, 0.75, 0.0]]))
    >>> np.round(softmax(z), 12).tolist(), bool(np.isfinite(z).all())
    ([[0.25, 0.75, 0.0]], True)
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.size == 0:
        raise ValueError(f"probabilities must be a non-empty 2-D (n_samples, n_classes) array, got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("probabilities must be finite and non-negative")
    return np.log(np.maximum(p, PROBABILITY_FLOOR))


def node_probabilities(hierarchy: Hierarchy, leaf_probs: np.ndarray) -> np.ndarray:
    """Probability of every node: the sum of its leaves' probabilities.

    Parameters
    ----------
    hierarchy : Hierarchy with ``n_leaves`` classes.
    leaf_probs : array of shape (n_samples, n_leaves)

    Returns
    -------
    node_probs : array of shape (n_samples, n_nodes), C-contiguous; float32 for float16/32 input,
        else float64. Columns ``0 … n_leaves-1`` equal ``leaf_probs``.

    Examples
    --------
    >>> import numpy as np
    >>> from hsc_core import Hierarchy
    >>> h = Hierarchy.from_parents([3, 3, 4, 4, -1], n_leaves=3, node_ids=["cat", "dog", "car", "animal", "root"])
    >>> node_probabilities(h, np.array([[0.5, 0.3, 0.2]])).round(2).tolist()   # cat, dog, car, animal, root
    [[0.5, 0.3, 0.2, 0.8, 1.0]]
    """
    leaf_probs = np.asarray(leaf_probs)
    if leaf_probs.ndim != 2 or leaf_probs.shape[1] != hierarchy.n_leaves:
        raise ValueError(
            f"leaf_probs must have shape (n_samples, {hierarchy.n_leaves}), got {leaf_probs.shape}"
        )
    dtype = np.float32 if leaf_probs.dtype in (np.float16, np.float32) else np.float64
    out = np.empty((leaf_probs.shape[0], hierarchy.n_nodes), dtype=dtype)
    out[:, : hierarchy.n_leaves] = leaf_probs  # a leaf's probability is its own, bit for bit
    for rows in _cache_blocks(out.shape[0], out.itemsize * hierarchy.n_nodes):
        _fill_internal(hierarchy, out[rows])
    return out


def _fill_internal(hierarchy: Hierarchy, out: np.ndarray) -> None:
    """Internal nodes' columns of ``out`` (n, n_nodes) from its leaf columns.

    One sparse matmul with L(v)ᵀ in ``out``'s precision (float32 halves time and memory at
    ImageNet scale): each node's sum adds its leaves in ascending index order, whatever the
    number of rows, so any block of rows gives the same bits (callers pass a cache block).
    Leaving the identity leaf columns out of the product halves its cost at iNat21 size and
    changes no sum.
    """
    if hierarchy.n_nodes > hierarchy.n_leaves:
        out[:, hierarchy.n_leaves:] = out[:, : hierarchy.n_leaves] @ _internal_leaf_matrix_t(hierarchy, out.dtype.type)


def _internal_leaf_matrix_t(hierarchy: Hierarchy, dtype: type) -> sp.csr_matrix:
    """(n_leaves, n_internal) CSR transpose of ``hierarchy.leaf_matrix``'s internal rows, cached per dtype."""
    key = ("internal_leaf_matrix_t", np.dtype(dtype).str)
    def compute():
        return hierarchy.leaf_matrix[hierarchy.n_leaves:].T.tocsr().astype(dtype)
    return hierarchy.memo(key, compute)


def negative_log_likelihood(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    """Mean cross-entropy of softmax(logits / T) against integer labels."""
    logits = check_logits(logits)
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    check_temperature(temperature)
    true_logit_sum = float(logits[np.arange(len(labels)), labels].sum(dtype=np.float64))
    return _nll(logits, true_logit_sum, float(temperature))


def _nll(logits: np.ndarray, true_logit_sum: float, temperature: float, row_max: np.ndarray | None = None,
         rows: np.ndarray | None = None) -> float:
    """NLL = mean_i [logsumexp(z_i / T)] − Σ_i z_{i,y_i} / (T n), in row chunks.

    The true-class term is linear in 1/T, so only the log-sum-exp needs the logits at each T.
    Rows are scaled into a reused float64 buffer: float32 exp/sum moves the flat optimum of T by
    up to ~4e-4 (relative) on the shipped logits, float64 keeps it exact to ~1e-12. Each row's
    log-sum-exp is its own, so blocks of rows are worked on side by side (``parallel.ordered_map``)
    and then summed per chunk of the memory budget, in order: the value is the same for any thread
    count. Within a thread's share, rows go through scale, exp and sum a few at a time
    (``config.rows_per_block``: the buffer stays in the core's cache, so the passes do not stream
    main memory; ~4× faster at iNat21 size, the same bits per row). ``row_max`` (n,): each row's
    largest logit, computed once per fit (``fit_temperature``): max_j(z_ij / T) is (max_j z_ij) / T
    bit for bit (rounding is monotone). ``rows`` (n,): the rows of ``logits`` to use, gathered a block
    at a time (float16 logits are cast as they are scaled: the same float64 values); None: all.
    """
    n, c = (logits.shape[0] if rows is None else len(rows)), logits.shape[1]
    summed = rows_per_chunk(c * 8)  # the rows summed together: bounded at any n × C
    step = max(1, summed // chunk_threads())  # one thread's share of rows
    block = min(step, rows_per_block(c * 8))  # rows scaled at once: a float64 buffer in the core's cache
    inv_t = 1.0 / temperature
    local = threading.local()

    def row_lse(start: int) -> np.ndarray:
        stop = min(start + step, n)
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = np.empty((min(block, n), c))
        out = np.empty(stop - start)
        for a in range(start, stop, block):
            b = min(a + block, stop)
            part = logits[a:b] if rows is None else logits[rows[a:b]]
            z = np.multiply(part, inv_t, out=buf[: b - a], dtype=np.float64)
            if row_max is None:
                top = z.max(axis=1, keepdims=True)
            else:
                top = np.multiply(row_max[a:b, None], inv_t)
            z -= top
            np.exp(z, out=z)
            out[a - start: b - start] = np.log(z.sum(axis=1)) + top[:, 0]
        return out

    lse = np.concatenate(list(ordered_map(row_lse, range(0, n, step), warm_first=False)))
    lse_sum = 0.0
    for start in range(0, n, summed):
        lse_sum += float(np.sum(lse[start:start + summed]))
    return (lse_sum - true_logit_sum * inv_t) / n


def fit_temperature(logits: np.ndarray, labels: np.ndarray, bounds: tuple[float, float] = (0.05, 20.0), *,
                    rows: np.ndarray | None = None) -> float:
    """Temperature T minimising the NLL on a calibration split (Guo et al. 2017).

    The authors fit T with LBFGS from T = 1.5; the NLL is convex in 1/T, so a bounded
    scalar search on log T finds the same optimum deterministically. Each evaluation walks the
    logits in row chunks (``_nll``): memory stays bounded and the logits are never copied whole,
    nor cast whole (float16 logits are cast a block of rows at a time, to the same values).

    Parameters
    ----------
    logits : (n_samples, n_classes) any float dtype.
    labels : (n_samples,) integer class indices.
    rows : fit on these rows of ``logits`` and ``labels`` (1-D indices), without copying them; None: all.
    """
    arr = np.asarray(logits)
    check_logits(arr[:1])  # shape, dtype, row 0; every row's values are checked below, a block at a time
    if rows is None:
        labels = check_labels(labels, arr.shape[0], arr.shape[1])
    else:
        given = np.asarray(rows)
        if given.ndim != 1 or given.size == 0 or not np.issubdtype(given.dtype, np.integer):
            raise ValueError(f"rows must be a non-empty 1-D array of row indices (np.flatnonzero(mask) for a mask), "
                             f"got dtype {given.dtype}, shape {given.shape}")
        if given.min() < 0 or given.max() >= arr.shape[0]:
            raise ValueError(f"rows must lie in [0, {arr.shape[0]}), got {int(given.min())} … {int(given.max())}")
        rows = given.astype(np.int64, copy=False)
        labels = check_labels(labels, arr.shape[0], arr.shape[1])[rows]
    at = np.arange(arr.shape[0]) if rows is None else rows
    true_logit_sum = float(arr[at, labels].sum(dtype=np.float64))
    row_max = _row_max(arr, rows)
    res = minimize_scalar(
        lambda log_t: _nll(arr, true_logit_sum, float(np.exp(log_t)), row_max, rows),
        bounds=(np.log(bounds[0]), np.log(bounds[1])),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(np.exp(res.x))


def _row_max(logits: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """(n,) float64 each row's largest logit (of ``rows`` when given), a cache block of rows at a time;
    raises ``check_logits``' ValueError when a row holds NaN or inf (its maximum or minimum is not finite)."""
    n = logits.shape[0] if rows is None else len(rows)
    top, low = np.empty(n), np.empty(n)
    step = rows_per_block(logits.shape[1] * 8)
    for a in range(0, n, step):
        block = logits[a:a + step] if rows is None else logits[rows[a:a + step]]
        if block.dtype == np.float16:  # numpy's float16 reductions are slow; float32 holds every value
            block = block.astype(np.float32)
        top[a:a + len(block)] = block.max(axis=1)
        low[a:a + len(block)] = block.min(axis=1)
    bad = ~(np.isfinite(top) & np.isfinite(low))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"logits contain NaN or inf in {int(bad.sum())} rows "
                         f"(first: row {first if rows is None else int(rows[first])})")
    return top
