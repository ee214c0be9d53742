"""The snapshot folder under attack (issue 42, items 5 and 7): one visitor cannot expire another's links
(a per-session quota, opened links kept, the folder's bound), a truncated or symlinked page is rebuilt
(never a 500 or a traceback), a damaged view is a one-sentence 404, and every snapshot page carries a
Content-Security-Policy with ``frame-ancestors``."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import re

import pytest

from dashboard import snapshot, snapshot_store
from dashboard.snapshot import Snapshot
from dashboard.snapshot_store import SnapshotStore, View


@pytest.fixture
def builds(monkeypatch):
    """A registered page "toy42" (no figures: no Plotly needed); counts its builds."""
    calls = {"builds": 0}

    def build(params):
        calls["builds"] += 1
        return Snapshot("Toy", f"θ = **{params['theta']}**")

    monkeypatch.setitem(snapshot.BUILDERS, "toy42", snapshot.Builder(lambda params: "v1", build))
    return calls


def _views(store: SnapshotStore, owner: str | None, n: int, start: int = 0) -> list[str]:
    return [store.save_view(View("toy42", {"theta": f"{owner}-{k}"}, "v1"), owner=owner)
            for k in range(start, start + n)]


def _alive(store: SnapshotStore, keys: list[str]) -> int:
    return sum(store.path(k, ".json").is_file() for k in keys)


# ---------------------------------------------------------------------------- item 5: no visitor evicts another's links
def test_one_sessions_flood_removes_only_its_own_unopened_views(tmp_path):
    store = SnapshotStore(tmp_path, max_views=1000, session_views=5)
    mine = _views(store, "alice", 3)
    opened = _views(store, "mallory", 1)[0]
    assert store.load_view(opened) is not None  # someone opened this link: it is no longer the session's to drop
    flood = _views(store, "mallory", 700, start=1)  # the attack's 700 views
    assert _alive(store, mine) == 3 and store.load_view(mine[0]) is not None
    assert store.path(opened, ".json").is_file()
    assert _alive(store, flood) == 5 and _alive(store, flood[-5:]) == 5  # the session keeps its newest five
    assert len(list(tmp_path.glob("*.json"))) == 3 + 1 + 5


def test_a_view_another_session_also_made_is_no_longer_the_first_sessions_to_drop(tmp_path):
    store = SnapshotStore(tmp_path, max_views=1000, session_views=2)
    shared = store.save_view(View("toy42", {"theta": "0.5"}, "v1"), owner="alice")
    assert store.save_view(View("toy42", {"theta": "0.5"}, "v1"), owner="bob") == shared
    _views(store, "alice", 10)
    assert store.path(shared, ".json").is_file()


def test_a_flood_of_many_sessions_needs_max_views_newer_views(tmp_path):
    """The figure of the docs: to push out a view no one used since, a flood needs ``max_views`` newer views,
    from at least ``max_views / session_views`` sessions."""
    store = SnapshotStore(tmp_path, max_views=50, session_views=5)
    mine = _views(store, "alice", 3)
    for s in range(9):  # 45 newer views from 9 sessions, their quota full: every view of alice's survives
        _views(store, f"flood{s}", 5)
    assert _alive(store, mine) == 3
    _views(store, "flood9", 2)  # 47 newer views: 50 in all
    assert _alive(store, mine) == 3
    _views(store, "flood9", 3, start=2)  # 50 newer views from the 10th session: the least recently used go
    assert _alive(store, mine) == 0 and len(list(tmp_path.glob("*.json"))) == 50
    # the shipped figure: 10,000 views, from 100 sessions
    assert snapshot_store.MAX_VIEWS // snapshot_store.SESSION_VIEWS == 100


def test_the_session_is_the_streamlit_session_by_default(tmp_path, monkeypatch):
    from dashboard import streamlit_internals

    assert snapshot_store.session_owner() is None  # outside Streamlit: no quota, only the folder's bound
    store = SnapshotStore(tmp_path, max_views=1000, session_views=3)
    monkeypatch.setattr(streamlit_internals, "session_id", lambda: "session-one")
    one = [store.save_view(View("toy42", {"theta": str(k)}, "v1")) for k in range(10)]
    monkeypatch.setattr(streamlit_internals, "session_id", lambda: "session-two")
    two = [store.save_view(View("toy42", {"theta": f"b{k}"}, "v1")) for k in range(10)]
    assert _alive(store, one) == 3 and _alive(store, two) == 3
    assert snapshot_store.session_owner() == hashlib.sha256(b"session-two").hexdigest()[:16]


def test_built_pages_are_a_bounded_cache(tmp_path, builds):
    store = SnapshotStore(tmp_path, max_pages=2)
    keys = _views(store, None, 4)
    for key in keys:
        assert snapshot.snapshot_reply(store, key).status == 200
    assert len(list(tmp_path.glob("*.html.gz"))) == 2 and _alive(store, keys) == 4
    assert snapshot.snapshot_reply(store, keys[0]).status == 200 and builds["builds"] == 5  # built again


# ---------------------------------------------------------------------------- item 7: damaged files, links, headers
def _body(reply) -> str:
    return (gzip.decompress(reply.body) if reply.gzipped else reply.body).decode("utf-8")


def _get(route, key: str, gzip_ok: bool = True) -> tuple[int, dict, bytes]:
    sent: list[dict] = []
    scope = {"type": "http", "method": "GET", "path": f"/s/{key}", "raw_path": f"/s/{key}".encode(),
             "query_string": b"", "headers": [(b"accept-encoding", b"gzip")] if gzip_ok else [],
             "path_params": {"key": key}, "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80),
             "root_path": ""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(route.app(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_a_truncated_page_is_built_again(tmp_path, builds):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy42", {"theta": "0.42"}, "v1"), owner=None)
    assert snapshot.snapshot_reply(store, key).status == 200
    page = store.path(key, ".html.gz")
    page.write_bytes(page.read_bytes()[:40])  # cut short: gzip's EOFError before
    route = snapshot.routes(lambda: store)[1]
    status, _, body = _get(route, key, gzip_ok=False)  # the server decompresses for this client
    assert status == 200 and "θ = <strong>0.42</strong>" in body.decode() and builds["builds"] == 2
    assert gzip.decompress(page.read_bytes()) == body  # and keeps the whole page again


def test_a_symlinked_page_or_view_is_never_followed(tmp_path, builds):
    folder, outside = tmp_path / "snaps", tmp_path / "outside"
    outside.mkdir()
    store = SnapshotStore(folder)
    key = store.save_view(View("toy42", {"theta": "0.42"}, "v1"), owner=None)
    secret = outside / "secret.html.gz"
    secret.write_bytes(gzip.compress(b"<p>SECRET</p>"))
    store.path(key, ".html.gz").symlink_to(secret)
    reply = snapshot.snapshot_reply(store, key)  # was: refused, then a 500 from write_page
    assert reply.status == 200 and "SECRET" not in _body(reply) and "0.42" in _body(reply)
    assert not store.path(key, ".html.gz").is_symlink()  # the link itself was replaced
    assert gzip.decompress(secret.read_bytes()) == b"<p>SECRET</p>"  # and what it named is untouched
    # a view file that is a link (here to a valid view of another folder) is not read: unknown
    other = SnapshotStore(outside)
    other_key = other.save_view(View("toy42", {"theta": "0.7"}, "v1"), owner=None)
    store.path(other_key, ".json").symlink_to(other.path(other_key, ".json"))
    assert store.load_view(other_key) is None and snapshot.snapshot_reply(store, other_key).status == 404


@pytest.mark.parametrize("content", [b"\x00\xff not json", b"[1, 2]", b'{"page": "toy42"}', b"{" * 100_000])
def test_a_damaged_view_is_a_one_sentence_404(tmp_path, builds, content):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy42", {"theta": "0.42"}, "v1"), owner=None)
    store.path(key, ".json").write_bytes(content)
    reply = snapshot.snapshot_reply(store, key)
    assert reply.status == 404 and "unknown or has expired" in _body(reply) and "Traceback" not in _body(reply)


def test_a_page_the_folder_cannot_keep_is_still_served(tmp_path, builds):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy42", {"theta": "0.42"}, "v1"), owner=None)
    store.path(key, ".html.gz").mkdir()  # a folder where the page goes: the write fails
    reply = snapshot.snapshot_reply(store, key)
    assert reply.status == 200 and "0.42" in _body(reply)


def test_snapshot_pages_send_a_content_security_policy(tmp_path, builds):
    store = SnapshotStore(tmp_path)
    key = store.save_view(View("toy42", {"theta": "0.42"}, "v1"), owner=None)
    route = snapshot.routes(lambda: store)[1]
    for asked in (key, "f" * 20, "nothex"):  # a page, an unknown link, a bad one
        status, headers, body = _get(route, asked, gzip_ok=False)
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'self'" in csp and "default-src 'none'" in csp and "'unsafe-eval'" not in csp
        assert headers["x-frame-options"] == "SAMEORIGIN"
    # the page's one inline script runs by its hash; any other inline script would not
    status, headers, body = _get(route, key, gzip_ok=False)
    inline = [m for m in re.findall(r"<script>(.*?)</script>", body.decode(), re.S)]
    assert len(inline) == 1 and "'unsafe-inline'" not in headers["content-security-policy"].split("style-src")[0]
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in headers["content-security-policy"]
