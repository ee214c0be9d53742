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
    stored["value"][0]["value"] = 0.5  # a hand edit: the checksum no longer matches
    entry.write_text(json.dumps(stored))
    again = evaluation_cache.result_rows(MODEL, str(path), "all", True)
    assert _same(again, rows) and len(calls) == 2
    entry.write_text("not json")
    assert _same(evaluation_cache.result_rows(MODEL, str(path), "all", True), rows) and len(calls) == 3


def test_the_headline_gain_is_the_bootstrap_interval_read_back_from_disk(model_file):
    """The Overview's headline reads its interval from the kept rows: the paired bootstrap's limits, the
    table's point estimate (the exact curves' gain, equal to the bootstrap's own to rounding), and a
    second read bootstraps nothing."""
    path, calls = model_file
    es = evaluations.model_context(MODEL, str(path), "all", True)
    boot = es.view.bootstrap("01").gain["climbing"]
    calls.clear()
    first = evaluation_cache.gain_interval(MODEL, str(path), "all", True, "climbing")
    assert (first.low, first.high) == (boot.low, boot.high) and first.estimate == es.view.gain("climbing")
    assert math.isclose(first.estimate, boot.estimate, rel_tol=1e-12) and boot.low < first.estimate < boot.high
    assert len(calls) == 1
    again = evaluation_cache.gain_interval(MODEL, str(path), "all", True, "climbing")
    assert again == first and len(calls) == 1


def test_sensitivity_rows_come_back_from_disk_and_other_trees_compute_anew(model_file, monkeypatch):
    path, _ = model_file
    es = evaluations.model_context(MODEL, str(path), "all", False)
    computed = []
    real = evaluations.hierarchy_sensitivity

    def counted(context, trees):
        computed.append(trees)
        return real(context, trees)

    monkeypatch.setattr(evaluations, "hierarchy_sensitivity", counted)
    first = evaluation_cache.sensitivity_rows(es, ("wordnet", "random"))
    assert {r["dataset"].rsplit(":", 1)[-1] for r in first} == {"wordnet", "random"}
    assert any(r["ci_low"] is not None for r in first) and len(computed) == 1
    assert _same(evaluation_cache.sensitivity_rows(es, ("wordnet", "random")), first) and len(computed) == 1
    evaluation_cache.sensitivity_rows(es, ("wordnet",))
    assert len(computed) == 2  # another set of trees is another entry


def test_a_shipped_images_logits_are_kept_bit_for_bit_and_an_uploads_never(tmp_path, monkeypatch):
    """Try an image: a shipped image's logits come back from disk (float32, the same bits) without
    running the network; another image, or an unregistered model, runs it; an upload writes nothing."""
    import sys
    import types

    import numpy as np

    from dashboard import perturb

    monkeypatch.setenv("HSC_CACHE_DIR", str(tmp_path / "cache"))
    runs = []
    fake = types.ModuleType("hsc_core.pipeline.inference")

    def classify_image(rgb, model):
        runs.append((rgb, model))
        return np.random.default_rng(len(runs)).normal(size=1000).astype(np.float32) / 3

    fake.classify_image = classify_image
    monkeypatch.setitem(sys.modules, "hsc_core.pipeline.inference", fake)
    first = perturb.image_logits(b"image-a", "rgb-a", MODEL, shipped=True)
    again = perturb.image_logits(b"image-a", "rgb-a", MODEL, shipped=True)
    assert len(runs) == 1 and again.dtype == np.float32 and np.array_equal(first.view(np.uint32), again.view(np.uint32))
    assert len(list(evaluation_cache.cache_folder().glob("*.json"))) == 1
    perturb.image_logits(b"image-b", "rgb-b", MODEL, shipped=True)
    assert len(runs) == 2  # another image is another entry
    perturb.image_logits(b"image-a", "rgb-a", "efficientnet_lite1", shipped=True)
    assert len(runs) == 3  # so is another model
    before = sorted(evaluation_cache.cache_folder().glob("*.json"))
    upload = perturb.image_logits(b"an upload", "rgb-u", MODEL, shipped=False)
    perturb.image_logits(b"an upload", "rgb-u", MODEL, shipped=False)
    assert len(runs) == 5 and upload.shape == (1000,)  # computed each time (the session's cache keeps it)
    perturb.image_logits(b"image-a", "rgb-a", "resnet50", shipped=True)  # a timm name: nothing pins it
    assert len(runs) == 6 and sorted(evaluation_cache.cache_folder().glob("*.json")) == before


def test_kept_rows_of_both_losses_and_settings_are_the_evaluations_rows(model_file):
    """The atlas's "your models" read both losses of both settings from disk: the same rows, in the same
    order, as the model's ``ModelEvaluation.results()`` that it computed before."""
    from hsc_core.core.risk import LOSSES

    path, calls = model_file
    fresh = evaluations.evaluation(MODEL, str(path), "all").results()
    assert {r["loss"] for r in fresh} == {"", *LOSSES}  # top-1 and T have no loss
    def kept():
        return [r for ts in (False, True) for r in evaluation_cache.result_rows(MODEL, str(path), "all", ts,
                                                                                 losses=LOSSES)]

    assert _same(kept(), fresh)
    calls.clear()
    again = kept()
    assert _same(again, fresh) and not calls
    assert len(list(evaluation_cache.cache_folder().glob("*.json"))) == 2  # one per setting; 0/1 alone is another


def test_a_compared_models_rows_and_curve_come_back_from_disk_as_computed(model_file):
    """Compare models: the table's rows and the chart's drawn curve (the curve set's decimated copy)
    and hAURC, the same from disk as computed, without evaluating again; another rule is another entry."""
    import numpy as np

    path, calls = model_file
    es = evaluations.model_context(MODEL, str(path), "all", True)
    cs = evaluations.curve_set(es, "01", None)
    rules = ("selective", "climbing", "max_coverage")
    calls.clear()
    first = evaluation_cache.compared_model(MODEL, str(path), "all", True, "01", None, "climbing", rules)
    assert _same(first.rows, es.view.results(("01",), None, rules=rules)) and first.haurc == cs.curves["climbing"].haurc
    coverage, risk = cs.display["climbing"]
    assert np.array_equal(first.coverage, coverage) and np.array_equal(first.risk, risk)
    assert len(calls) == 1
    again = evaluation_cache.compared_model(MODEL, str(path), "all", True, "01", None, "climbing", rules)
    assert len(calls) == 1 and _same(again.rows, first.rows) and again.haurc == first.haurc
    assert np.array_equal(again.coverage, first.coverage) and np.array_equal(again.risk, first.risk)
    evaluation_cache.compared_model(MODEL, str(path), "all", True, "01", None, "max_coverage", rules)
    assert len(calls) == 2
