"""Edge lists (``parent,child`` CSV) and ImageNet's is-a file (``parent child``), as trees.

The links are plain dicts (``_Links``): two parents and cycles are found in one linear pass each
(a networkx graph, used before, took ~1 kB per node and most of the time at the node limit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.hierarchy import LIMITS, Hierarchy, HierarchyError, too_large
from ..core.validation import clip, clip_path, quote
from .hierarchy_text import ROOT_ID, build_tree, check_lines, few_names, fresh_id, in_file, too_many_names


# ---------------------------------------------------------------------------------------- edges / is-a
def edge_rows(path: Path, rows, header: bool) -> list[tuple[str, str, int]]:
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


def tree_from_edges(path, edges, classes, first_parent, collapse) -> Hierarchy:
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
        root = fresh_id(ROOT_ID, links.nodes)
        for r in roots:
            parent_of[r] = root
    return build_tree(path, parent_of, leaves, {}, classes, collapse)


def _first_seen(edges) -> list[str]:
    return list(dict.fromkeys(n for p, c, _ in edges for n in (p, c)))


def tree_from_is_a(path, text, classes, first_parent, collapse) -> Hierarchy:
    edges = []
    seen: set[str] = set()
    for line, raw in enumerate(check_lines(path, text), 1):
        if not raw.strip():
            continue
        parts = raw.split()
        if len(parts) != 2:
            raise HierarchyError(f"{clip_path(path)}:{line}: expected 'parent child', got {quote(raw.strip())}")
        edges.append((parts[0], parts[1], line))
        seen.update(parts)
        if len(seen) > LIMITS.max_nodes:  # the whole graph, not just the classes' ancestors
            raise too_many_names(path, line)
    links = _Links(path, edges)
    if classes is None:  # without a class list the classes are the nodes that are nobody's parent
        classes = [c for c in dict.fromkeys(c for _, c, _ in edges) if c not in links.children]
    missing = [c for c in classes if c not in links.nodes]
    if missing:
        raise HierarchyError(f"{clip_path(path)}: {len(missing)} classes of the class list are not in the hierarchy: "
                             f"{few_names(missing)}")
    if len(classes) > 1:
        orphans = [c for c in classes if c not in links.parents]
        if orphans:
            raise HierarchyError(f"{clip_path(path)}: classes with no parent in the is-a file: {few_names(orphans)}")
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
        raise in_file(path, exc) from None
