"""Chunks of one model's logits worked on by several threads, results in order (``ordered_map``).

numpy and scipy's sparse products release the GIL in their array loops, so on a few cores the
chunked passes (softmax, node sums, every rule's records; the temperature fit's log-sum-exps) run
side by side. Each chunk's work depends only on its rows and results are taken in the chunks'
order, so every number is the same for any thread count (``config.chunk_threads``,
``HSC_THREADS``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from ..config import chunk_threads

_R = TypeVar("_R")


def ordered_map(work: Callable[[int], _R], items: Sequence[int], threads: int | None = None, *,
                warm_first: bool = True) -> Iterator[_R]:
    """``work(item)`` of each item, yielded in the items' order, computed by up to ``threads``
    threads at once (default ``config.chunk_threads``; numpy releases the GIL in its array loops).
    With ``warm_first`` the first item is worked on alone, so the tree's cached tables are built
    once before the others start. Results are the same for any thread count: each item's work
    must depend on the item only."""
    count = chunk_threads() if threads is None else threads
    if count <= 1 or len(items) <= 1:
        yield from (work(item) for item in items)
        return
    first = 1 if warm_first else 0
    if warm_first:
        yield work(items[0])
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="hsc-chunk") as pool:
        pending: deque[Future[_R]] = deque()
        for item in items[first:]:  # at most 2 × threads chunks in flight: bounded memory
            pending.append(pool.submit(work, item))
            if len(pending) >= 2 * count:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
