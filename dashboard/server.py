"""The dashboard's web server: Streamlit's own, plus one middleware that makes shared links fast.

A deep link (``/explorer?theta=0.37``) draws its chart only once the browser has fetched and
compiled Plotly (Streamlit's ``PlotlyChart`` chunk, ≈ 4.7 MB). Streamlit requests that chunk only
when the first chart arrives over the websocket, i.e. after its own front end has loaded and the
session has started, so on a 2-core machine the two waits add up to seconds. ``PreloadPlotly``
adds ``<link rel="modulepreload">`` for the chunk to the page's HTML, so the browser fetches and
compiles it while it loads the rest: the waits overlap. Nothing else in the HTML changes.

``app.py`` hands the middleware to ``st.App``; ``streamlit run app.py`` finds that app and serves it
(Streamlit's ASGI mode), and runs ``app.py`` as the page script in every session as before.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from functools import cache
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Streamlit's own routes and files: never an HTML page, never touched.
_NOT_A_PAGE = re.compile(r"/(static|_stcore|media|component|app/static)(/|$)")
_MAX_HTML = 1 << 20  # Streamlit's index.html is ≈ 7 kB; anything bigger passes through untouched


@cache
def plotly_chunk() -> str | None:
    """The file name of Streamlit's Plotly chunk (``PlotlyChart.<hash>.js``), or None when this
    Streamlit has none (then nothing is preloaded)."""
    from streamlit import file_util

    found = sorted(Path(file_util.get_static_dir(), "static", "js").glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_tags() -> bytes:
    """The tags added before ``</head>``: relative URLs, like the page's own scripts, so they
    resolve under a ``server.baseUrlPath`` too."""
    chunk = plotly_chunk()
    if chunk is None:
        return b""
    return f'<link rel="modulepreload" crossorigin href="./static/js/{chunk}">\n'.encode()


def add_preload(html: bytes) -> bytes:
    """``html`` with the preload tags before its first ``</head>`` (unchanged if it has none).

    >>> add_preload(b"<html><head><title>t</title></head><body></body></html>").count(b"modulepreload") <= 1
    True
    >>> add_preload(b"no head here")
    b'no head here'
    """
    at = html.find(b"</head>")
    return html if at < 0 else html[:at] + preload_tags() + html[at:]


class PreloadPlotly:
    """ASGI middleware: HTML pages get ``add_preload``; every other request passes through as is.

    The page's request goes in without ``Accept-Encoding`` so the HTML comes back uncompressed
    (7 kB) and can be edited; the response's ``Content-Length`` is set to the new length.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or _NOT_A_PAGE.search(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"accept-encoding"]
        start: Message | None = None
        body = bytearray()
        passing = False  # not HTML (or too big): forward the rest unchanged

        async def edit(message: Message) -> None:
            nonlocal start, passing
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    start = message
                else:
                    passing = True
                    await send(message)
                return
            if passing or message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if len(body) > _MAX_HTML:  # not Streamlit's page: give up editing, send what we held
                passing = True
                assert start is not None
                await send(start)
                await send({"type": "http.response.body", "body": bytes(body),
                            "more_body": message.get("more_body", False)})
                return
            if message.get("more_body", False):
                return
            assert start is not None
            new = add_preload(bytes(body))
            kept = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*kept, (b"content-length", str(len(new)).encode())]})
            await send({"type": "http.response.body", "body": new, "more_body": False})

        await self.app(scope, receive, edit)


def middleware() -> list[Any]:
    """The middleware list for ``st.App`` (Starlette ``Middleware`` objects)."""
    from starlette.middleware import Middleware

    return [Middleware(PreloadPlotly)]
