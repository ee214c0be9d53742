"""Deprecated: ``hsc_core.pipeline.evaluate`` was split (it will be removed in the next release).

* the many-model runner (``evaluate_model``, ``evaluate_many``, ``evaluate_all``): ``hsc_core.pipeline.many_models``;
* the checksummed result and RC-table cache: ``hsc_core.evaluation.result_cache``;
* the printed Table 1 (``format_summary``, ``protocol_sentence``): ``hsc_core.evaluation.summary_text``;
* the command line (``configure_parser``, ``run``, ``model_table``): ``hsc_core.cli.evaluate``.
"""

from __future__ import annotations

import warnings

from ..evaluation.resolve import builtin_hierarchy, expand_inputs, load_user_hierarchy
from ..evaluation.result_cache import (
    CACHE_FORMAT,
    ROW_COLUMNS,
    cache_dir_for,
    cache_file,
    entry_checksum,
    read_cached,
    read_content,
    result_key,
    rows_problem,
)
from ..evaluation.summary_text import format_summary, protocol_sentence
from .many_models import Evaluated, check_dec, evaluate_all, evaluate_many, evaluate_model, model_names

warnings.warn("hsc_core.pipeline.evaluate is deprecated: use hsc_core.pipeline.many_models (the runner), "
              "hsc_core.evaluation.result_cache and hsc_core.evaluation.summary_text", DeprecationWarning, stacklevel=2)

__all__ = [
    "CACHE_FORMAT", "ROW_COLUMNS", "Evaluated", "builtin_hierarchy", "cache_dir_for", "cache_file", "check_dec",
    "entry_checksum", "evaluate_all", "evaluate_many", "evaluate_model", "expand_inputs", "format_summary",
    "load_user_hierarchy", "model_names", "protocol_sentence", "read_cached", "read_content", "result_key",
    "rows_problem",
]
