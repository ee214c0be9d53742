"""The shipped ImageNet WordNet tree, and the paper's is-a tree against the authors' dump."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hsc_core import imagenet
from hsc_core.build_imagenet_hierarchy import main as build_main
from hsc_core.build_imagenet_hierarchy import timm_imagenet_wnids
from hsc_core.hierarchy import Hierarchy, HierarchyError

REF = Path(__file__).resolve().parents[2] / "shared" / "reference"
IS_A = REF / "imagenet_wordnet_is_a.txt"
DUMP = REF / "authors_imagenet_idx2child.txt"
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


def _read_dump(path: Path) -> list[tuple[int, str, float, set[str]]]:
    """Internal nodes of the authors' dump: (index, wnid, coverage, children wnids)."""
    lines = path.read_text().splitlines()
    out = []
    for head, kids in zip(lines, lines[1:]):
        m = re.match(r"^(\d+) (n\d{8}) (\S+) ([-+0-9.e]+)", head)
        if m and kids.startswith("children: "):
            children = {w for w, _ in ast.literal_eval(kids[len("children: "):])}
            out.append((int(m.group(1)), m.group(2), float(m.group(4)), children))
    return out


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
    for idx, wnid, cov, children in dump:
        assert t.node_ids[idx] == wnid, f"node {idx}"
        assert {t.node_ids[c] for c in t.children[idx]} == children, wnid
        assert t.coverage[idx] == pytest.approx(cov, abs=1e-12), wnid
    lca = int(t.lca(0, 1))
    assert lca == 1000 and t.node_ids[lca] == "n01439121" and t.names[lca] == "cyprinid"
