"""The dashboard's only uses of Streamlit internals, each where Streamlit 1.67 has no public API.

- ``session_id``: the browser session's id, which ``_release_uploads`` needs to let go of that
  session's upload and media files. ``st.context`` (cookies, headers, ip_address, locale, url …)
  exposes no session id.
- ``release_session_files``: dropping an ended session's uploaded and media files. A session that
  expires (``server.disconnectedSessionTTL``) never gets ``AppSession.shutdown()``, and there is no
  public call that removes a session's files from the runtime's managers.

Everything else uses public APIs: the end of a session is detected with the public
``st.cache_resource(scope="session", on_release=…)`` (``session_memory``), uploaded files are
recognised by the public attributes of ``st.file_uploader``'s values.
"""

from __future__ import annotations


def session_id() -> str:
    """This script run's browser-session id ("" outside a Streamlit session)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx else ""


def release_session_files(session_id: str) -> None:
    """Drop the session's uploaded files and media files (and deferred downloads) from the runtime:
    what ``AppSession.shutdown()`` would do, which an expiring session never gets. Nothing without
    a runtime (AppTest, plain Python)."""
    try:
        from streamlit.runtime import Runtime

        rt = Runtime.instance()
        rt.uploaded_file_mgr.remove_session_files(session_id)
        rt.media_file_mgr.clear_session_refs(session_id)
        rt.media_file_mgr.remove_orphaned_files()
    except Exception:  # no runtime (AppTest, plain Python): nothing else holds the bytes
        pass
