"""``state.bind`` sends a widget its setting again when the run that set it stopped inside the widget call.

Streamlit takes a widget's value before it checks for a rerun asked for meanwhile and sends the widget only
after; a run stopped there leaves the browser without the value, and a browser that builds the widget from
its default (a slider at its minimum, presenter mode's toggle off) sends that default back with the next
click. Seen in CI: presenter mode left itself on Guaranteed accuracy's Run click.
"""

from __future__ import annotations

import pytest
import streamlit as st

from dashboard import session_keys as keys
from dashboard import state


class RecordingState(dict):
    """A session state that remembers which keys a run assigned."""

    def __init__(self) -> None:
        super().__init__()
        self.assigned: list[str] = []

    def __setitem__(self, key, value) -> None:
        self.assigned.append(key)
        super().__setitem__(key, value)


class StoppedForRerun(Exception):
    """Stands for Streamlit's RerunException, raised inside a widget call."""


def _run(ss: RecordingState, n: int) -> None:
    dict.__setitem__(ss, keys.FULL_RUN, n)
    dict.__setitem__(ss, keys.PAGE, "guaranteed_accuracy")
    ss.assigned.clear()


def _drawn(label, key, **kwargs):
    return st.session_state[key]


def _stopped(label, key, **kwargs):
    raise StoppedForRerun


def test_a_value_whose_widget_was_never_sent_is_set_again(monkeypatch):
    ss = RecordingState()
    monkeypatch.setattr(st, "session_state", ss)
    dict.__setitem__(ss, "acc", 0.95)
    wkey = keys.widget_key("ga", "acc")

    _run(ss, 1)  # the first run sets the widget's value, then stops inside its call
    with pytest.raises(StoppedForRerun):
        state.bind(_stopped, "Target accuracy", "acc", scope="ga")
    assert wkey in ss.assigned

    _run(ss, 2)  # the value is unchanged, but the browser never got it: set again
    assert state.bind(_drawn, "Target accuracy", "acc", scope="ga") == 0.95
    assert wkey in ss.assigned

    _run(ss, 3)  # sent: an unchanged value is left alone (re-setting it would undo a user's quick key presses)
    assert state.bind(_drawn, "Target accuracy", "acc", scope="ga") == 0.95
    assert wkey not in ss.assigned

    _run(ss, 4)  # a changed setting is always set
    dict.__setitem__(ss, "acc", 0.9)
    assert state.bind(_drawn, "Target accuracy", "acc", scope="ga") == 0.9
    assert wkey in ss.assigned


def test_a_followed_input_is_set_again_until_its_widget_is_sent_and_keeps_the_users_edit(monkeypatch):
    """``state.follow`` (the Theorem-1 solver's inputs follow the sliders above): the same re-sending as
    ``bind``. Seen in presenter mode: the solver showed 1 − α = 0.5, n = 1 and 1 − δ = 0.5, its minimums."""
    ss = RecordingState()
    monkeypatch.setattr(st, "session_state", ss)

    _run(ss, 1)  # the first run sets the input from the slider, then stops inside its call
    with pytest.raises(StoppedForRerun):
        state.follow(_stopped, "Calibration size n", "solve_n", 800)
    assert "solve_n" in ss.assigned

    _run(ss, 2)  # the slider did not move, but the browser never got the input: set again
    assert state.follow(_drawn, "Calibration size n", "solve_n", 800) == 800
    assert "solve_n" in ss.assigned

    _run(ss, 3)  # sent: the user's edit stays while the slider stays
    dict.__setitem__(ss, "solve_n", 1234)
    assert state.follow(_drawn, "Calibration size n", "solve_n", 800) == 1234
    assert "solve_n" not in ss.assigned

    _run(ss, 4)  # the slider moved: the input takes its value
    assert state.follow(_drawn, "Calibration size n", "solve_n", 900) == 900


def test_the_run_after_presenter_modes_size_report_sends_every_value_again(monkeypatch):
    """``state.resend_in_next_run`` (called by presenter mode's size report): the run that follows the first at
    once sets every bound widget's value again, sent or not; the run after it does not. Seen in presenter mode
    under load: Calibration–coverage's folded pickers came up empty and its slider at its minimum."""
    ss = RecordingState()
    monkeypatch.setattr(st, "session_state", ss)
    dict.__setitem__(ss, "bins", 15)
    wkey = keys.widget_key("cc", "bins")

    _run(ss, 1)  # the first run sets the value and sends the widget
    assert state.bind(_drawn, "ECE bins", "bins", scope="cc") == 15 and wkey in ss.assigned
    state.resend_in_next_run()  # the size report's callback, before the next run starts

    _run(ss, 2)  # unchanged and sent, but set again in this run
    assert state.bind(_drawn, "ECE bins", "bins", scope="cc") == 15 and wkey in ss.assigned

    _run(ss, 3)  # and only in that run
    assert state.bind(_drawn, "ECE bins", "bins", scope="cc") == 15 and wkey not in ss.assigned
