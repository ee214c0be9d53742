"""Named subsets of a logits file's samples: the one resolver of the dashboard's "Samples" picker,
``hsc report --subset`` and ``hsc evaluate --subset``, so every front end accepts the same names.

A file's subsets come from its ``sources`` array (the data source of each sample): ``"all"``
always, then one name per source tag, the short name of ``KNOWN_SOURCES`` for a known tag
(``"typical"``, ``"easier"`` for the shipped ImageNet sample) and the tag itself otherwise. A
known tag may also be given in full (``--subset "RomanPlaud/…"`` as before).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.validation import clip, quote

__all__ = ["ALL", "KNOWN_SOURCES", "Subset", "canonical_name", "check_subset", "file_subsets", "subset_mask"]

ALL = "all"
#: short name → (source tag in a file's ``sources``, label): the two sources of the shipped ImageNet sample
KNOWN_SOURCES: dict[str, tuple[str, str]] = {
    "typical": ("RomanPlaud/hierarchical_decision_rules (224x224)", "Typical"),
    "easier": ("VeriSilicon/acuity-dataset (227x227)", "Easier"),
}


@dataclass(frozen=True)
class Subset:
    """One subset a file offers: its name, the source tag it selects ("" for all), a label and its size."""

    name: str
    tag: str
    label: str
    n: int


def file_subsets(sources: np.ndarray | None, n_samples: int) -> dict[str, Subset]:
    """The subsets offered for a file, by name: ``"all"`` first, then one per source tag (sorted).

    Parameters
    ----------
    sources : (n_samples,) source tag of each sample, or None (a file without tags offers "all" only).
    n_samples : the file's number of samples.
    """
    out = {ALL: Subset(ALL, "", "All samples", int(n_samples))}
    if sources is None:
        return out
    known = {tag: (name, label) for name, (tag, label) in KNOWN_SOURCES.items()}
    tags, counts = np.unique(np.asarray(sources).astype(str), return_counts=True)
    for tag, count in zip(tags.tolist(), counts.tolist(), strict=True):
        name, label = known.get(tag, (tag, tag))
        out[name] = Subset(name, tag, label, int(count))
    return out


def canonical_name(name: str) -> str:
    """The name results carry for ``name``: "all" for "", the short name for a known source's full tag."""
    if name in ("", ALL):
        return ALL
    return next((short for short, (tag, _) in KNOWN_SOURCES.items() if tag == name), name)


def check_subset(sources: np.ndarray | None, n_samples: int, name: str, *, where: str = "") -> Subset:
    """The subset called ``name`` (its short name or, for a known source, its full tag; "" is all).

    Raises
    ------
    ValueError
        One line naming the choices when the file offers no such subset (``where``: the file, for the message).
    """
    offered = file_subsets(sources, n_samples)
    key = ALL if name in ("", ALL) else name
    if key in offered:
        return offered[key]
    by_tag = {s.tag: s for s in offered.values() if s.tag}
    if key in by_tag:
        return by_tag[key]
    prefix = f"{clip(where)}: " if where else ""
    choices = ", ".join(quote(n, 60) for n in offered)
    raise ValueError(f"{prefix}unknown subset {quote(name, 60)}; choose one of {choices}")


def subset_mask(sources: np.ndarray | None, n_samples: int, name: str, *, where: str = "") -> np.ndarray | None:
    """(n_samples,) bool mask of the subset ``name``; None for "all" (every sample). ValueError as ``check_subset``."""
    subset = check_subset(sources, n_samples, name, where=where)
    if subset.name == ALL:
        return None
    assert sources is not None  # a named subset exists only where there are tags
    return np.asarray(sources).astype(str) == subset.tag
