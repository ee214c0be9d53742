"""The Model atlas in headless Chromium at 1280×720 in presenter mode: a deep link opens the chosen
table, the chart fits the screen beside no error, and the legend names the regimes. Serves a
results folder: ``../shared/reference`` with the authors' table when present, else one holding
``hsc evaluate``-style results of a few synthetic models. Skipped without Chromium or Playwright."""

from __future__ import annotations

import pytest
from browser_support import (
    assert_no_exception,
    find_chart,
    new_page,
    require_browser,
    streamlit_server,
    view,
    wait_idle,
)
from conftest import SHARED, random_tree

sync_api = require_browser()

from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.evaluation.model import ModelEvaluation  # noqa: E402
from hsc_core.evaluation.results import RESULT_COLUMNS, to_csv  # noqa: E402

AUTHORS = SHARED / "reference" / "authors_models_comparison_full.csv"
NAMES = ("resnet50.a1_in1k", "deit_small_distilled_patch16_224.fb_in1k", "vit_base_patch16_clip_224.openai_ft_in1k")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    h = random_tree(30, seed=2)
    rows = []
    for k, name in enumerate(NAMES):
        logits, labels = synthetic_logits(h, n_samples=300, top1=0.6 + 0.1 * k, seed=k)
        rows += ModelEvaluation(h, logits, labels, name=name, dataset="imagenet1k").results()
    (folder / "results.csv").write_text(to_csv(rows, RESULT_COLUMNS))
    # The authors' table is read where it lies (a link to it from elsewhere would leave the folder: refused).
    served = AUTHORS.parent if AUTHORS.is_file() else folder
    with streamlit_server({"HSC_RESULTS_DIR": str(served)},
                          log_path=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url



def test_atlas_deep_link_in_presenter_mode_at_1280x720(server, browser, tmp_path):
    name = AUTHORS.name if AUTHORS.is_file() else "results.csv"
    with new_page(browser, width=1280, height=720) as pg:
        pg.goto(f"{server}/model_atlas?atlas={name}&presenter=1&regime=all&atlas_y=gain_percent&ts=1")
        wait_idle(pg)
        assert_no_exception(pg)
        assert pg.locator('[data-testid="stAlertContentError"]').count() == 0
        assert pg.locator("h1").first.inner_text().strip() == "Model atlas"
        chart = find_chart(pg, "atlas_chart")
        chart.wait_for(state="visible")
        box = chart.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280
        legend = chart.locator(".legend").first.text_content() or ""
        assert "plain ImageNet-1k" in legend and "knowledge distillation" in legend and "CLIP fine-tuned" in legend
        if name == AUTHORS.name:
            assert "your models" in legend  # the shipped Lite models, as stars
        assert "atlas_y=gain_percent" in pg.url and f"atlas={name}" in pg.url
        pg.screenshot(path=str(tmp_path / "atlas.png"))


def test_where_it_stops_at_1280x720_with_a_link_to_the_explorer(server, browser, tmp_path):
    """The sunburst draws within the screen in presenter mode, and a sample behind a node opens in
    the Explorer on that very sample."""
    with new_page(browser, width=1280, height=720) as pg:
        pg.goto(f"{server}/where_in_tree?presenter=1&theta=0.7&cmp_rule=climbing")
        wait_idle(pg)
        assert_no_exception(pg)
        assert pg.locator('[data-testid="stAlertContentError"]').count() == 0
        # a rerun (the viewport probe's, in presenter mode) briefly holds the old and the new chart,
        # both hidden: wait for the one that stays
        chart = pg.locator(".st-key-where_chart .js-plotly-plot:visible").last
        chart.wait_for(state="visible")
        box = chart.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280
        wedges = chart.locator("path.surface").count()
        assert 10 < wedges <= 1500
        pg.screenshot(path=str(tmp_path / "where.png"))
        link = pg.locator('[data-testid="stMainBlockContainer"] a[href*="explorer?"]').first
        href = link.get_attribute("href") or ""
        assert "sample=" in href and "theta=0.70" in href
        pg.goto(href if href.startswith("http") else f"{server}/{href.lstrip('/')}")
        wait_idle(pg)
        assert_no_exception(pg)
        sample = href.split("sample=")[1].split("&")[0]
        assert f"sample={sample}" in pg.url and pg.locator("h1").first.inner_text().strip() == "Explorer"


def test_try_an_image_deep_link_degraded_at_1280x720(server, browser, tmp_path):
    """A link to a shipped image, blurred at severity 4: the Explorer's tree (with its ▶ Play) and the
    climb over severities render, within the screen width, with no error."""
    pytest.importorskip("timm")
    images = SHARED / "imagenet-val-sample" / "images"
    if not images.is_dir():
        pytest.skip("no shared image sample")
    name = sorted(p.name for p in images.iterdir())[3]
    with new_page(browser, width=1280, height=720) as pg:
        pg.goto(f"{server}/try_an_image?presenter=1&tmodel=efficientnet_lite0&timg={name}&degrade=blur&severity=4"
                "&theta=0.6")
        wait_idle(pg)
        assert_no_exception(pg)
        assert pg.locator('[data-testid="stAlertContentError"]').count() == 0
        tree = find_chart(pg, "img_tree")
        tree.wait_for(state="visible")
        assert "Play" in (view(pg, "img_tree").locator("#play").text_content() or "")  # the view's own ▶ Play
        box = tree.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280
        assert "True class" in pg.locator('[data-testid="stMainBlockContainer"]').inner_text()
        find_chart(pg, "img_climb").wait_for(state="visible")
        assert f"timg={name}" in pg.url and "degrade=blur" in pg.url
        pg.screenshot(path=str(tmp_path / "try.png"))
