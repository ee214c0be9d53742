"""The progress bar of a long evaluation job (the layer's ``progress(done, total)`` callback)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

PROGRESS_MIN_CHUNKS = 4  # show a progress bar only for jobs of at least this many chunks


class ProgressBar:
    """The layer's ``progress(done, total)`` callback as a throttled st.progress (about 20
    updates), removed when the job ends (use it as a context manager). Small jobs show nothing:
    the bar appears once the first chunk says the job has at least ``PROGRESS_MIN_CHUNKS`` chunks.
    A value the layer already holds calls nothing, so no bar flashes on a rerun."""

    def __init__(self, text: str):
        self.text = text
        self.bar: DeltaGenerator | None = None
        self.chunks: int | None = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if done <= 0 or total <= 0:
            return
        if self.chunks is None:  # the first chunk's size gives the number of chunks
            self.chunks = -(-total // done)
            if self.chunks >= PROGRESS_MIN_CHUNKS:
                self.bar = st.progress(0.0, text=f"{self.text} 0%")
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
