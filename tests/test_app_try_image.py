"""AppTest of Try an image with a shipped validation image: its true label, the Explorer's tree,
and the live degradation (ImageNet-C blur) whose picks are recomputed here with the library."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from app_support import download_rows, open_page, plotly_figures

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.datasets.imagenet import default_image_dir, imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402

PAGE = "app_pages/try_an_image.py"
LITE0 = ROOT / "cached_logits" / "efficientnet_lite0.npz"




def test_shipped_image_has_its_label_tree_and_degradation(downloads):
    pytest.importorskip("timm")
    image_dir = default_image_dir()
    if image_dir is None or not LITE0.exists():
        pytest.skip("no shared image sample or shipped logits")
    from hsc_core.core.probabilities import node_probabilities, softmax
    from hsc_core.core.rules import climbing_predict
    from hsc_core.pipeline.perturbation import degraded_images, degraded_logits

    bundle = load_logits(LITE0)
    ids = np.asarray(bundle.sample_ids).astype(str)
    name = next(f.name for f in sorted(image_dir.iterdir()) if f.name in set(ids))
    label = int(bundle.labels[np.flatnonzero(ids == name)[0]])
    h = imagenet_hierarchy()
    at = open_page(PAGE, {"tmodel": "efficientnet_lite0", "theta": "0.6", "degrade": "blur", "severity": "5", "ts": "0",
                          "timg": name})  # the deep link opens the shipped image
    assert not at.exception, [e.value for e in at.exception]
    if at.error:
        pytest.skip(f"model unavailable here: {at.error[0].value}")
    assert any(f"**True class:** {h.names[label].replace('_', ' ')}" in m.value for m in at.markdown)
    charts = plotly_figures(at)
    assert len(charts) == 2  # the Explorer's tree and the climb over severities (no old bar chart)
    assert charts[0].sweep is not None and charts[0].sweep["theta"] == "0.60"  # the tree is a θ-swept view
    rows = download_rows(downloads["dl_img_degrade"])
    got = [r["node"] for r in rows if r["rule"] == "climbing"]
    logits = degraded_logits(degraded_images((image_dir / name).read_bytes(), "blur", seed=0), "efficientnet_lite0")
    nodes, _ = climbing_predict(h, node_probabilities(h, softmax(logits.astype(np.float64))), 0.6)
    # The page seeds noise by the image's hash; blur needs no seed, so the picks are the library's.
    assert got == [h.node_ids[int(v)] for v in nodes]
    assert all(r["theta"] == "0.6" for r in rows)


def test_explorer_degrades_its_shipped_image():
    """The Explorer's own sample, blurred live from a link: the climb over severities appears under its
    tree, with the measured time per step."""
    pytest.importorskip("timm")
    if default_image_dir() is None or not LITE0.exists():
        pytest.skip("no shared image sample or shipped logits")
    at = open_page("app_pages/explorer.py", {"model": "efficientnet_lite0", "degrade": "blur", "severity": "2",
                                             "pick": "easy", "theta": "0.5"})
    assert not at.exception, [e.value for e in at.exception]
    assert len(plotly_figures(at)) == 2  # the tree (a θ-swept view) and the climb
    assert any("ms per severity step" in c.value for c in at.caption)
