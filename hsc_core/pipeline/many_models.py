"""The many-model runner of ``hsc evaluate``: each logits file is one ``ModelEvaluation`` under
the protocol of ``core.protocol``, run in parallel local processes or as Ray tasks
(``pipeline.distributed``; both call ``evaluate_model``'s code and give identical numbers), each
finished model saved at once in the checksummed cache of ``evaluation.result_cache``, so a rerun
skips finished models and an interrupted run loses at most the models in flight.

A model's rows (``evaluation_rows``) are the layer's: ``EvaluationSet.results`` of the rules asked
for (default ``rule_names()``: the paper's four, then the metric-optimal / Pareto ones) per loss, and
``EvaluationSet.extra_results`` of the extra metrics asked for, the same calls as the dashboard's
tables. The command line is ``hsc_core.cli.evaluate``.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.calibrators import get_calibrator
from ..core.confidence import get_confidence
from ..core.hierarchy import Hierarchy
from ..core.logit_chunks import decision_paths_from_logits
from ..core.metric_rules import check_rule
from ..core.protocol import CALIBRATION_FRACTION, SPLIT_SEED, check_protocol
from ..core.risk import LOSSES
from ..core.rule_registry import rule_names
from ..datasets.atomic_files import write_bytes_atomic, write_json_atomic
from ..datasets.logits_io import LogitsBundle, load_logits
from ..evaluation.model import EvaluationSet, ModelEvaluation, PathsOf
from ..evaluation.rc_table import model_tables, table_rows
from ..evaluation.resolve import resolve_hierarchy
from ..evaluation.result_cache import (
    DEFAULT_CALIBRATORS,
    DEFAULT_CONFIDENCES,
    LOSS_METRICS,
    ContentRead,
    builtin_tree_tag,
    cache_entry,
    cache_file,
    file_digest,
    key_settings,
    manifest_dataset,
    manifest_dict,
    rc_arrays,
    rc_cache_file,
    rc_entry_bytes,
    rc_key,
    read_cached,
    read_rc_cached,
    result_key,
    score_pairs,
    with_members,
)
from ..evaluation.results import hierarchy_hash
from ..evaluation.subsets import canonical_name, check_subset, subset_mask
from .distributed import default_workers, map_jobs, ray_decision_paths

#: The rules shown by default: the paper's four (``rule_registry``).
PAPER_RULES: tuple[str, ...] = rule_names(paper=True)

if TYPE_CHECKING:
    from tqdm.auto import tqdm

__all__ = [
    "EXTRA_METRICS", "Evaluated", "MAX_DEC", "check_dec", "check_metrics", "evaluate_all", "evaluate_many",
    "evaluate_model", "evaluation_rows", "model_names",
]

MAX_DEC = 6
#: ``--metrics`` name → the row's ``metric`` (``results.EXTRA_METRICS``)
EXTRA_METRICS: dict[str, str] = {"excess_haurc": "excess_haurc", "achievable_haurc": "achievable_haurc",
                                 "aurc": "aurc_zhou", "augrc": "augrc", "hf1": "hf1_micro"}

Progress = Callable[[int, int], None]


def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    """The row names of ``--metrics`` names (``EXTRA_METRICS``), in the order given, each once; one
    ValueError naming the choices for an unknown one."""
    out = []
    for m in metrics:
        if m not in EXTRA_METRICS:
            raise ValueError(f"unknown metric {m!r}; choose from {', '.join(EXTRA_METRICS)}")
        out.append(EXTRA_METRICS[m])
    return tuple(dict.fromkeys(out))


def evaluation_rows(ev: ModelEvaluation, *, dec: int | None = None, rules: Sequence[str] = PAPER_RULES,
                    metrics: Sequence[str] = (), calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
                    confidences: Sequence[str] = DEFAULT_CONFIDENCES) -> list[dict]:
    """Tidy rows (``RESULT_COLUMNS``) of one model, per (calibrator, confidence) pair, calibrators
    outer (default: none, then temperature, with softmax: without then with temperature scaling):
    ``EvaluationSet.results`` of ``rules`` for every loss, then the extra ``metrics`` (row
    names) of ``EvaluationSet.extra_results``: excess and achievable hAURC per loss, hF1 (θ = 0,
    loss-free) under the first loss, AURC and AUGRC once per setting (no rule, no loss)."""
    rules = tuple(dict.fromkeys(check_rule(r) for r in rules))
    rows: list[dict] = []
    for cal, conf in score_pairs({"calibrators": calibrators, "confidences": confidences}):
        es = ev.scored(cal, conf, rules=rules)  # every rule's records in one pass per setting
        rows += es.results(LOSSES, dec, rules=rules)
        rows += _extra_rows(es, rules, metrics)
    return rows


def _extra_rows(es: EvaluationSet, rules: tuple[str, ...], metrics: Sequence[str]) -> list[dict]:
    if not metrics:
        return []
    out = []
    for k, loss in enumerate(LOSSES):
        for row in es.extra_results(rules, loss):
            if row["metric"] in metrics and (k == 0 or row["metric"] in LOSS_METRICS):
                out.append(row)
    return out


def evaluate_model(
    bundle_or_path: LogitsBundle | str | os.PathLike,
    hierarchy: Hierarchy,
    *,
    dec: int | None = None,
    protocol: str = "project",
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    dataset: str = "",
    progress: Progress | None = None,
    rules: Sequence[str] = PAPER_RULES,
    metrics: Sequence[str] = (),
    subset: str = "all",
) -> list[dict]:
    """Tidy result rows of one model: every rule × loss, without and with temperature scaling.

    Parameters
    ----------
    bundle_or_path : the model's logits, loaded or the path of its ``.npz``.
    hierarchy : its class tree; the logits' columns are the leaves, in order.
    dec : None for exact curves, else θ on the authors' grid rounded to ``dec`` decimals.
    protocol, cal_fraction, seed : the evaluation protocol (``core.protocol``).
    dataset : the rows' ``dataset``.
    progress : ``progress(done, total)``, counting the samples of both settings (without TS first).
    rules, metrics : the rules (default the paper's four) and extra metrics (row names) of ``evaluation_rows``.
    subset : the samples evaluated (``evaluation.subsets``: "all", or a name the file offers).

    Returns
    -------
    list of dict
        ``evaluation_rows`` (keys ``ROW_COLUMNS``); ``file`` is the path given ("" for a bundle).
    """
    check_dec(dec)
    if isinstance(bundle_or_path, LogitsBundle):
        bundle, file = bundle_or_path, ""
    else:
        bundle, file = load_logits(bundle_or_path), str(bundle_or_path)
    ev = _model_evaluation(bundle, hierarchy, file=file, dataset=dataset, protocol=protocol,
                           cal_fraction=cal_fraction, seed=seed, progress=progress, subset=subset, rules=rules)
    return [{**row, "file": file} for row in evaluation_rows(ev, dec=dec, rules=rules, metrics=metrics)]


def _model_evaluation(bundle: LogitsBundle, hierarchy: Hierarchy, *, file: str, dataset: str, protocol: str,
                      cal_fraction: float, seed: int, progress: Progress | None,
                      subset: str = "all", members_path: str | None = None,
                      rules: Sequence[str] = PAPER_RULES, paths_of: PathsOf | None = None) -> ModelEvaluation:
    chosen = check_subset(bundle.sources, bundle.n_samples, subset, where=bundle.name)
    ev = ModelEvaluation.from_bundle(bundle, hierarchy, dataset=dataset, protocol=protocol,
                                     cal_fraction=cal_fraction, seed=seed, file=file, members_path=members_path,
                                     subset=subset_mask(bundle.sources, bundle.n_samples, subset),
                                     subset_name=chosen.name, paths_of=paths_of)
    if progress is not None:
        _build_settings(ev, progress, rules)
    return ev


def _build_settings(ev: ModelEvaluation, progress: Progress, rules: Sequence[str] = PAPER_RULES,
                    decoded: Callable[[], object] | None = None) -> None:
    """Build both settings (the long part) with one sample count over both; under the paper
    protocol the two differ in size (no TS: every sample), so the offsets are their real sizes.

    ``decoded``: returns once the model's logits are all read and checked (``ContentRead.finish``),
    called between the two: the setting without TS needs no temperature, so it is built while the
    file is still being decoded (its pass waits for each chunk's rows); the TS fit needs every
    calibration row. A damaged file's own error wins over what the pass made of it."""
    sizes = [int(ev.rows_for(ts).size) for ts in (False, True)]
    for ts, offset in ((False, 0), (True, sizes[0])):
        def report(done: int, _n: int, o: int = offset) -> None:
            progress(o + done, sum(sizes))
        try:
            ev.setting(ts, progress=report, rules=rules)
        except ValueError:
            if decoded is not None:
                decoded()
            raise
        if decoded is not None:
            decoded()


def _no_progress(_done: int, _total: int) -> None:
    """A ``Progress`` that shows nothing (a worker without a sample bar)."""


def check_dec(dec: int | None) -> None:
    if dec is not None and not 0 <= dec <= MAX_DEC:
        raise ValueError(f"--dec must be between 0 and {MAX_DEC} (the authors used 2), got {dec}")


# ---------------------------------------------------------------------------- many models
def _evaluate_job(path: str, hierarchy: Hierarchy | None, settings: dict, sample_bar: bool = False,
                  rc: dict | None = None, split: bool = False) -> dict:
    """``_evaluate_one`` with its warnings (a ``UserWarning`` such as a calibration split too small to fit
    on, numpy's ``RuntimeWarning``) gathered as ``"warnings"``: [(is a UserWarning, message)], each once,
    for the main process to show as one line each, wherever the job ran."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _evaluate_one(path, hierarchy, settings, sample_bar, rc, split)
    notes = list(dict.fromkeys((issubclass(w.category, UserWarning), str(w.message)) for w in caught
                               if issubclass(w.category, (UserWarning, RuntimeWarning))))
    if notes:
        out["warnings"] = notes
    return out


def _evaluate_one(path: str, hierarchy: Hierarchy | None, settings: dict, sample_bar: bool = False,
                  rc: dict | None = None, split: bool = False) -> dict:
    """One model, in a worker process or Ray task: {"rows": [...], "key": …, "content": …, "tree": …}
    or {"error": one line}. With ``rc`` (``rc_options``), also the model's ``--rc-table`` tables as
    arrays (``"rc"``: ``rc_arrays``) and their cache key (``"rc_key"``), from the same evaluation.

    The file and its manifest are read once; ``content`` is the digest of those bytes, ``key``
    their ``result_key`` under ``settings`` (and ``tree``, the built-in tree's tag), and the rows
    are computed from the same bytes, so an entry saved under ``key`` describes what was evaluated
    even when the file changed on disk meanwhile. Errors come back as values, so one bad file
    never stops the others. ``sample_bar``: a progress bar over this model's samples (only when it
    runs in the main process, so bars never interleave). ``split``: in a Ray task, the model's rows
    are split across the cluster's CPUs (``distributed.ray_decision_paths``; the same numbers).
    """
    bar = _SampleBar(Path(path).stem) if sample_bar else None
    try:
        with ContentRead(Path(path)) as read:
            dataset, tree = resolve_hierarchy(read.bundle, path, hierarchy)
            tree_tag = None
            if hierarchy is None:  # the tag the main process derives from the manifest, of the tree used
                tree_tag = ("unknown" if manifest_dataset(read.bundle.manifest) is None
                            else f"{dataset}:{hierarchy_hash(tree)}")
            check_dec(settings["dec"])
            if split:  # the rows go to Ray's object store whole
                read.finish()
            # The setting without TS is built as the logits are decoded: each chunk waits for its rows.
            ev = _model_evaluation(read.bundle, tree, file="", members_path=path, dataset=dataset,
                                   protocol=settings["protocol"], cal_fraction=settings["cal_fraction"],
                                   seed=settings["seed"], progress=None, subset=settings["subset"],
                                   rules=settings["rules"], paths_of=ray_decision_paths if split else partial(
                                       decision_paths_from_logits, ready=read.wait_rows))
            _build_settings(ev, bar if bar is not None else _no_progress, settings["rules"], decoded=read.finish)
            bundle, content = read.finish()
        content = with_members(content, Path(path), bundle.manifest, settings)  # member scores: members keyed too
        rows = evaluation_rows(ev, dec=settings["dec"], rules=settings["rules"], metrics=settings["metrics"],
                               calibrators=settings.get("calibrators", DEFAULT_CALIBRATORS),
                               confidences=settings.get("confidences", DEFAULT_CONFIDENCES))
        out: dict[str, object] = {"rows": [{**row, "file": path} for row in rows], "content": content,
                                  "tree": tree_tag, "key": result_key(content, key_settings(settings, tree_tag))}
        if rc is not None:
            table, points = model_tables(ev, rc["rules"], coverages=rc["coverages"], risks=rc["risks"], losses=LOSSES)
            out["rc"] = rc_arrays(table, points)
            out["rc_key"] = rc_key(content, key_settings(settings, tree_tag), rc)
        return out
    except (ValueError, OSError) as exc:
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    finally:
        if bar is not None:
            bar.close()


class _SampleBar:
    """``progress(done, total)`` callback drawing a tqdm bar on stderr, created on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bar: tqdm | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            # disable=None: no bar when stderr is not a terminal (logs, CI); leave=False: the model
            # bar stays, the sample bar goes when the model is done.
            self.bar = tqdm(total=total, desc=self.name, unit="sample", unit_scale=True, leave=False,
                            file=sys.stderr, disable=None)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def model_names(paths: Sequence[Path]) -> list[str]:
    """Each file's model name: its stem, or its path without ``.npz`` where files share a stem
    (tables are keyed by model name, so two folders' ``model.npz`` must not merge into one row)."""
    counts = Counter(p.stem for p in paths)
    return [p.stem if counts[p.stem] == 1 else str(p.with_suffix("")) for p in paths]


def evaluate_many(
    paths: Sequence[str | os.PathLike],
    hierarchy: Hierarchy | None = None,
    *,
    dec: int | None = None,
    protocol: str = "project",
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    workers: int | None = None,
    ray_address: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    resume: bool = True,
    progress: bool = False,
    rules: Sequence[str] = PAPER_RULES,
    metrics: Sequence[str] = (),
    subset: str = "all",
) -> tuple[list[dict], dict[str, str], int]:
    """Evaluate many files; returns (rows of the models that finished, {file: error}, #cached).

    ``hierarchy=None`` picks each file's built-in tree. With ``cache_dir``, each finished model is
    saved there at once, under the key of the bytes it was computed from, and, with ``resume``, a
    model whose current file and settings match an intact saved result is not computed again (an
    unusable entry is noted on stderr in one line and computed again; see ``read_cached``). Rows
    come in the order of ``paths``, each named by ``model_names`` and carrying its ``file``.
    """
    done = evaluate_all(paths, hierarchy, dec=dec, protocol=protocol, cal_fraction=cal_fraction, seed=seed,
                        workers=workers, ray_address=ray_address, cache_dir=cache_dir, resume=resume,
                        progress=progress, rules=rules, metrics=metrics, subset=subset)
    return done.rows, done.errors, done.n_cached


@dataclass
class Evaluated:
    """What ``evaluate_all`` returns: result rows, {file: error}, the number of models taken whole
    from the cache, and with ``rc`` the RC table and operating-point rows (in the order of the
    files, each model named as in ``rows``)."""

    rows: list[dict]
    errors: dict[str, str]
    n_cached: int
    rc_table: list[dict] = field(default_factory=list)
    rc_points: list[dict] = field(default_factory=list)


def evaluate_all(
    paths: Sequence[str | os.PathLike],
    hierarchy: Hierarchy | None = None,
    *,
    dec: int | None = None,
    protocol: str = "project",
    cal_fraction: float = CALIBRATION_FRACTION,
    seed: int = SPLIT_SEED,
    workers: int | None = None,
    ray_address: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    resume: bool = True,
    progress: bool = False,
    rc: dict | None = None,
    rules: Sequence[str] = PAPER_RULES,
    metrics: Sequence[str] = (),
    subset: str = "all",
    calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
    confidences: Sequence[str] = DEFAULT_CONFIDENCES,
) -> Evaluated:
    """``evaluate_many``, and with ``rc`` (``rc_options``) each model's ``--rc-table`` tables,
    computed in the same worker (local process or Ray task) from the same evaluation and cached
    beside its result (``rc_cache_file``): a model is computed again when either is missing."""
    check_dec(dec)
    check_protocol(protocol)
    files = [Path(p) for p in paths]
    settings = {"dec": dec, "protocol": protocol, "cal_fraction": cal_fraction, "seed": seed,
                "hierarchy": hierarchy_hash(hierarchy) or "builtin",
                "rules": list(dict.fromkeys(check_rule(r) for r in rules)), "metrics": list(metrics),
                "subset": canonical_name(subset),
                "calibrators": list(dict.fromkeys(get_calibrator(c).key for c in calibrators)),
                "confidences": list(dict.fromkeys(get_confidence(c).key for c in confidences))}
    cache = Path(cache_dir) if cache_dir is not None else None
    results: dict[int, list[dict]] = {}
    tables: dict[int, dict[str, dict[str, np.ndarray]]] = {}
    keys: dict[int, str] = {}  # the lookup key of each file as it is now
    trees: dict[str, str] = {}
    for i, p in enumerate(files):
        if cache is None or not resume or not (cache_file(cache, p).exists()
                                               or (rc is not None and rc_cache_file(cache, p).exists())):
            continue  # nothing kept to look up: the worker keys what it reads, so the file is read once
        try:
            content, manifest = file_digest(p)
        except OSError:
            continue  # unreadable: the worker reports why
        tree_tag = builtin_tree_tag(manifest, trees) if hierarchy is None else None
        content = with_members(content, p, manifest_dict(manifest), settings)
        keys[i] = result_key(content, key_settings(settings, tree_tag))
        if resume:
            entry = cache_file(cache, p)
            rows, problem = read_cached(entry, keys[i], settings, p.stem, tree_tag)
            if problem:
                print(f"{entry}: unusable cached result ({problem}); recomputing", file=sys.stderr)
            if rows is not None:
                results[i] = rows
            if rc is not None:
                arrays, problem = read_rc_cached(rc_cache_file(cache, p),
                                                 rc_key(content, key_settings(settings, tree_tag), rc))
                if problem:
                    print(f"{rc_cache_file(cache, p)}: unusable cached RC table ({problem}); recomputing",
                          file=sys.stderr)
                if arrays is not None:
                    tables[i] = arrays
    todo = [i for i in range(len(files)) if i not in results or (rc is not None and i not in tables)]
    n_cached = len(files) - len(todo)
    n_workers = default_workers(len(todo)) if workers is None else workers
    in_process = ray_address is None and (n_workers <= 1 or len(todo) <= 1)
    # Under Ray each model's task also splits its rows across the cluster's CPUs (one file: every CPU at work).
    jobs = [(str(files[i]), hierarchy, settings, progress and in_process, rc, bool(ray_address)) for i in todo]
    errors: dict[str, str] = {}
    unkept: list[str] = []  # cache entries that could not be written (the results are kept all the same)
    bar = _progress_bar(len(files), n_cached, progress, "ray" if ray_address else "local")
    try:
        for j, out in map_jobs(_evaluate_job, jobs, workers=workers, ray_address=ray_address,
                               on_ray_task_error=lambda message: {"error": message}):
            i = todo[j]
            for is_user, message in out.get("warnings", ()):
                warnings.warn(f"{files[i].name}: {message}", UserWarning if is_user else RuntimeWarning, stacklevel=2)
            if "error" in out:
                errors[str(files[i])] = out["error"]
                results.pop(i, None)
                tables.pop(i, None)
            else:
                results[i] = out["rows"]
                changed = i in keys and keys[i] != out["key"]
                if changed:
                    print(f"note: {files[i]} changed while this run read it; its results are of the content "
                          "evaluated", file=sys.stderr)
                if cache is not None:
                    saved = cache_entry(out["key"], out["content"], files[i], key_settings(settings, out["tree"]),
                                        out["rows"], changed)
                    _keep(write_json_atomic, cache_file(cache, files[i]), saved, unkept)
                if rc is not None:
                    tables[i] = out["rc"]
                    if cache is not None:
                        _keep(write_bytes_atomic, rc_cache_file(cache, files[i]),
                              rc_entry_bytes(out["rc_key"], out["rc"]), unkept)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    names = model_names(files)
    # The same file may be named differently from run to run; name it as given now.
    done = Evaluated([{**row, "model": names[i], "file": str(files[i])} for i in sorted(results) for row in results[i]],
                     errors, n_cached)
    for i in sorted(tables):
        done.rc_table += table_rows(tables[i]["table"], model=names[i])
        done.rc_points += table_rows(tables[i]["points"], model=names[i])
    return done


def _keep(write: Callable[[Path, Any], None], entry: Path, payload: Any, unkept: list[str]) -> None:
    """Write a cache entry; a folder that cannot take it (read-only, full, an entry that is a folder) is
    one warning for the run, and the computed results are kept all the same (only not cached)."""
    try:
        write(entry, payload)
    except OSError as exc:
        if not unkept:
            why = exc.strerror or type(exc).__name__
            warnings.warn(f"cannot keep results in the cache {entry.parent} ({why}: {entry.name}); they are in the "
                          "output files but will be computed again next time", UserWarning, stacklevel=2)
        unkept.append(str(entry))


def _progress_bar(total: int, done: int, enabled: bool, where: str):
    if not enabled or total - done < 2:  # one model: its sample bar is enough
        return None
    from tqdm.auto import tqdm

    # disable=None: no bar when stderr is not a terminal (logs, CI).
    return tqdm(total=total, initial=done, desc=f"evaluate ({where})", unit="model", file=sys.stderr, disable=None)

