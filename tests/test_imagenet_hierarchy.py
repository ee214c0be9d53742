"""The shipped ImageNet WordNet tree, and the paper's is-a tree against the authors' dump."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from hsc_core.core.hierarchy import Hierarchy, HierarchyError
from hsc_core.datasets import imagenet
from hsc_core.datasets.build_imagenet_hierarchy import main as build_main
from hsc_core.datasets.build_imagenet_hierarchy import timm_imagenet_wnids

REF = Path(__file__).resolve().parents[2] / "shared" / "reference"
IS_A = REF / "imagenet_wordnet_is_a.txt"
DUMP = REF / "authors_imagenet_idx2child.txt"
LOC = REF / "LOC_synset_mapping.txt"
WORDNET = Path("/usr/share/wordnet/data.noun")
WNID = re.compile(r"^n\d{8}$")

needs_ref = pytest.mark.skipif(not (IS_A.is_file() and DUMP.is_file()), reason="shared reference files absent")


def test_shipped_tree_loads_with_timm_leaf_order():
    tree = imagenet.imagenet_hierarchy()
    assert tree.n_leaves == 1000
    assert list(tree.node_ids[:1000]) == timm_imagenet_wnids()
    assert list(imagenet.imagenet_wnids()) == timm_imagenet_wnids()
    assert imagenet.imagenet_hierarchy() is tree  # cached


def test_shipped_tree_is_a_valid_collapsed_tree():
    tree = imagenet.imagenet_hierarchy()
    assert (tree.parent < 0).sum() == 1
    # Re-validating from the raw arrays exercises Hierarchy's own checks.
    Hierarchy.from_parents(tree.parent, tree.n_leaves, tree.node_ids, tree.names)
    n_children = np.array([len(c) for c in tree.children])
    assert (n_children[:1000] == 0).all()
    assert (n_children[1000:] >= 2).all(), "single-child chains must be collapsed"
    assert tree.leaf_count[tree.root] == 1000
    # Internal nodes come in order of increasing leaf count (decreasing coverage).
    assert (np.diff(tree.leaf_count[1000:]) >= 0).all()
    assert tree.root == tree.n_nodes - 1


def test_shipped_names_are_readable():
    tree = imagenet.imagenet_hierarchy()
    names = imagenet.imagenet_class_names()
    assert names[0] == "tench" and "Blenheim_spaniel" in names
    assert all(n and not WNID.match(n) for n in tree.names)
    assert tree.names[tree.lca(0, 1)] == "cyprinid"


def test_source_arguments_are_checked():
    with pytest.raises(ValueError, match="unknown source"):
        imagenet.imagenet_hierarchy("nope")
    with pytest.raises(ValueError, match="is_a_path"):
        imagenet.imagenet_hierarchy("is_a")
    with pytest.raises(ValueError, match="only used"):
        imagenet.imagenet_hierarchy("wordnet", is_a_path="x")
    with pytest.raises(HierarchyError, match="not found"):
        imagenet.imagenet_hierarchy("is_a", is_a_path="/nonexistent/is_a.txt")


def test_default_image_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("HSC_IMAGE_DIR", str(tmp_path))
    assert imagenet.default_image_dir() == tmp_path
    monkeypatch.setenv("HSC_IMAGE_DIR", str(tmp_path / "missing"))
    assert imagenet.default_image_dir() is None
    monkeypatch.delenv("HSC_IMAGE_DIR")
    found = imagenet.default_image_dir()
    assert found is None or found.name == "images"


@pytest.mark.skipif(not WORDNET.is_file(), reason="WordNet 3.0 not installed (apt-get install wordnet-base)")
def test_rebuild_from_wordnet_matches_shipped_json(tmp_path):
    out = tmp_path / "tree.json"
    assert build_main(["--out", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(imagenet.WORDNET_JSON.read_text())
    assert json.loads((tmp_path / "imagenet_wordnet_names.json").read_text()) == json.loads(
        imagenet.NAMES_JSON.read_text()
    )


def test_build_reports_missing_wordnet(tmp_path, capsys):
    assert build_main(["--wordnet-dir", str(tmp_path), "--out", str(tmp_path / "t.json")]) == 2
    assert "apt-get install wordnet-base" in capsys.readouterr().err


# ------------------------------------------------------------------ the paper's tree
@pytest.fixture(scope="module")
def is_a_tree() -> Hierarchy:
    return imagenet.imagenet_hierarchy("is_a", is_a_path=IS_A)


def _read_dump(path: Path) -> list[tuple[int, str, float, list[int], set[str]]]:
    """Internal nodes of the authors' dump: (index, wnid, coverage, height list, children wnids)."""
    lines = path.read_text().splitlines()
    out = []
    for head, kids in pairwise(lines):
        m = re.match(r"^(\d+) (n\d{8}) (\S+) ([-+0-9.e]+) (\[[0-9, ]*\])$", head)
        if m and kids.startswith("children: "):
            children = {w for w, _ in ast.literal_eval(kids[len("children: "):])}
            out.append((int(m.group(1)), m.group(2), float(m.group(4)), ast.literal_eval(m.group(5)), children))
    return out


@pytest.mark.skipif(not LOC.is_file(), reason="shared reference files absent")
def test_leaf_order_is_the_authors_loc_order():
    # The authors' leaves are LOC_synset_mapping.txt's wnids in file order (= model output order).
    assert list(imagenet.imagenet_wnids()) == [line.split()[0] for line in LOC.read_text().splitlines()]


@needs_ref
def test_is_a_tree_shape(is_a_tree):
    t = is_a_tree
    assert t.n_nodes == 1361
    assert t.node_ids[t.root] == "n00001930" and t.root == 1360
    assert dict(Counter(t.depth[:1000].tolist())) == {
        1: 1, 2: 14, 3: 38, 4: 109, 5: 202, 6: 193, 7: 143, 8: 99, 9: 78, 10: 36, 11: 52, 12: 33, 13: 2,
    }
    assert all(n and not WNID.match(n) for n in t.names), "is-a nodes get WordNet names"


@needs_ref
def test_is_a_tree_equals_authors_dump(is_a_tree):
    t = is_a_tree
    dump = _read_dump(DUMP)
    assert len(dump) == 361
    assert [d[0] for d in dump] == list(range(1000, 1361))
    for idx, wnid, cov, height, children in dump:
        assert t.node_ids[idx] == wnid, f"node {idx}"
        assert {t.node_ids[c] for c in t.children[idx]} == children, wnid
        assert t.coverage[idx] == pytest.approx(cov, abs=1e-12), wnid
        # The authors' height of an internal node is root height (13) minus its depth.
        assert height == [t.max_depth - int(t.depth[idx])], wnid
    lca = int(t.lca(0, 1))
    assert lca == 1000 and t.node_ids[lca] == "n01439121" and t.names[lca] == "cyprinid"


# ------------------------------------------------------------------ the is-a loader on small files
def _write_is_a(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _grouped_is_a(extra_first: list[str] = (), extra_last: list[str] = ()) -> list[str]:
    """The 1000 classes in 10 groups of 100 (g0…g9) under one root, plus extra lines."""
    wnids = timm_imagenet_wnids()
    lines = list(extra_first)
    lines += [f"g{i % 10} {w}" for i, w in enumerate(wnids)]
    lines += [f"mid g{k}" for k in range(10)] + ["root mid", "top root"]
    return lines + list(extra_last)


def test_is_a_loader_first_listed_parent_and_collapse(tmp_path):
    wnids = timm_imagenet_wnids()
    # tench also appears later under h0: the first line that lists it wins (g0). root and top form
    # a single-child chain above mid, the parent of the ten groups; collapsing it makes mid the root.
    path = _write_is_a(tmp_path / "is_a.txt", [""] + _grouped_is_a(extra_last=[f"h0 {wnids[0]}", "h0 ignored"]))
    t = imagenet.imagenet_hierarchy("is_a", is_a_path=path)
    assert t.n_nodes == 1011 and t.n_leaves == 1000
    assert list(t.node_ids[:1000]) == wnids
    assert t.node_ids[t.root] == "mid" and t.root == 1010 and not {"root", "top"} & set(t.node_ids)
    assert t.node_ids[t.parent[0]] == "g0" and "h0" not in t.node_ids
    assert {t.node_ids[c] for c in t.children[t.root]} == {f"g{k}" for k in range(10)}
    assert dict(Counter(t.depth[:1000].tolist())) == {2: 1000}
    assert t.names[0] == "tench" and t.names[t.root] == "mid"  # unknown ids keep their id as name
    assert t.lca(0, 10) == t.parent[0] and t.lca(0, 1) == t.root


def test_is_a_loader_errors(tmp_path):
    wnids = timm_imagenet_wnids()
    bad = _write_is_a(tmp_path / "bad.txt", _grouped_is_a(extra_last=["only_one_field"]))
    with pytest.raises(HierarchyError, match=r"bad.txt:1013: expected 'parent child'"):
        imagenet.imagenet_hierarchy("is_a", is_a_path=bad)
    missing = _write_is_a(tmp_path / "missing.txt", [ln for ln in _grouped_is_a() if not ln.endswith(wnids[7])])
    with pytest.raises(HierarchyError, match=f"leaf '{wnids[7]}' has no parent"):
        imagenet.imagenet_hierarchy("is_a", is_a_path=missing)
    # Not a tree: the links above the groups loop (top -> root -> mid -> top). This must fail
    # quickly, not spin in the parent-assignment loop.
    cyclic = _write_is_a(tmp_path / "cyclic.txt", _grouped_is_a(extra_last=["mid top"]))
    with pytest.raises(HierarchyError, match="cycle: .*not a tree"):
        imagenet.imagenet_hierarchy("is_a", is_a_path=cyclic)
    two_roots = _write_is_a(tmp_path / "two_roots.txt",
                            [ln for ln in _grouped_is_a() if ln != "mid g9"] + ["other g9"])
    with pytest.raises(HierarchyError, match="exactly one root"):
        imagenet.imagenet_hierarchy("is_a", is_a_path=two_roots)
