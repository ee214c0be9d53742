"""The dashboard's CSS and JavaScript, kept as files in ``dashboard/static/`` (shipped in the wheel)."""

from __future__ import annotations

import functools
from pathlib import Path

STATIC_DIR = Path(__file__).with_name("static")


@functools.cache
def static_text(name: str) -> str:
    """The text of ``dashboard/static/<name>``, read once per process."""
    return (STATIC_DIR / name).read_text(encoding="utf-8")
