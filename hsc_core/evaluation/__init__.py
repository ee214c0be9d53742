"""The evaluation layer: one model's logits under the protocol → every number, curve and table.

``ModelEvaluation`` (and the ``EvaluationSet`` of each temperature setting) computes; the tidy
result schema (``results``) carries the numbers to ``hsc evaluate``, ``hsc report``, the
dashboard and every export; ``resolve`` finds the files, data set and hierarchy once.
"""

from .model import EvaluationSet, ModelEvaluation
from .resolve import builtin_hierarchy, expand_inputs, load_user_hierarchy, resolve_hierarchy
from .results import (
    RESULT_COLUMNS,
    SUMMARY_COLUMNS,
    ResultRow,
    column_label,
    hierarchy_hash,
    summary_rows,
    to_csv,
    wide_table,
)

__all__ = [
    "EvaluationSet", "ModelEvaluation", "RESULT_COLUMNS", "SUMMARY_COLUMNS", "ResultRow", "builtin_hierarchy",
    "column_label", "expand_inputs", "hierarchy_hash", "load_user_hierarchy", "resolve_hierarchy", "summary_rows",
    "to_csv", "wide_table",
]
