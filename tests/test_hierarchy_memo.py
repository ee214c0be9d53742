"""``Hierarchy.memo``: the one locked way the rules keep derived tables with a tree."""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np

from hsc_core.core import node_scores, probabilities, rules
from hsc_core.core.hierarchy import Hierarchy

# root(4) → {a(3) → {0, 1}, 2}: classes 0, 1, 2.
PARENTS = [3, 3, 4, 4, -1]


def _toy() -> Hierarchy:
    return Hierarchy.from_parents(PARENTS, 3)


def test_concurrent_callers_of_one_key_compute_it_once():
    h = _toy()
    calls = []
    start = threading.Barrier(8)

    def compute():
        calls.append(1)
        time.sleep(0.05)  # wide window: without the lock every thread would compute
        return np.arange(3)

    results = []

    def worker():
        start.wait()
        results.append(h.memo(("slow",), compute))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 8 and all(r is results[0] for r in results)


def test_other_keys_and_nested_memo():
    h = _toy()
    assert h.memo(("a",), lambda: 1) == 1
    assert h.memo(("a",), lambda: 2) == 1  # kept
    # A table built from another memoised table of the same tree (the lock is re-entrant).
    assert h.memo(("b",), lambda: h.memo(("a",), lambda: 3) + 10) == 11


def test_failed_compute_is_not_kept():
    h = _toy()

    def boom():
        raise RuntimeError("no")

    try:
        h.memo(("x",), boom)
    except RuntimeError:
        pass
    assert h.memo(("x",), lambda: 5) == 5


def test_rule_tables_are_memoised_and_survive_pickling():
    h = _toy()
    columns, starts = rules._rule_groups(h, "jumping")
    # internal nodes 3 (height 1) then 4 (height 2): one group each
    assert columns.tolist() == [3, 4] and starts.tolist() == [0, 1]
    assert rules._rule_groups(h, "jumping")[0] is columns  # the same kept object
    probs = np.array([[0.5, 0.3, 0.2]])
    nodes = probabilities.node_probabilities(h, probs)
    np.testing.assert_allclose(nodes, [[0.5, 0.3, 0.2, 0.8, 1.0]])
    # S(v) = sum of the weights on v's path below the root: leaf 0 → w0 + w3
    weighted = np.array([[1.0, 2.0, 4.0, 8.0, 16.0]])
    np.testing.assert_allclose(node_scores._down_sums(h, weighted), [[9.0, 10.0, 4.0, 8.0, 0.0]])

    copy = pickle.loads(pickle.dumps(h))
    assert copy is not h
    np.testing.assert_array_equal(copy.parent, h.parent)
    assert copy.node_ids == h.node_ids and copy.n_leaves == h.n_leaves
    np.testing.assert_array_equal(copy.memo(("rule_groups", "jumping"), lambda: None)[0], columns)
    np.testing.assert_allclose(probabilities.node_probabilities(copy, probs), nodes)
    # the copy has its own working lock
    assert copy.memo(("new",), lambda: 7) == 7 and ("new",) not in h._cache
    # equality and hashing stay by identity (eq=False), unaffected by the lock
    assert h == h and copy != h and hash(h) == hash(h)
