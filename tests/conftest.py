"""Shared fixtures: the §9 toy tree of the definitions file and small synthetic data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# Leaves 0–4; A(5) = {0, 1}; C(6) = {3, 4}; B(7) = {2, C}; root R(8) = {A, B}.
TOY_PARENTS = [5, 5, 7, 6, 6, 8, 7, 8, -1]
TOY_LEAF_PROBS = np.array([
    [0.30, 0.05, 0.25, 0.25, 0.15],
    [0.70, 0.10, 0.10, 0.05, 0.05],
    [0.10, 0.10, 0.20, 0.35, 0.25],
    [0.20, 0.20, 0.20, 0.20, 0.20],
    [0.05, 0.05, 0.10, 0.10, 0.70],
])
TOY_LABELS = np.array([2, 1, 4, 0, 4])


@pytest.fixture(scope="session")
def toy() -> Hierarchy:
    return Hierarchy.from_parents(TOY_PARENTS, n_leaves=5, node_ids=list("01234ACBR"))


@pytest.fixture(scope="session")
def toy_probs(toy: Hierarchy) -> np.ndarray:
    return node_probabilities(toy, TOY_LEAF_PROBS)


def random_tree(n_leaves: int, seed: int) -> Hierarchy:
    """A random tree whose internal nodes have 2–5 children, built bottom-up."""
    rng = np.random.default_rng(seed)
    parent_of: dict[str, str] = {}
    level = [f"leaf{i}" for i in range(n_leaves)]
    k = 0
    while len(level) > 1:
        order = rng.permutation(len(level))
        nxt, i = [], 0
        while i < len(level):
            size = int(rng.integers(2, 6))
            if len(level) - (i + size) == 1:
                size += 1  # never leave a single node behind
            name = f"node{k}"
            k += 1
            for j in order[i: i + size]:
                parent_of[level[j]] = name
            nxt.append(name)
            i += size
        level = nxt
    return Hierarchy.from_parent_map(parent_of, [f"leaf{i}" for i in range(n_leaves)])
