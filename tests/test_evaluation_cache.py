"""The shipped models' rows on disk (``dashboard.evaluation_cache``): the same rows as evaluating,
read back without evaluating, and a changed file, edited entry or other setting evaluates anew."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from dashboard import evaluation_cache, evaluations

ROOT = Path(__file__).resolve().parent.parent
MODEL = "efficientnet_lite0"
pytestmark = pytest.mark.skipif(not (ROOT / "cached_logits" / f"{MODEL}.npz").exists(), reason="no shipped logits")


@pytest.fixture
def model_file(tmp_path, monkeypatch):
    """A copy of the shipped model in its own cached-logits folder, a fresh cache folder, and a
    count of the evaluations done."""
    folder = tmp_path / "logits"
    folder.mkdir()
    for suffix in (".npz", ".json"):
        shutil.copy(ROOT / "cached_logits" / f"{MODEL}{suffix}", folder / f"{MODEL}{suffix}")
    monkeypatch.setenv("HSC_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    real = evaluations.model_context

    def counted(*args, **kw):
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(evaluations, "model_context", counted)
    return folder / f"{MODEL}.npz", calls


def _same(a, b) -> bool:
    # NaN gains (a model without errors) compare equal here, as JSON writes them.
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


def test_rows_come_back_from_disk_equal_and_without_evaluating(model_file):
    path, calls = model_file
    fresh = evaluations.model_context(MODEL, str(path), "all", True).view.results()
    calls.clear()
    first = evaluation_cache.result_rows(MODEL, str(path), "all", True)
    assert _same(first, fresh) and len(calls) == 1
    again = evaluation_cache.result_rows(MODEL, str(path), "all", True)
    assert _same(again, fresh) and len(calls) == 1  # read from disk
    top1 = next(r["value"] for r in again if r["metric"] == "top1")
    assert math.isclose(top1, fresh[0]["value"], rel_tol=0, abs_tol=0)
    assert len(list(evaluation_cache.cache_folder().glob("*.json"))) == 1


def test_another_setting_or_a_changed_file_evaluates_anew(model_file):
    path, calls = model_file
    evaluation_cache.result_rows(MODEL, str(path), "all", True)
    evaluation_cache.result_rows(MODEL, str(path), "all", False)
    assert len(calls) == 2  # TS off is another entry
    manifest = path.with_suffix(".json")
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "note": "edited"}))  # the content changed, not the arrays
    evaluation_cache.result_rows(MODEL, str(path), "all", True)
    assert len(calls) == 3


def test_an_edited_entry_is_ignored_and_rewritten(model_file):
    path, calls = model_file
    rows = evaluation_cache.result_rows(MODEL, str(path), "all", True)
    (entry,) = evaluation_cache.cache_folder().glob("*.json")
    stored = json.loads(entry.read_text())
    stored["rows"][0]["value"] = 0.5  # a hand edit: the checksum no longer matches
    entry.write_text(json.dumps(stored))
    again = evaluation_cache.result_rows(MODEL, str(path), "all", True)
    assert _same(again, rows) and len(calls) == 2
    entry.write_text("not json")
    assert _same(evaluation_cache.result_rows(MODEL, str(path), "all", True), rows) and len(calls) == 3
