"""Every RC curve of one model from its logits, in bounded memory: the single entry point that the
``evaluate`` command, the report and the dashboard use for whole-model numbers.

logits → (temperature) softmax → node probabilities → each rule's decision paths, one chunk of
samples at a time; then exact (or ``dec``-grid) RC curves per loss from the concatenated paths.
Only the small per-rule records (n_samples × a few to a few dozen) outlive a chunk, so no
samples × nodes matrix is ever held: at iNat21 size (100,000 × 12,400) even float32 node
probabilities would be 5 GB. Results equal the dense functions (``node_probabilities``,
``decision_paths``, ``hierarchical_rc_curve``) exactly, for any chunk size: every step is row-wise.

Precision: ``precision="float32"`` (default for float16/float32 logits, the authors' torch
semantics and half the memory) or ``"float64"`` (default for float64 logits). Logits are cast to
it per chunk, so softmax, node sums, records and every θ comparison use that one precision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal, NoReturn

import numpy as np

from ..config import rows_per_chunk
from .curves import RCCurve, rc_curve_from_paths, threshold_grid_keys
from .hierarchy import Hierarchy
from .metric_rules import any_decision_paths, check_rule
from .parallel import ordered_map
from .probabilities import NonFiniteLogits, softmax_node_probabilities
from .risk import LOSSES, Loss
from .rule_registry import get_rule
from .rules import RULES, DecisionPaths, argmax_leaf, concat_decision_paths
from .validation import check_labels, check_logits, check_temperature, quote

Precision = Literal["float32", "float64"]
Progress = Callable[[int, int], None]
#: A fitted (calibrator, confidence) pair: logits chunk (n, C) → node scores (n, n_nodes) (``confidence.NodeScorer``).
#: A scorer that also reads other per-sample arrays (an ensemble's members: ``confidence.MemberScorer``)
#: has a ``score_rows(block, rows)`` method, called with the chunk's row indices into the logits.
Scorer = Callable[[np.ndarray], np.ndarray]


def apply_scorer(scorer: Scorer, block: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(n, n_nodes) ``scorer``'s node scores of ``block`` (n, C), the logits of ``rows`` (n,)."""
    by_rows = getattr(scorer, "score_rows", None)
    return scorer(block) if by_rows is None else by_rows(block, rows)

def auto_chunk_size(hierarchy: Hierarchy, precision: Precision = "float32", budget_bytes: int | None = None) -> int:
    """Samples per chunk so one chunk's temporaries stay near ``budget_bytes`` (default: the one
    memory budget, ``config.memory_budget_bytes``, 256 MB unless ``HSC_MEMORY_BUDGET_MB`` says).

    Per sample the estimate allows four arrays of n_nodes + n_leaves values: the node
    probabilities (softmax and node sums are written straight into them a cache block of rows at
    a time, ``probabilities.softmax_node_probabilities``, so no float32 copy of the chunk exists)
    and the rules' gathered columns and temporaries, with room to spare. At iNat21 size in float32
    that is ~360 kB per sample, so ~730 samples per 256 MB chunk.
    """
    itemsize = np.dtype(_check_precision(precision)).itemsize
    return rows_per_chunk(4 * itemsize * (hierarchy.n_nodes + hierarchy.n_leaves), budget_bytes)


def decision_paths_from_logits(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    temperature: float = 1.0,
    rules: Sequence[str] = RULES,
    chunk_size: int | None = None,
    progress: Progress | None = None,
    precision: Precision | None = None,
    rows: np.ndarray | None = None,
    scorer: Scorer | None = None,
    ready: Callable[[int], None] | None = None,
) -> dict[str, DecisionPaths]:
    """Each rule's decision paths (records) for all samples, computed chunk by chunk.

    Parameters
    ----------
    hierarchy : the class tree; ``logits`` columns are its leaves in order.
    logits : (n_samples, n_leaves) model outputs, any float dtype (float16 stays float16 in
        memory; each chunk is cast on the fly). Not copied as a whole.
    temperature : softmax temperature (1.0 = none).
    rules : which rules to build: names from ``metric_rules.ALL_RULES`` (the paper's four and the
        metric-optimal / Pareto rules) or ``hf<β>``.
    chunk_size : samples per chunk; None picks one from the memory budget (``auto_chunk_size``).
    rows : evaluate only these rows of ``logits`` (1-D indices, in the order given), without
        copying them; None for all rows.
    progress : called as ``progress(done_samples, total)``, first with 0 and after every chunk.
    precision : ``"float32"`` or ``"float64"`` for the node probabilities; None follows the
        logits (float32 for float16/32, else float64).
    scorer : node scores of a chunk of logits in place of softmax(z / T) summed per node (a
        ``confidence.NodeScorer``: another calibrator or confidence score); None: today's.
    ready : ``ready(k)`` returns once the logits' rows ``[0, k)`` hold their values, called before a
        chunk reads its rows (``logits_io.LogitsStream.wait_rows``: the pass works while the file is
        still being decoded); None: the logits are all there.

    Returns
    -------
    {rule: DecisionPaths} with ``nodes``/``values`` of shape (n_samples, n_records); identical to
    ``decision_paths(hierarchy, node_probabilities(hierarchy, softmax(logits, T)), rule)``.
    ``paths.predict(θ)`` gives every sample's (node, confidence) at θ; pass the paths to
    ``curves.rc_curve_from_paths`` for the RC curve.
    """
    paths, _ = _scan(hierarchy, logits, temperature, tuple(rules), None, chunk_size, progress, precision, rows, scorer,
                     ready)
    return paths


def threshold_grid_from_logits(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    temperature: float = 1.0,
    dec: int = 2,
    chunk_size: int | None = None,
    progress: Progress | None = None,
    precision: Precision | None = None,
    rows: np.ndarray | None = None,
    scorer: Scorer | None = None,
) -> np.ndarray:
    """The authors' θ grid (``curves.rounded_threshold_grid``) of all node probabilities, by chunk.

    Returns the ascending grid values k / 10**dec present among the node probabilities (clipped to
    [0, 1], rounded to ``dec`` decimals), as float64. Same arguments as
    ``decision_paths_from_logits``; pass the grid to ``curves.rc_curve_from_paths(grid=...)``.
    """
    _, grid = _scan(hierarchy, logits, temperature, (), dec, chunk_size, progress, precision, rows, scorer)
    assert grid is not None  # dec is an int, so the scan built the grid
    return grid


def node_probabilities_rows(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    rows: int | Sequence[int] | np.ndarray,
    temperature: float = 1.0,
    precision: Precision | None = None,
    scorer: Scorer | None = None,
) -> np.ndarray:
    """Node probabilities of a few samples (for the Explorer), without touching the others.

    rows : a sample index or a 1-D sequence of them, each in [0, n_samples).
    Returns (len(rows), n_nodes) (one row for an int), bit-identical to the same rows of the full
    ``node_probabilities(hierarchy, softmax(logits, temperature))`` in ``precision``.
    """
    arr = _check_logits_shape(hierarchy, logits)
    idx = np.atleast_1d(np.asarray(rows))
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"rows must be a sample index or a 1-D sequence of indices, got {quote(rows)}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= arr.shape[0]):
        raise ValueError(f"rows must lie in [0, {arr.shape[0]}), got {idx[(idx < 0) | (idx >= arr.shape[0])][0]}")
    dtype = _dtype(arr, precision)
    if scorer is not None:
        return apply_scorer(scorer, arr[idx].astype(dtype, copy=False), idx)
    try:
        return softmax_node_probabilities(hierarchy, arr[idx], temperature, dtype)
    except NonFiniteLogits as exc:
        raise NonFiniteLogits(int(idx[exc.row])) from None


def rc_curves_from_logits(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    temperature: float = 1.0,
    rules: tuple[str, ...] = RULES,
    losses: tuple[Loss, ...] = LOSSES,
    dec: int | None = None,
    chunk_size: int | None = None,
    progress: Progress | None = None,
    precision: Precision | None = None,
) -> dict[tuple[str, str], RCCurve]:
    """RC curve of each (rule, loss), in bounded memory.

    Parameters
    ----------
    logits : (n_samples, n_leaves) model outputs in the hierarchy's leaf order.
    labels : (n_samples,) true leaf indices.
    temperature : softmax temperature (1.0 = none).
    dec : None for exact curves; an int for the authors' rounded θ grid (accumulated by chunk).
    chunk_size, progress, precision : as in ``decision_paths_from_logits``.

    Returns
    -------
    {(rule, loss): RCCurve}, identical to ``hierarchical_rc_curve`` on the dense node probabilities.
    """
    arr = _check_logits_shape(hierarchy, logits)
    labels = check_labels(labels, arr.shape[0], hierarchy.n_leaves)
    for loss in losses:
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {quote(loss)}; choose one of {', '.join(LOSSES)}")
    paths, grid = _scan(hierarchy, arr, temperature, tuple(rules), dec, chunk_size, progress, precision)
    return {(rule, loss): rc_curve_from_paths(hierarchy, paths[rule], labels, loss, grid)
            for rule in rules for loss in losses}


# ------------------------------------------------------------------------------------------ helpers


def _check_precision(precision: str) -> type:
    if precision not in ("float32", "float64"):
        raise ValueError(f"precision must be 'float32' or 'float64', got {quote(precision)}")
    return np.float32 if precision == "float32" else np.float64


def _dtype(logits: np.ndarray, precision: Precision | None) -> type:
    if precision is None:
        return np.float32 if logits.dtype in (np.float16, np.float32) else np.float64
    return _check_precision(precision)


def _check_logits_shape(hierarchy: Hierarchy, logits: np.ndarray) -> np.ndarray:
    """Shape and dtype checks without converting or scanning the whole array (finiteness is
    checked chunk by chunk)."""
    arr = np.asarray(logits)
    check_logits(arr[:1], hierarchy.n_leaves)  # ndim, emptiness, class count, numeric dtype
    return arr


def _check_rows(rows: np.ndarray | None, n: int) -> np.ndarray | None:
    if rows is None:
        return None
    idx = np.asarray(rows)
    if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"rows must be a 1-D array of sample indices, got shape {idx.shape} and dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"rows must lie in [0, {n})")
    return idx.astype(np.int64, copy=False)


def node_probability_chunks(
    hierarchy: Hierarchy,
    logits: np.ndarray,
    *,
    temperature: float = 1.0,
    rows: np.ndarray | None = None,
    chunk_size: int | None = None,
    progress: Progress | None = None,
    precision: Precision | None = None,
    scorer: Scorer | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """(start, node probabilities) of consecutive chunks of samples: the one chunk loop.

    Yields ``start`` (the chunk's first position among the evaluated rows) and a
    (chunk, n_nodes) array, each chunk bounded by the memory budget. ``rows`` selects (and
    orders) the rows of ``logits`` to evaluate without copying them; the other arguments are as in
    ``decision_paths_from_logits``. ``progress(done, total)`` counts evaluated rows. With a
    ``scorer`` the chunks are a quarter as large (its float64 node-level temporaries).
    """
    plan = _ChunkPlan(hierarchy, logits, temperature, rows, chunk_size, precision, scorer)
    if progress is not None:
        progress(0, plan.n)
    for start in plan.starts:
        yield start, plan.probabilities(start)
        if progress is not None:
            progress(min(start + plan.chunk_size, plan.n), plan.n)


class _ChunkPlan:
    """The checked arguments of one chunked pass: chunk starts and each chunk's node probabilities
    (``probabilities(start)`` depends on nothing but its rows, so chunks can be worked on in any
    order, by several threads, with the same numbers)."""

    def __init__(self, hierarchy: Hierarchy, logits: np.ndarray, temperature: float, rows: np.ndarray | None,
                 chunk_size: int | None, precision: Precision | None, scorer: Scorer | None,
                 ready: Callable[[int], None] | None = None) -> None:
        self.hierarchy = hierarchy
        self.ready = ready
        self.arr = _check_logits_shape(hierarchy, logits)
        self.index = _check_rows(rows, self.arr.shape[0])
        self.dtype = _dtype(self.arr, precision)
        self.n = self.arr.shape[0] if self.index is None else self.index.size
        if chunk_size is None:
            chunk_size = auto_chunk_size(hierarchy, np.dtype(self.dtype).name)
            if scorer is not None:
                chunk_size = max(1, chunk_size // 4)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {quote(chunk_size)}")
        check_temperature(temperature)
        self.chunk_size, self.temperature, self.scorer = int(chunk_size), temperature, scorer
        self.starts = range(0, self.n, self.chunk_size)

    def probabilities(self, start: int) -> np.ndarray:
        """(chunk, n_nodes) node probabilities (or the scorer's node scores) of the chunk at ``start``."""
        take = slice(start, start + self.chunk_size)
        index = self.index
        if self.ready is not None:  # the rows this chunk reads are decoded
            self.ready(min(start + self.chunk_size, self.n) if index is None else int(index[take].max()) + 1)
        raw: np.ndarray = self.arr[take] if index is None else self.arr[index[take]]
        if self.scorer is None:
            try:  # cast, checked and summed a cache block at a time (float16 stays float16 until then)
                return softmax_node_probabilities(self.hierarchy, raw, self.temperature, self.dtype)
            except NonFiniteLogits as exc:
                self._non_finite(start + exc.row)
        block: np.ndarray = raw.astype(self.dtype, copy=False)
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            self._non_finite(start + int(np.flatnonzero(~finite)[0]))
        at = np.arange(start, start + block.shape[0]) if index is None else index[take]
        return apply_scorer(self.scorer, block, at)

    def _non_finite(self, position: int) -> NoReturn:
        row = position if self.index is None else int(self.index[position])
        raise ValueError(f"logits contain NaN or inf (first: row {row})")


def _scan(hierarchy: Hierarchy, logits: np.ndarray, temperature: float, rules: tuple[str, ...], dec: int | None,
          chunk_size: int | None, progress: Progress | None, precision: Precision | None,
          rows: np.ndarray | None = None, scorer: Scorer | None = None, ready: Callable[[int], None] | None = None,
          ) -> tuple[dict[str, DecisionPaths], np.ndarray | None]:
    """One pass over the logits: every rule's records and (if ``dec``) the θ grid."""
    arr = _check_logits_shape(hierarchy, logits)
    for rule in rules:
        check_rule(rule)
    present = np.zeros(0, dtype=bool)  # grid values seen, when dec asks for the grid
    if dec is not None:
        if isinstance(dec, bool) or not isinstance(dec, (int, np.integer)) or not 0 <= dec <= 6:
            raise ValueError(f"dec must be an integer between 0 and 6, got {quote(dec)}")
        present = np.zeros(10**dec + 1, dtype=bool)
    parts: dict[str, list[DecisionPaths]] = {rule: [] for rule in rules}
    # A rule that takes another's records (Pareto: Max-Coverage's) reuses them when both are built here.
    reuse = {rule: spec.records_of for rule in rules
             if (spec := get_rule(rule)).method == "records_of" and spec.records_of in parts}
    plan = _ChunkPlan(hierarchy, arr, temperature, rows, chunk_size, precision, scorer, ready)

    def chunk_records(start: int) -> tuple[dict[str, DecisionPaths], np.ndarray | None]:
        probs = plan.probabilities(start)
        leaf = argmax_leaf(hierarchy, probs)
        out: dict[str, DecisionPaths] = {}
        for rule in sorted(rules, key=lambda r: r in reuse):  # the records reused are built first
            if rule in reuse:
                p = out[reuse[rule]]
                out[rule] = DecisionPaths(rule=rule, nodes=p.nodes, values=p.values, lengths=p.lengths)
            else:
                out[rule] = any_decision_paths(hierarchy, probs, rule, leaf=leaf)
        return out, None if dec is None else threshold_grid_keys(probs, dec)

    if progress is not None:
        progress(0, plan.n)
    for start, (records, keys) in zip(plan.starts, ordered_map(chunk_records, plan.starts), strict=True):
        for rule, p in records.items():
            parts[rule].append(p)
        if keys is not None:
            present |= keys
        if progress is not None:
            progress(min(start + plan.chunk_size, plan.n), plan.n)
    paths = {rule: concat_decision_paths(p) for rule, p in parts.items()}
    grid = None if dec is None else np.flatnonzero(present) / 10**dec
    return paths, grid
