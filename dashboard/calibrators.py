"""The Calibrators page's logic: the calibrator × confidence benchmark of the current model or of
every listed one (``evaluation.calibrator_benchmark``), cached per model, subset and choice, with
a progress bar while the pairs are fitted and evaluated. Its choices are link settings
(``state.SETTINGS``: ``c_cals``, ``c_scores``, ``c_rule``, ``c_ci``, ``c_scope``).

Every choice is reachable by a link, so one run never starts more than ``RUN_BUDGET_S`` seconds of
new work (``estimate``: each calibrator's fit and each pair's row and intervals, scaled from the
shipped models' measured times by the model's classes and samples): the pairs beyond it wait for the
next run (the page says how many and offers to run them), and a fit that alone would take longer (Dirichlet
scaling at ImageNet size) is refused in one line that names the ``hsc evaluate`` command instead.
What was computed stays with the model, so the next run starts where this one stopped."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from hsc_core.core.calibrators import calibrator_limit, calibrator_names, get_calibrator
from hsc_core.core.confidence import confidence_names, get_confidence
from hsc_core.evaluation.calibrator_benchmark import (
    BENCHMARK_COLUMNS,
    benchmark_pairs,
    benchmark_row,
    benchmark_table,
    mark_best,
    row_held,
)
from hsc_core.evaluation.model import ModelEvaluation

from .evaluations import EVALUATIONS_KEPT, ModelContext
from .progress import ProgressBar

#: What the page starts with: the cheap calibrators (matrix and Dirichlet scaling fit C² parameters,
#: tens of seconds at ImageNet size) and the scores that change the rules' choices.
DEFAULT_CALIBRATORS = ("none", "temperature", "isotonic", "depth_temperature")
DEFAULT_CONFIDENCES = ("softmax", "margin", "entropy", "doctor")
CALIBRATOR_CHOICES = calibrator_names()
CONFIDENCE_CHOICES = confidence_names()
#: The page's model scope (``c_scope``): the sidebar's model, or every listed model.
SCOPES = {"model": "This model", "all": "Every listed model"}
#: Seconds of new work one run of the page may start (a link's first run included).
RUN_BUDGET_S = 20.0
#: Measured on the shipped models (``REFERENCE``: 1,000 classes, 189 calibration and 1,705 evaluation
#: samples; 2 cores): seconds to fit each calibrator (matrix and Dirichlet scaling grow with C², the others
#: with C) and to compute one pair's row and its bootstrap intervals (with n_eval × C).
FIT_SECONDS = {"vector": 1.6, "depth_temperature": 1.5, "matrix": 13.0, "dirichlet": 50.0}
QUADRATIC = frozenset({"matrix", "dirichlet"})
ROW_SECONDS, INTERVAL_SECONDS = 1.2, 2.0
REFERENCE = {"classes": 1000, "n_cal": 189, "n_eval": 1705}


def confidence_choices(has_members: bool) -> tuple[str, ...]:
    """The scores the page offers: the member scores only for a model whose manifest names members."""
    return tuple(c for c in CONFIDENCE_CHOICES if has_members or not get_confidence(c).needs_members)


def offered(chosen: list[str], choices: tuple[str, ...]) -> list[str]:
    """``chosen`` without what the page does not offer now (a link's member scores on a plain model)."""
    return [c for c in chosen if c in choices]


def calibrator_label(name: str) -> str:
    return get_calibrator(name).label


def confidence_label(name: str) -> str:
    return get_confidence(name).label


def scope_models(models: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """``c_scope=all``'s models: at most ``evaluations.EVALUATIONS_KEPT`` of them (the first listed), so what
    one run computes is still held by the next; with a one-line note when some are left out."""
    if len(models) <= EVALUATIONS_KEPT:
        return models, None
    kept = dict(list(models.items())[:EVALUATIONS_KEPT])
    return kept, (f"The first {EVALUATIONS_KEPT} of {len(models)} listed models: the server keeps the evaluations of "
                  f"{EVALUATIONS_KEPT} models at a time.")


def fit_seconds(ev: ModelEvaluation, calibrator: str) -> float:
    """Estimated seconds to fit ``calibrator`` on ``ev``'s calibration split (0 when it is held)."""
    if ev.is_fitted(calibrator) or calibrator not in FIT_SECONDS:
        return 0.0
    classes = ev.hierarchy.n_leaves / REFERENCE["classes"]
    return FIT_SECONDS[calibrator] * classes ** (2 if calibrator in QUADRATIC else 1) * ev.n_cal / REFERENCE["n_cal"]


def pair_seconds(ev: ModelEvaluation, intervals: bool) -> float:
    """Estimated seconds of one pair's row (and its intervals) on ``ev``."""
    scale = (ev.n_samples - ev.n_cal) / REFERENCE["n_eval"] * ev.hierarchy.n_leaves / REFERENCE["classes"]
    return (ROW_SECONDS + INTERVAL_SECONDS * bool(intervals)) * scale


@dataclass
class Benchmark:
    """What one run shows: the rows computed (``rows``, best marked among them), the pairs left for
    the next run (``left``, with their estimated ``left_seconds``) and the pairs refused (``refused``:
    one line each, a fit longer than a run)."""

    rows: list[dict] = field(default_factory=list)
    left: int = 0
    left_seconds: float = 0.0
    refused: list[str] = field(default_factory=list)


def benchmark(es: ModelContext | list[ModelEvaluation], calibrators: tuple[str, ...], confidences: tuple[str, ...],
              rule: str, intervals: bool, budget: float = RUN_BUDGET_S) -> Benchmark:
    """The benchmark rows (``BENCHMARK_COLUMNS``) of the current model (a ``ModelContext``) or of
    several evaluations, each model with the scores it offers (``confidence_choices``), as far as
    ``budget`` seconds of new work go (``Benchmark``). Each pair is computed once and held by the
    model's cached ``ModelEvaluation`` (``EvaluationSet.cached``), so every session and rerun reuses it
    and costs nothing; a progress bar shows only while pairs are being computed."""
    evs = [es.view.evaluation] if isinstance(es, ModelContext) else list(es)
    out, todo, spent = Benchmark(), [], 0.0
    fitting: set[tuple[int, str]] = set()
    too_long: dict[str, dict[str, float]] = {}  # calibrator → {model: seconds to fit}
    limited: dict[str, None] = {}  # one line per model and calibrator its tree refuses
    for k, ev in enumerate(evs):
        scores = tuple(offered(list(confidences), confidence_choices(ev.has_members)))
        for cal, conf in benchmark_pairs(calibrators, scores) if scores else []:
            if row_held(ev, cal, conf, rule=rule, intervals=intervals):
                todo.append((ev, cal, conf))
                continue
            why = calibrator_limit(cal, ev.hierarchy)
            if why is not None:  # a tree it cannot take (a depth per temperature on a 1,000-deep tree)
                limited.setdefault(f"{ev.name}: {why}", None)
                continue
            fit = 0.0 if (k, cal) in fitting else fit_seconds(ev, cal)
            cost = fit + pair_seconds(ev, intervals)
            if fit > budget:
                too_long.setdefault(cal, {})[ev.name] = fit
                continue
            if spent + cost > budget and spent > 0:
                out.left += 1
                out.left_seconds += cost
                continue
            spent += cost
            fitting.add((k, cal))
            todo.append((ev, cal, conf))
    out.refused += list(limited)
    for cal, fits in too_long.items():
        where = next(iter(fits)) if len(fits) == 1 else f"each of {len(fits)} models"
        out.refused.append(f"{calibrator_label(cal)} takes about {max(fits.values()):,.0f} s to fit on {where}, more "
                           f"than one run of this page may take ({budget:,.0f} s): `hsc evaluate --calibrator {cal}` "
                           "computes it")
    held = sum(row_held(ev, cal, conf, rule=rule, intervals=intervals) for ev, cal, conf in todo)
    with ProgressBar(f"Fitting and evaluating {len(todo) - held} calibrator × score pairs:") as bar:
        for ev, cal, conf in todo:
            new = not row_held(ev, cal, conf, rule=rule, intervals=intervals)
            out.rows.append(benchmark_row(ev, cal, conf, rule=rule, intervals=intervals))
            if new:
                bar(len(out.rows), len(todo))
    out.rows = mark_best(out.rows)
    return out


def left_note(bench: Benchmark) -> str | None:
    """One line on the pairs this run left (None when none)."""
    if not bench.left:
        return None
    return (f"{bench.left} more calibrator × score pair{'s' * (bench.left != 1)} need about "
            f"{bench.left_seconds:,.0f} s: more than one run of this page starts ({RUN_BUDGET_S:,.0f} s). The table "
            "shows those computed so far; the next run adds more.")


def shown_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as the page shows them: display units, "value [low, high]", ★ on each column's best."""
    return pd.DataFrame(benchmark_table(rows))


def export_table(rows: list[dict]) -> pd.DataFrame:
    """The raw rows for the CSV download (``BENCHMARK_COLUMNS``)."""
    return pd.DataFrame(rows, columns=list(BENCHMARK_COLUMNS))
