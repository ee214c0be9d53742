"""Model variants of ``hsc cache-logits`` (TTA, MC dropout, int8, resolution, corrupted inputs, ensembles),
the ImageNet-C corruptions and the shipped variant files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.special import log_softmax, softmax

from hsc_core.datasets import corruptions
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.pipeline import cache_logits as cl
from hsc_core.pipeline.caching import store, variants
from hsc_core.pipeline.caching.ensemble import EnsembleError, ensemble_bundles, ensemble_logits
from hsc_core.pipeline.caching.options import CacheOptions

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "cached_logits"
SAMPLE = REPO.parent / "shared" / "imagenet-val-sample"
VARIANTS = sorted((CACHE / "variants").glob("*.npz"))
SHIFTED = sorted((CACHE / "shifted").glob("*.npz"))


# ---------------------------------------------------------------------------- options and the CLI's bad input
@pytest.mark.parametrize("kwargs, message", [
    ({"tta": "rotate"}, "tta must be None or one of flip, multicrop"),
    ({"corruption": "fog", "severity": 3}, "unknown corruption 'fog'"),
    ({"corruption": "gaussian_blur", "severity": 6}, "severity must be an integer from 1 to 5, got 6"),
    ({"corruption": "gaussian_blur", "severity": 0}, "severity must be an integer from 1 to 5, got 0"),
    ({"corruption": "gaussian_blur"}, "corruption and severity go together"),
    ({"quantize": "int4"}, "quantize must be None or one of int8"),
    ({"mc_dropout": 1}, "mc_dropout must be None or an integer from 2 to 1000"),
    ({"mc_dropout_rate": 1.0}, "mc_dropout_rate must be a number strictly between 0 and 1"),
    ({"image_size": 8}, "image_size must be None or an integer from 32 to 1024"),
    ({"tta": "flip", "mc_dropout": 4}, "give one of them"),
    ({"quantize": "int8", "device": "cuda"}, "CPU only"),
])
def test_bad_variant_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CacheOptions(**kwargs)


def test_variant_tags_and_manifest_entries():
    assert CacheOptions().variant_tag == "" and not CacheOptions().is_variant
    assert variants.describe_variant("m", CacheOptions()) == {}
    flip = variants.describe_variant("m", CacheOptions(tta="flip"))
    assert flip["variant_of"] == "m" and flip["variant"]["views"] == 2 and "shifted" not in flip
    shifted = variants.describe_variant("m", CacheOptions(corruption="jpeg_compression", severity=5))
    assert shifted["shifted"] is True and shifted["shift"]["corruption"] == "jpeg_compression"
    assert shifted["shift"]["severity"] == 5 and shifted["variant"]["tag"] == "jpeg_compression-5"
    mc = CacheOptions(mc_dropout=10, image_size=260)
    assert mc.variant_tag == "size260_mcdropout10"
    assert CacheOptions(amp=True, amp_dtype_name="bfloat16").variant_tag == "bf16"
    assert not CacheOptions(amp=True).is_variant  # CUDA's default AMP is not a variant
    assert store.output_name("efficientnet_lite0", "tta-flip") == "efficientnet_lite0__tta-flip.npz"


def _tiny_file(path: Path, n_classes: int, seed: int, dataset_id: str = "toy", n: int = 12) -> Path:
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % n_classes
    save_logits(path, rng.normal(size=(n, n_classes)) * 3, labels, [f"s{i}" for i in range(n)],
                manifest={"model": path.stem, "dataset_id": dataset_id}, dtype="float32")
    return path


@pytest.mark.parametrize("flags, message", [
    (["--model", "m", "--tta", "rotate"], "error: tta must be None or one of flip, multicrop, got 'rotate'"),
    (["--model", "m", "--corruption", "fog", "--severity", "2"], "error: unknown corruption 'fog'; known: "
                                                                 "gaussian_noise, gaussian_blur, jpeg_compression"),
    (["--model", "m", "--corruption", "gaussian_noise", "--severity", "9"],
     "error: severity must be an integer from 1 to 5, got 9"),
    (["--model", "m", "--quantize", "fp4"], "error: quantize must be None or one of int8, got 'fp4'"),
    ([], "error: --model or --ensemble is required"),
])
def test_cli_bad_variant_is_one_line_exit_2(flags, message, tmp_path, capsys):
    # --data points nowhere: the options are checked before anything is read
    code = cl.main([*flags, "--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o.npz")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == message and err.count("\n") == 1


def test_cli_ensemble_of_different_class_sets_is_one_line_exit_2(tmp_path, capsys):
    a, b = _tiny_file(tmp_path / "a.npz", 5, 0), _tiny_file(tmp_path / "b.npz", 7, 1)
    code = cl.main(["--ensemble", f"{a},{b}", "--out", str(tmp_path / "e.npz")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: members have different class sets: 'a' has 5 classes")
    assert not (tmp_path / "e.npz").exists()


def test_cli_ensemble_of_another_data_set_is_refused(tmp_path):
    a, b = _tiny_file(tmp_path / "a.npz", 5, 0), _tiny_file(tmp_path / "b.npz", 5, 1, dataset_id="other")
    with pytest.raises(EnsembleError, match="different class sets"):
        ensemble_bundles([load_logits(a), load_logits(b)])


# ---------------------------------------------------------------------------- the ensemble
def test_ensemble_is_the_log_of_the_mean_probability():
    z1 = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, -1.0]])
    z2 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    got = ensemble_logits([z1, z2])
    np.testing.assert_allclose(softmax(got, axis=1), (softmax(z1, axis=1) + softmax(z2, axis=1)) / 2, rtol=1e-6)
    # By hand, first row: (1/3 + e/(e+2)) / 2 for class 0
    e = np.e
    assert softmax(got, axis=1)[0, 0] == pytest.approx((1 / 3 + e / (e + 2)) / 2, rel=1e-6)
    # a one-member "ensemble" is refused rather than silently copied
    with pytest.raises(EnsembleError, match="at least two"):
        ensemble_logits([z1])


def test_cli_ensemble_from_cached_files(tmp_path, capsys):
    a, b = _tiny_file(tmp_path / "a.npz", 5, 0), _tiny_file(tmp_path / "b.npz", 5, 1)
    out = tmp_path / "e.npz"
    assert cl.main(["--ensemble", f"{a},{b}", "--out", str(out)]) == 0
    e, ba, bb = load_logits(out, require_manifest=True), load_logits(a), load_logits(b)
    mean = (softmax(ba.logits, axis=1) + softmax(bb.logits, axis=1)) / 2
    np.testing.assert_allclose(softmax(e.logits, axis=1), mean, atol=2e-3)  # float16 storage
    assert e.manifest["variant_of"] == ["a", "b"] and e.manifest["dataset_id"] == "toy"
    assert "ensemble of 2: top-1" in capsys.readouterr().out


@pytest.mark.skipif(not (CACHE / "variants" / "efficientnet_lite012__ensemble.npz").is_file(),
                    reason="shipped ensemble absent")
def test_shipped_ensemble_regenerates_from_the_shipped_members():
    shipped = load_logits(CACHE / "variants" / "efficientnet_lite012__ensemble.npz", require_manifest=True)
    members = [load_logits(CACHE / f"efficientnet_lite{i}.npz") for i in range(3)]
    logits, manifest = ensemble_bundles(members)
    np.testing.assert_allclose(shipped.logits, logits.astype(np.float16).astype(np.float32), atol=0)
    assert shipped.manifest["variant_of"] == manifest["variant_of"]
    assert shipped.top1() > max(m.top1() for m in members)  # an ensemble beats each member here


# ---------------------------------------------------------------------------- corruptions (ImageNet-C)
def _photo(seed: int = 0, shape=(40, 48)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    smooth = np.cumsum(np.cumsum(rng.normal(size=(*shape, 3)), axis=0), axis=1)
    smooth = (smooth - smooth.min()) / np.ptp(smooth) * 255
    return smooth.astype(np.uint8)


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
def test_gaussian_blur_matches_skimage_as_imagenet_c_calls_it(severity):
    from skimage.filters import gaussian  # the library ImageNet-C's make_imagenet_c.py uses

    x = _photo(severity)
    sigma = [1, 2, 3, 4, 6][severity - 1]
    ref = np.uint8(np.clip(gaussian(x / 255.0, sigma=sigma, channel_axis=-1), 0, 1) * 255)
    got = corruptions.corrupt(x, "gaussian_blur", severity)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1


@pytest.mark.parametrize("severity", corruptions.SEVERITIES)
def test_jpeg_compression_is_a_pil_round_trip_at_the_papers_quality(severity):
    import io

    x = _photo(10 + severity)
    buf = io.BytesIO()
    Image.fromarray(x).save(buf, "JPEG", quality=[25, 18, 15, 10, 7][severity - 1])
    ref = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    np.testing.assert_array_equal(corruptions.corrupt(x, "jpeg_compression", severity), ref)


def test_gaussian_noise_has_the_papers_scale_and_is_reproducible():
    x = np.full((200, 200, 3), 128, dtype=np.uint8)
    for severity, scale in zip(corruptions.SEVERITIES, (0.08, 0.12, 0.18, 0.26, 0.38), strict=True):
        y = corruptions.corrupt(x, "gaussian_noise", severity)
        # At mid-grey, clipping is rare up to severity 3: the residual std is the paper's scale × 255.
        if severity <= 3:
            assert (y.astype(float) - 128).std() == pytest.approx(scale * 255, rel=0.03)
        np.testing.assert_array_equal(y, corruptions.corrupt(x, "gaussian_noise", severity))
    assert not np.array_equal(corruptions.corrupt(x, "gaussian_noise", 2),
                              corruptions.corrupt(x, "gaussian_noise", 2, seed=1))


@pytest.mark.parametrize("name, severity", [("snow", 1), ("gaussian_blur", 6), ("gaussian_blur", True),
                                            ("gaussian_blur", 2.0)])
def test_bad_corruption_is_refused(name, severity):
    with pytest.raises(corruptions.CorruptionError):
        corruptions.corrupt(_photo(), name, severity)


# ---------------------------------------------------------------------------- TTA and MC dropout
class _Toy(torch.nn.Module):
    """A timm-like classifier: features → pooled (forward_head(pre_logits=True)) → classifier."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.classifier = torch.nn.Linear(8, 5)

    def forward_features(self, x):
        return self.conv(x)

    def forward_head(self, x, pre_logits=False):
        x = x.mean(dim=(2, 3))
        return x if pre_logits else self.classifier(x)

    def get_classifier(self):
        return self.classifier

    def forward(self, x):
        return self.forward_head(self.forward_features(x))


def _log_mean_softmax(*outs):
    p = np.mean([softmax(o.detach().numpy(), axis=1) for o in outs], axis=0)
    return np.log(p)


def test_flip_tta_is_the_mean_probability_of_image_and_mirror():
    model, x = _Toy().eval(), torch.randn(3, 3, 12, 12)
    wrapped = variants.VariantModel(model, CacheOptions(tta="flip"), crop=12)
    got = wrapped(x, torch.arange(3)).detach().numpy()
    np.testing.assert_allclose(got, _log_mean_softmax(model(x), model(x.flip(-1))), atol=1e-5)


def test_multicrop_tta_averages_the_four_corners_and_the_centre():
    model, x = _Toy().eval(), torch.randn(2, 3, 16, 16)
    wrapped = variants.VariantModel(model, CacheOptions(tta="multicrop"), crop=10)
    crops = [x[..., :10, :10], x[..., :10, 6:], x[..., 6:, :10], x[..., 6:, 6:], x[..., 3:13, 3:13]]
    np.testing.assert_allclose(wrapped(x, torch.arange(2)).detach().numpy(),
                               _log_mean_softmax(*(model(c) for c in crops)), atol=1e-5)


def test_mc_dropout_does_not_depend_on_batching_and_samples_the_head():
    model, x = _Toy().eval(), torch.randn(4, 3, 12, 12)
    wrapped = variants.VariantModel(model, CacheOptions(mc_dropout=50, mc_dropout_rate=0.5), crop=12)
    together = wrapped(x, torch.arange(10, 14))
    alone = torch.cat([wrapped(x[i: i + 1], torch.tensor([10 + i])) for i in range(4)])
    np.testing.assert_allclose(together.detach().numpy(), alone.detach().numpy(), atol=1e-5)
    # Not the deterministic output, but near it: 50 passes of inverted dropout average out.
    plain = log_softmax(model(x).detach().numpy(), axis=1)
    assert not np.allclose(together.detach().numpy(), plain, atol=1e-4)
    # another seed, other masks
    other = variants.VariantModel(model, CacheOptions(mc_dropout=50, mc_dropout_rate=0.5, seed=1), crop=12)
    assert not np.allclose(other(x, torch.arange(10, 14)).detach().numpy(), together.detach().numpy())


def test_mc_dropout_masks_keep_the_stated_fraction():
    wrapped = variants.VariantModel(_Toy(), CacheOptions(mc_dropout=200, mc_dropout_rate=0.2), crop=12)
    masks = wrapped._masks(torch.arange(5), 64, torch.device("cpu"))
    assert masks.shape == (200, 5, 64)
    assert (masks > 0).float().mean().item() == pytest.approx(0.8, abs=0.01)
    assert set(torch.unique(masks).tolist()) == {0.0, 1 / 0.8}


# ---------------------------------------------------------------------------- the shipped variant files
@pytest.mark.parametrize("path", VARIANTS + SHIFTED, ids=lambda p: p.stem)
def test_shipped_variant_manifest(path):
    b = load_logits(path, require_manifest=True, n_classes=1000)
    m = b.manifest
    assert b.logits.shape == (1894, 1000) and m["dtype"] == "float16"
    assert m["variant_of"] and "description" in m["variant"]
    assert m["top1"] == pytest.approx(b.top1(), abs=1e-12)
    assert (m.get("shifted") is True) == (path.parent.name == "shifted")
    if path.parent.name == "shifted":
        # <clean model's file stem>__<corruption>-<severity>; that clean file is in the catalogue
        base, _, key = path.stem.rpartition("__")
        assert key == f"{m['shift']['corruption']}-{m['shift']['severity']}" and base.startswith(m["variant_of"])
        assert (CACHE / f"{base}.npz").is_file() or (CACHE / "variants" / f"{base}.npz").is_file()
        assert 0.0 < b.top1() < 0.79
    else:
        assert 0.70 < b.top1() < 0.85
    assert "/work/" not in json.dumps(m) and "/tmp/" not in json.dumps(m)
    clean = load_logits(CACHE / "efficientnet_lite0.npz")
    assert b.sample_ids.tolist() == clean.sample_ids.tolist() and np.array_equal(b.labels, clean.labels)


def test_corruption_severity_lowers_top1():
    """ImageNet-C's severities are graded: for each corruption, top-1 falls as severity rises."""
    by = {}
    for p in SHIFTED:
        m = json.loads(p.with_suffix(".json").read_text())
        by.setdefault(m["shift"]["corruption"], {})[m["shift"]["severity"]] = m["top1"]
    if not by:
        pytest.skip("no shipped shifted files")
    # the shifted files are bf16 runs (cached_logits/README.md): their clean reference is the bf16 variant
    clean = json.loads((CACHE / "variants" / "efficientnet_lite0__bf16.json").read_text())["top1"]
    for corruption, tops in by.items():
        ordered = [clean] + [tops[s] for s in sorted(tops)]
        assert ordered == sorted(ordered, reverse=True), corruption


# The exact flags that made each shipped file (cached_logits/README.md prints the same commands).
BF16 = ["--amp", "--amp-dtype", "bfloat16"]
REGENERATE = {
    "efficientnet_lite0__tta-flip": ["--model", "efficientnet_lite0", "--tta", "flip"],
    "efficientnet_lite0__mcdropout10": ["--model", "efficientnet_lite0", "--mc-dropout", "10"],
    "efficientnet_lite0__int8": ["--model", "efficientnet_lite0", "--quantize", "int8"],
    "efficientnet_lite0__size260": ["--model", "efficientnet_lite0", "--image-size", "260"],
    **{f"efficientnet_lite{i}__bf16": ["--model", f"efficientnet_lite{i}", *BF16] for i in range(3)},
    "efficientnet_lite0__tta-multicrop_bf16": ["--model", "efficientnet_lite0", *BF16, "--tta", "multicrop"],
    **{f"efficientnet_lite{i}__tta-flip_bf16": ["--model", f"efficientnet_lite{i}", *BF16, "--tta", "flip"]
       for i in (1, 2)},
    **{f"efficientnet_lite0__bf16__{c}-{s}": ["--model", "efficientnet_lite0", *BF16, "--corruption", c,
                                              "--severity", str(s)]
       for c in corruptions.CORRUPTIONS for s in (1, 3, 5)},
}


def test_every_shipped_variant_has_its_command():
    assert {p.stem for p in VARIANTS + SHIFTED} - {"efficientnet_lite012__ensemble"} <= set(REGENERATE)


@pytest.mark.skipif(not (SAMPLE / "labels.csv").is_file(), reason="shared image sample absent")
@pytest.mark.parametrize("path", [p for p in VARIANTS + SHIFTED if p.stem in REGENERATE], ids=lambda p: p.stem)
def test_variant_regenerates_on_a_slice(path, tmp_path):
    """A few images of each shipped variant, recomputed by the command that made it, agree with the file."""
    n = 4
    out = tmp_path / path.name
    code = cl.main([*REGENERATE[path.stem], "--data", str(SAMPLE / "labels.csv"), "--images-dir",
                    str(SAMPLE / "images"), "--out", str(out), "--limit", str(n), "--workers", "0",
                    "--device", "cpu", "--no-progress"])
    assert code == 0
    got, shipped = load_logits(out, require_manifest=True), load_logits(path, require_manifest=True)
    assert got.sample_ids.tolist() == shipped.sample_ids[:n].tolist()
    # float16 storage and another batch composition (oneDNN picks kernels by batch size): close, not bitwise
    tol = 0.25 if "bf16" in path.stem else 0.03
    np.testing.assert_allclose(got.logits, shipped.logits[:n], atol=tol)
    assert got.manifest["variant"] == shipped.manifest["variant"]
    assert got.manifest.get("shift") == shipped.manifest.get("shift")
