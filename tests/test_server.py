"""The dashboard's server middleware (dashboard/server.py): a shared link's HTML preloads Plotly.

Unit tests drive ``PreloadPlotly`` with small ASGI apps; the browser test serves the real app
(``streamlit run app.py``, which finds the ``st.App`` in app.py) and checks that Chromium fetches
Plotly's chunk before the websocket opens, i.e. while it loads the rest of the page.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard import server

PAGE = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body><div id=root></div></body></html>"


def call(app, path: str = "/explorer", *, method: str = "GET", headers=()) -> tuple[dict, bytes, list]:
    """Run ``app`` on one request: (response start, whole body, headers the inner app saw)."""
    seen: list = []
    sent: list = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    def inner(scope, receive, send_):  # records the request's headers, then runs ``app``
        seen.extend(scope["headers"])
        return app(scope, receive, send_)

    scope = {"type": "http", "method": method, "path": path, "headers": list(headers)}
    asyncio.run(server.PreloadPlotly(inner)(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start, body, seen


def respond(body: bytes, content_type: bytes, *, chunks: int = 1, extra=()):
    """An ASGI app answering every request with ``body`` in ``chunks`` pieces."""
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                                *extra]})
        step = -(-len(body) // chunks)
        for i in range(chunks):
            await send({"type": "http.response.body", "body": body[i * step:(i + 1) * step],
                        "more_body": i < chunks - 1})
    return app


def test_streamlit_has_one_plotly_chunk_and_it_exists():
    chunk = server.plotly_chunk()
    assert chunk is not None and chunk.startswith("PlotlyChart.") and chunk.endswith(".js")
    from streamlit import file_util
    assert (Path(file_util.get_static_dir()) / "static" / "js" / chunk).stat().st_size > 1_000_000


@pytest.mark.parametrize("chunks", [1, 3])
def test_an_html_page_gets_exactly_one_preload_and_a_right_length(chunks):
    start, body, _ = call(respond(PAGE, b"text/html; charset=utf-8", chunks=chunks))
    tag = f'<link rel="modulepreload" crossorigin href="./static/js/{server.plotly_chunk()}">'.encode()
    assert body.count(tag) == 1
    assert body.index(tag) < body.index(b"</head>")
    assert body.replace(tag + b"\n", b"") == PAGE  # nothing else changes
    lengths = [v for k, v in start["headers"] if k == b"content-length"]
    assert lengths == [str(len(body)).encode()]


def test_the_page_is_asked_for_uncompressed_so_it_can_be_edited():
    _, _, seen = call(respond(PAGE, b"text/html"), headers=[(b"accept-encoding", b"gzip, br"), (b"host", b"x")])
    assert (b"host", b"x") in seen and all(k != b"accept-encoding" for k, _ in seen)


@pytest.mark.parametrize("path", ["/static/js/index.js", "/_stcore/health", "/media/abc.png",
                                  "/component/x/index.html", "/base/static/js/a.js"])
def test_streamlits_own_routes_pass_through_untouched(path):
    start, body, seen = call(respond(PAGE, b"text/html"), path, headers=[(b"accept-encoding", b"gzip")])
    assert body == PAGE and (b"accept-encoding", b"gzip") in seen


@pytest.mark.parametrize("content_type, extra", [(b"application/json", ()), (b"image/png", ()),
                                                 (b"text/html", [(b"content-encoding", b"gzip")])])
def test_other_responses_pass_through_untouched(content_type, extra):
    start, body, _ = call(respond(PAGE, content_type, chunks=2, extra=extra))
    assert body == PAGE
    assert [v for k, v in start["headers"] if k == b"content-length"] == [str(len(PAGE)).encode()]


def test_a_post_and_a_huge_html_pass_through_untouched():
    assert call(respond(PAGE, b"text/html"), method="POST")[1] == PAGE
    huge = b"<html><head></head>" + b"x" * (server._MAX_HTML + 10) + b"</html>"
    assert call(respond(huge, b"text/html", chunks=4))[1] == huge


# ---------------------------------------------------------------------------- the served app, in Chromium
def test_a_shared_link_fetches_plotly_before_the_session_starts(tmp_path):
    from browser_support import chromium, new_page, require_browser, streamlit_server

    sync_api = require_browser()
    with streamlit_server(log_path=tmp_path / "server.log") as url:
        html = urllib.request.urlopen(f"{url}/explorer?theta=0.37", timeout=30).read()
        chunk = server.plotly_chunk()
        assert html.count(f"./static/js/{chunk}".encode()) == 1
        js = urllib.request.urlopen(f"{url}/static/js/{chunk}", timeout=30)
        assert js.status == 200 and int(js.headers["content-length"]) > 1_000_000
        with chromium(sync_api) as browser, new_page(browser, 1280, 720) as pg:
            events: list[tuple[str, float]] = []
            pg.on("request", lambda r: events.append(("plotly", time.perf_counter())) if chunk in r.url else None)
            pg.on("websocket", lambda ws: events.append(("websocket", time.perf_counter())))
            pg.goto(f"{url}/explorer?theta=0.37&pick=rescue")
            pg.wait_for_selector(".st-key-explorer_tree .js-plotly-plot", timeout=120_000)
    order = [name for name, _ in sorted(events, key=lambda e: e[1])]
    assert order[:2] == ["plotly", "websocket"], order
