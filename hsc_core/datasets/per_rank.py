"""Per-rank scores: a label and a confidence at each rank from any hierarchical classifier.

Many classifiers give no softmax over leaves but, per taxonomic rank, a predicted label and a
confidence: RDP/DADA2 bootstrap support, a species head and a genus head, common-ancestor scores.
This module reads such a table into arrays the per-rank rules (``hsc_core.core.per_rank``) use.

Format (CSV, or Parquet when pyarrow is installed): one row per sample,

==============  ==========================================================================
column          meaning
==============  ==========================================================================
sample_id       any text, unique
true_<rank>     the true label at that rank
pred_<rank>     the predicted label at that rank
conf_<rank>     the confidence of ``pred_<rank>``, in [0, 1] (0–100 with ``percent=True``)
==============  ==========================================================================

for every rank, coarsest first: the ranks' order is the order in which their columns first appear
(``true_family, pred_family, conf_family, true_genus, …``). Other columns are ignored.

The hierarchy comes from the labels themselves — the parent of a true label is the true label one
rank up in the same row (a label repeated at the next finer rank is the same node, so a shallow
class can pad the finer ranks), and all the first-rank labels hang under an added root — or from a
hierarchy file in any format ``hsc_core.datasets.formats.load_hierarchy`` reads, whose node ids (or
names) the labels must be. The classes (leaves) are the labels without children.

The predictions need not nest: each rank may come from its own head (a genus head and a species
head that disagree). A rank's prediction is judged at that rank (right iff it is the true label's
ancestor-or-self, i.e. the true label at that rank), and a predicted label the true columns never
name hangs under the predicted label one rank up that most rows give it. Climbing by rank's final
answer is the prediction of the finest rank whose confidence reaches its θ; the coarser heads are
not consulted, so when heads disagree the answer is the finer head's label (``disagreement``
counts such rows). A true label with two parents, true labels that are not nested along a row, a
confidence outside its range, percentages asked for where every confidence is already in [0, 1], a
missing rank column, an empty table, a file over the size bound or a table whose decoded size
(``decoded_size``: what its cells and their text take once read) is over
``hsc_core.config.max_decoded_bytes()`` each raise a one-line :class:`ScoresFileError`; the decoded
size is checked before the table is decoded (a Parquet file's dictionary-encoded columns are measured
without expanding them), since a file of 500 kB can hold gigabytes of text.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..core.hierarchy import Hierarchy, HierarchyError
from ..core.validation import clip_path, quote
from .formats import load_hierarchy
from .logits_io import LogitsFileError

#: The shipped example (ImageNet-1k, efficientnet_lite0; made by ``hsc_core.pipeline.per_rank_example``).
EXAMPLE = Path(__file__).resolve().parent / "data" / "imagenet_lite0_per_rank.csv"
#: Bytes a scores file may have (the dashboard passes its own upload bound).
MAX_SCORES_BYTES = 64 * 2**20
#: The id of the root added above the first rank's labels (no label can be empty).
ROOT_ID = ""
ROOT_NAME = "(root)"
_COLUMN = re.compile(r"^(true|pred|conf)_(.+)$")
KINDS = ("true", "pred", "conf")
#: What reading a table costs once decoded, a cell and a byte of its text (measured by
#: ``bench/decoded_size.py``: pandas' string columns, the stripped copies and the label arrays the
#: reader makes each hold the text again): ``decoded_size`` = cells × CELL_BYTES + TEXT_COPIES × text.
CELL_BYTES = 192
TEXT_COPIES = 5


class ScoresFileError(LogitsFileError):
    """A per-rank scores table is missing, malformed or inconsistent (one bounded line)."""


@dataclass(frozen=True, eq=False)
class PerRankScores:
    """A per-rank scores table resolved against its hierarchy.

    Attributes
    ----------
    ranks : tuple of str, (R,)
        Rank names, coarsest first.
    sample_ids : ndarray of str, (n,)
    hierarchy : Hierarchy
        The class tree the labels live in.
    true_nodes, pred_nodes : ndarray of int64, (n, R)
        Node index of each rank's true and predicted label.
    conf : ndarray of float64, (n, R)
        Confidence of each rank's prediction, in [0, 1].
    """

    ranks: tuple[str, ...]
    sample_ids: np.ndarray
    hierarchy: Hierarchy
    true_nodes: np.ndarray
    pred_nodes: np.ndarray
    conf: np.ndarray

    @property
    def n(self) -> int:
        return int(self.conf.shape[0])

    @property
    def true_leaf(self) -> np.ndarray:
        """(n,) the finest true label of each sample."""
        return self.true_nodes[:, -1]

    @cached_property
    def correct(self) -> np.ndarray:
        """(n, R) bool: the rank's predicted node is an ancestor-or-self of the true finest label."""
        return np.asarray(self.hierarchy.is_ancestor(self.pred_nodes, self.true_leaf[:, None]), dtype=bool)

    @cached_property
    def coverage(self) -> np.ndarray:
        """(n, R) coverage φ(v) = 1 − log|L(v)|/log|L| of each rank's predicted node (definitions §2.2)."""
        return np.asarray(self.hierarchy.coverage, dtype=float)[self.pred_nodes]

    @cached_property
    def disagreement(self) -> np.ndarray:
        """(n,) bool: the predicted labels do not nest along the row (some rank's prediction is not an
        ancestor-or-self of the next finer rank's: independent heads that disagree)."""
        if len(self.ranks) < 2:
            return np.zeros(self.n, dtype=bool)
        nested = np.asarray(self.hierarchy.is_ancestor(self.pred_nodes[:, :-1], self.pred_nodes[:, 1:]), dtype=bool)
        return np.asarray(~nested.all(axis=1), dtype=bool)

    def subset(self, rows: np.ndarray) -> PerRankScores:
        """The same table restricted to ``rows`` (indices or a boolean mask); the hierarchy is kept."""
        return PerRankScores(self.ranks, self.sample_ids[rows], self.hierarchy, self.true_nodes[rows],
                             self.pred_nodes[rows], self.conf[rows])


# ---------------------------------------------------------------------------------------- reading
def read_per_rank(source: str | os.PathLike | bytes, *, name: str | None = None, percent: bool = False,
                  hierarchy: str | os.PathLike | Hierarchy | None = None,
                  max_bytes: int = MAX_SCORES_BYTES, max_decoded: int | None = None) -> PerRankScores:
    """Read a per-rank scores table (CSV, or Parquet by its ``.parquet`` suffix or magic bytes).

    Parameters
    ----------
    source : a path, or the file's bytes (an upload).
    name : the file name shown in messages (default: the path's name, or ``"scores"``).
    percent : confidences are percentages in [0, 100] (bootstrap support); divided by 100.
    hierarchy : a hierarchy file or a ``Hierarchy`` whose node ids (or names) the labels are;
        None derives the tree from the labels.
    max_bytes : the largest file accepted.
    max_decoded : the largest decoded size accepted (``decoded_size``; default
        ``hsc_core.config.max_decoded_bytes()``), checked before the table is decoded.

    Raises
    ------
    ScoresFileError
        One line naming the file (and row or column) for every problem.
    """
    data, where = _read_bytes(source, name, max_bytes)
    budget = config.max_decoded_bytes() if max_decoded is None else int(max_decoded)
    frame = _parse_table(data, where, budget)
    return per_rank_from_frame(frame, where=where, percent=percent, hierarchy=hierarchy)


def _read_bytes(source: str | os.PathLike | bytes, name: str | None, max_bytes: int) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray)):
        where = name or "scores"
        if len(source) > max_bytes:
            raise ScoresFileError(f"{where}: {len(source):,} bytes is larger than the {max_bytes:,} bytes accepted")
        return bytes(source), where
    path = Path(source)
    where = name or clip_path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ScoresFileError(f"{where}: {size:,} bytes is larger than the {max_bytes:,} bytes accepted")
        return path.read_bytes(), where
    except FileNotFoundError:
        raise ScoresFileError(f"scores file {where} not found") from None
    except IsADirectoryError:
        raise ScoresFileError(f"{where} is a folder, not a scores file") from None
    except OSError as exc:
        raise ScoresFileError(f"cannot read scores file {where}: {exc.strerror or exc}") from None


def decoded_size(cells: int, text_bytes: int) -> int:
    """The memory reading a table of ``cells`` cells holding ``text_bytes`` bytes of text takes
    (``CELL_BYTES`` a cell, ``TEXT_COPIES`` times its text).

    >>> decoded_size(10, 1000)
    6920
    """
    return int(cells) * CELL_BYTES + TEXT_COPIES * int(text_bytes)


def _check_decoded(where: str, rows: int, columns: int, text_bytes: int, budget: int) -> None:
    size = decoded_size(rows * columns, text_bytes)
    if size > budget:
        raise ScoresFileError(f"{where}: {rows:,} rows × {columns} columns with {text_bytes / 1e6:,.1f} MB of text "
                              f"decode to {size / 2**20:,.0f} MB, over the {budget / 2**20:,.0f} MB accepted "
                              f"({config.MAX_DECODED_MB})")


def _parse_table(data: bytes, where: str, budget: int) -> pd.DataFrame:
    if not data.strip():
        raise ScoresFileError(f"{where}: the scores table is empty")
    if data[:4] == b"PAR1" or where.lower().endswith(".parquet"):
        return _parse_parquet(data, where, budget)
    try:
        text = data.decode("utf-8-sig")  # -sig: drop a BOM that spreadsheets write
    except UnicodeDecodeError as exc:
        raise ScoresFileError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    header = next(csv.reader(io.StringIO(text.split("\n", 1)[0])), [])
    # rows: at most the line breaks (a quoted field may hold one); text: at most 4 bytes a character
    _check_decoded(where, text.count("\n") + 1, max(1, len(header)), len(data) + 3 * (len(data) - len(text)), budget)
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise ScoresFileError(f"{where}: the scores table is empty") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise ScoresFileError(f"{where}: not a readable CSV table ({str(exc).splitlines()[0][:120]})") from None


def _parse_parquet(data: bytes, where: str, budget: int) -> pd.DataFrame:
    """The table's ``sample_id`` and rank columns, read with their dictionaries kept; its decoded size
    is checked twice before it is expanded: from the footer (the pages' uncompressed bytes) and from
    the dictionaries' value lengths (what each cell becomes)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ScoresFileError(f"{where}: reading Parquet needs pyarrow (pip install pyarrow); "
                              "or save the table as CSV") from None
    try:
        footer = pq.ParquetFile(io.BytesIO(data))
        meta, names = footer.metadata, list(footer.schema_arrow.names)
        leaves = [footer.schema.column(j).path for j in range(meta.num_columns)]
    except Exception as exc:  # pyarrow raises its own errors for a corrupt file
        raise ScoresFileError(f"{where}: not a readable Parquet file ({type(exc).__name__})") from None
    rank_columns(names, where)  # one line for a missing column before anything is read
    used = [c for c in names if c == "sample_id" or _COLUMN.match(str(c))]
    pages = sum(meta.row_group(g).column(j).total_uncompressed_size
                for g in range(meta.num_row_groups) for j, path in enumerate(leaves) if path in used)
    _check_decoded(where, meta.num_rows, len(used), pages, budget)
    try:
        import pyarrow as pa
        import pyarrow.compute as pc

        strings = [c for c in used if pa.types.is_string(footer.schema_arrow.field(c).type)
                   or pa.types.is_large_string(footer.schema_arrow.field(c).type)
                   or pa.types.is_dictionary(footer.schema_arrow.field(c).type)]
        table = pq.ParquetFile(io.BytesIO(data), read_dictionary=strings).read(columns=used)
        text = 0
        for column in table.columns:
            for chunk in column.chunks:
                if pa.types.is_dictionary(chunk.type) and pa.types.is_string(chunk.type.value_type):
                    lengths = pc.binary_length(chunk.dictionary)
                    text += int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0)
                elif pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type):
                    text += int(pc.sum(pc.binary_length(chunk)).as_py() or 0)
                else:  # a number: its text is at most 24 characters
                    text += 24 * len(chunk)
        _check_decoded(where, table.num_rows, len(used), text, budget)
        return _frame(table)
    except ScoresFileError:
        raise
    except Exception as exc:  # pyarrow raises its own errors for a corrupt file
        raise ScoresFileError(f"{where}: not a readable Parquet file ({type(exc).__name__})") from None


def _frame(table) -> pd.DataFrame:
    """A pyarrow table as pandas (dictionary columns as categoricals: still not expanded)."""
    return table.to_pandas()


def rank_columns(columns: list[str], where: str = "scores") -> tuple[str, ...]:
    """The ranks, coarsest first, from the table's column names (order of first appearance).

    >>> rank_columns(["sample_id", "true_genus", "pred_genus", "conf_genus", "true_species",
    ...               "pred_species", "conf_species"])
    ('genus', 'species')
    """
    ranks: dict[str, set[str]] = {}
    for col in columns:
        m = _COLUMN.match(str(col))
        if m:
            ranks.setdefault(m.group(2), set()).add(m.group(1))
    if "sample_id" not in columns:
        raise ScoresFileError(f"{where}: missing column 'sample_id'")
    if not ranks:
        raise ScoresFileError(f"{where}: no rank columns; give true_<rank>, pred_<rank> and conf_<rank> per rank")
    for rank, kinds in ranks.items():
        missing = [k for k in KINDS if k not in kinds]
        if missing:
            raise ScoresFileError(f"{where}: rank {quote(rank)} is missing column {quote(f'{missing[0]}_{rank}')}")
    return tuple(ranks)


def per_rank_from_frame(frame: pd.DataFrame, *, where: str = "scores", percent: bool = False,
                        hierarchy: str | os.PathLike | Hierarchy | None = None) -> PerRankScores:
    """A ``PerRankScores`` from a table with the module's columns (see ``read_per_rank``)."""
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise ScoresFileError(f"{where}: duplicate column names")
    ranks = rank_columns(columns, where)
    if len(frame) == 0:
        raise ScoresFileError(f"{where}: the scores table is empty (a header and no rows)")
    frame = frame.astype(str)
    ids = frame["sample_id"].str.strip().to_numpy(dtype=str)
    dup = pd.Index(ids).duplicated()
    if dup.any():
        raise ScoresFileError(f"{where}: sample_id {quote(str(ids[np.argmax(dup)]))} occurs twice")
    labels = {k: np.stack([frame[f"{k}_{r}"].str.strip().to_numpy(dtype=object) for r in ranks], axis=1)
              for k in ("true", "pred")}
    for k, table in labels.items():
        empty = table == ""
        if empty.any():
            row, col = np.argwhere(empty)[0]
            raise ScoresFileError(f"{where}: row {row + 1}: {k}_{ranks[col]} is empty")
    conf = _confidences(frame, ranks, where, percent)
    if hierarchy is None:
        tree, node_of = _tree_from_labels(labels["true"], labels["pred"], ranks, where)
    else:
        tree = hierarchy if isinstance(hierarchy, Hierarchy) else _load_tree(hierarchy)
        node_of = _label_index(tree)
    nodes = {k: _nodes(table, node_of, where, k, ranks) for k, table in labels.items()}
    # the truth must nest; the predictions need not: each rank's head may be independent
    _check_nested(tree, nodes["true"], where, "true", ranks, labels["true"])
    return PerRankScores(ranks, ids, tree, nodes["true"], nodes["pred"], conf)


def _confidences(frame: pd.DataFrame, ranks: tuple[str, ...], where: str, percent: bool) -> np.ndarray:
    top = 100.0 if percent else 1.0
    out = np.empty((len(frame), len(ranks)), dtype=float)
    for j, rank in enumerate(ranks):
        col = f"conf_{rank}"
        values = pd.to_numeric(frame[col].str.strip(), errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            raise ScoresFileError(f"{where}: row {row + 1}: {col} is not a number ({quote(frame[col].iloc[row])})")
        outside = (values < 0) | (values > top)
        if outside.any():
            row = int(np.argmax(outside))
            hint = "" if percent else "; for percentages 0–100 say so (percent=True, --percent)"
            raise ScoresFileError(f"{where}: row {row + 1}: {col} = {values[row]:g} is outside [0, {top:g}]{hint}")
        out[:, j] = values / top
    if percent and out.max() <= 0.01:  # every "percentage" ≤ 1: these are [0, 1] confidences
        raise ScoresFileError(f"{where}: percentages were asked for (percent=True, --percent) but every confidence is "
                              f"in [0, 1] (the largest is {out.max() * 100:g}); these are not percentages: drop "
                              "--percent")
    return out


def _edges(table: np.ndarray, ranks: tuple[str, ...]) -> pd.DataFrame:
    """Each row's (label, label one rank up) pairs (the first rank's under the root), with the row."""
    up = np.concatenate([np.full((table.shape[0], 1), ROOT_ID, dtype=object), table[:, :-1]], axis=1)
    pairs = pd.DataFrame({"child": table.ravel(), "parent": up.ravel(),
                          "row": np.arange(table.shape[0]).repeat(len(ranks))})
    return pairs[pairs["child"] != pairs["parent"]]


def _tree_from_labels(true: np.ndarray, pred: np.ndarray, ranks: tuple[str, ...],
                      where: str) -> tuple[Hierarchy, dict[str, int]]:
    """The tree whose edges are each row's true (label, label one rank up); the true labels must nest.

    A predicted label the true columns never name hangs under the label one rank up in the
    predicted rows that name it, the most common one (ties: the first): rank heads may be
    independent (a genus head and a species head that disagree), so a predicted row need not nest."""
    pairs = _edges(true, ranks).drop_duplicates(["child", "parent"])
    twice = pairs["child"].duplicated(keep=False)
    if twice.any():
        child = pairs.loc[twice, "child"].iloc[0]
        par = pairs.loc[pairs["child"] == child]
        raise ScoresFileError(f"{where}: true labels are not nested: {quote(child)} has two parents, "
                              f"{quote(par['parent'].iloc[0] or ROOT_NAME)} (row {par['row'].iloc[0] + 1}) and "
                              f"{quote(par['parent'].iloc[1] or ROOT_NAME)} (row {par['row'].iloc[1] + 1})")
    parent_of = dict(zip(pairs["child"], pairs["parent"], strict=True))
    extra = _edges(pred, ranks)
    extra = extra[~extra["child"].isin(parent_of.keys())]
    if len(extra):
        counts = extra.groupby(["child", "parent"], sort=False).agg(n=("row", "size"), first=("row", "min"))
        best = counts.reset_index().sort_values(["n", "first"], ascending=[False, True], kind="stable")
        parent_of.update(best.drop_duplicates("child").set_index("child")["parent"].to_dict())
    has_child = set(parent_of.values())
    both = np.concatenate([true, pred], axis=0)
    leaves = [c for c in dict.fromkeys(both[:, ::-1].ravel()) if c not in has_child]
    try:
        tree = Hierarchy.from_parent_map(parent_of, leaves, names={ROOT_ID: ROOT_NAME}, collapse_single_child=False)
    except HierarchyError as exc:
        raise ScoresFileError(f"{where}: labels are not nested: {exc}") from None
    return tree, {node: i for i, node in enumerate(tree.node_ids)}


def _load_tree(path: str | os.PathLike) -> Hierarchy:
    try:  # every rank's label must stay a node: no collapsing of single-child chains
        return load_hierarchy(path, collapse_single_child=False)
    except HierarchyError as exc:
        raise ScoresFileError(str(exc)) from None


def _label_index(tree: Hierarchy) -> dict[str, int]:
    """Label → node: node ids first, then names that are unique and not also another node's id."""
    index: dict[str, int] = {}
    seen: dict[str, int] = {}
    for nm in tree.names:
        seen[nm] = seen.get(nm, 0) + 1
    for i, nm in enumerate(tree.names):
        if seen[nm] == 1:
            index[nm] = i
    index.update({node: i for i, node in enumerate(tree.node_ids)})
    return index


def _nodes(table: np.ndarray, node_of: dict[str, int], where: str, kind: str, ranks: tuple[str, ...]) -> np.ndarray:
    flat = table.ravel()
    idx = np.fromiter((node_of.get(x, -1) for x in flat), dtype=np.int64, count=flat.size).reshape(table.shape)
    if (idx < 0).any():
        row, col = np.argwhere(idx < 0)[0]
        raise ScoresFileError(f"{where}: row {row + 1}: {kind}_{ranks[col]} {quote(table[row, col])} "
                              "is not a node of the hierarchy")
    return idx


def _check_nested(tree: Hierarchy, nodes: np.ndarray, where: str, kind: str, ranks: tuple[str, ...],
                  labels: np.ndarray) -> None:
    """Each rank's label must be an ancestor-or-self of the next finer rank's label."""
    ok = np.asarray(tree.is_ancestor(nodes[:, :-1], nodes[:, 1:]), dtype=bool)
    if not ok.all():
        row, col = np.argwhere(~ok)[0]
        raise ScoresFileError(f"{where}: row {row + 1}: labels are not nested: {kind}_{ranks[col + 1]} "
                              f"{quote(labels[row, col + 1])} is not under {kind}_{ranks[col]} "
                              f"{quote(labels[row, col])}")


__all__ = ["CELL_BYTES", "EXAMPLE", "MAX_SCORES_BYTES", "TEXT_COPIES", "PerRankScores", "ScoresFileError",
           "decoded_size", "per_rank_from_frame", "rank_columns", "read_per_rank"]
