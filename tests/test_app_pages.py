"""Page-level tests of the Streamlit dashboard with ``streamlit.testing.v1.AppTest``.

Every number checked here is recomputed independently with ``hsc_core`` (not through the
dashboard's helpers), so the pages are tested against the library, not against themselves.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from app_support import (
    assert_component_draws_basic_traces,
    open_page,
    plotly_figures,
    rest_view,
    view_texts,
    view_theta,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from dashboard import state  # noqa: E402
from hsc_core.core.curves import hierarchical_rc_curve  # noqa: E402
from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax  # noqa: E402
from hsc_core.core.protocol import calibration_mask  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES, decision_paths  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.core.thresholds import (  # noqa: E402
    climbing_tight_thresholds,
    select_threshold,
    solve_theorem1,
    stratified_split_sampler,
    theorem1_epsilon,
)
from hsc_core.datasets.imagenet import default_image_dir, imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits, save_logits  # noqa: E402

APP = str(ROOT / "app.py")
SHIPPED = ROOT / "cached_logits"
PAGES = {
    "app_pages/overview.py": "Hierarchical Selective Classification",
    "app_pages/explorer.py": "Explorer",
    "app_pages/risk_coverage.py": "Risk–coverage",
    "app_pages/calibration_coverage.py": "Calibration–coverage",
    "app_pages/guaranteed_accuracy.py": "Guaranteed accuracy",
    "app_pages/compare_models.py": "Compare models",
    "app_pages/try_an_image.py": "Try an image",
}
TYPICAL = "RomanPlaud/hierarchical_decision_rules (224x224)"
EASIER = "VeriSilicon/acuity-dataset (227x227)"
TIMEOUT = 180
# Pages open with temperature scaling on (state.SETTINGS["ts"]): the references follow it.
DEFAULT_TS = bool(state.SETTINGS["ts"].default)


# ---------------------------------------------------------------------------- fixtures
def _write_model(path: Path, n: int, seed: int, top1: float = 0.75) -> Path:
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, n, top1=top1, seed=seed)
    sources = np.where(np.arange(n) % 3 == 0, TYPICAL, EASIER)
    ids = [f"img_{seed}_{i:05d}.JPEG" for i in range(n)]
    return save_logits(path, logits, labels, ids, sources=sources, manifest={"model": path.stem}, dtype="float32")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """A cached-logits folder with two small synthetic models."""
    d = tmp_path_factory.mktemp("cached_logits")
    _write_model(d / "alpha_net.npz", 600, seed=1)
    _write_model(d / "beta_net.npz", 450, seed=2, top1=0.65)
    return d


@pytest.fixture(scope="session")
def broken_dir(tmp_path_factory, model_dir) -> Path:
    """Good models plus a corrupt file and a file with the wrong number of classes."""
    d = tmp_path_factory.mktemp("cached_logits_broken")
    for f in model_dir.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    (d / "corrupt_net.npz").write_bytes(b"PK\x03\x04 this is not really a zip archive")
    rng = np.random.default_rng(0)
    save_logits(d / "tenclass_net.npz", rng.normal(size=(20, 10)), rng.integers(0, 10, 20),
                [f"s{i}" for i in range(20)], dtype="float32")
    return d


@pytest.fixture
def use_dir(monkeypatch):
    def use(directory: Path | None):
        monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
        if directory is None:
            monkeypatch.delenv("HSC_CACHED_LOGITS_DIR", raising=False)
        else:
            monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(directory))
    return use


def texts(at: AppTest) -> str:
    """The page's markdown and the text its θ-swept views show at their θ."""
    return "\n".join([m.value for m in at.markdown] + [view_texts(at)])


def frame(at: AppTest, column: str):
    """The first st.dataframe whose table has ``column`` (AppTest elements carry no key)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with column {column!r}")


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


# ---------------------------------------------------------------------------- reference values
def reference(location: Path, subset_tag: str | None = None, ts: bool = DEFAULT_TS):
    """(hierarchy, node_probs, labels, ids, T) as the dashboard should evaluate them: the protocol's
    evaluation split (of the subset), T fitted on the whole file's calibration split."""
    b = load_logits(location)
    h = imagenet_hierarchy()
    mask = np.ones(b.n_samples, bool) if subset_tag is None else b.sources.astype(str) == subset_tag
    cal = calibration_mask(b.labels)
    t = fit_temperature(b.logits[cal], b.labels[cal]) if ts else 1.0
    mask = mask & ~cal
    probs = node_probabilities(h, softmax(b.logits[mask], t))
    return h, probs, b.labels[mask], b.sample_ids[mask], t


OP_RE = re.compile(r"\*\*(?P<rule>[A-Za-z-]+)\*\* at θ = (?P<theta>[0-9.]+): coverage \*\*(?P<cov>[0-9.]+)\*\*, "
                   r"risk \*\*(?P<risk>[0-9.]+)\*\*")


def operating_points(at: AppTest) -> dict[str, tuple[str, str, str]]:
    return {m["rule"]: (m["theta"], m["cov"], m["risk"]) for m in OP_RE.finditer(texts(at))}


# ---------------------------------------------------------------------------- tests
@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_without_errors(page, use_dir, model_dir):
    use_dir(model_dir)
    at = open_page(page)
    assert [t.value for t in at.title] == [PAGES[page]]
    assert not at.error, [e.value for e in at.error]
    # The sidebar (model picker) is there on every page: the page ran inside app.py.
    assert at.selectbox(key="_w.sb.model").value == "alpha_net"
    assert_component_draws_basic_traces(at, Path(page).stem.replace("overview", ""))
    if page == "app_pages/compare_models.py":  # its charts (the gains' under its toggle), by the component
        figs = plotly_figures(at)
        assert figs and all(f.component for f in figs) and figs[0].id.endswith("compare_chart")


def test_a_component_chart_downloads_as_st_plotly_chart_did(use_dir, model_dir):
    """Compare models' chart, drawn by the chart component: its camera button saves the page's file name in
    the format the sidebar chose, as st.plotly_chart's did."""
    use_dir(model_dir)
    for fmt in ("svg", "png"):
        at = open_page("app_pages/compare_models.py", {"fmt": fmt})
        chart = next(f for f in plotly_figures(at) if f.id.endswith("compare_chart"))
        assert chart.component and chart.image["format"] == fmt
        assert chart.image["filename"].startswith("compare_climbing_01"), chart.image


def test_risk_coverage_operating_points_equal_curve_at_theta(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py")
    h, probs, labels, _, _ = reference(model_dir / "alpha_net.npz")
    for theta, loss, dec in [(0.73, "01", "exact"), (0.41, "severity", "exact"), (0.9, "01", "2")]:
        at.radio(key="_w.rc.loss").set_value(loss)
        at.radio(key="_w.rc.dec").set_value(dec)
        rest_view(at, "rc_chart", theta)
        assert not at.exception
        shown = operating_points(at)
        assert set(shown) == {RULE_LABELS[r] for r in RULES}
        for rule in RULES:
            curve = hierarchical_rc_curve(h, probs, labels, rule, loss=loss)
            cov, risk = curve.at(theta)
            assert shown[RULE_LABELS[rule]] == (f"{theta:.2f}", f"{cov:.4f}", f"{risk:.4f}"), (rule, loss, dec)
            if dec == "2":  # the authors' grid curve has the same point at this grid θ
                grid = hierarchical_rc_curve(h, probs, labels, rule, loss=loss, dec=2)
                k = int(np.flatnonzero(np.isclose(grid.thresholds, theta))[0])
                assert (f"{grid.coverage[k]:.4f}", f"{grid.risk[k]:.4f}") == (f"{cov:.4f}", f"{risk:.4f}")
        # The hAURC table shows the same curves' areas.
        table = frame(at, "hAURC×1000")
        climbing = hierarchical_rc_curve(h, probs, labels, "climbing", loss=loss, dec=None if dec == "exact" else 2)
        got = float(table.loc[table["rule"] == "Climbing", "hAURC×1000"].iloc[0])
        assert got == pytest.approx(1000 * climbing.haurc, rel=1e-12)
        assert at.query_params["theta"] in ([f"{theta:g}"], f"{theta:g}")
        # a setting at its default joins the link only once changed (loss 01 is the default)
        assert at.query_params.get("loss", "01") in ([loss], loss)


def test_rule_selection_hides_curves(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py")
    at.multiselect(key="_w.rc.rules").set_value(["climbing"]).run()
    assert set(operating_points(at)) == {"Climbing"}
    assert at.query_params["rules"] in (["climbing"], "climbing")


def test_url_state_is_read_on_load(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py",
                   {"model": "beta_net", "theta": "0.35", "loss": "severity", "rules": "selective,climbing"})
    assert at.selectbox(key="_w.sb.model").value == "beta_net"
    assert view_theta(at, "rc_chart") == pytest.approx(0.35)
    assert at.radio(key="_w.rc.loss").value == "severity"
    h, probs, labels, _, _ = reference(model_dir / "beta_net.npz")
    shown = operating_points(at)
    assert set(shown) == {"Selective", "Climbing"}
    cov, risk = hierarchical_rc_curve(h, probs, labels, "climbing", loss="severity").at(0.35)
    assert shown["Climbing"] == ("0.35", f"{cov:.4f}", f"{risk:.4f}")


def test_bad_url_values_fall_back_to_defaults(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py", {"model": "nope", "theta": "7", "loss": "x", "rules": "zzz"})
    assert not at.exception
    assert at.selectbox(key="_w.sb.model").value == "alpha_net"
    assert view_theta(at, "rc_chart") == pytest.approx(0.5)
    # The page says what it did with the link instead of silently showing something else.
    errors = " ".join(e.value for e in at.error)
    assert "Unknown model **nope**" in errors and "Showing **alpha_net** instead" in errors
    warnings = " ".join(w.value for w in at.warning)  # user values are escaped (dashboard.widgets.plain)
    assert "**theta** = 7 (must be a number from 0 to 1)" in warnings
    assert "**loss** = x (must be one of 01, severity)" in warnings and "**rules** = zzz" in warnings
    assert "Climbing" in operating_points(at)  # and the fallback model works
    # Picking a model clears the notice.
    at.selectbox(key="_w.sb.model").set_value("beta_net").run()
    assert not at.error and not at.warning
    assert at.query_params["model"] in (["beta_net"], "beta_net")


def test_explorer_shows_each_rules_choice(use_dir, model_dir):
    use_dir(model_dir)
    h, probs, labels, ids, _ = reference(model_dir / "alpha_net.npz")
    wrong = np.flatnonzero(probs[:, : h.n_leaves].argmax(1) != labels)
    i = int(wrong[0])
    at = open_page("app_pages/explorer.py", {"sample": str(ids[i]), "theta": "0.2"})
    assert at.query_params["sample"] in ([str(ids[i])], str(ids[i]))
    before = texts(at)
    for theta in (0.2, 0.95):
        if theta != 0.2:
            rest_view(at, "explorer_tree", theta)
            assert not at.exception
        table = frame(at, "node id")
        for rule in RULES:
            node, conf = decision_paths(h, probs, rule).predict(theta)
            row = table[table["rule"] == RULE_LABELS[rule]].iloc[0]
            assert row["node id"] == h.node_ids[int(node[i])], (rule, theta)
            assert row["confidence"] == pytest.approx(float(conf[i]))
            assert row["correct"] == ("yes" if h.is_ancestor(int(node[i]), int(labels[i])) else "no")
    assert texts(at) != before  # the chosen nodes moved up the path
    assert len(plotly_figures(at)) == 1


def test_explorer_unknown_sample_in_link_is_reported(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/explorer.py", {"sample": "no_such_image.JPEG"})
    assert not at.exception
    _, _, _, ids, _ = reference(model_dir / "alpha_net.npz")  # the evaluation split: 540 of 600
    assert any("no_such_image.JPEG" in w.value and f"not among these {len(ids):,} samples" in w.value
               for w in at.warning)
    assert at.session_state["sample"] in set(ids.tolist())


@pytest.mark.parametrize("pick", ["random", "worst", "class"])
def test_explorer_sample_pickers(pick, use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/explorer.py", {"pick": pick})
    assert not at.error
    sample = at.session_state["sample"]
    h, probs, labels, ids, _ = reference(model_dir / "alpha_net.npz")
    i = list(ids).index(sample)
    if pick == "worst":
        conf = probs[np.arange(len(labels)), probs[:, : h.n_leaves].argmax(1)]
        wrong = np.flatnonzero(probs[:, : h.n_leaves].argmax(1) != labels)
        assert i == wrong[np.argmax(conf[wrong])]
        at.number_input(key="_w.ex.rank").set_value(2).run()
        assert at.session_state["sample"] != sample
    elif pick == "random":
        next(b for b in at.button if b.label == "New random sample").click().run()
        assert at.session_state["seed"] == 1
    else:
        cls = at.selectbox(key="_w.ex.cls").value
        assert labels[i] == cls
    assert not at.exception


def test_temperature_scaling_fits_t_on_the_calibration_split(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py")
    at.toggle(key="_w.sb.ts").set_value(True).run()
    assert not at.exception
    h, probs, labels, _, t = reference(model_dir / "alpha_net.npz", ts=True)
    captions = "\n".join(c.value for c in at.caption)
    assert f"T = **{t:.3f}**" in captions
    assert f"{len(labels):,} samples" in captions
    theta = float(view_theta(at, "rc_chart"))
    cov, risk = hierarchical_rc_curve(h, probs, labels, "climbing").at(theta)
    assert operating_points(at)["Climbing"][1:] == (f"{cov:.4f}", f"{risk:.4f}")


def test_subset_picker(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/risk_coverage.py")
    assert set(at.selectbox(key="_w.sb.subset").options) >= {"All samples (600)"}
    at.selectbox(key="_w.sb.subset").set_value("typical").run()
    h, probs, labels, _, _ = reference(model_dir / "alpha_net.npz", subset_tag=TYPICAL)
    assert 160 < len(labels) < 200  # the typical third of 600, less its share of the calibration split
    cov, risk = hierarchical_rc_curve(h, probs, labels, "selective").at(0.5)
    assert operating_points(at)["Selective"] == ("0.50", f"{cov:.4f}", f"{risk:.4f}")


def test_guaranteed_accuracy_values(use_dir, model_dir):
    use_dir(model_dir)
    # the paper's θ̂ (theorem1), one choice away from the default (issue 41), checked by hand here
    at = open_page("app_pages/guaranteed_accuracy.py", {"split_method": "theorem1"})
    at.slider(key="_w.ga.acc").set_value(0.9)
    at.slider(key="_w.ga.conf").set_value(0.8)
    at.slider(key="_w.ga.n").set_value(300)
    at.number_input(key="_w.ga.split_seed").set_value(3).run()
    assert not at.exception
    h, probs, labels, _, _ = reference(model_dir / "alpha_net.npz")
    alpha, delta, n = 0.1, 0.2, 300
    # the decision card's stratified calibration set (one engine: evaluation/threshold.py)
    cal = stratified_split_sampler(labels, n, 3)()
    test = np.setdiff1d(np.arange(len(labels)), cal)
    theta_hat = select_threshold(climbing_tight_thresholds(h, probs, labels)[cal], alpha)
    eps = theorem1_epsilon(n, alpha, delta)
    assert metric(at, "θ̂ (threshold)") == f"{theta_hat:.4f}"
    assert metric(at, "ε") == f"{eps:.4f}"  # the solver's ε for the page's α, n and δ
    nodes, _ = decision_paths(h, probs, "climbing").predict(theta_hat)
    acc = h.is_ancestor(nodes[test], labels[test]).mean()
    assert metric(at, "Hierarchical accuracy") == f"{acc:.4f}"
    assert metric(at, "Hierarchical coverage") == f"{h.coverage[nodes[test]].mean():.4f}"

    # Repetitions: a few, CRC only, so the test stays fast.
    at.slider(key="_w.ga.reps").set_value(20)
    at.multiselect(key="ga_baselines").set_value(["crc"])
    next(b for b in at.button if b.label == "Run repetitions").click().run()
    assert not at.exception
    summary = frame(at, "fraction_within_eps")
    assert len(summary) == 2 and len(at.get("plotly_chart")) == 1

    # Solve for n with the other three fixed.
    at.radio(key="_w.ga.solve").set_value("n").run()
    at.number_input(key="solve_acc").set_value(0.95)
    at.number_input(key="_w.ga.eps").set_value(0.02)
    at.number_input(key="solve_conf").set_value(0.9).run()
    want = solve_theorem1(alpha=0.05, epsilon=0.02, delta=0.1)
    assert metric(at, "n") == f"{want['n']:,}"
    assert at.query_params["solve"] in (["n"], "n")  # the solver's fragment updates the URL too
    assert at.query_params["eps"] in (["0.02"], "0.02")


def _theta_fragment_app():
    """A one-fragment app: the link's settings, and the θ slider in a ``state.fragment`` whose
    callback reruns only that fragment (``st.rerun`` with the fragment's key), as a browser does
    for a widget inside a fragment. Nothing outside the fragment writes the URL."""
    import streamlit as st

    from dashboard import state

    state.init_state()
    st.session_state["full_runs"] = st.session_state.get("full_runs", 0) + 1

    @state.fragment(key="theta_view")
    def theta_view():
        st.session_state["fragment_runs"] = st.session_state.get("fragment_runs", 0) + 1
        state.bind(st.slider, "θ", "theta", scope="t", step=0.01, on_change=lambda: st.rerun("theta_view"))

    theta_view()


def test_fragment_only_theta_change_updates_the_url():
    at = AppTest.from_function(_theta_fragment_app, default_timeout=TIMEOUT)
    at.query_params["theta"] = "0.7"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["theta"] in (["0.7"], "0.7")
    at.slider(key="_w.t.theta").set_value(0.3).run()
    assert not at.exception, [e.value for e in at.exception]
    # Only the fragment ran (app.py's end-of-run write did not happen), and the link has the new θ.
    assert (at.session_state["full_runs"], at.session_state["fragment_runs"]) == (1, 2)
    assert at.query_params["theta"] in (["0.3"], "0.3")


def test_pages_leave_the_url_to_app_and_state_fragment():
    """One owner of the URL: app.py (full runs) and state.fragment (fragment reruns); a page that
    used st.fragment directly would lose the link's update after a slider move."""
    for page in sorted((ROOT / "app_pages").glob("*.py")):
        text = page.read_text(encoding="utf-8")
        assert "write_query_params" not in text and "st.fragment" not in text, page.name


def test_calibration_and_compare_pages(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/calibration_coverage.py")
    assert len(frame(at, "max ECE")) == 4
    at.switch_page("app_pages/compare_models.py").run()
    assert not at.exception
    per_rule = frame(at, "gain %")  # one row per model and rule (the wide table is the CSV)
    table = per_rule[per_rule["rule"] == RULE_LABELS["climbing"]]
    assert list(table["model"]) == ["alpha_net", "beta_net"]
    for name in ("alpha_net", "beta_net"):
        h, probs, labels, _, _ = reference(model_dir / f"{name}.npz")
        want = 1000 * hierarchical_rc_curve(h, probs, labels, "climbing").haurc
        got = float(table.loc[table["model"] == name, "hAURC×1000"].iloc[0])
        assert got == pytest.approx(want, rel=1e-12)


def test_overview_table(use_dir, model_dir):
    use_dir(model_dir)
    at = open_page("app_pages/overview.py")
    table = frame(at, "top-1 accuracy")
    assert list(table["model"]) == ["alpha_net", "beta_net"]
    b = load_logits(model_dir / "alpha_net.npz")
    h, probs, labels, _, t = reference(model_dir / "alpha_net.npz", ts=True)
    h0, probs0, labels0, _, _ = reference(model_dir / "alpha_net.npz", ts=False)
    ev = ~calibration_mask(b.labels)
    assert float(table["top-1 accuracy"].iloc[0]) == pytest.approx(
        (b.logits[ev].argmax(1) == b.labels[ev]).mean())
    assert float(table["T"].iloc[0]) == pytest.approx(t)
    assert int(table["n_eval"].iloc[0]) == len(labels) == len(labels0) == int(ev.sum())
    # One row per (model, rule, TS), both settings on the same evaluation split.
    rules = frame(at, "hAURC×1000 95 % CI")
    assert len(rules) == 2 * 2 * len(RULES)
    sel = {tag: hierarchical_rc_curve(h, p, y, "selective").haurc for tag, p, y in
           (("on", probs, labels), ("off", probs0, labels0))}
    for rule in RULES:
        for tag, p, y in (("on", probs, labels), ("off", probs0, labels0)):
            row = rules[(rules["model"] == "alpha_net") & (rules["rule"] == RULE_LABELS[rule])
                        & (rules["TS"] == tag)].iloc[0]
            haurc = hierarchical_rc_curve(h, p, y, rule).haurc
            assert row["hAURC×1000"] == pytest.approx(1000 * haurc, rel=1e-12), (rule, tag)
            assert row["gain %"] == pytest.approx(100 * (sel[tag] - haurc) / sel[tag], rel=1e-9, abs=1e-12)
    assert sorted(d.label for d in at.get("download_button")) == [
        "Download report (HTML)", "Download table (CSV)", "Everything, one row per model (CSV)",
        "Report of every model (HTML)"]


def test_broken_files_show_errors_and_others_keep_working(use_dir, broken_dir):
    use_dir(broken_dir)
    at = open_page("app_pages/risk_coverage.py")
    models = at.selectbox(key="_w.sb.model").options
    assert {"alpha_net", "beta_net", "corrupt_net", "tenclass_net"} <= set(models)
    assert not at.error
    # A corrupt file is an error; logits that do not say their data set ask for it (an info, the name once).
    for bad, phrase, kind in (("corrupt_net", "not a valid .npz", "error"), ("tenclass_net", "10 classes", "info")):
        at.selectbox(key="_w.sb.model").set_value(bad).run()
        assert not at.exception, [e.value for e in at.exception]
        shown = " ".join(e.value for e in getattr(at, kind))
        assert phrase in shown and bad in shown, shown
        assert not operating_points(at)
        if kind == "info":
            assert "pick its data set in the sidebar" in shown and shown.count(bad) == 1 and not at.error
    at.selectbox(key="_w.sb.model").set_value("beta_net").run()
    assert not at.exception and not at.error
    assert "Climbing" in operating_points(at)
    # The overview and the comparison list the broken files and still show the good ones.
    at.switch_page("app_pages/overview.py").run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    infos = " ".join(e.value for e in at.info)
    assert len(at.error) == 1 and "corrupt_net" in errors, errors  # one line per broken file, not two
    assert "tenclass_net" in errors + infos
    assert list(frame(at, "top-1 accuracy")["model"]) == ["alpha_net", "beta_net"]
    assert set(frame(at, "hAURC×1000 95 % CI")["model"]) == {"alpha_net", "beta_net"}
    at.switch_page("app_pages/compare_models.py").run()
    assert not at.exception
    assert list(frame(at, "top-1 accuracy")["model"]) == ["alpha_net", "beta_net"]


def test_upload_npz_adds_a_model(use_dir, model_dir, tmp_path):
    use_dir(model_dir)
    path = _write_model(tmp_path / "gamma_net.npz", 300, seed=5)
    at = open_page("app_pages/risk_coverage.py")
    at.file_uploader(key="_npz_upload").upload("gamma_net.npz", path.read_bytes()).run()
    assert not at.exception
    assert at.selectbox(key="_w.sb.model").value == "gamma_net"
    assert "gamma_net" in at.selectbox(key="_w.sb.model").options
    h, probs, labels, _, _ = reference(path)
    cov, risk = hierarchical_rc_curve(h, probs, labels, "climbing").at(0.5)
    assert operating_points(at)["Climbing"] == ("0.50", f"{cov:.4f}", f"{risk:.4f}")
    # A bad upload: an error in the sidebar, the model list is unchanged, the page still works.
    at2 = open_page("app_pages/risk_coverage.py")
    at2.file_uploader(key="_npz_upload").upload("junk.npz", b"definitely not numpy").run()
    assert not at2.exception
    msg = " ".join(e.value for e in at2.sidebar.error)
    assert "Cannot add **junk.npz**: not a valid .npz file" in msg
    assert "hsc_upload_" not in msg  # named as the user named it, not by its temp path
    assert "junk" not in at2.selectbox(key="_w.sb.model").options
    assert "Climbing" in operating_points(at2)
    # A text file (issue 35: Streamlit's type filter showed a red icon and no words): one sentence.
    at3 = open_page("app_pages/risk_coverage.py")
    at3.file_uploader(key="_npz_upload").upload("notes.txt", b"0.1 0.2 0.7").run()
    assert not at3.exception
    assert " ".join(e.value for e in at3.sidebar.error) == (
        "Cannot add **notes.txt**: a logits file is a .npz archive (written by hsc cache-logits), not a .txt file")


def test_try_an_image_without_torch_says_how_to_install_it(use_dir, model_dir, monkeypatch):
    """`pip install 'hsc-toolkit[dashboard]'` has no torch: the page says how to add it, no traceback."""
    for name in ("torch", "timm", "torchvision"):
        monkeypatch.setitem(sys.modules, name, None)  # `import torch` now fails as if it were not installed
    for name in [m for m in sys.modules if m.startswith("hsc_core.pipeline.")]:
        monkeypatch.delitem(sys.modules, name)  # imported by earlier tests: the page must not reuse them
    use_dir(model_dir)
    at = open_page("app_pages/try_an_image.py")
    assert not at.exception and not at.error, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Try an image"]
    info = [i.value for i in at.info]
    assert len(info) == 1 and "pip install 'hsc-toolkit[pipeline]'" in info[0], info
    assert "pip install -r requirements.txt" in info[0]
    assert "img_upload" not in [u.key for u in at.file_uploader]  # the page stopped right there


def test_try_an_image_rejects_unreadable_upload(use_dir, model_dir):
    pytest.importorskip("torch")
    pytest.importorskip("timm")
    use_dir(model_dir)
    at = open_page("app_pages/try_an_image.py")
    at.file_uploader(key="img_upload").upload("cat.png", b"\x89PNG\r\n\x1a\n broken", "image/png").run()
    assert not at.exception
    assert any(e.value.startswith("cat.png: cannot read image") for e in at.error)
    # A text file renamed .jpg: one clear sentence naming the file.
    at.file_uploader(key="img_upload").upload("notes.jpg", b"just some text\n", "image/jpeg").run()
    assert not at.exception
    msg = " ".join(e.value for e in at.error)
    assert msg.startswith("notes.jpg: cannot read image (not in a format Pillow can decode"), msg


def test_try_an_image_classifies(use_dir, model_dir):
    pytest.importorskip("timm")
    image_dir = default_image_dir()
    if image_dir is None:
        from PIL import Image

        buf = io.BytesIO()
        Image.new("RGB", (64, 48), (200, 120, 40)).save(buf, format="PNG")
        name, payload = "orange.png", buf.getvalue()
    else:
        f = sorted(image_dir.iterdir())[0]
        name, payload = f.name, f.read_bytes()
    use_dir(model_dir)
    at = open_page("app_pages/try_an_image.py")
    at.file_uploader(key="img_upload").upload(name, payload, "image/jpeg").run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    if at.error:
        pytest.skip(f"model unavailable here: {at.error[0].value}")
    top5 = frame(at, "probability")
    assert len(top5) == 5 and top5["probability"].is_monotonic_decreasing
    assert "wnid" not in top5.columns  # the narrow column shows every probability (issue 35); the CSV has wnids
    before = texts(at)
    rest_view(at, "img_tree", 1.0)
    assert "**Climbing** → **reject (root)**: abstains" in texts(at) and texts(at) != before


@pytest.mark.skipif(not (SHIPPED / "efficientnet_lite0.npz").exists(), reason="shipped cached logits not present")
def test_shipped_data_is_the_default(use_dir):
    use_dir(None)
    at = open_page("app_pages/risk_coverage.py")
    assert at.selectbox(key="_w.sb.model").value == "efficientnet_lite0"
    subsets = at.selectbox(key="_w.sb.subset")
    assert any("594" in x for x in subsets.options) and any("1,300" in x for x in subsets.options)
    h, probs, labels_, _, _ = reference(SHIPPED / "efficientnet_lite0.npz")
    cov, risk = hierarchical_rc_curve(h, probs, labels_, "climbing").at(0.5)
    assert operating_points(at)["Climbing"] == ("0.50", f"{cov:.4f}", f"{risk:.4f}")
    # θ = 1: every rule predicts the root. The exact curve's running sums leave a −1e-13 there,
    # which the page must not print as "-0.0000".
    rest_view(at, "rc_chart", 1.0)
    assert all(v == ("1.00", "0.0000", "0.0000") for v in operating_points(at).values()), operating_points(at)
    assert "-0.0000" not in texts(at)
    rest_view(at, "rc_chart", 0.5)
    at.selectbox(key="_w.sb.subset").set_value("typical").run()
    h, probs, labels_, _, _ = reference(SHIPPED / "efficientnet_lite0.npz", subset_tag=TYPICAL)
    assert 500 < len(labels_) < 594  # the typical images outside the calibration split
    cov, risk = hierarchical_rc_curve(h, probs, labels_, "climbing").at(0.5)
    assert operating_points(at)["Climbing"] == ("0.50", f"{cov:.4f}", f"{risk:.4f}")


def test_synthetic_mode_is_opt_in(monkeypatch, use_dir, model_dir):
    use_dir(model_dir)
    monkeypatch.setenv("HSC_SYNTHETIC", "1500")
    at = open_page("app_pages/explorer.py")
    assert at.selectbox(key="_w.sb.model").options == ["synthetic-1500"]
    assert any("Synthetic data" in w.value for w in at.sidebar.warning)
    for page in ("app_pages/risk_coverage.py", "app_pages/overview.py"):
        at.switch_page(page).run()
        assert not at.exception and not at.error


def test_page_file_runs_standalone(use_dir, model_dir):
    """AppTest.from_file on a page file (no app.py) still gets the sidebar and state."""
    use_dir(model_dir)
    at = AppTest.from_file(str(ROOT / "app_pages" / "risk_coverage.py"), default_timeout=TIMEOUT).run()
    assert not at.exception and [t.value for t in at.title] == ["Risk–coverage"]
    rest_view(at, "rc_chart", 0.6)
    h, probs, labels, _, _ = reference(model_dir / "alpha_net.npz")
    cov, risk = hierarchical_rc_curve(h, probs, labels, "climbing").at(0.6)
    assert operating_points(at)["Climbing"] == ("0.60", f"{cov:.4f}", f"{risk:.4f}")


def test_a_fresh_explorer_link_names_only_what_differs_and_a_full_old_link_still_opens(use_dir, model_dir):
    """Issue 35: shared links of about 1,100 characters. A setting at its default joins the link only once
    changed; an old link naming every setting at its default opens the same view."""
    from urllib.parse import urlencode

    from dashboard.state import SETTINGS

    use_dir(model_dir)
    at = open_page("app_pages/explorer.py")
    fresh = {k: v for k, v in at.query_params.items()}
    assert "g_methods" not in fresh and "trees" not in fresh and "rules" not in fresh, fresh
    assert len(urlencode(fresh, doseq=True)) < 150, fresh
    sample = fresh["sample"]
    rest_view(at, "explorer_tree", 0.7)
    assert at.query_params["theta"] in (["0.7"], "0.7")
    rest_view(at, "explorer_tree", 0.5)  # back to the default: stays in the link, now 0.5
    assert at.query_params["theta"] in (["0.5"], "0.5")
    old = {k: s.encode(s.default) for k, s in SETTINGS.items() if s.default is not None}
    assert len(urlencode(old)) > 700  # what every link used to carry
    again = open_page("app_pages/explorer.py", {**old, "sample": sample})
    assert not again.exception and view_theta(again, "explorer_tree") == pytest.approx(0.5)
    assert again.query_params["sample"] in ([sample], sample) and texts(again) == texts(open_page(
        "app_pages/explorer.py", {"sample": sample}))
