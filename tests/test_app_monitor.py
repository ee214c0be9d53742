"""The Monitor page (Decide): the shipped clean images then a shift, the page's sentence at the link's
time, the alarm, θ adapting, and its snapshot showing the same sentence."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from app_support import open_page, swept_view, view_texts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dashboard import snapshot, snapshot_pages, snapshot_views  # noqa: E402, F401 - registers the builders

SHIPPED = ROOT / "cached_logits"
LITE0 = "efficientnet_lite0"


@pytest.fixture
def shipped(monkeypatch, tmp_path):
    if not (SHIPPED / f"{LITE0}.npz").is_file():
        pytest.skip("shipped logits absent")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    # the shipped folder itself (a file linked in from elsewhere is refused: issue 42)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(SHIPPED))
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path / "snaps"))


def _sentence(at) -> str:
    """The sentence the page's swept view shows at its time (its ``<strong>`` as ``**``)."""
    return view_texts(at)


def test_monitor_page_alarm_and_snapshot(shipped):
    query = {"model": LITE0, "m_stream": "gaussian_noise-5", "m_n": "1500", "m_acc": "0.85", "m_delta": "0.1"}
    at = open_page("app_pages/monitor.py", query)
    end = _sentence(at)
    assert end.startswith("At sample **3,000** (Gaussian noise, severity 5)") and "**Alarm since sample" in end
    view = swept_view(at, "monitor_fig")
    fig = json.loads(view.spec)
    assert "θ_t" in [d.get("name") for d in fig["data"]]
    # one frame per time the stream stops at when played; the alarm's line appears in the frames after it
    assert [f["name"] for f in fig["frames"]] == view.sweep["names"] and view.sweep["names"][-1] == "3000"
    assert fig["frames"][0]["data"][6]["x"] == [] and fig["frames"][-1]["data"][6]["x"]
    text = gzip.decompress(snapshot.snapshot_reply(
        snapshot_views.store(), snapshot_views.share_link("monitor", query)[2:]).body).decode()
    assert view.sweep["texts"]["3000"] in text  # the snapshot opens with the live view's sentence
    early = _sentence(open_page("app_pages/monitor.py", {**query, "m_t": "300"}))  # the nearest stop: 301
    assert early.startswith("At sample **301** (clean images)") and "No alarm" in early


def test_monitor_page_adapts_theta(shipped):
    at = open_page("app_pages/monitor.py", {"model": LITE0, "m_stream": "gaussian_blur-5", "m_n": "1000",
                                            "m_acc": "0.85", "m_adapt": "aci"})
    s = _sentence(at)
    theta = float(s.split("θ = ")[1].split(":")[0])
    deployed = float(next(c.value for c in at.caption if "Deployed θ = " in c.value).split("Deployed θ = ")[1][:6])
    assert theta > deployed + 0.1  # ACI has raised θ to keep the accuracy under blur
