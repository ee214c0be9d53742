"""Level-column CSVs (one row per class, columns coarse → fine, the class last), as trees.

Internal nodes are identified by their path (``animals/birds``), so the same name in different
branches or at different levels stays two nodes; its display name is the bare cell.
"""

from __future__ import annotations

from ..core.hierarchy import LIMITS, Hierarchy, HierarchyError, too_large
from ..core.validation import clip_path, quote
from .hierarchy_text import ROOT_ID, build_tree, fresh_id


# ---------------------------------------------------------------------------------------- levels
def tree_from_levels(path, rows, classes, collapse) -> Hierarchy:
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
        root = fresh_id(ROOT_ID, set(class_line) | {p[0] for p, _, _ in paths if p})
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
    return build_tree(path, parent_of, leaves, names, classes, collapse)
