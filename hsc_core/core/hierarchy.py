"""The class hierarchy: a validated rooted tree whose leaves are the model's classes.

Node indexing follows the authors' code (hsc-definitions.md §1.1): leaves are nodes
``0 … n_leaves-1`` in model-output order, internal nodes follow sorted by coverage
descending (ties in first-appearance order), so the root is the last node. Deeper nodes
therefore have lower indices among ties, which is what the first-index tie-breaks rely on.

Cost: building, validating and every table the rules use are linear in the tree's size (nodes, and
the class–ancestor pairs that L(v) holds), within the bounds of :data:`LIMITS`; a larger or deeper
input is refused with a one-line :class:`HierarchyError` before the work that its size drives.
"""

from __future__ import annotations

import bisect
import heapq
import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp

from .validation import bounded_message, clip, clip_path, quote

JSON_FORMAT = "hsc-hierarchy/1"
_T = TypeVar("_T")


class HierarchyError(ValueError):
    """The input does not describe a valid class tree. Its message is bounded (``bounded_message``):
    a message built from user-provided names stays a line, whatever their length."""

    def __init__(self, message: object = "") -> None:
        super().__init__(bounded_message(str(message)))


@dataclass(frozen=True)
class HierarchyLimits:
    """What one class hierarchy may cost: the one place its size bounds are set.

    ``Hierarchy`` checks the tree bounds on construction and the file readers
    (``hsc_core.datasets.formats``) check the file bounds before parsing, so a hostile or mistaken
    upload is refused in milliseconds with a one-line :class:`HierarchyError` (e.g. "hierarchy too
    deep: 10,001 levels (at most 1,000 are supported)") instead of taking the server's memory.

    Within them every step is linear in the tree's size: parsing (Newick and JSON without
    recursion), ids, validation, depths, LCA (binary lifting, n_nodes × log₂ depth), the leaf
    indicator L(v) (one entry per class–ancestor pair) and the rules' candidates. What is dense by
    nature is bounded through ``max_depth``: Climbing's decision paths hold up to max_depth + 1
    records per sample, and ``ancestors_by_depth``, ``leaf_paths`` and ``heights`` are dense
    (n × depth) tables kept for inspection of small trees — the library never builds them.

    Real trees sit far inside: ImageNet-1k's WordNet tree has 1,372 nodes and depth 16, iNat21's
    10,000 species ~12,400 nodes and depth 7; the whole WordNet noun graph (82,115 synsets) fits
    ``max_nodes``, and a 1,000-class caterpillar (depth 999) fits ``max_depth``.
    """

    #: Edges from the root to the deepest node.
    max_depth: int = 1_000
    #: Nodes (classes and groups), also counted as written in a file before single-child chains
    #: collapse, and the nodes of an is-a file's whole graph.
    max_nodes: int = 200_000
    #: The classes' depths summed: the class–ancestor pairs, i.e. the entries of L(v)'s sparse
    #: indicator that node probabilities multiply by (ImageNet-1k: 9,462; iNat21: ~63,000).
    max_leaf_depth_sum: int = 5_000_000
    #: Bytes of a hierarchy file or class list.
    max_file_bytes: int = 32 * 2**20
    #: Lines of a text hierarchy file (edge list, levels, is-a).
    max_file_lines: int = 500_000
    #: Columns of a levels file: max_depth levels below the root, the class last.
    max_level_columns: int = 1_001
    #: Characters of the node ids a file's paths generate, in total (levels ids are paths such as
    #: ``animals/birds``; Newick repeats become ``R/X``): deep paths of long names grow with depth².
    max_id_chars: int = 50_000_000


#: The bounds every hierarchy is checked against (see :class:`HierarchyLimits`).
LIMITS = HierarchyLimits()


def too_large(what: str, count: int, limit: int, unit: str) -> HierarchyError:
    """The one-line refusal of an input over a limit: ``hierarchy too deep: 10,001 levels (at most 1,000
    are supported)``."""
    return HierarchyError(f"hierarchy too {what}: {count:,} {unit} (at most {limit:,} are supported)")


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
    # Derived tables the rules keep per tree (``memo``): read and written only under ``_memo_lock``.
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        parent = np.asarray(self.parent, dtype=np.int64)
        object.__setattr__(self, "parent", parent)
        parent.setflags(write=False)
        depth = _validate(parent, self.n_leaves, self.node_ids, self.names)
        self.__dict__["depth"] = depth  # the cached property, computed by the validation
        # Re-entrant: a table's computation may ask for another memoised table of the same tree.
        self.__dict__["_memo_lock"] = threading.RLock()

    def memo(self, key: tuple, compute: Callable[[], _T]) -> _T:
        """The derived table ``key`` of this tree, computed by ``compute()`` the first time any
        thread asks and kept with the tree: concurrent callers of one key compute it once.

        Parameters
        ----------
        key : tuple
            Names the table and what it depends on besides the tree, e.g. ``("rule_groups", rule)``.
        compute : callable
            Builds the table from the tree; called at most once per key (unless it raises).
        """
        with self.__dict__["_memo_lock"]:
            if key not in self._cache:
                self._cache[key] = compute()
            return self._cache[key]

    # A lock cannot be pickled (Ray and multiprocessing pickle trees): it is left out of the
    # pickled state and a fresh one is made on unpickling; the tables travel with the tree.
    def __getstate__(self) -> dict:
        with self.__dict__["_memo_lock"]:
            state = dict(self.__dict__)
            state["_cache"] = dict(self._cache)
        state.pop("_memo_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__["_memo_lock"] = threading.RLock()

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
            raise HierarchyError(f"n_leaves must be an integer, got {quote(n_leaves)}")
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
        if len(leaves) > LIMITS.max_nodes:
            raise too_large("large", len(leaves), LIMITS.max_nodes, "classes")
        if len(set(leaves)) != len(leaves):
            dup = sorted(x for x, k in Counter(leaves).items() if k > 1)[:5]
            raise HierarchyError(f"duplicate leaf ids: {dup}")
        leaf_set = set(leaves)
        for leaf in leaves:
            if leaf not in parent_of and len(leaves) > 1:
                # A leaf without a parent is only valid when it is the whole tree.
                raise HierarchyError(f"leaf {quote(leaf)} has no parent in the map")
        # Walk up from each leaf; detect cycles along the way. Each node is entered once: a walk
        # stops at a node an earlier walk kept, so this is linear in the number of kept nodes.
        kept: dict[str, str | None] = {}
        for leaf in leaves:
            node: str | None = leaf
            seen: set[str] = set()
            while node is not None:
                if node in seen:
                    raise HierarchyError(f"the parent links contain a cycle through {quote(node)}")
                if node in kept:  # reached by an earlier walk, which ended at the root
                    break
                seen.add(node)
                par = parent_of.get(node)
                if par is not None and par in leaf_set:
                    raise HierarchyError(f"leaf {quote(par)} is the parent of {quote(node)}; classes must be leaves")
                kept[node] = par
                node = par
            if len(kept) > LIMITS.max_nodes:
                raise too_large("large", len(kept), LIMITS.max_nodes, "nodes")
        # First appearance as in the authors' graph construction: each child, then its parent.
        order: dict[str, int] = {}
        for c, p in parent_of.items():
            order.setdefault(c, len(order))
            order.setdefault(p, len(order))
        roots = [n for n, p in kept.items() if p is None]
        if len(roots) != 1:
            raise HierarchyError(f"expected exactly one root, found {len(roots)}: {sorted(roots)[:5]}")
        # Children as sets: only their number and, for a single child, its identity matter, and a
        # set swaps a collapsed child in O(1) however many siblings it has.
        children: dict[str, set[str]] = {}
        for n, up in kept.items():
            if up is not None:
                children.setdefault(up, set()).add(n)
        if collapse_single_child:
            single = [n for n, c in children.items() if len(c) == 1]  # collapsing keeps the counts
            for n in sorted(single, key=lambda x: order.get(x, len(order))):
                (child,) = children[n]
                par = kept[n]
                kept[child] = par
                if par is not None:
                    children[par].discard(n)
                    children[par].add(child)
                del kept[n], children[n]
        # Count leaves per node to order internal nodes by coverage: children before parents
        # (a node is ready once all its children have reported), linear in the kept nodes.
        n_under: dict[str, int] = {n: 0 for n in kept}
        waiting = {n: len(c) for n, c in children.items()}  # internal nodes only
        ready = list(leaves)
        for node in ready:
            if node in leaf_set:
                n_under[node] = 1
            par = kept[node]
            if par is not None:
                n_under[par] += n_under[node]
                waiting[par] -= 1
                if not waiting[par]:
                    ready.append(par)
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
            size = path.stat().st_size
            if size > LIMITS.max_file_bytes:
                raise HierarchyError(f"{clip_path(path)}: {file_too_large(size)}")
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise HierarchyError(f"cannot read is-a file {clip_path(path)}: {exc}") from exc
        pairs = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise HierarchyError(f"{clip_path(path)}:{i}: expected 'parent child', got {quote(line)}")
            pairs.append((parts[0], parts[1]))
        # The authors' loop below never ends when the links above the leaves form a cycle.
        cycle = _is_a_cycle(pairs, [str(x) for x in leaves])
        if cycle:
            raise HierarchyError(f"{clip_path(path)}: the is-a links contain a cycle: "
                                 f"{clip(' -> '.join(cycle), 300)}; not a tree")
        parent_of = _first_parent_scan(pairs, [str(x) for x in leaves])
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
            if len(nodes) > LIMITS.max_nodes:
                raise too_large("large", len(nodes), LIMITS.max_nodes, "nodes")
            parent = [n["parent"] for n in nodes]  # from_parents refuses non-integers, never truncates
            ids = [str(n["id"]) for n in nodes]
            names = [str(n.get("name", n["id"])) for n in nodes]
            n_leaves = data["n_leaves"]
        except HierarchyError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise HierarchyError(f"malformed hierarchy document: {exc}") from exc
        return cls.from_parents(parent, n_leaves, ids, names)

    @classmethod
    def from_json(cls, path: str | Path) -> Hierarchy:
        try:
            size = Path(path).stat().st_size
            if size > LIMITS.max_file_bytes:
                raise HierarchyError(f"{clip_path(path)}: {file_too_large(size)}")
            return cls.from_json_text(Path(path).read_text(), str(path))
        except OSError as exc:
            raise HierarchyError(f"cannot read hierarchy {clip_path(path)}: {exc}") from exc

    @classmethod
    def from_json_text(cls, text: str, where: str = "JSON") -> Hierarchy:
        """Parse a ``hsc-hierarchy/1`` document; deep nesting is one line, never a traceback."""
        return cls.from_dict(load_json(text, where))

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
            raise KeyError(f"unknown node id {quote(node_id)}") from None

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
        """Edges from the root, shape (n_nodes,) (set by the validation on construction)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for v in self.topological_order[1:]:
            depth[v] = depth[self.parent[v]] + 1
        return depth

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @cached_property
    def leaf_count(self) -> np.ndarray:
        """``|L(v)|``: number of leaves under each node, shape (n_nodes,)."""
        count = np.zeros(self.n_nodes, dtype=np.int64)
        count[: self.n_leaves] = 1
        for v in self.topological_order[::-1]:
            if self.parent[v] >= 0:
                count[self.parent[v]] += count[v]
        return count

    @cached_property
    def coverage(self) -> np.ndarray:
        """``φ(v) = 1 − log|L(v)| / log|L|``: 1 at leaves, 0 at the root. Shape (n_nodes,)."""
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
    def _up(self) -> np.ndarray:
        """Parent of each node, the root pointing to itself (so walking up stops there)."""
        up = self.parent.copy()
        up[self.root] = self.root
        up.setflags(write=False)
        return up

    @cached_property
    def _jumps(self) -> np.ndarray:
        """(K, n_nodes) binary lifting table, K = bit length of max_depth: row k holds each node's
        2**k-th ancestor (the root when there are fewer). n_nodes × log₂ depth, not × depth."""
        rows = [self._up]
        for _ in range(1, max(1, self.max_depth.bit_length())):
            rows.append(rows[-1][rows[-1]])
        table = np.stack(rows)
        table.setflags(write=False)
        return table

    def paths_to_root(self, nodes: np.ndarray | Sequence[int], width: int | None = None) -> np.ndarray:
        """(len(nodes), width): each node's path node → root, padded with the root.

        ``width`` defaults to the deepest given node's depth + 1. Built by walking up one level per
        column, so the cost is the size of the result; this is what Climbing's candidates are.
        """
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if width is None:
            width = int(self.depth[nodes].max()) + 1 if nodes.size else 1
        out = np.empty((width, nodes.size), dtype=np.int64)
        up, cur = self._up, nodes
        for k in range(width):
            out[k] = cur
            cur = up[cur]
        return out.T.copy()

    def ancestor_at_depth(self, nodes: np.ndarray | int, depth: np.ndarray | int) -> np.ndarray:
        """The ancestor of each node at ``depth`` (≤ the node's own depth), broadcasting; by binary lifting."""
        nodes, depth = np.broadcast_arrays(np.asarray(nodes, dtype=np.int64), np.asarray(depth, dtype=np.int64))
        steps = self.depth[nodes] - depth
        if steps.size and (steps.min() < 0 or depth.min() < 0):
            raise ValueError("depth must lie between 0 and each node's own depth")
        out = nodes.copy()
        for k, row in enumerate(self._jumps):
            move = (steps >> k) & 1 == 1
            out = np.where(move, row[out], out)
        return out

    @cached_property
    def ancestors_by_depth(self) -> np.ndarray:
        """(n_nodes, max_depth+1): the ancestor of each node at each depth, −1 below the node.

        Dense (n_nodes × depth), for inspecting small trees: the library uses ``ancestor_at_depth``,
        ``lca`` and ``paths_to_root`` instead, which never build it.
        """
        table = np.full((self.n_nodes, self.max_depth + 1), -1, dtype=np.int64)
        for v in self.topological_order:
            p = self.parent[v]
            if p >= 0:
                table[v] = table[p]
            table[v, self.depth[v]] = v
        return table

    @cached_property
    def leaf_paths(self) -> np.ndarray:
        """(n_leaves, max_depth+1): each leaf's path leaf → root, padded with the root.

        Dense (n_leaves × depth, bounded through ``LIMITS.max_depth``); the rules build only the
        rows of the samples' argmax leaves (``paths_to_root``).
        """
        return self.paths_to_root(np.arange(self.n_leaves), self.max_depth + 1)

    def path_to_root(self, node: int) -> np.ndarray:
        """Node indices from ``node`` up to and including the root."""
        path = [int(node)]
        while self.parent[path[-1]] >= 0:
            path.append(int(self.parent[path[-1]]))
        return np.asarray(path, dtype=np.int64)

    def lca(self, u: np.ndarray | int, v: np.ndarray | int) -> np.ndarray:
        """Lowest common ancestor, vectorised and broadcasting over ``u`` and ``v``.

        Binary lifting with the pre-order ancestor test: ``u`` climbs to its highest ancestor that
        is not an ancestor of ``v``, whose parent is the LCA. log₂ depth steps of elementwise work
        (a few temporaries the size of ``u``), whatever the depth.
        """
        u, v = np.broadcast_arrays(np.asarray(u, dtype=np.int64), np.asarray(v, dtype=np.int64))
        tin, tout = self._euler
        tv = tin[v]
        x = u.copy()
        for row in self._jumps[::-1]:
            w = row[x]
            x = np.where((tin[w] <= tv) & (tv < tout[w]), x, w)
        return np.where((tin[u] <= tv) & (tv < tout[u]), u, self._up[x])

    @cached_property
    def leaf_matrix(self) -> sp.csr_matrix:
        """Sparse (n_nodes, n_leaves) indicator of L(v): row v marks the leaves under v.

        One entry per class–ancestor pair (``LIMITS.max_leaf_depth_sum`` bounds them), found by
        walking all leaves up one level at a time.
        """
        rows, cols = [], []
        cur, leaf = np.arange(self.n_leaves), np.arange(self.n_leaves)
        while cur.size:
            rows.append(cur)
            cols.append(leaf)
            above = self.parent[cur]
            keep = above >= 0
            cur, leaf = above[keep], leaf[keep]
        r, c = np.concatenate(rows), np.concatenate(cols)
        data = np.ones(r.shape[0], dtype=np.float64)
        return sp.csr_matrix((data, (r, c)), shape=(self.n_nodes, self.n_leaves))

    @cached_property
    def heights(self) -> tuple[tuple[int, ...], ...]:
        """Jumping's layer heights (§1.1): internal node R − depth; a leaf gets 0 … R − depth.

        Dense (a leaf lists up to R + 1 heights), for inspection: the rules group the internal
        nodes by height directly (``rules._rule_groups``)."""
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


def file_too_large(n_bytes: int) -> str:
    """The message for a hierarchy file over ``LIMITS.max_file_bytes``."""
    mb = 2**20
    return (f"the file is too large: {n_bytes / mb:,.1f} MB (hierarchy files of at most "
            f"{LIMITS.max_file_bytes / mb:,.0f} MB are supported)")


#: JSON values a hsc-hierarchy/1 document may hold per node (its three fields take three; names
#: with commas count too), so that a 32 MB list of tiny values cannot inflate to gigabytes of objects.
JSON_VALUES_PER_NODE = 16


def load_json(text: str, where: str = "JSON") -> Any:
    """``json.loads`` whose errors, including nesting too deep for its recursion, are one-line
    HierarchyErrors (a ``hsc-hierarchy/1`` document nests three levels). The values it would build
    are counted first (commas and brackets, an upper bound) against ``LIMITS.max_nodes``."""
    values = text.count(",") + text.count("{") + text.count("[")
    most = JSON_VALUES_PER_NODE * LIMITS.max_nodes
    if values > most:
        raise HierarchyError(f"cannot read hierarchy {where}: hierarchy too large: {values:,} JSON values (at most "
                             f"{most:,} are supported, {JSON_VALUES_PER_NODE} per node for {LIMITS.max_nodes:,} nodes)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HierarchyError(f"cannot read hierarchy {where}: {exc}") from None
    except RecursionError:
        raise HierarchyError(f"cannot read hierarchy {where}: the JSON is nested too deeply "
                             "(a hsc-hierarchy/1 document nests 3 levels)") from None


def _index_array(parent) -> np.ndarray:
    """Parent indices as int64, refusing None, text, booleans and non-integral floats."""
    if not isinstance(parent, np.ndarray):
        # Check the items before numpy coerces a mixed list (to text, or True to 1).
        try:
            items = list(parent)
        except TypeError:
            raise HierarchyError(f"parent indices must be a sequence of integers, got {quote(parent)}") from None
        for i, x in enumerate(items):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise HierarchyError(f"parent index of node {i} is {quote(x)}, not an integer")
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


def _first_parent_scan(pairs: Sequence[tuple[str, str]], leaves: Sequence[str]) -> dict[str, str]:
    """The authors' ``build_wn_rels`` result, child → parent, in the same insertion order.

    Their loop scans the ``(parent, child)`` lines again and again until a pass changes nothing; a
    line whose child is waiting (in the map without a parent) gives it that parent and puts the
    parent in the map waiting (again, if it had one). That costs a pass over the file per level
    when links are listed top-down. Here each waiting node is scheduled at the next line that
    lists it as a child, in scan order (pass, line): the same events in the same order, each
    found with a bisection, so the cost is the lines plus the events, not passes × lines.
    """
    child_lines: dict[str, list[int]] = {}
    for i, (_, c) in enumerate(pairs):
        child_lines.setdefault(c, []).append(i)
    d: dict[str, str] = {}
    queue: list[tuple[int, int, str]] = []  # (pass, line, node): when a waiting node takes a parent

    def wait(node: str, scan_pass: int, line: int) -> None:
        d[node] = ""
        lines = child_lines.get(node)
        if lines:  # the next line listing it as a child: later in this pass, else the next pass
            k = bisect.bisect_right(lines, line)
            heapq.heappush(queue, (scan_pass, lines[k], node) if k < len(lines) else (scan_pass + 1, lines[0], node))

    for leaf in leaves:
        if leaf not in d:
            wait(leaf, 0, -1)
    budget = 2 * LIMITS.max_leaf_depth_sum + 4 * LIMITS.max_nodes  # far above any tree's events
    while queue:
        scan_pass, line, node = heapq.heappop(queue)
        budget -= 1
        if budget < 0:
            raise HierarchyError("the is-a links are too tangled to resolve (too many first-parent steps)")
        par = pairs[line][0]
        d[node] = par
        if d.get(par) != "":  # a parent already waiting keeps its earlier (and so same) schedule
            wait(par, scan_pass, line)
    return {c: p for c, p in d.items() if p != ""}


def _validate(parent: np.ndarray, n_leaves: int, ids: tuple, names: tuple) -> np.ndarray:
    """Check the tree and the size limits; return each node's depth (edges from the root)."""
    n = parent.shape[0]
    if parent.ndim != 1 or n == 0:
        raise HierarchyError("parent must be a non-empty 1-D array")
    if n > LIMITS.max_nodes:
        raise too_large("large", n, LIMITS.max_nodes, "nodes")
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
    # Every node must reach the root: pointer doubling, log₂ n rounds of n-sized gathers, which also
    # sums each node's distance to the root (its depth) on the way.
    up = np.where(parent < 0, np.arange(n), parent)
    depth = (parent >= 0).astype(np.int64)
    for _ in range(int(np.ceil(np.log2(n + 1))) + 1):
        depth += depth[up]
        up = up[up]
    if (up != roots[0]).any():
        bad = int(np.flatnonzero(up != roots[0])[0])
        raise HierarchyError(f"node {quote(ids[bad])} does not reach the root (cycle or disconnected)")
    has_child = np.zeros(n, dtype=bool)
    has_child[parent[parent >= 0]] = True
    if has_child[:n_leaves].any():
        bad = int(np.flatnonzero(has_child[:n_leaves])[0])
        raise HierarchyError(f"class {quote(ids[bad])} (a leaf) has children; classes must be leaves")
    if n > n_leaves and not has_child[n_leaves:].all():
        bad = n_leaves + int(np.flatnonzero(~has_child[n_leaves:])[0])
        raise HierarchyError(f"internal node {quote(ids[bad])} has no leaves below it")
    if n == n_leaves and n != 1:
        raise HierarchyError("a tree with several classes needs internal nodes")
    deepest = int(depth.max())
    if deepest > LIMITS.max_depth:
        raise too_large("deep", deepest, LIMITS.max_depth, "levels")
    pairs = int(depth[:n_leaves].sum())
    if pairs > LIMITS.max_leaf_depth_sum:
        raise too_large("large", pairs, LIMITS.max_leaf_depth_sum, "class–ancestor links (the classes' depths summed)")
    return depth
