"""Run one function over many independent jobs: local processes by default, or a Ray cluster.

Both back ends call the same module-level function on the same arguments, so the numbers do not
depend on where a job ran; only the order in which results arrive does. Callers get
``(job index, result)`` pairs as jobs finish and can save each one at once (resumable runs).

Ray is imported only when asked for (``ray_address``), so plain runs never load it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from ..core.validation import clip, quote

# The directory that holds the ``hsc_core`` package: Ray workers need it on their import path.
_PACKAGE_DIR = Path(__file__).resolve().parents[1]

LOCAL_RAY = "local"


# ---------------------------------------------------------------------------- many independent jobs (hsc evaluate)
def default_workers(n_jobs: int) -> int:
    """min(#jobs, #CPUs), at least 1."""
    return max(1, min(n_jobs, os.cpu_count() or 1))


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group; the parent handles it and stops the workers, so they
    # do not each print a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Drop queued jobs and end the running ones now (Python < 3.14 has no ``terminate_workers``)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def map_local(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int) -> Iterator[tuple[int, Any]]:
    """``fn(*jobs[i])`` for every i in ``workers`` local processes; yields (i, result) as each
    finishes. One worker (or one job) runs in this process, with no pool to start.

    A worker killed from outside (e.g. by the out-of-memory killer) raises BrokenProcessPool here
    instead of hanging; on Ctrl-C or any error the workers are stopped at once.
    """
    if workers <= 1 or len(jobs) <= 1:
        for i, job in enumerate(jobs):
            yield i, fn(*job)
        return
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), initializer=_ignore_sigint)
    try:
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    except BrokenProcessPool as exc:
        _stop(pool)
        # ChildProcessError is an OSError: the command line reports it in one line.
        raise ChildProcessError("a worker process died (killed from outside, e.g. out of memory); finished "
                                "models are kept, so rerun to resume, perhaps with fewer --workers") from exc
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _ray_init_kwargs(address: str, workers: int | None) -> dict:
    """``ray.init`` arguments: ``"local"`` starts a private single-machine Ray with ``workers``
    CPUs; anything else (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) joins a cluster."""
    common = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    if address == LOCAL_RAY:
        # Local workers share this file system: putting the package's directory on their path is enough.
        path = os.pathsep.join(p for p in (str(_PACKAGE_DIR.parent), os.environ.get("PYTHONPATH", "")) if p)
        return dict(common, num_cpus=workers, runtime_env={"env_vars": {"PYTHONPATH": path}})
    # A remote cluster gets this exact hsc_core shipped to it, so its numbers are this code's numbers.
    return dict(common, address=address, runtime_env={"py_modules": [str(_PACKAGE_DIR)]})


@contextlib.contextmanager
def ray_session(address: str, workers: int | None) -> Iterator[Any]:
    """The ``ray`` module, connected to ``address`` for the block. A Ray that this call started
    is shut down at the end; an already running one is left alone."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - ray is in requirements.txt
        raise ValueError("--ray needs the 'ray' package (pip install ray==2.60.0)") from exc
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(**_ray_init_kwargs(address, workers))
        except (ConnectionError, RuntimeError) as exc:
            raise ValueError(
                f"cannot start or reach Ray at {quote(address)}: {clip(exc, 240)}".splitlines()[0]) from exc
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def _task_error_line(exc: Exception) -> str:
    """One line for a Ray task that died: the last line of Ray's report."""
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"Ray task failed: {lines[-1] if lines else type(exc).__name__}"


def map_ray(fn: Callable[..., Any], jobs: Sequence[tuple], address: str, workers: int | None = None,
            on_task_error: Callable[[str], Any] | None = None) -> Iterator[tuple[int, Any]]:
    """Like ``map_local`` but each job is a Ray task (one CPU each) on the cluster at ``address``
    (``"local"`` for a private local Ray with ``workers`` CPUs). Large shared arguments (the same
    object in every job, e.g. a hierarchy) are put in Ray's object store once.

    File paths in ``jobs`` must be readable at the same path on every node (a shared file system).
    A Ray that this call started is shut down at the end; an already running one is left alone.
    A task that dies (its worker crashed or ran out of memory) yields ``on_task_error(one line)``
    when that is given, and the other tasks go on; without it the error is raised.
    """
    with ray_session(address, workers) as ray:
        shared: dict[int, Any] = {}  # id(arg) → object ref, for arguments repeated across jobs
        counts: dict[int, int] = {}
        for job in jobs:
            for arg in job:
                counts[id(arg)] = counts.get(id(arg), 0) + 1

        def ref(arg: Any) -> Any:
            if counts[id(arg)] < 2 or isinstance(arg, (str, int, float, bool, type(None), os.PathLike)):
                return arg
            if id(arg) not in shared:
                shared[id(arg)] = ray.put(arg)
            return shared[id(arg)]

        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = {task.remote(*map(ref, job)): i for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                try:
                    result = ray.get(r)
                except ray.exceptions.RayError as exc:
                    if on_task_error is None:
                        raise
                    result = on_task_error(_task_error_line(exc))
                yield refs[r], result


def map_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], *, workers: int | None = None,
             ray_address: str | None = None,
             on_ray_task_error: Callable[[str], Any] | None = None) -> Iterator[tuple[int, Any]]:
    """``fn(*job)`` for every job, on Ray when ``ray_address`` is given, else in local processes
    (``workers`` defaults to min(#jobs, #CPUs); a local Ray's CPUs to every CPU). Yields (job index,
    result) as jobs finish."""
    if not jobs:
        return iter(())
    if workers is None:  # a local Ray gets every CPU: a model's task splits its rows across them
        workers = max(1, os.cpu_count() or 1) if ray_address else default_workers(len(jobs))
    if workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    if ray_address:
        return map_ray(fn, jobs, ray_address, workers, on_ray_task_error)
    return map_local(fn, jobs, workers)


# ---------------------------------------------------------------------------- one model's rows across a Ray cluster
def _block_paths(hierarchy: Any, block: Any, temperature: float, rules: tuple[str, ...],
                 precision: str | None) -> dict:
    """One Ray task's share of ``ray_decision_paths``: the records of a block of rows."""
    from ..core.logit_chunks import decision_paths_from_logits

    return decision_paths_from_logits(hierarchy, block, temperature, rules, precision=precision)  # type: ignore[arg-type]


def ray_decision_paths(hierarchy: Any, logits: Any, temperature: float = 1.0, rules: Sequence[str] = (), *,
                       precision: str | None = None, rows: Any = None,
                       progress: Callable[[int, int], None] | None = None, scorer: Any = None) -> dict:
    """``logit_chunks.decision_paths_from_logits`` with the rows split into one block per CPU of the
    Ray cluster this process is connected to (``hsc evaluate --ray``: a model's task splits its file).

    Each block's logits are put in Ray's object store and its records built by a task; the blocks
    are concatenated in order (``rules.concat_decision_paths``). Every record depends on its row
    alone and padding repeats a row's last record, so the result is the plain pass's, bit for bit.
    Without a connected Ray, or with one CPU, it is the plain pass.
    """
    import numpy as np

    from ..core.logit_chunks import decision_paths_from_logits
    from ..core.rules import concat_decision_paths

    index = np.arange(np.shape(logits)[0]) if rows is None else np.asarray(rows)
    ray: Any = sys.modules.get("ray")  # connected only when this process was started or joined by Ray
    parts = int(ray.cluster_resources().get("CPU", 1)) if ray is not None and ray.is_initialized() else 1
    if parts < 2 or index.size < 2 * parts or scorer is not None:
        return decision_paths_from_logits(hierarchy, logits, temperature, tuple(rules), progress=progress,
                                          precision=precision, rows=index, scorer=scorer)  # type: ignore[arg-type]
    if progress is not None:
        progress(0, index.size)
    task = ray.remote(num_cpus=1, max_retries=0)(_block_paths)
    tree = ray.put(hierarchy)
    refs = [task.remote(tree, ray.put(logits[block]), temperature, tuple(rules), precision)
            for block in np.array_split(index, parts)]
    found = ray.get(refs)  # in the blocks' order
    if progress is not None:
        progress(index.size, index.size)
    return {rule: concat_decision_paths([part[rule] for part in found]) for rule in found[0]}


# ---------------------------------------------------------------------------- cache-logits: one model per GPU
# (helper "pkg"; used by ``hsc cache-logits --models a,b,c --ray``)
def map_ray_per_gpu(fn: Callable[..., dict], jobs: Sequence[tuple], address: str,
                    use_gpu: bool = True) -> Iterator[tuple[int, dict]]:
    """``fn(*job, gpu)`` for every job as a Ray task holding one whole GPU when the cluster has
    GPUs (and ``use_gpu``), else one CPU; ``gpu`` tells the task which. Yields (job index, result)
    as tasks finish. A task that dies (worker crash, out of memory) yields
    ``{"model": job[0], "code": 1, "error": …, "summary": None}`` and the other tasks go on.
    """
    if not jobs:
        return
    with ray_session(address, None) as ray:  # local: every CPU and GPU of this machine
        gpu = use_gpu and ray.cluster_resources().get("GPU", 0) >= 1
        task = ray.remote(num_gpus=1 if gpu else 0, num_cpus=1, max_retries=0)(fn)
        refs = {task.remote(*job, gpu): i for i, job in enumerate(jobs)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for r in done:
                i = refs[r]
                try:
                    yield i, ray.get(r)
                except ray.exceptions.RayError as exc:
                    yield i, {"model": jobs[i][0], "out": None, "code": 1, "summary": None,
                              "error": _task_error_line(exc)}
