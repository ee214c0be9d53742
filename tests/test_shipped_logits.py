"""The shipped cached logits of the three EfficientNet-Lite models on the 1,894-image sample."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hsc_core.datasets.imagenet import imagenet_wnids
from hsc_core.datasets.logits_io import list_cached_logits, load_logits

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "cached_logits"
SAMPLE = REPO.parent / "shared" / "imagenet-val-sample"
MODELS = ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]
ROMAN = "RomanPlaud/hierarchical_decision_rules (224x224)"
VERI = "VeriSilicon/acuity-dataset (227x227)"


def test_all_three_are_listed():
    assert [p.stem for p in list_cached_logits(CACHE)] == MODELS


@pytest.mark.parametrize("name", MODELS)
def test_shipped_file(name):
    b = load_logits(CACHE / f"{name}.npz", require_manifest=True)
    assert b.name == name
    assert b.logits.shape == (1894, 1000)
    assert 0.76 <= b.top1() <= 0.81
    counts = dict(zip(*np.unique(b.sources, return_counts=True), strict=True))
    assert counts == {VERI: 1300, ROMAN: 594}
    m = b.manifest
    assert m["model"] == name and m["n_samples"] == 1894 and m["n_classes"] == 1000
    assert m["top1"] == pytest.approx(b.top1(), abs=1e-12)
    assert m["top1_per_source"] == pytest.approx(b.top1_per_source(), abs=1e-12)
    assert m["dataset"]["n_images"] == 1894 and m["dataset"]["sources"] == {ROMAN: 594, VERI: 1300}
    assert m["pretrained"] is True and m["dtype"] == "float16"
    assert m["preprocessing"]["center_crop"] == {"0": 224, "1": 240, "2": 260}[name[-1]]
    # No absolute paths of the machine that produced the files.
    assert "/work/" not in json.dumps(m) and "/tmp/" not in json.dumps(m)
    # Sample ids are the images' plain file names, unique.
    assert all("/" not in s for s in b.sample_ids.tolist())
    assert len(set(b.sample_ids.tolist())) == 1894


@pytest.mark.skipif(not (SAMPLE / "labels.csv").is_file(), reason="shared image sample absent")
def test_labels_match_the_shared_csv():
    with (SAMPLE / "labels.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    wnids = imagenet_wnids()
    for name in MODELS:
        b = load_logits(CACHE / f"{name}.npz")
        assert b.sample_ids.tolist() == [r["file"] for r in rows]
        assert b.labels.tolist() == [int(r["label"]) for r in rows]
        assert b.sources.tolist() == [r["source"] for r in rows]
        assert [wnids[y] for y in b.labels] == [r["wnid"] for r in rows]


def test_three_files_hold_different_models():
    # The three files are three different models (not copies) of similar accuracy.
    acc = [load_logits(CACHE / f"{n}.npz").top1_per_source()[VERI] for n in MODELS]
    logits = [load_logits(CACHE / f"{n}.npz").logits for n in MODELS]
    assert not np.allclose(logits[0], logits[1]) and not np.allclose(logits[1], logits[2])
    assert max(acc) - min(acc) < 0.05
