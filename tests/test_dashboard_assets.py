"""The dashboard's CSS and JavaScript live in dashboard/static/ and reach the page unchanged; the θ-swept
view's server side (``sweep.theta_chart``) gives the view a θ only when something else moved it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from dashboard import assets, presenter, sweep


def _fake_st(session_state: dict, html: list, components: dict) -> SimpleNamespace:
    def component(name, js):
        components[name] = js
        return lambda **kw: None

    return SimpleNamespace(html=html.append, session_state=session_state,
                           components=SimpleNamespace(v2=SimpleNamespace(component=component)))


def test_static_files_are_read_once_and_ship_with_the_package():
    names = {p.name for p in assets.STATIC_DIR.iterdir() if p.is_file()}  # plotly_component/: the chart component
    # no script reads Streamlit's page or another frame's Plotly any more
    assert names == {"presenter.css", "chart_frame.css", "unsized.css", "resized.css", "viewport.js"}
    for name in names:
        assert assets.static_text(name) == (assets.STATIC_DIR / name).read_text(encoding="utf-8")
        assert assets.static_text(name) is assets.static_text(name)  # cached: one read per process
    assert presenter.PRESENTER_CSS == assets.static_text("presenter.css")
    assert "html { font-size: clamp(16px, min(1.5vw, 2.667vh), 48px); }" in presenter.PRESENTER_CSS


def test_no_css_file_looks_like_markup():
    """The CSS reaches the page through ``st.html``, whose sanitiser (DOMPurify) drops a whole ``<style>``
    whose text has a ``<`` before a letter, ``/`` or ``!``: one such comment would switch presenter mode's
    type, the chart frames' style and the floating spinner slot off without a word."""
    import re

    for name in ("presenter.css", "chart_frame.css", "unsized.css", "resized.css"):
        text = assets.static_text(name)
        assert not re.search(r"<[A-Za-z/!]", text), name
    assert re.search(r"<[A-Za-z/!]", "/* Working on <page> */")  # what the check catches


@pytest.mark.parametrize("mode", [(False, False, False), (False, True, True), (True, False, False),
                                  (True, True, False), (True, True, True)])
def test_presenter_style_injects_the_files_text(monkeypatch, mode):
    on, known, resized = mode
    html: list[str] = []
    components: dict[str, str] = {}
    ss = {"_viewport_fresh": resized} if resized else {}
    if known:
        ss["_viewport"] = SimpleNamespace(size="1920x1080")
    monkeypatch.setattr(presenter, "st", _fake_st(ss, html, components))
    monkeypatch.setattr(presenter, "presenter", lambda: on)
    monkeypatch.setattr(presenter, "_viewport_component", None)
    presenter.presenter_style()
    sizing = ("" if not on else assets.static_text("unsized.css") if not known
              else assets.static_text("resized.css") if resized else "")
    if on and known:  # the size this run laid the page out for: what a browser test waits for
        sizing += ":root { --hsc-laid-out: '1920x1080'; }"
    assert html == [f"<style>{assets.static_text('chart_frame.css')}"
                    f"{assets.static_text('presenter.css') if on else ''}{sizing}</style>"]
    # presenter mode: only the viewport probe, with its file's script
    assert components == ({"hsc_viewport": assets.static_text("viewport.js")} if on else {})


class _Figure:
    def to_json(self) -> str:
        return json.dumps({"data": [], "frames": [{"name": n} for n in sweep.THETA_NAMES]})


@pytest.fixture
def view(monkeypatch):
    """``sweep.theta_chart`` against a fake session: each call returns the ``sweep`` data the component got
    and the ``on_change`` callback it was given."""
    ss: dict = {}
    sent: list[dict] = []
    monkeypatch.setattr(sweep, "st", SimpleNamespace(session_state=ss, context=SimpleNamespace(url="")))
    monkeypatch.setattr(sweep, "font_size", lambda: 14)
    monkeypatch.setattr(sweep.state, "get", lambda key: "png")
    monkeypatch.setattr(sweep.plotly_component, "chart",
                        lambda spec, key, config, *, sweep, on_change: sent.append({"sweep": sweep, "cb": on_change}))
    taken: list[float] = []
    fig = _Figure()

    def draw(theta: float) -> dict:
        sweep.theta_chart(fig, key="rc_chart", theta=theta, on_theta=taken.append, name="rc")
        return sent[-1]

    return SimpleNamespace(draw=draw, ss=ss, taken=taken)


def test_the_server_gives_a_theta_again_only_when_something_else_moved_it(view):
    first = view.draw(0.5)["sweep"]
    assert (first["theta"], first["rev"], first["ack"]) == ("0.50", 1, None)
    assert first["names"][0] == "0.00" and first["names"][-1] == "1.00" and len(first["names"]) == 101
    # a rerun at the same θ (another widget moved): the same rev, so the view keeps its own θ
    assert view.draw(0.5)["sweep"]["rev"] == 1
    # the view comes to rest at 0.73: its callback takes it; the next run gives 0.73 with the same rev
    # (nothing for the view to take: it is already there) and acknowledges the rest
    cb = view.draw(0.5)["cb"]
    view.ss["rc_chart"] = {"theta": "0.73", "seq": 17}
    cb()
    assert view.taken == [0.73]
    after = view.draw(0.73)["sweep"]
    assert (after["theta"], after["rev"], after["ack"]) == ("0.73", 1, 17)
    # a button or a link sets θ = 0.5: a new rev, which the view takes when no sweep of its own is going
    moved = view.draw(0.5)["sweep"]
    assert (moved["theta"], moved["rev"], moved["ack"]) == ("0.50", 2, 17)
    # back at rest where the server already is: no new rev either
    cb = view.draw(0.5)["cb"]
    view.ss["rc_chart"] = {"theta": "0.50", "seq": 18}
    cb()
    assert view.draw(0.5)["sweep"]["rev"] == 2 and view.taken == [0.73, 0.5]


@pytest.mark.parametrize("value", [None, "0.5", {"theta": "0.505", "seq": 1}, {"theta": "2.00"}, {"seq": 3}])
def test_a_value_that_is_not_a_views_rest_changes_nothing(view, value):
    cb = view.draw(0.4)["cb"]
    view.ss["rc_chart"] = value
    cb()
    assert view.taken == [] and view.draw(0.4)["sweep"]["rev"] == 1


def test_a_theta_is_given_on_the_grid():
    assert sweep.THETA_NAMES == tuple(f"{k / 100:.2f}" for k in range(101))
