"""The Overview page: its headline is computed from the data (the library's own pipeline gives the
same sentence), honest when the interval contains 0, and the protocol is stated once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from hsc_core.core.protocol import PROTOCOL_TEXT  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits, save_logits  # noqa: E402
from hsc_core.evaluation import ModelEvaluation  # noqa: E402
from hsc_core.report.html_report import headline_sentence  # noqa: E402

PAGE = str(ROOT / "pages" / "overview.py")
SHIPPED = ROOT / "cached_logits"
TIMEOUT = 300


def _run(monkeypatch, folder: Path) -> AppTest:
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(folder))
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _expected(path: Path, ts: bool) -> str:
    bundle = load_logits(path)
    es = ModelEvaluation.from_bundle(bundle, imagenet_hierarchy(), dataset="imagenet1k").setting(ts)
    return headline_sentence(bundle.name, "imagenet1k", es.n, ts, es.bootstrap().gain["climbing"])


def _synthetic_dir(folder: Path, n: int, subtree_boost: float) -> Path:
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, n, top1=0.5, seed=4, subtree_boost=subtree_boost)
    save_logits(folder / "tiny_net.npz", logits, labels, [f"s{i}" for i in range(n)], manifest={"model": "tiny_net"},
                dtype="float32")
    return folder


@pytest.mark.skipif(not (SHIPPED / "efficientnet_lite0.npz").exists(), reason="no shipped logits")
def test_headline_is_the_librarys_sentence_on_the_shipped_logits(monkeypatch, tmp_path):
    (tmp_path / "efficientnet_lite0.npz").write_bytes((SHIPPED / "efficientnet_lite0.npz").read_bytes())
    (tmp_path / "efficientnet_lite0.json").write_bytes((SHIPPED / "efficientnet_lite0.json").read_bytes())
    at = _run(monkeypatch, tmp_path)
    boxes = [b.value for b in (*at.success, *at.info, *at.warning)]
    want = _expected(tmp_path / "efficientnet_lite0.npz", True)
    assert any(want in b for b in boxes), (boxes, want)
    assert "Climbing lowers the risk–coverage area by" in want and "95 % CI" in want
    captions = [c.value for c in at.caption]
    off = _expected(tmp_path / "efficientnet_lite0.npz", False)
    assert any(off in c for c in captions)
    # The protocol, once, with the hierarchical-risk explanation.
    text = " ".join(m.value for m in at.markdown)
    assert text.count(PROTOCOL_TEXT) == 1 and "covers nothing" in text
    rules = at.dataframe[1].value
    assert set(rules["TS"]) == {"on", "off"} and rules["hAURC×1000 95 % CI"].str.startswith("[").all()


# Errors spread over unrelated classes (no subtree boost) make backing off useless: Climbing is
# clearly worse. A moderate boost on 150 samples leaves the interval across 0.
@pytest.mark.parametrize("n, boost, phrase, box", [
    (120, 0.0, "raises the risk–coverage area by", "warning"),
    (150, 4.0, "no clear difference on this many images", "info"),
])
def test_headline_is_honest_when_climbing_is_worse_or_unclear(monkeypatch, tmp_path, n, boost, phrase, box):
    folder = _synthetic_dir(tmp_path, n, boost)
    at = _run(monkeypatch, folder)
    want = _expected(folder / "tiny_net.npz", True)
    assert phrase in want
    assert any(want in b.value for b in getattr(at, box)), ([b.value for b in getattr(at, box)], want)


def test_app_offers_the_report_and_builds_it_from_the_pages_numbers(monkeypatch, tmp_path):
    folder = _synthetic_dir(tmp_path, 150, 4.0)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(folder))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Download report (HTML)" in [b.proto.label for b in at.get("download_button")]

    from dashboard import report

    models = {"tiny_net": str(folder / "tiny_net.npz")}
    assert report.report_file_name(models, "typical") == "hsc_report_tiny_net_imagenet1k_typical.html"
    html = report.report_html({"tiny_net": str(folder / "tiny_net.npz")}, "all").decode("utf-8")
    assert PROTOCOL_TEXT in html and "tiny_net" in html
    assert _expected(folder / "tiny_net.npz", True) in html.replace("&#x27;", "'")
