"""Session state shared by every page, mirrored in the URL so a view can be shared.

Each setting has one *canonical* key in ``st.session_state`` (``theta``, ``model`` …). Widgets use
their own keys and copy their value back in an ``on_change`` callback (``bind``), so a setting
survives switching pages (Streamlit drops a widget's state when its page is not shown).

The URL query string mirrors the canonical keys: read once when a session starts, and written
from two places only: app.py at the end of every full run, and ``fragment`` (this module's
wrapper of ``st.fragment``, which every page uses) at the end of every fragment run, since a
fragment-only rerun (a slider move) does not run app.py. Pages never write the URL themselves.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from hsc_core.core.calibrators import calibrator_names
from hsc_core.core.confidence import confidence_names
from hsc_core.core.rule_registry import rule_names
from hsc_core.evaluation.card import DEFAULT_METHOD
from hsc_core.evaluation.guarantee_methods import QUANTITY_WORDS
from hsc_core.evaluation.guarantees import DEFAULT_METHODS, METHODS, SAMPLINGS
from hsc_core.evaluation.threshold import DEFAULT_N_CAL

from . import session_keys as keys
from .navigation import STORY_STEPS

# This module's private session keys (what each holds: session_keys).
_LOADED = keys.QUERY_PARAMS_LOADED
URL_IGNORED = keys.URL_IGNORED
URL_CAPPED = keys.URL_CAPPED
URL_VALUES = keys.URL_VALUES
MISSING_MODEL = keys.MISSING_MODEL
_RUN = keys.FULL_RUN
_PAGE = keys.PAGE
_BOUND = keys.BOUND_IN_RUN
_UNSENT = keys.UNSENT
_RESEND = keys.RESEND_IN_RUN


class Invalid(ValueError):
    """A link value a setting cannot take; the message says what it accepts."""


def _float_in(lo: float, hi: float) -> Callable[[str], float]:
    def parse(s: str) -> float:
        try:
            v = round(float(s), 4)
        except (TypeError, ValueError):
            v = float("nan")
        if not lo <= v <= hi:  # also refuses nan
            raise Invalid(f"a number from {_fmt_float(lo)} to {_fmt_float(hi)}")
        return v
    return parse


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(s: str) -> int:
        try:
            v = int(s) if len(s) <= 20 else None
        except (TypeError, ValueError):
            v = None
        if v is None or not lo <= v <= hi:
            raise Invalid(f"a whole number from {lo:,} to {hi:,}")
        return v
    return parse


def _bool(s: str) -> bool:
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise Invalid("1 or 0")


def _choice(*options: str) -> Callable[[str], str]:
    def parse(s: str) -> str:
        if s not in options:
            raise Invalid("one of " + ", ".join(options))
        return s
    return parse


def _rules(s: str) -> list[str]:
    parts, listed = (s.split(",") if s else []), rule_names()
    if any(r not in listed for r in parts):
        raise Invalid("rule names from " + ", ".join(listed) + ", separated by commas")
    return [r for r in listed if r in parts]


def _registry_list(listed: Callable[[], tuple[str, ...]], what: str) -> Callable[[str], list[str]]:
    """A comma list of registry names (``calib_*``), kept in the registry's order; none is invalid."""
    def parse(s: str) -> list[str]:
        parts, names = (s.split(",") if s else []), listed()
        if not parts or any(p not in names for p in parts):
            raise Invalid(f"{what} from " + ", ".join(names) + ", separated by commas")
        return [n for n in names if n in parts]
    return parse


def _methods(s: str) -> list[str]:
    parts = s.split(",") if s else []
    if not parts or any(m not in METHODS for m in parts):
        raise Invalid("method names from " + ", ".join(METHODS) + ", separated by commas")
    return [m for m in METHODS if m in parts]


_SHIFT = re.compile(r"[a-z_]{1,40}-[1-5]")


def _shift(s: str) -> str:
    # "clean" or a corruption-severity key; whether the model has that file is checked in the sidebar.
    if s != "clean" and not _SHIFT.fullmatch(s):
        raise Invalid("'clean' or a corruption and severity such as gaussian_blur-3")
    return s


def _shifts(s: str) -> list[str]:
    parts = [p for p in s.split(",") if p] if s else []
    if len(parts) > 30 or any(not _SHIFT.fullmatch(p) for p in parts):
        raise Invalid("corruption-severity keys such as gaussian_blur-3, separated by commas")
    return list(dict.fromkeys(parts))


_TREES = ("wordnet", "authors_is_a", "induced_lite0", "random")  # hsc_core.datasets.imagenet_trees.TREES


def _trees(s: str) -> list[str]:
    parts = s.split(",") if s else []
    if any(t not in _TREES for t in parts):
        raise Invalid("tree names from " + ", ".join(_TREES) + ", separated by commas")
    return [t for t in _TREES if t in parts]


def _text(s: str) -> str:
    # Names (model, subset, sample) are checked by the page that uses them; only absurd ones stop here.
    if not s or len(s) > MAX_TEXT or any(ord(ch) < 32 for ch in s):
        raise Invalid(f"a name of 1 to {MAX_TEXT} printable characters")
    return s


def _file_name(s: str) -> str:
    # A results-table file name; where it points is checked by the page (inside the results folder).
    if not s or len(s) > MAX_FILE_NAME or any(ord(ch) < 32 for ch in s):
        raise Invalid(f"a file name of 1 to {MAX_FILE_NAME} printable characters")
    return s


_DATASET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # as data.DATASET_NAME / registry names


def _dataset_name(s: str) -> str:
    # Only the name's form here; whether it exists and fits the model's logits is checked in the sidebar.
    if not _DATASET_NAME.fullmatch(s):
        raise Invalid("a data set name: 1 to 64 letters, digits, '_', '.' or '-'")
    return s


def _fmt_float(v: float) -> str:
    return f"{float(v):.4f}".rstrip("0").rstrip(".") if v else "0"


MAX_TEXT = 300
MAX_FILE_NAME = 128  # a link's results-table name (``atlas``): longer ones are refused before any file is read
#: A link's list of rules is cut to this many names (each further rule is more work for every page
#: that draws them); the cut is said in one line (``sidebar.notices``).
MAX_LINK_RULES = 12
MAX_SEED = 2**53 - 1  # the largest integer a browser number input holds exactly


@dataclass(frozen=True)
class Setting:
    """One URL-mirrored setting. ``min_value``/``max_value`` (numbers) are the range of the widget
    that shows it: ``parse`` accepts exactly that range and ``bind`` passes it to the widget, so the
    two cannot drift apart and a link can never hand a widget a value it rejects."""

    default: Any
    parse: Callable[[str], Any]
    encode: Callable[[Any], str] = str
    min_value: float | int | None = None
    max_value: float | int | None = None
    max_items: int | None = None  # a comma-separated list: a link's items beyond this many are dropped

    def widget_range(self) -> dict[str, float | int]:
        return {k: v for k, v in (("min_value", self.min_value), ("max_value", self.max_value)) if v is not None}


def _float_setting(default: float, lo: float, hi: float) -> Setting:
    return Setting(default, _float_in(lo, hi), _fmt_float, lo, hi)


def _int_setting(default: int, lo: int, hi: int) -> Setting:
    return Setting(default, _int_in(lo, hi), str, lo, hi)


SETTINGS: dict[str, Setting] = {
    # global (sidebar)
    "model": Setting(None, _text),
    "subset": Setting("all", _text),
    # clean images, or the model's cached logits on corrupted ones (cached_logits/shifted/)
    "shift": Setting("clean", _shift),
    # Compare / Risk–Coverage: shifted data overlaid on the clean curves
    "shifts": Setting([], _shifts, lambda v: ",".join(v)),
    # Temperature scaling is on by default on every page, as in the Overview's headline and `hsc report`
    # (the paper's protocol fits T on the calibration split); without it some rules do worse.
    "ts": Setting(True, _bool, lambda v: "1" if v else "0"),
    "fmt": Setting("png", _choice("png", "svg")),
    # the data set picked for a model whose file names none (manifest without `dataset_id`)
    "dataset": Setting(None, _dataset_name),
    # θ is shared by Explorer, Risk–Coverage and Try an image
    "theta": _float_setting(0.5, 0.0, 1.0),
    # Risk–Coverage / Calibration–Coverage / Compare
    "rules": Setting(list(rule_names(paper=True)), _rules, lambda v: ",".join(v), max_items=MAX_LINK_RULES),
    "loss": Setting("01", _choice("01", "severity")),
    "dec": Setting("exact", _choice("exact", "2")),
    "bins": _int_setting(15, 5, 30),
    "cmp_rule": Setting("climbing", _choice(*rule_names())),
    "cmp_more": Setting(False, _bool, lambda v: "1" if v else "0"),  # Compare: metrics beyond the paper
    "ov_more": Setting(False, _bool, lambda v: "1" if v else "0"),  # Overview: the same for the picked model
    # Explorer (rank and cls are further limited by the data, in the page)
    "sample": Setting(None, _text),
    "pick": Setting("rescue", _choice("rescue", "disagree", "worst", "easy", "random", "class")),
    "seed": _int_setting(0, 0, MAX_SEED),
    "rank": Setting(1, _int_in(1, 10_000_000)),
    "cls": Setting(None, _int_in(0, 10_000_000)),
    # Guaranteed accuracy (n is further limited by the data, in the page)
    "acc": _float_setting(0.95, 0.70, 0.995),
    "conf": _float_setting(0.9, 0.50, 0.99),
    "n": Setting(DEFAULT_N_CAL, _int_in(10, 10_000_000)),
    "split_seed": _int_setting(0, 0, MAX_SEED),
    "ga_shift": Setting("gaussian_blur-3", _shift),
    "reps": _int_setting(200, 10, 1000),
    "solve": Setting("epsilon", _choice("alpha", "n", "epsilon", "delta")),
    "eps": _float_setting(0.01, 0.0001, 0.5),
    # the guarantees shoot-out and the decision card on the same page (g_cov 0: no coverage risk)
    "g_methods": Setting([m for m in DEFAULT_METHODS if m != "darts"], _methods, lambda v: ",".join(v)),
    "g_reps": _int_setting(1000, 10, 5000),
    "g_sampling": Setting("iid", _choice(*SAMPLINGS)),
    "g_cov": _float_setting(0.0, 0.0, 0.99),
    "g_card": Setting("theorem1_pac", _choice(*METHODS)),
    # the method of the page's one split (the same engine as the card: θ̂ is the card's θ); `hsc card`
    # without --method deploys the same one
    "split_method": Setting(DEFAULT_METHOD, _choice(*METHODS)),
    "g_depth": _int_setting(2, 0, 30),
    "g_pv": Setting("binomial", _choice("binomial", "hoeffding_bentkus")),
    # Hierarchy sensitivity: the ImageNet-1k trees compared
    "trees": Setting(list(_TREES), _trees, lambda v: ",".join(v)),
    # Presenter mode (bigger fonts, controls tucked away) and the guided story's step
    "presenter": Setting(False, _bool, lambda v: "1" if v else "0"),
    "step": Setting(1, _int_in(1, len(STORY_STEPS))),
    # Try an image (and the Explorer's image): the model, and ImageNet-C degradation of the image
    "tmodel": Setting(None, _text),
    "timg": Setting(None, _text),  # a shipped validation image (a file name in the image folder)
    "degrade": Setting("none", _choice("none", "blur", "noise")),
    "severity": _int_setting(3, 0, 5),
    # Model atlas: the results table (a file name in the results folder), the y axis, a regime filter
    "atlas": Setting(None, _file_name),
    "atlas_y": Setting("gain_percent", _choice("gain_percent", "haurc")),  # the gain the page's sentence compares
    "regime": Setting("all", _choice("all", "clip_zero_shot", "clip_finetuned", "masked_image", "semi_self",
                                     "distillation", "in21k_pretraining", "adversarial", "plain_in1k")),
    # Where the model stops: the focus node (its id), colour, chart kind, the superclass level
    "node": Setting(None, _text),
    "wcolour": Setting("stopped_here", _choice("stopped_here", "accuracy_here")),
    "wkind": Setting("sunburst", _choice("sunburst", "icicle")),
    "level": Setting(2, _int_in(1, 64)),
    # Per-rank thresholds: the accuracy to guarantee, δ and which accuracy (app_pages/per_rank)
    "r_acc": _float_setting(0.9, 0.5, 0.999),
    "r_delta": _float_setting(0.1, 0.01, 0.5),
    "r_quantity": Setting("hierarchical", _choice(*QUANTITY_WORDS)),
    # Calibrators (app_pages/calibrators): which calibrators and confidence scores, the rule, the
    # intervals, and whether the table covers the current model or every listed one. The member
    # scores are offered (and kept from a link) only for a model whose manifest names members.
    "c_cals": Setting(["none", "temperature", "isotonic", "depth_temperature"],
                      _registry_list(calibrator_names, "calibrator names"), lambda v: ",".join(v)),
    "c_scores": Setting(["softmax", "margin", "entropy", "doctor", "member_mean", "member_disagreement"],
                        _registry_list(confidence_names, "confidence score names"), lambda v: ",".join(v)),
    "c_rule": Setting("climbing", _choice(*rule_names())),
    "c_ci": Setting(False, _bool, lambda v: "1" if v else "0"),
    "c_scope": Setting("model", _choice("model", "all")),
    # Monitor (app_pages/monitor): the stream (a shift after clean images, or "in_order": the model's file),
    # samples per part, the promise, δ, labels every K, the θ policy, and the played time (0: the end)
    "m_stream": Setting("gaussian_noise-5", _text),
    "m_n": _int_setting(2000, 200, 5000),
    "m_acc": _float_setting(0.85, 0.5, 0.99),
    "m_delta": _float_setting(0.1, 0.01, 0.5),
    "m_labels": _int_setting(1, 1, 50),
    "m_adapt": Setting("fixed", _choice("fixed", "aci", "recalibrate")),
    "m_t": _int_setting(0, 0, 10_000),
}


def init_state() -> None:
    """Fill missing canonical keys with defaults; on a session's first run, take the URL's values."""
    ss = st.session_state
    ss[_RUN] = ss.get(_RUN, 0) + 1
    for key, setting in SETTINGS.items():
        if key not in ss:
            ss[key] = list(setting.default) if isinstance(setting.default, list) else setting.default
    if not ss.get(_LOADED):
        ss[_LOADED] = True
        qp = st.query_params
        ignored, capped, values = [], [], {}
        for key, setting in SETTINGS.items():
            if key not in qp:
                continue
            values[key] = raw = qp[key]
            raw, note = capped_list(key, raw, setting.max_items)
            if note:
                capped.append(note)
            try:
                ss[key] = setting.parse(raw)
            except Invalid as exc:
                ignored.append((key, qp[key], str(exc)))  # a value no widget could hold keeps the default
        if "g_card" in values and "split_method" not in values and "g_card" in ss:
            # Guaranteed accuracy has one method for its numbers and its decision card (issue 35).
            ss["split_method"] = ss["g_card"]
            capped.append("The link's g_card= now sets Guaranteed accuracy's one method (split_method=), "
                          "used by its numbers and its decision card alike.")
        ss[URL_IGNORED] = ignored
        ss[URL_CAPPED] = capped
        ss[URL_VALUES] = values


def capped_list(key: str, raw: str, max_items: int | None) -> tuple[str, str]:
    """A link's comma-separated ``raw`` value cut to its first ``max_items`` items, and the one-line
    note that says so ("" when nothing was cut).

    >>> capped_list("rules", "a,b,c", 2)
    ('a,b', "The link's rules= named 3 entries; only the first 2 are used (a link carries at most 2).")
    """
    items = raw.split(",") if raw else []
    if max_items is None or len(items) <= max_items:
        return raw, ""
    return (",".join(items[:max_items]),
            f"The link's {key}= named {len(items):,} entries; only the first {max_items} are used "
            f"(a link carries at most {max_items}).")


def write_query_params() -> None:
    """Mirror the canonical keys in the URL (only the ones that changed are sent). A setting at its
    default joins the URL only once it is there (the link gave it, or it was changed before): a
    shared link names what differs from a fresh page (about 50 characters, not 1,100), and a link
    without a key opens at the default, so old links, which name every key, still mean the same."""
    ss = st.session_state
    qp = st.query_params
    for key, setting in SETTINGS.items():
        value = ss.get(key)
        if value is None:
            if key in qp:
                del qp[key]
            continue
        enc = setting.encode(value)
        if qp.get(key) != enc and (key in qp or setting.default is None or enc != setting.encode(setting.default)):
            qp[key] = enc


def fragment(func: Callable | None = None, **kwargs) -> Callable:
    """``st.fragment`` (same arguments) that mirrors the settings in the URL when the fragment ends.

    A fragment-only rerun runs neither app.py nor the rest of the page, so this is where such a
    rerun's changes (θ from a slider, a solver's choice) reach the link; the write is in a
    ``finally`` so an early ``return`` or ``st.stop()`` inside the fragment still writes. In a full
    run the write is repeated by app.py at the end; only changed keys are ever sent.
    """
    def decorate(body: Callable) -> Callable:
        @functools.wraps(body)  # st.fragment tells fragments apart by the wrapped function's name
        def body_then_write(*args, **kw):
            try:
                return body(*args, **kw)
            finally:
                write_query_params()
        return st.fragment(body_then_write, **kwargs)
    return decorate if func is None else decorate(func)


def _copy_back(widget_key: str, key: str, then: Callable[[], None] | None = None) -> None:
    st.session_state[key] = st.session_state[widget_key]
    st.session_state.pop(URL_IGNORED, None)  # the user has moved on: drop the link's notices
    st.session_state.pop(URL_CAPPED, None)
    if key == "model":
        st.session_state.pop(MISSING_MODEL, None)
    if then is not None:
        then()


def bind(widget: Callable, label: str, key: str, *, scope: str = "", on_change: Callable[[], None] | None = None,
         **kwargs):
    """Render ``widget`` showing the canonical ``key``; a user change writes back to ``key`` (then
    calls ``on_change``). Sliders and number inputs get the setting's range unless the page passes
    a narrower, data-dependent one."""
    wkey = keys.widget_key(scope, key)
    if widget in (st.slider, st.number_input) and key in SETTINGS:
        kwargs = {**SETTINGS[key].widget_range(), **kwargs}
    ss = st.session_state
    now, bound = (ss.get(_PAGE), ss.get(_RUN, 0)), ss.setdefault(_BOUND, {})
    page, run = bound.get(wkey, now)
    if wkey in ss and (page != now[0] or run < now[1] - 1):
        # The widget was not drawn in the last full run (the page stopped early, e.g. while a data
        # set was being picked) or was drawn by another page (a page's widgets are its own to
        # Streamlit, e.g. the Overview at "/" and at "/overview"), so the browser has none; Streamlit
        # may still hold its value, and a widget re-drawn from that alone shows its default (a
        # slider its minimum). Setting it anew shows the setting.
        del ss[wkey]
    bound[wkey] = now
    # Only when they differ: re-setting an unchanged value overwrites what the user did in the browser
    # since this run began (quick key presses on a slider were lost).
    return _draw_setting(widget, label, wkey, ss[key], wkey not in ss or ss[wkey] != ss[key],
                         on_change=_copy_back, args=(wkey, key, on_change), **kwargs)


def _draw_setting(widget: Callable, label: str, wkey: str, value: Any, changed: bool, **kwargs):
    """Draw ``widget`` under ``wkey``, setting its value to ``value`` first when ``changed``, or when the last
    set never reached the browser: a rerun asked for meanwhile (the presenter viewport's report, a click)
    stops a run inside the widget call, after Streamlit has taken the value and before it sends the widget;
    the browser then builds the widget from its default (a slider at its minimum, presenter mode's toggle
    off) and sends that back with the next click. Or in the run that ``resend_in_next_run`` names (see
    there). ``bind`` and ``follow`` draw through here."""
    ss = st.session_state
    unsent = ss.setdefault(_UNSENT, {})  # widget key → True (a dict: this module's set() is a setter)
    if changed or wkey in unsent or ss.get(_RESEND) == ss.get(_RUN, 0):
        ss[wkey] = value
        unsent[wkey] = True
    drawn = widget(label, key=wkey, **kwargs)
    unsent.pop(wkey, None)  # the call returned: the widget, with the value set, is on its way to the browser
    return drawn


def resend_in_next_run() -> None:
    """Send every bound widget (``bind``, ``follow``) its value again in the next full run; called from the
    callback of the run that follows at once (presenter mode's size report, asked for by the first run).

    A widget's value set from the session reaches the browser with the widget of the run that set it; when the
    next run follows at once, the browser may build only that run's widgets (which did not set it again: the
    value was unchanged) and fill them with their defaults: seen in presenter mode under load, where a page's
    folded pickers came up empty and its sliders at their minimum (Calibration–coverage: rules=hf1, bins=5 once
    a rule was picked). The run after the size report has no user input to overwrite."""
    st.session_state[_RESEND] = st.session_state.get(_RUN, 0) + 1


def follow(widget: Callable, label: str, key: str, value: Any, **kwargs):
    """Render ``widget`` (its own ``key``, not a setting) showing ``value`` whenever ``value`` changes; the
    user's edits stay until then (Guaranteed accuracy's Theorem-1 solver: inputs that start from the sliders
    above and follow them when they move).

    The value is set again while the run that set it has not sent the widget, as ``bind`` does
    (``_draw_setting``): otherwise the browser builds the widget from its default, its minimum, and sends that
    back (the solver showed 1 − α = 0.5, n = 1 and 1 − δ = 0.5 in presenter mode)."""
    ss = st.session_state
    source = f"{key}.from"
    changed = key not in ss or ss.get(source) != value
    ss[source] = value
    return _draw_setting(widget, label, key, value, changed, **kwargs)


def set_page(name: str) -> None:
    """Which page this full run shows (app.py, before the sidebar and the page draw their widgets)."""
    st.session_state[_PAGE] = name


def from_url(key: str) -> str | None:
    """The raw value the session's link gave ``key`` (None when it did not set it)."""
    return st.session_state.get(URL_VALUES, {}).get(key)


def get(key: str) -> Any:
    return st.session_state.get(key, SETTINGS[key].default if key in SETTINGS else None)


def set(key: str, value: Any) -> None:  # noqa: A001 - mirrors get()
    st.session_state[key] = value
