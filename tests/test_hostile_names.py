"""Names are untrusted: every figure draws them as text, and every error message quotes a bounded
part of them.

Plotly draws a little HTML in trace names, hover text, tick labels, annotations and titles, so a
class called ``<a href=…>`` would be a live link and ``<span style=…>`` a restyled label. Each
figure builder is run here with hostile class, node, model, data-set and subset names (links,
styled spans, bold, text that looks escaped, a 10,000-character name), and every string of the
figure's JSON may hold only the figure's own markup. The browser version (no ``<a>`` in the
story's chart) is in test_hostile_names_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.core.curves import CCCurve  # noqa: E402
from hsc_core.core.hierarchy import Hierarchy  # noqa: E402
from hsc_core.core.probabilities import node_probabilities  # noqa: E402
from hsc_core.core.rules import RULES, decision_paths  # noqa: E402
from hsc_core.core.validation import QUOTE_CHARS, clip, quote  # noqa: E402
from hsc_core.report import export, figures, style  # noqa: E402
from hsc_core.report.sweep import rc_sweep_figure  # noqa: E402
from hsc_core.report.tree_figure import THETA_GRID, record_rows, tree_figure  # noqa: E402

LINK = '<a href="https://x.example">click</a>'
BIG = '<span style="font-size:60px">big</span>'
BOLD = "<b>bold</b>"
LOOKS_ESCAPED = "&lt;b&gt;not a tag&lt;/b&gt; &amp; 100%{y}"
LONG = "x" * 10_000
HOSTILE = [LINK, BIG, BOLD, LOOKS_ESCAPED, LONG]

# The figures' own markup: bold, line breaks, the hover box's <extra>, and the tree's styled notes.
OWN_TAG = re.compile(r"</?b>|<br>|</?extra>|</span>"
                     r"|<span style='(font-size:\d+px(;color:#[0-9A-Fa-f]{6})?|color:#[0-9A-Fa-f]{6})'>")


def hostile_hierarchy() -> Hierarchy:
    """Five leaves (every hostile name) under two internal nodes that are hostile too."""
    parent_of = {"c0": "p1", "c1": "p1", "c2": "p1", "c3": "p2", "c4": "p2", "p1": "r", "p2": "r"}
    names = {f"c{k}": name for k, name in enumerate(HOSTILE)}
    names.update(p1='<a href="https://y.example">parent</a>', p2="<i>p2</i> & <sub>low</sub>", r=BIG)
    return Hierarchy.from_parent_map(parent_of, [f"c{k}" for k in range(5)], names)


@pytest.fixture(scope="module")
def hostile():
    h = hostile_hierarchy()
    leaf_probs = np.array([[0.30, 0.25, 0.05, 0.35, 0.05],   # top-1 c3 (wrong), true c0
                           [0.05, 0.05, 0.10, 0.20, 0.60]])
    probs = node_probabilities(h, leaf_probs)
    paths = {r: decision_paths(h, probs, r) for r in RULES}
    return h, probs, paths


def strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in strings(v)]
    return []


def assert_only_own_markup(fig, must_show: tuple[str, ...] = ()) -> str:
    """Every tag in every string of ``fig`` is the figure's own; no user name is drawn longer than
    the caps; the escaped form of each of ``must_show`` is there. All its strings, one per line."""
    text = fig.to_json()
    found = strings(json.loads(text))
    for s in found:
        for tag in re.findall(r"<[^<>]*>", s):
            assert OWN_TAG.fullmatch(tag), f"foreign markup {tag!r} in {s[:200]!r}"
        assert "<a " not in s and "<span style=\"" not in s and "<i>" not in s and "<sub>" not in s
        assert "x" * (style.HOVER_CHARS + 1) not in s  # the 10,000-character name is cut
    joined = "\n".join(found)
    for name in must_show:
        assert style.plain(name) in joined, name
    return joined


def test_plain_escapes_markup_and_caps_length():
    assert style.plain(LINK) == "&lt;a href=&#34;https://x.example&#34;&gt;click&lt;/a&gt;"
    assert style.plain("it's 100%{y} & more") == "it&#39;s 100&#37;{y} &amp; more"
    assert style.plain(LOOKS_ESCAPED).startswith("&amp;lt;b&amp;gt;")
    assert style.plain("golden retriever") == "golden retriever"  # ordinary names are unchanged
    cut = style.plain(LONG)
    assert len(cut) == style.NAME_CHARS and cut.endswith("…")
    assert style.clip("abcdefghijklmnop · Climbing · TS", 24, tail=16) == "abcdefg… · Climbing · TS"
    assert style.clip("two\nlines") == "two lines"
    assert html.unescape(style.plain(LINK)) == LINK  # Plotly draws exactly the name


def test_tree_figure_draws_names_as_text(hostile):
    h, probs, paths = hostile
    for i, true_leaf in ((0, 0), (1, 4)):
        fig = tree_figure(h, probs[i], record_rows(paths, i), true_leaf, 0.5)
        text = assert_only_own_markup(fig)
        assert "reject (root): &lt;span style=&#34;font-size:60px" in text  # shown (escaped), not dropped
        assert i == 1 or "&lt;a href=&#34;https://" in text
        assert len(fig.frames) == len(THETA_GRID)
    assert fig.layout.width < 3000  # the long name is cut before the width is estimated


def test_path_figure_draws_names_as_text(hostile):
    from dashboard.views import sample_view

    h, probs, paths = hostile
    view = sample_view(h, probs[0], paths, 0, 0.5, true_leaf=0)
    assert_only_own_markup(figures.path_figure(h, view), must_show=(LINK,))


def test_illustration_figure_draws_names_as_text(hostile):
    h, _, _ = hostile
    fig = figures.illustration_figure(h, leaf_name="c0")
    text = assert_only_own_markup(fig)
    assert "&lt;a href=&#34;https://x.example&#34;&gt;click&lt;/a&gt;" in text
    assert "&lt;span" in text and "font-size:60px" in text  # the root's name, as text


def test_story_and_image_bar_charts_draw_names_as_text():
    names = HOSTILE
    assert_only_own_markup(figures.leaf_bars_figure(names, [0.4, 0.2, 0.1, 0.05, 0.01], [False, True] + [False] * 3),
                           must_show=(LINK, BIG, BOLD, LOOKS_ESCAPED))
    fig = figures.top5_figure(names, [0.4, 0.2, 0.1, 0.05, 0.01])
    assert_only_own_markup(fig, must_show=(LINK, BIG))
    # Two names cut to the same text still get two bars.
    fig = figures.top5_figure([LONG, LONG + "y"], [0.6, 0.4])
    assert len(set(fig.data[0].y)) == 2


def context() -> export.ExportContext:
    return export.ExportContext(model=LINK + LONG, dataset=BIG, subset=BOLD, ts=True, temperature=1.2, theta=0.5,
                                 n_samples=10)


def test_rc_cc_and_sweep_figures_keep_context_names_as_text():
    cov = np.linspace(0, 1, 20)
    curves = {r: (cov, 0.2 * cov) for r in RULES}
    haurc = {r: 0.1 for r in RULES}
    points = pd.DataFrame([{"key": r, "rule": r, "θ": 0.5, "coverage": 0.5, "risk": 0.1} for r in RULES])
    rc = figures.titled(figures.rc_figure(curves, haurc, points), "Risk–coverage", context())
    assert_only_own_markup(rc)
    assert "&lt;a href" in rc.layout.title.subtitle.text and len(rc.layout.title.subtitle.text) < 400
    cc = {r: CCCurve(r, np.linspace(0, 1, 5), np.linspace(1, 0, 5), np.full(5, 0.05)) for r in RULES}
    assert_only_own_markup(figures.titled(figures.cc_figure(cc), "Calibration–coverage", context()))
    sweep = rc_sweep_figure(curves, {r: np.column_stack([cov, 0.2 * cov])[: len(THETA_GRID)].repeat(6, 0)[:101]
                                     for r in RULES}, haurc, 0.5)
    assert_only_own_markup(figures.titled(sweep, "Sweep", context()))


def test_compare_and_gain_figures_draw_model_names_as_text():
    cov = np.linspace(0, 1, 10)
    models = {name: (cov, 0.1 * cov) for name in HOSTILE}
    fig = figures.compare_figure(models, {m: 0.01 for m in models})
    assert_only_own_markup(figures.titled(fig, "Compare", context()), must_show=(LINK, BIG, BOLD))
    rows = [{"label": f"{name} · Climbing · TS", "rule": "climbing", "estimate": 1.0, "low": 0.5, "high": 1.5}
            for name in HOSTILE + [LONG + "z"]]
    gain = figures.gain_figure(rows)
    assert_only_own_markup(gain, must_show=(LINK,))
    labels = list(gain.data[0].y)
    assert len(set(labels)) == len(labels)  # the two long names stay two rows
    assert all(label.endswith("· Climbing · TS") or label.endswith(")") for label in labels)


def test_report_figures_escape_names(tmp_path):
    """``hsc report``'s figures take the same path: a hostile model name stays text in its JSON."""
    from hsc_core.evaluation import ModelEvaluation
    from hsc_core.report.html_report import build_report

    h = hostile_hierarchy()
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 5)).astype(np.float32)
    labels = rng.integers(0, 5, 400)
    ev = ModelEvaluation(h, logits, labels, name=LINK, dataset=BIG, sample_ids=np.array([f"s{k}" for k in range(400)]))
    text = build_report([ev], n_resamples=100)
    assert '<a href="https://x.example">' not in text and '<span style="font-size:60px">' not in text


# ---------------------------------------------------------------------------- error messages
def test_quote_keeps_the_start_and_says_how_long():
    assert quote("abc") == "'abc'"
    q = quote("y" * 1_000_000)
    assert q.startswith("'yyyy") and q.endswith("…(1,000,000 characters)") and len(q) < QUOTE_CHARS + 40
    assert clip("z" * 500, 10) == "zzzzzzzzzz…(500 characters)"
    listed = quote([f"name{k}" * 1000 for k in range(100)])
    assert len(listed) < 400 and "100 items" in listed
    assert quote(3.5) == "3.5"


MEGA = "evil" + "n" * 1_000_000


def _message(call) -> str:
    with pytest.raises(Exception) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("case", ["loss", "rule", "protocol", "dataset", "upload", "subset", "registry"])
def test_errors_quote_a_bounded_part_of_a_huge_name(case, tmp_path, monkeypatch):
    """A 1 MB value in an error path: a message under 300 characters that still names its start."""
    from hsc_core.core import protocol, risk, rules

    h = hostile_hierarchy()
    rng = np.random.default_rng(0)
    if case == "loss":
        msg = _message(lambda: risk.sample_loss(h, np.zeros(3, int), np.zeros(3, int), MEGA))
    elif case == "rule":
        msg = _message(lambda: rules.decision_paths(h, node_probabilities(h, np.full((2, 5), 0.2)), MEGA))
    elif case == "protocol":
        msg = _message(lambda: protocol.check_protocol(MEGA))
    elif case == "dataset":
        monkeypatch.setenv("HSC_DATASETS_DIR", str(tmp_path))
        from dashboard import catalog

        msg = _message(lambda: catalog.get_dataset(MEGA))
    elif case == "upload":
        from hsc_core.datasets.logits_io import load_logits_bytes

        msg = _message(lambda: load_logits_bytes(b"not a zip", MEGA + ".npz"))
    elif case == "subset":
        from hsc_core.evaluation import ModelEvaluation

        ev = ModelEvaluation(h, rng.normal(size=(50, 5)), rng.integers(0, 5, 50), name=MEGA,
                             subset=np.zeros(50, bool), subset_name=MEGA)
        msg = _message(lambda: ev.setting(False))
    else:
        from hsc_core.datasets.registry import dataset_for_manifest

        msg = _message(lambda: dataset_for_manifest({"dataset_id": [MEGA] * 5}, 5))
    assert len(msg) < 300, (case, len(msg), msg[:300])
    assert "evilnnn" in msg, msg


# ---------------------------------------------------------------------------- the report button's job
def test_report_job_runs_outside_the_script_thread_and_says_what_failed():
    """``dashboard.report.ReportJob`` is what the download button runs, in a thread of its own:
    it needs nothing from Streamlit; a failure becomes a page that says why; after the session
    ended it says that instead of holding the data."""
    import threading

    from dashboard.report import ENDED, ReportJob
    from hsc_core.evaluation import ModelEvaluation

    h = hostile_hierarchy()
    rng = np.random.default_rng(1)
    logits, labels = rng.normal(size=(300, 5)).astype(np.float32), rng.integers(0, 5, 300)
    good = ReportJob([ModelEvaluation(h, logits, labels, name="tiny_model")], [])
    empty = ModelEvaluation(h, logits, labels, name="empty_model", subset=np.zeros(300, bool), subset_name="none")
    broken = ReportJob([empty], ["other (cannot be read)"])
    out: dict[str, bytes] = {}
    threads = [threading.Thread(target=lambda k=k, j=j: out.__setitem__(k, j()))
               for k, j in (("good", good), ("broken", broken))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert b"tiny_model" in out["good"] and b"could not be built" not in out["good"]
    text = out["broken"].decode()
    assert "could not be built" in text and "no samples to evaluate" in text and "other (cannot be read)" in text
    good.release()
    assert html.escape(ENDED) in good().decode()


# ---------------------------------------------------------------------------- hierarchy files and uploads
NAME = "evil" + "n" * 100_000  # 100 kB: legal in a file (CSV fields may hold 128 kB), far too long for a message


def _hierarchy_cases(tmp_path):
    """Hierarchy files whose error names a huge class or node name: (file name, text, classes)."""
    return {
        "edge cycle": ("e.csv", f"parent,child\n{NAME},b\nb,{NAME}\n", None),
        "own parent": ("e.csv", f"parent,child\nroot,{NAME}\n{NAME},{NAME}\n", None),
        "two parents": ("e.csv", f"parent,child\nroot,a\nroot,c\na,{NAME}\nc,{NAME}\n", None),
        "bad edge row": ("e.csv", f"parent,child\nroot,a,{NAME}\n", None),
        "duplicate class": ("l.csv", f"coarse,fine\nx,{NAME}\ny,{NAME}\n", None),
        "class list mismatch": ("e.csv", "parent,child\nroot,a\nroot,b\n", f"a\n{NAME}\n"),
        "is-a mismatch": ("h.txt", f"root a\nroot {NAME}x\n", f"a\n{NAME}\n"),
        "newick duplicate": ("t.nwk", f"({NAME},{NAME})root;", None),
        "json": ("t.json", json.dumps({"format": "hsc-hierarchy/1", "n_leaves": 2, "nodes": [
            {"id": NAME, "parent": 3}, {"id": "b", "parent": 0}, {"id": "c", "parent": 3},
            {"id": "root", "parent": -1}]}), None),
    }


@pytest.mark.parametrize("case", list(_hierarchy_cases(None)))
def test_hierarchy_errors_quote_a_bounded_part_of_a_huge_name(case, tmp_path):
    """Every reader's error on a file with a 100 kB name stays one short line naming the file."""
    from hsc_core.core.hierarchy import HierarchyError
    from hsc_core.datasets.formats import load_hierarchy

    name, text, classes = _hierarchy_cases(tmp_path)[case]
    tree_file = tmp_path / ("d" * 150) / name  # a long folder name too: the path is clipped
    tree_file.parent.mkdir()
    tree_file.write_text(text)
    class_file = None
    if classes is not None:
        class_file = tmp_path / "classes.txt"
        class_file.write_text(classes)
    with pytest.raises(HierarchyError) as info:
        load_hierarchy(tree_file, class_file)
    msg = str(info.value)
    assert len(msg) <= 1100 and "\n" not in msg, (case, len(msg), msg[:400])
    assert name in msg, msg  # the file is still named (its tail is kept)
    assert "field limit" not in msg and "evilnnn" in msg, msg  # the error is about the name, quoted in part


def test_hierarchy_error_is_bounded_whatever_builds_it():
    """The safety net: a HierarchyError built from many long names is cut, keeping start and end."""
    from hsc_core.core.hierarchy import HierarchyError

    msg = str(HierarchyError("start: " + ", ".join([NAME] * 5) + " :end"))
    assert len(msg) < 1100 and msg.startswith("start: evil") and msg.endswith(" :end")


def test_dataset_upload_errors_are_bounded():
    """The sidebar's 'Add a data set': a huge file name or class name gives a short message."""
    from dashboard import catalog, uploads

    with pytest.raises(catalog.DataError) as info:
        uploads.add_session_dataset("ds", "x" * 100_000 + ".exe", b"a,b\n")
    assert len(str(info.value)) < 300
    with pytest.raises(catalog.DataError) as info:
        uploads.add_session_dataset("ds", "h.csv", f"parent,child\n{NAME},b\nb,{NAME}\n".encode())
    assert len(str(info.value)) <= 1100 and "h.csv" in str(info.value) and "cycle" in str(info.value)
