"""The Calibrators page's logic: the calibrator × confidence benchmark of the current model or of
every listed one (``evaluation.calibrator_benchmark``), cached per model, subset and choice, with
a progress bar while the pairs are fitted and evaluated. Its choices are link settings
(``state.SETTINGS``: ``c_cals``, ``c_scores``, ``c_rule``, ``c_ci``, ``c_scope``)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from hsc_core.core.calibrators import calibrator_names, get_calibrator
from hsc_core.core.confidence import confidence_names, get_confidence
from hsc_core.evaluation.calibrator_benchmark import (
    BENCHMARK_COLUMNS,
    benchmark_pairs,
    benchmark_table,
    calibrator_benchmark,
)
from hsc_core.evaluation.model import ModelEvaluation

from .evaluations import ModelContext
from .progress import ProgressBar

#: What the page starts with: the cheap calibrators (matrix and Dirichlet scaling fit C² parameters,
#: tens of seconds at ImageNet size) and the scores that change the rules' choices.
DEFAULT_CALIBRATORS = ("none", "temperature", "isotonic", "depth_temperature")
DEFAULT_CONFIDENCES = ("softmax", "margin", "entropy", "doctor")
CALIBRATOR_CHOICES = calibrator_names()
CONFIDENCE_CHOICES = confidence_names()
#: The page's model scope (``c_scope``): the sidebar's model, or every listed model.
SCOPES = {"model": "This model", "all": "Every listed model"}


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


def benchmark_rows(es: ModelContext | list[ModelEvaluation], calibrators: tuple[str, ...],
                   confidences: tuple[str, ...], rule: str, intervals: bool) -> list[dict]:
    """The benchmark rows (``BENCHMARK_COLUMNS``) of the current model (a ``ModelContext``) or of
    several evaluations, each model with the scores it offers (``confidence_choices``). Each pair
    is computed once and held by the model's cached ``ModelEvaluation`` (``EvaluationSet.cached``),
    so every session and rerun reuses it; a progress bar shows only while pairs are being computed."""
    evs = [es.view.evaluation] if isinstance(es, ModelContext) else list(es)
    per_model = [tuple(offered(list(confidences), confidence_choices(ev.has_members))) for ev in evs]
    n = sum(len(benchmark_pairs(calibrators, scores)) for scores in per_model if scores)
    rows: list[dict] = []
    with ProgressBar(f"Fitting and evaluating {n} calibrator × score pairs:") as bar:
        done = 0
        for ev, scores in zip(evs, per_model, strict=True):
            if not scores:
                continue
            rows += calibrator_benchmark(ev, calibrators=calibrators, confidences=scores, rule=rule,
                                         intervals=intervals, progress=_offset(bar, done, n))
            done += len(benchmark_pairs(calibrators, scores))
    return rows


def _offset(bar: ProgressBar, done: int, total: int) -> Callable[[int, int], None]:
    """One model's ``progress(k, its total)`` as the bar's ``(done + k, total)`` over every model."""
    return lambda k, _mine: bar(done + k, total)


def shown_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as the page shows them: display units, "value [low, high]", ★ on each column's best."""
    return pd.DataFrame(benchmark_table(rows))


def export_table(rows: list[dict]) -> pd.DataFrame:
    """The raw rows for the CSV download (``BENCHMARK_COLUMNS``)."""
    return pd.DataFrame(rows, columns=list(BENCHMARK_COLUMNS))
