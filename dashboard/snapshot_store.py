"""The snapshot folder (``snapshot``'s links): view keys, the ``View`` a link names, and
``SnapshotStore``, which keeps each view as ``<key>.json`` and its built page as ``<key>.html.gz``.

The folder is bounded, and no visitor can expire another's links: each browser session may keep at
most ``SESSION_VIEWS`` views that no one has opened yet (its own least recently used go when it makes
more), a view whose link was opened is no longer counted against its session, and the whole folder
keeps the ``MAX_VIEWS`` most recently used views (their pages, a cache rebuilt on demand, at most
``MAX_PAGES``). So a flood from one session, however long, removes only that session's own unopened
views; to push out a view that no one has used since, a flood needs ``MAX_VIEWS`` (10,000) newer views,
from at least ``MAX_VIEWS / SESSION_VIEWS`` (100) sessions.

A damaged file is never served and never stops a link: a view file that is not a view is "unknown",
a page that does not decompress whole is dropped (and so built again), and a file that is a symbolic
link (out of the folder or not) is never read nor written through (a new page replaces the link
itself).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

_LOG = logging.getLogger(__name__)

KEY_LENGTH = 20  # hex digits of a view key: 80 bits of SHA-256
_KEY = re.compile(rf"[0-9a-f]{{{KEY_LENGTH}}}")
#: Views kept in the snapshot folder; beyond this many the least recently used go (view and page).
MAX_VIEWS = 10_000
#: Built pages kept (a cache: a link whose page went is built again); beyond this many the least recently used go.
MAX_PAGES = 500
#: Unopened views one browser session may keep; beyond this many its own least recently used go.
SESSION_VIEWS = 100
#: Sessions whose views are counted (beyond this many, the longest idle session's views are only bounded by
#: ``MAX_VIEWS``).
MAX_SESSIONS = 10_000
#: The largest built page read back (a page with its figures' frames is a few MB).
MAX_PAGE_BYTES = 64_000_000
#: The largest view file read back (a view is a page name and a few link parameters).
MAX_VIEW_BYTES = 64_000


def is_key(key: object) -> bool:
    """Whether ``key`` has the form of a view key (``KEY_LENGTH`` lowercase hex digits)."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def view_key(page: str, params: Mapping[str, str], stamp: str = "") -> str:
    """The key of one view: SHA-256 of its canonical JSON (page, sorted parameters, data stamp),
    first ``KEY_LENGTH`` hex digits. The same view always gets the same key; changed data
    (another ``stamp``) a new one.

    >>> view_key("explorer", {"theta": "0.5"}) == view_key("explorer", {"theta": "0.5"})
    True
    >>> len(view_key("explorer", {}))
    20
    """
    canonical = json.dumps({"page": page, "params": dict(sorted(params.items())), "stamp": stamp},
                           sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:KEY_LENGTH]


# ---------------------------------------------------------------------------- the folder
@dataclass(frozen=True)
class View:
    """What a snapshot link names: a page, its link's query parameters, and the data stamp the
    view was made with."""

    page: str
    params: dict[str, str]
    stamp: str = ""

    @property
    def key(self) -> str:
        return view_key(self.page, self.params, self.stamp)


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (never through a symbolic link) of at most
    ``limit`` bytes; None otherwise (missing, a link, a folder, too large, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


class _Quota:
    """Which unopened views each browser session made, per folder, in order of use (a session's
    least recently used first); shared by every store of the process, as the sessions are."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.views: OrderedDict[tuple[str, str], OrderedDict[str, None]] = OrderedDict()  # (folder, owner) → keys
        self.owner: dict[tuple[str, str], str] = {}  # (folder, key) → the session counting it

    def use(self, folder: str, owner: str, key: str, new: bool, limit: int) -> list[str]:
        """Count ``key`` for ``owner`` (a ``new`` view, or one it made before); returns the keys
        over its quota of ``limit``, now no longer counted, for the store to remove."""
        with self.lock:
            held = self.owner.get((folder, key))
            if held is not None and held != owner:  # another session's view: now shared, no one's to drop
                self.release(folder, key)
                return []
            if held is None and not new:  # an existing view it did not make (or an opened one)
                return []
            keys = self.views.setdefault((folder, owner), OrderedDict())
            self.views.move_to_end((folder, owner))
            keys[key] = None
            keys.move_to_end(key)
            self.owner[(folder, key)] = owner
            over = []
            while len(keys) > limit:
                old, _ = keys.popitem(last=False)
                self.owner.pop((folder, old), None)
                over.append(old)
            while len(self.views) > MAX_SESSIONS:  # the longest idle session: its views are uncounted
                (f, _), idle = self.views.popitem(last=False)
                for k in idle:
                    self.owner.pop((f, k), None)
            return over

    def release(self, folder: str, key: str) -> None:
        """``key`` no longer counts against its session (its link was opened, or it is gone)."""
        owner = self.owner.pop((folder, key), None)
        if owner is not None:
            keys = self.views.get((folder, owner))
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self.views[(folder, owner)]


_QUOTA = _Quota()


def session_owner() -> str | None:
    """Who makes a view: a hash of this script run's browser-session id, None outside a session."""
    try:
        from .streamlit_internals import session_id

        sid = session_id()
    except Exception:  # noqa: BLE001 - no Streamlit runtime (a test, a script): no session quota
        return None
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()[:16] if sid else None


class SnapshotStore:
    """The snapshot folder: ``<key>.json`` (the ``View``) and ``<key>.html.gz`` (its built page).

    Parameters
    ----------
    folder : Path
        Created on the first write.
    max_views : int
        At most this many views are kept; a write beyond it removes the least recently used
        (by modification time, which every read refreshes) with their pages.
    session_views : int
        At most this many unopened views per browser session (``save_view``'s ``owner``).
    max_pages : int
        At most this many built pages (the least recently used go; a link builds its page again).
    """

    def __init__(self, folder: Path, max_views: int = MAX_VIEWS, session_views: int = SESSION_VIEWS,
                 max_pages: int = MAX_PAGES):
        self.folder = Path(folder)
        self.max_views = max_views
        self.session_views = session_views
        self.max_pages = max_pages

    def path(self, key: str, suffix: str) -> Path:
        """The file of ``key`` (``.json`` or ``.html.gz``); ValueError for anything not a view key
        or a suffix it does not have. (A key is hex only, so the name stays in the folder; a file
        there that is a symbolic link is never followed: see ``_read_regular`` and ``_write``.)"""
        if not is_key(key) or suffix not in (".json", ".html.gz"):
            raise ValueError("not a snapshot key")
        return self.folder / f"{key}{suffix}"

    def _write(self, path: Path, data: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # readers see the old file or the whole new one; a link there is replaced
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def save_view(self, view: View, owner: str | None = "session") -> str:
        """Keep ``view`` (once: an existing one is only marked used); returns its key. ``owner``:
        the browser session that makes it (default: this script run's, ``session_owner``; None:
        none), whose unopened views beyond ``session_views`` go, its least recently used first."""
        key = view.key
        path = self.path(key, ".json")
        who = session_owner() if owner == "session" else owner
        new = not path.is_file() or path.is_symlink()
        if not new:
            self._touch(path)
        else:
            self._write(path, json.dumps({"page": view.page, "params": view.params, "stamp": view.stamp},
                                         sort_keys=True).encode("utf-8"))
        if who is not None:
            for old in _QUOTA.use(str(self.folder), who, key, new, self.session_views):
                self._remove(old)
        if new:
            self.evict()
        return key

    def load_view(self, key: str) -> View | None:
        """The view of ``key``; None for a malformed key, a missing, unreadable or damaged view file.
        A view read here (its link opened) no longer counts against the session that made it."""
        try:
            path = self.path(key, ".json")
        except ValueError:
            return None
        data = _read_regular(path, MAX_VIEW_BYTES)
        if data is None:
            return None
        try:
            raw = json.loads(data.decode("utf-8"))
            params = raw["params"]
            if not (isinstance(raw["page"], str) and isinstance(params, dict) and isinstance(raw["stamp"], str)
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())):
                return None
            view = View(raw["page"], dict(params), raw["stamp"])
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        if view.key != key:  # a hand-edited file: it no longer is the view its name says
            return None
        self._touch(path)
        _QUOTA.release(str(self.folder), key)
        return view

    def read_page(self, key: str, accept: Callable[[bytes], bool] | None = None) -> bytes | None:
        """The built page of ``key`` (gzip bytes), or None; a page that does not decompress whole (a
        truncated or damaged file), or whose HTML ``accept`` refuses (built by an older version), is
        dropped, so it is built again."""
        try:
            path = self.path(key, ".html.gz")
        except ValueError:
            return None
        data = _read_regular(path, MAX_PAGE_BYTES)
        if data is None:
            return None
        try:
            page = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            _LOG.warning("snapshot %s: its page is damaged; building it again", key)
            self.drop_page(key)
            return None
        if accept is not None and not accept(page):
            _LOG.info("snapshot %s: its page was built by another version; building it again", key)
            self.drop_page(key)
            return None
        self._touch(path)
        return data

    def write_page(self, key: str, page_html: str) -> bytes:
        """Keep ``key``'s built page; returns its gzip bytes (OSError when the folder cannot take it)."""
        data = gzip.compress(page_html.encode("utf-8"), compresslevel=6, mtime=0)
        self._write(self.path(key, ".html.gz"), data)
        self._evict_pages()
        return data

    def drop_page(self, key: str) -> None:
        with _quiet():
            self.path(key, ".html.gz").unlink(missing_ok=True)

    def _remove(self, key: str) -> None:
        """Remove a view and its page."""
        _QUOTA.release(str(self.folder), key)
        with _quiet():
            self.path(key, ".json").unlink(missing_ok=True)
        self.drop_page(key)

    def _oldest(self, pattern: str, keep: int) -> list[Path]:
        """The files of ``pattern`` beyond the ``keep`` most recently used."""
        try:
            found = []
            for p in self.folder.glob(pattern):
                with _quiet():
                    found.append((p.lstat().st_mtime_ns, p))
        except OSError:
            return []
        found.sort(key=lambda item: item[0])
        return [p for _, p in found[: max(0, len(found) - keep)]]

    def evict(self) -> None:
        """Remove the least recently used views (and their pages) beyond ``max_views``."""
        for path in self._oldest("*.json", self.max_views):
            key = path.name[: -len(".json")]
            if is_key(key):
                self._remove(key)
            else:
                with _quiet():
                    path.unlink(missing_ok=True)

    def _evict_pages(self) -> None:
        for path in self._oldest("*.html.gz", self.max_pages):
            with _quiet():
                path.unlink(missing_ok=True)

    @staticmethod
    def _touch(path: Path) -> None:
        with _quiet():
            os.utime(path, follow_symlinks=False)


class _quiet:
    """Ignore a file system error (a file another process removed meanwhile)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        return kind is not None and issubclass(kind, OSError)
