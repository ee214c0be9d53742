"""Numbers pinned before the ``hsc`` command moved into ``hsc_core/cli/``: the default
``hsc evaluate cached_logits/`` rows of the paper's four rules must stay byte-identical."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

from conftest import REPO

import hsc_core
from hsc_core.core.rules import RULES

PIN = REPO / "tests" / "pins" / "evaluate_default_rows.csv"
PAPER_ROWS = {"", *RULES}  # top-1 and T ("" rule) and the paper's four rules


def _rows(text: str) -> list[dict]:
    return [r for r in csv.DictReader(io.StringIO(text)) if r["rule"] in PAPER_ROWS]


def _no_version(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "version"} for r in rows]


def test_default_evaluate_rows_of_the_papers_rules_are_pinned(tmp_path):
    out = tmp_path / "x.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "hsc_core", "evaluate", "cached_logits/", "--out", str(out),
                           "--no-progress"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    pinned = _rows(PIN.read_text(encoding="utf-8"))
    now = _rows(out.read_text(encoding="utf-8"))
    assert len(pinned) == 105  # 3 models × (2 top-1 + T + 4 rules × 2 losses × 2 settings × 2 metrics)
    # issue 34 added coverage_low/coverage_high (the range of a gain over a common range): empty for the
    # paper's four, whose curves reach coverage 1; every other value as the same text (byte-identical numbers)
    assert all(r.pop("coverage_low") == r.pop("coverage_high") == "" for r in now)
    # issue 31 added calibrator/confidence: the two TS settings are none/temperature with softmax
    assert all((r.pop("calibrator"), r.pop("confidence")) == ("temperature" if r["ts"] == "true" else "none",
                                                              "softmax") for r in now)
    assert _no_version(now) == _no_version(pinned)
    assert {r["version"] for r in now} == {hsc_core.__version__}
