"""The ensemble of cached models: the mean of their softmax probabilities, stored as its log.

Torch-free: an ensemble is computed from cached-logits files (``hsc cache-logits --ensemble
a.npz,b.npz,c.npz --out e.npz``), so it costs no inference. Storing log p̄ keeps the file a plain
logits file: softmax(log p̄) = p̄ exactly, and every evaluation reads it like any other model
(Lakshminarayanan et al., "Simple and Scalable Predictive Uncertainty Estimation using Deep
Ensembles", NeurIPS 2017, average the members' probabilities the same way).

>>> import numpy as np
>>> a = np.log(np.array([[0.5, 0.5]])); b = np.log(np.array([[0.9, 0.1]]))
>>> np.exp(ensemble_logits([a, b])).astype(float).round(3).tolist()
[[0.7, 0.3]]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_softmax, logsumexp

from ...core.validation import clip_path, quote
from ...datasets.logits_io import LogitsBundle, LogitsFileError, load_logits, save_logits
from .errors import CacheRunError

__all__ = ["EnsembleError", "check_members", "ensemble_bundles", "ensemble_logits", "write_ensemble"]


class EnsembleError(CacheRunError):
    """The members cannot be averaged: other class sets, other images or labels, fewer than two."""


def ensemble_logits(member_logits: Sequence[np.ndarray]) -> np.ndarray:
    """float32 (N, C) log of the mean softmax probability of K members' (N, C) logits."""
    if len(member_logits) < 2:
        raise EnsembleError(f"an ensemble needs at least two members, got {len(member_logits)}")
    stacked = np.stack([log_softmax(np.asarray(z, dtype=np.float64), axis=1) for z in member_logits])
    return (logsumexp(stacked, axis=0) - np.log(len(member_logits))).astype(np.float32)


def _member_name(bundle: LogitsBundle) -> str:
    return str(bundle.manifest.get("model") or bundle.name)


def check_members(bundles: Sequence[LogitsBundle]) -> None:
    """Raise EnsembleError (one line) unless the bundles share classes, data set, images and labels."""
    if len(bundles) < 2:
        raise EnsembleError(f"an ensemble needs at least two members, got {len(bundles)}")
    first = bundles[0]
    for b in bundles[1:]:
        if b.n_classes != first.n_classes or b.manifest.get("dataset_id") != first.manifest.get("dataset_id"):
            raise EnsembleError(
                f"members have different class sets: {quote(first.name)} has {first.n_classes} classes "
                f"(data set {quote(first.manifest.get('dataset_id'))}), {quote(b.name)} has {b.n_classes} "
                f"(data set {quote(b.manifest.get('dataset_id'))})")
        if b.sample_ids.tolist() != first.sample_ids.tolist():
            raise EnsembleError(f"members cover different images: {quote(first.name)} and {quote(b.name)}")
        if not np.array_equal(b.labels, first.labels):
            raise EnsembleError(f"members disagree on the labels: {quote(first.name)} and {quote(b.name)}")


def ensemble_bundles(bundles: Sequence[LogitsBundle]) -> tuple[np.ndarray, dict[str, Any]]:
    """(float32 (N, C) ensemble logits, its manifest's descriptive part) of checked members."""
    check_members(bundles)
    first = bundles[0]
    names = [_member_name(b) for b in bundles]
    manifest: dict[str, Any] = {
        "model": "ensemble(" + ",".join(names) + ")",
        "variant_of": names,
        "variant": {"tag": "ensemble", "ensemble": names, "members": len(names),
                    "aggregate": "log of the mean softmax probability over the members",
                    "description": f"ensemble of {', '.join(names)}: mean of their softmax probabilities"},
        "member_files": [{"file": b.name, "top1": b.manifest.get("top1"),
                          "preprocessing": b.manifest.get("preprocessing")} for b in bundles],
        "dataset": first.manifest.get("dataset"),
        "dataset_id": first.manifest.get("dataset_id"),
    }
    return ensemble_logits([b.logits for b in bundles]), manifest


def write_ensemble(members: Sequence[str | os.PathLike], out: str | os.PathLike) -> LogitsBundle:
    """Average the cached-logits files ``members`` into ``out`` (.npz, float16, with its manifest);
    return what was written. Raises EnsembleError / CacheRunError with a one-line message."""
    bundles = []
    for m in members:
        try:
            bundles.append(load_logits(m, require_manifest=True))
        except LogitsFileError as exc:
            raise CacheRunError(f"ensemble member {clip_path(m)}: {exc}") from None
    logits, manifest = ensemble_bundles(bundles)
    first = bundles[0]
    save_logits(out, logits, first.labels, first.sample_ids, first.sources, manifest)
    return load_logits(Path(out), require_manifest=True)
