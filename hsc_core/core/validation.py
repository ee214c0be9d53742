"""Input checks shared by the library: clear, specific errors for bad arrays, and the one way an
error message quotes a user-provided value (``quote``, ``clip``)."""

from __future__ import annotations

import re

import numpy as np

QUOTE_CHARS = 80  # the most characters of one user-provided value an error message quotes
QUOTE_ITEMS = 4  # the most items of a list an error message quotes
_CLIPPED = re.compile(r"…\([\d,]+ characters\)")
PATH_CHARS = 120  # the most characters of a file path an error message names (``clip_path``)
PATH_TAIL = 60  # of which the path's last characters (its file name)
MESSAGE_CHARS = 1000  # the most characters of a whole error message built from user input


def bounded_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """An error message cut to ``limit`` characters, keeping its start (where the file and line
    are named) and its end: the safety net behind ``quote``/``clip`` for a message that joins many
    user-provided values.

    >>> bounded_message("x" * 5000, 100)[:60].count("x"), len(bounded_message("x" * 5000, 100)) < 140
    (50, True)
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    return f"{text[:head]}…({len(text) - limit:,} characters cut)…{text[len(text) - (limit - head):]}"


def clip(value: object, limit: int = QUOTE_CHARS, tail: int = 0) -> str:
    """``str(value)`` for an error message, cut after ``limit`` characters with how long it was:
    ``aaaa…(1,000,000 characters)``; with ``tail``, its last ``tail`` characters follow
    (``…(N characters)…tail``). For a name shown bare, e.g. a file name in front of a message."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit + tail or (len(text) <= limit + tail + 34 and _CLIPPED.search(text)):  # short, or cut
        return text
    return f"{text[:limit]}…({len(text):,} characters)" + (f"…{text[-tail:]}" if tail else "")


def clip_path(path: object, limit: int = PATH_CHARS) -> str:
    """A file path for an error message: its start and its end (the file name) when it is long."""
    return clip(path, limit - PATH_TAIL, tail=PATH_TAIL)


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` for an error message, bounded: a string longer than ``limit`` characters is
    cut (``'aaaa'…(1,000,000 characters)``), a list, tuple or set shows its first ``QUOTE_ITEMS``
    items (``['a', 'b', …] (12,000 items)``), anything else its repr cut like a string. User-provided
    names, ids and paths can be of any length: five 1 MB names must not make a 5 MB message."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}…({len(value):,} characters)"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value) if not isinstance(value, (set, frozenset)) else sorted(value, key=str)
        shown = ", ".join(quote(v, max(16, limit // 4)) for v in items[:QUOTE_ITEMS])
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")") if isinstance(value, tuple) else ("{", "}")
        if len(items) <= QUOTE_ITEMS:
            return f"{open_}{shown}{',' if isinstance(value, tuple) and len(items) == 1 else ''}{close}"
        return f"{open_}{shown}, …{close} ({len(items):,} items)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text):,} characters)"


def check_logits(logits: np.ndarray, n_classes: int | None = None) -> np.ndarray:
    """Return ``logits`` as a float (n_samples, n_classes) array or raise ValueError.

    float16/float32 become float32 (halves the memory at ImageNet scale); others float64.
    """
    arr = np.asarray(logits)
    if arr.ndim != 2:
        raise ValueError(f"logits must be 2-D (n_samples, n_classes), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"logits must be non-empty, got shape {arr.shape}")
    if n_classes is not None and arr.shape[1] != n_classes:
        raise ValueError(f"logits have {arr.shape[1]} classes, the hierarchy has {n_classes} leaves")
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"logits must be numeric, got dtype {arr.dtype}")
    small = arr.dtype in (np.float16, np.float32)
    arr = arr.astype(np.float32 if small else np.float64, copy=False)
    # NaN or ±inf makes the minimum or the maximum not finite: two reductions, no mask as large as the logits
    if not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
        rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise ValueError(f"logits contain NaN or inf in {len(rows)} rows (first: row {int(rows[0])})")
    return arr


def check_labels(labels: np.ndarray, n_samples: int, n_classes: int) -> np.ndarray:
    """Return integer labels of length ``n_samples`` in [0, n_classes) or raise ValueError."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise ValueError(f"labels must have shape ({n_samples},), got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or (arr != np.round(arr)).any():
            raise ValueError(f"labels must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    out = (arr < 0) | (arr >= n_classes)
    if out.any():
        raise ValueError(
            f"{int(out.sum())} labels out of range [0, {n_classes}) "
            f"(first: {int(arr[out][0])} at row {int(np.flatnonzero(out)[0])})"
        )
    return arr


def _not_a_number(theta: object) -> ValueError:
    return ValueError(f"theta must be a number in [0, 1], got {theta!r}")


def check_theta(theta: float) -> float:
    """Return θ as a float in [0, 1] or raise ValueError (None, text, booleans and NaN included).

    >>> check_theta(np.float32(0.5))
    0.5
    >>> check_theta(None)
    Traceback (most recent call last):
    ValueError: theta must be a number in [0, 1], got None
    """
    if isinstance(theta, (bool, np.bool_)) or not isinstance(theta, (int, float, np.integer, np.floating)):
        if not (isinstance(theta, np.ndarray) and theta.ndim == 0 and theta.dtype.kind in "iuf"):
            raise _not_a_number(theta)
    value = float(theta)
    if value != value:
        raise _not_a_number(theta)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"theta must lie in [0, 1], got {value}")
    return value


def check_temperature(temperature: float) -> float:
    """``temperature`` if it is a positive finite number (a softmax divisor T), else one clear ValueError.

    >>> check_temperature(1.5)
    1.5
    """
    if not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number, got {quote(temperature)}")
    return temperature


def check_theta_array(theta: object) -> np.ndarray:
    """θ (a number or an array of them) as a float64 array, each in [0, 1], or a ValueError."""
    if isinstance(theta, (str, bytes, bool, np.bool_)) or theta is None:
        raise _not_a_number(theta)
    try:
        th = np.asarray(theta)
    except (TypeError, ValueError):
        raise _not_a_number(theta) from None
    if th.dtype.kind not in "iuf":
        raise _not_a_number(theta)
    th = th.astype(np.float64)
    if np.isnan(th).any():
        raise _not_a_number(theta)
    inside = (th >= 0.0) & (th <= 1.0)
    if not np.all(inside):
        raise ValueError(f"theta must lie in [0, 1], got {th[~inside].ravel()[0]}")
    return th


def check_node_probs(node_probs: np.ndarray, n_nodes: int) -> np.ndarray:
    """Return a non-empty (n_samples, n_nodes) array or raise ValueError (finiteness is checked
    on the values a rule actually reads)."""
    arr = np.asarray(node_probs)
    if arr.ndim != 2 or arr.shape[1] != n_nodes:
        raise ValueError(f"node_probs must have shape (n_samples, {n_nodes}), got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError("node_probs has no samples")
    return arr
