"""How a page run starts: inside app.py's navigation, or as the main script itself (its own setup)."""

from __future__ import annotations

import streamlit as st

from . import session_keys as keys
from . import state
from .session_memory import track_page
from .sidebar import notices, sidebar


# ---------------------------------------------------------------------------- entry point
def mark_entry() -> None:
    """Called by app.py right before it runs the selected page."""
    st.session_state[keys.ENTERED_VIA_APP] = True


def ensure_entrypoint(page_globals: dict) -> None:
    """First line of every page: inside app.py's navigation (which marks the run right before it
    runs the page) do nothing; when the page file is the main script itself (``streamlit run
    app_pages/explorer.py``, or ``AppTest.from_file`` on a page in the tests) do app.py's setup
    here, without the navigation, so the page still has its sidebar, state and URL.

    The pages live in ``app_pages/``, not ``pages/``, so Streamlit never runs a page file alone
    through its legacy "pages/ folder" mode: a deep link such as ``/explorer`` always runs app.py.

    Parameters
    ----------
    page_globals : dict
        The page's ``globals()``: its run's objects, emptied when the session ends (``track_page``).
    """
    track_page(page_globals.get("__file__", "page"), page_globals)
    if st.session_state.pop(keys.ENTERED_VIA_APP, False):
        return
    st.set_page_config(page_title="Hierarchical Selective Classification", layout="wide")
    state.init_state()
    sidebar()
    # Standing in for app.py's write, which this run does not reach: there is no end-of-run hook,
    # so what the page settles later reaches the URL when its fragment ends (state.fragment).
    state.write_query_params()
    notices()

