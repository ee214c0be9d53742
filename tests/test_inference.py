"""Live single-image inference and image decoding."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hsc_core.datasets.logits_io import load_logits
from hsc_core.pipeline import inference
from hsc_core.pipeline.inference import ImageReadError, classify_image, read_image

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


def test_model_is_loaded_once_and_reused():
    img = Image.new("RGB", (300, 200), (10, 120, 200))
    classify_image(img)  # loads (or reuses) the model
    hits = inference._cached_model.cache_info().hits
    a = classify_image(img)
    assert inference._cached_model.cache_info().hits == hits + 1
    np.testing.assert_array_equal(a, classify_image(img))  # deterministic


def test_corrupt_bytes_raise_image_read_error():
    with pytest.raises(ImageReadError, match=r"cannot read image \(not in a format Pillow can decode"):
        classify_image(b"definitely not an image")
    with pytest.raises(ImageReadError, match="upload.png: cannot read image"):
        read_image(b"\x89PNG\r\n\x1a\n then garbage", name="upload.png")
    assert issubclass(ImageReadError, ValueError)


def test_huge_image_is_refused(monkeypatch):
    # PIL refuses images over twice MAX_IMAGE_PIXELS (≈179 Mpx by default); a lower limit here
    # keeps the test small.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    buf = io.BytesIO()
    Image.new("RGB", (100, 100)).save(buf, format="PNG")
    with pytest.raises(ImageReadError, match="big.png: cannot read image \\(too large"):
        read_image(buf.getvalue(), name="big.png")


def test_png_with_alpha_and_large_photo_classify():
    rng = np.random.default_rng(0)
    rgba = Image.fromarray(rng.integers(0, 256, size=(300, 400, 4), dtype=np.uint8), mode="RGBA")
    buf = io.BytesIO()
    rgba.save(buf, format="PNG")
    a = classify_image(buf.getvalue())
    # Same as classifying the image composited on white by hand.
    white = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    np.testing.assert_allclose(a, classify_image(white), atol=1e-4)
    big = classify_image(Image.new("RGB", (6000, 4000), (30, 60, 90)))
    assert big.shape == (1000,) and np.isfinite(big).all()


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
