"""The snapshot pages' JavaScript: the plotly package's full ``plotly.min.js`` and plotly.js's basic
bundle (``plotly.js-basic-dist-min``, MIT licence, shipped in ``dashboard/static/plotly_component``:
scatter, bar and pie only, a quarter of the full bundle's size). A page whose figures use only
those traces gets the basic bundle (less JavaScript for a fresh browser to evaluate); any other
gets the full one. The basic bundle is used only when its plotly.js version is the plotly
package's (the figures' JSON is written for that version).

Each is served gzip-compressed under a name holding its content hash (``Cache-Control: immutable``).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: plotly.js's basic bundle (the npm package ``plotly.js-basic-dist-min``, MIT licence).
BASIC_BUNDLE = Path(__file__).resolve().parent / "static" / "plotly_component" / "plotly-basic-4.1.1.min.js"
#: The trace types the basic bundle draws.
BASIC_TRACES = frozenset({"scatter", "bar", "pie"})
_VERSION = re.compile(rb"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)")


@dataclass(frozen=True)
class Asset:
    """One script: its served name (with its content hash) and its gzip bytes."""

    name: str
    gzip_bytes: bytes = field(repr=False)


def _asset(stem: str, raw: bytes) -> Asset:
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return Asset(f"{stem}-{digest}.min.js", gzip.compress(raw, compresslevel=9, mtime=0))


def _version(raw: bytes) -> str | None:
    """The plotly.js version in a bundle's licence header.

    >>> _version(b"/**\\n* plotly.js (basic - minified) v4.1.1\\n")
    '4.1.1'
    """
    found = _VERSION.search(raw[:400])
    return found.group(1).decode("ascii") if found else None


@functools.cache
def _full_raw() -> bytes:
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the plotly package is not installed")
    return (Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js").read_bytes()


@functools.cache
def plotly_asset() -> Asset:
    """The plotly package's ``plotly.min.js``, gzip-compressed, named by its content hash (read once)."""
    return _asset("plotly", _full_raw())


@functools.cache
def basic_asset() -> Asset | None:
    """The basic bundle, or None when it is missing or of another plotly.js version than the package's."""
    try:
        raw = BASIC_BUNDLE.read_bytes()
        if _version(raw) is None or _version(raw) != _version(_full_raw()):
            return None
    except OSError:
        return None
    return _asset("plotly-basic", raw)


def assets() -> dict[str, Asset]:
    """Every script served, by name."""
    found = [plotly_asset(), basic_asset()]
    return {a.name: a for a in found if a is not None}


def trace_types(figures: Iterable[Any]) -> set[str]:
    """The trace types of ``figures`` (Plotly figures), their animation frames' included."""
    types = set()
    for fig in figures:
        types |= {t.type or "scatter" for t in fig.data}
        types |= {t.type or "scatter" for frame in (fig.frames or ()) for t in frame.data}
    return types


def plotly_src(figures: Iterable[Any] = ()) -> str:
    """The URL (relative to ``/s/<key>``) of the smallest bundle that draws ``figures``."""
    basic = basic_asset()
    use_basic = basic is not None and trace_types(figures) <= BASIC_TRACES
    return f"assets/{(basic if use_basic and basic is not None else plotly_asset()).name}"
