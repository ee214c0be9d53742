"""``widgets.job_button``: a long job's click survives a run that stops inside the work.

A plain ``st.button`` is True only in the run its click starts. When another rerun is asked for while that
run works (another click, presenter mode's size report, a reconnect), Streamlit stops the run, and the next
one sees the button False: the job is lost and the page shows its "Press …" hint again. Seen in the browser
tier under load: Guaranteed accuracy's shoot-out never drew its bars after the click.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

# The page: a job whose work asks for a rerun once, in the middle (the run is stopped there, as Streamlit
# stops a run when another is asked for), and may change the settings at that moment.
PAGE = """
import streamlit as st
from dashboard import widgets

ss = st.session_state
settings = ss.setdefault("settings", 1)
if widgets.job_button("Run", "run_job", settings):
    with widgets.job_work("run_job"):
        ss.setdefault("started", []).append(settings)
        if len(ss["started"]) == 1 and ss.get("interrupt"):
            ss["settings"] = ss.get("next_settings", settings)
            st.rerun()
        ss["done"] = settings
st.write("done" if "done" in ss else "Press Run")
"""


def _app(**state) -> AppTest:
    at = AppTest.from_string(PAGE, default_timeout=30)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def test_a_run_stopped_inside_the_work_is_resumed_by_the_next():
    at = _app(interrupt=True)
    at.button(key="run_job").click().run()
    assert at.session_state["started"] == [1, 1] and at.session_state["done"] == 1
    assert at.markdown[0].value == "done"
    at.run()  # done: later runs do not start it again
    assert at.session_state["started"] == [1, 1]


def test_settings_changed_before_the_work_is_done_drop_the_job():
    at = _app(interrupt=True, next_settings=2)
    at.button(key="run_job").click().run()
    assert at.session_state["started"] == [1] and "done" not in at.session_state
    assert at.markdown[0].value == "Press Run"


def test_a_job_that_fails_is_not_asked_again():
    at = AppTest.from_string(PAGE.replace('ss["done"] = settings', 'raise ValueError("no")'), default_timeout=30)
    at.run()
    at.button(key="run_job").click().run()
    assert at.exception and "no" in at.exception[0].value
    at.run()
    assert at.session_state["started"] == [1]  # not started again by a later run
