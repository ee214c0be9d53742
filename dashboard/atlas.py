"""The model atlas page's data: results tables read once (cached by file and content) from the
results folder or an upload, and the user's own models as atlas rows.

Every number comes from the evaluation layer (``hsc_core.evaluation.atlas`` and
``ModelEvaluation.results``); this module only caches and finds files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from hsc_core import config
from hsc_core.core.risk import LOSSES
from hsc_core.evaluation import subsets
from hsc_core.evaluation.atlas import atlas_from_rows, load_atlas_table, with_flags

from . import catalog, evaluation_cache

ATLAS_DATASET = "imagenet1k"  # the authors' table: ImageNet-1k models; only such models of yours go beside it


def gain_rule(rule: str) -> str:
    """The rule whose gain the page's sentence and its gain chart show: ``rule``, or Climbing for
    Selective (whose gain over itself is 0 by definition)."""
    return rule if rule != "selective" else "climbing"


def chart_rule(rule: str, y: str) -> str:
    """The rule the atlas chart plots on ``y``: the sentence's rule for the gain, ``rule`` for hAURC."""
    return gain_rule(rule) if y == "gain_percent" else rule


def presenter_layout(font_size: int) -> dict:
    """The atlas chart's layout in presenter mode: the legend beside the plot, not below it (nine
    regimes in projector type took most of the chart's height there), and a bottom margin for the
    x axis alone."""
    return dict(legend=dict(orientation="v", yref="paper", y=1, yanchor="top", x=1.02, xanchor="left"),
                margin=dict(b=int(3.4 * font_size)))


def results_folder() -> Path | None:
    """The folder the atlas lists and reads tables from (``config.results_dir``)."""
    return config.results_dir()


def table_files() -> list[str]:
    """The ``.csv`` file names in the results folder, sorted (none without a folder)."""
    folder = results_folder()
    if folder is None or not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.suffix.lower() == ".csv" and p.is_file())


@st.cache_data(show_spinner=False, max_entries=8)
def _table_from_file(name: str, folder: str, stamp: tuple[int, int]) -> pd.DataFrame:
    return load_atlas_table(name, root=folder)


def table_from_folder(name: str) -> pd.DataFrame:
    """The atlas table of results-folder file ``name``; a path leaving the folder, a missing file or
    a table of no known format raises ``ValueError`` (one line)."""
    folder = results_folder()
    if folder is None:
        raise ValueError("no results folder: set HSC_RESULTS_DIR to the folder that holds the table")
    base = folder.resolve()
    target = (base / name).resolve()
    if not target.is_relative_to(base):
        raise ValueError(f"{name[:80]!r} is outside the results folder")
    try:
        st_ = target.stat()
        stamp = (st_.st_mtime_ns, st_.st_size)
    except OSError:
        stamp = (0, 0)
    return _table_from_file(name, str(base), stamp)


@st.cache_data(show_spinner=False, max_entries=4)
def _table_from_bytes(digest: str, name: str, _payload: bytes) -> pd.DataFrame:
    return load_atlas_table(data=_payload, name=name)


def table_from_upload(name: str, payload: bytes) -> pd.DataFrame:
    """The atlas table of an uploaded CSV (cached by its content)."""
    return _table_from_bytes(hashlib.sha256(payload).hexdigest(), name, payload)


def your_models(subset: str = subsets.ALL) -> tuple[pd.DataFrame, list[str]]:
    """The catalog's ImageNet-1k models as atlas rows (every rule, loss and TS setting, from the
    cached ``ModelEvaluation``), and the names left out (another data set, or a file that fails)."""
    from . import sidebar

    rows, left_out = [], []
    for name, location in sidebar.catalog().items():
        try:
            if catalog.dataset_name_for(name, location) != ATLAS_DATASET:
                left_out.append(name)
                continue
            # Kept on disk by content (``evaluation_cache``): a fresh server evaluates nothing it has seen.
            rows += [r for ts in (False, True) for r in evaluation_cache.result_rows(name, location, subset, ts,
                                                                                    losses=LOSSES)]
        except catalog.LOAD_ERRORS:
            left_out.append(name)
    if not rows:
        return pd.DataFrame(), left_out
    return with_flags(atlas_from_rows(rows, source="yours")), left_out
