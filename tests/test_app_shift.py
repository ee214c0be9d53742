"""The dashboard's shifted data: the sidebar's clean/corrupted picker, the overlays on Risk–Coverage and
Compare, the calibrate-on-clean / test-on-shifted part of Guaranteed accuracy, and model variants in the
model list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from app_support import open_page

from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import save_logits
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.shift import guarantee_under_shift

N = 500


IDS = [f"img_{i:05d}.JPEG" for i in range(N)]


@pytest.fixture(scope="module")
def shift_dir(tmp_path_factory) -> Path:
    """toy_net on clean images, on two corruptions (same images and labels, noisier or much worse logits),
    and one model variant."""
    d = tmp_path_factory.mktemp("cached_logits")
    (d / "shifted").mkdir()
    (d / "variants").mkdir()
    h = imagenet_hierarchy()
    clean, labels = synthetic_logits(h, N, top1=0.8, seed=0)
    worse, _ = synthetic_logits(h, N, top1=0.4, seed=7)
    rng = np.random.default_rng(1)
    files = {"toy_net.npz": (clean, {"model": "toy_net"}),
             "shifted/toy_net__gaussian_blur-3.npz": (clean + rng.normal(scale=0.5, size=clean.shape),
                                                      {"model": "toy_net", "variant_of": "toy_net", "shifted": True}),
             "shifted/toy_net__gaussian_noise-5.npz": (worse, {"model": "toy_net", "variant_of": "toy_net",
                                                               "shifted": True}),
             "variants/toy_net__tta-flip.npz": (clean + rng.normal(scale=0.2, size=clean.shape),
                                                {"model": "toy_net", "variant_of": "toy_net"})}
    for name, (logits, manifest) in files.items():
        save_logits(d / name, logits, labels, IDS, manifest=manifest, dtype="float32")
    return d


def frame(at, column: str):
    """The first st.dataframe with ``column`` (AppTest elements carry no key)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture
def use_shift_dir(monkeypatch, shift_dir):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(shift_dir))
    return shift_dir


def test_variants_are_models_and_shifts_are_data(use_shift_dir):
    at = open_page("app_pages/risk_coverage.py", {"model": "toy_net"})
    assert list(at.selectbox(key="_w.sb.model").options) == ["toy_net", "toy_net__tta-flip"]
    images = at.selectbox(key="_w.sb.shift")
    assert list(images.options) == ["clean (original images)", "Gaussian blur, severity 3",
                                    "Gaussian noise, severity 5"]
    images.set_value("gaussian_noise-5").run()
    assert not at.exception
    assert at.query_params["shift"] == "gaussian_noise-5"
    assert any("gaussian" in m.value and "noise-5" in m.value for m in at.caption)  # the page shows the shifted file


def test_risk_coverage_overlays_clean_and_corrupted(use_shift_dir):
    at = open_page("app_pages/risk_coverage.py", {"model": "toy_net", "shifts": "gaussian_noise-5"})
    table = frame(at, "data")
    assert set(table["data"]) == {"toy_net", "toy_net__gaussian_noise-5"}
    top = table.groupby("data")["top-1 accuracy"].first()
    assert top["toy_net__gaussian_noise-5"] < top["toy_net"] - 0.2


def test_compare_overlays_the_current_model_on_corrupted_images(use_shift_dir):
    at = open_page("app_pages/compare_models.py", {"model": "toy_net", "shifts": "gaussian_blur-3"})
    models = list(frame(at, "n_cal")["model"])
    assert models == ["toy_net", "toy_net__tta-flip", "toy_net__gaussian_blur-3"]


def test_guaranteed_accuracy_calibrates_on_clean_and_tests_on_shifted(use_shift_dir):
    at = open_page("app_pages/guaranteed_accuracy.py", {"model": "toy_net", "ga_shift": "gaussian_noise-5",
                                                        "n": "200", "acc": "0.9", "ts": "0"})
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # the library's numbers for the same split
    d = use_shift_dir
    from hsc_core.datasets.logits_io import load_logits

    clean = ModelEvaluation.from_bundle(load_logits(d / "toy_net.npz"), imagenet_hierarchy()).setting(False)
    shifted = ModelEvaluation.from_bundle(load_logits(d / "shifted" / "toy_net__gaussian_noise-5.npz"),
                                          imagenet_hierarchy()).setting(False)
    res = guarantee_under_shift(clean, shifted, n_cal=200, alpha=0.1, delta=0.1, seed=0)
    assert metrics["θ̂ (from clean)"] == f"{res.theta_hat:.4f}"
    assert metrics["Clean test accuracy"] == f"{res.clean_accuracy:.4f}"
    assert metrics["Gaussian noise, severity 5"] == f"{res.shifted_accuracy:.4f}"
    assert metrics["Guarantee (≥ 1 − α − ε) on shifted"] == ("holds" if res.shifted_holds else "fails")


def test_hierarchy_sensitivity_page_shows_the_librarys_numbers(use_shift_dir):
    from hsc_core.datasets.imagenet_trees import imagenet_tree
    from hsc_core.datasets.logits_io import load_logits
    from hsc_core.evaluation.sensitivity import hierarchy_sensitivity, sensitivity_table

    at = open_page("app_pages/hierarchy_sensitivity.py", {"model": "toy_net", "trees": "wordnet,random", "ts": "0"})
    assert not at.exception
    shown = frame(at, "hAURC×1000")
    assert list(shown["tree"].unique()) == ["WordNet 3.0 (default)", "random control (WordNet shape)"]
    b = load_logits(use_shift_dir / "toy_net.npz")
    trees = {t: imagenet_tree(t) for t in ("wordnet", "random")}
    ref = sensitivity_table(hierarchy_sensitivity(b.logits, b.labels, trees, name="toy_net"))
    np.testing.assert_allclose(shown["hAURC×1000"], [d["haurc_x1000"] for d in ref])
    np.testing.assert_allclose(shown["hAURC low"], [d["haurc_x1000_low"] for d in ref])
    selective = shown[shown["rule"] == "Selective"]["hAURC×1000"]
    assert selective.nunique() == 1  # Selective ignores the tree


def test_link_values_of_the_new_settings_are_checked():
    from dashboard import state

    s = state.SETTINGS
    assert s["shift"].parse("clean") == "clean" and s["shift"].parse("gaussian_blur-3") == "gaussian_blur-3"
    assert s["shifts"].parse("jpeg_compression-5,gaussian_noise-1,jpeg_compression-5") == \
        ["jpeg_compression-5", "gaussian_noise-1"]
    assert s["trees"].parse("random,wordnet") == ["wordnet", "random"]
    for key, bad in (("shift", "../etc-1"), ("shift", "blur-9"), ("shifts", "blur-3,<b>-1"), ("trees", "oak"),
                     ("ga_shift", "clean-x")):
        with pytest.raises(state.Invalid):
            s[key].parse(bad)


def test_a_model_without_shifts_points_to_its_variant_that_has_them(tmp_path, monkeypatch):
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 200, seed=0)
    ids = [f"i{k}" for k in range(200)]
    save_logits(tmp_path / "net.npz", logits, labels, ids, dtype="float32")
    save_logits(tmp_path / "variants" / "net__bf16.npz", logits, labels, ids, dtype="float32")
    save_logits(tmp_path / "shifted" / "net__bf16__gaussian_blur-1.npz", logits, labels, ids, dtype="float32")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path))
    at = open_page("app_pages/risk_coverage.py", {"model": "net"})
    assert not [s for s in at.selectbox if s.label == "Images"]
    assert any("pick it to compare" in c.value and "bf16" in c.value for c in at.caption)
