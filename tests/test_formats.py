"""Hierarchy file formats: every format against the hand-checked §9 toy tree, the class list, and every
error message a user can meet."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED, TOY_PARENTS, random_tree

from hsc_core.core.curves import hierarchical_rc_curve
from hsc_core.core.hierarchy import Hierarchy, HierarchyError
from hsc_core.core.probabilities import node_probabilities
from hsc_core.core.rules import RULES
from hsc_core.datasets.formats import detect_format, load_hierarchy, read_class_list

# The §9 toy tree: leaves 0–4; A = {0, 1}; C = {3, 4}; B = {2, C}; root R = {A, B}.
TOY_NAMES = list("01234ACBR")
TOY_DEPTH = [2, 2, 2, 3, 3, 1, 2, 1, 0]
TOY_FILES = {
    "edges.csv": "parent,child\nR,A\nR,B\nA,0\nA,1\nB,2\nB,C\nC,3\nC,4\n",
    "noheader.csv": "R,A\nR,B\nA,0\nA,1\nB,2\nB,C\nC,3\nC,4\n",
    "edges.tsv": "parent\tchild\nR\tA\nR\tB\nA\t0\nA\t1\nB\t2\nB\tC\nC\t3\nC\t4\n",
    # coarse → fine; the empty cell puts class 2 directly under B.
    "levels.csv": "root,group,subgroup,class\nR,A,,0\nR,A,,1\nR,B,,2\nR,B,C,3\nR,B,C,4\n",
    "tree.nwk": "((0:1.5,1:2)A:0.5,(2,(3,4)C)B)R;\n",
    "is_a.txt": "R A\nR B\nA 0\nA 1\nB 2\nB C\nC 3\nC 4\n",
}


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def assert_is_toy(h: Hierarchy) -> None:
    assert h.parent.tolist() == TOY_PARENTS
    assert list(h.names) == TOY_NAMES
    assert h.n_leaves == 5
    assert h.depth.tolist() == TOY_DEPTH


@pytest.mark.parametrize("name", sorted(TOY_FILES))
def test_every_text_format_gives_the_toy_tree(tmp_path, name):
    h = load_hierarchy(write(tmp_path, name, TOY_FILES[name]))
    assert_is_toy(h)


def test_json_round_trip_gives_the_toy_tree(tmp_path, toy):
    toy.to_json(tmp_path / "toy.json")
    h = load_hierarchy(tmp_path / "toy.json")
    assert_is_toy(h)
    assert h.node_ids == toy.node_ids


@pytest.mark.parametrize("name, fmt", [
    ("edges.csv", "edges"), ("noheader.csv", "edges"), ("edges.tsv", "edges"), ("levels.csv", "levels"),
    ("tree.nwk", "newick"), ("is_a.txt", "is_a"),
])
def test_format_detection(tmp_path, name, fmt):
    assert detect_format(write(tmp_path, name, TOY_FILES[name])) == fmt


def test_detection_from_content_and_two_column_files(tmp_path):
    assert detect_format(write(tmp_path, "t.txt", "((a,b),c);")) == "newick"
    assert detect_format(write(tmp_path, "j.txt", '{"format": "hsc-hierarchy/1"}')) == "json"
    # Two columns whose values never repeat across columns read as coarse,fine levels ...
    assert detect_format(write(tmp_path, "cf.csv", "fruit,apple\nfruit,pear\nflower,rose\n")) == "levels"
    assert detect_format(write(tmp_path, "h.csv", "coarse,fine\nfruit,apple\nfruit,pear\n")) == "levels"
    # Any header over a chain is an edge list.
    assert detect_format(write(tmp_path, "ft.csv", "from_node,to_node\nR,A\nR,b\nA,c\nA,d\n")) == "edges"
    # ... and both readings of such a file give the same tree (edges adds the same root above).
    a = load_hierarchy(tmp_path / "cf.csv", fmt="edges")
    b = load_hierarchy(tmp_path / "cf.csv", fmt="levels")
    assert a.parent.tolist() == b.parent.tolist() and a.names == b.names


def test_levels_ids_are_paths_but_names_are_cells(tmp_path):
    h = load_hierarchy(write(tmp_path, "levels.csv", TOY_FILES["levels.csv"]))
    assert h.node_ids[5:] == ("R/A", "R/B/C", "R/B", "R")


def test_levels_keep_equal_names_in_other_branches_and_levels_apart(tmp_path):
    text = ("kingdom,family,genus,species\n"
            "plants,rosaceae,malus,apple\nplants,rosaceae,pyrus,pear\n"
            "animals,misc,misc,ant\nanimals,misc,misc,bee\nanimals,birds,misc,crow\nanimals,birds,corvus,raven\n")
    h = load_hierarchy(write(tmp_path, "l.csv", text), collapse_single_child=False)
    misc = [i for i, n in enumerate(h.names) if n == "misc"]
    assert sorted(h.node_ids[i] for i in misc) == ["animals/birds/misc", "animals/misc", "animals/misc/misc"]
    by_name = dict(zip(h.node_ids, range(h.n_nodes), strict=True))
    assert h.names[h.parent[by_name["ant"]]] == "misc" and h.node_ids[h.parent[by_name["ant"]]] == "animals/misc/misc"
    assert h.node_ids[h.parent[by_name["crow"]]] == "animals/birds/misc"
    assert h.n_nodes == 6 + 11
    # Collapsed: plants, malus, pyrus, animals/misc, animals/birds/misc and corvus each have one child.
    c = load_hierarchy(tmp_path / "l.csv")
    assert c.n_nodes == 6 + 5
    parent = {c.node_ids[v]: c.node_ids[p] for v, p in enumerate(c.parent.tolist()) if p >= 0}
    assert parent["ant"] == "animals/misc/misc" and parent["animals/misc/misc"] == "animals"
    assert parent["crow"] == parent["raven"] == "animals/birds"
    assert parent["plants/rosaceae"] == "root" and parent["apple"] == "plants/rosaceae"


# ---------------------------------------------------------------------------------------- class list
def test_class_list_orders_the_leaves(tmp_path):
    classes = write(tmp_path, "classes.txt", "4\n\n 3 \n2\n1\n0\n")
    assert read_class_list(classes) == ["4", "3", "2", "1", "0"]
    for name in ("edges.csv", "levels.csv", "tree.nwk", "is_a.txt"):
        h = load_hierarchy(write(tmp_path, name, TOY_FILES[name]), classes)
        assert list(h.names[:5]) == ["4", "3", "2", "1", "0"], name
        # Same tree: each class keeps its path of names to the root.
        paths = {h.names[v]: [h.names[u] for u in h.path_to_root(v)] for v in range(5)}
        assert paths == {"0": ["0", "A", "R"], "1": ["1", "A", "R"], "2": ["2", "B", "R"],
                         "3": ["3", "C", "B", "R"], "4": ["4", "C", "B", "R"]}, name


def test_class_list_reorders_a_json_tree_and_keeps_internal_nodes(tmp_path, toy):
    toy.to_json(tmp_path / "toy.json")
    h = load_hierarchy(tmp_path / "toy.json", ["1", "0", "2", "3", "4"])
    assert h.node_ids[:5] == ("1", "0", "2", "3", "4")
    assert h.parent.tolist() == TOY_PARENTS  # leaves 0 and 1 share their parent A


def test_without_class_list_leaves_follow_first_appearance(tmp_path):
    h = load_hierarchy(write(tmp_path, "e.csv", "R,B\nB,C\nC,4\nR,A\nA,1\nC,3\nA,0\nB,2\n"))
    assert h.node_ids[:5] == ("4", "1", "3", "0", "2")
    h = load_hierarchy(write(tmp_path, "n.nwk", "((2,(4,3)C)B,(1,0)A)R;"))
    assert h.node_ids[:5] == ("2", "4", "3", "1", "0")


def test_class_list_as_a_sequence(tmp_path):
    h = load_hierarchy(write(tmp_path, "e.csv", TOY_FILES["edges.csv"]), classes=("0", "1", "2", "3", "4"))
    assert_is_toy(h)


# ---------------------------------------------------------------------------------------- chains
def _edge_file(tmp_path, name, edges):
    return write(tmp_path, name, "parent,child\n" + "".join(f"{p},{c}\n" for p, c in edges))


def test_single_child_chains_change_no_rc_curve(tmp_path):
    tree = random_tree(40, seed=3)
    rng = np.random.default_rng(7)
    edges = [(tree.node_ids[p], tree.node_ids[v]) for v, p in enumerate(tree.parent.tolist()) if p >= 0]
    chained, k = [], 0
    for p, c in edges:  # put a one-child node on ~40 % of the links, and one above the root
        if rng.random() < 0.4:
            chained += [(p, f"chain{k}"), (f"chain{k}", c)]
            k += 1
        else:
            chained.append((p, c))
    chained.append(("top", tree.node_ids[tree.root]))
    leaves = list(tree.node_ids[: tree.n_leaves])
    plain = load_hierarchy(_edge_file(tmp_path, "plain.csv", edges), leaves)
    collapsed = load_hierarchy(_edge_file(tmp_path, "chained.csv", chained), leaves)
    kept = load_hierarchy(tmp_path / "chained.csv", leaves, collapse_single_child=False)
    assert kept.n_nodes == plain.n_nodes + k + 1 and collapsed.n_nodes == plain.n_nodes

    logits = rng.normal(size=(600, 40)) * 3
    leaf_probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = rng.integers(0, 40, 600)
    for rule in RULES:
        a = hierarchical_rc_curve(plain, node_probabilities(plain, leaf_probs), labels, rule)
        b = hierarchical_rc_curve(collapsed, node_probabilities(collapsed, leaf_probs), labels, rule)
        np.testing.assert_array_equal(a.coverage, b.coverage)
        np.testing.assert_array_equal(a.risk, b.risk)
        assert a.haurc == b.haurc, rule
        if rule != "jumping":  # the extra depth of kept chains only moves Jumping's height layers
            c = hierarchical_rc_curve(kept, node_probabilities(kept, leaf_probs), labels, rule)
            assert c.haurc == pytest.approx(a.haurc, abs=1e-12), rule


# ---------------------------------------------------------------------------------------- newick
def test_newick_quotes_comments_lengths_and_unnamed_nodes(tmp_path):
    text = "(('sweet pepper':0.1,'Rock''n roll'[&&NHX:x=1]:2e-1)veg:1,(rose,tulip):0.3,maple_tree);"
    h = load_hierarchy(write(tmp_path, "t.newick", text))
    assert h.names[:5] == ("sweet pepper", "Rock'n roll", "rose", "tulip", "maple_tree")
    assert h.n_nodes == 8
    by_id = dict(zip(h.node_ids, range(h.n_nodes), strict=True))
    assert h.names[h.parent[by_id["sweet pepper"]]] == "veg"
    # Unnamed internal nodes get generated ids in pre-order: the root is node0, (rose,tulip) node1.
    assert h.node_ids[h.root] == "node0" and h.node_ids[h.parent[by_id["rose"]]] == "node1"


def test_newick_repeated_internal_names_become_paths(tmp_path):
    h = load_hierarchy(write(tmp_path, "t.nwk", "((a,b)X,(c,d)X,((e,f)X,g)Y)R;"))
    ids = dict(zip(h.node_ids, h.names, strict=True))
    assert {i: n for i, n in ids.items() if n == "X"} == {"R/X": "X", "R/X#1": "X", "Y/X": "X"}
    parent = {h.node_ids[v]: h.node_ids[p] for v, p in enumerate(h.parent.tolist()) if p >= 0}
    assert parent["a"] == "R/X" and parent["c"] == "R/X#1" and parent["e"] == "Y/X" and parent["Y/X"] == "Y"


# ---------------------------------------------------------------------------------------- errors
TWO_PARENTS = "parent,child\nR,A\nR,B\nA,x\nA,y\nB,x\nB,z\n"


def test_two_parents_are_refused_naming_the_node_and_both_parents(tmp_path):
    path = write(tmp_path, "dag.csv", TWO_PARENTS)
    with pytest.raises(HierarchyError, match=r"node 'x' has two parents, 'A' \(line 4\) and 'B' \(line 6\)"
                                             r".*first_parent=True") as err:
        load_hierarchy(path)
    assert "\n" not in str(err.value)


def test_first_parent_is_the_explicit_opt_in(tmp_path):
    h = load_hierarchy(write(tmp_path, "dag.csv", TWO_PARENTS), first_parent=True)
    parent = {h.node_ids[v]: h.node_ids[p] for v, p in enumerate(h.parent.tolist()) if p >= 0}
    assert parent == {"x": "A", "y": "A", "z": "R", "A": "R"}  # B lost x and kept one child: collapsed


@pytest.mark.parametrize("name, text, kwargs, message", [
    ("cycle.csv", "parent,child\nR,x\nA,B\nB,C\nC,A\nB,y\nR,z\n", {}, r"cycle: A -> B -> C -> A"),
    ("self.csv", "R,A\nA,A\nR,b\n", {}, r"self.csv:2: 'A' is its own parent"),
    ("cycle.txt", "R A\nA B\nB A\nA x\nR y\n", {"first_parent": True}, r"cycle"),
    ("empty.csv", "", {}, r"empty.csv: the hierarchy file is empty"),
    ("blank.nwk", "\n  \n", {}, r"the hierarchy file is empty"),
    ("row.csv", "parent,child\nR,A\nR,B,extra\nA,x\n", {"fmt": "edges"}, r"row.csv:3: expected 'parent,child'"),
    ("cell.csv", "parent,child\nR,A\nR,\nA,x\n", {"fmt": "edges"}, r"cell.csv:3: expected 'parent,child'"),
    ("width.csv", "a,b,c\nx,y,1\nx,2\n", {"fmt": "levels"}, r"width.csv:3: expected 3 columns"),
    ("duplicate.csv", "a,b,c\nx,y,1\nx,z,1\n", {}, r"duplicate.csv:3: duplicate class name '1' \(first on line 2\)"),
    ("dup.nwk", "((a,b),(a,c));", {}, r"duplicate class names in the Newick tree .*'a'"),
    ("bad.nwk", "((a,b),(c,d);", {}, r"bad.nwk: not valid Newick"),
    ("two.nwk", "(a,b);(c,d);", {}, r"expected one Newick tree, found 2"),
    ("noname.nwk", "((a,),c);", {}, r"a leaf of the Newick tree has no name"),
    ("clash.csv", "a,b,c\nx,y,1\n1,z,2\n", {"fmt": "levels"}, r"'1' is both a class \(line 2\)"),
    ("isa.txt", "R A\nA x y\n", {"fmt": "is_a"}, r"isa.txt:2: expected 'parent child'"),
    ("what.txt", "just some words here\n", {}, r"cannot tell the hierarchy format"),
    ("bad.json", "{not json", {}, r"cannot read hierarchy"),
    ("float.json", '{"format": "hsc-hierarchy/1", "n_leaves": 2, "nodes": [{"id": "a", "parent": 2.5}, '
                   '{"id": "b", "parent": 2}, {"id": "r", "parent": -1}]}', {}, r"node 0 is 2.5, not an integer"),
])
def test_bad_files_give_one_line_errors(tmp_path, name, text, kwargs, message):
    with pytest.raises(HierarchyError, match=message) as err:
        load_hierarchy(write(tmp_path, name, text), **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("classes, message", [
    (["0", "1", "2", "3", "4", "5", "6"], r"2 classes of the class list are not in the hierarchy: '5', '6'"),
    (["0", "1", "2", "3"], r"1 leaves of the hierarchy are not in the class list: '4'"),
    (["0", "1", "2", "C", "4"], r"internal nodes of the hierarchy .*'C'"),
    (["0", "1", "2", "3", "4", "0"], r"duplicate class names in the class list: '0'"),
])
def test_class_list_mismatches(tmp_path, classes, message):
    for name in ("edges.csv", "levels.csv", "tree.nwk"):
        if name == "levels.csv" and "C" in classes:
            continue  # levels ids internal nodes by path, so 'C' is simply missing there
        with pytest.raises(HierarchyError, match=message):
            load_hierarchy(write(tmp_path, name, TOY_FILES[name]), classes)


def test_mismatch_names_a_few_and_counts_the_rest(tmp_path):
    path = write(tmp_path, "e.csv", TOY_FILES["edges.csv"])
    with pytest.raises(HierarchyError, match=r"9 classes .*: 'a', 'b', 'c', 'd', 'e' and 4 more$"):
        load_hierarchy(path, list("01234abcdefghi"))


def test_class_list_file_errors(tmp_path):
    with pytest.raises(HierarchyError, match=r"classes.txt:4: duplicate class name 'b' \(first on line 2\)"):
        read_class_list(write(tmp_path, "classes.txt", "a\nb\n\nb\n"))
    with pytest.raises(HierarchyError, match=r"the class list is empty"):
        read_class_list(write(tmp_path, "none.txt", "\n \n"))
    with pytest.raises(HierarchyError, match=r"class list .*missing.txt not found"):
        read_class_list(tmp_path / "missing.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(HierarchyError, match=r"latin1.txt: not UTF-8 text"):
        read_class_list(tmp_path / "latin1.txt")


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(HierarchyError, match=r"hierarchy file .*nope.csv not found"):
        load_hierarchy(tmp_path / "nope.csv")
    with pytest.raises(HierarchyError, match=r"unknown hierarchy format 'xml'"):
        load_hierarchy(write(tmp_path, "e.csv", TOY_FILES["edges.csv"]), fmt="xml")


def test_header_detection_and_override(tmp_path):
    # "R,A" is data: R occurs again below. An explicit header=True drops it.
    h = load_hierarchy(write(tmp_path, "e.csv", TOY_FILES["noheader.csv"]), fmt="edges")
    assert_is_toy(h)
    # header=True drops it: A loses its parent, R keeps only B (collapsed), and A, B hang under an added root.
    h = load_hierarchy(tmp_path / "e.csv", list("01234"), fmt="edges", header=True)
    assert h.node_ids[h.root] == "root" and sorted(h.node_ids[c] for c in h.children[h.root]) == ["A", "B"]
    # A BOM (as spreadsheets write it) does not become part of the first cell.
    (tmp_path / "bom.csv").write_bytes("\ufeffparent,child\nR,A\nR,B\nA,0\nA,1\nB,2\nB,C\nC,3\nC,4\n".encode())
    assert_is_toy(load_hierarchy(tmp_path / "bom.csv"))


def test_several_top_nodes_hang_under_an_added_root(tmp_path):
    h = load_hierarchy(write(tmp_path, "forest.csv", "A,0\nA,1\nB,2\nB,3\n"), fmt="edges")
    assert h.node_ids[h.root] == "root" and h.names[h.root] == "root"
    assert sorted(h.node_ids[c] for c in h.children[h.root]) == ["A", "B"]
    # A class named "root" pushes the added node's id aside.
    h = load_hierarchy(write(tmp_path, "f2.csv", "A,root\nA,1\nB,2\nB,3\n"), fmt="edges")
    assert h.node_ids[h.root] == "root#1"


# ---------------------------------------------------------------------------------------- ImageNet is-a
IS_A = SHARED / "reference" / "imagenet_wordnet_is_a.txt"


@pytest.mark.skipif(not IS_A.is_file(), reason="shared ImageNet is-a file absent")
def test_imagenet_is_a_with_the_class_list_gives_the_papers_tree(tmp_path):
    from hsc_core.datasets.imagenet import imagenet_hierarchy, imagenet_wnids

    classes = write(tmp_path, "classes.txt", "\n".join(imagenet_wnids()) + "\n")
    # WordNet is a DAG: without the opt-in a class ancestor with two parents is named.
    with pytest.raises(HierarchyError, match=r"node 'n\d{8}' has two parents, 'n\d{8}' \(line \d+\) and"):
        load_hierarchy(IS_A, classes, fmt="is_a")
    h = load_hierarchy(IS_A, classes, fmt="is_a", first_parent=True)
    assert h.n_nodes == 1361 and h.n_leaves == 1000
    ref = imagenet_hierarchy("is_a", is_a_path=IS_A)
    assert h.node_ids == ref.node_ids and h.parent.tolist() == ref.parent.tolist()


def test_is_a_without_class_list_takes_the_childless_nodes(tmp_path):
    h = load_hierarchy(write(tmp_path, "is_a.txt", "R A\nR B\nA 0\nA 1\nB 2\nB C\nC 3\nC 4\n"))
    assert_is_toy(h)
    with pytest.raises(HierarchyError, match=r"1 classes of the class list are not in the hierarchy: '9'"):
        load_hierarchy(tmp_path / "is_a.txt", list("01239"))


# ---------------------------------------------------------------------------------------- from_parents
@pytest.mark.parametrize("parents, message", [
    ([2.5, 2, -1], r"parent index of node 0 is 2.5, not an integer"),
    ([2, None, -1], r"parent index of node 1 is None, not an integer"),
    ([2, "2", -1], r"parent index of node 1 is '2', not an integer"),
    ([True, 2, -1], r"parent index of node 0 is True"),
    ([2, 2, float("nan")], r"parent index of node 2 is nan"),
    ([2, [2], -1], r"parent index of node 1 is \[2\], not an integer"),
])
def test_from_parents_refuses_non_integer_indices(parents, message):
    with pytest.raises(HierarchyError, match=message):
        Hierarchy.from_parents(parents, n_leaves=2)


def test_from_parents_accepts_integral_floats():
    h = Hierarchy.from_parents(np.array(TOY_PARENTS, dtype=np.float64), n_leaves=5.0)
    assert h.parent.tolist() == TOY_PARENTS and h.parent.dtype == np.int64 and h.n_leaves == 5
    with pytest.raises(HierarchyError, match=r"n_leaves must be an integer, got 4.5"):
        Hierarchy.from_parents(TOY_PARENTS, n_leaves=4.5)
    with pytest.raises(HierarchyError, match=r"n_leaves must be an integer, got None"):
        Hierarchy.from_parents(TOY_PARENTS, n_leaves=None)
