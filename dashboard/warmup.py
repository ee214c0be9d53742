"""A fresh server imports the dashboard while the browser is still loading Streamlit's frontend.

``streamlit run app.py`` imports app.py as a module to serve its ``st.App``; that import calls
``start`` with the modules the first page needs (numpy, pandas, SciPy, Plotly, the evaluation
layer: seconds on a small machine), which a background thread imports meanwhile. The first script
run calls ``wait`` before its own imports, so the two never import the same module at once, and
finds them loaded. Without a server (AppTest, plain Python) ``wait`` returns at once.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence

_LOG = logging.getLogger(__name__)
_thread: threading.Thread | None = None


def _import_all(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the script's own import then says what is wrong
            _LOG.warning("warm-up import of %s failed", name, exc_info=True)


def start(modules: Sequence[str]) -> None:
    """Import ``modules`` in a background thread (once per process)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_import_all, args=(tuple(modules),), name="hsc-warmup", daemon=True)
        _thread.start()


def wait(timeout: float | None = 120.0) -> None:
    """Until the warm-up imports are done (at most ``timeout`` seconds); at once when there are none."""
    if _thread is not None:
        _thread.join(timeout)
