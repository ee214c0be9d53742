"""Numbers pinned before the iNat21-size evaluation path (issue 46): T and every listed rule's
hAURC, both losses, with and without temperature scaling, on the shipped models and on a seeded
20,000-sample × 10,000-species case (``inat21_support``), as measured on main at the commit
recorded in ``pins/inat21_haurc.json``. Each must stay within 1e-12."""

from __future__ import annotations

import json

from conftest import REPO
from inat21_support import SHIPPED, haurc_table, shipped_evaluations, synthetic_20k_evaluation

PINS = json.loads((REPO / "tests" / "pins" / "inat21_haurc.json").read_text(encoding="utf-8"))["models"]


def _assert_pinned(name: str, table: dict) -> None:
    pinned = PINS[name]
    assert set(table) == set(pinned)
    off = {k: (table[k], pinned[k]) for k in pinned if abs(table[k] - pinned[k]) > 1e-12}
    assert not off, f"{name}: {len(off)} numbers moved, e.g. {next(iter(off.items()))}"


def test_shipped_models_keep_every_rules_haurc():
    for name, ev in shipped_evaluations():
        _assert_pinned(name, haurc_table(ev))
    assert len(PINS) == len(SHIPPED) + 1


def test_synthetic_20k_case_keeps_every_rules_haurc():
    _assert_pinned("synthetic_20k", haurc_table(synthetic_20k_evaluation()))
