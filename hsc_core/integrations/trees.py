"""The class tree and the labels of the integrations, from what a user has (no third-party imports).

``as_hierarchy`` takes a ``Hierarchy``, any hierarchy file the toolkit reads, or node ids as a
{child: parent} mapping; ``leaf_indices`` turns labels (leaf ids, names or indices) into leaf
indices, with one clear line for a label that is not a leaf.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.hierarchy import Hierarchy
from ..core.validation import quote
from ..datasets.formats import load_hierarchy

__all__ = ["TreeSpec", "as_hierarchy", "leaf_indices"]

#: What a tree may be given as.
TreeSpec = Hierarchy | str | os.PathLike | Mapping[str, str]


def as_hierarchy(tree: Hierarchy | str | os.PathLike | Mapping[str, str]) -> Hierarchy:
    """The class tree from what the toolkit reads: a ``Hierarchy``, a hierarchy file of any format
    (``load_hierarchy``: edges, levels CSV, Newick, is-a, JSON), or node ids as a {child: parent}
    mapping (leaves: the children that are nobody's parent, in the mapping's order)."""
    if isinstance(tree, Hierarchy):
        return tree
    if isinstance(tree, (str, os.PathLike)):
        return load_hierarchy(tree)
    if isinstance(tree, Mapping):
        parents = {str(k): str(v) for k, v in tree.items()}
        inner = set(parents.values())
        return Hierarchy.from_parent_map(parents, [c for c in parents if c not in inner])
    raise TypeError(f"hierarchy must be a Hierarchy, a hierarchy file or a {{child: parent}} mapping of node ids, "
                    f"got {type(tree).__name__}")


def leaf_indices(hierarchy: Hierarchy, labels: Any) -> np.ndarray:
    """(n,) int64 leaf index of each label: a leaf's node id, else its name, else its index.

    The first of the three that resolves every label is used; a label none resolves raises one
    ValueError line naming it.

    >>> tree = Hierarchy.from_parent_map({"cat": "animal", "dog": "animal", "car": "root", "animal": "root"},
    ...                                  ["cat", "dog", "car"])
    >>> leaf_indices(tree, ["dog", "car"]).tolist(), leaf_indices(tree, [2, 0]).tolist()
    ([1, 2], [2, 0])
    >>> leaf_indices(tree, ["cow"])
    Traceback (most recent call last):
    ...
    ValueError: label 'cow' is not a leaf of the hierarchy; its 3 leaves are 'cat', 'dog', 'car'
    """
    values = np.asarray(labels)
    if values.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {values.shape}")
    n_leaves = hierarchy.n_leaves
    keys = [str(v) for v in values.tolist()]
    for table in (hierarchy.node_ids[:n_leaves], hierarchy.names[:n_leaves]):
        index = {k: i for i, k in reversed(list(enumerate(table)))}  # the first leaf of a repeated name
        found = np.array([index.get(k, -1) for k in keys], dtype=np.int64)
        if found.size == 0 or found.min() >= 0:
            return found
    if np.issubdtype(values.dtype, np.integer) and values.min() >= 0 and values.max() < n_leaves:
        return values.astype(np.int64)
    names = set(hierarchy.node_ids[:n_leaves]) | set(hierarchy.names[:n_leaves])
    bad = next(k for k in keys if k not in names)
    shown = ", ".join(quote(x) for x in hierarchy.names[: min(5, n_leaves)]) + (", …" if n_leaves > 5 else "")
    raise ValueError(f"label {quote(bad)} is not a leaf of the hierarchy; its {n_leaves} leaves are {shown}")
