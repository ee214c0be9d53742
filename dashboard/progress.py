"""How a long run shows that it works: the progress bar of an evaluation job (the layer's
``progress(done, total)`` callback) and the run's spinners, all in one slot that floats over the page."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

# The slot of this script thread's full run (app.py): a keyed container that floats over the page
# (chart_frame.css). Streamlit draws a spinner where the page's cursor is and keys the page's spinners by
# their order; a spinner that shows before a chart in one render and after it in another makes the browser
# move the chart's block, which reloads its frame (a blank chart; a Play cut short). Every spinner of a
# full run therefore goes to this slot, where nothing else is, and so does a job's progress bar (it would shift
# the page's elements below it); a fragment's rerun (no slot) keeps its own.
_RUN = threading.local()


@contextlib.contextmanager
def floating_slot(slot: DeltaGenerator) -> Iterator[None]:
    """Send this full run's spinners (``spinner``) to ``slot`` until the block ends."""
    _RUN.slot = slot
    try:
        yield
    finally:
        _RUN.slot = None


def _slot() -> DeltaGenerator | None:
    return getattr(_RUN, "slot", None)


@contextlib.contextmanager
def in_floating_slot() -> Iterator[None]:
    """What the block draws goes to the run's floating slot: for a cached function's own spinner
    (``show_spinner="…"``), which Streamlit draws where the cursor is."""
    slot = _slot()
    with slot if slot is not None else contextlib.nullcontext():
        yield


@contextlib.contextmanager
def spinner(text: str, *, show_time: bool = False) -> Iterator[None]:
    """``st.spinner(text)`` (shown after half a second) in the run's floating slot."""
    slot = _slot()
    with (slot if slot is not None else st).spinner(text, show_time=show_time):
        yield


PROGRESS_MIN_CHUNKS = 4  # show a progress bar only for jobs of at least this many chunks


class ProgressBar:
    """The layer's ``progress(done, total)`` callback as a throttled st.progress (about 20
    updates), removed when the job ends (use it as a context manager). Small jobs show nothing:
    the bar appears once the first chunk says the job has at least ``PROGRESS_MIN_CHUNKS`` chunks.
    A value the layer already holds calls nothing, so no bar flashes on a rerun."""

    def __init__(self, text: str):
        self.text = text
        self.slot = _slot()  # taken in the script's thread (the layer may report from its workers')
        self.bar: DeltaGenerator | None = None
        self.chunks: int | None = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if done <= 0 or total <= 0:
            return
        if self.chunks is None:  # the first chunk's size gives the number of chunks
            self.chunks = -(-total // done)
            if self.chunks >= PROGRESS_MIN_CHUNKS:
                # beside the run's spinners: a bar that came and went among the page's elements would shift them
                self.bar = (self.slot if self.slot is not None else st).progress(0.0, text=f"{self.text} 0%")
        frac = min(done / total, 1.0)
        step = int(frac * 20)
        if self.bar is not None and step > self.shown:
            self.shown = step
            self.bar.progress(frac, text=f"{self.text} {frac:.0%}")

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.empty()
