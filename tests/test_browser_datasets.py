"""End-to-end on a non-ImageNet data set: the real Streamlit server in headless Chromium.

Serves a temporary cached-logits folder holding one synthetic CIFAR-100 model (manifest
``dataset_id: cifar100``), visits Overview and Explorer and checks that no exception is shown and
that CIFAR-100's class and superclass names are on the page. Skipped without Chromium or Playwright.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from browser_support import ROOT, assert_no_exception, require_browser, streamlit_server, wait_idle, wait_view

DATA = ROOT / "hsc_core" / "datasets" / "data"

sync_api = require_browser()

from hsc_core.core.probabilities import node_probabilities, softmax  # noqa: E402
from hsc_core.core.protocol import calibration_mask  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.formats import load_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import save_logits  # noqa: E402


@pytest.fixture(scope="module")
def cifar_model(tmp_path_factory) -> tuple[Path, str]:
    """(cached-logits folder, id of a maple_tree sample that Climbing lifts to "trees" at θ = 0.99)."""
    h = load_hierarchy(DATA / "cifar100_hierarchy.csv", DATA / "cifar100_classes.txt")
    d = tmp_path_factory.mktemp("browser_cifar") / "cached_logits"
    d.mkdir()
    logits, labels = synthetic_logits(h, 500, top1=0.6, seed=6)
    ids = [f"cifar_{i:05d}.png" for i in range(len(labels))]
    save_logits(d / "cifar_net.npz", logits, labels, ids, manifest={"model": "cifar_net", "dataset_id": "cifar100"},
                dtype="float32")
    maple, trees = h.names.index("maple_tree"), h.names.index("trees")
    probs = node_probabilities(h, softmax(logits))
    evaluated = ~calibration_mask(labels)  # the samples the pages show
    # Right at the leaf, but below θ = 0.99 there, so Climbing backs off to "trees".
    climbs = evaluated & (labels == maple) & (probs[:, : h.n_leaves].argmax(1) == maple) \
        & (probs[:, maple] < 0.99) & (probs[:, trees] >= 0.99)
    assert climbs.any()
    return d, ids[int(np.flatnonzero(climbs)[0])]


@pytest.fixture(scope="module")
def server(cifar_model, tmp_path_factory):
    folder, _ = cifar_model
    with streamlit_server({"HSC_CACHED_LOGITS_DIR": str(folder)},
                          log_path=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url




def assert_no_error(pg) -> None:
    """No exception, no traceback and no error box."""
    assert_no_exception(pg)
    errors = pg.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.first.inner_text()


def test_overview_on_cifar100(server, page):
    page.goto(f"{server}/")
    wait_idle(page)
    assert page.locator("h1").first.inner_text().strip() == "Hierarchical Selective Classification"
    assert_no_error(page)
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    assert "Data set: cifar100" in sidebar and "model=cifar_net" in page.url
    # The illustration climbs CIFAR-100's tree: its first class "apple" under "fruit and vegetables".
    page.wait_for_function("() => hscCharts().some((g) => g.textContent.includes('fruit and vegetables'))",
                           timeout=30_000)
    # The models table and the per-rule table (drawn after the illustration: wait for them, do not race them).
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stDataFrame\"]').length >= 2",
                           timeout=60_000)


def test_explorer_on_cifar100(server, page, cifar_model):
    _, sample = cifar_model
    page.goto(f"{server}/explorer?sample={sample}&theta=0.99&ts=0")  # raw softmax, as the fixture
    wait_idle(page)
    assert page.locator("h1").first.inner_text().strip() == "Explorer"
    assert_no_error(page)
    body = page.locator('[data-testid="stMain"]').inner_text()
    assert "True class: maple tree" in body, body[:2000]
    # The path figure's labels: maple tree → trees → root, drawn by Plotly (in the page or the component's frame).
    page.wait_for_function("() => hscCharts().some(g => JSON.stringify(g.data || []).includes('trees'))",
                           timeout=30_000)
    labels = page.evaluate("() => hscCharts().map(g => JSON.stringify(g.data || [])).join(' ')")
    assert "maple tree" in labels and "trees" in labels


@pytest.fixture(scope="module")
def server_two_models(cifar_model, tmp_path_factory):
    """cifar_net beside the same logits with no `dataset_id` (the sidebar asks for their data set)."""
    from hsc_core.datasets.logits_io import load_logits

    folder = tmp_path_factory.mktemp("browser_two") / "cached_logits"
    folder.mkdir()
    bundle = load_logits(cifar_model[0] / "cifar_net.npz")
    for name, manifest in (("cifar_net", {"dataset_id": "cifar100"}), ("no_dataset_net", {})):
        save_logits(folder / f"{name}.npz", bundle.logits, bundle.labels, list(bundle.sample_ids),
                    manifest={"model": name, **manifest}, dtype="float32")
    with streamlit_server({"HSC_CACHED_LOGITS_DIR": str(folder)},
                          log_path=tmp_path_factory.mktemp("log") / "streamlit.log") as url:
        yield url


def _slider_text(page) -> str:
    """The θ the Explorer's view shows (its slider's readout)."""
    return wait_view(page, "explorer_tree")["theta"]


def test_theta_slider_shows_the_pages_theta_after_picking_a_data_set(server_two_models, page):
    """The Explorer stops while a model's data set is not picked; once picked, its view comes back
    showing the θ the page uses (a page slider once showed 0.00 while the page used 0.50)."""
    page.goto(f"{server_two_models}/explorer?model=cifar_net&theta=0.5")
    wait_idle(page)
    assert _slider_text(page) == "0.50"
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
        has_text="Model (cached logits)").click()
    page.get_by_role("option").filter(has_text="no_dataset_net").first.click()
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Data set of")
    picker.wait_for(timeout=30_000)
    page.locator(".st-key-explorer_tree").wait_for(state="detached", timeout=30_000)
    picker.get_by_role("combobox").click()
    page.keyboard.type("cifar100")
    page.get_by_role("option").filter(has_text="cifar100").first.wait_for()
    page.keyboard.press("Enter")
    wait_idle(page)
    assert _slider_text(page) == "0.50"  # it showed 0.00
    assert_no_error(page)
    assert "theta=0.5" in page.url and "model=no_dataset_net" in page.url
