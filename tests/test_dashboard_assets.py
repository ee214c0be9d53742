"""The dashboard's CSS and JavaScript live in dashboard/static/ and reach the page unchanged."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from dashboard import assets, presenter, sweep

# sha256 (first 16 hex digits) and length of what the page received before the CSS and JS moved
# out of the old ui.py's strings: the same text must still arrive.
BEFORE = {
    # (presenter mode, viewport known, just resized) → the <style> block presenter_style injects; issue 29
    # (component on by default): the chart component's iframe is a block, hidden until sized like a chart;
    # presenter mode's help icons at 1 rem; issue 35: presenter.css's "names wrap, never '…'" rules (671 characters);
    # issue 29: presenter.css hides a chart drawn wider than its box (.hsc-oversized), the guard takes no
    # place (283 characters)
    (False, False, False): ("cc97154c4f7139c9", 296),
    (False, True, True): ("cc97154c4f7139c9", 296),
    (True, False, False): ("df68723cc50a494f", 2239),
    (True, True, False): ("8a72800e042f64df", 2048),
    (True, True, True): ("41fd850c309cf706", 2180),
}
VIEWPORT_JS = ("283eb4d829f3d2cb", 480)
CHART_GUARD_JS = ("da6ec22cb71f907f", 1973)
# issue 35: one owner of θ at a time; issue 29: the chart may sit in an iframe; 1.1.1: a stalled tab reloads
SWEEP_JS = ("f323222605fa6e4e", 12797)


def _digest(text: str) -> tuple[str, int]:
    return hashlib.sha256(text.encode()).hexdigest()[:16], len(text)


def _fake_st(session_state: dict, html: list, components: dict) -> SimpleNamespace:
    def component(name, js):
        components[name] = js
        return lambda **kw: None

    return SimpleNamespace(html=html.append, session_state=session_state,
                           components=SimpleNamespace(v2=SimpleNamespace(component=component)))


def test_static_files_are_read_once_and_ship_with_the_package():
    names = {p.name for p in assets.STATIC_DIR.iterdir() if p.is_file()}  # plotly_component/: a component
    assert {"presenter.css", "sweep.css", "unsized.css", "resized.css", "plotly_warm.css", "viewport.js",
            "chart_guard.js", "theta_sweep.js"} <= names
    for name in names:
        assert assets.static_text(name) == (assets.STATIC_DIR / name).read_text(encoding="utf-8")
        assert assets.static_text(name) is assets.static_text(name)  # cached: one read per process
    assert presenter.PRESENTER_CSS == assets.static_text("presenter.css")
    assert "html { font-size: clamp(16px, min(1.5vw, 2.667vh), 48px); }" in presenter.PRESENTER_CSS
    assert ".hsc-stale, .hsc-stale * { visibility: hidden !important; }" in presenter.SWEEP_CSS


@pytest.mark.parametrize("mode", sorted(BEFORE))
def test_presenter_style_injects_the_files_text_as_before(monkeypatch, mode):
    on, known, resized = mode
    html: list[str] = []
    components: dict[str, str] = {}
    ss = {"_viewport_fresh": resized} if resized else {}
    if known:
        ss["_viewport"] = SimpleNamespace(size="1920x1080")
    monkeypatch.setattr(presenter, "st", _fake_st(ss, html, components))
    monkeypatch.setattr(presenter, "presenter", lambda: on)
    monkeypatch.setattr(presenter, "_viewport_component", None)
    monkeypatch.setattr(presenter, "_guard_component", None)
    presenter.presenter_style()
    assert len(html) == 1 and _digest(html[0]) == BEFORE[mode]
    sizing = ("" if not on else assets.static_text("unsized.css") if not known
              else assets.static_text("resized.css") if resized else "")
    assert html[0] == (f"<style>{assets.static_text('sweep.css')}"
                       f"{assets.static_text('presenter.css') if on else ''}{sizing}</style>")
    if on:  # the viewport probe and the chart guard are mounted with their files' scripts
        assert components == {"hsc_viewport": assets.static_text("viewport.js"),
                              "hsc_chart_guard": assets.static_text("chart_guard.js")}
        assert _digest(components["hsc_viewport"]) == VIEWPORT_JS
        assert _digest(components["hsc_chart_guard"]) == CHART_GUARD_JS
    else:
        assert components == {}


def test_sweep_component_gets_the_files_script(monkeypatch):
    components: dict[str, str] = {}
    monkeypatch.setattr(sweep, "st", _fake_st({}, [], components))
    monkeypatch.setattr(sweep, "_sweep_component", None)
    monkeypatch.setattr(sweep, "font_size", lambda: 14)
    monkeypatch.setattr(sweep.state, "get", lambda key: "png")
    sweep.sweep_sync("rc_chart", 0.5, lambda theta: None)
    assert components == {"hsc_theta_sweep": assets.static_text("theta_sweep.js")}
    assert _digest(components["hsc_theta_sweep"]) == SWEEP_JS
