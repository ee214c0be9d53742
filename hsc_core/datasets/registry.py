"""Data sets by name: the built-in ones and those a user drops into a ``datasets/`` folder.

A data set is a class hierarchy plus the class names in logit-column order (and, optionally, a folder of
images). Built-ins: ``imagenet1k`` (the shipped WordNet-3.0 tree) and ``cifar100`` (20 superclasses × 5
classes, the standard alphabetical class order apple … worm).

A user data set is a folder ``<datasets dir>/<name>/`` holding

* ``hierarchy.<csv|tsv|txt|json|nwk|newick>`` — any format :func:`~hsc_core.datasets.formats.load_hierarchy`
  reads;
* optionally ``classes.txt`` — the class list, one name per line in logit-column order;
* optionally ``images/`` — sample images for the dashboard;
* optionally ``dataset.json`` — ``{"description": …, "format": …, "first_parent": …,
  "collapse_single_child": …, "header": …}``, passed on to ``load_hierarchy``.

The datasets dir is ``$HSC_DATASETS_DIR``, else ``datasets/`` beside the cached-logits folder
(:func:`hsc_core.config.datasets_dir`, the one default the ``hsc`` command and the dashboard share).
A logits manifest names its data set with the key ``"dataset_id"`` (see :func:`dataset_for_manifest`).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

from .. import config
from ..core.hierarchy import Hierarchy, HierarchyError
from ..core.validation import clip, clip_path, quote
from . import imagenet
from .formats import FORMATS, HIERARCHY_SUFFIXES, load_hierarchy

DATA_DIR = Path(__file__).resolve().parent / "data"
CIFAR100_HIERARCHY = DATA_DIR / "cifar100_hierarchy.csv"
CIFAR100_CLASSES = DATA_DIR / "cifar100_classes.txt"
DATASETS_DIR_ENV = config.DATASETS_DIR
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_OPTIONS = {"description": str, "format": str, "first_parent": bool, "collapse_single_child": bool, "header": bool}
MANIFEST_KEY = "dataset_id"


@dataclass(frozen=True)
class Dataset:
    """A class hierarchy with its classes in logit-column order.

    Attributes
    ----------
    name : the data set id (``"imagenet1k"``, ``"cifar100"``, or a user folder's name).
    hierarchy : the validated tree; its first ``n_leaves`` nodes are the classes.
    class_names : human-readable class names, one per logit column.
    description : one line for people.
    image_dir : folder of sample images, or None. ImageNet-1k's is None here and looked up at
        use time (``find_image_dir``), since ``$HSC_IMAGE_DIR`` may change after the tree is cached.
    """

    name: str
    hierarchy: Hierarchy
    class_names: tuple[str, ...]
    description: str
    image_dir: Path | None

    @property
    def n_classes(self) -> int:
        return self.hierarchy.n_leaves

    def find_image_dir(self) -> Path | None:
        """The folder of this data set's sample images now, or None."""
        if self.image_dir is not None:
            return Path(self.image_dir)
        return imagenet.default_image_dir() if self.name == "imagenet1k" else None


def _imagenet1k() -> Dataset:
    return Dataset(
        "imagenet1k", imagenet.imagenet_hierarchy(), imagenet.imagenet_class_names(),
        "ImageNet-1k (ILSVRC2012), 1,000 classes in the WordNet 3.0 tree", None)


def _cifar100() -> Dataset:
    tree = load_hierarchy(CIFAR100_HIERARCHY, CIFAR100_CLASSES, fmt="levels")
    return Dataset("cifar100", tree, tree.names[: tree.n_leaves],
                   "CIFAR-100, 100 classes in 20 superclasses of 5", None)


_BUILTINS = {"imagenet1k": _imagenet1k, "cifar100": _cifar100}


def builtin_dataset_names() -> tuple[str, ...]:
    """Names of the data sets that ship with the library."""
    return tuple(_BUILTINS)


def default_datasets_dir() -> Path:
    """``$HSC_DATASETS_DIR`` if set, else ``datasets/`` beside the cached-logits folder
    (:func:`hsc_core.config.datasets_dir`)."""
    return config.datasets_dir()


def validate_name(name: str) -> str:
    """A data set name: letters, digits, ``_``, ``-`` and ``.`` only, and not ``.``/``..``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or set(name) == {"."}:
        raise ValueError(f"invalid data set name {quote(name)}: use letters, digits, '_', '-' and '.' only")
    return name


def discover_datasets(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """User data sets in ``folder`` (default :func:`default_datasets_dir`): name → its folder.

    A data set is a sub-folder with a valid name holding a ``hierarchy.*`` file. Folders named like a
    built-in, with an invalid name, or leading outside ``folder`` (a symlink) are skipped with a warning;
    nothing is read here, so one broken data set cannot hide the others.
    """
    root = Path(folder) if folder is not None else default_datasets_dir()
    if not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    base = root.resolve()
    for sub in sorted(root.iterdir()):
        if not sub.is_dir() or sub.name.startswith("."):
            continue
        if not any((sub / f"hierarchy{s}").is_file() for s in HIERARCHY_SUFFIXES):
            continue
        try:
            validate_name(sub.name)
        except ValueError as exc:
            warnings.warn(f"{sub}: skipped, {exc}", stacklevel=2)
            continue
        if sub.name in _BUILTINS:
            warnings.warn(f"{sub}: skipped, {sub.name!r} is a built-in data set; rename the folder", stacklevel=2)
            continue
        if not sub.resolve().is_relative_to(base):
            warnings.warn(f"{sub}: skipped, it leads outside {root}", stacklevel=2)
            continue
        found[sub.name] = sub
    return found


def load_dataset(name: str, user_dir: str | os.PathLike | None = None) -> Dataset:
    """A built-in data set or a user one from ``user_dir`` (default :func:`default_datasets_dir`).

    Results are cached: built-ins per name, user data sets per folder and file modification times,
    so an edited file is read again.
    """
    validate_name(name)
    if name in _BUILTINS:
        return _builtin(name)
    root = Path(user_dir) if user_dir is not None else default_datasets_dir()
    folder = root / name
    if not folder.is_dir():
        known = sorted(_BUILTINS) + sorted(discover_datasets(root))
        raise ValueError(f"unknown data set {quote(name)}; known: {clip(', '.join(known), 240)} (user data sets live "
                         f"in {clip_path(root)})")
    if not folder.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"data set folder {clip_path(folder)} leads outside {clip_path(root)}")
    files = _dataset_files(folder)
    stamp = tuple(p.stat().st_mtime_ns if p is not None else 0 for p in files)
    return _user_dataset(str(folder.resolve()), stamp)


@cache
def _builtin(name: str) -> Dataset:
    return _BUILTINS[name]()


def _dataset_files(folder: Path) -> tuple[Path, Path | None, Path | None]:
    hierarchies = [folder / f"hierarchy{s}" for s in HIERARCHY_SUFFIXES if (folder / f"hierarchy{s}").is_file()]
    if not hierarchies:
        suffixes = ",".join(s[1:] for s in HIERARCHY_SUFFIXES)
        raise HierarchyError(f"{clip_path(folder)}: no hierarchy file (hierarchy.{{{suffixes}}})")
    if len(hierarchies) > 1:
        raise HierarchyError(f"{clip_path(folder)}: several hierarchy files "
                             f"({clip(', '.join(p.name for p in hierarchies), 200)}); keep one")
    base = folder.resolve()
    classes, meta = (p if p.is_file() else None for p in (folder / "classes.txt", folder / "dataset.json"))
    files = (hierarchies[0], classes, meta)
    for p in files:
        if p is not None and not p.resolve().is_relative_to(base):
            raise HierarchyError(f"{clip_path(p)} leads outside its data set folder")
    return files


@lru_cache(maxsize=32)
def _user_dataset(folder: str, stamp: tuple[int, ...]) -> Dataset:
    path = Path(folder)
    hierarchy_file, classes_file, options_file = _dataset_files(path)
    options = _read_options(options_file) if options_file else {}
    tree = load_hierarchy(
        hierarchy_file, classes_file, fmt=options.get("format"),
        first_parent=options.get("first_parent", False),
        collapse_single_child=options.get("collapse_single_child", True), header=options.get("header"))
    images = path / "images"
    image_dir = images if images.is_dir() and images.resolve().is_relative_to(path.resolve()) else None
    description = options.get("description") or f"{tree.n_leaves} classes from {hierarchy_file.name}"
    return Dataset(path.name, tree, tree.names[: tree.n_leaves], description, image_dir)


def _read_options(path: Path) -> dict:
    try:
        options = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HierarchyError(f"{clip_path(path)}: not readable JSON ({clip(exc)})") from None
    if not isinstance(options, dict):
        raise HierarchyError(f"{clip_path(path)}: expected a JSON object")
    for key, value in options.items():
        if key not in _OPTIONS:
            raise HierarchyError(f"{clip_path(path)}: unknown key {quote(key)}; allowed: {', '.join(_OPTIONS)}")
        if not isinstance(value, _OPTIONS[key]):
            raise HierarchyError(f"{clip_path(path)}: {key!r} must be a {_OPTIONS[key].__name__}, "
                                 f"got {quote(value)}")
    if "format" in options and options["format"] not in FORMATS:
        raise HierarchyError(f"{clip_path(path)}: format {quote(options['format'])} is not one of "
                             f"{', '.join(FORMATS)}")
    return options


def dataset_for_manifest(manifest: dict, n_classes: int) -> str | None:
    """The data set a logits file belongs to.

    The manifest key ``"dataset_id"`` names it; without that key a 1000-class file is taken to be
    ImageNet-1k, and anything else gives None: the caller must ask the user which data set it is.
    """
    if isinstance(manifest, dict) and MANIFEST_KEY in manifest:
        value = manifest[MANIFEST_KEY]
        if not isinstance(value, str):
            raise ValueError(f"manifest {MANIFEST_KEY!r} must be a string, got {quote(value)}")
        return validate_name(value)
    return "imagenet1k" if n_classes == imagenet.N_CLASSES else None
