"""Built-in and user data sets: CIFAR-100's tree, ImageNet-1k, the datasets/ folder, the manifest key."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
from conftest import REPO, TOY_PARENTS

from hsc_core.core.curves import hierarchical_rc_curve
from hsc_core.core.hierarchy import HierarchyError
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.datasets import imagenet, registry
from hsc_core.datasets.registry import (
    Dataset,
    builtin_dataset_names,
    dataset_for_manifest,
    discover_datasets,
    load_dataset,
)

# The official fine → coarse index map of CIFAR-100 (the `coarse_labels` of its training file).
CIFAR100_COARSE_OF_FINE = [
    4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11, 6, 11, 5, 10, 7, 6, 13, 15, 3, 15,
    0, 11, 1, 10, 12, 14, 16, 9, 11, 5, 5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17,
    10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13, 16, 19, 2, 4, 6, 19, 5, 5, 8, 19,
    18, 1, 2, 15, 6, 0, 17, 8, 14, 13,
]
CIFAR100_SUPERCLASSES = [
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
    "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
    "large_man-made_outdoor_things", "large_natural_outdoor_scenes", "large_omnivores_and_herbivores",
    "medium_mammals", "non-insect_invertebrates", "people", "reptiles", "small_mammals", "trees",
    "vehicles_1", "vehicles_2",
]


def test_builtin_names():
    assert builtin_dataset_names() == ("imagenet1k", "cifar100")


# ---------------------------------------------------------------------------------------- CIFAR-100
@pytest.fixture(scope="module")
def cifar() -> Dataset:
    return load_dataset("cifar100")


def test_cifar100_shape(cifar):
    h = cifar.hierarchy
    assert h.n_leaves == 100 and h.n_nodes == 121 and h.max_depth == 2
    assert h.names[h.root] == "root" and h.depth[:100].tolist() == [2] * 100
    supers = h.children[h.root]
    assert len(supers) == 20 and sorted(h.names[s] for s in supers) == CIFAR100_SUPERCLASSES
    assert all(len(h.children[s]) == 5 for s in supers)


def test_cifar100_class_order_is_the_standard_alphabetical_index(cifar):
    names = cifar.class_names
    assert len(names) == 100 and list(names) == sorted(names)
    assert (names[0], names[1], names[47], names[58], names[99]) == (
        "apple", "aquarium_fish", "maple_tree", "pickup_truck", "worm")
    assert cifar.hierarchy.node_ids[:100] == names


def test_cifar100_memberships_match_the_official_coarse_labels(cifar):
    h = cifar.hierarchy
    coarse = [h.names[h.parent[i]] for i in range(100)]
    assert coarse == [CIFAR100_SUPERCLASSES[c] for c in CIFAR100_COARSE_OF_FINE]
    of = dict(zip(cifar.class_names, coarse, strict=True))
    assert of["maple_tree"] == "trees" and of["whale"] == "aquatic_mammals" and of["lawn_mower"] == "vehicles_2"
    assert of["keyboard"] == "household_electrical_devices" and of["mushroom"] == "fruit_and_vegetables"


def test_cifar100_feeds_the_core(cifar):
    # A full RC curve on the CIFAR tree: a coarse answer (the superclass) is correct for its 5 classes.
    h = cifar.hierarchy
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 100, 300)
    logits = rng.normal(size=(300, 100))
    logits[np.arange(300), labels] += 2.0
    curve = hierarchical_rc_curve(h, node_probabilities(h, softmax(logits)), labels, "climbing")
    assert 0 < curve.haurc < 1 and curve.coverage.max() == pytest.approx(1.0)
    assert h.coverage[h.parent[0]] == pytest.approx(1 - np.log(5) / np.log(100))


def test_builtins_are_cached(cifar):
    assert load_dataset("cifar100") is cifar
    assert load_dataset("imagenet1k") is load_dataset("imagenet1k")


def test_imagenet1k():
    d = load_dataset("imagenet1k")
    assert d.hierarchy is imagenet.imagenet_hierarchy() and d.n_classes == 1000
    assert d.class_names == imagenet.imagenet_class_names() and d.class_names[0] == "tench"
    assert d.find_image_dir() == imagenet.default_image_dir()


# ---------------------------------------------------------------------------------------- manifests
def test_dataset_for_manifest():
    assert dataset_for_manifest({"dataset_id": "cifar100"}, 100) == "cifar100"
    assert dataset_for_manifest({"dataset_id": "my_birds"}, 1000) == "my_birds"  # the key wins
    assert dataset_for_manifest({}, 1000) == "imagenet1k"
    assert dataset_for_manifest({"model": "x"}, 100) is None  # the caller must ask
    with pytest.raises(ValueError, match="invalid data set name '../x'"):
        dataset_for_manifest({"dataset_id": "../x"}, 100)
    with pytest.raises(ValueError, match="must be a string"):
        dataset_for_manifest({"dataset_id": 3}, 100)


def test_shipped_manifests_name_imagenet1k():
    manifests = sorted((REPO / "cached_logits").glob("*.json"))
    assert len(manifests) >= 3
    for path in manifests:
        m = json.loads(path.read_text())
        assert m["dataset_id"] == "imagenet1k" and dataset_for_manifest(m, m["n_classes"]) == "imagenet1k"


# ---------------------------------------------------------------------------------------- user folder
TOY_EDGES = "parent,child\nR,A\nR,B\nA,a0\nA,a1\nB,b2\nB,C\nC,c3\nC,c4\n"


def make_dataset(root, name, files: dict[str, str]):
    folder = root / name
    folder.mkdir(parents=True)
    for fname, text in files.items():
        (folder / fname).write_text(text)
    return folder


def test_user_dataset_round_trip(tmp_path):
    folder = make_dataset(tmp_path, "toy-set.v1", {
        "hierarchy.csv": TOY_EDGES, "classes.txt": "a0\na1\nb2\nc3\nc4\n",
        "dataset.json": json.dumps({"description": "the §9 toy tree"}),
    })
    (folder / "images").mkdir()
    assert discover_datasets(tmp_path) == {"toy-set.v1": folder}
    d = load_dataset("toy-set.v1", tmp_path)
    assert d.name == "toy-set.v1" and d.description == "the §9 toy tree"
    assert d.hierarchy.parent.tolist() == TOY_PARENTS and d.class_names == ("a0", "a1", "b2", "c3", "c4")
    assert d.image_dir == folder / "images"
    assert load_dataset("toy-set.v1", tmp_path) is d  # cached while the files are unchanged


def test_an_edited_user_dataset_is_read_again(tmp_path):
    folder = make_dataset(tmp_path, "toy", {"hierarchy.csv": TOY_EDGES})
    first = load_dataset("toy", tmp_path)
    assert first.class_names == ("a0", "a1", "b2", "c3", "c4") and first.image_dir is None
    (folder / "classes.txt").write_text("c4\nc3\nb2\na1\na0\n")
    assert load_dataset("toy", tmp_path).class_names == ("c4", "c3", "b2", "a1", "a0")
    (folder / "hierarchy.csv").write_text(TOY_EDGES + "C,c5\n")
    st = (folder / "hierarchy.csv").stat()
    os.utime(folder / "hierarchy.csv", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(HierarchyError, match=r"1 leaves of the hierarchy are not in the class list: 'c5'"):
        load_dataset("toy", tmp_path)


def test_dataset_json_options(tmp_path):
    make_dataset(tmp_path, "dag", {
        "hierarchy.csv": "parent,child\nR,A\nR,B\nA,x\nA,y\nB,x\nB,z\n",
        "dataset.json": json.dumps({"first_parent": True}),
    })
    assert load_dataset("dag", tmp_path).class_names == ("x", "y", "z")
    make_dataset(tmp_path, "typo", {"hierarchy.csv": TOY_EDGES, "dataset.json": '{"first_parnet": true}'})
    with pytest.raises(HierarchyError, match=r"unknown key 'first_parnet'"):
        load_dataset("typo", tmp_path)
    make_dataset(tmp_path, "wrongtype", {"hierarchy.csv": TOY_EDGES, "dataset.json": '{"first_parent": "yes"}'})
    with pytest.raises(HierarchyError, match=r"'first_parent' must be a bool"):
        load_dataset("wrongtype", tmp_path)


def test_discovery_skips_what_is_not_a_dataset(tmp_path):
    make_dataset(tmp_path, "good", {"hierarchy.nwk": "((a,b)x,(c,d)y)r;"})
    make_dataset(tmp_path, "no_hierarchy", {"classes.txt": "a\n"})
    make_dataset(tmp_path, "bad name", {"hierarchy.csv": TOY_EDGES})
    make_dataset(tmp_path, "cifar100", {"hierarchy.csv": TOY_EDGES})
    make_dataset(tmp_path, "broken", {"hierarchy.csv": "R,A\nA,R\n"})  # found here, refused when loaded
    (tmp_path / "README.md").write_text("not a folder")
    outside = make_dataset(tmp_path / "elsewhere", "x", {"hierarchy.csv": TOY_EDGES})
    root = tmp_path / "datasets"
    root.mkdir()
    for sub in ("good", "no_hierarchy", "bad name", "cifar100", "broken", "README.md"):
        (root / sub).symlink_to(tmp_path / sub) if sub == "README.md" else (tmp_path / sub).rename(root / sub)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = discover_datasets(root)
    assert found == {"broken": root / "broken", "good": root / "good"}
    text = " | ".join(str(w.message) for w in caught)
    assert "invalid data set name 'bad name'" in text and "'cifar100' is a built-in" in text
    assert "leads outside" in text
    assert load_dataset("good", root).class_names == ("a", "b", "c", "d")
    assert load_dataset("cifar100", root).n_classes == 100  # the built-in, not the folder
    with pytest.raises(HierarchyError, match="cycle"):
        load_dataset("broken", root)
    with pytest.raises(ValueError, match="leads outside"):
        load_dataset("linked", root)


@pytest.mark.parametrize("name", ["../good", "a/b", "..", "", "x y", "naïve"])
def test_names_are_validated(tmp_path, name):
    with pytest.raises(ValueError, match="invalid data set name"):
        load_dataset(name, tmp_path)


def test_unknown_and_ambiguous_datasets(tmp_path):
    make_dataset(tmp_path, "two", {"hierarchy.csv": TOY_EDGES, "hierarchy.nwk": "((a,b)x,c)r;"})
    with pytest.raises(HierarchyError, match=r"several hierarchy files \(hierarchy.csv, hierarchy.nwk\)"):
        load_dataset("two", tmp_path)
    with pytest.raises(ValueError, match=r"unknown data set 'nope'; known: cifar100, imagenet1k, two"):
        load_dataset("nope", tmp_path)


def test_default_folder_and_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(registry.DATASETS_DIR_ENV, raising=False)
    monkeypatch.delenv("HSC_CACHED_LOGITS_DIR", raising=False)
    assert registry.default_datasets_dir() == REPO / "datasets"  # beside <repo>/cached_logits
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path / "logits"))
    assert registry.default_datasets_dir() == tmp_path / "datasets"  # follows the logits folder, as the dashboard
    make_dataset(tmp_path, "envset", {"hierarchy.csv": TOY_EDGES})
    monkeypatch.setenv(registry.DATASETS_DIR_ENV, str(tmp_path))
    assert discover_datasets() == {"envset": tmp_path / "envset"}
    assert load_dataset("envset").n_classes == 5
    assert discover_datasets(tmp_path / "missing") == {}


def test_imagenet_image_folder_is_looked_up_when_used(monkeypatch, tmp_path):
    # The tree is cached, but $HSC_IMAGE_DIR set later must still be honoured.
    from hsc_core.datasets.registry import load_dataset

    ds = load_dataset("imagenet1k")
    monkeypatch.setenv("HSC_IMAGE_DIR", str(tmp_path))
    assert load_dataset("imagenet1k").find_image_dir() == tmp_path
    monkeypatch.setenv("HSC_IMAGE_DIR", str(tmp_path / "missing"))
    assert ds.find_image_dir() is None
    assert load_dataset("cifar100").find_image_dir() is None
