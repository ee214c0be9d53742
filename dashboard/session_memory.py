"""What one browser session holds beyond small values in its state, and giving it back when the session ends.

Streamlit keeps a closed tab's session for reconnecting (``server.disconnectedSessionTTL``), and
never shuts one down when it expires: it is dropped only when a later session disconnects. So
everything large that a session holds is released here, when its tab disconnects (Streamlit then
clears the session-scoped caches and calls ``_release_uploads``): its uploaded logits and data
sets, the upload's raw bytes, the evaluations of its uploads (session-scoped caches), the objects
its last page run left in that page's globals (reachable from fragments, widget callbacks and
deferred downloads, which Streamlit keeps with the session), its report buttons' jobs and its
media files. The freed heap then goes back to the operating system (``release_memory``, glibc's
``malloc_trim`` through ctypes: Python has no call for it).

The end of a session is seen through the public ``st.cache_resource(scope="session", on_release=…)``;
the two things no public API does (the session's id, dropping its files from the runtime) are in
``streamlit_internals``.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import io
import threading
import weakref
from dataclasses import dataclass, field

import streamlit as st

from . import session_keys as keys
from .streamlit_internals import release_session_files, session_id


@dataclass(eq=False)
class _SessionUploads:
    """What one browser session holds beyond small values in its state, released together."""

    session_id: str
    bundles: dict  # the dict in this session's state: upload location → LogitsBundle
    datasets: dict = field(default_factory=dict)  # the dict in its state: "session:<token>" → Dataset
    files: weakref.WeakSet = field(default_factory=weakref.WeakSet)  # uploaded files (their bytes) in its state
    pages: dict = field(default_factory=dict)  # page → the globals of its latest run
    jobs: weakref.WeakSet = field(default_factory=weakref.WeakSet)  # objects with .release(), e.g. report jobs




def _release_uploads(uploads: _SessionUploads) -> None:
    """Release what the session holds (see above), then return the freed heap (``release_memory``)."""
    uploads.bundles.clear()
    uploads.datasets.clear()
    for job in list(uploads.jobs):
        job.release()
    for f in list(uploads.files):
        f.close()  # a BytesIO: drops its buffer, the upload's raw bytes (widget state keeps the object)
    uploads.files.clear()
    # What AppSession.shutdown() would do, which an expiring session never gets: its uploaded and
    # media files and deferred downloads (whose callables reach the page's data) are let go.
    release_session_files(uploads.session_id)
    # The session's last page runs: only its fragments, callbacks and deferred downloads can still
    # reach them, and the session that would run those has ended (a reconnecting tab reruns its page).
    for page_globals in uploads.pages.values():
        page_globals.clear()
    uploads.pages.clear()
    release_memory()


_TRIM_DELAYS_S = (1.0, 9.0)  # after a session ends: once its caches are cleared, and again 9 s later
_trim_lock = threading.Lock()
_trim_timer: threading.Timer | None = None


def release_memory(delays: tuple[float, ...] = _TRIM_DELAYS_S) -> None:
    """After ``delays[0]`` seconds (once Streamlit has cleared all of an ended session's caches,
    which it does right after this module's release hook), then each further delay after the last
    pass (for what stopping threads let go later): collect garbage and give the freed heap back to
    the operating system (``trim_heap``). Calls while a pass is pending share it."""
    global _trim_timer
    with _trim_lock:
        if _trim_timer is None and delays:
            _trim_timer = threading.Timer(delays[0], _release_now, args=(tuple(delays[1:]),))
            _trim_timer.daemon = True
            _trim_timer.start()


def _release_now(later: tuple[float, ...]) -> None:
    global _trim_timer
    with _trim_lock:
        _trim_timer = None
    gc.collect()
    trim_heap()
    if later:
        release_memory(later)


# glibc raises its mmap threshold (up to 32 MB) each time a large array is freed, and then keeps up
# to twice that at the top of each thread's malloc arena: after a session's large arrays are gone,
# each arena a script thread used could hold 64 MB that ``malloc_trim`` does not return. Fixed
# thresholds keep arrays of 4 MB and more in their own mappings (returned the moment they are
# freed) and let an arena keep at most 16 MB of free top.
MMAP_THRESHOLD_BYTES = 4 << 20
TRIM_THRESHOLD_BYTES = 16 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


@functools.cache
def configure_malloc() -> bool:
    """Set glibc's fixed mmap and trim thresholds (above) for this process, once; False where there
    is no glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                   TRIM_THRESHOLD_BYTES))


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS, Windows: they return memory on their own terms)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim(0)``): without it,
    memory freed by a session's many medium-sized arrays stays in the process's malloc arenas. False
    where there is no glibc."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


configure_malloc()



@st.cache_resource(scope="session", on_release=_release_uploads, show_spinner=False)
def _session_uploads() -> _SessionUploads:
    return _SessionUploads(session_id(), st.session_state.setdefault(keys.UPLOADED_BUNDLES, {}))


def _this_session() -> _SessionUploads | None:
    """This session's ``_SessionUploads`` with its state's dicts attached; None outside a session."""
    try:
        uploads = _session_uploads()
        uploads.bundles = st.session_state.setdefault(keys.UPLOADED_BUNDLES, {})  # this session state's own dicts
        uploads.datasets = st.session_state.setdefault(keys.SESSION_DATASET_OBJECTS, {})
    except Exception:  # no script run context (plain Python, benchmarks)
        return None
    return uploads


def track_page(page: str, page_globals: dict) -> None:
    """Remember the globals of this run of ``page`` (they replace its last run's): when the session
    ends they are emptied, so what the page computed (evaluation views, curves, tables) goes with it
    although Streamlit keeps the page's fragments and callbacks with the session."""
    uploads = _this_session()
    if uploads is not None:
        uploads.pages[page] = page_globals
        track_uploaded_files(uploads)


def track_uploaded_files(uploads: _SessionUploads | None = None) -> None:
    """Note every uploaded file in this session's state (``st.file_uploader`` values: each run makes
    new file objects over the upload's bytes), so that ``_release_uploads`` closes them all."""
    uploads = uploads or _this_session()
    if uploads is None:
        return
    for key in list(st.session_state.keys()):
        try:
            value = st.session_state[key]
        except Exception:  # a widget of another page whose value cannot be read now
            continue
        for f in value if isinstance(value, list) else [value]:
            if is_uploaded_file(f):
                uploads.files.add(f)


def release_with_session(obj) -> None:
    """Call ``obj.release()`` when this browser session ends (held weakly until then)."""
    uploads = _this_session()
    if uploads is not None:
        uploads.jobs.add(obj)


def is_uploaded_file(value: object) -> bool:
    """Whether ``value`` is a file ``st.file_uploader`` returned: a BytesIO with the uploader's
    public ``file_id`` (its documented attributes: file_id, name, type, size)."""
    return isinstance(value, io.BytesIO) and isinstance(getattr(value, "file_id", None), str)
