"""The Monitor page (Decide): the shipped clean images then a shift, the page's sentence at the link's
time, the alarm, θ adapting, and its snapshot showing the same sentence."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from app_support import assert_component_draws_basic_traces, open_page, swept_view, view_texts

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
    # before the alarm its line is gaps (an empty array would be skipped by Plotly's animation), after it drawn
    assert fig["frames"][0]["data"][6]["x"] == [None, None] and None not in fig["frames"][-1]["data"][6]["x"]
    assert_component_draws_basic_traces(at, "monitor")
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


# ------------------------------------------------------------------------------ an uploaded stream
def test_an_uploaded_stream_is_monitored_as_the_same_samples_in_order(shipped):
    """The model's own first samples uploaded as a stream give the 'in order' run's numbers, row for row;
    their sample ids come back in the CSV, a would-be formula quoted."""
    import numpy as np

    from dashboard import evaluations, monitor
    from hsc_core.datasets.logits_io import LogitsBundle

    es = evaluations.model_context(LITE0, str(SHIPPED / f"{LITE0}.npz"))
    ev, idx = es.view.evaluation, es.view.rows[:800]
    ids = np.array([f"img{i}" for i in range(idx.size)], dtype="<U20")
    ids[4] = "=HYPERLINK(1)"
    upload = LogitsBundle(name="stream", logits=ev.logits[idx], labels=ev.labels[idx], sample_ids=ids,
                          sources=None, manifest={"model": LITE0})
    args = (es, 0.85, 0.1)
    mine: dict = {}
    got = monitor.run(*args, monitor.UPLOADED, 800, 3, "aci", upload=upload, session_runs=mine)
    want = monitor.run(*args, monitor.IN_ORDER, 800, 3, "aci")
    numbers = [c for c in want.frame.columns if c not in ("segment", "image")]
    assert len(got.frame) == 800 and got.frame[numbers].equals(want.frame[numbers])
    assert got.verdict == want.verdict and len(mine) == 1  # kept in the session's own dict only
    assert not any(k[3] == monitor.UPLOADED for k in monitor._RUNS)
    csv = monitor.csv_text(got)
    assert "'=HYPERLINK(1)" in csv and "\n=HYPERLINK" not in csv and ",=HYPERLINK" not in csv


def test_an_uploaded_stream_of_other_classes_or_model_is_refused_in_one_line(shipped):
    import numpy as np

    from dashboard import evaluations, monitor
    from hsc_core.datasets.logits_io import LogitsBundle

    es = evaluations.model_context(LITE0, str(SHIPPED / f"{LITE0}.npz"))

    def stream(classes: int, model: str) -> LogitsBundle:
        return LogitsBundle(name="s", logits=np.zeros((10, classes), np.float32), labels=np.zeros(10, np.int64),
                            sample_ids=np.array([f"i{k}" for k in range(10)]), sources=None, manifest={"model": model})
    with pytest.raises(ValueError, match=r"^the stream s\.npz has 10 classes; efficientnet_lite0 has 1,000$"):
        monitor.run(es, 0.85, 0.1, monitor.UPLOADED, 10, 1, "fixed", upload=stream(10, LITE0))
    with pytest.raises(ValueError, match=r"^the card is for model 'efficientnet_lite0', the stream comes from 'x'$"):
        monitor.run(es, 0.85, 0.1, monitor.UPLOADED, 10, 1, "fixed", upload=stream(1000, "x"))
    with pytest.raises(ValueError, match=r"^upload a stream file \(\.npz in arrival order\) first$"):
        monitor.run(es, 0.85, 0.1, monitor.UPLOADED, 10, 1, "fixed")


def test_the_page_asks_for_a_stream_file_when_none_is_uploaded(shipped):
    at = open_page("app_pages/monitor.py", {"model": LITE0, "m_stream": "uploaded", "m_n": "500"})
    assert [e.value for e in at.error] == ["upload a stream file (.npz in arrival order) first"]
    assert not at.exception
