"""``hsc report`` and the shared figures: offline HTML, every model and the protocol in it, numbers
that match the library, the Okabe–Ito style in every figure, self-describing export names."""

from __future__ import annotations

import base64
import csv
import gc
import html
import io
import os
import re
import stat
import subprocess
import sys
import weakref
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hsc_core.cli import main
from hsc_core.core.curves import hierarchical_gain, hierarchical_rc_curve
from hsc_core.core.logit_chunks import auto_chunk_size
from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax
from hsc_core.core.protocol import PAPER_PROTOCOL_TEXT, PROTOCOL_TEXT, calibration_mask
from hsc_core.core.rules import RULE_LABELS, RULES
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
from hsc_core.core.uncertainty import Interval
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.evaluation import ModelEvaluation
from hsc_core.report import export, figures, style
from hsc_core.report.html_report import (
    CSV_NAME,
    build_report,
    headline_sentence,
    interval_text,
    result_rows,
    worse_sentence,
    worse_summary,
)

REPO = Path(__file__).resolve().parents[1]
TYPICAL, EASIER = "typical-source", "easier-source"
CHROMIUM = "/usr/bin/chromium"


def _model(path: Path, n: int, seed: int, top1: float) -> Path:
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, n, top1=top1, seed=seed)
    sources = np.where(np.arange(n) % 3 == 0, TYPICAL, EASIER)
    return save_logits(path, logits, labels, [f"s{seed}_{i}" for i in range(n)], sources=sources,
                       manifest={"model": path.stem, "weights": "w-" + path.stem}, dtype="float32")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("logits")
    return [_model(d / "alpha_net.npz", 500, 1, 0.75), _model(d / "beta_<b>net.npz", 400, 2, 0.6)]


@pytest.fixture(scope="module")
def report_file(models, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", *map(str, models), "--out", str(out), "--resamples", "200"]) == 0
    return out


@pytest.fixture(scope="module")
def report(report_file) -> str:
    return report_file.read_text(encoding="utf-8")


def test_report_file_has_the_permissions_of_a_plain_open(report_file, tmp_path):
    """Written through a temp file, but readable like any file the user writes (0644 under umask
    022), not mkstemp's owner-only 0600."""
    plain = tmp_path / "plain.html"
    plain.write_text("x")
    assert stat.S_IMODE(report_file.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_beyond_section_draws_every_new_rules_cc_curve_from_the_layer(models):
    """The report's "beyond the paper" section has a calibration–coverage figure of Climbing and the
    new rules (as the dashboard's Calibration–Coverage page offers them), each trace the layer's
    ``cc_curve`` with TS, to the bit."""
    from hsc_core.core.metric_rules import EXTRA_RULES
    from hsc_core.report.html_report import _beyond_section

    ev = ModelEvaluation.from_bundle(load_logits(models[0]), imagenet_hierarchy(), dataset="imagenet1k")
    drawn = {}

    def keep(fig, name):
        drawn[name.split("_")[0] + "_" + name.split("_")[1]] = fig
        return ""

    _beyond_section(ev, keep, 50, 0)
    cc = drawn["cc_beyond"]
    shown = ("climbing", *EXTRA_RULES)
    assert [t.name for t in cc.data] == [RULE_LABELS[r] for r in shown]
    for rule, trace in zip(shown, cc.data, strict=True):
        want = ev.setting(True).cc_curve(rule)
        np.testing.assert_array_equal(trace.x, want.coverage)
        np.testing.assert_array_equal(trace.y, want.ece)
    assert "Calibration" in cc.layout.title.text


def test_report_states_the_negative_result_in_one_sentence():
    """Rules with a gain interval wholly below 0 are named with their setting; a positive or
    undecided one is not (hand-made rows in the layer's schema)."""
    def row(rule, ts, value, low, high):
        return {"metric": "gain_percent", "rule": rule, "loss": "01", "ts": ts, "model": "lite1",
                "value": value, "ci_low": low, "ci_high": high}

    text = worse_sentence([row("jumping", False, -18.2, -28.6, -8.9), row("climbing", False, -6.7, -15.4, 1.1),
                           row("climbing", True, 14.3, 8.8, 19.3)])
    assert text == ("Without temperature scaling, some rules do worse than plain selective classification "
                    "(negative gain): lite1: Jumping -18.2 % (95 % CI -28.6 to -8.9 %).")
    assert worse_sentence([row("climbing", True, 14.3, 8.8, 19.3)]) == ""


def test_short_negative_result_counts_models_and_names_the_worst_rule():
    """The projector's one-line form: models with a rule clearly below 0 out of all models, and the
    lowest such gain; an undecided interval or a positive gain does not count."""
    def row(model, rule, ts, value, low, high):
        return {"metric": "gain_percent", "rule": rule, "loss": "01", "ts": ts, "model": model,
                "value": value, "ci_low": low, "ci_high": high}

    rows = [row("a", "jumping", False, -18.2, -28.6, -8.9), row("a", "climbing", False, -6.7, -15.4, 1.1),
            row("b", "max_coverage", False, -30.0, None, None), row("c", "climbing", False, 3.0, 1.0, 5.0),
            row("a", "climbing", True, 14.3, 8.8, 19.3)]
    assert worse_summary(rows) == ("Without temperature scaling, 2 of 3 models have a rule that does worse than "
                                   "plain selective classification (worst: b, Max-Coverage -30.0 %, point estimate).")
    assert worse_summary(rows[:1]) == ("Without temperature scaling, 1 of 1 model has a rule that does worse than "
                                       "plain selective classification (worst: a, Jumping -18.2 %).")
    assert worse_summary(rows[3:]) == ""


class _Links(HTMLParser):
    """Every element's attributes (script bodies are raw text to the parser, as to a browser)."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]


def test_report_is_offline(report):
    parser = _Links()
    parser.feed(report)
    linked = [(t, k, v) for t, k, v in parser.attrs if k in ("src", "href", "srcset", "data", "action", "poster")]
    assert not [a for a in linked if "http://" in a[2] or "https://" in a[2] or a[2].startswith("//")], linked
    assert not [a for a in parser.attrs if a[0] == "script" and a[1] == "src"]
    assert "link" not in parser.tags and "iframe" not in parser.tags and "img" not in parser.tags
    assert "@import" not in report and "url(http" not in report
    # plotly.js inlined exactly once (its banner), then one small script per figure
    assert len(re.findall(r"plotly\.js v\d", report)) == 1
    assert sum(tag == "script" for tag in parser.tags) >= 10


def test_report_names_every_model_states_the_protocol_and_escapes_names(report):
    assert "alpha_net" in report
    assert "beta_&lt;b&gt;net" in report and "beta_<b>net" not in report  # a file name is text, never markup
    assert PROTOCOL_TEXT in report
    assert "root (= reject) is always correct" in report
    assert "95 % paired percentile bootstrap" in report and "200 resamples" in report
    assert "w-alpha_net" in report  # provenance: the manifest's weights
    for rule in RULES:
        assert RULE_LABELS[rule] in report


def test_report_numbers_follow_the_protocol(models):
    """Every hAURC in the report is the library's curve on the evaluation split (T from the calibration split)."""
    h = imagenet_hierarchy()
    bundle = load_logits(models[0])
    ev = ModelEvaluation.from_bundle(bundle, h, dataset="imagenet1k")
    cal = calibration_mask(bundle.labels)
    t = fit_temperature(bundle.logits[cal], bundle.labels[cal])
    assert ev.temperature == pytest.approx(t) and ev.setting(True).n == int((~cal).sum()) == 450
    rows = {(r["ts"], r["rule"], r["metric"]): r for r in result_rows(ev, n_resamples=100)}
    for ts, temp in ((False, 1.0), (True, t)):
        probs = node_probabilities(h, softmax(bundle.logits[~cal], temp))
        sel = hierarchical_rc_curve(h, probs, bundle.labels[~cal], "selective").haurc
        for rule in RULES:
            want = hierarchical_rc_curve(h, probs, bundle.labels[~cal], rule).haurc
            r = rows[(ts, rule, "haurc")]
            assert r["value"] == pytest.approx(want, abs=1e-12) and r["ci_low"] < r["value"] < r["ci_high"]
            if rule != "selective":
                assert rows[(ts, rule, "gain_percent")]["value"] == pytest.approx(hierarchical_gain(sel, want))
    frame = pd.DataFrame(rows.values())
    assert set(frame["metric"]) == {"top1", "temperature", "haurc", "gain_percent"}
    assert set(frame["ts"]) == {True, False}
    assert {"model", "dataset", "subset", "protocol", "temperature", "ci_low", "ci_high"} <= set(frame.columns)


def _csv_rows(report: str) -> list[dict[str, str]]:
    """The tidy rows embedded in a report (its data: CSV link)."""
    found = re.search(rf'download="{CSV_NAME}" href="data:text/csv;charset=utf-8;base64,([A-Za-z0-9+/=]+)"', report)
    assert found, "no embedded CSV"
    return list(csv.DictReader(io.StringIO(base64.b64decode(found.group(1)).decode("utf-8"))))


def _numbers(rows: list[dict], metric: str = "haurc") -> dict[tuple, tuple[str, str, str]]:
    """(model, ts, rule) → (value, ci_low, ci_high) as written (floats by ``repr``: exact)."""
    return {(r["model"], r["ts"], r["rule"]): (r["value"], r["ci_low"], r["ci_high"])
            for r in rows if r["metric"] == metric}


def test_report_numbers_equal_the_evaluation_layers(models, report):
    """The embedded CSV, the tables and the headlines are ``ModelEvaluation``'s numbers, to the bit."""
    embedded = {(r["model"], r["ts"], r["rule"], r["metric"]): r for r in _csv_rows(report)}
    for path in models:
        ev = ModelEvaluation.from_bundle(load_logits(path), imagenet_hierarchy(), dataset="imagenet1k")
        want = result_rows(ev, n_resamples=200)
        assert len(want) == len([k for k in embedded if k[0] == ev.name]) == 2 + 1 + 2 * 2 * len(RULES)
        for w in want:
            got = embedded[(ev.name, "true" if w["ts"] else "false", w["rule"], w["metric"])]
            for key in ("value", "ci_low", "ci_high", "temperature"):
                assert (float(got[key]) if got[key] else None) == w[key], (w, key)
            assert int(got["n_eval"]) == w["n_eval"] and int(got["n_cal"]) == ev.n_cal
        for ts in (False, True):
            es = ev.setting(ts)
            boot = es.bootstrap(n_resamples=200)
            sentence = headline_sentence(ev.name, "imagenet1k", es.n, ts, boot.gain["climbing"])
            assert html.escape(sentence) in report
            for rule in RULES:
                assert interval_text(boot.haurc[rule], 1000) in report


def test_protocol_option_is_stated_and_applied(models, tmp_path):
    out = tmp_path / "paper.html"
    assert main(["report", str(models[0]), "--out", str(out), "--protocol", "paper", "--resamples", "100"]) == 0
    text = out.read_text(encoding="utf-8")
    assert html.escape(PAPER_PROTOCOL_TEXT) in text and html.escape(PROTOCOL_TEXT) not in text
    assert "protocol: paper" in text
    assert "--protocol paper" in text  # the command in the provenance
    n = {r["ts"]: int(r["n_eval"]) for r in _csv_rows(text)}
    assert n == {"false": 500, "true": 450}  # without TS on every sample, with TS on the held-out 90 %
    assert {r["protocol"] for r in _csv_rows(text)} == {"paper"}


def test_build_report_holds_one_models_logits_at_a_time(models):
    """Laid out as they come: nothing of a model (its logits) outlives its section."""
    alive = []

    def evaluations():
        for path in models:
            assert all(ref() is None for ref in alive)  # the previous model's logits are gone
            ev = ModelEvaluation.from_bundle(load_logits(path), imagenet_hierarchy(), dataset="imagenet1k")
            alive.append(weakref.ref(ev.logits))
            yield ev
            del ev
            gc.collect()

    text = build_report(evaluations(), n_resamples=100)
    assert len(alive) == 2 and "alpha_net" in text and 'id="compare"' in text


def test_models_of_the_same_name_stay_apart_in_the_comparison(models):
    h = imagenet_hierarchy()
    twins = [ModelEvaluation.from_bundle(load_logits(models[0]), h, file=f"run{k}/alpha_net.npz") for k in (1, 2)]
    text = build_report(twins, n_resamples=100)
    assert "alpha_net (1)" in text and "alpha_net (2)" in text  # two rows, two curves per figure


def test_report_under_a_tiny_memory_budget_has_the_same_numbers(tmp_path):
    """2,000 classes × 3,000 samples with HSC_MEMORY_BUDGET_MB=8 (many chunks) gives the very same
    hAURC and intervals as the default budget (one chunk)."""
    h = synthetic_taxonomy(2000, 5, seed=1)
    logits, labels = synthetic_logits(h, 3000, top1=0.6, seed=3)
    data = save_logits(tmp_path / "big_net.npz", logits, labels, [f"s{i}" for i in range(3000)],
                       manifest={"model": "big_net"}, dtype="float32")
    h.to_json(tmp_path / "tree.json")
    assert auto_chunk_size(h, budget_bytes=8 * 2**20) * 10 < 3000 <= auto_chunk_size(h)
    outs = {}
    for budget in ("8", None):
        env = {k: v for k, v in os.environ.items() if k != "HSC_MEMORY_BUDGET_MB"}
        env.update({"HSC_MEMORY_BUDGET_MB": budget} if budget else {})
        outs[budget] = tmp_path / f"report_{budget}.html"
        proc = subprocess.run([sys.executable, "-m", "hsc_core", "report", str(data), "--hierarchy",
                               str(tmp_path / "tree.json"), "--resamples", "100", "--out", str(outs[budget])],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    small, default = (_csv_rows(outs[b].read_text(encoding="utf-8")) for b in ("8", None))
    assert len(_numbers(small)) == 2 * len(RULES)
    assert _numbers(small) == _numbers(default)
    assert _numbers(small, "gain_percent") == _numbers(default, "gain_percent")


def test_subset_evaluates_only_its_tag(models, tmp_path):
    out = tmp_path / "typical.html"
    assert main(["report", str(models[0]), "--out", str(out), "--subset", TYPICAL, "--resamples", "100"]) == 0
    text = out.read_text(encoding="utf-8")
    bundle = load_logits(models[0])
    n = int((~calibration_mask(bundle.labels) & (bundle.sources.astype(str) == TYPICAL)).sum())
    assert f"On imagenet1k ({n:,} evaluation images, alpha_net), with temperature scaling," in text
    assert f"subset: {TYPICAL}" in text


@pytest.mark.parametrize("argv, message", [
    (["report", "missing.npz"], "not found"),
    (["report", "{m}", "--out", "r.pdf"], "--out must name an .html file"),
    (["report", "{m}", "--classes", "c.txt"], "--classes orders the leaves"),
    (["report", "{m}", "--n-resamples", "10"], "--n-resamples must be at least 100"),
    (["report", "{m}", "--subset", "nope", "--out", "{tmp}/r.html"],
     "unknown subset 'nope'; choose one of 'all', 'easier-source', 'typical-source'"),
])
def test_bad_input_exits_2_with_one_line(models, tmp_path, capsys, argv, message):
    argv = [a.replace("{m}", str(models[0])).replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "r.html").exists()


def test_report_reads_the_evaluation_layer_never_the_pipeline():
    """The report is a front end of ``hsc_core.evaluation``: no sideways import of ``pipeline``."""
    for path in (REPO / "hsc_core" / "report").glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import)\s+(\S+)", path.read_text(encoding="utf-8"), re.M)
        assert not [m for m in imports if "pipeline" in m], path.name


def test_python_m_entry_point(models, tmp_path):
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "hsc_core", "report", str(models[0]), "--out", str(out),
                           "--resamples", "100"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 1_000_000  # plotly.js is inside


# ---------------------------------------------------------------------------- headline
def test_headline_is_honest():
    pos = headline_sentence("m", "imagenet1k", 1705, True, Interval(4.2, 1.0, 7.5))
    assert pos == ("On imagenet1k (1,705 evaluation images, m), with temperature scaling, Climbing lowers the "
                   "risk–coverage area by 4.2 % (95 % CI 1.0–7.5 %) vs plain selective classification.")
    neg = headline_sentence("m", "imagenet1k", 1705, True, Interval(-3.0, -5.0, -1.0))
    assert "raises the risk–coverage area by 3.0 % (95 % CI 1.0–5.0 %)" in neg and "better here" in neg
    unclear = headline_sentence("m", "", 900, False, Interval(2.0, -1.5, 5.0))
    assert "no clear difference" in unclear and "without temperature scaling" in unclear


# ---------------------------------------------------------------------------- figures and exports
def test_every_rule_has_its_own_colour_dash_and_marker():
    colours = {style.rule_colour(r) for r in RULES}
    dashes = {style.rule_dash(r) for r in RULES}
    symbols = {style.rule_symbol(r) for r in RULES}
    assert len(colours) == len(dashes) == len(symbols) == len(RULES)
    assert colours <= set(style.OKABE_ITO.values())
    curve = (np.array([1.0, 0.5, 0.0]), np.array([0.2, 0.1, 0.0]))
    fig = figures.rc_figure({r: curve for r in RULES}, {r: 0.05 for r in RULES})
    for trace, rule in zip(fig.data, RULES, strict=True):
        assert (trace.line.color, trace.line.dash) == style.RULE_STYLE[rule][:2]

    class CC:
        thresholds, coverage, ece = np.array([0.1, 0.5]), np.array([1.0, 0.5]), np.array([0.05, 0.02])

    fig = figures.cc_figure({r: CC for r in RULES})
    for trace, rule in zip(fig.data, RULES, strict=True):
        assert (trace.line.color, trace.line.dash, trace.marker.symbol) == style.RULE_STYLE[rule]
    fig = figures.compare_figure({f"m{k}": curve for k in range(3)})
    assert len({(t.line.color, t.line.dash) for t in fig.data}) == 3
    assert len({t.line.dash for t in fig.data}) == 3  # apart in greyscale too


def test_shared_builders_style_every_rule_and_the_dashboard_names_downloads():
    from dashboard import plots
    from hsc_core.core.metric_rules import ALL_RULES

    assert not hasattr(plots, "cc_figure")  # pages import the builders from hsc_core.report.figures
    assert figures.RULE_COLORS == {r: style.rule_colour(r) for r in ALL_RULES}  # every selectable rule
    assert plots.plot_config("a b/c")["toImageButtonOptions"]["filename"] == "a_b_c"


def test_export_names_titles_and_columns_say_what_they_show():
    ctx = export.ExportContext("efficientnet_lite0", "imagenet1k", "typical", True, 1.2345, 0.7, 1705)
    name = export.export_name("rc", ctx)
    assert name == "rc_efficientnet_lite0_imagenet1k_typical_TS_theta0.70"
    off = export.ExportContext("m", "imagenet1k", "all", False)
    assert export.export_name("cc", off) == "cc_m_imagenet1k_all_noTS"
    fig = figures.titled(figures.top5_figure(["a"], [0.5]), "Top-5", ctx)
    title = fig.layout.title.text + " " + fig.layout.title.subtitle.text
    for part in ("efficientnet_lite0", "imagenet1k", "subset typical", "TS on (T = 1.234)", "θ = 0.70"):
        assert part in title
    df = export.with_context_columns(pd.DataFrame({"rule": ["Climbing"], "haurc": [0.04]}), ctx)
    assert list(df.columns[:6]) == ["model", "dataset", "subset", "temperature_scaling", "temperature", "theta"]
    assert df.iloc[0]["temperature_scaling"] == "on" and df.iloc[0]["theta"] == 0.7
    assert export.safe_filename("../../etc/passwd") == "etc_passwd"
    hostile = export.ExportContext("<script>x</script>", "d", "all", None)
    assert "<script>" not in figures.titled(figures.top5_figure(["a"], [0.5]), "t", hostile).layout.title.subtitle.text


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed")
def test_report_makes_no_network_request_in_a_browser(report, tmp_path):
    """Open the file in a real browser: every request stays file:// or data:, and plotly draws."""
    sync_api = pytest.importorskip("playwright.sync_api")
    path = tmp_path / "report.html"
    path.write_text(report, encoding="utf-8")
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        n_plots = page.locator(".js-plotly-plot").count()
        browser.close()
    assert n_plots >= 10
    assert all(u.startswith(("file://", "data:", "blob:", "about:")) for u in requests), requests
