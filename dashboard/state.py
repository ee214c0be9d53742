"""Session state shared by every page, mirrored in the URL so a view can be shared.

Each setting has one *canonical* key in ``st.session_state`` (``theta``, ``model`` …). Widgets use
their own keys and copy their value back in an ``on_change`` callback (``bind``), so a setting
survives switching pages (Streamlit drops a widget's state when its page is not shown).

The URL query string mirrors the canonical keys: read once when a session starts, written
whenever a run or a fragment rerun starts (callbacks have already updated the canonical values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from hsc_core.core.rules import RULES

_LOADED = "_query_params_loaded"
URL_IGNORED = "_url_ignored"  # "key=value" of the link's parameters that could not be used
URL_VALUES = "_url_values"    # key → raw value of every parameter the link set
MISSING_MODEL = "_missing_model"  # a requested model that is not in the catalog (shown once replaced)


def _float01(s: str) -> float:
    v = float(s)
    if not 0.0 <= v <= 1.0:
        raise ValueError(s)
    return round(v, 4)


def _margin(s: str) -> float:
    v = round(float(s), 4)  # the solver's ε input takes 0.0001 … 0.5
    if not 0.0001 <= v <= 0.5:
        raise ValueError(s)
    return v


def _bool(s: str) -> bool:
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(s)


def _choice(*options: str) -> Callable[[str], str]:
    def parse(s: str) -> str:
        if s not in options:
            raise ValueError(s)
        return s
    return parse


def _rules(s: str) -> list[str]:
    out = [r for r in s.split(",") if r in RULES]
    if s and not out:
        raise ValueError(s)
    return out


def _posint(s: str) -> int:
    v = int(s)
    if v < 0:
        raise ValueError(s)
    return v


def _fmt_float(v: float) -> str:
    return f"{float(v):.4f}".rstrip("0").rstrip(".") if v else "0"


@dataclass(frozen=True)
class Setting:
    default: Any
    parse: Callable[[str], Any]
    encode: Callable[[Any], str] = str


SETTINGS: dict[str, Setting] = {
    # global (sidebar)
    "model": Setting(None, str),
    "subset": Setting("all", str),
    "ts": Setting(False, _bool, lambda v: "1" if v else "0"),
    "fmt": Setting("png", _choice("png", "svg")),
    # θ is shared by Explorer, Risk–Coverage and Try an image
    "theta": Setting(0.5, _float01, _fmt_float),
    # Risk–Coverage / Calibration–Coverage / Compare
    "rules": Setting(list(RULES), _rules, lambda v: ",".join(v)),
    "loss": Setting("01", _choice("01", "severity")),
    "dec": Setting("exact", _choice("exact", "2")),
    "bins": Setting(15, _posint),
    "cmp_rule": Setting("climbing", _choice(*RULES)),
    # Explorer
    "sample": Setting(None, str),
    "pick": Setting("random", _choice("random", "worst", "class")),
    "seed": Setting(0, _posint),
    "rank": Setting(1, _posint),
    "cls": Setting(None, _posint),
    # Guaranteed accuracy
    "acc": Setting(0.95, _float01, _fmt_float),
    "conf": Setting(0.9, _float01, _fmt_float),
    "n": Setting(1000, _posint),
    "split_seed": Setting(0, _posint),
    "reps": Setting(200, _posint),
    "solve": Setting("epsilon", _choice("alpha", "n", "epsilon", "delta")),
    "eps": Setting(0.01, _margin, _fmt_float),
    # Try an image
    "tmodel": Setting(None, str),
}


def init_state() -> None:
    """Fill missing canonical keys with defaults; on a session's first run, take the URL's values."""
    ss = st.session_state
    for key, setting in SETTINGS.items():
        if key not in ss:
            ss[key] = list(setting.default) if isinstance(setting.default, list) else setting.default
    if not ss.get(_LOADED):
        ss[_LOADED] = True
        qp = st.query_params
        ignored, values = [], {}
        for key, setting in SETTINGS.items():
            if key not in qp:
                continue
            values[key] = qp[key]
            try:
                ss[key] = setting.parse(qp[key])
            except (TypeError, ValueError):
                ignored.append(f"{key}={qp[key]}")  # a malformed parameter keeps the default
        ss[URL_IGNORED] = ignored
        ss[URL_VALUES] = values


def write_query_params() -> None:
    """Mirror the canonical keys in the URL (only the ones that changed are sent)."""
    ss = st.session_state
    qp = st.query_params
    for key, setting in SETTINGS.items():
        value = ss.get(key)
        if value is None:
            if key in qp:
                del qp[key]
            continue
        enc = setting.encode(value)
        if qp.get(key) != enc:
            qp[key] = enc


def _copy_back(widget_key: str, key: str, then: Callable[[], None] | None = None) -> None:
    st.session_state[key] = st.session_state[widget_key]
    st.session_state.pop(URL_IGNORED, None)  # the user has moved on: drop the link's notices
    if key == "model":
        st.session_state.pop(MISSING_MODEL, None)
    if then is not None:
        then()


def bind(widget: Callable, label: str, key: str, *, scope: str = "", on_change: Callable[[], None] | None = None,
         **kwargs):
    """Render ``widget`` showing the canonical ``key``; a user change writes back to ``key`` (then
    calls ``on_change``)."""
    wkey = f"_w.{scope}.{key}"
    st.session_state[wkey] = st.session_state[key]
    return widget(label, key=wkey, on_change=_copy_back, args=(wkey, key, on_change), **kwargs)


def from_url(key: str) -> str | None:
    """The raw value the session's link gave ``key`` (None when it did not set it)."""
    return st.session_state.get(URL_VALUES, {}).get(key)


def get(key: str) -> Any:
    return st.session_state.get(key, SETTINGS[key].default if key in SETTINGS else None)


def set(key: str, value: Any) -> None:  # noqa: A001 - mirrors get()
    st.session_state[key] = value
