"""``hsc_core.config``: every ``HSC_*`` variable's default, override and fallback for bad values,
and the one data-set folder default that the library, the ``hsc`` command and the dashboard share."""

from __future__ import annotations

from pathlib import Path

import pytest

from hsc_core import config

VARIABLES = (config.CACHED_LOGITS_DIR, config.DATASETS_DIR, config.IMAGE_DIR, config.MEMORY_BUDGET_MB,
             config.MAX_UPLOAD_MB, config.MAX_IMAGE_MEGAPIXELS, config.MAX_DECODED_MB, config.SYNTHETIC,
             config.SYNTHETIC_TAXONOMY, config.DEBUG)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """Each test starts with no HSC_* variable set (the developer's shell may set some)."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_every_variable_is_in_the_docstring_table():
    for name in VARIABLES:
        assert f"``{name}``" in config.__doc__, name


def test_defaults():
    assert config.cached_logits_dir() == config.REPO_ROOT / "cached_logits"
    assert config.datasets_dir() == config.REPO_ROOT / "datasets"
    assert config.image_dir() is None
    assert config.memory_budget_bytes() == 256 * 2**20
    assert config.max_upload_bytes() == 200_000_000
    assert config.max_image_pixels() == 40_000_000
    assert config.max_decoded_bytes() == 2048 * 2**20
    assert config.synthetic_samples() is None
    assert config.synthetic_taxonomy() is False
    assert config.debug() is False
    assert not config.is_set(config.CACHED_LOGITS_DIR)


def test_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv(config.CACHED_LOGITS_DIR, str(tmp_path / "logits"))
    monkeypatch.setenv(config.IMAGE_DIR, f" {tmp_path / 'images'} ")  # surrounding blanks are ignored
    monkeypatch.setenv(config.MEMORY_BUDGET_MB, "1.5")
    monkeypatch.setenv(config.MAX_UPLOAD_MB, "2")
    monkeypatch.setenv(config.MAX_IMAGE_MEGAPIXELS, "0.001")
    monkeypatch.setenv(config.MAX_DECODED_MB, "3")
    monkeypatch.setenv(config.SYNTHETIC, "5000")
    monkeypatch.setenv(config.SYNTHETIC_TAXONOMY, "Yes")
    monkeypatch.setenv(config.DEBUG, "1")
    assert config.cached_logits_dir() == tmp_path / "logits"
    assert config.image_dir() == tmp_path / "images"
    assert config.memory_budget_bytes() == int(1.5 * 2**20)
    assert config.max_upload_bytes() == 2_000_000
    assert config.max_image_pixels() == 1000
    assert config.max_decoded_bytes() == 3 * 2**20
    assert config.synthetic_samples() == 5000
    assert config.synthetic_taxonomy() is True
    assert config.debug() is True
    assert config.is_set(config.CACHED_LOGITS_DIR)
    monkeypatch.setenv(config.DATASETS_DIR, "~/my_datasets")
    assert config.datasets_dir() == Path("~/my_datasets").expanduser()


@pytest.mark.parametrize("value", ["", "  ", "lots", "0", "-3", "nan", "inf"])
def test_bad_numbers_fall_back_to_the_defaults(monkeypatch, value):
    for name in (config.MEMORY_BUDGET_MB, config.MAX_UPLOAD_MB, config.MAX_IMAGE_MEGAPIXELS):
        monkeypatch.setenv(name, value)
    assert config.memory_budget_bytes() == 256 * 2**20
    assert config.max_upload_bytes() == 200_000_000
    assert config.max_image_pixels() == 40_000_000


@pytest.mark.parametrize("value", ["", "many", "0", "-1", "2.5"])
def test_bad_synthetic_sizes_mean_no_synthetic_model(monkeypatch, value):
    monkeypatch.setenv(config.SYNTHETIC, value)
    monkeypatch.setenv(config.SYNTHETIC_TAXONOMY, "maybe")
    assert config.synthetic_samples() is None
    assert config.synthetic_taxonomy() is False


def test_rows_per_chunk_follows_the_budget(monkeypatch):
    assert config.rows_per_chunk(1024, budget_bytes=4096) == 4
    assert config.rows_per_chunk(10**12, budget_bytes=4096) == 1  # at least one row
    monkeypatch.setenv(config.MEMORY_BUDGET_MB, "1")
    assert config.rows_per_chunk(2**10) == 2**10


def test_one_datasets_default_for_library_command_and_dashboard(monkeypatch, tmp_path):
    """Without HSC_DATASETS_DIR, the library's registry (which `hsc evaluate` uses) and the dashboard
    both look in ``datasets/`` beside the cached-logits folder, wherever that folder is."""
    from dashboard import catalog
    from hsc_core.datasets import registry

    for logits in (None, tmp_path / "elsewhere" / "cached_logits"):
        if logits is not None:
            monkeypatch.setenv(config.CACHED_LOGITS_DIR, str(logits))
        expected = (logits or config.REPO_ROOT / "cached_logits").parent / "datasets"
        assert config.datasets_dir() == registry.default_datasets_dir() == catalog.datasets_dir() == expected
    monkeypatch.setenv(config.DATASETS_DIR, str(tmp_path / "mine"))
    assert registry.default_datasets_dir() == catalog.datasets_dir() == tmp_path / "mine"


def test_other_modules_read_through_config(monkeypatch, tmp_path):
    """The modules that used to read the environment themselves now ask config (same names kept)."""
    from dashboard import catalog, uploads
    from hsc_core.datasets import imagenet, images, registry

    assert images.MAX_PIXELS_ENV == config.MAX_IMAGE_MEGAPIXELS and images.MAX_IMAGE_PIXELS == 40_000_000
    assert registry.DATASETS_DIR_ENV == config.DATASETS_DIR and imagenet.IMAGE_DIR_ENV == config.IMAGE_DIR
    assert uploads.MAX_UPLOAD_ENV == config.MAX_UPLOAD_MB and catalog.CACHED_LOGITS_ENV == config.CACHED_LOGITS_DIR
    monkeypatch.setenv(config.MAX_IMAGE_MEGAPIXELS, "2")
    monkeypatch.setenv(config.MAX_UPLOAD_MB, "3")
    monkeypatch.setenv(config.IMAGE_DIR, str(tmp_path))
    monkeypatch.setenv(config.SYNTHETIC, "100")
    monkeypatch.setenv(config.SYNTHETIC_TAXONOMY, "on")
    assert images.max_image_pixels() == 2_000_000
    assert catalog.max_upload_bytes() == 3_000_000
    assert imagenet.default_image_dir() == tmp_path
    assert catalog.synthetic_samples() == 100 and catalog.synthetic_dataset() == catalog.SYNTHETIC_TAXONOMY
    monkeypatch.setenv(config.IMAGE_DIR, str(tmp_path / "missing"))
    assert imagenet.default_image_dir() is None  # a named folder that is not there: no images


def test_launcher_passes_a_set_logits_folder_on_as_an_absolute_path(monkeypatch, tmp_path):
    import argparse

    from hsc_core.cli import dashboard as dashboard_launcher

    args = argparse.Namespace(port=None, host=None, browser=False, streamlit_args=[], logits_dir=None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(config.CACHED_LOGITS_DIR, "logits")
    _, _, env = dashboard_launcher.streamlit_command(args)
    assert env[config.CACHED_LOGITS_DIR] == str((tmp_path / "logits").resolve())


@pytest.mark.parametrize(("url", "skip"), [
    ("http://h:8501/explorer?theta=0.4", True), ("http://h:8501/risk_coverage", True),
    ("http://h:8501/base/risk_coverage/", True), ("http://h:8501/guaranteed_accuracy", False),
    ("http://h:8501/", True), ("", False), ("http://h:8501/overview?model=x", True),
    ("http://h:8501/explorer?presenter=1", True),  # one renderer in both modes
    ("http://h:8501/try_an_image?timg=x", True), ("http://h:8501/story", False),
    ("http://h:8501/compare_models?cmp_rule=jumping", True), ("http://h:8501/monitor", True),
    ("http://h:8501/where_in_tree", False), ("http://h:8501/model_atlas?atlas_y=haurc", True),
    ("http://h:8501/per_rank", True), ("http://h:8501/calibration_coverage", False)])
def test_only_a_link_to_a_component_page_skips_the_plotly_warm_up(url, skip):
    from dashboard import plotly_component

    assert plotly_component.draws_landing_page(url) is skip
