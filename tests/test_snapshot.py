"""Snapshot links (``dashboard.snapshot``): keys, the bounded folder, the page (escaping, figure
frames), stale and bad links, Plotly's asset, the routes as the server runs them, and the shipped
pages' builders against the live pages' numbers."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import re
from pathlib import Path

import plotly.graph_objects as go
import pytest

from dashboard import snapshot, snapshot_assets, snapshot_store
from dashboard.snapshot import Snapshot, SnapshotStore, View

ROOT = Path(__file__).resolve().parent.parent
KEY = "0123456789abcdef0123"


# ---------------------------------------------------------------------------- keys and the folder
@pytest.mark.parametrize("key", [KEY, "f" * 20])
def test_a_key_is_twenty_lowercase_hex_digits(key):
    assert snapshot.is_key(key)


@pytest.mark.parametrize("key", ["", "0123", KEY + "0", KEY.upper(), "../" + KEY[3:], KEY[:19] + "/",
                                 KEY[:19] + "g", KEY[:19] + "\n", None, 12345])
def test_anything_else_is_no_key_and_names_no_file(tmp_path, key):
    assert not snapshot.is_key(key)
    with pytest.raises(ValueError):
        SnapshotStore(tmp_path).path(key, ".json")
    assert SnapshotStore(tmp_path).load_view(key) is None


def test_a_store_path_stays_in_its_folder_and_knows_two_suffixes(tmp_path):
    store = SnapshotStore(tmp_path / "snaps")
    assert store.path(KEY, ".json") == tmp_path / "snaps" / f"{KEY}.json"
    with pytest.raises(ValueError):
        store.path(KEY, "/../../x")


def test_view_key_is_sha256_of_the_canonical_view():
    canonical = '{"page":"explorer","params":{"sample":"a","theta":"0.5"},"stamp":"s"}'
    expected = hashlib.sha256(canonical.encode()).hexdigest()[:20]
    assert snapshot_store.view_key("explorer", {"theta": "0.5", "sample": "a"}, "s") == expected
    assert snapshot_store.view_key("explorer", {"theta": "0.5", "sample": "a"}, "t") != expected  # new data, new key
    assert snapshot_store.view_key("risk_coverage", {"theta": "0.5", "sample": "a"}, "s") != expected


def test_a_view_is_kept_once_and_read_back(tmp_path):
    store = SnapshotStore(tmp_path)
    view = View("explorer", {"theta": "0.5"}, "stamp")
    key = store.save_view(view)
    assert key == view.key and store.save_view(view) == key
    assert store.load_view(key) == view
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_an_edited_or_oversized_view_file_is_not_read(tmp_path):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("explorer", {"theta": "0.5"}))
    path = store.path(key, ".json")
    path.write_text(json.dumps({"page": "explorer", "params": {"theta": "0.9"}, "stamp": ""}))
    assert store.load_view(key) is None  # the file no longer is the view its name says
    path.write_text(json.dumps({"page": "explorer", "params": {"theta": 0.5}, "stamp": ""}))
    assert store.load_view(key) is None  # values are strings
    path.write_text("x" * (snapshot_store.MAX_VIEW_BYTES + 1))
    assert store.load_view(key) is None


def test_the_folder_keeps_the_most_recently_used_views(tmp_path):
    store = SnapshotStore(tmp_path, max_views=3)
    keys = [store.save_view(View("explorer", {"seed": str(n)})) for n in range(3)]
    for n, key in enumerate(keys):
        store.write_page(key, f"<p>{n}</p>")
        os.utime(store.path(key, ".json"), (100 * (n + 1), 100 * (n + 1)))  # keys[0] the oldest
    assert store.load_view(keys[0]) is not None  # a visit makes it the most recently used
    newest = store.save_view(View("explorer", {"seed": "3"}))
    assert sorted(p.name[:20] for p in tmp_path.glob("*.json")) == sorted([keys[0], keys[2], newest])
    assert store.read_page(keys[1]) is None  # its page went with it
    assert gzip.decompress(store.read_page(keys[0])) == b"<p>0</p>"


# ---------------------------------------------------------------------------- the page
def _animated_figure(name: str) -> go.Figure:
    frames = [go.Frame(name=f"{t:.2f}", data=[go.Scatter(x=[0, t], y=[0, t], name=name)]) for t in (0.0, 0.5, 1.0)]
    steps = [{"method": "animate", "label": f.name, "args": [[f.name], {"mode": "immediate"}]} for f in frames]
    return go.Figure(data=[go.Scatter(x=[0, 0.5], y=[0, 0.5], name=name)], frames=frames,
                     layout={"sliders": [{"active": 1, "steps": steps}],
                             "updatemenus": [{"type": "buttons", "buttons": [{"label": "▶ Play", "method": "animate",
                                                                               "args": [None]}]}]})


HOSTILE = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'


def test_every_name_is_escaped_and_the_figure_comes_back_whole():
    snap = Snapshot(HOSTILE, f"**{HOSTILE}**: coverage **0.8598**", (_animated_figure(HOSTILE),), caption=HOSTILE,
                    image=b"\xff\xd8jpeg", image_caption=HOSTILE)
    page = snapshot.render_page(snap, '../explorer?model="><script>', "assets/plotly-x.min.js")
    assert "<script>alert" not in page and "<img src=x" not in page and '"><script>' not in page
    assert page.count("<script") == 3  # Plotly, the figure's JSON, the page's own
    assert "<strong>0.8598</strong>" in page
    data = re.search(r'<script type="application/json" id="fig0-data">(.*?)</script>', page, re.S).group(1)
    fig = json.loads(data)
    assert fig["data"][0]["name"] == HOSTILE  # the JSON escapes decode to the very name
    assert [f["name"] for f in fig["frames"]] == ["0.00", "0.50", "1.00"]
    assert fig["layout"]["sliders"][0]["active"] == 1
    assert fig["layout"]["updatemenus"][0]["buttons"][0]["label"] == "▶ Play"
    assert 'class="open" href="../explorer?model=&quot;&gt;&lt;script&gt;"' in page
    assert 'src="data:image/jpeg;base64,/9hqcGVn"' in page


def test_markdown_html_knows_the_pages_markdown():
    assert snapshot.markdown_html(r"**a\_b** :orange[**✗ wrong**]  " + "\nx < y") == (
        '<strong>a_b</strong> <span class="orange"><strong>✗ wrong</strong></span><br>\nx &lt; y')


# ---------------------------------------------------------------------------- serving
@pytest.fixture
def toy_page(monkeypatch):
    """A registered page "toy": its stamp and a count of its builds."""
    calls = {"builds": 0, "stamp": "v1", "fail": None}

    def stamp(params):
        return calls["stamp"]

    def build(params):
        calls["builds"] += 1
        if calls["fail"] is not None:
            raise calls["fail"]
        return Snapshot("Toy", f"θ = **{params['theta']}**", (_animated_figure("toy"),))

    monkeypatch.setitem(snapshot.BUILDERS, "toy", snapshot.Builder(stamp, build))
    return calls


def _text(reply) -> str:
    return (gzip.decompress(reply.body) if reply.gzipped else reply.body).decode("utf-8")


def _one_sentence(reply) -> str:
    text = _text(reply)
    assert "Traceback" not in text and "Error" not in text
    return re.search(r"<body><p>(.*?)</p>", text, re.S).group(1)


def test_a_link_builds_once_then_serves_its_cached_page(tmp_path, toy_page):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy", {"theta": "0.42"}, "v1"))
    first = snapshot.snapshot_reply(store, key)
    assert first.status == 200 and first.gzipped and "θ = <strong>0.42</strong>" in _text(first)
    assert 'href="../toy?theta=0.42">Open interactive</a>' in _text(first)
    again = snapshot.snapshot_reply(store, key)
    assert again.body == first.body and toy_page["builds"] == 1


@pytest.mark.parametrize("older", ["script", "bundle"])
def test_a_page_kept_by_an_older_version_is_built_again(tmp_path, toy_page, older):
    """A kept page whose script is not the one the Content-Security-Policy allows now (by its hash), or
    whose Plotly bundle is no longer served, would never draw its figure: it is built again."""
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy", {"theta": "0.42"}, "v1"))
    first = _text(snapshot.snapshot_reply(store, key))
    src = re.search(r'<script src="assets/([^"]+)"', first).group(1)
    if older == "script":
        kept = first.replace("document.addEventListener", "window.addEventListener", 1)
    else:
        kept = first.replace(src, "plotly-basic-0000000000000000.min.js")
    assert kept != first
    store.write_page(key, kept)
    again = snapshot.snapshot_reply(store, key)
    assert again.status == 200 and _text(again) == first and toy_page["builds"] == 2
    assert gzip.decompress(store.read_page(key)).decode("utf-8") == first  # the new page is kept
    assert snapshot.snapshot_reply(store, key).body == again.body and toy_page["builds"] == 2


def test_a_stale_link_says_so_and_drops_its_page(tmp_path, toy_page):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy", {"theta": "0.42"}, "v1"))
    assert snapshot.snapshot_reply(store, key).status == 200
    toy_page["stamp"] = "v2"  # the model's file was replaced
    reply = snapshot.snapshot_reply(store, key)
    assert reply.status == 410 and "have changed" in _one_sentence(reply)
    assert 'href="../toy?theta=0.42"' in _text(reply) and store.read_page(key) is None


@pytest.mark.parametrize("key, status, words", [("nothex!", 404, "not a snapshot link"),
                                                ("../../etc/passwd", 404, "not a snapshot link"),
                                                (KEY, 404, "unknown or has expired")])
def test_a_bad_or_unknown_link_gets_one_sentence(tmp_path, key, status, words):
    reply = snapshot.snapshot_reply(SnapshotStore(tmp_path), key)
    assert reply.status == status and words in _one_sentence(reply)


def test_a_failed_build_gets_one_sentence_and_no_traceback(tmp_path, toy_page):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy", {"theta": "0.42"}, "v1"))
    toy_page["fail"] = RuntimeError("secret /home/path detail")
    reply = snapshot.snapshot_reply(store, key)
    assert reply.status == 500 and "could not be built" in _one_sentence(reply)
    assert "secret" not in _text(reply) and store.read_page(key) is None
    toy_page["fail"] = snapshot.Unavailable("The sample this snapshot showed is gone.")
    reply = snapshot.snapshot_reply(store, key)
    assert reply.status == 404 and _one_sentence(reply).startswith("The sample this snapshot showed is gone. <a ")


def test_plotly_is_served_under_its_hash_only():
    asset = snapshot_assets.plotly_asset()
    raw = gzip.decompress(asset.gzip_bytes)
    assert asset.name == f"plotly-{hashlib.sha256(raw).hexdigest()[:16]}.min.js"
    assert len(asset.gzip_bytes) < len(raw) / 2 and b"plotly" in raw[:2000].lower()
    assert snapshot.asset_reply(asset.name).status == 200
    assert snapshot.asset_reply("plotly-0000.min.js").status == 404


def test_a_page_of_scatter_and_bar_figures_gets_the_basic_bundle_and_any_other_the_full_one():
    basic, full = snapshot_assets.basic_asset(), snapshot_assets.plotly_asset()
    assert basic is not None, "plotly.js-basic-dist-min must match the plotly package's plotly.js version"
    raw = gzip.decompress(basic.gzip_bytes)
    assert basic.name == f"plotly-basic-{hashlib.sha256(raw).hexdigest()[:16]}.min.js"
    assert len(raw) <= 1_250_000 and b"Licensed under the MIT license" in raw[:400]
    assert snapshot_assets._version(raw) == snapshot_assets._version(gzip.decompress(full.gzip_bytes))
    lines = go.Figure([go.Scatter(y=[1, 2]), go.Bar(y=[3])], frames=[go.Frame(data=[go.Scatter(y=[2, 1])])])
    assert snapshot.plotly_src([lines]) == f"assets/{basic.name}"
    assert snapshot.plotly_src([lines, go.Figure(go.Histogram(x=[1]))]) == f"assets/{full.name}"
    assert snapshot.plotly_src([go.Figure(frames=[go.Frame(data=[go.Sunburst()])])]) == f"assets/{full.name}"
    assert snapshot.asset_reply(basic.name).status == 200 and snapshot.asset_reply(full.name).status == 200


def test_a_basic_bundle_of_another_plotly_js_version_is_not_used(tmp_path, monkeypatch):
    other = tmp_path / "plotly-basic.min.js"
    other.write_bytes(b"/**\n* plotly.js (basic - minified) v0.0.1\n*/\n")
    monkeypatch.setattr(snapshot_assets, "BASIC_BUNDLE", other)
    snapshot_assets.basic_asset.cache_clear()
    try:
        assert snapshot_assets.basic_asset() is None
        assert snapshot.plotly_src([go.Figure(go.Scatter())]) == f"assets/{snapshot_assets.plotly_asset().name}"
    finally:
        snapshot_assets.basic_asset.cache_clear()


def _get(route_app, path: str, path_params: dict, gzip_ok: bool = True) -> tuple[int, dict, bytes]:
    """One GET through a Starlette route's ASGI app, as uvicorn would send it."""
    sent: list[dict] = []
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"accept-encoding", b"gzip")] if gzip_ok else [], "path_params": path_params,
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80), "root_path": ""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(route_app(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_the_routes_send_compressed_immutable_plotly_and_fresh_pages(tmp_path, toy_page):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy", {"theta": "0.42"}, "v1"))
    loads = []
    asset_route, page_route = snapshot.routes(lambda: store, lambda: loads.append(1))
    assert [asset_route.path, page_route.path] == ["/s/assets/{name}", "/s/{key}"]
    name = snapshot_assets.plotly_asset().name
    status, headers, body = _get(asset_route.app, f"/s/assets/{name}", {"name": name})
    assert status == 200 and headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["content-encoding"] == "gzip" and headers["content-type"].startswith("text/javascript")
    assert body == snapshot_assets.plotly_asset().gzip_bytes
    status, headers, body = _get(page_route.app, f"/s/{key}", {"key": key}, gzip_ok=False)
    assert status == 200 and "content-encoding" not in headers and b"Open interactive" in body
    assert headers["cache-control"] == "no-cache" and loads == [1]  # builders loaded on the first request
    status, _, body = _get(page_route.app, "/s/zz", {"key": "zz"})
    assert status == 404 and b"not a snapshot link" in body
    # Under Streamlit's server.baseUrlPath, beside the pages (whose relative links lead there).
    assert [r.path for r in snapshot.routes(lambda: store, None, "/hsc/")] == ["/hsc/s/assets/{name}", "/hsc/s/{key}"]


def test_streamlit_run_finds_the_app_with_the_snapshot_routes():
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.import_string == "app:app"
    source = (ROOT / "app.py").read_text(encoding="utf-8")
    assert 'if __name__ != "__main__":' in source and "snapshot.routes(" in source


# ---------------------------------------------------------------------------- the shipped pages
needs_logits = pytest.mark.skipif(not (ROOT / "cached_logits" / "efficientnet_lite0.npz").exists(),
                                  reason="no shipped logits")


@needs_logits
def test_risk_coverage_snapshot_holds_the_live_pages_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path))
    from dashboard import snapshot_views

    params = {"model": "efficientnet_lite0", "theta": "0.5", "ts": "1"}
    link = snapshot_views.share_link("risk_coverage", params)
    assert link is not None and re.fullmatch(r"s/[0-9a-f]{20}", link)
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    text = _text(reply)
    assert reply.status == 200
    # The live page's operating points at θ = 0.5 (efficientnet_lite0, TS on), as it writes them.
    assert ("<strong>Selective</strong> at θ = 0.50: coverage <strong>0.8598</strong>, risk <strong>0.1238</strong>"
            in text)
    assert ("<strong>Climbing</strong> at θ = 0.50: coverage <strong>0.9181</strong>, risk <strong>0.1619</strong>"
            in text)
    assert "hAURC×1000 40.428, gain 12.62 %" in text  # Climbing's, as the page's table
    fig = json.loads(re.search(r'id="fig0-data">(.*?)</script>', text, re.S).group(1))
    assert len(fig["frames"]) == 101 and fig["layout"]["sliders"][0]["active"] == 50


@needs_logits
def test_explorer_snapshot_shows_the_sample_and_a_missing_sample_is_one_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path))
    from dashboard import snapshot_views

    sample = "ILSVRC2012_val_00000038.JPEG"
    link = snapshot_views.share_link("explorer", {"model": "efficientnet_lite0", "sample": sample, "theta": "0.5"})
    text = _text(snapshot.snapshot_reply(snapshot_views.store(), link[2:]))
    assert "<strong>True class:</strong> abacus<br>" in text
    assert "<strong>Top-1 leaf:</strong> abacus (p = 0.959)" in text
    assert "<strong>Climbing</strong> → abacus (p = 0.959, coverage 1.000)" in text
    link = snapshot_views.share_link("explorer", {"model": "efficientnet_lite0", "sample": "nope.JPEG"})
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    assert reply.status == 404 and "not among" in _one_sentence(reply)
    assert snapshot_views.share_link("explorer", {"model": "no_such_model"}) is None


@needs_logits
def test_calibration_coverage_snapshot_holds_the_pages_table(tmp_path, monkeypatch):
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path))
    from dashboard import snapshot_views

    link = snapshot_views.share_link("calibration_coverage", {"model": "efficientnet_lite0", "rules": "climbing"})
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    text = _text(reply)
    # efficientnet_lite0, TS on, 15 bins: the layer's cc_summary, as the page's table shows it (4 decimals).
    assert reply.status == 200 and "<strong>Climbing</strong>: ECE at the lowest θ (leaves) 0.0319, max ECE 0.0333, " \
        "coverage at max ECE 0.9586, area under CC curve (lower is better) 0.0072" in text
    assert "<strong>Selective</strong>" not in text  # only the link's rules


@needs_logits
def test_overview_snapshot_holds_the_headline_and_its_intervals(tmp_path, monkeypatch):
    monkeypatch.setenv("HSC_SNAPSHOT_DIR", str(tmp_path))
    from dashboard import snapshot_views

    link = snapshot_views.share_link("", {"model": "efficientnet_lite0"})
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    text = _text(reply)
    # efficientnet_lite0's headline as the live Overview writes it (seeded bootstrap, 1,000 resamples).
    assert reply.status == 200 and "with temperature scaling, Climbing lowers the risk–coverage area by 12.6 % " \
        "(95 % CI 8.1–17.4 %) vs plain selective classification." in text
    assert "efficientnet\\_lite0" not in text and "efficientnet_lite0 · Climbing · TS: gain 12.62 % (95 % interval " \
        "8.06 to 17.43)" in text
    assert text.count('data-figure="1"') == 2  # the illustration and the gain chart
    assert 'href="../?model=efficientnet_lite0">Open interactive' in text
