"""Deprecated: ``hsc dashboard`` is ``hsc_core.cli.dashboard`` (this name goes in the next release)."""

from __future__ import annotations

import warnings

from .cli.dashboard import CACHED_LOGITS_ENV, INSTALLED_APP_PACKAGE, app_path, configure_parser, run, streamlit_command

warnings.warn("hsc_core.dashboard_launcher is deprecated: use hsc_core.cli.dashboard", DeprecationWarning,
              stacklevel=2)

__all__ = ["CACHED_LOGITS_ENV", "INSTALLED_APP_PACKAGE", "app_path", "configure_parser", "run", "streamlit_command"]
