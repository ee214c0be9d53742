"""ImageNet-1k: the class tree, the class ids and names, and where the sample images live.

Two trees are on offer:

* ``source="wordnet"`` (default): the tree shipped in ``hsc_core/datasets/data/``. It is built from
  WordNet 3.0 by ``python -m hsc_core.datasets.build_imagenet_hierarchy`` and needs no download.
* ``source="is_a"``: the paper's exact tree (1,361 nodes), built from ImageNet's own is-a file
  (``wordnet.is_a.txt``, lines ``parent_wnid child_wnid``) that the user supplies as ``is_a_path``.

``hsc_core/datasets/data/README.md`` says where the two trees differ.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from .. import config
from ..core.hierarchy import Hierarchy, HierarchyError
from ..core.validation import clip_path, quote

DATA_DIR = Path(__file__).resolve().parent / "data"
WORDNET_JSON = DATA_DIR / "imagenet_wordnet_hierarchy.json"
# First lemma of every synset above the 1000 classes through any hypernym (names the is-a tree).
NAMES_JSON = DATA_DIR / "imagenet_wordnet_names.json"
N_CLASSES = 1000
# The shared sample sits beside the repository checkout (…/work/shared next to …/work/main).
_REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGE_DIR_ENV = config.IMAGE_DIR


@lru_cache(maxsize=1)
def _wordnet_tree() -> Hierarchy:
    tree = Hierarchy.from_json(WORDNET_JSON)
    if tree.n_leaves != N_CLASSES:
        raise HierarchyError(f"{WORDNET_JSON} has {tree.n_leaves} leaves, expected {N_CLASSES}")
    return tree


@lru_cache(maxsize=4)
def _is_a_tree(path: str, mtime_ns: int) -> Hierarchy:
    # The file's mtime is part of the key so an edited file is read again.
    return Hierarchy.from_is_a_file(path, imagenet_wnids(), _name_map())


def imagenet_hierarchy(source: str = "wordnet", is_a_path: str | os.PathLike | None = None) -> Hierarchy:
    """Return the ImageNet-1k class tree (1000 leaves in the standard class order).

    Parameters
    ----------
    source : ``"wordnet"`` for the shipped WordNet-3.0 tree, or ``"is_a"`` for the paper's tree
        built from ImageNet's is-a file.
    is_a_path : path to that is-a file; required when ``source="is_a"``.

    The result is cached, so repeated calls are free.
    """
    if source == "wordnet":
        if is_a_path is not None:
            raise ValueError("is_a_path is only used with source='is_a'")
        return _wordnet_tree()
    if source == "is_a":
        if is_a_path is None:
            raise ValueError("source='is_a' needs is_a_path= (ImageNet's wordnet.is_a.txt, lines 'parent child')")
        path = Path(is_a_path)
        if not path.is_file():
            raise HierarchyError(f"is-a file {clip_path(path)} not found")
        return _is_a_tree(str(path.resolve()), path.stat().st_mtime_ns)
    raise ValueError(f"unknown source {quote(source)}; use 'wordnet' or 'is_a'")


def imagenet_wnids() -> tuple[str, ...]:
    """The 1000 class wnids in model output order (index = class label)."""
    return _wordnet_tree().node_ids[:N_CLASSES]


def imagenet_class_names() -> tuple[str, ...]:
    """The 1000 class names (first WordNet lemma, e.g. ``'tench'``) in model output order."""
    return _wordnet_tree().names[:N_CLASSES]


@lru_cache(maxsize=1)
def _name_map() -> dict[str, str]:
    # Ids that are in neither file (a custom is-a file) keep their wnid as the name.
    tree = _wordnet_tree()
    names = dict(zip(tree.node_ids, tree.names, strict=True))
    try:
        names.update(json.loads(NAMES_JSON.read_text()))
    except (OSError, json.JSONDecodeError):
        pass  # the names are cosmetic; the tree's own names still apply
    return names


def default_image_dir() -> Path | None:
    """Directory of the shared ImageNet validation sample images, or None if there is none.

    Looks at the ``HSC_IMAGE_DIR`` environment variable first (:func:`hsc_core.config.image_dir`), then at
    ``<repo>/../shared/imagenet-val-sample/images``.
    """
    chosen = config.image_dir()
    if chosen is not None:
        return chosen if chosen.is_dir() else None
    candidate = _REPO_ROOT.parent / "shared" / "imagenet-val-sample" / "images"
    return candidate if candidate.is_dir() else None
