"""The Calibrators page's logic: the calibrator × confidence benchmark of the current model
(``evaluation.calibrator_benchmark``), cached per model, subset and choice, with a progress bar
while the pairs are fitted and evaluated."""

from __future__ import annotations

import pandas as pd

from hsc_core.core.calibrators import calibrator_names, get_calibrator
from hsc_core.core.confidence import confidence_names, get_confidence
from hsc_core.evaluation.calibrator_benchmark import (
    BENCHMARK_COLUMNS,
    benchmark_pairs,
    benchmark_table,
    calibrator_benchmark,
)

from .evaluations import ModelContext
from .progress import ProgressBar

#: What the page starts with: the cheap calibrators (matrix and Dirichlet scaling fit C² parameters,
#: tens of seconds at ImageNet size) and the scores that change the rules' choices.
DEFAULT_CALIBRATORS = ("none", "temperature", "isotonic", "depth_temperature")
DEFAULT_CONFIDENCES = ("softmax", "margin", "entropy", "doctor")
CALIBRATOR_CHOICES = calibrator_names()
CONFIDENCE_CHOICES = confidence_names()


def calibrator_label(name: str) -> str:
    return get_calibrator(name).label


def confidence_label(name: str) -> str:
    return get_confidence(name).label


def benchmark_rows(es: ModelContext, calibrators: tuple[str, ...], confidences: tuple[str, ...], rule: str,
                   intervals: bool) -> list[dict]:
    """The benchmark rows (``BENCHMARK_COLUMNS``) of the current model. Each pair is computed once
    and held by the model's cached ``ModelEvaluation`` (``EvaluationSet.cached``), so every session
    and rerun reuses it; a progress bar shows only while pairs are being computed."""
    n = len(benchmark_pairs(calibrators, confidences))
    with ProgressBar(f"Fitting and evaluating {n} calibrator × score pairs:") as bar:
        return calibrator_benchmark(es.view.evaluation, calibrators=calibrators, confidences=confidences,
                                    rule=rule, intervals=intervals, progress=bar)


def shown_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as the page shows them: display units, "value [low, high]", ★ on each column's best."""
    return pd.DataFrame(benchmark_table(rows))


def export_table(rows: list[dict]) -> pd.DataFrame:
    """The raw rows for the CSV download (``BENCHMARK_COLUMNS``)."""
    return pd.DataFrame(rows, columns=list(BENCHMARK_COLUMNS))
