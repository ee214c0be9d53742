"""End-to-end on a non-ImageNet data set: the real Streamlit server in headless Chromium.

Serves a temporary cached-logits folder holding one synthetic CIFAR-100 model (manifest
``dataset_id: cifar100``), visits Overview and Explorer and checks that no exception is shown and
that CIFAR-100's class and superclass names are on the page. Skipped without Chromium or Playwright.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CHROMIUM = "/usr/bin/chromium"
DATA = ROOT / "hsc_core" / "datasets" / "data"

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not found", allow_module_level=True)

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(cifar_model, tmp_path_factory):
    folder, _ = cifar_model
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("HSC_SYNTHETIC", "HSC_SYNTHETIC_TAXONOMY", "HSC_DATASETS_DIR")}
    env["HSC_CACHED_LOGITS_DIR"] = str(folder)
    log = open(tmp_path_factory.mktemp("log") / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("streamlit server did not start")
            time.sleep(0.3)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    ctx.close()


def wait_idle(pg, settle: float = 0.5) -> None:
    """Wait until the app has rendered and no script run is in progress."""
    pg.wait_for_selector('[data-testid="stMainBlockContainer"] h1', state="visible")
    deadline = time.time() + 90
    quiet_since = None
    while time.time() < deadline:
        running = pg.locator('[data-testid="stStatusWidget"]').filter(has_text=re.compile("Running|Stop")).count()
        spinning = pg.locator('[data-testid="stSpinner"]').count()
        if running or spinning:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since >= settle:
            return
        time.sleep(0.1)
    raise AssertionError("the app kept running for 90 s")


def assert_no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0, pg.locator('[data-testid="stException"]').first.inner_text()
    assert pg.locator('[data-testid="stAlertContentError"]').count() == 0, \
        pg.locator('[data-testid="stAlertContentError"]').first.inner_text()
    assert "Traceback" not in pg.locator('[data-testid="stApp"]').inner_text()


def test_overview_on_cifar100(server, page):
    page.goto(f"{server}/")
    wait_idle(page)
    assert page.locator("h1").first.inner_text().strip() == "Hierarchical Selective Classification"
    assert_no_exception(page)
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    assert "Data set: cifar100" in sidebar and "model=cifar_net" in page.url
    # The illustration climbs CIFAR-100's tree: its first class "apple" under "fruit and vegetables".
    page.wait_for_function("() => document.body.innerText.includes('fruit and vegetables')", timeout=30_000)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 2  # the models table and the per-rule table


def test_explorer_on_cifar100(server, page, cifar_model):
    _, sample = cifar_model
    page.goto(f"{server}/explorer?sample={sample}&theta=0.99")
    wait_idle(page)
    assert page.locator("h1").first.inner_text().strip() == "Explorer"
    assert_no_exception(page)
    body = page.locator('[data-testid="stMain"]').inner_text()
    assert "True class: maple tree" in body, body[:2000]
    # The path figure's labels: maple tree → trees → root, drawn by Plotly in the page.
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .js-plotly-plot'))"
        ".some(g => JSON.stringify(g.data || []).includes('trees'))", timeout=30_000)
    labels = page.evaluate(
        "() => Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .js-plotly-plot'))"
        ".map(g => JSON.stringify(g.data || [])).join(' ')")
    assert "maple tree" in labels and "trees" in labels
