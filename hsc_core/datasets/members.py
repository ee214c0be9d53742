"""An ensemble variant's members, found through its manifest (issue 31's member scores).

A variant file such as ``cached_logits/variants/efficientnet_lite012__ensemble.npz`` stores the
ensemble's aggregate; its manifest names the members (``member_files[*].file``, else
``variant.ensemble``). Each member is the logits file ``<name>.npz`` beside the variant or, as in
the shipped layout (members in ``cached_logits/``, variants in ``cached_logits/variants/``), in the
folder above it. A member must hold the same samples in the same order (sample ids) with the same
labels and class count; anything else (a member that is a symbolic link leading out of its folder
included) is one ``MembersError`` line naming the member and why.

Only the ensemble keeps its members: the MC-dropout and TTA variants' manifests record how many
passes or views there were, but their files keep the aggregate only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .logits_io import load_logits


class MembersError(ValueError):
    """An ensemble's members cannot be used (none named, a file missing or not matching the variant)."""


def member_names(manifest: Mapping) -> tuple[str, ...]:
    """The members a manifest names (``member_files[*].file``, else ``variant.ensemble``), () if none."""
    files = manifest.get("member_files")
    if isinstance(files, list) and files:
        return tuple(str(f["file"]) if isinstance(f, Mapping) else str(f) for f in files)
    ensemble = (manifest.get("variant") or {}).get("ensemble") if isinstance(manifest.get("variant"), Mapping) else None
    return tuple(str(m) for m in ensemble) if isinstance(ensemble, list) else ()


def member_path(variant_file: str | Path, name: str) -> Path:
    """Where member ``name`` lives: ``<name>.npz`` beside the variant, else in the folder above it."""
    variant = Path(variant_file)
    stem = name if name.endswith(".npz") else f"{name}.npz"
    if Path(stem).name != stem:
        raise MembersError(f"member {name!r} of {variant.name} must be a file name, not a path")
    for folder in (variant.parent, variant.parent.parent):
        if (folder / stem).is_file():
            if not (folder / stem).resolve().is_relative_to(folder.resolve()):  # as data-set folders refuse
                raise MembersError(f"member {stem} of {variant.name} is a link that leads outside its folder "
                                   f"({folder})")
            return folder / stem
    raise MembersError(f"member {stem} of {variant.name} is neither beside it ({variant.parent}) nor in the "
                       "folder above")


def load_members(variant_file: str | Path, manifest: Mapping, sample_ids: np.ndarray | None,
                 labels: np.ndarray, n_classes: int) -> dict[str, np.ndarray]:
    """Each named member's logits (n, C), checked against the variant's ``sample_ids`` (n,),
    ``labels`` (n,) and class count C.

    Raises
    ------
    MembersError : the manifest names no members, or a member is missing or does not match.
    """
    names = member_names(manifest)
    variant = Path(variant_file)
    if not names:
        raise MembersError(f"{variant.name} has no ensemble members (its manifest names none; only an ensemble "
                           "variant's manifest lists member_files)")
    out = {}
    for name in names:
        path = member_path(variant, name)
        bundle = load_logits(path)
        if bundle.n_samples != labels.size or (sample_ids is not None and not np.array_equal(bundle.sample_ids,
                                                                                               sample_ids)):
            raise MembersError(f"member {path.name} of {variant.name} does not hold the same samples in the same "
                               "order (sample ids)")
        if bundle.n_classes != n_classes:
            raise MembersError(f"member {path.name} of {variant.name} has {bundle.n_classes} classes, not {n_classes}")
        if not np.array_equal(bundle.labels, labels):
            raise MembersError(f"member {path.name} of {variant.name} has other labels for the same samples")
        out[name] = bundle.logits
    return out
