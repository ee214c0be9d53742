"""``hsc_core.pipeline.perturbation``: ImageNet-C's blur and noise (checked against scikit-image and
the ``imagecorruptions`` reference package) and the logits of a degraded image."""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest
from conftest import SHARED
from PIL import Image

pytest.importorskip("torch")
from hsc_core.pipeline.perturbation import (  # noqa: E402
    CORRUPTIONS,
    degrade,
    degraded_images,
    degraded_logits,
    network_scale,
)

IMAGES = SHARED / "imagenet-val-sample" / "images"


def _photo(seed: int = 0, size=(120, 90)) -> Image.Image:
    """A smooth seeded RGB image (blurred noise), so blur changes it and noise rarely clips."""
    from scipy import ndimage

    x = np.random.default_rng(seed).random((size[1], size[0], 3))
    x = ndimage.gaussian_filter(x, sigma=(3, 3, 0))
    x = 0.25 + 0.5 * (x - x.min()) / (x.max() - x.min())
    return Image.fromarray(np.uint8(np.round(x * 255)))


def _reference():
    """imagecorruptions' own module (its package __init__ needs setuptools' pkg_resources only for
    the frost images, which these tests never use)."""
    if "pkg_resources" not in sys.modules:
        try:
            import pkg_resources  # noqa: F401
        except ImportError:
            stub = types.ModuleType("pkg_resources")
            stub.resource_filename = lambda *args: ""  # type: ignore[attr-defined]
            sys.modules["pkg_resources"] = stub
    return pytest.importorskip("imagecorruptions.corruptions")


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_blur_is_skimages_gaussian_with_imagenet_c_sigma(severity):
    skimage_filters = pytest.importorskip("skimage.filters")
    img = _photo(severity)
    got = np.asarray(degrade(img, "blur", severity), dtype=float)
    x = np.asarray(img) / 255.0
    want = skimage_filters.gaussian(x, sigma=CORRUPTIONS["blur"][severity - 1], channel_axis=-1, mode="nearest",
                                    truncate=4.0)
    assert np.abs(got - np.round(np.clip(want, 0, 1) * 255)).max() <= 1.0


@pytest.mark.parametrize(("kind", "function"), [("blur", "gaussian_blur"), ("noise", "gaussian_noise")])
def test_constants_are_the_reference_packages(kind, function):
    """The severity constants, read from imagecorruptions' own source (its first ``c = [...]``)."""
    import ast
    import inspect

    source = inspect.getsource(getattr(_reference(), function))
    listed = re.search(r"c = (\[[^\]]*\])", source)
    assert listed is not None
    assert tuple(float(v) for v in ast.literal_eval(listed.group(1))) == CORRUPTIONS[kind]


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_noise_has_the_reference_packages_spread(severity):
    ref = _reference()
    img = _photo(10 + severity, size=(200, 200))
    x = np.asarray(img, dtype=float)
    got = np.asarray(degrade(img, "noise", severity, seed=severity), dtype=float) - x
    np.random.seed(severity)
    want = ref.gaussian_noise(img, severity) - x  # the reference package, same constants
    c = CORRUPTIONS["noise"][severity - 1] * 255
    # unclipped residuals of both: mean 0, standard deviation σ (to sampling error and 8-bit rounding)
    mask = (np.abs(want) < 0.25 * 255 - 1) & (np.abs(got) < 0.25 * 255 - 1) if severity > 3 else slice(None)
    assert abs(got.std() - want.std()) < 0.05 * c
    assert abs(got[mask].mean()) < 0.05 * c
    # seeded: the same image twice
    assert np.array_equal(np.asarray(degrade(img, "noise", severity, seed=1)),
                          np.asarray(degrade(img, "noise", severity, seed=1)))


def test_severity_zero_is_the_image_and_bad_input_is_refused():
    img = _photo()
    assert degrade(img, "blur", 0) is img
    with pytest.raises(ValueError, match="kind must be"):
        degrade(img, "fog", 2)
    with pytest.raises(ValueError, match="severity"):
        degrade(img, "blur", 6)
    scaled = network_scale(Image.new("RGB", (640, 480)))
    assert scaled.size == (341, 256)
    assert [im.size for im in degraded_images(img, "blur")] == [network_scale(img).size] * 6


@pytest.mark.skipif(not IMAGES.is_dir(), reason="no shared image sample")
def test_blur_makes_climbing_retreat_on_real_images():
    """Lite0 on real validation images: at severity 0 the logits are classify_image's on the same
    pixels; heavy blur lowers the confidence, so Climbing's node at θ = 0.7 is shallower on average."""
    from hsc_core.core.probabilities import node_probabilities, softmax
    from hsc_core.core.rules import climbing_predict
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.pipeline.inference import classify_image

    h = imagenet_hierarchy()
    files = sorted(IMAGES.iterdir())[:6]
    depth = np.zeros((len(files), 2))
    for k, f in enumerate(files):
        ims = degraded_images(f.read_bytes(), "blur", severities=(0, 5))
        logits = degraded_logits(ims, "efficientnet_lite0")
        np.testing.assert_allclose(logits[0], classify_image(ims[0], "efficientnet_lite0"), atol=1e-4)
        nodes, _ = climbing_predict(h, node_probabilities(h, softmax(logits.astype(np.float64))), 0.7)
        depth[k] = h.depth[nodes]
    assert depth[:, 1].mean() < depth[:, 0].mean()
