"""Class hierarchies from files: edge lists, level columns, ImageNet is-a, the project's JSON, Newick.

``load_hierarchy(path, classes=None)`` reads any of these and returns a validated
:class:`~hsc_core.core.hierarchy.Hierarchy` whose leaves are the model's classes in logit-column order.

=========  ===================================================================================
format     file
=========  ===================================================================================
edges      CSV ``parent,child`` per line (node names or ids; header row optional, see *Header* below)
levels     CSV, one row per class, columns coarse → fine, the class last (``superclass,class``)
is_a       ImageNet's ``wordnet.is_a.txt``: ``parent child`` per line, whitespace separated
json       the project's ``hsc-hierarchy/1`` document (:meth:`Hierarchy.to_json`)
newick     ``((apple,pear)fruit,(rose,tulip)flower);`` with optional branch lengths, quotes, comments
=========  ===================================================================================

The format follows from the extension (``.json``, ``.nwk``/``.newick``) or, for ``.csv``/``.tsv``/
``.txt``, from the content; ``fmt=`` overrides it.

Leaf order (= logit columns): the class list when one is given (a text file or a sequence, one class
name per line — see :func:`read_class_list`); otherwise the file's order of first appearance (edges:
as a child; levels: row order; Newick: left to right; is-a: first line naming it as a child;
JSON: the document's order). With a class list the tree's leaves must be exactly the classes, except
in an is-a file, which is a larger graph that the classes pick their ancestors from.

Shape rules:

* A node with two parents makes a DAG, not a tree, and is refused, naming the node and both parents.
  ``first_parent=True`` is the explicit opt-in to keep each node's first listed parent (the authors'
  rule for WordNet; for is-a files their exact ``build_wn_rels`` loop).
* Several top nodes (edges) or several first-column values (levels) hang under an added node ``root``.
* Internal nodes of a levels file are identified by their path (``animals/birds``), so the same name in
  different branches or at different levels stays two nodes; its display name is the bare cell.
* Single-child chains are collapsed by default: a node with one child has the same leaves, probability
  and coverage as that child, so a file with chains gives the same tree, RC curves and hAURC as one
  without. ``collapse_single_child=False`` keeps them; Selective, Climbing and Max-Coverage are still
  unchanged, but the extra depth shifts Jumping's height layers and so can change its curve.

Header (CSV formats): ``header=True``/``False`` says whether the first row holds column names;
``None`` detects it. The first row is a header when its cells are known column names (``parent,child``,
``superclass,class``, ``kingdom,…,species``), and data when one of its names occurs again in the file
or (with a class list) names a class. Otherwise it is taken as a header and a :class:`HierarchyNote`
warning says so, since a headerless file whose first class is alone in its group looks the same
(``fruit,apple`` over ``flower,rose``): :func:`load_hierarchy_with_notes` returns such notes for a
caller to show, and ``header=False`` (``--no-header``) keeps the row.

Size: every read is bounded by :data:`~hsc_core.core.hierarchy.LIMITS` (file bytes and lines, level
columns, nodes, depth, the ids that paths generate) and refused with a one-line error beyond them;
within them the work is linear in the file's size. Newick is parsed without recursion, so a deep
but allowed tree loads and a 100,000-deep one fails in milliseconds.

Every problem raises :class:`HierarchyError` with a one-line message (file:line where there is one).

No parsing library: the links of an edge list or is-a file are plain dicts (``hierarchy_edges._Links``: two parents
and cycles found in one linear pass each; a networkx graph, used before, took ~1 kB per node and most
of the time at the node limit). Newick is read by a small iterative parser (``hierarchy_newick._parse_newick``) with
the ``newick`` package's reading: labels unquoted (``'a b'``, doubled quotes), ``[comments]`` (nested
too) and branch lengths dropped, duplicate labels kept so that we can name them. The ``newick``
package (1.11) recursed once per level and re-scanned the tokens below each node, so a 1,000-class
caterpillar (6.9 kB) hit Python's recursion limit; tests compare the two on shallow trees.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from ..core.hierarchy import Hierarchy, HierarchyError
from ..core.validation import clip_path, quote
from .hierarchy_edges import edge_rows, tree_from_edges, tree_from_is_a
from .hierarchy_levels import tree_from_levels
from .hierarchy_newick import read_newick
from .hierarchy_text import (
    EDGE_HEADER_WORDS,
    FORMATS,
    HIERARCHY_SUFFIXES,
    LEVEL_HEADER_WORDS,
    ROOT_ID,
    ClassesArg,
    HierarchyNote,
    as_class_list,
    build_tree,
    check_lines,
    decide_header,
    in_file,
    read_class_list,
    read_rows,
    read_text,
)


# ---------------------------------------------------------------------------------------- entry points
def load_hierarchy(
    path: str | os.PathLike,
    classes: ClassesArg = None,
    *,
    fmt: str | None = None,
    first_parent: bool = False,
    collapse_single_child: bool = True,
    header: bool | None = None,
) -> Hierarchy:
    """Read a hierarchy file of any supported format.

    Parameters
    ----------
    path : the hierarchy file.
    classes : class list in logit-column order: a path to a text file (one name per line) or a
        sequence of names. Leaves are ordered by it. ``None``: the file's order of first appearance.
    fmt : one of :data:`FORMATS`; ``None`` detects it from the extension and content.
    first_parent : accept a DAG by keeping each node's first listed parent (edges, is_a).
    collapse_single_child : remove internal nodes that have exactly one child.
    header : CSV formats: whether the first row is a header; ``None`` detects it (see the module
        docstring). When detection takes a row that could be data as the header, a
        :class:`HierarchyNote` warning says so (:func:`load_hierarchy_with_notes` collects it).
    """
    path = Path(path)
    class_list = as_class_list(classes)
    text = read_text(path, "hierarchy file")
    if not text.strip():
        raise HierarchyError(f"{clip_path(path)}: the hierarchy file is empty")
    if fmt is not None and fmt not in FORMATS:
        raise HierarchyError(f"unknown hierarchy format {quote(fmt)}; use one of {', '.join(FORMATS)}")
    rows = None
    if fmt is None:
        fmt, rows, header = _detect(path, text, header, class_list)
    if fmt == "json":
        return _tree_from_json(path, text, class_list, collapse_single_child)
    if fmt == "is_a":
        return tree_from_is_a(path, text, class_list, first_parent, collapse_single_child)
    if fmt == "newick":
        parent_of, leaves, names = read_newick(path, text)
        return build_tree(path, parent_of, leaves, names, class_list, collapse_single_child)
    if rows is None:
        rows = read_rows(path, text)
        header = decide_header(path, rows, header, class_list)
    if fmt == "edges":
        return tree_from_edges(path, edge_rows(path, rows, bool(header)), class_list, first_parent,
                                collapse_single_child)
    return tree_from_levels(path, rows[1:] if header else rows, class_list, collapse_single_child)


def load_hierarchy_with_notes(path: str | os.PathLike, classes: ClassesArg = None,
                              **kwargs) -> tuple[Hierarchy, list[str]]:
    """:func:`load_hierarchy`, and the one-line notes (:class:`HierarchyNote`) it issued, for a caller
    that shows them (the dashboard, the ``hsc`` command) rather than letting them go to stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HierarchyNote)
        tree = load_hierarchy(path, classes, **kwargs)
    notes = []
    for w in caught:
        if issubclass(w.category, HierarchyNote):
            notes.append(str(w.message))
        else:  # anything else goes on as it would have
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return tree, notes


def detect_format(path: str | os.PathLike, text: str | None = None, header: bool | None = None) -> str:
    """The format of a hierarchy file, from its extension and content (see the module docstring)."""
    path = Path(path)
    if text is None and path.suffix.lower() not in (".json", ".nwk", ".newick", ".tre", ".tree"):
        text = read_text(path, "hierarchy file")
    with warnings.catch_warnings():  # only the format is asked for here
        warnings.simplefilter("ignore", HierarchyNote)
        return _detect(path, text, header, None)[0]


def _detect(path: Path, text: str | None, header: bool | None, classes: Sequence[str] | None
            ) -> tuple[str, list[tuple[int, list[str]]] | None, bool | None]:
    """(format, the CSV rows and whether the first is a header — for the CSV formats only)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json", None, None
    if suffix in (".nwk", ".newick", ".tre", ".tree"):
        return "newick", None, None
    assert text is not None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return "json", None, None
    if stripped.startswith("("):
        return "newick", None, None
    lines = [line for line in check_lines(path, text) if line.strip()]
    if not lines:
        raise HierarchyError(f"{clip_path(path)}: the hierarchy file is empty")
    if suffix != ".csv" and not any("," in line or "\t" in line for line in lines):
        if all(len(line.split()) == 2 for line in lines):
            return "is_a", None, None
        raise HierarchyError(
            f"{clip_path(path)}: cannot tell the hierarchy format (no commas or tabs, and not 'parent child' "
            f"lines); pass fmt= one of {', '.join(FORMATS)}")
    rows = read_rows(path, text)
    header = decide_header(path, rows, header, classes)
    width = len(rows[0][1])
    if width >= 3:
        return "levels", rows, header
    data = rows[1:] if header else rows
    if header and {c.lower() for c in rows[0][1]} <= EDGE_HEADER_WORDS:
        return "edges", rows, header
    # Two columns: a chain (a child that is also a parent) means an edge list. Otherwise both
    # readings give the same tree, and levels keeps a coarse name equal to a class name apart.
    col0 = {cells[0] for _, cells in data if cells}
    col1 = {cells[1] for _, cells in data if len(cells) > 1}
    return ("edges" if col0 & col1 else "levels"), rows, header




# ---------------------------------------------------------------------------------------- json
def _tree_from_json(path, text, classes, collapse) -> Hierarchy:
    try:
        tree = Hierarchy.from_json_text(text, str(path))
    except HierarchyError as exc:
        raise in_file(path, exc) from None
    single = [v for v in range(tree.n_leaves, tree.n_nodes) if len(tree.children[v]) == 1]
    if classes is None and not (collapse and single):
        return tree  # keep the document's own node order
    leaves = list(tree.node_ids[: tree.n_leaves])
    parent_of = {tree.node_ids[v]: tree.node_ids[p] for v, p in enumerate(tree.parent.tolist()) if p >= 0}
    return build_tree(path, parent_of, leaves, dict(zip(tree.node_ids, tree.names, strict=True)), classes, collapse)


# The readers of each format live in ``hierarchy_edges`` (edge lists, is-a), ``hierarchy_levels``,
# ``hierarchy_newick`` and ``hierarchy_text`` (what they share); this module is the front door.
__all__ = [
    "EDGE_HEADER_WORDS", "FORMATS", "HIERARCHY_SUFFIXES", "LEVEL_HEADER_WORDS", "ROOT_ID", "ClassesArg",
    "HierarchyNote", "detect_format", "load_hierarchy", "load_hierarchy_with_notes", "read_class_list",
]
