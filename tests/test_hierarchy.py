"""Hierarchy construction, validation errors, and JSON round trips on hand-made trees."""

from __future__ import annotations

import numpy as np
import pytest

from hsc_core.core.hierarchy import Hierarchy, HierarchyError


def test_from_parent_map_collapses_and_orders():
    # dog → {retriever → golden, labrador}, {terrier → (chain) → westie}, cat; animal above all.
    parent_of = {
        "golden": "retriever", "labrador": "retriever", "retriever": "dog",
        "westie": "small_terrier", "small_terrier": "terrier", "terrier": "dog",
        "tabby": "cat", "siamese": "cat", "dog": "animal", "cat": "animal",
    }
    h = Hierarchy.from_parent_map(parent_of, ["golden", "labrador", "westie", "tabby", "siamese"])
    # The single-child chain terrier → small_terrier → westie collapses onto westie.
    assert "terrier" not in h.node_ids and "small_terrier" not in h.node_ids
    assert h.node_ids[:5] == ("golden", "labrador", "westie", "tabby", "siamese")
    assert h.node_ids[h.root] == "animal" and h.root == h.n_nodes - 1
    assert h.node_ids[int(h.parent[2])] == "dog"  # westie now hangs directly under dog
    # Internal nodes sorted by increasing leaf count: retriever/cat (2) before dog (3), root last.
    assert list(h.leaf_count[5:]) == sorted(h.leaf_count[5:])
    assert h.depth.tolist()[:5] == [3, 3, 2, 2, 2]
    golden, westie = 0, 2
    assert h.node_ids[int(h.lca(golden, westie))] == "dog"
    assert [h.node_ids[v] for v in h.path_to_root(golden)] == ["golden", "retriever", "dog", "animal"]
    np.testing.assert_allclose(h.coverage[h.index_of("dog")], 1 - np.log(3) / np.log(5))


def test_leaf_matrix_and_paths(toy):
    m = toy.leaf_matrix.toarray()
    assert m.shape == (9, 5)
    np.testing.assert_array_equal(m[5], [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(m[7], [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(m[8], [1, 1, 1, 1, 1])
    assert toy.leaf_paths[3].tolist() == [3, 6, 7, 8]
    assert toy.leaf_paths[0].tolist() == [0, 5, 8, 8]  # padded with the root


def test_json_round_trip(tmp_path, toy):
    path = tmp_path / "toy.json"
    toy.to_json(path)
    back = Hierarchy.from_json(path)
    np.testing.assert_array_equal(back.parent, toy.parent)
    assert back.node_ids == toy.node_ids and back.n_leaves == toy.n_leaves


@pytest.mark.parametrize("parents, n_leaves, message", [
    ([2, 2, -1, -1], 2, "exactly one root"),
    ([2, 2, 3, 2], 2, "root"),  # 2 → 3 → 2 is a cycle, no root at all
    ([3, 3, 4, 4, 3, -1][:5] + [-1], 2, "does not reach the root"),
    ([1, -1], 2, "has children"),
    ([2, 2, 4, 4, -1], 2, "has no leaves below it"),
])
def test_invalid_trees_are_rejected(parents, n_leaves, message):
    with pytest.raises(HierarchyError, match=message):
        Hierarchy.from_parents(parents, n_leaves=n_leaves)


def test_parent_map_cycle_and_missing_leaf():
    with pytest.raises(HierarchyError, match="cycle"):
        Hierarchy.from_parent_map({"a": "x", "b": "x", "x": "y", "y": "x"}, ["a", "b"])
    with pytest.raises(HierarchyError):
        Hierarchy.from_parent_map({"a": "x"}, ["a", "b"])


def test_malformed_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(HierarchyError):
        Hierarchy.from_json(bad)


def test_is_a_file_with_a_cycle_is_rejected_not_looped(tmp_path):
    """The authors' first-parent loop never ends on cyclic links; the loader names the cycle."""
    f = tmp_path / "is_a.txt"
    f.write_text("A L1\nA L2\nB A\nA B\n")
    with pytest.raises(HierarchyError, match=r"cycle: A -> B -> A"):
        Hierarchy.from_is_a_file(f, ["L1", "L2"])
    f.write_text("R A\nA L1\nA L2\nB L3\nR B\n")  # a proper tree still loads
    h = Hierarchy.from_is_a_file(f, ["L1", "L2", "L3"])
    assert h.node_ids[h.root] == "R" and h.node_ids[int(h.parent[2])] == "R"  # B collapsed
