"""AppTest of the Model atlas page: the authors' table by regime, Table 1, suspect rows, deep
links, the user's own models with the sample note, and refused input. Numbers are recomputed with
``hsc_core.evaluation.atlas`` directly."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import numpy as np
import plotly.io
import pytest
from app_support import assert_component_draws_basic_traces, download_rows, open_page, plotly_figures
from conftest import SHARED, random_tree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.evaluation.atlas import load_atlas_table, metric_column, paper_table1, regime_summary  # noqa: E402
from hsc_core.evaluation.model import ModelEvaluation  # noqa: E402
from hsc_core.evaluation.results import RESULT_COLUMNS, to_csv  # noqa: E402

PAGE = "app_pages/model_atlas.py"
AUTHORS = SHARED / "reference" / "authors_models_comparison_full.csv"
needs_authors = pytest.mark.skipif(not AUTHORS.is_file(), reason="the authors' table is not in ../shared/reference")




@pytest.fixture
def results_dir(monkeypatch, tmp_path) -> Path:
    """A results folder holding the project's own results.csv of two small models."""
    h = random_tree(30, seed=5)
    rows = []
    for k, name in enumerate(("mine_a", "mine_b")):
        logits, labels = synthetic_logits(h, n_samples=300, seed=k)
        rows += ModelEvaluation(h, logits, labels, name=name, dataset="imagenet1k").results()
    (tmp_path / "results.csv").write_text(to_csv(rows, RESULT_COLUMNS))
    (tmp_path / "secret.txt").write_text("not a table")
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))
    return tmp_path


@needs_authors
def test_authors_table_by_regime_with_table1_and_your_models(monkeypatch, downloads):
    monkeypatch.setenv("HSC_RESULTS_DIR", str(AUTHORS.parent))
    at = open_page(PAGE, {"atlas": AUTHORS.name, "ts": "1", "regime": "distillation"})
    assert not at.error, [e.value for e in at.error]
    table = load_atlas_table(AUTHORS)
    n_dist = sum("distillation" in r.split(";") for r in table["regimes"])
    assert any("**1,116 models**" in c.value and f"{n_dist:,} of them knowledge distillation" in c.value
               for c in at.caption)
    # the shipped Lite models sit on the same axes, and the page says their sample differs
    assert any("1,705 images" in w.value and "50,000" in w.value for w in at.warning)  # sample note
    got = {(r["rule"], r["ts"]): r for r in download_rows(downloads["dl_atlas_t1"])}
    for want in paper_table1(table):
        row = got[(want["rule"], "true" if want["ts"] else "false")]
        assert float(row["haurc_x1000_mean"]) == pytest.approx(want["haurc_x1000_mean"])
    assert float(got[("climbing", "true")]["haurc_x1000_mean"]) == pytest.approx(36.51, abs=0.05)
    regimes = {r["regime"]: r for r in download_rows(downloads["dl_atlas_regimes"])}
    want = {r["regime"]: r for r in regime_summary(table, rule="climbing", ts=True)}
    assert set(regimes) == set(want)
    assert float(regimes["clip_finetuned"]["haurc_x1000_mean"]) == pytest.approx(
        want["clip_finetuned"]["haurc_x1000_mean"])
    models = download_rows(downloads["dl_atlas_models"])
    assert {r["source"] for r in models} == {"authors", "yours"}
    assert len([r for r in models if r["source"] == "authors"]) == n_dist
    assert all(r["temperature_scaling"] == "on" for r in models)  # self-describing: the export says TS on
    assert len(plotly_figures(at)) == 2
    assert_component_draws_basic_traces(at, "model_atlas")


def test_project_results_from_the_folder_and_refused_paths(results_dir, downloads):
    at = open_page(PAGE, {"atlas": "results.csv"})
    assert not at.error, [e.value for e in at.error]
    assert any("**2 models**" in c.value for c in at.caption)
    assert [r["model"] for r in download_rows(downloads["dl_atlas_models"]) if r["source"] == "project"] == ["mine_a",
                                                                                                    "mine_b"]
    for name, message in (("../../etc/passwd.csv", "outside the results folder"),
                          ("secret.txt", "is not a .csv file"), ("gone.csv", "no such file")):
        at = open_page(PAGE, {"atlas": name})
        assert len(at.error) == 1 and message in at.error[0].value, [e.value for e in at.error]


def _chart(at, k: int = 0):
    """The page's k-th plotly figure, as the browser gets it."""
    return plotly.io.from_json(plotly_figures(at)[k].spec)


def _values(y) -> np.ndarray:
    """A trace's values, also when sent as a typed array ({"dtype", "bdata"}, base64)."""
    if isinstance(y, dict):
        return np.frombuffer(base64.b64decode(y["bdata"]), dtype=y["dtype"])
    return np.asarray(y, dtype=float)


def test_presenter_mode_and_no_table(monkeypatch, tmp_path):
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))  # an empty folder: your models only
    at = open_page(PAGE, {"presenter": "1", "atlas_y": "haurc", "cmp_rule": "selective"})  # hAURC stays selectable
    assert not at.error, [e.value for e in at.error]
    assert any("your models only" in i.value for i in at.info)
    assert at.session_state["atlas_y"] == "haurc"
    assert len(plotly_figures(at)) == 2
    assert_component_draws_basic_traces(at, "model_atlas")
    fig = _chart(at)
    assert fig.layout.yaxis.title.text.startswith("hAURC×1000") and "Selective" in fig.layout.yaxis.title.text
    # the projector's layout: the legend beside the plot (not below it, where the regimes took its height)
    assert fig.layout.legend.orientation == "v" and fig.layout.legend.x > 1


def test_the_default_chart_plots_the_gain_its_sentence_compares(results_dir):
    """Issue 45: the sentence compares the regimes' gains, so the chart opens on the gain, and for
    Selective (gain 0 by definition) on Climbing's, the rule the sentence names."""
    table = load_atlas_table(results_dir / "results.csv")
    for rule, plotted in (("climbing", "climbing"), ("selective", "climbing"), ("jumping", "jumping")):
        at = open_page(PAGE, {"atlas": "results.csv", "cmp_rule": rule})
        assert at.session_state["atlas_y"] == "gain_percent"
        fig = _chart(at)
        assert fig.layout.yaxis.title.text.startswith("gain % (higher: better)")
        got = sorted(float(v) for t in fig.data if t.name != "your models" for v in _values(t.y))
        assert got == pytest.approx(sorted(table[metric_column("gain_percent", plotted, "01", True)]))


@needs_authors
def test_the_atlas_opens_with_which_kind_of_model_gains_most(monkeypatch):
    """Issue 35: the page's first sentence answers "which kind of model?" from the regime means."""
    monkeypatch.setenv("HSC_RESULTS_DIR", str(AUTHORS.parent))
    at = open_page(PAGE, {"atlas": AUTHORS.name, "ts": "1", "cmp_rule": "climbing"})
    table = load_atlas_table(AUTHORS)
    rated = [r for r in regime_summary(table, rule="climbing", ts=True) if r["n_models"] >= 5]
    best = max(rated, key=lambda r: r["gain_percent_mean"])
    lead = next(m.value for m in at.markdown if "Each marker is one of 1,116 models" in m.value)
    assert f"largest for **{best['label']}** models ({best['gain_percent_mean']:.1f} % on average)" in lead
