"""Snapshot links: one dashboard view as a static page at ``/s/<key>``, served by the same
``streamlit run app.py`` process (``app.py`` hands ``routes()`` to ``st.App``).

A page offers its view's link through ``snapshot_views.share_link``: the view (the page, its link's
query parameters and a stamp of the data it shows) is written, under the key of its canonical JSON
(``view_key``), as ``<key>.json`` in the snapshot folder (``SnapshotStore``). The first visit of
``/s/<key>`` builds the page with the builder that page registered (``register``: figures from the
same functions as the live page), keeps it as ``<key>.html.gz`` and serves that from then on.

The folder (``snapshot_store``) is bounded per browser session and in all, so no visitor can expire
another's links; a damaged or symlinked file there is rebuilt or refused, never served. A page's
reply carries a Content-Security-Policy (scripts from this server and the page's own, by its hash;
``frame-ancestors 'self'``) and ``X-Frame-Options``.

What a visitor can send is only the key: it must be ``KEY_LENGTH`` lowercase hex digits, so a link
can never name a file outside the folder (and a symbolic link in it is never followed). A
key without a view, a view whose data changed since the link was made (its stamp differs) or a
build that fails gets a one-sentence HTML page (404 / 410 / 500), never a traceback. Every name in
a page is escaped (``html.escape``; figure JSON with ``<``, ``>``, ``&`` as ``\\uXXXX``).

Plotly's JavaScript (``snapshot_assets``: the basic bundle when a page's figures need no more, else the
plotly package's ``plotly.min.js``) is served gzip-compressed under a name holding its content hash,
with ``Cache-Control: immutable``: a browser fetches it once.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from .snapshot_assets import assets, plotly_src
from .snapshot_store import SnapshotStore, View, is_key

_LOG = logging.getLogger(__name__)

ASSET_PREFIX = "/s/assets/"


def live_url(page: str, params: Mapping[str, str]) -> str:
    """The live page of a view, relative to ``/s/<key>`` (so a server under a base path works too)."""
    query = urlencode(dict(params))
    return f"../{page}" + (f"?{query}" if query else "")


def default_store() -> SnapshotStore:
    """The snapshot folder the environment names (``HSC_SNAPSHOT_DIR``, ``hsc_core.config.snapshot_dir``)."""
    from hsc_core.config import snapshot_dir

    return SnapshotStore(snapshot_dir())


# ---------------------------------------------------------------------------- builders
@dataclass(frozen=True)
class Snapshot:
    """What a snapshot page shows.

    ``headline``: the view's numbers as the live page writes them (markdown: ``**bold**``,
    ``:blue[…]``, line breaks); ``figures``: Plotly figures (their animation frames, slider and
    ▶ Play kept); ``image``: the sample's image (bytes of ``image_type``), when there is one.
    ``theta_texts``: a θ-swept view's θ-dependent text at every θ of its frames (markdown by frame
    name, ``"0.00"`` … ``"1.00"``), shown under the headline for the θ its first figure shows;
    ``theta``: the frame it opens at, unless the link's ``?theta=`` (``param``) names another."""

    title: str
    headline: str
    figures: Sequence[Any] = ()
    caption: str = ""
    image: bytes | None = None
    image_type: str = "image/jpeg"
    image_caption: str = ""
    presenter: bool = False
    theta_texts: Mapping[str, str] | None = None
    theta: str | None = None
    param: str = "theta"


@dataclass(frozen=True)
class Builder:
    """How one page makes its snapshot. ``stamp(params)``: a cheap stamp of the data the view shows
    (a changed file changes it: the link is then stale); ``build(params)``: the ``Snapshot``; ``upload``:
    the session key of the page's file uploader (a link cannot carry an upload: the share box says so)."""

    stamp: Callable[[Mapping[str, str]], str]
    build: Callable[[Mapping[str, str]], Snapshot]
    upload: str | None = None


BUILDERS: dict[str, Builder] = {}


def register(page: str, stamp: Callable[[Mapping[str, str]], str], upload: str | None = None) -> Callable:
    """Decorator: ``build(params) -> Snapshot`` makes the snapshot of ``page`` (its URL path);
    ``upload``: the page's uploader key (``Builder.upload``)."""
    def decorate(build: Callable[[Mapping[str, str]], Snapshot]) -> Callable[[Mapping[str, str]], Snapshot]:
        BUILDERS[page] = Builder(stamp, build, upload)
        return build
    return decorate


class Unavailable(Exception):
    """A view that cannot be shown (its model or sample is gone); the message is one sentence for the visitor."""


# ---------------------------------------------------------------------------- the page
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\\*])\*([^*\s\\](?:[^*\n]*?[^*\s\\])?)\*")  # *text*, not an escaped \*
_COLOUR = re.compile(r":(blue|orange|green|red|gray)\[(.+?)\]")
_MD_ESCAPE = re.compile(r"\\([\\`*{}\[\]<>|~$&_#+\-=.!()])")


def markdown_html(text: str) -> str:
    """The markdown subset the pages' headline text uses, as HTML: everything escaped first.

    >>> markdown_html("**Climbing** → a<b> :blue[**✓ correct**]  \\nnext")
    '<strong>Climbing</strong> → a&lt;b&gt; <span class="blue"><strong>✓ correct</strong></span><br>\\nnext'
    >>> markdown_html(r"subset *val* and 2 \\* 3 \\* 4")
    'subset <em>val</em> and 2 * 3 * 4'
    """
    out = html.escape(text, quote=True)
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    out = _ITALIC.sub(r"<em>\1</em>", out)
    out = _COLOUR.sub(r'<span class="\1">\2</span>', out)
    out = _MD_ESCAPE.sub(r"\1", out)
    return out.replace("  \n", "<br>\n")


def script_json(value: str) -> str:
    """JSON text made safe inside ``<script>``: ``<``, ``>`` and ``&`` as JSON escapes (same value).

    >>> script_json('{"a": "</script>&"}')
    '{"a": "\\\\u003c/script\\\\u003e\\\\u0026"}'
    """
    return value.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_STYLE = """
body{font-family:"Source Sans Pro",system-ui,sans-serif;margin:1rem 2rem;color:#262730;background:#fff}
body.presenter{font-size:19.2px;margin:.5rem 1.5rem}
header{display:flex;gap:1.5rem;align-items:center;flex-wrap:wrap}
h1{font-size:1.8em;margin:.3em 0}
a.open{background:#ff4b4b;color:#fff;padding:.45em 1em;border-radius:.5em;text-decoration:none;font-weight:600}
.caption{color:#808495;font-size:.9em;margin:.2em 0 .8em}
.view{display:flex;gap:1.5rem;align-items:flex-start}
.info{flex:0 0 22%;min-width:12rem}
.info img{max-width:100%;border-radius:.3em}
.figures{flex:1;min-width:0}
.view.text .info{flex:1}.view.text .figures{display:none}
.figure{min-height:300px;outline:none}
.theta-now{color:#1A1A1A;margin:0 0 0 12%;line-height:1.3}
.blue{color:#1c83e1}.orange{color:#d97706}.green{color:#21c354}.red{color:#ff4b4b}.gray{color:#808495}
"""

# Plotly draws each figure, then gets its θ frames; ←/→ (±1 step), Page Up/Down (±10), Home/End
# move the figure's slider (and its frame) like the live page's keys; ▶ Play is the figure's own.
_SCRIPT = """
document.addEventListener("DOMContentLoaded", function () {
  var figs = document.querySelectorAll("div[data-figure]"), left = figs.length;
  function settle() { if (--left <= 0) document.body.setAttribute("data-drawn", "1"); }
  if (!left) settle();
  // A θ-swept view: its θ text follows the first figure's θ, and "Open interactive" carries that θ.
  var textsEl = document.getElementById("theta-texts"), texts = textsEl ? JSON.parse(textsEl.textContent) : null;
  var thetaEl = document.getElementById("theta-text"), open = document.querySelector("a.open"), nowEl = null;
  function showTheta(name) {
    if (!texts || texts[name] === undefined) return;
    thetaEl.innerHTML = texts[name];  // escaped by the server (markdown_html)
    if (nowEl) nowEl.textContent = nowEl.dataset.prefix + name;
    document.body.setAttribute("data-theta", name);
    var url = new URL(open.getAttribute("href"), window.location.href);
    url.searchParams.set(document.body.dataset.param || "theta", name);
    open.setAttribute("href", url.toString());
  }
  var asked = new URLSearchParams(window.location.search).get(document.body.dataset.param || "theta");
  var start = texts && asked !== null && texts[asked] !== undefined ? asked : null;
  if (start !== null) showTheta(start);
  figs.forEach(function (div, n) {
    var fig = JSON.parse(document.getElementById(div.id + "-data").textContent);
    var steps = fig.layout.sliders && fig.layout.sliders[0] && fig.layout.sliders[0].steps;
    if (n === 0 && start !== null && steps) {  // open at the link's θ: its frame's data and the slider
      var k = steps.findIndex(function (s) { return s.value === start; });
      var frame = (fig.frames || []).find(function (f) { return f.name === start; });
      if (k >= 0 && frame) {
        fig.layout.sliders[0].active = k;
        (frame.traces || []).forEach(function (t, j) { Object.assign(fig.data[t], frame.data[j]); });
      }
    }
    // The swept figure's θ is written above it, not by Plotly's slider: Plotly draws and measures every
    // step's label (101 of them, invisible) to size its current value, which cost ~0.15 s of the first draw.
    if (n === 0 && texts && steps && steps.every(function (s) { return texts[s.value] !== undefined; })) {
      var slider = fig.layout.sliders[0], shown = slider.currentvalue || {};
      nowEl = document.createElement("div");
      nowEl.className = "theta-now";
      nowEl.id = "theta-now";
      nowEl.dataset.prefix = shown.prefix || "";
      nowEl.style.fontSize = ((shown.font && shown.font.size) || 16) + "px";
      nowEl.textContent = nowEl.dataset.prefix + steps[slider.active || 0].value;
      div.parentNode.insertBefore(nowEl, div);
      slider.currentvalue = Object.assign({}, shown, {visible: false});
      steps.forEach(function (s) { s.label = ""; });
    }
    // A figure that sets its own width (the tree, sized for the screen it was shared from) keeps it at
    // most, as the live chart does: a narrower screen (a 1280-px laptop in presenter mode) gets it narrower.
    if (fig.layout.width) {
      div.style.maxWidth = fig.layout.width + "px";
      delete fig.layout.width;
      fig.layout.autosize = true;
    }
    Plotly.newPlot(div, fig.data, fig.layout, {displaylogo: false, responsive: true}).then(function () {
      if (n === 0 && texts) div.on("plotly_sliderchange", function (e) { showTheta(e.step.value); });
      return fig.frames ? Plotly.addFrames(div, fig.frames) : null;
    }).then(settle, settle);
    div.addEventListener("keydown", function (e) {
      var s = div.layout.sliders && div.layout.sliders[0];
      if (!s || !s.steps || !s.steps.length) return;
      var count = s.steps.length, i = s.active || 0;
      var to = {ArrowLeft: i - 1, ArrowRight: i + 1, PageDown: i - 10, PageUp: i + 10, Home: 0, End: count - 1}[e.key];
      if (to === undefined) return;
      e.preventDefault();
      to = Math.max(0, Math.min(count - 1, to));
      var step = s.steps[to];
      Plotly.animate(div, step.args[0], {mode: "immediate", frame: {duration: 0, redraw: true},
                                         transition: {duration: 0}});
      Plotly.relayout(div, {"sliders[0].active": to});  // the animation's plotly_sliderchange shows its θ
    });
  });
});
"""


def render_page(snap: Snapshot, live: str, plotly_src: str) -> str:
    """The snapshot page's HTML: title, "Open interactive" (``live``), caption, the image and the
    headline numbers beside the figures. Every text is escaped."""
    esc = functools.partial(html.escape, quote=True)
    figures, data = [], []
    for n, fig in enumerate(snap.figures):
        figures.append(f'<div class="figure" id="fig{n}" data-figure="1" tabindex="0" '
                       f'aria-label="{esc(snap.title)} figure {n + 1}"></div>')
        data.append(f'<script type="application/json" id="fig{n}-data">{script_json(fig.to_json())}</script>')
    image = ""
    if snap.image is not None:
        import base64

        src = f"data:{esc(snap.image_type)};base64,{base64.b64encode(snap.image).decode('ascii')}"
        image = (f'<figure><img src="{src}" alt="{esc(snap.image_caption)}">'
                 f"<figcaption class=\"caption\">{esc(snap.image_caption)}</figcaption></figure>")
    caption = f'<p class="caption">{markdown_html(snap.caption)}</p>' if snap.caption else ""
    swept = ""
    if snap.theta_texts:
        first = next(iter(snap.theta_texts))
        start = snap.theta if snap.theta is not None and snap.theta in snap.theta_texts else first
        swept = (f'<div class="theta-text" id="theta-text" data-testid="theta-text">'
                 f"{markdown_html(snap.theta_texts[start])}</div>")
        data.append('<script type="application/json" id="theta-texts">'
                    + script_json(json.dumps({k: markdown_html(v) for k, v in snap.theta_texts.items()}))
                    + "</script>")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{esc(snap.title)} · snapshot</title><style>{_STYLE}</style>"
        f"<script src=\"{esc(plotly_src)}\" defer></script></head>\n"
        f"<body class=\"{'presenter' if snap.presenter else 'normal'}\" data-theta=\"{esc(snap.theta or '')}\""
        f" data-param=\"{esc(snap.param)}\">\n"
        f"<header><h1>{esc(snap.title)}</h1><a class=\"open\" href=\"{esc(live)}\">Open interactive</a></header>\n"
        f"{caption}\n<div class=\"view{'' if figures else ' text'}\"><div class=\"info\">{image}"
        f"<div class=\"headline\" data-testid=\"headline\">{markdown_html(snap.headline)}</div>{swept}</div>\n"
        f"<div class=\"figures\">{''.join(figures)}</div></div>\n{''.join(data)}\n<script>{_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def message_page(sentence: str, live: str | None = None) -> str:
    """A one-sentence page (a bad, stale or failed snapshot link), with the live page's link if any."""
    link = f' <a href="{html.escape(live, quote=True)}">Open the live page</a>.' if live else ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Snapshot</title>"
            f"<style>{_STYLE}</style></head><body><p>{html.escape(sentence)}{link}</p></body></html>\n")


# ---------------------------------------------------------------------------- serving
@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, body (gzip when ``gzipped``), content type."""

    status: int
    body: bytes
    gzipped: bool = False
    content_type: str = "text/html; charset=utf-8"


def _message(status: int, sentence: str, live: str | None = None) -> Reply:
    return Reply(status, message_page(sentence, live).encode("utf-8"))


_ASSET_SRC = re.compile(rb'<script src="assets/([^"]+)"')


def _page_is_current(page: bytes) -> bool:
    """Whether a kept page (its HTML) was built by this version: its script is the one the page's
    Content-Security-Policy lets run (by hash) and the Plotly bundle it loads is still served. A page kept
    by an older version is built again, instead of a figure that never draws."""
    src = _ASSET_SRC.search(page)
    try:
        served = src is not None and src.group(1).decode("ascii") in assets()
    except OSError:
        served = False
    return served and f"<script>{_SCRIPT}</script>".encode() in page


def snapshot_reply(store: SnapshotStore, key: str) -> Reply:
    """The answer to ``GET /s/<key>``: the (cached) snapshot page, or a one-sentence page."""
    if not is_key(key):
        return _message(404, "This is not a snapshot link: a snapshot link ends in a 20-character key.")
    view: View | None = store.load_view(key)
    builder = BUILDERS.get(view.page) if view is not None else None
    if view is None or builder is None:
        return _message(404, "This snapshot link is unknown or has expired; ask for a new one.")
    live = live_url(view.page, view.params)
    try:
        current = builder.stamp(view.params)
    except Exception:  # noqa: BLE001 - the model's file is gone or unreadable: said in one sentence
        _LOG.info("snapshot %s: no stamp", key, exc_info=True)
        current = None
    if current != view.stamp:
        store.drop_page(key)
        return _message(410, "The data this snapshot showed have changed or are gone since the link was made.", live)
    cached = store.read_page(key, accept=_page_is_current)
    if cached is not None:
        return Reply(200, cached, gzipped=True)
    try:
        snap = builder.build(view.params)
        page = render_page(snap, live, plotly_src(snap.figures))
    except Unavailable as exc:
        return _message(404, str(exc), live)
    except Exception:  # noqa: BLE001 - logged for the operator; the visitor gets one sentence
        _LOG.exception("snapshot %s could not be built", key)
        return _message(500, "This snapshot could not be built; the live page may still work.", live)
    try:
        return Reply(200, store.write_page(key, page), gzipped=True)
    except OSError as exc:  # a full or read-only folder: the page is served, only not kept
        _LOG.warning("snapshot %s: its page could not be kept (%s)", key, exc)
        return Reply(200, page.encode("utf-8"))


def asset_reply(name: str) -> Reply:
    """The answer to ``GET /s/assets/<name>``: a Plotly bundle under its current name, else 404."""
    try:
        asset = assets().get(name)
    except OSError:
        return _message(404, "This file is not here.")
    if asset is None:
        return _message(404, "This file is not here.")
    return Reply(200, asset.gzip_bytes, gzipped=True, content_type="text/javascript; charset=utf-8")


IMMUTABLE = "public, max-age=31536000, immutable"
#: What a snapshot page may load and who may frame it: Plotly from this server, the page's own script (by its
#: hash: no other inline script runs), styles (Plotly sets them inline), its image as a data: URL; framed by
#: this site only.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self' 'sha256-"
    + base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    + "'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "worker-src 'self' blob:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
#: The headers of every snapshot page (and its one-sentence pages).
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Frame-Options": "SAMEORIGIN",
                "Referrer-Policy": "same-origin"}


def _respond(request: Any, reply: Reply, cache_control: str, page: bool = False):
    from starlette.responses import Response

    headers = {"Cache-Control": cache_control, "X-Content-Type-Options": "nosniff", **(PAGE_HEADERS if page else {})}
    body = reply.body
    if reply.gzipped:
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
        else:
            body = gzip.decompress(body)
        headers["Vary"] = "Accept-Encoding"
    return Response(body, status_code=reply.status, media_type=reply.content_type, headers=headers)


def routes(store: Callable[[], SnapshotStore], load_builders: Callable[[], object] | None = None,
           base_path: str = "") -> list:
    """The Starlette routes ``/s/assets/<name>`` and ``/s/<key>`` for ``st.App(routes=…)``.

    ``store`` gives the snapshot folder (read when a request comes, so its variable may be set
    late); ``load_builders`` imports the pages' builders on the first snapshot request (not when
    the server starts); ``base_path``: Streamlit's ``server.baseUrlPath`` (the routes go under it,
    beside the pages, so the pages' relative links reach them)."""
    from starlette.concurrency import run_in_threadpool
    from starlette.routing import Route

    loaded: list[bool] = []

    def build_reply(key: str) -> Reply:
        if not loaded and load_builders is not None:
            load_builders()
            loaded.append(True)
        return snapshot_reply(store(), key)

    async def snapshot(request):
        reply = await run_in_threadpool(build_reply, str(request.path_params.get("key", "")))
        return _respond(request, reply, "no-cache", page=True)

    async def asset(request):
        reply = await run_in_threadpool(asset_reply, str(request.path_params.get("name", "")))
        return _respond(request, reply, IMMUTABLE if reply.status == 200 else "no-cache")

    prefix = "/" + base_path.strip("/") if base_path.strip("/") else ""
    return [Route(prefix + ASSET_PREFIX + "{name}", asset, methods=["GET"]),
            Route(prefix + "/s/{key}", snapshot, methods=["GET"])]
