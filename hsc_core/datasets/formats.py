"""Class hierarchies from files: edge lists, level columns, ImageNet is-a, the project's JSON, Newick.

``load_hierarchy(path, classes=None)`` reads any of these and returns a validated
:class:`~hsc_core.core.hierarchy.Hierarchy` whose leaves are the model's classes in logit-column order.

=========  ===================================================================================
format     file
=========  ===================================================================================
edges      CSV ``parent,child`` per line (node names or ids; header row optional, detected)
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

Every problem raises :class:`HierarchyError` with a one-line message (file:line where there is one).

Libraries: networkx builds the graph of an edge list or is-a file and finds what keeps it from being a
tree (``nx.find_cycle``, in-degree). Newick is parsed by the ``newick`` package (pinned in
requirements.txt): it unquotes labels (``'a b'``, doubled quotes), drops ``[comments]`` and branch
lengths, and keeps duplicate labels so that we can name them. bigtree's ``newick_to_tree`` (1.5.3) was
the alternative but fails on doubled quotes, names an unnamed root ``;`` and refuses same-named siblings.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import networkx as nx
import newick

from ..core.hierarchy import Hierarchy, HierarchyError

FORMATS = ("edges", "levels", "is_a", "json", "newick")
# Suffixes a hierarchy file may have (user data set folders use ``hierarchy.<suffix>``).
HIERARCHY_SUFFIXES = (".csv", ".tsv", ".txt", ".json", ".nwk", ".newick")
# Header cells that mark a two-column CSV as an edge list rather than coarse,fine levels.
EDGE_HEADER_WORDS = frozenset({
    "parent", "child", "parent_id", "child_id", "parent_name", "child_name", "source", "target",
})
ROOT_ID = "root"
_MAX_NAMED = 5  # how many offending names an error message lists

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
    header : CSV formats: whether the first row is a header; ``None`` detects it (its cells are
        known column names such as ``parent,child``, or occur nowhere else in the file).
    """
    path = Path(path)
    class_list = _class_list(classes)
    text = _read_text(path, "hierarchy file")
    if not text.strip():
        raise HierarchyError(f"{path}: the hierarchy file is empty")
    if fmt is None:
        fmt = detect_format(path, text, header)
    elif fmt not in FORMATS:
        raise HierarchyError(f"unknown hierarchy format {fmt!r}; use one of {', '.join(FORMATS)}")

    if fmt == "json":
        return _tree_from_json(path, class_list, collapse_single_child)
    if fmt == "is_a":
        return _tree_from_is_a(path, text, class_list, first_parent, collapse_single_child)
    if fmt == "newick":
        parent_of, leaves, names = _read_newick(path, text)
        return _build(path, parent_of, leaves, names, class_list, collapse_single_child)
    rows = _read_rows(path, text)
    if header is None:
        header = _has_header(rows)
    if fmt == "edges":
        return _tree_from_edges(path, _edge_rows(path, rows, header), class_list, first_parent,
                                collapse_single_child)
    return _tree_from_levels(path, rows[1:] if header else rows, class_list, collapse_single_child)


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
                f"{path}:{number}: duplicate class name {name!r} (first on line {first_line[name]})")
        first_line[name] = number
        names.append(name)
    if not names:
        raise HierarchyError(f"{path}: the class list is empty")
    return names


def detect_format(path: str | os.PathLike, text: str | None = None, header: bool | None = None) -> str:
    """The format of a hierarchy file, from its extension and content (see the module docstring)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".nwk", ".newick", ".tre", ".tree"):
        return "newick"
    if text is None:
        text = _read_text(path, "hierarchy file")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return "json"
    if stripped.startswith("("):
        return "newick"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise HierarchyError(f"{path}: the hierarchy file is empty")
    if suffix != ".csv" and not any("," in line or "\t" in line for line in lines):
        if all(len(line.split()) == 2 for line in lines):
            return "is_a"
        raise HierarchyError(
            f"{path}: cannot tell the hierarchy format (no commas or tabs, and not 'parent child' "
            f"lines); pass fmt= one of {', '.join(FORMATS)}")
    rows = _read_rows(path, text)
    if header is None:
        header = _has_header(rows)
    width = len(rows[0][1])
    if width >= 3:
        return "levels"
    data = rows[1:] if header else rows
    if header and {c.lower() for c in rows[0][1]} <= EDGE_HEADER_WORDS:
        return "edges"
    # Two columns: a chain (a child that is also a parent) means an edge list. Otherwise both
    # readings give the same tree, and levels keeps a coarse name equal to a class name apart.
    col0 = {cells[0] for _, cells in data if cells}
    col1 = {cells[1] for _, cells in data if len(cells) > 1}
    return "edges" if col0 & col1 else "levels"


# ---------------------------------------------------------------------------------------- reading
def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # -sig: drop a BOM that spreadsheets write
    except FileNotFoundError:
        raise HierarchyError(f"{what} {path} not found") from None
    except UnicodeDecodeError as exc:
        raise HierarchyError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise HierarchyError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


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
    shown = ", ".join(repr(x) for x in items[:_MAX_NAMED])
    return shown + (f" and {len(items) - _MAX_NAMED} more" if len(items) > _MAX_NAMED else "")


def _read_rows(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """Non-blank CSV rows as (line number, stripped cells); tab-separated when the file says so."""
    first = next(line for line in text.splitlines() if line.strip())
    tab = path.suffix.lower() == ".tsv" or ("\t" in first and "," not in first)
    reader = csv.reader(io.StringIO(text), delimiter="\t" if tab else ",")
    rows = []
    try:
        for cells in reader:
            cells = [c.strip() for c in cells]
            if any(cells):
                rows.append((reader.line_num, cells))
    except csv.Error as exc:
        raise HierarchyError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    return rows


def _has_header(rows: list[tuple[int, list[str]]]) -> bool:
    """A first row is a header when its cells are edge-list column names or occur nowhere else."""
    if len(rows) < 2:
        return False
    cells = [c for c in rows[0][1] if c]
    if cells and {c.lower() for c in cells} <= EDGE_HEADER_WORDS:
        return True
    rest = {c for _, row in rows[1:] for c in row}
    return bool(cells) and not any(c in rest for c in cells)


# ---------------------------------------------------------------------------------------- edges / is-a
def _edge_rows(path: Path, rows, header: bool) -> list[tuple[str, str, int]]:
    edges = []
    for line, cells in rows[1:] if header else rows:
        if len(cells) != 2 or not all(cells):
            raise HierarchyError(f"{path}:{line}: expected 'parent,child', got {','.join(cells)!r}")
        edges.append((cells[0], cells[1], line))
    if not edges:
        raise HierarchyError(f"{path}: no edges below the header")
    return edges


def _graph(path: Path, edges: Sequence[tuple[str, str, int]]) -> nx.DiGraph:
    """parent → child graph; each edge keeps the line it was first listed on."""
    first: dict[tuple[str, str], int] = {}
    for parent, child, line in edges:
        if parent == child:
            raise HierarchyError(f"{path}:{line}: {child!r} is its own parent (a cycle)")
        first.setdefault((parent, child), line)
    graph = nx.DiGraph()
    graph.add_edges_from((p, c, {"line": line}) for (p, c), line in first.items())
    return graph


def _check_tree_links(path: Path, graph: nx.DiGraph, nodes: Iterable[str], first_parent: bool) -> None:
    """Refuse a node of ``nodes`` with two parents (unless ``first_parent``) or a cycle among them."""
    sub = graph.subgraph(nodes).copy()  # a copy: walking a subgraph view is ~10x slower
    if not first_parent:
        multi = [n for n, d in sub.in_degree() if d > 1]
        if multi:
            # Report the node whose second parent comes first in the file.
            def second(n):
                return sorted(sub.edges[p, n]["line"] for p in sub.predecessors(n))[1]
            node = min(multi, key=second)
            (p1, l1), (p2, l2) = sorted(((p, sub.edges[p, node]["line"]) for p in sub.predecessors(node)),
                                        key=lambda x: x[1])[:2]
            raise HierarchyError(
                f"{path}: node {node!r} has two parents, {p1!r} (line {l1}) and {p2!r} (line {l2}); "
                f"a hierarchy must be a tree (to keep the first listed parent: --first-parent, or first_parent=True)")
    if nx.is_directed_acyclic_graph(sub):  # a topological sort; cheaper than find_cycle's search
        return
    try:
        cycle = nx.find_cycle(sub)
    except nx.NetworkXNoCycle:
        return
    names = [u for u, _ in cycle] + [cycle[0][0]]
    raise HierarchyError(f"{path}: the parent links contain a cycle: {' -> '.join(map(str, names))}")


def _tree_from_edges(path, edges, classes, first_parent, collapse) -> Hierarchy:
    graph = _graph(path, edges)
    # Keep each child's first listed parent (the only one unless first_parent=True).
    parent_of: dict[str, str] = {}
    for parent, child, _ in edges:
        parent_of.setdefault(child, parent)
    if first_parent:  # only the kept links must form a tree
        _check_tree_links(path, nx.DiGraph((p, c) for c, p in parent_of.items()), parent_of, True)
    else:
        _check_tree_links(path, graph, graph.nodes, False)
    leaves = [c for c in parent_of if graph.out_degree(c) == 0]  # first appearance as a child
    roots = [n for n in _first_seen(edges) if n not in parent_of]
    if len(roots) > 1:
        root = _fresh_id(ROOT_ID, graph)
        for r in roots:
            parent_of[r] = root
    return _build(path, parent_of, leaves, {}, classes, collapse)


def _first_seen(edges) -> list[str]:
    return list(dict.fromkeys(n for p, c, _ in edges for n in (p, c)))


def _fresh_id(base: str, taken) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}#{k}", k + 1
    return name


def _tree_from_is_a(path, text, classes, first_parent, collapse) -> Hierarchy:
    edges = []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        parts = raw.split()
        if len(parts) != 2:
            raise HierarchyError(f"{path}:{line}: expected 'parent child', got {raw.strip()!r}")
        edges.append((parts[0], parts[1], line))
    graph = _graph(path, edges)
    if classes is None:  # without a class list the classes are the nodes that are nobody's parent
        classes = [c for c in dict.fromkeys(c for _, c, _ in edges) if graph.out_degree(c) == 0]
    missing = [c for c in classes if c not in graph]
    if missing:
        raise HierarchyError(f"{path}: {len(missing)} classes of the class list are not in the hierarchy: "
                             f"{_few(missing)}")
    if len(classes) > 1:
        orphans = [c for c in classes if graph.in_degree(c) == 0]
        if orphans:
            raise HierarchyError(f"{path}: classes with no parent in the is-a file: {_few(orphans)}")
    # Only the classes and their ancestors matter; the rest of the graph (e.g. all of WordNet) is ignored.
    kept, frontier = set(classes), list(classes)
    while frontier:
        for p in graph.predecessors(frontier.pop()):
            if p not in kept:
                kept.add(p)
                frontier.append(p)
    _check_tree_links(path, graph, kept, first_parent)
    return Hierarchy.from_is_a_file(path, classes, collapse_single_child=collapse)


# ---------------------------------------------------------------------------------------- levels
def _tree_from_levels(path, rows, classes, collapse) -> Hierarchy:
    if not rows:
        raise HierarchyError(f"{path}: no classes below the header")
    width = len(rows[0][1])
    if width < 2:
        raise HierarchyError(f"{path}:{rows[0][0]}: a levels file needs at least two columns "
                             f"(coarse → fine, the class last)")
    paths: list[tuple[list[str], str, int]] = []
    class_line: dict[str, int] = {}
    for line, cells in rows:
        if len(cells) != width or not cells[-1]:
            raise HierarchyError(f"{path}:{line}: expected {width} columns (coarse → fine, the class last), "
                                 f"got {','.join(cells)!r}")
        cls = cells[-1]
        if cls in class_line:
            raise HierarchyError(f"{path}:{line}: duplicate class name {cls!r} (first on line {class_line[cls]})")
        class_line[cls] = line
        paths.append(([c for c in cells[:-1] if c], cls, line))  # an empty cell skips that level

    # One shared first column is the root itself; otherwise a root is added above the first column.
    tops = {p[0] if p else None for p, _, _ in paths}
    shared_root = len(tops) == 1 and None not in tops
    parent_of: dict[str, str] = {}
    names: dict[str, str] = {}
    origin: dict[str, tuple[str, ...]] = {}
    root = None
    if not shared_root:
        root = _fresh_id(ROOT_ID, set(class_line) | {p[0] for p, _, _ in paths if p})
        names[root] = root
    for cells, cls, line in paths:
        parent = None if shared_root else root
        for depth in range(len(cells)):
            node = "/".join(cells[: depth + 1])  # the path keeps equal names in other branches apart
            if origin.setdefault(node, tuple(cells[: depth + 1])) != tuple(cells[: depth + 1]):
                raise HierarchyError(f"{path}:{line}: node path {node!r} is ambiguous ('/' inside a name)")
            if node in class_line:
                raise HierarchyError(f"{path}:{line}: {node!r} is both a class (line {class_line[node]}) "
                                     f"and a group above other classes; rename one")
            names[node] = cells[depth]
            if parent is not None:
                parent_of.setdefault(node, parent)
            parent = node
        top = parent if parent is not None else root
        assert top is not None  # with a shared root every row has cells; otherwise root is set
        parent_of[cls] = top
    leaves = [cls for _, cls, _ in paths]
    return _build(path, parent_of, leaves, names, classes, collapse)


# ---------------------------------------------------------------------------------------- newick
def _read_newick(path: Path, text: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    try:
        trees = newick.loads(text.strip())
    except (ValueError, IndexError) as exc:
        raise HierarchyError(f"{path}: not valid Newick ({exc})") from None
    if len(trees) != 1:
        raise HierarchyError(f"{path}: expected one Newick tree, found {len(trees)}")
    top = trees[0]
    if not top.descendants:
        raise HierarchyError(f"{path}: the Newick tree has no branches (expected e.g. '(a,b)root;')")

    parent_of: dict[str, str] = {}
    names: dict[str, str] = {}
    leaves: list[str] = []
    ids: dict[int, str] = {}  # id(node) → node id
    internal_labels = [n.unquoted_name for n in top.walk() if n.descendants and n.name]
    leaf_labels = [n.unquoted_name if n.name else "" for n in top.walk() if not n.descendants]
    if "" in leaf_labels:
        raise HierarchyError(f"{path}: a leaf of the Newick tree has no name; every class needs a label")
    _no_duplicates(leaf_labels, f"Newick tree {path}")
    unique = {x for x in internal_labels if internal_labels.count(x) == 1} - set(leaf_labels)
    taken = set(leaf_labels)  # internal ids never take a class's name
    unnamed = 0
    for node in top.walk():  # pre-order: left to right, each node before its children
        label = node.unquoted_name if node.name else ""
        parent_id = ids.get(id(node.ancestor)) if node.ancestor is not None else None
        if not node.descendants:
            node_id = label
            leaves.append(label)
        else:
            if label in unique:
                node_id = label
            elif label:  # a repeated label is told apart by its path (and #k among same-named siblings)
                node_id = _fresh_id(f"{parent_id}/{label}" if parent_id else label, taken)
            else:
                node_id, unnamed = _fresh_id(f"node{unnamed}", taken), unnamed + 1
                label = node_id
            taken.add(node_id)
        ids[id(node)] = node_id
        names[node_id] = label
        if parent_id is not None:
            parent_of[node_id] = parent_id
    return parent_of, leaves, names


# ---------------------------------------------------------------------------------------- json
def _tree_from_json(path, classes, collapse) -> Hierarchy:
    tree = Hierarchy.from_json(path)
    single = [v for v in range(tree.n_leaves, tree.n_nodes) if len(tree.children[v]) == 1]
    if classes is None and not (collapse and single):
        return tree  # keep the document's own node order
    leaves = list(tree.node_ids[: tree.n_leaves])
    parent_of = {tree.node_ids[v]: tree.node_ids[p] for v, p in enumerate(tree.parent.tolist()) if p >= 0}
    return _build(path, parent_of, leaves, dict(zip(tree.node_ids, tree.names, strict=True)), classes, collapse)


# ---------------------------------------------------------------------------------------- common
def _build(path, parent_of, leaves, names, classes, collapse) -> Hierarchy:
    """Match the leaves to the class list, then let Hierarchy order and validate the tree."""
    if classes is not None:
        leaf_set, class_set = set(leaves), set(classes)
        missing = [c for c in classes if c not in leaf_set]
        if missing:
            inner = [c for c in missing if c in parent_of.values()]
            if inner:
                raise HierarchyError(f"{path}: classes of the class list are internal nodes of the hierarchy "
                                     f"(they have children): {_few(inner)}")
            raise HierarchyError(f"{path}: {len(missing)} classes of the class list are not in the hierarchy: "
                                 f"{_few(missing)}")
        extra = [x for x in leaves if x not in class_set]
        if extra:
            raise HierarchyError(f"{path}: {len(extra)} leaves of the hierarchy are not in the class list: "
                                 f"{_few(extra)}")
        leaves = list(classes)
    return Hierarchy.from_parent_map(parent_of, leaves, names or None, collapse_single_child=collapse)
