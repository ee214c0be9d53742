"""Hierarchy sensitivity: the same model's hAURC and gain under several class trees, with bootstrap
intervals, so a user sees how much the choice of tree moves the numbers.

The trees must share the leaves (the logits' columns); everything else — the calibration split, T,
the rules — is the one protocol of ``ModelEvaluation``. A tree's rows carry its name in the tidy
schema's ``dataset`` column (``<dataset>:<tree>``) and its own ``hierarchy_hash``.

>>> from hsc_core.core.hierarchy import Hierarchy
>>> from hsc_core.core.synthetic import synthetic_logits
>>> deep = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
>>> logits, labels = synthetic_logits(deep, 300, seed=0)
>>> flat = Hierarchy.from_parents([4, 4, 4, 4, -1], 4)
>>> rows = hierarchy_sensitivity(logits, labels, {"flat": flat, "deep": deep}, n_resamples=50)
>>> sorted({r["dataset"] for r in rows})
['data:deep', 'data:flat']
>>> [round(r["value"], 6) for r in rows if r["dataset"] == "data:flat" and r["metric"] == "gain_percent"
...  and r["rule"] == "climbing"]
[0.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.hierarchy import Hierarchy
from ..core.risk import Loss
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES
from ..core.validation import quote
from .model import ModelEvaluation
from .results import ResultRow

__all__ = ["hierarchy_sensitivity", "sensitivity_table"]


def hierarchy_sensitivity(logits: np.ndarray, labels: np.ndarray, trees: Mapping[str, Hierarchy], *,
                          name: str = "model", dataset: str = "data", ts: bool = False,
                          losses: Sequence[Loss] = ("01",), n_resamples: int = N_RESAMPLES,
                          seed: int = BOOTSTRAP_SEED, **evaluation: Any) -> list[ResultRow]:
    """Tidy rows (``results.RESULT_COLUMNS``) of every rule's hAURC and gain, with 95 % bootstrap
    intervals, for each tree in ``trees``.

    Parameters
    ----------
    logits : (N, C) array; labels : (N,) leaf indices
        One model's outputs; column c is leaf c of every tree.
    trees : name → Hierarchy, each with the same C leaves (checked: same leaf ids).
    name, dataset : str
        The rows' model name, and the data set part of their ``dataset`` label (``<dataset>:<tree>``).
    ts : bool
        With temperature scaling (fitted on the calibration split, as everywhere).
    losses, n_resamples, seed : as ``EvaluationSet.results``.
    **evaluation
        Further ``ModelEvaluation`` options (sample_ids, sources, subset, subset_name, protocol …).
    """
    if not trees:
        raise ValueError("no trees to compare")
    first = next(iter(trees.values()))
    rows: list[ResultRow] = []
    for tree_name, tree in trees.items():
        if tree.node_ids[: tree.n_leaves] != first.node_ids[: first.n_leaves]:
            raise ValueError(f"tree {quote(tree_name)} has other leaves than {quote(next(iter(trees)))}; "
                             "the trees must share the logits' classes, in order")
        ev = ModelEvaluation(tree, logits, labels, name=name, dataset=f"{dataset}:{tree_name}", **evaluation)
        rows += ev.setting(ts).results(losses, intervals=True, n_resamples=n_resamples, seed=seed)
    return rows


def sensitivity_table(rows: Sequence[ResultRow], *, loss: str = "01") -> list[dict[str, Any]]:
    """One dict per (tree, rule): tree, rule, hAURC×1000 with its interval, gain % with its interval.

    The long form a sensitivity plot or a CSV wants; ``rows`` from ``hierarchy_sensitivity``."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        if r["metric"] not in ("haurc", "gain_percent") or r["loss"] != loss:
            continue
        tree = r["dataset"].rsplit(":", 1)[-1]
        d = out.setdefault((tree, r["rule"]), {"model": r["model"], "tree": tree, "rule": r["rule"],
                                               "ts": r["ts"], "n_eval": r["n_eval"]})
        scale, key = (1000.0, "haurc_x1000") if r["metric"] == "haurc" else (1.0, "gain_percent")
        d[key] = r["value"] * scale
        d[f"{key}_low"] = None if r["ci_low"] is None else r["ci_low"] * scale
        d[f"{key}_high"] = None if r["ci_high"] is None else r["ci_high"] * scale
    return list(out.values())
