"""The rules beyond the paper on the dashboard: selectable where the four are (Risk–Coverage,
Compare, the shared rule list), with numbers recomputed independently from ``hsc_core``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from app_support import download_rows, open_page, plotly_figures, view_texts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.core.curves import gain_on_common_range, rc_curve_from_paths  # noqa: E402
from hsc_core.core.metric_rules import any_decision_paths  # noqa: E402
from hsc_core.core.probabilities import node_probabilities, softmax  # noqa: E402
from hsc_core.core.protocol import calibration_mask  # noqa: E402
from hsc_core.core.rules import RULE_LABELS  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits, save_logits  # noqa: E402
from hsc_core.evaluation.results import GAIN_RANGE_COLUMN  # noqa: E402

pytestmark = pytest.mark.slow  # AppTest runs of whole pages: seconds each

OP_RE = re.compile(r"\*\*(?P<rule>[^*]+)\*\* at θ = (?P<theta>[0-9.]+): coverage \*\*(?P<cov>[0-9.]+)\*\*, "
                   r"risk \*\*(?P<risk>[0-9.]+)\*\*")
NEW = ("hf1", "min_severity", "max_information", "pareto")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cached_logits_new_rules")
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 400, top1=0.7, seed=4)
    save_logits(d / "gamma_net.npz", logits, labels, [f"g{i}" for i in range(400)], manifest={"model": "gamma_net"},
                dtype="float32")
    return d


@pytest.fixture
def use_dir(monkeypatch, model_dir):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(model_dir))
    return model_dir


def _reference(location: Path):
    b = load_logits(location)
    h = imagenet_hierarchy()
    mask = ~calibration_mask(b.labels)
    return h, node_probabilities(h, softmax(b.logits[mask])), b.labels[mask]


def test_risk_coverage_shows_the_new_rules_from_a_link(use_dir):
    at = open_page("app_pages/risk_coverage.py", {"rules": ",".join(("climbing", *NEW)), "theta": "0.6", "ts": "0"})
    assert not at.error, [e.value for e in at.error]
    text = view_texts(at)  # the operating points the swept view shows at its θ
    shown = {m["rule"]: (m["cov"], m["risk"]) for m in OP_RE.finditer(text)}
    assert set(shown) == {RULE_LABELS[r] for r in ("climbing", *NEW)}
    h, probs, labels = _reference(use_dir / "gamma_net.npz")
    for rule in NEW:
        curve = rc_curve_from_paths(h, any_decision_paths(h, probs, rule, pruned=False), labels)
        cov, risk = curve.at(0.6)
        assert shown[RULE_LABELS[rule]] == (f"{cov:.4f}", f"{risk:.4f}"), rule
    table = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    assert list(table["rule"]) == [RULE_LABELS[r] for r in ("climbing", *NEW)]
    hf = rc_curve_from_paths(h, any_decision_paths(h, probs, "hf1", pruned=False), labels)
    got = float(table.loc[table["rule"] == "hF1-optimal", "hAURC×1000"].iloc[0])
    assert got == pytest.approx(1000 * hf.haurc, rel=1e-9)
    assert at.query_params["rules"] in ([",".join(("climbing", *NEW))], ",".join(("climbing", *NEW)))


def _table(at, column: str):
    """The page's table with ``column`` (AppTest does not look dataframes up by key)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_compare_table_has_every_chosen_rule(use_dir, downloads):
    at = open_page("app_pages/compare_models.py", {"cmp_rule": "min_severity", "rules": "climbing,pareto", "ts": "0"})
    assert not at.error and not at.exception
    assert at.selectbox(key="_w.cmp.cmp_rule").value == "min_severity"
    assert at.multiselect(key="_w.cmp.rules").value == ["climbing", "pareto"]
    table = _table(at, "gain %")
    # Selective (the gains' reference) and the chart's rule join the chosen ones, in the rule list's order
    assert list(table["rule"]) == [RULE_LABELS[r] for r in ("selective", "climbing", "min_severity", "pareto")]
    h, probs, labels = _reference(use_dir / "gamma_net.npz")
    sel_curve = rc_curve_from_paths(h, any_decision_paths(h, probs, "selective"), labels)
    for rule in ("min_severity", "pareto"):
        curve = rc_curve_from_paths(h, any_decision_paths(h, probs, rule, pruned=False), labels)
        row = table[table["rule"] == RULE_LABELS[rule]].iloc[0]
        assert float(row["hAURC×1000"]) == pytest.approx(1000 * curve.haurc, rel=1e-9)
        fair = gain_on_common_range(sel_curve, curve)  # issue 34: over the range both curves cover
        assert float(row["gain %"]) == pytest.approx(fair.gain, rel=1e-9)
        assert row[GAIN_RANGE_COLUMN] == (fair.range_text() if fair.restricted else "")
    assert table.loc[table["rule"] == "Severity-optimal", GAIN_RANGE_COLUMN].iloc[0].startswith("coverage 0.")
    # the CSV export has the new rules' columns too
    (csv_row,) = download_rows(downloads["dl_compare"])
    assert float(csv_row["hAURC×1000 Pareto (Valmadre) (no TS)"]) == pytest.approx(
        float(table.loc[table["rule"] == "Pareto (Valmadre)", "hAURC×1000"].iloc[0]))


def test_calibration_coverage_draws_a_new_rule(use_dir, downloads):
    from hsc_core.core.curves import calibration_coverage_curve

    at = open_page("app_pages/calibration_coverage.py", {"rules": "hf1,climbing", "ts": "0", "bins": "10"})
    assert not at.error and not at.exception
    assert at.multiselect(key="_w.cc.rules").value == ["climbing", "hf1"]
    chart = at.get("plotly_chart")[0].proto.spec
    assert "hF1-optimal" in chart and "Climbing" in chart
    table = _table(at, "max ECE")
    assert list(table["rule"]) == ["Climbing", "hF1-optimal"]
    h, probs, labels = _reference(use_dir / "gamma_net.npz")
    cc = calibration_coverage_curve(h, probs, labels, paths=any_decision_paths(h, probs, "hf1", pruned=False),
                                    n_bins=10)
    row = table[table["rule"] == "hF1-optimal"].iloc[0]
    assert float(row["ECE at the lowest θ (leaves)"]) == pytest.approx(float(cc.ece[0]), rel=1e-9)
    assert float(row["max ECE"]) == pytest.approx(float(cc.ece.max()), rel=1e-9)
    points = [r for r in download_rows(downloads["dl_cc_curves"]) if r["rule"] == "hF1-optimal"]
    assert [float(r["ece"]) for r in points] == pytest.approx(cc.ece.tolist(), rel=1e-9)


def test_compare_shows_metrics_beyond_the_paper(use_dir):
    from hsc_core.core.selective_metrics import augrc, oracle_haurc, oracle_moves

    at = open_page("app_pages/compare_models.py", {"cmp_rule": "hf1", "cmp_more": "1", "ts": "0"})
    assert not at.error and not at.exception
    table = _table(at, "excess hAURC×1000")
    h, probs, labels = _reference(use_dir / "gamma_net.npz")
    paths = any_decision_paths(h, probs, "hf1", pruned=False)
    curve = rc_curve_from_paths(h, paths, labels)
    excess = curve.haurc - oracle_haurc(oracle_moves(h, paths, labels))
    row = table[table["rule"] == "hF1-optimal"].iloc[0]
    assert float(row["excess hAURC×1000"]) == pytest.approx(1000 * excess, rel=1e-9)
    leaf = probs[:, : h.n_leaves]
    flat = augrc(leaf.max(1), (leaf.argmax(1) != labels).astype(float))
    assert float(table.loc[table["rule"] == "(arg-max leaf)", "AUGRC×1000"].iloc[0]) == pytest.approx(
        1000 * flat, rel=1e-6)
    assert at.query_params["cmp_more"] in (["1"], "1")


def test_overview_shows_metrics_beyond_the_paper_per_rule(use_dir):
    from hsc_core.core.probabilities import fit_temperature
    from hsc_core.core.selective_metrics import achievable_haurc

    at = open_page("app_pages/overview.py", {"ov_more": "1"})
    assert not at.error and not at.exception
    table = next(d.value for d in at.dataframe if "achievable hAURC×1000" in d.value.columns)
    assert list(table["rule"]) == ["(arg-max leaf)"] + [RULE_LABELS[r] for r in ("selective", "climbing", "jumping",
                                                                                 "max_coverage", *NEW)]
    b = load_logits(use_dir / "gamma_net.npz")
    h = imagenet_hierarchy()
    cal = calibration_mask(b.labels)
    t = fit_temperature(b.logits[cal], b.labels[cal])
    probs = node_probabilities(h, softmax(b.logits[~cal], t))
    curve = rc_curve_from_paths(h, any_decision_paths(h, probs, "max_information", pruned=False), b.labels[~cal])
    got = float(table.loc[table["rule"] == "Information-optimal", "achievable hAURC×1000"].iloc[0])
    assert got == pytest.approx(1000 * achievable_haurc(curve), rel=1e-6)
    # a small set: the values are shown first, then replaced by the same table with its intervals
    ci = [c for c in table.columns if c.endswith("95 % CI")]
    assert "achievable hAURC×1000 95 % CI" in ci
    assert table["achievable hAURC×1000 95 % CI"].iloc[1:].str.match(r"^\[-?\d").all()  # every rule
    assert sum("achievable hAURC×1000" in d.value.columns for d in at.dataframe) == 1


def test_explorer_marks_the_rules_of_the_link(use_dir):
    b = load_logits(use_dir / "gamma_net.npz")
    h, probs, labels = _reference(use_dir / "gamma_net.npz")
    ids = b.sample_ids[~calibration_mask(b.labels)]
    i = 3
    at = open_page("app_pages/explorer.py", {"sample": str(ids[i]), "theta": "0.3",
                                             "rules": "climbing,hf1,min_severity,pareto", "ts": "0"})
    assert not at.error and not at.exception
    table = next(d.value for d in at.dataframe if "node id" in d.value.columns)
    assert list(table["rule"]) == [RULE_LABELS[r] for r in ("climbing", "hf1", "min_severity", "pareto")]
    for rule in ("hf1", "min_severity", "pareto"):
        node, conf = any_decision_paths(h, probs, rule, pruned=False).predict(0.3)
        row = table[table["rule"] == RULE_LABELS[rule]].iloc[0]
        assert row["node id"] == h.node_ids[int(node[i])] and row["confidence"] == pytest.approx(float(conf[i]))
    chart = plotly_figures(at)[0].spec
    assert "hF1-optimal" in chart and "Pareto (Valmadre)" in chart   # the tree's key names every marked rule
