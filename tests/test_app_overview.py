"""The Overview page: its headline is computed from the data (the library's own pipeline gives the
same sentence), honest when the interval contains 0, and the protocol is stated once; its tables
are the evaluation layer's result rows, and its CSVs the layer's (formula names neutralised)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app_support import download_rows  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from hsc_core.core.protocol import PROTOCOL_TEXT  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits, save_logits  # noqa: E402
from hsc_core.evaluation import ModelEvaluation, column_label, wide_table  # noqa: E402
from hsc_core.report.html_report import headline_sentence  # noqa: E402

PAGE = str(ROOT / "app_pages" / "overview.py")
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


def test_the_rules_that_do_worse_are_said_under_the_models_they_count(monkeypatch, tmp_path):
    """Issue 45: "n of N models have a rule that does worse" is about the listed models, not the
    first screen's one model: it sits folded under the models' table, N the table's rows."""
    folder = _synthetic_dir(tmp_path, 120, 0.0)  # Climbing clearly worse (the test above)
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 150, top1=0.5, seed=4, subtree_boost=4.0)  # no clear difference
    save_logits(folder / "other_net.npz", logits, labels, [f"s{i}" for i in range(150)], dtype="float32")
    at = _run(monkeypatch, folder)
    assert len(at.dataframe[0].value) == 2
    (folded,) = [e for e in at.expander if e.label.startswith("Rules that do worse")]
    assert folded.label == "Rules that do worse than Selective, among the 2 models above"
    said = [w.value for w in at.warning if "a rule that does worse" in w.value]
    assert len(said) == 1 and [w.value for w in folded.warning] == said  # only there, not on the first screen
    assert "1 of 2 models has a rule that does worse" in said[0]


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


# ---------------------------------------------------------------------------- the layer's numbers, its CSV


@pytest.mark.skipif(not (SHIPPED / "efficientnet_lite0.npz").exists(), reason="no shipped logits")
def test_overview_tables_are_the_evaluation_layers_results(monkeypatch, tmp_path, downloads):
    """Every number of the Overview's tables (and its CSVs) is ``ModelEvaluation.results()``'s, by
    the layer's column names."""
    for suffix in (".npz", ".json"):
        (tmp_path / f"efficientnet_lite0{suffix}").write_bytes((SHIPPED / f"efficientnet_lite0{suffix}").read_bytes())
    at = _run(monkeypatch, tmp_path)
    ev = ModelEvaluation.from_bundle(load_logits(tmp_path / "efficientnet_lite0.npz"), imagenet_hierarchy(),
                                     name="efficientnet_lite0", dataset="imagenet1k")
    rows = ev.results(losses=("01",), intervals=True)  # the sidebar's model has its intervals
    value = {(r["metric"], r["rule"], r["ts"]): r for r in rows}

    models = at.dataframe[0].value
    assert list(models.columns) == ["model", "dataset", "n_eval", "n_cal", "top-1 accuracy", "T"]
    m = models.iloc[0]
    assert (m["model"], m["dataset"], m["n_eval"], m["n_cal"]) == ("efficientnet_lite0", "imagenet1k", 1705, ev.n_cal)
    assert m["top-1 accuracy"] == value["top1", "", False]["value"] and m["T"] == ev.temperature

    per_rule = at.dataframe[1].value
    assert len(per_rule) == 2 * len(RULES)
    for ts in (False, True):
        for rule in RULES:
            shown = per_rule[(per_rule["rule"] == RULE_LABELS[rule]) & (per_rule["TS"] == ("on" if ts else "off"))]
            h, g = value["haurc", rule, ts], value["gain_percent", rule, ts]
            assert shown["hAURC×1000"].iloc[0] == 1000 * h["value"] and shown["gain %"].iloc[0] == g["value"]
            assert shown["hAURC×1000 95 % CI"].iloc[0] == f"[{1000 * h['ci_low']:.2f}, {1000 * h['ci_high']:.2f}]"
            assert shown["gain % 95 % CI"].iloc[0] == ("" if rule == "selective" else
                                                       f"[{g['ci_low']:+.1f}, {g['ci_high']:+.1f}]")

    # "Everything, one row per model": the layer's wide table, exact to the last digit.
    (everything,) = download_rows(downloads["dl_overview"])
    want = wide_table(rows, intervals=True)[0]
    for name in (column_label("haurc", "climbing", ts=True), column_label("gain_percent", "jumping", ts=False),
                 column_label("haurc", "selective", ts=False) + " low", "top-1 accuracy", "T"):
        assert float(everything[name]) == want[name], name
    assert everything["subset"] == "all" and everything["temperature_scaling"] == "both"  # the context columns


def test_csv_exports_neutralise_formula_names(monkeypatch, tmp_path, downloads):
    """A model called ``=evil`` is written as text (``'=evil``) in every Overview and Compare CSV."""
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 150, top1=0.5, seed=4, subtree_boost=4.0)
    save_logits(tmp_path / "=evil.npz", logits, labels, [f"=s{i}" for i in range(150)], dtype="float32")
    at = _run(monkeypatch, tmp_path)
    assert at.dataframe[0].value["model"].tolist() == ["=evil"]  # the page shows the name as it is
    cmp = AppTest.from_file(str(ROOT / "app_pages" / "compare_models.py"), default_timeout=TIMEOUT).run()
    cmp.toggle(key="cmp_ci").set_value(True).run()
    assert not cmp.exception, [e.value for e in cmp.exception]
    for key in ("dl_overview_rules", "dl_overview", "dl_compare"):
        table = download_rows(downloads[key])
        assert table and {r["model"] for r in table} == {"'=evil"}, key
        assert not any(str(v).startswith(("=", "+", "@")) for r in table for v in r.values()), key
    (row,) = download_rows(downloads["dl_compare"])
    climb = column_label("haurc", "climbing", ts=True)  # the page opens with temperature scaling on
    assert float(row[f"{climb} low"]) <= float(row[climb]) <= float(row[f"{climb} high"])
