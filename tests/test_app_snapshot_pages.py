"""Each page beside its snapshot link: the live page (AppTest, shipped Lite0 logits) and the
snapshot of the same link show the same numbers."""

from __future__ import annotations

import gzip
import re
import shutil
import sys
from pathlib import Path

import pytest
from app_support import open_page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard import snapshot, snapshot_learn, snapshot_pages, snapshot_views  # noqa: E402

SHIPPED = ROOT / "cached_logits"
LITE0 = "efficientnet_lite0"
assert {"story", "calibrators"} <= set(snapshot.BUILDERS)  # both builder modules registered
assert snapshot_learn.IMAGE_UPLOAD and snapshot_pages.DEFAULT_QUANTILE


@pytest.fixture
def shipped(monkeypatch, tmp_path):
    if not (SHIPPED / f"{LITE0}.npz").is_file():
        pytest.skip("shipped logits absent")
    models = tmp_path / "models"
    models.mkdir()
    for suffix in (".npz", ".json"):
        shutil.copy(SHIPPED / f"{LITE0}{suffix}", models / f"{LITE0}{suffix}")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(models))
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path / "snaps"))


def snapshot_text(page: str, query: dict) -> str:
    link = snapshot_views.share_link(page, query)
    assert link is not None
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    assert reply.status == 200
    return gzip.decompress(reply.body).decode()


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_guaranteed_accuracy_page_and_snapshot(shipped):
    query = {"model": LITE0, "acc": "0.9", "conf": "0.8", "n": "500", "split_seed": "3", "reps": "10"}
    at = open_page("app_pages/guaranteed_accuracy.py", query)
    text = snapshot_text("guaranteed_accuracy", query)
    # the split's metrics (issue 41's default method), before the solver's
    labels = [m.label for m in at.metric][:5]
    assert labels == ["θ̂ (threshold)", "Accuracy of the answers", "Answered", "Hierarchical coverage",
                      "Meets the target"], labels
    for label in labels:
        assert f"<strong>{label}</strong>: {_metric(at, label)}" in text, label
    assert snapshot.markdown_html(at.info[0].value) in text  # the page's sentence


def test_where_it_stops_page_and_snapshot(shipped):
    query = {"model": LITE0, "cmp_rule": "jumping", "theta": "0.7"}
    at = open_page("app_pages/where_in_tree.py", query)
    sentence = next(m.value for m in at.markdown if m.value.startswith("At θ"))  # body text (issue 45)
    assert snapshot.markdown_html(sentence) in snapshot_text("where_in_tree", query)


def test_compare_models_page_and_snapshot(shipped):
    query = {"model": LITE0, "cmp_rule": "max_coverage", "loss": "severity"}
    at = open_page("app_pages/compare_models.py", query)
    sentence = next(m.value for m in at.markdown if m.value.startswith("Each curve is one model"))
    text = snapshot_text("compare_models", query)
    assert snapshot.markdown_html(sentence) in text
    table = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    row = table[table["rule"] == "Max-Coverage"].iloc[0]
    assert f"gain {row['gain %']:.2f} %" in text


def test_per_rank_page_and_snapshot(shipped):
    query = {"r_acc": "0.93", "r_delta": "0.2"}
    at = open_page("app_pages/per_rank.py", query)
    verdict = (at.success or at.warning)[0].value
    assert snapshot.markdown_html(verdict) in snapshot_text("per_rank", query)


def test_hierarchy_sensitivity_page_and_snapshot(shipped):
    query = {"model": LITE0, "trees": "wordnet,random"}
    at = open_page("app_pages/hierarchy_sensitivity.py", query)
    table = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    text = snapshot_text("hierarchy_sensitivity", query)
    assert len(table) == 8
    for _, row in table.iterrows():
        assert snapshot.markdown_html(f"**{row['tree']} · {row['rule']}**: hAURC×1000 {row['hAURC×1000']:.2f}") in text


def test_try_an_image_page_and_snapshot(shipped):
    pytest.importorskip("timm")
    from hsc_core.datasets.imagenet import default_image_dir

    folder = default_image_dir()
    if folder is None:
        pytest.skip("no shipped validation images")
    name = sorted(p.name for p in folder.iterdir() if p.suffix.lower() in (".jpeg", ".jpg", ".png"))[0]
    query = {"tmodel": LITE0, "timg": name, "theta": "0.8", "ts": "1"}
    at = open_page("app_pages/try_an_image.py", query)
    top5 = next(d.value for d in at.dataframe if "probability" in d.value.columns)
    text = snapshot_text("try_an_image", query)
    for k, row in top5.iterrows():
        assert re.search(rf"{k + 1}\. [^<]*: {row['probability']:.4f}(<br>|</div>)", text), row
    assert 'src="data:image/jpeg;base64,' in text
