"""The Overview on a large evaluation set: point estimates first, the bootstrap intervals only
once asked for (``uncertainty.ON_DEMAND_SAMPLES``), then the same sentence as the library's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

import hsc_core.core.uncertainty as uncertainty  # noqa: E402
from hsc_core.core.curves import hierarchical_gain  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402
from hsc_core.evaluation import ModelEvaluation  # noqa: E402
from hsc_core.report.html_report import headline_sentence  # noqa: E402

PAGE = str(ROOT / "app_pages" / "overview.py")
SHIPPED = ROOT / "cached_logits" / "efficientnet_lite0.npz"


@pytest.mark.skipif(not SHIPPED.exists(), reason="no shipped logits")
def test_large_sets_show_point_estimates_first_and_intervals_on_request(monkeypatch, tmp_path):
    for suffix in (".npz", ".json"):
        (tmp_path / f"efficientnet_lite0{suffix}").write_bytes(SHIPPED.with_suffix(suffix).read_bytes())
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(tmp_path))
    # The shipped model's ~1,700 evaluation images count as "large" here.
    monkeypatch.setattr(uncertainty, "ON_DEMAND_SAMPLES", 1000)
    result = ModelEvaluation.from_bundle(load_logits(tmp_path / "efficientnet_lite0.npz"), imagenet_hierarchy(),
                                         dataset="imagenet1k").setting(True)

    at = AppTest.from_file(PAGE, default_timeout=300)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    gain = hierarchical_gain(result.haurc("selective"), result.haurc("climbing"))
    point = [b.value for b in at.info if "point estimate" in b.value]
    assert len(point) == 1 and f"lowers the risk–coverage area by {gain:.1f} %" in point[0]
    assert "95 % CI" not in " ".join(b.value for b in (*at.success, *at.info, *at.warning))
    assert (at.dataframe[1].value["hAURC×1000 95 % CI"] == "").all()

    at.button(key="overview_compute_ci").click().run()
    assert not at.exception, [e.value for e in at.exception]
    boot = result.bootstrap().gain["climbing"]
    want = headline_sentence("efficientnet_lite0", "imagenet1k", result.n, True, boot)
    assert any(want in b.value for b in (*at.success, *at.info, *at.warning)), want
    assert not any("point estimate" in b.value for b in at.info)
    assert at.dataframe[1].value["hAURC×1000 95 % CI"].str.startswith("[").all()
