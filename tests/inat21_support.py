"""The cases whose numbers issue 46 pinned before the iNat21-size evaluation path (shared by
``test_inat21_pins.py`` and the script that wrote ``pins/inat21_haurc.json``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hsc_core.core.metric_rules import ALL_RULES
from hsc_core.core.risk import LOSSES
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.resolve import resolve_hierarchy

REPO = Path(__file__).resolve().parents[1]
SHIPPED = ("efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2")
#: The seeded 20,000-sample case: iNat21's level sizes (10,000 species, single-child chains
#: collapsed, so leaves at depths 3–7: hFβ's mixed-depth path), float16 logits as files store them.
SYNTHETIC_SAMPLES, SYNTHETIC_SEED = 20_000, 46


def shipped_evaluations() -> Iterator[tuple[str, ModelEvaluation]]:
    for name in SHIPPED:
        bundle = load_logits(REPO / "cached_logits" / f"{name}.npz")
        dataset, tree = resolve_hierarchy(bundle, name)
        yield name, ModelEvaluation.from_bundle(bundle, tree, dataset=dataset)


def synthetic_20k_case() -> tuple:
    """(hierarchy, float16 logits (20,000 × 10,000), labels) of the seeded case."""
    h = synthetic_taxonomy(10_000, 7, seed=0)
    logits, labels = synthetic_logits(h, SYNTHETIC_SAMPLES, top1=0.7, seed=SYNTHETIC_SEED, dtype=np.float16)
    return h, logits, labels


def synthetic_20k_evaluation() -> ModelEvaluation:
    h, logits, labels = synthetic_20k_case()
    return ModelEvaluation(h, logits, labels, name="synthetic_20k")


def haurc_table(ev: ModelEvaluation) -> dict:
    """{"T": T, "<ts>/<rule>/<loss>": hAURC} of every listed rule, both losses, both settings."""
    out: dict = {"T": ev.temperature}
    for ts in (False, True):
        es = ev.setting(ts)
        for rule in ALL_RULES:
            for loss in LOSSES:
                out[f"{int(ts)}/{rule}/{loss}"] = es.haurc(rule, loss)
    return out
