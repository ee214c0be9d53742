"""Live single-image inference and image decoding."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hsc_core import inference
from hsc_core.inference import ImageReadError, classify_image, read_image
from hsc_core.logits_io import load_logits

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "imagenet-val-sample"
SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"


def _jpeg_bytes(img: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", **kw)
    return buf.getvalue()


@pytest.mark.skipif(not (SAMPLE / "labels.csv").is_file(), reason="shared image sample absent")
@pytest.mark.parametrize("as_type", ["bytes", "path", "pil"])
def test_classify_shared_image_matches_shipped_logits(as_type):
    with (SAMPLE / "labels.csv").open() as fh:
        row = next(csv.DictReader(fh))
    path = SAMPLE / "images" / row["file"]
    image = {"bytes": path.read_bytes(), "path": path, "pil": Image.open(path)}[as_type]
    logits = classify_image(image, "efficientnet_lite0")
    assert logits.shape == (1000,) and logits.dtype == np.float32
    shipped = load_logits(SHIPPED)
    ref = shipped.logits[shipped.sample_ids.tolist().index(row["file"])]
    assert logits.argmax() == ref.argmax()
    np.testing.assert_allclose(logits, ref, atol=0.05, rtol=0.01)  # float16 storage


def test_model_is_cached_and_repeat_calls_are_fast():
    img = Image.new("RGB", (300, 200), (10, 120, 200))
    classify_image(img)  # loads (or reuses) the model
    hits = inference._cached_model.cache_info().hits
    t0 = time.perf_counter()
    a = classify_image(img)
    dt = time.perf_counter() - t0
    assert inference._cached_model.cache_info().hits == hits + 1
    assert dt < 5.0
    np.testing.assert_array_equal(a, classify_image(img))  # deterministic


def test_corrupt_bytes_raise_image_read_error():
    with pytest.raises(ImageReadError, match="cannot read image"):
        classify_image(b"definitely not an image")
    assert issubclass(ImageReadError, ValueError)


def test_truncated_jpeg_raises():
    data = _jpeg_bytes(Image.new("RGB", (256, 256), (200, 30, 30)))
    with pytest.raises(ImageReadError):
        read_image(data[: len(data) // 2])


def test_empty_missing_and_wrong_type():
    with pytest.raises(ImageReadError, match="empty"):
        read_image(b"")
    with pytest.raises(ImageReadError, match="not found"):
        read_image("/nonexistent/image.jpg")
    with pytest.raises(ImageReadError, match="expected bytes"):
        read_image(12345)  # type: ignore[arg-type]


def test_rgba_composited_on_white():
    img = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    out = read_image(img)
    assert out.mode == "RGB" and out.getpixel((0, 0)) == (255, 255, 255)
    buf = io.BytesIO()
    Image.new("RGBA", (8, 8), (255, 0, 0, 255)).save(buf, format="PNG")
    assert read_image(buf.getvalue()).getpixel((3, 3)) == (255, 0, 0)


@pytest.mark.parametrize("mode", ["L", "P", "CMYK", "I;16", "LA"])
def test_other_modes_become_rgb(mode):
    img = Image.new("RGB", (10, 6), (90, 90, 90)).convert(mode)
    out = read_image(img)
    assert out.mode == "RGB" and out.size == (10, 6)


def test_16_bit_greyscale_is_scaled():
    arr = np.full((4, 4), 65535, dtype=np.uint16)
    out = read_image(Image.fromarray(arr))
    assert out.getpixel((0, 0)) == (255, 255, 255)


def test_exif_orientation_is_applied():
    img = Image.new("RGB", (40, 20), (0, 200, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90° clockwise to display
    out = read_image(_jpeg_bytes(img, exif=exif.tobytes()))
    assert out.size == (20, 40)


def test_classify_greyscale_upload():
    logits = classify_image(_jpeg_bytes(Image.new("L", (120, 90), 128)))
    assert logits.shape == (1000,) and np.isfinite(logits).all()
