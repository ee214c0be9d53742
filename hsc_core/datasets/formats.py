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

No parsing library: the links of an edge list or is-a file are plain dicts (``_Links``: two parents
and cycles found in one linear pass each; a networkx graph, used before, took ~1 kB per node and most
of the time at the node limit). Newick is read by a small iterative parser (``_parse_newick``) with
the ``newick`` package's reading: labels unquoted (``'a b'``, doubled quotes), ``[comments]`` (nested
too) and branch lengths dropped, duplicate labels kept so that we can name them. The ``newick``
package (1.11) recursed once per level and re-scanned the tokens below each node, so a 1,000-class
caterpillar (6.9 kB) hit Python's recursion limit; tests compare the two on shallow trees.
"""

from __future__ import annotations

import csv
import io
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.hierarchy import LIMITS, Hierarchy, HierarchyError, file_too_large, too_large
from ..core.validation import clip, clip_path, quote

FORMATS = ("edges", "levels", "is_a", "json", "newick")
# Suffixes a hierarchy file may have (user data set folders use ``hierarchy.<suffix>``).
HIERARCHY_SUFFIXES = (".csv", ".tsv", ".txt", ".json", ".nwk", ".newick")
# Header cells that mark a two-column CSV as an edge list rather than coarse,fine levels.
EDGE_HEADER_WORDS = frozenset({
    "parent", "child", "parent_id", "child_id", "parent_name", "child_name", "source", "target",
})
# Cells that mark a first row as column names of a levels file (lower case), besides the words above.
LEVEL_HEADER_WORDS = frozenset({
    "root", "group", "subgroup", "supergroup", "class", "classes", "subclass", "superclass", "label", "labels",
    "fine", "coarse", "fine_label", "coarse_label", "category", "subcategory", "supercategory", "name", "id",
    "level", "leaf", "node", "domain", "kingdom", "phylum", "division", "order", "suborder", "family",
    "subfamily", "tribe", "genus", "species", "subspecies", "taxon",
})
_NUMBERED_HEADER = re.compile(r"(level|lvl|depth|rank|tier|layer|column|col)[ _-]?\d+")
ROOT_ID = "root"
_MAX_NAMED = 5  # how many offending names an error message lists


class HierarchyNote(UserWarning):
    """Something :func:`load_hierarchy` assumed that the user should hear about: a first row taken as
    column names by detection. One line, naming the file and how to say otherwise."""

ClassesArg = str | os.PathLike | Sequence[str] | None


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
    class_list = _class_list(classes)
    text = _read_text(path, "hierarchy file")
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
        return _tree_from_is_a(path, text, class_list, first_parent, collapse_single_child)
    if fmt == "newick":
        parent_of, leaves, names = _read_newick(path, text)
        return _build(path, parent_of, leaves, names, class_list, collapse_single_child)
    if rows is None:
        rows = _read_rows(path, text)
        header = _decide_header(path, rows, header, class_list)
    if fmt == "edges":
        return _tree_from_edges(path, _edge_rows(path, rows, bool(header)), class_list, first_parent,
                                collapse_single_child)
    return _tree_from_levels(path, rows[1:] if header else rows, class_list, collapse_single_child)


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


def read_class_list(path: str | os.PathLike) -> list[str]:
    """Class names in logit-column order: a UTF-8 text file, one name per line.

    Surrounding whitespace and blank lines are ignored; a duplicate name or an empty file is an error.
    """
    path = Path(path)
    names: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(_read_text(path, "class list").splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if name in first_line:
            raise HierarchyError(
                f"{clip_path(path)}:{number}: duplicate class name {quote(name)} (first on line {first_line[name]})")
        first_line[name] = number
        names.append(name)
    if not names:
        raise HierarchyError(f"{clip_path(path)}: the class list is empty")
    return names


def detect_format(path: str | os.PathLike, text: str | None = None, header: bool | None = None) -> str:
    """The format of a hierarchy file, from its extension and content (see the module docstring)."""
    path = Path(path)
    if text is None and path.suffix.lower() not in (".json", ".nwk", ".newick", ".tre", ".tree"):
        text = _read_text(path, "hierarchy file")
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
    lines = [line for line in _check_lines(path, text) if line.strip()]
    if not lines:
        raise HierarchyError(f"{clip_path(path)}: the hierarchy file is empty")
    if suffix != ".csv" and not any("," in line or "\t" in line for line in lines):
        if all(len(line.split()) == 2 for line in lines):
            return "is_a", None, None
        raise HierarchyError(
            f"{clip_path(path)}: cannot tell the hierarchy format (no commas or tabs, and not 'parent child' "
            f"lines); pass fmt= one of {', '.join(FORMATS)}")
    rows = _read_rows(path, text)
    header = _decide_header(path, rows, header, classes)
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


# ---------------------------------------------------------------------------------------- reading
def _read_text(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > LIMITS.max_file_bytes:
            raise HierarchyError(f"{clip_path(path)}: {file_too_large(size)}")
        return path.read_text(encoding="utf-8-sig")  # -sig: drop a BOM that spreadsheets write
    except FileNotFoundError:
        raise HierarchyError(f"{what} {clip_path(path)} not found") from None
    except UnicodeDecodeError as exc:
        raise HierarchyError(f"{clip_path(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise HierarchyError(f"cannot read {what} {clip_path(path)}: {exc.strerror or exc}") from None


def _class_list(classes: ClassesArg) -> list[str] | None:
    if classes is None:
        return None
    if isinstance(classes, (str, os.PathLike)):
        return read_class_list(classes)
    names = [str(c).strip() for c in classes]
    if not names:
        raise HierarchyError("the class list is empty")
    _no_duplicates(names, "class list")
    return names


def _no_duplicates(names: Sequence[str], where: str) -> None:
    seen: set[str] = set()
    dup = []
    for n in names:
        if n in seen:
            dup.append(n)
        seen.add(n)
    if dup:
        raise HierarchyError(f"duplicate class names in the {where}: {_few(dict.fromkeys(dup))}")


def _few(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(quote(x) for x in items[:_MAX_NAMED])
    return shown + (f" and {len(items) - _MAX_NAMED} more" if len(items) > _MAX_NAMED else "")


# What str.splitlines splits at ("\r\n" counts once).
_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _check_lines(path: Path, text: str) -> list[str]:
    """The file's lines, refused beyond ``LIMITS.max_file_lines`` — counted before they are split."""
    breaks = sum(text.count(b) for b in _LINE_BREAKS) - text.count("\r\n")
    count = breaks + (not text.endswith(_LINE_BREAKS))
    if count > LIMITS.max_file_lines:
        raise HierarchyError(f"{clip_path(path)}: " + str(too_large("large", count, LIMITS.max_file_lines, "lines")))
    return text.splitlines()


def _too_many_names(path: Path, line: int) -> HierarchyError:
    return HierarchyError(f"{clip_path(path)}:{line}: hierarchy too large: over {LIMITS.max_nodes:,} different "
                          f"node names "
                          f"(at most {LIMITS.max_nodes:,} nodes are supported)")


def _read_rows(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """Non-blank CSV rows as (line number, stripped cells); tab-separated when the file says so.

    Bounded before the csv module builds any row: at most ``LIMITS.max_file_lines`` lines of at most
    ``LIMITS.max_level_columns`` columns (delimiters counted on the raw lines), and at most
    ``LIMITS.max_nodes`` different names (each names a node). Equal cells share one string.
    """
    lines = _check_lines(path, text)
    first = next(line for line in lines if line.strip())
    tab = path.suffix.lower() == ".tsv" or ("\t" in first and "," not in first)
    delimiter = "\t" if tab else ","
    counts = [line.count(delimiter) for line in lines]
    columns = max(counts) + 1
    if columns > LIMITS.max_level_columns:
        raise HierarchyError(f"{clip_path(path)}:{counts.index(columns - 1) + 1}: "
                             + str(too_large("deep", columns, LIMITS.max_level_columns, "level columns")))
    del lines
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = []
    interned: dict[str, str] = {}
    most = LIMITS.max_nodes + LIMITS.max_level_columns + 1  # the nodes, a header row and ""
    try:
        for cells in reader:
            cells = [interned.setdefault(c, c) for c in (c.strip() for c in cells)]
            if any(cells):
                rows.append((reader.line_num, cells))
            if len(interned) > most:
                raise _too_many_names(path, reader.line_num)
    except csv.Error as exc:
        raise HierarchyError(f"{clip_path(path)}:{reader.line_num}: malformed CSV ({exc})") from None
    return rows


def _is_header_word(cell: str) -> bool:
    low = cell.lower()
    return low in EDGE_HEADER_WORDS or low in LEVEL_HEADER_WORDS or bool(_NUMBERED_HEADER.fullmatch(low))


def _decide_header(path: Path, rows: list[tuple[int, list[str]]], header: bool | None,
                   classes: Sequence[str] | None) -> bool:
    """Whether the first row holds column names: ``header`` when given, else detected (the module
    docstring's rules); a row that could be data but is taken as a header is named in a
    :class:`HierarchyNote` warning."""
    if header is not None:
        return bool(header)
    if len(rows) < 2:
        return False
    line, first = rows[0]
    cells = [c for c in first if c]
    if not cells:
        return False
    if all(_is_header_word(c) for c in cells):
        return True
    rest = {c for _, row in rows[1:] for c in row}
    if any(c in rest for c in cells):
        return False  # a name used again below: the row is part of the tree
    if classes is not None:  # the class list settles it: a class is data, anything else a header
        return not set(cells) & set(classes)
    shown = ",".join(first)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    warnings.warn(HierarchyNote(
        f"{clip_path(path)}: took the first row ({quote(shown)}, line {line}) as column names, since none of its "
        f"names occurs again; if it is data, say the file has no header (header=False, --no-header)"),
        stacklevel=4)
    return True


# ---------------------------------------------------------------------------------------- edges / is-a
def _edge_rows(path: Path, rows, header: bool) -> list[tuple[str, str, int]]:
    edges = []
    for line, cells in rows[1:] if header else rows:
        if len(cells) != 2 or not all(cells):
            raise HierarchyError(f"{clip_path(path)}:{line}: expected 'parent,child', got {quote(','.join(cells))}")
        edges.append((cells[0], cells[1], line))
    if not edges:
        raise HierarchyError(f"{clip_path(path)}: no edges below the header")
    return edges


class _Links:
    """The parent → child links of an edge list or is-a file, each with the line it was first listed
    on: plain dicts, linear in the links (a networkx graph took ~1 kB and ~25 µs per node)."""

    def __init__(self, path: Path, edges: Sequence[tuple[str, str, int]]) -> None:
        self.line: dict[tuple[str, str], int] = {}
        self.parents: dict[str, list[str]] = {}
        self.children: dict[str, list[str]] = {}
        self.nodes: dict[str, None] = {}  # first-seen order, as networkx kept it
        for parent, child, line in edges:
            if parent == child:
                raise HierarchyError(f"{clip_path(path)}:{line}: {quote(child)} is its own parent (a cycle)")
            if (parent, child) in self.line:
                continue
            self.line[parent, child] = line
            self.nodes.setdefault(parent)
            self.nodes.setdefault(child)
            self.parents.setdefault(child, []).append(parent)
            self.children.setdefault(parent, []).append(child)

    def find_cycle(self, nodes: Iterable[str]) -> list[str]:
        """A cycle of links among ``nodes`` as [a, b, …, a] (a depth-first search along the child
        links, from the nodes in first-seen order), or [] when there is none."""
        inside = nodes if isinstance(nodes, (set, dict)) else set(nodes)
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done
        for start in self.nodes:
            if start not in inside or start in state:
                continue
            state[start] = 1
            stack = [(start, iter(self.children.get(start, ())))]
            while stack:
                node, it = stack[-1]
                child = next(it, None)
                if child is None:
                    state[node] = 2
                    stack.pop()
                elif child not in inside or state.get(child) == 2:
                    continue
                elif state.get(child) == 1:
                    path = [n for n, _ in stack]
                    return path[path.index(child):] + [child]
                else:
                    state[child] = 1
                    stack.append((child, iter(self.children.get(child, ()))))
        return []


def _check_tree_links(path: Path, links: _Links, nodes: Iterable[str], first_parent: bool) -> None:
    """Refuse a node of ``nodes`` with two parents among them (unless ``first_parent``) or a cycle."""
    inside = nodes if isinstance(nodes, (set, dict)) else set(nodes)
    if not first_parent:
        multi = {n: [(links.line[p, n], p) for p in ps if p in inside]
                 for n, ps in links.parents.items() if n in inside and len(ps) > 1}
        multi = {n: sorted(lines) for n, lines in multi.items() if len(lines) > 1}
        if multi:
            # Report the node whose second parent comes first in the file.
            node = min(multi, key=lambda n: multi[n][1][0])
            (l1, p1), (l2, p2) = multi[node][:2]
            raise HierarchyError(
                f"{clip_path(path)}: node {quote(node)} has two parents, {quote(p1)} (line {l1}) and "
                f"{quote(p2)} (line {l2}); "
                f"a hierarchy must be a tree (to keep the first listed parent: --first-parent, or first_parent=True)")
    cycle = links.find_cycle(inside)
    if cycle:
        raise HierarchyError(f"{clip_path(path)}: the parent links contain a cycle: "
                             f"{clip(' -> '.join(map(str, cycle)), 300)}")


def _tree_from_edges(path, edges, classes, first_parent, collapse) -> Hierarchy:
    links = _Links(path, edges)
    # Keep each child's first listed parent (the only one unless first_parent=True).
    parent_of: dict[str, str] = {}
    for parent, child, _ in edges:
        parent_of.setdefault(child, parent)
    if first_parent:  # only the kept links must form a tree
        kept = _Links(path, [(p, c, links.line[p, c]) for c, p in parent_of.items()])
        _check_tree_links(path, kept, parent_of, True)
    else:
        _check_tree_links(path, links, links.nodes, False)
    leaves = [c for c in parent_of if c not in links.children]  # first appearance as a child
    roots = [n for n in _first_seen(edges) if n not in parent_of]
    if len(roots) > 1:
        root = _fresh_id(ROOT_ID, links.nodes)
        for r in roots:
            parent_of[r] = root
    return _build(path, parent_of, leaves, {}, classes, collapse)


def _first_seen(edges) -> list[str]:
    return list(dict.fromkeys(n for p, c, _ in edges for n in (p, c)))


def _fresh_id(base: str, taken, counters: dict[str, int] | None = None) -> str:
    """``base``, else the first free ``base#k``. ``counters`` (one per ``taken``, whose ids are never
    removed) remembers where each base's search ended, so n repeats cost n steps, not n²/2."""
    if base not in taken:
        return base
    k = counters.get(base, 1) if counters is not None else 1
    while f"{base}#{k}" in taken:
        k += 1
    if counters is not None:
        counters[base] = k + 1
    return f"{base}#{k}"


def _tree_from_is_a(path, text, classes, first_parent, collapse) -> Hierarchy:
    edges = []
    seen: set[str] = set()
    for line, raw in enumerate(_check_lines(path, text), 1):
        if not raw.strip():
            continue
        parts = raw.split()
        if len(parts) != 2:
            raise HierarchyError(f"{clip_path(path)}:{line}: expected 'parent child', got {quote(raw.strip())}")
        edges.append((parts[0], parts[1], line))
        seen.update(parts)
        if len(seen) > LIMITS.max_nodes:  # the whole graph, not just the classes' ancestors
            raise _too_many_names(path, line)
    links = _Links(path, edges)
    if classes is None:  # without a class list the classes are the nodes that are nobody's parent
        classes = [c for c in dict.fromkeys(c for _, c, _ in edges) if c not in links.children]
    missing = [c for c in classes if c not in links.nodes]
    if missing:
        raise HierarchyError(f"{clip_path(path)}: {len(missing)} classes of the class list are not in the hierarchy: "
                             f"{_few(missing)}")
    if len(classes) > 1:
        orphans = [c for c in classes if c not in links.parents]
        if orphans:
            raise HierarchyError(f"{clip_path(path)}: classes with no parent in the is-a file: {_few(orphans)}")
    # Only the classes and their ancestors matter; the rest of the graph (e.g. all of WordNet) is ignored.
    kept, frontier = set(classes), list(classes)
    while frontier:
        for p in links.parents.get(frontier.pop(), ()):
            if p not in kept:
                kept.add(p)
                frontier.append(p)
    _check_tree_links(path, links, kept, first_parent)
    # The tree's depth is at most the longest chain of links above a class (equal for a tree); a
    # longer chain is refused here, before the first-parent scan walks it. The kept links have no
    # cycle (checked above), so parents-before-children order exists (Kahn's algorithm).
    waiting = {n: len(links.parents.get(n, ())) for n in kept}  # a kept node's parents are all kept
    chain = dict.fromkeys(kept, 0)
    ready = [n for n, k in waiting.items() if not k]
    for node in ready:
        for child in links.children.get(node, ()):
            if child in kept:
                chain[child] = max(chain[child], chain[node] + 1)
                waiting[child] -= 1
                if not waiting[child]:
                    ready.append(child)
    longest = max(chain.values(), default=0)
    if longest > LIMITS.max_depth:
        raise HierarchyError(f"{clip_path(path)}: " + str(too_large("deep", longest, LIMITS.max_depth, "levels")))
    try:
        return Hierarchy.from_is_a_file(path, classes, collapse_single_child=collapse)
    except HierarchyError as exc:
        raise _in_file(path, exc) from None


# ---------------------------------------------------------------------------------------- levels
def _tree_from_levels(path, rows, classes, collapse) -> Hierarchy:
    if not rows:
        raise HierarchyError(f"{clip_path(path)}: no classes below the header")
    width = len(rows[0][1])
    if width < 2:
        raise HierarchyError(f"{clip_path(path)}:{rows[0][0]}: a levels file needs at least two columns "
                             f"(coarse → fine, the class last)")
    paths: list[tuple[list[str], str, int]] = []
    class_line: dict[str, int] = {}
    for line, cells in rows:
        if len(cells) != width or not cells[-1]:
            raise HierarchyError(f"{clip_path(path)}:{line}: expected {width} columns (coarse → fine, the class last), "
                                 f"got {quote(','.join(cells))}")
        cls = cells[-1]
        if cls in class_line:
            raise HierarchyError(f"{clip_path(path)}:{line}: duplicate class name {quote(cls)} (first on line "
                                 f"{class_line[cls]})")
        class_line[cls] = line
        paths.append(([c for c in cells[:-1] if c], cls, line))  # an empty cell skips that level

    # One shared first column is the root itself; otherwise a root is added above the first column.
    tops = {p[0] if p else None for p, _, _ in paths}
    shared_root = len(tops) == 1 and None not in tops
    parent_of: dict[str, str] = {}
    names: dict[str, str] = {}
    root = None
    if not shared_root:
        root = _fresh_id(ROOT_ID, set(class_line) | {p[0] for p, _, _ in paths if p})
        names[root] = root
    # A group is found by (its parent group, its cell): one lookup per cell. Its id is its path
    # (``animals/birds``: equal names in other branches stay apart), built once per group; the ids'
    # total length grows with depth × names, so it is bounded by LIMITS.max_id_chars.
    group: dict[tuple[str | None, str], str] = {}
    owner: dict[str, tuple[str | None, str]] = {}
    id_chars = 0
    for cells, cls, line in paths:
        parent = None
        for cell in cells:
            key = (parent, cell)
            node = group.get(key)
            if node is None:
                node = cell if parent is None else f"{parent}/{cell}"  # the path keeps equal names apart
                if owner.setdefault(node, key) != key:
                    raise HierarchyError(f"{clip_path(path)}:{line}: node path {quote(node)} is ambiguous ('/' "
                                         f"inside a name)")
                if node in class_line:
                    raise HierarchyError(f"{clip_path(path)}:{line}: {quote(node)} is both a class (line "
                                         f"{class_line[node]}) "
                                         f"and a group above other classes; rename one")
                group[key] = node
                names[node] = cell
                id_chars += len(node)
                if id_chars > LIMITS.max_id_chars:
                    raise HierarchyError(
                        f"{clip_path(path)}:{line}: hierarchy too large: its group paths (the node ids) exceed "
                        f"{LIMITS.max_id_chars:,} characters in all (deep levels of long names)")
                if len(group) + len(class_line) > LIMITS.max_nodes:
                    raise HierarchyError(f"{clip_path(path)}:{line}: " + str(too_large(
                        "large", len(group) + len(class_line), LIMITS.max_nodes, "nodes")))
                if parent is not None:
                    parent_of[node] = parent
                elif root is not None:
                    parent_of[node] = root
            parent = node
        top = parent if parent is not None else root
        assert top is not None  # with a shared root every row has cells; otherwise root is set
        parent_of[cls] = top
    leaves = [cls for _, cls, _ in paths]
    return _build(path, parent_of, leaves, names, classes, collapse)


# ---------------------------------------------------------------------------------------- newick
# One token at a time: whitespace, punctuation, a quoted label ('' or \' escape a quote), the start of
# a [comment], an unquoted word, or anything else (an error).
_NEWICK_TOKEN = re.compile(r"""(?P<space>\s+)|(?P<punct>[(),:;])|(?P<quoted>'(?:[^'\\]|''|\\.)*')"""
                           r"""|(?P<comment>\[)|(?P<word>[^\s(),:;'\[\]]+)|(?P<bad>.)""", re.DOTALL)


# Tokens one node may carry between the punctuation around it: its label, a ':' and length, a few
# comments and the whitespace between. More is refused, so that a file of millions of comments or
# lengths on one node costs no more than its nodes would.
_NEWICK_TOKENS_PER_NODE = 64


class _NewickError(ValueError):
    """A syntax error, reported as ``<file>: not valid Newick (…)``."""


def _skip_comment(text: str, pos: int) -> int:
    """Position after the ``[comment]`` opening at ``pos`` (comments nest, as in the newick package)."""
    depth, i = 0, pos
    while True:
        opening, closing = text.find("[", i), text.find("]", i)
        if closing < 0:
            raise _NewickError("unterminated comment")
        if 0 <= opening < closing:
            depth, i = depth + 1, opening + 1
        else:
            depth, i = depth - 1, closing + 1
            if depth == 0:
                return i


def _unquote(label: str) -> str:
    return label[1:-1].replace("''", "'").replace("\\'", "'")


def _parse_newick(text: str) -> tuple[list[int], list[str], list[bool], int]:
    """(parent index, label, is internal, number of trees) of the nodes of the first tree, pre-order.

    An explicit stack instead of recursion, one pass over the text, and the nesting checked as it
    grows: a tree over ``LIMITS.max_depth`` or ``LIMITS.max_nodes`` stops at the first node too many.
    """
    parent: list[int] = [-1]
    label: list[str] = [""]
    internal: list[bool] = [False]
    named = [False]  # whether the node's label was read (a second word is an error)
    stack: list[int] = []  # the open '(' nodes
    cur, in_length, pos, n, tokens = 0, False, 0, len(text), 0
    while pos < n:
        m = _NEWICK_TOKEN.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind, token, pos = m.lastgroup, m.group(), m.end()
        tokens += 1
        if tokens > _NEWICK_TOKENS_PER_NODE:
            raise _NewickError(f"over {_NEWICK_TOKENS_PER_NODE} comments, lengths or words on one node "
                               f"(near character {pos})")
        if kind == "space":
            continue
        if kind == "comment":
            pos = _skip_comment(text, m.start())
        elif kind == "bad":
            raise _NewickError("unterminated quote" if token == "'" else f"unexpected {quote(token)} at "
                                                                         f"character {pos}")
        elif kind in ("word", "quoted"):
            if in_length:
                continue  # a branch length: not kept
            if named[cur]:
                raise _NewickError(f"node names must not contain whitespace or punctuation (near character {pos})")
            label[cur], named[cur] = (_unquote(token) if kind == "quoted" else token), True
        elif token == ":":
            in_length = True
        elif token == "(":
            if internal[cur] or named[cur] or in_length:
                raise _NewickError(f"unexpected '(' at character {pos}")
            internal[cur] = True
            stack.append(cur)
            if len(stack) > LIMITS.max_depth:
                raise HierarchyError(f"hierarchy too deep: over {LIMITS.max_depth:,} levels of Newick nesting "
                                     f"(at most {LIMITS.max_depth:,} are supported)")
            cur, in_length, tokens = _newick_node(parent, label, internal, named, cur), False, 0
        elif token == ",":
            if not stack:
                raise _NewickError(f"',' outside parentheses at character {pos}")
            cur, in_length, tokens = _newick_node(parent, label, internal, named, stack[-1]), False, 0
        elif token == ")":
            if not stack:
                raise _NewickError("invalid brace nesting (a ')' without its '(')")
            cur, in_length, tokens = stack.pop(), False, 0  # the closed node's label and length follow
        else:  # ";": the end of the first tree
            break
        if len(parent) > LIMITS.max_nodes:
            raise too_large("large", len(parent), LIMITS.max_nodes, "nodes")
    if stack:
        raise _NewickError("different number of opening and closing braces")
    rest = text[pos:]
    trees = 1 + sum(1 for part in rest.split(";") if part.strip())
    return parent, label, internal, trees


def _newick_node(parent: list[int], label: list[str], internal: list[bool], named: list[bool], above: int) -> int:
    parent.append(above)
    label.append("")
    internal.append(False)
    named.append(False)
    return len(parent) - 1


def _read_newick(path: Path, text: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    try:
        parent, label, internal, trees = _parse_newick(text.strip())
    except _NewickError as exc:
        raise HierarchyError(f"{clip_path(path)}: not valid Newick ({exc})") from None
    except HierarchyError as exc:
        raise _in_file(path, exc) from None
    if trees != 1:
        raise HierarchyError(f"{clip_path(path)}: expected one Newick tree, found {trees}")
    if not internal[0]:
        raise HierarchyError(f"{clip_path(path)}: the Newick tree has no branches (expected e.g. '(a,b)root;')")

    leaf_labels = [lab for lab, inner in zip(label, internal, strict=True) if not inner]
    if "" in leaf_labels:
        raise HierarchyError(f"{clip_path(path)}: a leaf of the Newick tree has no name; every class needs a label")
    _no_duplicates(leaf_labels, f"Newick tree {path}")
    uses = Counter(lab for lab, inner in zip(label, internal, strict=True) if inner and lab)
    unique = {x for x, k in uses.items() if k == 1} - set(leaf_labels)
    taken = set(leaf_labels)  # internal ids never take a class's name
    counters: dict[str, int] = {}
    parent_of: dict[str, str] = {}
    names: dict[str, str] = {}
    leaves: list[str] = []
    ids: list[str] = []
    unnamed, id_chars = 0, 0
    for up, lab, inner in zip(parent, label, internal, strict=True):  # pre-order: parents first
        parent_id = ids[up] if up >= 0 else None
        if not inner:
            node_id = lab
            leaves.append(lab)
        else:
            if lab in unique:
                node_id = lab
            elif lab:  # a repeated label is told apart by its path (and #k among same-named siblings)
                node_id = _fresh_id(f"{parent_id}/{lab}" if parent_id else lab, taken, counters)
                id_chars += len(node_id)
                if id_chars > LIMITS.max_id_chars:
                    raise HierarchyError(
                        f"{clip_path(path)}: hierarchy too large: the paths of its repeated labels (the node "
                        f"ids) exceed "
                        f"{LIMITS.max_id_chars:,} characters in all")
            else:
                node_id, unnamed = _fresh_id(f"node{unnamed}", taken, counters), unnamed + 1
                lab = node_id
            taken.add(node_id)
        ids.append(node_id)
        names[node_id] = lab
        if parent_id is not None:
            parent_of[node_id] = parent_id
    return parent_of, leaves, names


# ---------------------------------------------------------------------------------------- json
def _tree_from_json(path, text, classes, collapse) -> Hierarchy:
    try:
        tree = Hierarchy.from_json_text(text, str(path))
    except HierarchyError as exc:
        raise _in_file(path, exc) from None
    single = [v for v in range(tree.n_leaves, tree.n_nodes) if len(tree.children[v]) == 1]
    if classes is None and not (collapse and single):
        return tree  # keep the document's own node order
    leaves = list(tree.node_ids[: tree.n_leaves])
    parent_of = {tree.node_ids[v]: tree.node_ids[p] for v, p in enumerate(tree.parent.tolist()) if p >= 0}
    return _build(path, parent_of, leaves, dict(zip(tree.node_ids, tree.names, strict=True)), classes, collapse)


# ---------------------------------------------------------------------------------------- common
def _in_file(path: Path, exc: HierarchyError) -> HierarchyError:
    """``exc`` with the file named first, unless its message already names it."""
    message = str(exc)
    return exc if str(path) in message or clip_path(path) in message else HierarchyError(f"{clip_path(path)}: "
                                                                                         f"{message}")


def _build(path, parent_of, leaves, names, classes, collapse) -> Hierarchy:
    """Match the leaves to the class list, then let Hierarchy order and validate the tree."""
    if classes is not None:
        leaf_set, class_set = set(leaves), set(classes)
        missing = [c for c in classes if c not in leaf_set]
        if missing:
            parents = set(parent_of.values())
            inner = [c for c in missing if c in parents]
            if inner:
                raise HierarchyError(f"{clip_path(path)}: classes of the class list are internal nodes of the "
                                     f"hierarchy "
                                     f"(they have children): {_few(inner)}")
            raise HierarchyError(f"{clip_path(path)}: {len(missing)} classes of the class list are not in the "
                                 f"hierarchy: "
                                 f"{_few(missing)}")
        extra = [x for x in leaves if x not in class_set]
        if extra:
            raise HierarchyError(f"{clip_path(path)}: {len(extra)} leaves of the hierarchy are not in the class list: "
                                 f"{_few(extra)}")
        leaves = list(classes)
    try:
        return Hierarchy.from_parent_map(parent_of, leaves, names or None, collapse_single_child=collapse)
    except HierarchyError as exc:
        raise _in_file(path, exc) from None
