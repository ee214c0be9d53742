"""Every spinner and progress bar of a full run goes to the one slot that floats over the page
(``progress.floating_slot``): drawn among the page's elements, one that came and went would shift or
move them (a chart's frame reloaded blank, issue 40). Outside a full run (a fragment's rerun, a script
without app.py) they stay where the code runs."""

from __future__ import annotations

import contextlib

from dashboard import progress


class _Slot:
    """A container that records what is drawn into it."""

    def __init__(self) -> None:
        self.drawn: list[tuple[str, str]] = []
        self.entered = 0

    @contextlib.contextmanager
    def spinner(self, text: str, show_time: bool = False):
        self.drawn.append(("spinner", text))
        yield

    def progress(self, value: float, text: str = ""):
        self.drawn.append(("progress", text))
        return self

    def empty(self) -> None:
        self.drawn.append(("empty", ""))

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc) -> None:
        self.entered -= 1


def test_a_full_runs_spinners_and_bars_go_to_its_slot(monkeypatch):
    page = _Slot()  # where the page's cursor is
    monkeypatch.setattr(progress, "st", page)
    slot = _Slot()
    with progress.floating_slot(slot):  # type: ignore[arg-type]
        with progress.spinner("Working on Explorer…", show_time=True), progress.ProgressBar("Curves:") as bar:
            for done in (10, 20, 30, 40):
                bar(done, 40)  # 4 chunks: a bar
        with progress.in_floating_slot():
            assert slot.entered == 1  # a cached function's own spinner is drawn here
    assert slot.entered == 0
    assert slot.drawn[0] == ("spinner", "Working on Explorer…")
    assert ("progress", "Curves: 0%") in slot.drawn and slot.drawn[-1] == ("empty", "")
    assert page.drawn == []  # nothing among the page's elements
    # after the run (a fragment's rerun has no slot): where the code runs
    with progress.spinner("Playing the stream…"), progress.in_floating_slot():
        pass
    assert page.drawn == [("spinner", "Playing the stream…")] and slot.entered == 0


def test_a_bar_made_in_the_run_keeps_its_slot_when_the_layer_reports_from_a_worker(monkeypatch):
    import threading

    monkeypatch.setattr(progress, "st", _Slot())
    slot = _Slot()
    with progress.floating_slot(slot):  # type: ignore[arg-type]
        bar = progress.ProgressBar("Chunks:")
        worker = threading.Thread(target=lambda: [bar(d, 80) for d in (10, 20, 40, 80)])
        worker.start()
        worker.join()
    assert slot.drawn[0] == ("progress", "Chunks: 0%")
