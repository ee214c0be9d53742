"""Teaching views: the Figure-1 tree and its θ frames, the RC sweep, curated samples, the
reject wording, presenter mode and the guided story (unit tests + AppTest)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.core.curves import hierarchical_rc_curve  # noqa: E402
from hsc_core.core.hierarchy import Hierarchy  # noqa: E402
from hsc_core.core.probabilities import node_probabilities  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES, below_theta, decision_paths  # noqa: E402
from hsc_core.report import style  # noqa: E402
from hsc_core.report.sweep import operating_point_grid, rc_sweep_figure  # noqa: E402
from hsc_core.report.tree_figure import (  # noqa: E402
    REJECT,
    T_FILL,
    T_GAUGE,
    T_HEAD,
    T_NODES,
    T_PICKS,
    T_THETA,
    THETA_GRID,
    pick_index,
    record_rows,
    tree_figure,
    tree_layout,
)
from tests.app_support import plotly_figures, view_texts, view_theta  # noqa: E402
from tests.conftest import TOY_LABELS, TOY_LEAF_PROBS  # noqa: E402


@pytest.fixture(scope="module")
def toy_setup():
    h = Hierarchy.from_parents([5, 5, 7, 6, 6, 8, 7, 8, -1], n_leaves=5, node_ids=list("01234ACBR"))
    probs = node_probabilities(h, TOY_LEAF_PROBS)
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    return h, probs, paths


# ---------------------------------------------------------------------------- picks per θ
def test_pick_index_matches_decision_paths_on_the_whole_grid(toy_setup):
    h, probs, paths = toy_setup
    for rule, p in paths.items():
        expected = np.stack([p.predict(float(t))[0] for t in THETA_GRID], axis=1)  # (samples, grid)
        for i in range(probs.shape[0]):
            nodes, values = record_rows(paths, i)[rule]
            got = nodes[pick_index(values, THETA_GRID)]
            assert np.array_equal(got, expected[i]), (rule, i)


def test_toy_sample0_frames_follow_the_definitions(toy_setup):
    """§9 toy, s0 (label 2, top-1 leaf 0 with 0.30): A = 0.35, root = 1. Climbing picks leaf 0
    up to θ = 0.30, A up to 0.35, then the root."""
    h, probs, paths = toy_setup
    fig = tree_figure(h, probs[0], record_rows(paths, 0), int(TOY_LABELS[0]), 0.3)
    assert len(fig.frames) == 101 and [f.name for f in fig.frames[:3]] == ["0.00", "0.01", "0.02"]
    lay = tree_layout(h, probs[0], record_rows(paths, 0), int(TOY_LABELS[0]))
    assert lay.pred_leaf == 0 and lay.lca == 8  # leaf 0 and leaf 2 meet only at the root
    node_trace = fig.data[T_NODES]
    pos = {int(v): (x, y) for v, x, y in zip(lay.nodes, node_trace.x, node_trace.y, strict=True)}
    climbing = list(RULES).index("climbing")
    for name, node in (("0.30", 0), ("0.31", 5), ("0.35", 5), ("0.36", 8)):
        frame = next(f for f in fig.frames if f.name == name)
        picks = frame.data[list(frame.traces).index(T_PICKS)]
        assert picks.y[climbing] == pos[node][1], name
        head = frame.data[list(frame.traces).index(T_HEAD)].text[0]
        assert f"θ = {name}" in head
        if node == 8:
            assert f"Climbing → <b>{REJECT}</b>" in head  # a root prediction is a rejection
        # θ is a tick on every node's probability bar (0 … 1): right of the bar's fill exactly
        # when the node's probability is below θ, as the printed numbers say.
        ticks = np.asarray(frame.data[list(frame.traces).index(T_THETA)].x, dtype=float)[0::3]
        bar = fig.data[T_GAUGE]
        start, end = (np.asarray(bar.x, dtype=float)[k::3] for k in (0, 1))
        fill_end = np.asarray(fig.data[T_FILL].x, dtype=float)[1::3]
        assert ticks == pytest.approx(start + float(name) * (end - start))
        assert np.array_equal(fill_end < ticks, below_theta(probs[0][lay.nodes], float(name)))
    # The slider starts at the page's θ and every step animates its own frame.
    slider = fig.layout.sliders[0]
    assert slider.active == 30 and list(slider.steps[30].args[0]) == ["0.30"]
    assert fig.layout.updatemenus[0].buttons[0].method == "animate"


def test_tree_marks_correctness_by_colour_and_shape(toy_setup):
    h, probs, paths = toy_setup
    fig = tree_figure(h, probs[0], record_rows(paths, 0), 2, 0.5, animate=False)
    lay = tree_layout(h, probs[0], record_rows(paths, 0), 2)
    nodes = lay.nodes.tolist()
    symbols = dict(zip(nodes, fig.data[T_NODES].marker.symbol, strict=True))
    colours = dict(zip(nodes, fig.data[T_NODES].marker.color, strict=True))
    texts = dict(zip(nodes, fig.data[T_NODES].text, strict=True))
    assert symbols[0] == style.WRONG_SYMBOL and colours[0] == style.WRONG_COLOUR and style.WRONG_MARK in texts[0]
    assert symbols[2] == style.CORRECT_SYMBOL and colours[2] == style.CORRECT_COLOUR and style.CORRECT_MARK in texts[2]
    assert REJECT in texts[h.root]
    # The true leaf's branch (B → 2) hangs off the root in the second column.
    assert set(nodes) >= {0, 5, 8, 7, 2}
    assert not fig.frames
    # Every rule has its own colour and shape (Okabe–Ito), also in the picks trace.
    picks = fig.data[T_PICKS]
    assert list(picks.marker.color) == [style.rule_colour(r) for r in RULES]
    assert len(set(picks.marker.symbol)) == len(RULES)


def test_tree_has_its_natural_width_and_full_names():
    """x is in pixels: the figure is as wide as its plot range (plus margins), so no page width
    stretches the columns apart; names up to 32 characters are shown whole."""
    h = Hierarchy.from_parent_map({"American Staffordshire terrier": "terrier", "Staffordshire bullterrier": "terrier",
                                   "terrier": "dog", "a much longer name than any shown in full": "dog"},
                                  ["American Staffordshire terrier", "Staffordshire bullterrier",
                                   "a much longer name than any shown in full"])
    probs = node_probabilities(h, np.array([[0.45, 0.16, 0.39]]))
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    for font in (14, 22):
        fig = tree_figure(h, probs[0], record_rows(paths, 0), 1, 0.5, font_size=font, animate=False)
        lo, hi = fig.layout.xaxis.range
        assert fig.layout.width == int(hi - lo + fig.layout.margin.l + fig.layout.margin.r)
        texts = " ".join(fig.data[T_NODES].text)
        assert "American Staffordshire terrier 0.45" in texts and "Staffordshire bullterrier 0.16" in texts
        node_x = np.asarray(fig.data[T_NODES].x, dtype=float)
        assert lo < node_x.min() and node_x.max() < hi
    # A bigger font (presenter mode) makes a wider figure, not a cramped one.
    small, big = (tree_figure(h, probs[0], record_rows(paths, 0), 1, 0.5, font_size=f, animate=False).layout.width
                  for f in (14, 22))
    assert big > 1.4 * small
    cut = tree_figure(h, probs[0], record_rows(paths, 0), 2, 0.5, animate=False)
    assert "a much longer name than any sho… 0.39" in " ".join(cut.data[T_NODES].text)


def test_layout_leaves_out_only_never_picked_ancestors():
    # r → a → b → c → d → {l0, l1}; c, b, a also hold a leaf with probability 0 (z1, z2, z3), and
    # r → x → {y0, y1}. a, b and c have d's probability (0.9), so no rule can ever pick them
    # (records strictly increase): they are left out and d says so.
    h = Hierarchy.from_parent_map({"l0": "d", "l1": "d", "d": "c", "z1": "c", "c": "b", "z2": "b", "b": "a",
                                   "z3": "a", "a": "r", "y0": "x", "y1": "x", "x": "r"},
                                  ["l0", "l1", "z1", "z2", "z3", "y0", "y1"])
    leaf = np.array([[0.6, 0.3, 0.0, 0.0, 0.0, 0.05, 0.05]])
    probs = node_probabilities(h, leaf)
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    rec = record_rows(paths, 0)
    lay = tree_layout(h, probs[0], rec, true_leaf=1)
    ids = {h.node_ids[v] for v in lay.nodes}
    assert ids == {"r", "d", "l0", "l1"}
    d = h.index_of("d")
    assert lay.folded[d] == 3
    assert (d, h.root) in lay.links  # dotted: levels skipped


# ---------------------------------------------------------------------------- RC sweep
def test_rc_sweep_frames_hold_the_exact_operating_points(toy_setup):
    h, probs, _ = toy_setup
    curves = {r: hierarchical_rc_curve(h, probs, TOY_LABELS, r) for r in RULES}
    points = {r: operating_point_grid(c) for r, c in curves.items()}
    fig = rc_sweep_figure({r: (c.coverage, c.risk) for r, c in curves.items()}, points,
                          {r: c.haurc for r, c in curves.items()}, 0.5)
    assert len(fig.frames) == 101
    for name in ("0.00", "0.42", "1.00"):
        frame = next(f for f in fig.frames if f.name == name)
        for k, rule in enumerate(RULES):
            cov, risk = curves[rule].at(float(name))
            assert frame.data[k].x[0] == pytest.approx(cov, abs=1e-12)
            assert frame.data[k].y[0] == pytest.approx(risk, abs=1e-12)
            assert frame.data[k].hovertemplate.startswith(f"{RULE_LABELS[rule]} at θ = {name}")
    # Each rule: its own colour and dash (no two curves share both).
    styles = {(t.line.color, t.line.dash) for t in fig.data[: len(RULES)]}
    assert len(styles) == len(RULES)
    assert fig.layout.sliders[0].active == 50


# ---------------------------------------------------------------------------- curated samples
def test_curated_rows_follow_their_definitions():
    from dashboard import views
    from hsc_core.core.probabilities import softmax
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.imagenet import imagenet_hierarchy

    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 400, top1=0.6, seed=3)
    probs = node_probabilities(h, softmax(logits))
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    leaf = probs[:, : h.n_leaves].argmax(1)
    conf = probs[np.arange(len(labels)), leaf]
    theta = 0.6
    rows = views.curated_rows(h, paths, labels, leaf, conf, theta)
    climb = paths["climbing"].predict(theta)[0]
    rescue = rows["rescue"]
    assert rescue.size > 0
    for i in rescue:
        assert leaf[i] != labels[i] and climb[i] != h.root and h.is_ancestor(climb[i], labels[i])
    expected = {i for i in range(len(labels)) if leaf[i] != labels[i] and climb[i] != h.root
                and h.is_ancestor(climb[i], labels[i])}
    assert set(rescue.tolist()) == expected
    assert np.all(np.diff(h.depth[climb[rescue]]) <= 0)  # most specific rescue first
    picks = np.stack([paths[r].predict(theta)[0] for r in ("climbing", "jumping", "max_coverage")], axis=1)
    assert set(rows["disagree"].tolist()) == {i for i in range(len(labels)) if len(set(picks[i])) > 1}
    wrong = np.flatnonzero(leaf != labels)
    assert rows["worst"][0] == wrong[np.argmax(conf[wrong])] and set(rows["worst"]) == set(wrong)
    right = np.flatnonzero(leaf == labels)
    assert rows["easy"][0] == right[np.argmax(conf[right])] and set(rows["easy"]) == set(right)
    fig1 = views.figure1_example(h, probs, paths, labels, leaf, conf)
    assert fig1 in set(views.curated_rows(h, paths, labels, leaf, conf, 0.5)["rescue"].tolist())
    assert conf[fig1] < 0.5


# ---------------------------------------------------------------------------- pages (AppTest)
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.datasets.logits_io import save_logits

    d = tmp_path_factory.mktemp("teach_logits")
    h = imagenet_hierarchy()
    logits, labels = synthetic_logits(h, 500, top1=0.7, seed=11)
    save_logits(d / "teach_net.npz", logits, labels, [f"t_{i:04d}.JPEG" for i in range(500)],
                manifest={"model": "teach_net"}, dtype="float32")
    return d


def _charts(at) -> list:
    """The page's charts, drawn by st.plotly_chart or the basic-bundle component (``plotly_figures``)."""
    return plotly_figures(at)


@pytest.fixture
def open_page(monkeypatch, model_dir):
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(model_dir))

    def open_(page: str, query: dict | None = None) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        for k, v in (query or {}).items():
            at.query_params[k] = v
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        return at
    return open_


def _reference(model_dir):
    from hsc_core.core.probabilities import softmax
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.datasets.logits_io import load_logits

    h = imagenet_hierarchy()
    b = load_logits(model_dir / "teach_net.npz")
    probs = node_probabilities(h, softmax(b.logits.astype(np.float64)))
    return h, probs, b.labels, [str(s) for s in b.sample_ids]


def test_explorer_default_shows_climbing_rescuing_a_wrong_leaf(open_page, model_dir):
    at = open_page("app_pages/explorer.py")
    assert at.selectbox(key="_w.ex.pick").value == "rescue"
    h, probs, labels, ids = _reference(model_dir)
    i = ids.index(at.session_state["sample"])
    theta = view_theta(at, "explorer_tree")
    node = int(decision_paths(h, probs[i: i + 1], "climbing").predict(theta)[0][0])
    leaf = int(probs[i, : h.n_leaves].argmax())
    assert leaf != labels[i] and node != h.root and h.is_ancestor(node, int(labels[i]))
    assert any("✗ wrong" in m.value for m in at.markdown)  # the top-1 leaf, with a mark, not colour only
    # The Figure-1-like example: θ = 0.5 and an unsure top-1 leaf.
    [b for b in at.button if b.label == "Figure-1-like example"][0].click().run()
    assert float(at.session_state["theta"]) == 0.5 and at.session_state["pick"] == "rescue"
    j = ids.index(at.session_state["sample"])
    assert probs[j, : h.n_leaves].max() < 0.5


def test_root_prediction_reads_reject(open_page):
    at = open_page("app_pages/explorer.py", {"theta": "1"})
    text = view_texts(at)
    # Selective's only candidates are the leaf and the root: at θ = 1 it abstains.
    assert "**Selective** → **reject (root)**: abstains" in text
    selective = text.split("**Selective**")[1].split("\n")[0]
    assert "correct" not in selective and "wrong" not in selective
    assert "→ entity (" not in text  # the root is never shown as an ordinary answer


@pytest.mark.parametrize("pick", ["disagree", "worst", "easy"])
def test_curated_pickers_pick_matching_samples(open_page, model_dir, pick):
    at = open_page("app_pages/explorer.py", {"pick": pick, "theta": "0.6"})
    h, probs, labels, ids = _reference(model_dir)
    i = ids.index(at.session_state["sample"])
    leaf = int(probs[i, : h.n_leaves].argmax())
    if pick == "disagree":
        nodes = {int(decision_paths(h, probs[i: i + 1], r).predict(0.6)[0][0]) for r in ("climbing", "jumping",
                                                                                          "max_coverage")}
        assert len(nodes) > 1
    elif pick == "worst":
        assert leaf != labels[i]
    else:
        assert leaf == labels[i]
    assert len(_charts(at)) == 1


def test_presenter_mode_tucks_controls_away(open_page):
    at = open_page("app_pages/explorer.py", {"presenter": "1"})
    assert at.session_state["presenter"] is True
    assert "Pick a sample" in [e.label for e in at.expander]
    assert at.query_params["presenter"] in ("1", ["1"])
    # One θ control in both modes: the view's own (its slider, ▶ Play and keys), no page slider.
    assert not [s.key for s in at.slider if s.key and s.key.endswith(".theta")]
    assert view_theta(at, "explorer_tree") == 0.5
    plain = open_page("app_pages/explorer.py")
    assert "Pick a sample" not in [e.label for e in plain.expander]
    assert not [s.key for s in plain.slider if s.key and s.key.endswith(".theta")]
    assert view_theta(plain, "explorer_tree") == 0.5


def test_story_guarantee_uses_the_guaranteed_accuracy_pages_defaults(open_page):
    """Step 5 calibrates on the n, target, confidence and seed that the Guaranteed accuracy page
    opens with (n capped at 90 % of the samples as there), so both show the same θ̂."""
    from dashboard import state

    at = open_page("app_pages/story.py", {"step": "5"})
    text = " ".join(m.value for m in at.markdown)
    n_eval = int(re.search(r"accuracy on the other ([0-9,]+)", " ".join(m.label for m in at.metric)).group(1)
                 .replace(",", ""))
    n = int(re.search(r"Take \*\*([0-9,]+)\*\* labelled", text).group(1).replace(",", ""))
    n_all = n + n_eval
    assert n == min(state.SETTINGS["n"].default, max(20, int(0.9 * n_all)))
    assert f"{state.SETTINGS['acc'].default:.0%}" in text and f"{state.SETTINGS['conf'].default:.0%}" in text


@pytest.mark.parametrize("step", [1, 2, 3, 4, 5])
def test_story_steps_are_deep_linkable(open_page, step):
    at = open_page("app_pages/story.py", {"step": str(step)})
    titles = [s.value for s in at.subheader]
    assert titles and titles[0].startswith(f"{step}. ")
    assert at.query_params["step"] in (str(step), [str(step)])
    if step == 5:
        assert {m.label for m in at.metric} >= {"θ̂", "ε (Theorem 1)"}
    elif step in (2, 3, 4):
        assert len(_charts(at)) == 1
    if step < 5:
        [b for b in at.button if b.label == "Next →"][0].click().run()
        assert at.session_state["step"] == step + 1


def test_story_stays_on_its_step_when_the_step_control_is_emptied(open_page):
    """The step control emptied (its selected segment clicked again, or its value dropped during a
    sweep's rerun) must neither crash the page (it once raised TypeError on None) nor move it."""
    at = open_page("app_pages/story.py", {"step": "3"})
    control = [w for w in at.get("button_group") if w.id and "step" in w.id][0]
    control.set_value(None).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.subheader[0].value.startswith("3. ")


def test_chosen_record_compares_theta_in_the_records_precision():
    """float32(0.7) < 0.7 in float64, yet θ = 0.7 accepts it: chosen_record agrees with predict."""
    from dashboard.views import chosen_record

    h = Hierarchy.from_parents([2, 2, -1], n_leaves=2, node_ids=["a", "b", "R"])
    probs = np.array([[0.7, 0.3, 1.0]], dtype=np.float32)  # leaf a holds float32(0.7) = 0.69999999
    for rule in RULES:
        paths = decision_paths(h, probs, rule)
        assert paths.values.dtype == np.float32
        for theta in (0.7, np.float64(0.7)):  # a NumPy float64 θ too (no promotion to float64 records)
            want_node, want_conf = paths.predict(theta)
            assert chosen_record(paths, 0, theta) == (int(want_node[0]), float(want_conf[0]))
    assert chosen_record(decision_paths(h, probs, "selective"), 0, 0.7)[0] == 0  # the leaf, not the root


def test_counts_read_in_the_right_number():
    from dashboard.widgets import count

    assert count(1, "class") == "1 class" and count(1000, "class") == "1,000 classes"
    assert count(1, "node") == "1 node" and count(0, "node") == "0 nodes"
