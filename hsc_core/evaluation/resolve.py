"""Which files, data set and hierarchy an evaluation uses, resolved once for every front end.

``expand_inputs`` turns the command line's files, folders and globs into ``.npz`` paths;
``resolve_hierarchy`` gives a logits file its data set name and tree: the user's ``--hierarchy``
file when given, else the data set its manifest names (``dataset_id``, built-in or a folder under
``config.datasets_dir()``), else ImageNet-1k for 1,000 classes.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from ..core.hierarchy import Hierarchy
from ..core.validation import PATH_CHARS, clip, clip_path, quote
from ..datasets.formats import load_hierarchy
from ..datasets.logits_io import LogitsBundle, list_cached_logits
from ..datasets.registry import dataset_for_manifest, load_dataset


def expand_inputs(specs: Iterable[str]) -> list[Path]:
    """Files, folders (every ``*.npz`` directly inside) and glob patterns → unique .npz paths, in
    the order given (folders and globs sorted). A missing file, an empty folder or a pattern that
    matches nothing raises ValueError before any work starts."""
    out: list[Path] = []
    seen: set[Path] = set()
    for spec in specs:
        path = Path(os.path.expanduser(spec))
        if path.is_dir():
            found = list_cached_logits(path)
            if not found:
                raise ValueError(f"folder {clip_path(spec)} holds no .npz files")
        elif path.exists():
            found = [path]
        elif any(c in spec for c in "*?["):
            found = sorted(Path(p) for p in glob.glob(os.path.expanduser(spec), recursive=True)
                           if p.endswith(".npz") and Path(p).is_file())
            if not found:
                raise ValueError(f"pattern {quote(spec, PATH_CHARS)} matches no .npz files")
        else:
            raise ValueError(f"logits file {clip_path(spec)} not found")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


def load_user_hierarchy(path: str, classes: str | None = None, first_parent: bool = False,
                        header: bool | None = None) -> Hierarchy:
    """``--hierarchy FILE`` in any format ``datasets.formats`` reads, leaves ordered by ``--classes``;
    ``--header``/``--no-header`` (None: detected, a ``HierarchyNote`` warning when a possible class
    row is taken as column names; the ``hsc`` command prints it as one line)."""
    return load_hierarchy(path, classes, first_parent=first_parent, header=header)


def builtin_hierarchy(bundle: LogitsBundle, where: str) -> tuple[str, Hierarchy]:
    """(data set name, its tree) for a file evaluated without ``--hierarchy``: the data set its
    manifest's ``dataset_id`` names, else ImageNet-1k for 1000 classes."""
    name = dataset_for_manifest(bundle.manifest, bundle.n_classes)
    if name is None:
        raise ValueError(f"{clip_path(where)}: no built-in hierarchy for {bundle.n_classes}-class logits (the "
                         "manifest names "
                         "no dataset_id); pass --hierarchy FILE")
    try:
        return name, load_dataset(name).hierarchy
    except ValueError as exc:
        raise ValueError(f"{clip_path(where)}: {clip(exc, 240)}; or pass --hierarchy FILE") from exc


def dataset_name(bundle: LogitsBundle) -> str:
    """The data set a file names when the user gave the tree: what the manifest says, else "custom"."""
    try:
        return dataset_for_manifest(bundle.manifest, bundle.n_classes) or "custom"
    except ValueError:
        return "custom"


def resolve_hierarchy(bundle: LogitsBundle, where: str, tree: Hierarchy | None = None) -> tuple[str, Hierarchy]:
    """(data set name, tree) for one file: ``tree`` (the user's ``--hierarchy``) when given, else
    the built-in one; the class count is checked against the tree's leaves (one-line ValueError)."""
    if tree is None:
        name, hierarchy = builtin_hierarchy(bundle, where)
    else:
        name, hierarchy = dataset_name(bundle), tree
    if bundle.n_classes != hierarchy.n_leaves:
        raise ValueError(f"{clip_path(where)}: logits have {bundle.n_classes} classes but the hierarchy has "
                         f"{hierarchy.n_leaves} leaves")
    return name, hierarchy
