"""The class hierarchy: a validated rooted tree whose leaves are the model's classes.

Node indexing follows the authors' code (hsc-definitions.md §1.1): leaves are nodes
``0 … n_leaves-1`` in model-output order, internal nodes follow sorted by coverage
descending (ties in first-appearance order), so the root is the last node. Deeper nodes
therefore have lower indices among ties, which is what the first-index tie-breaks rely on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import scipy.sparse as sp

JSON_FORMAT = "hsc-hierarchy/1"


class HierarchyError(ValueError):
    """The input does not describe a valid class tree."""


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A rooted tree over ``n_nodes`` nodes whose first ``n_leaves`` nodes are the classes.

    Attributes
    ----------
    parent : ndarray of shape (n_nodes,), int64
        Parent index of each node, ``-1`` for the root.
    n_leaves : int
        Number of classes; nodes ``0 … n_leaves-1`` are the leaves in model-output order.
    node_ids : tuple of str
        Stable identifiers (e.g. WordNet ids).
    names : tuple of str
        Human-readable names.
    """

    parent: np.ndarray
    n_leaves: int
    node_ids: tuple[str, ...]
    names: tuple[str, ...]
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        parent = np.asarray(self.parent, dtype=np.int64)
        object.__setattr__(self, "parent", parent)
        parent.setflags(write=False)
        _validate(parent, self.n_leaves, self.node_ids, self.names)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_parents(
        cls,
        parent: Sequence[int] | np.ndarray,
        n_leaves: int,
        node_ids: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
    ) -> Hierarchy:
        """Build from a parent-index array that already uses the leaves-first layout.

        Indices must be integers (floats only when integral, e.g. read from JSON as 5.0); anything
        else raises HierarchyError rather than being truncated.
        """
        parent = _index_array(parent)
        if not isinstance(n_leaves, (int, float, np.integer, np.floating)) or isinstance(n_leaves, bool) \
                or not float(n_leaves).is_integer():
            raise HierarchyError(f"n_leaves must be an integer, got {n_leaves!r}")
        ids = tuple(node_ids) if node_ids is not None else tuple(str(i) for i in range(len(parent)))
        nms = tuple(names) if names is not None else ids
        return cls(parent, int(n_leaves), ids, nms)

    @classmethod
    def flat(cls, n_leaves: int) -> Hierarchy:
        """Leaves directly under one root: hierarchical selective classification reduces to
        ordinary selective classification."""
        parent = np.full(n_leaves + 1, n_leaves, dtype=np.int64)
        parent[n_leaves] = -1
        return cls.from_parents(parent, n_leaves, [f"leaf{i}" for i in range(n_leaves)] + ["root"])

    @classmethod
    def from_parent_map(
        cls,
        parent_of: Mapping[str, str],
        leaves: Sequence[str],
        names: Mapping[str, str] | None = None,
        collapse_single_child: bool = True,
    ) -> Hierarchy:
        """Build from a child→parent id map (the iteration order of ``parent_of`` sets tie order).

        Keeps only the leaves and their ancestors, optionally collapses single-child chains
        (a node with one child has the same leaves, probability and coverage as that child),
        and orders internal nodes by coverage descending, ties by first appearance.
        """
        leaves = [str(x) for x in leaves]
        if len(set(leaves)) != len(leaves):
            dup = sorted({x for x in leaves if leaves.count(x) > 1})[:5]
            raise HierarchyError(f"duplicate leaf ids: {dup}")
        leaf_set = set(leaves)
        for leaf in leaves:
            if leaf not in parent_of and len(leaves) > 1:
                # A leaf without a parent is only valid when it is the whole tree.
                raise HierarchyError(f"leaf {leaf!r} has no parent in the map")
        # Walk up from each leaf; detect cycles along the way.
        kept: dict[str, str | None] = {}
        for leaf in leaves:
            node: str | None = leaf
            seen: set[str] = set()
            while node is not None:
                if node in seen:
                    raise HierarchyError(f"the parent links contain a cycle through {node!r}")
                if node in kept:  # reached by an earlier walk, which ended at the root
                    break
                seen.add(node)
                par = parent_of.get(node)
                if par is not None and par in leaf_set:
                    raise HierarchyError(f"leaf {par!r} is the parent of {node!r}; classes must be leaves")
                kept[node] = par
                node = par
        # First appearance as in the authors' graph construction: each child, then its parent.
        order: dict[str, int] = {}
        for c, p in parent_of.items():
            order.setdefault(c, len(order))
            order.setdefault(p, len(order))
        roots = [n for n, p in kept.items() if p is None]
        if len(roots) != 1:
            raise HierarchyError(f"expected exactly one root, found {len(roots)}: {sorted(roots)[:5]}")
        children: dict[str, list[str]] = {n: [] for n in kept}
        for n, par in kept.items():
            if par is not None:
                children[par].append(n)
        if collapse_single_child:
            for n in sorted(kept, key=lambda x: order.get(x, len(order))):
                if n in leaf_set or len(children[n]) != 1:
                    continue
                (child,) = children[n]
                par = kept[n]
                kept[child] = par
                if par is not None:
                    children[par] = [child if c == n else c for c in children[par]]
                del kept[n], children[n]
        # Count leaves per node to order internal nodes by coverage.
        n_under: dict[str, int] = {n: 0 for n in kept}
        for leaf in leaves:
            node = leaf
            while node is not None:
                n_under[node] += 1
                node = kept[node]
        internal = [n for n in kept if n not in leaf_set]
        internal.sort(key=lambda n: (n_under[n], order.get(n, len(order))))
        ordered = leaves + internal
        index = {n: i for i, n in enumerate(ordered)}
        parent = np.array([-1 if (par := kept[n]) is None else index[par] for n in ordered], dtype=np.int64)
        nm = names or {}
        return cls(parent, len(leaves), tuple(ordered), tuple(nm.get(n, n) for n in ordered))

    @classmethod
    def from_is_a_file(
        cls,
        path: str | Path,
        leaves: Sequence[str],
        names: Mapping[str, str] | None = None,
        collapse_single_child: bool = True,
    ) -> Hierarchy:
        """Build from an ImageNet-style is-a file (lines ``parent_id child_id``).

        Replicates the authors' ``build_wn_rels`` loop: scanning lines in file order, a kept
        node takes the parent on the first line that lists it as a child (§1.1).
        """
        path = Path(path)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise HierarchyError(f"cannot read is-a file {path}: {exc}") from exc
        pairs = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise HierarchyError(f"{path}:{i}: expected 'parent child', got {line!r}")
            pairs.append((parts[0], parts[1]))
        # The authors' loop below never ends when the links above the leaves form a cycle.
        cycle = _is_a_cycle(pairs, [str(x) for x in leaves])
        if cycle:
            raise HierarchyError(f"{path}: the is-a links contain a cycle: {' -> '.join(cycle)}; not a tree")
        d: dict[str, str] = {str(x): "" for x in leaves}
        changed = True
        while changed:
            changed = False
            for p, c in pairs:
                if c in d and d[c] == "":
                    d[c] = p
                    d[p] = ""
                    changed = True
        parent_of = {c: p for c, p in d.items() if p != ""}
        return cls.from_parent_map(parent_of, leaves, names, collapse_single_child)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        return {
            "format": JSON_FORMAT,
            "n_leaves": self.n_leaves,
            "nodes": [
                {"id": i, "name": n, "parent": int(p)}
                for i, n, p in zip(self.node_ids, self.names, self.parent.tolist(), strict=True)
            ],
        }

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=0, ensure_ascii=False))

    @classmethod
    def from_dict(cls, data: Mapping) -> Hierarchy:
        if not isinstance(data, Mapping) or data.get("format") != JSON_FORMAT:
            raise HierarchyError(f"not a {JSON_FORMAT} document")
        try:
            nodes = data["nodes"]
            parent = [n["parent"] for n in nodes]  # from_parents refuses non-integers, never truncates
            ids = [str(n["id"]) for n in nodes]
            names = [str(n.get("name", n["id"])) for n in nodes]
            n_leaves = data["n_leaves"]
        except (KeyError, TypeError, ValueError) as exc:
            raise HierarchyError(f"malformed hierarchy document: {exc}") from exc
        return cls.from_parents(parent, n_leaves, ids, names)

    @classmethod
    def from_json(cls, path: str | Path) -> Hierarchy:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise HierarchyError(f"cannot read hierarchy {path}: {exc}") from exc
        return cls.from_dict(data)

    # ------------------------------------------------------------------ structure
    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def root(self) -> int:
        return int(np.flatnonzero(self.parent < 0)[0])

    def index_of(self, node_id: str) -> int:
        try:
            return self._id_index[node_id]
        except KeyError:
            raise KeyError(f"unknown node id {node_id!r}") from None

    @cached_property
    def _id_index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.node_ids)}

    @cached_property
    def topological_order(self) -> np.ndarray:
        """Nodes ordered root first, each node after its parent (BFS)."""
        order = [self.root]
        for v in order:
            order.extend(self.children[v].tolist())
        return np.asarray(order, dtype=np.int64)

    @cached_property
    def children(self) -> tuple[np.ndarray, ...]:
        kids: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for v, p in enumerate(self.parent.tolist()):
            if p >= 0:
                kids[p].append(v)
        return tuple(np.asarray(k, dtype=np.int64) for k in kids)

    @cached_property
    def depth(self) -> np.ndarray:
        """Edges from the root, shape (n_nodes,)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for v in self.topological_order[1:]:
            depth[v] = depth[self.parent[v]] + 1
        return depth

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @cached_property
    def leaf_count(self) -> np.ndarray:
        """|L(v)|: number of leaves under each node, shape (n_nodes,)."""
        count = np.zeros(self.n_nodes, dtype=np.int64)
        count[: self.n_leaves] = 1
        for v in self.topological_order[::-1]:
            if self.parent[v] >= 0:
                count[self.parent[v]] += count[v]
        return count

    @cached_property
    def coverage(self) -> np.ndarray:
        """φ(v) = 1 − log|L(v)| / log|L|: 1 at leaves, 0 at the root. Shape (n_nodes,)."""
        if self.n_leaves == 1:
            return np.ones(self.n_nodes)
        return 1.0 - np.log(self.leaf_count) / np.log(self.n_leaves)

    @cached_property
    def _euler(self) -> tuple[np.ndarray, np.ndarray]:
        """Pre-order entry index and subtree end, so a is an ancestor of d iff tin[a] ≤ tin[d] < tout[a]."""
        tin = np.zeros(self.n_nodes, dtype=np.int64)
        size = np.ones(self.n_nodes, dtype=np.int64)
        for v in self.topological_order[::-1]:
            if self.parent[v] >= 0:
                size[self.parent[v]] += size[v]
        stack, t = [self.root], 0
        while stack:
            v = stack.pop()
            tin[v] = t
            t += 1
            stack.extend(self.children[v][::-1].tolist())
        return tin, tin + size

    def is_ancestor(self, ancestor: np.ndarray | int, node: np.ndarray | int) -> np.ndarray:
        """True where ``ancestor`` ∈ A(node) (a node is its own ancestor). Broadcasts."""
        tin, tout = self._euler
        a, d = np.asarray(ancestor), np.asarray(node)
        return (tin[a] <= tin[d]) & (tin[d] < tout[a])

    @cached_property
    def ancestors_by_depth(self) -> np.ndarray:
        """(n_nodes, max_depth+1): the ancestor of each node at each depth, −1 below the node."""
        table = np.full((self.n_nodes, self.max_depth + 1), -1, dtype=np.int64)
        for v in self.topological_order:
            p = self.parent[v]
            if p >= 0:
                table[v] = table[p]
            table[v, self.depth[v]] = v
        return table

    @cached_property
    def leaf_paths(self) -> np.ndarray:
        """(n_leaves, max_depth+1): each leaf's path leaf → root, padded with the root."""
        table = self.ancestors_by_depth[: self.n_leaves]
        depth = self.depth[: self.n_leaves]
        k = np.arange(table.shape[1])
        idx = np.clip(depth[:, None] - k[None, :], 0, None)
        return np.take_along_axis(table, idx, axis=1)

    def path_to_root(self, node: int) -> np.ndarray:
        """Node indices from ``node`` up to and including the root."""
        path = [int(node)]
        while self.parent[path[-1]] >= 0:
            path.append(int(self.parent[path[-1]]))
        return np.asarray(path, dtype=np.int64)

    def lca(self, u: np.ndarray | int, v: np.ndarray | int) -> np.ndarray:
        """Lowest common ancestor, vectorised and broadcasting over ``u`` and ``v``."""
        u, v = np.broadcast_arrays(np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64))
        table = self.ancestors_by_depth
        same = (table[u] == table[v]) & (table[u] >= 0)
        # Shared ancestors form a prefix of depths; the deepest is at index (count − 1).
        deepest = same.sum(axis=-1) - 1
        return np.take_along_axis(table[u], deepest[..., None], axis=-1)[..., 0]

    @cached_property
    def leaf_matrix(self) -> sp.csr_matrix:
        """Sparse (n_nodes, n_leaves) indicator of L(v): row v marks the leaves under v."""
        paths = self.ancestors_by_depth[: self.n_leaves]
        rows = paths[paths >= 0]
        cols = np.repeat(np.arange(self.n_leaves), (paths >= 0).sum(axis=1))
        data = np.ones(rows.shape[0], dtype=np.float64)
        return sp.csr_matrix((data, (rows, cols)), shape=(self.n_nodes, self.n_leaves))

    @cached_property
    def heights(self) -> tuple[tuple[int, ...], ...]:
        """Jumping's layer heights (§1.1): internal node R − depth; a leaf gets 0 … R − depth."""
        r = self.max_depth
        return tuple(
            tuple(range(0, r - int(d) + 1)) if v < self.n_leaves else (r - int(d),)
            for v, d in enumerate(self.depth)
        )

    @cached_property
    def height_layers(self) -> tuple[np.ndarray, ...]:
        """Nodes of each height layer h = 0 … R (leaves padded as dummy nodes)."""
        r = self.max_depth
        layers: list[list[int]] = [[] for _ in range(r + 1)]
        for v, hs in enumerate(self.heights):
            for h in hs:
                layers[h].append(v)
        return tuple(np.asarray(sorted(x), dtype=np.int64) for x in layers)


def _index_array(parent) -> np.ndarray:
    """Parent indices as int64, refusing None, text, booleans and non-integral floats."""
    if not isinstance(parent, np.ndarray):
        # Check the items before numpy coerces a mixed list (to text, or True to 1).
        try:
            items = list(parent)
        except TypeError:
            raise HierarchyError(f"parent indices must be a sequence of integers, got {parent!r}") from None
        for i, x in enumerate(items):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise HierarchyError(f"parent index of node {i} is {x!r}, not an integer")
        parent = np.asarray(items, dtype=np.float64 if any(isinstance(x, float) for x in items) else np.int64)
    if parent.dtype.kind in "iu":
        return parent.astype(np.int64)
    if parent.dtype.kind != "f":
        raise HierarchyError(f"parent indices must be integers, got an array of {parent.dtype}")
    bad = ~np.isfinite(parent) | (parent != np.round(parent))
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise HierarchyError(f"parent index of node {i} is {float(parent.ravel()[i])!r}, not an integer")
    return parent.astype(np.int64)


def _is_a_cycle(pairs: Sequence[tuple[str, str]], leaves: Sequence[str]) -> list[str]:
    """A cycle among the ``(parent, child)`` links reachable upwards from ``leaves``, or []."""
    parents: dict[str, list[str]] = {}
    for p, c in pairs:
        parents.setdefault(c, []).append(p)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for leaf in leaves:
        if state.get(leaf):
            continue
        state[leaf] = 1
        stack = [(leaf, iter(parents.get(leaf, ())))]
        while stack:  # iterative depth-first walk up every link
            node, it = stack[-1]
            par = next(it, None)
            if par is None:
                state[node] = 2
                stack.pop()
            elif state.get(par) == 1:
                on_path = [n for n, _ in stack]
                return on_path[on_path.index(par):] + [par]
            elif not state.get(par):
                state[par] = 1
                stack.append((par, iter(parents.get(par, ()))))
    return []


def _validate(parent: np.ndarray, n_leaves: int, ids: tuple, names: tuple) -> None:
    n = parent.shape[0]
    if parent.ndim != 1 or n == 0:
        raise HierarchyError("parent must be a non-empty 1-D array")
    if not 1 <= n_leaves <= n:
        raise HierarchyError(f"n_leaves={n_leaves} must be between 1 and n_nodes={n}")
    if len(ids) != n or len(names) != n:
        raise HierarchyError(f"{len(ids)} ids and {len(names)} names for {n} nodes")
    if len(set(ids)) != n:
        raise HierarchyError("node ids must be unique")
    if ((parent < -1) | (parent >= n)).any():
        raise HierarchyError("parent indices out of range")
    roots = np.flatnonzero(parent < 0)
    if len(roots) != 1:
        raise HierarchyError(f"expected exactly one root, found {len(roots)}")
    if (parent == np.arange(n)).any():
        raise HierarchyError(f"node {int(np.flatnonzero(parent == np.arange(n))[0])} is its own parent")
    # Every node must reach the root: follow parents n times with pointer doubling.
    up = np.where(parent < 0, np.arange(n), parent)
    for _ in range(int(np.ceil(np.log2(n + 1))) + 1):
        up = up[up]
    if (up != roots[0]).any():
        bad = int(np.flatnonzero(up != roots[0])[0])
        raise HierarchyError(f"node {ids[bad]!r} does not reach the root (cycle or disconnected)")
    has_child = np.zeros(n, dtype=bool)
    has_child[parent[parent >= 0]] = True
    if has_child[:n_leaves].any():
        bad = int(np.flatnonzero(has_child[:n_leaves])[0])
        raise HierarchyError(f"class {ids[bad]!r} (a leaf) has children; classes must be leaves")
    if n > n_leaves and not has_child[n_leaves:].all():
        bad = n_leaves + int(np.flatnonzero(~has_child[n_leaves:])[0])
        raise HierarchyError(f"internal node {ids[bad]!r} has no leaves below it")
    if n == n_leaves and n != 1:
        raise HierarchyError("a tree with several classes needs internal nodes")
