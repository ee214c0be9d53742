"""The model atlas: per-model results tables (the authors' 1,116 ImageNet models, or ``hsc
evaluate``'s own) in one shape, each model's training regime from its timm name, suspect rows,
and the paper's Table 1 and Figure 4 aggregates (mean ± SEM).

Goren, Galil & El-Yaniv, "Hierarchical Selective Classification", NeurIPS 2024: Table 1 (mean
hAURC and gain of 1,115 ImageNet-1k models), Table 7 (the same without and with temperature
scaling) and Figure 4 (training regimes: CLIP, pretraining on ImageNet-21k/12k, knowledge
distillation, semi-supervised and adversarial training).

One table shape for every source (``load_atlas_table``): one row per model with ``model``,
``source``, ``dataset``, ``n_eval``, ``n_eval (TS)``, ``top-1 accuracy`` (a fraction), ``T`` and
one column per hAURC×1000 / gain % × rule × loss × TS setting named by ``results.column_label``
(``"hAURC×1000 Climbing (TS)"``, ``"gain % Max-Coverage severity (no TS)"``), the names
``hsc evaluate`` writes in ``results_models.csv``; then ``regimes`` and ``suspect``.

Sources it reads (the format is recognised from the header):

* the authors' ``results/models_comparison/models_comparison_full.csv`` (repository
  shanigoren/Hierarchical-Selective-Classification): ``Architecture``, ``Accuracy`` (%),
  ``Temperature``, ``hAURC_{rule}_{01,hier}[_TS]``, ``Gain_{rule}_{01,hier}[_TS]``. Columns
  without TS are on all 50,000 ImageNet validation images, ``_TS`` columns on 45,000 after T was
  fitted on the other 5,000 (LBFGS from T = 1.5);
* ``hsc evaluate``'s ``results.csv`` (tidy rows, ``RESULT_COLUMNS``) or ``results_models.csv``.

The table is the user's file: it is read from a path they give, never shipped.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES
from ..core.validation import clip_path, quote
from .results import FORMULA_START, RESULT_COLUMNS, column_label, mean_sem, wide_table

__all__ = [
    "ATLAS_SOURCES", "AUTHORS_SAMPLES", "MAX_TABLE_BYTES", "PLAIN", "REGIMES", "Regime", "atlas_from_rows",
    "duplicated_columns",
    "load_atlas_table", "metric_column", "paper_table1", "read_atlas_csv", "regime_labels", "regime_summary",
    "rule_summary", "suspect_reasons", "training_regimes",
]

MAX_TABLE_BYTES = 64 * 2**20  # the authors' table is 1.3 MB; a results table of 10,000 models fits easily
#: The authors' evaluation sets: without TS all 50,000 validation images, with TS the 45,000 held out.
AUTHORS_SAMPLES = {False: 50_000, True: 45_000}
ATLAS_SOURCES = {"authors": "the authors' published table", "project": "hsc evaluate"}

_AUTHORS_RULES = {"selective": "selective", "climbing": "climbing", "jumping": "jumping",
                  "max_coverage": "maxcoverage"}
_AUTHORS_LOSSES = {"01": "01", "severity": "hier"}
#: The authors' LBFGS starts at T = 1.5; a fit that ends there never moved (definitions §5.1).
TS_INIT = 1.5
TS_MAX_PLAUSIBLE = 100.0
TS_MIN = 0.1  # the authors refit below this


# ---------------------------------------------------------------------------- training regimes
@dataclass(frozen=True)
class Regime:
    """One training regime: ``pattern`` is searched in the lower-cased model name (timm's
    ``architecture.pretrained_tag`` or the authors' own names); ``source`` says why."""

    key: str
    label: str
    pattern: str
    source: str


#: The checked mapping from timm names to training regimes (a name may match several). Order is
#: priority: a model's first regime is the one its marker shows. ``tests/test_atlas.py`` checks
#: known names and that every name of the authors' table with a regime token gets a regime.
REGIMES: tuple[Regime, ...] = (
    Regime("clip_zero_shot", "CLIP zero-shot", r"^clip_(?:rn|vit)",
           "the authors' CLIP_RN50 … CLIP_ViT-L/14@336px: OpenAI CLIP with text prompts, no ImageNet head"),
    Regime("clip_finetuned", "CLIP fine-tuned", r"(?<=.)[._]clip[._]|laion|openai",
           "timm *_clip_* / .clip_* weights: OpenAI or LAION-2B CLIP image towers fine-tuned on ImageNet"),
    Regime("masked_image", "masked-image pretraining", r"mim|fcmae|(?:^|[._])mae|^beit|^eva",
           "BEiT/BEiT-v2, EVA/EVA-02 (.mim_*), ConvNeXt-V2 (.fcmae_*), MAE"),
    Regime("semi_self", "semi-/weakly/self-supervised", r"ns_jft|ssl|wsl|swag|seer|dino",
           "Noisy Student (.ns_jft), semi-/semi-weakly supervised (.fb_ssl_yfcc100m, .fb_swsl_ig1b, SSLD), "
           "weakly supervised (.fb_wsl_ig1b, .swag), self-supervised SEER, DINO"),
    Regime("distillation", "knowledge distillation", r"dist|ssld",
           "DeiT *_distilled_*, .fb_dist, .snap_dist, .apple_dist, .dist_*, .goog_distilled, Paddle SSLD"),
    Regime("in21k_pretraining", "ImageNet-21k/22k/12k pretraining", r"in2[12]k|in12k|m38m|m30m",
           "pretrained on ImageNet-21k/22k or its 12k subset (or a merged set containing it), then ImageNet-1k"),
    Regime("adversarial", "adversarial training", r"adv|\.ap_in1k",
           "Inception .tf_adv / .tf_ens_adv, EfficientNet AdvProp (.ap_in1k)"),
)
PLAIN = Regime("plain_in1k", "plain ImageNet-1k", "", "none of the above: supervised on ImageNet-1k only")
_COMPILED = tuple((r, re.compile(r.pattern)) for r in REGIMES)
_BY_KEY = {r.key: r for r in (*REGIMES, PLAIN)}


def training_regimes(name: str) -> tuple[str, ...]:
    """The regime keys of a model name, in ``REGIMES`` order; ``("plain_in1k",)`` when none match.

    >>> training_regimes("vit_base_patch16_clip_224.laion2b_ft_in12k_in1k")
    ('clip_finetuned', 'in21k_pretraining')
    >>> training_regimes("resnet50.a1_in1k")
    ('plain_in1k',)
    """
    text = str(name).lower()
    found = tuple(r.key for r, rx in _COMPILED if rx.search(text))
    return found or (PLAIN.key,)


def regime_labels(keys: Iterable[str] | str) -> str:
    """Display text of regime keys (a ``;``-separated string or a sequence)."""
    if isinstance(keys, str):
        keys = [k for k in keys.split(";") if k]
    return "; ".join(_BY_KEY[k].label if k in _BY_KEY else k for k in keys)


# ---------------------------------------------------------------------------- column names
def metric_column(metric: str, rule: str, loss: str = "01", ts: bool = False) -> str:
    """The atlas column of one number (``results.column_label`` with the TS tag).

    >>> metric_column("haurc", "climbing", ts=True)
    'hAURC×1000 Climbing (TS)'
    """
    return column_label(metric, rule, loss, ts)


def _metric_columns() -> list[str]:
    return [metric_column(m, r, loss, ts) for ts in (False, True) for loss in LOSSES for m in ("haurc", "gain_percent")
            for r in RULES if not (m == "gain_percent" and r == "selective")]


# ---------------------------------------------------------------------------- reading
def read_atlas_csv(path: str | Path, *, root: str | Path | None = None) -> pd.DataFrame:
    """Read a results CSV from ``path`` (inside ``root`` when given): a ``.csv`` file of at most
    ``MAX_TABLE_BYTES``. Raises ``ValueError`` with one line (quoting the capped path) otherwise."""
    p = Path(path).expanduser()
    shown = quote(clip_path(str(path)))
    if root is not None:
        base = Path(root).expanduser().resolve()
        resolved = (base / p).resolve() if not p.is_absolute() else p.resolve()
        if not resolved.is_relative_to(base):
            raise ValueError(f"{shown} is outside the results folder {quote(clip_path(str(base)))}")
        p = resolved
    if p.suffix.lower() != ".csv":
        raise ValueError(f"{shown} is not a .csv file; give the authors' models_comparison_full.csv or "
                         "hsc evaluate's results.csv / results_models.csv")
    if not p.is_file():
        raise ValueError(f"{shown}: no such file")
    if p.stat().st_size > MAX_TABLE_BYTES:
        raise ValueError(f"{shown} is larger than {MAX_TABLE_BYTES // 2**20} MB; a results table is far smaller")
    return read_atlas_bytes(p.read_bytes(), name=str(path))


def read_atlas_bytes(data: bytes, *, name: str = "table") -> pd.DataFrame:
    """The CSV text of ``data`` as a DataFrame of strings (numbers parsed later, per column)."""
    shown = quote(clip_path(name))
    if len(data) > MAX_TABLE_BYTES:
        raise ValueError(f"{shown} is larger than {MAX_TABLE_BYTES // 2**20} MB; a results table is far smaller")
    try:
        text = data.decode("utf-8-sig")
        rows = list(csv.reader(io.StringIO(text)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{shown} is not a UTF-8 CSV table ({exc.__class__.__name__})") from None
    if not rows or not rows[0]:
        raise ValueError(f"{shown} is empty; a results table has a header row and one row per model")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if any(c.strip() for c in r)]
    if any(len(r) != len(header) for r in body):
        bad = next(k for k, r in enumerate(rows[1:], start=2) if any(c.strip() for c in r) and len(r) != len(header))
        raise ValueError(f"{shown}: row {bad} has a different number of cells than the header")
    if not body:
        raise ValueError(f"{shown} has a header but no model rows")
    repeated = duplicated_columns(header)
    if repeated:
        # pandas would return a DataFrame for df[name], and every later column read would fail
        raise ValueError(f"{shown}: the column(s) {', '.join(quote(c or '(unnamed)') for c in repeated[:3])}"
                         f"{f' and {len(repeated) - 3} more' if len(repeated) > 3 else ''} appear more than once "
                         "in the header; keep one of each")
    return pd.DataFrame(body, columns=header)


def duplicated_columns(header: Sequence[str]) -> list[str]:
    """The names that occur more than once in ``header``, in first-seen order.

    >>> duplicated_columns(["model", "Architecture", "n_eval", "Architecture"])
    ['Architecture']
    """
    seen: set[str] = set()
    repeated: list[str] = []
    for name in header:
        if name in seen and name not in repeated:
            repeated.append(name)
        seen.add(name)
    return repeated


def _numbers(df: pd.DataFrame, column: str, name: str) -> np.ndarray:
    values = pd.to_numeric(df[column].str.strip().replace({"": "nan"}), errors="coerce").to_numpy(float)
    bad = df[column][np.isnan(values) & ~df[column].str.strip().str.lower().isin(["", "nan", "inf", "-inf"])]
    if len(bad):
        raise ValueError(f"{quote(clip_path(name))}: column {quote(column)} has a value that is not a number: "
                         f"{quote(bad.iloc[0])}")
    return values


def _counts(df: pd.DataFrame, column: str, name: str) -> np.ndarray:
    """The sample counts of ``column`` as floats (NaN for a blank cell). Raises ``ValueError``
    naming the column and the first row (the file's line number) whose value is not a finite
    non-negative integer: ``inf``, ``-1``, ``2.5`` or ``1e400`` (which parses to inf)."""
    values = _numbers(df, column, name)
    blank = df[column].str.strip().isin(["", "nan", "NaN"]).to_numpy(bool)
    with np.errstate(invalid="ignore"):
        bad = ~blank & ~(np.isfinite(values) & (values >= 0) & (values == np.floor(values)))
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"{quote(clip_path(name))}: column {quote(column)} must hold a non-negative whole number "
                         f"of samples; row {k + 2} has {quote(df[column].iloc[k].strip()[:40])}")
    return values


def _missing(df: pd.DataFrame, needed: Sequence[str], name: str, kind: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ValueError(f"{quote(clip_path(name))} looks like {kind} but lacks the column(s) "
                         f"{', '.join(quote(c) for c in missing[:3])}{more}")


def _from_authors(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The authors' table in the atlas's shape. Gains are recomputed from the hAURC columns,
    100·(Selective − rule)/Selective with the same loss and suffix, as the paper's tables are (the
    definitions, §8.9): the CSV's ``Gain_*`` columns differ slightly and are NaN for the four CLIP
    ViT zero-shot rows, which is why Table 8 seemed to need a left-out row. They are not read."""
    cols = {}
    for ts in (False, True):
        for loss, a_loss in _AUTHORS_LOSSES.items():
            suffix = "_TS" if ts else ""
            for rule, a_rule in _AUTHORS_RULES.items():
                cols[metric_column("haurc", rule, loss, ts)] = (f"hAURC_{a_rule}_{a_loss}{suffix}", 1000.0)
    _missing(df, ["Architecture", "Accuracy", "Temperature", *(c for c, _ in cols.values())], name,
             "the authors' table")
    out = pd.DataFrame({"model": df["Architecture"].str.strip(), "source": "authors", "dataset": "imagenet1k",
                        "n_eval": AUTHORS_SAMPLES[False], "n_eval (TS)": AUTHORS_SAMPLES[True],
                        "top-1 accuracy": _numbers(df, "Accuracy", name) / 100.0,
                        "T": _numbers(df, "Temperature", name)})
    for target, (column, scale) in cols.items():
        out[target] = _numbers(df, column, name) * scale
    for ts in (False, True):
        for loss in _AUTHORS_LOSSES:
            base = out[metric_column("haurc", "selective", loss, ts)].to_numpy(float)
            for rule in _AUTHORS_RULES:
                if rule != "selective":
                    h = out[metric_column("haurc", rule, loss, ts)].to_numpy(float)
                    with np.errstate(divide="ignore", invalid="ignore"):  # Selective's 0: NaN, as hierarchical_gain
                        out[metric_column("gain_percent", rule, loss, ts)] = np.where(
                            base > 0, (base - h) / base * 100.0, np.nan)
    numbers = [metric_column(m, rule, loss, ts) for ts in (False, True) for loss in _AUTHORS_LOSSES
               for rule in _AUTHORS_RULES for m in ("haurc", "gain_percent")
               if not (m == "gain_percent" and rule == "selective")]
    return out[[c for c in out.columns if c not in numbers] + numbers]  # each rule's hAURC, then its gain


def _unneutralised(text: str) -> str:
    """The raw text of a CSV cell that ``to_csv`` prefixed with ``'`` (a would-be formula)."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text


def _typed_rows(df: pd.DataFrame, name: str) -> list[dict[str, Any]]:
    rows = []
    values = _numbers(df, "value", name)
    n_eval = _counts(df, "n_eval", name)
    for k, r in enumerate(df.to_dict("records")):
        if r["metric"] not in ("top1", "temperature", "haurc", "gain_percent"):
            raise ValueError(f"{quote(clip_path(name))}: row {k + 2} has an unknown metric {quote(r['metric'])}")
        rows.append({**r, "model": _unneutralised(r["model"]), "dataset": _unneutralised(r["dataset"]),
                     "ts": r["ts"].strip().lower() == "true", "value": float(values[k]),
                     "n_eval": int(n_eval[k]) if math.isfinite(n_eval[k]) else 0})
    return rows


def atlas_from_rows(rows: Iterable[dict[str, Any]], *, source: str = "project") -> pd.DataFrame:
    """The atlas table of the evaluation layer's tidy result rows (``ModelEvaluation.results`` or
    ``hsc evaluate``'s ``results.csv``): one row per model and data set."""
    rows = list(rows)
    datasets = {r["model"]: r.get("dataset", "") for r in rows}
    wide = wide_table(rows, loss=None)
    out = pd.DataFrame(wide)
    if out.empty:
        raise ValueError("the results hold no model")
    out.insert(1, "source", source)
    out.insert(2, "dataset", [datasets[m] for m in out["model"]])
    if "n_eval (TS)" not in out:
        out["n_eval (TS)"] = out["n_eval"]
    out["n_eval (TS)"] = out["n_eval (TS)"].fillna(out["n_eval"])
    for c in ("top-1 accuracy", "T", *_metric_columns()):
        if c not in out:
            out[c] = np.nan
    return out


def _from_models_csv(df: pd.DataFrame, name: str) -> pd.DataFrame:
    _missing(df, ["model", "n_eval", "top-1 accuracy", metric_column("haurc", "selective", "01", False)], name,
             "hsc evaluate's results_models.csv")
    out = pd.DataFrame({"model": df["model"].str.strip(), "source": "project",
                        "dataset": df["dataset"] if "dataset" in df else ""})
    out["n_eval"] = _counts(df, "n_eval", name)
    out["n_eval (TS)"] = _counts(df, "n_eval (TS)", name) if "n_eval (TS)" in df else out["n_eval"]
    for c in ("top-1 accuracy", "T", *_metric_columns()):
        out[c] = _numbers(df, c, name) if c in df else np.nan
    return out


def load_atlas_table(path: str | Path | None = None, *, root: str | Path | None = None,
                     data: bytes | None = None, name: str | None = None) -> pd.DataFrame:
    """A per-model results table in the atlas shape, with ``regimes`` and ``suspect`` columns.

    Parameters
    ----------
    path : the CSV (inside ``root`` when given), or None with ``data``.
    root : the folder the path must stay inside (the dashboard's results folder).
    data, name : the file's bytes and its name instead of a path (an upload).

    Returns
    -------
    DataFrame, one row per model (see the module docstring for the columns).

    Raises ``ValueError`` (one line) for a path outside ``root``, a file that is not a CSV, a
    header with a repeated column name (naming it), a table of none of the known formats or
    lacking their columns, or an ``n_eval`` / ``n_eval (TS)`` that is not a non-negative whole
    number (``inf``, ``-1``, ``1e400``: naming the column and the first bad row).
    """
    if data is not None:
        shown = name or "upload"
        if not shown.lower().endswith(".csv"):
            raise ValueError(f"{quote(clip_path(shown))} is not a .csv file")
        df = read_atlas_bytes(data, name=shown)
    else:
        if path is None:
            raise ValueError("give a results table: a path or the file's bytes")
        shown = str(path)
        df = read_atlas_csv(path, root=root)
    if "Architecture" in df.columns or any(c.startswith("hAURC_") for c in df.columns):
        table = _from_authors(df, shown)
    elif {"metric", "value"} <= set(df.columns):
        needed = ("model", "dataset", "subset", "rule", "loss", "ts", "metric", "value", "n_eval")
        _missing(df, [c for c in RESULT_COLUMNS if c in needed], shown, "hsc evaluate's results.csv")
        table = atlas_from_rows(_typed_rows(df, shown))
    elif "model" in df.columns:
        table = _from_models_csv(df, shown)
    else:
        raise ValueError(f"{quote(clip_path(shown))} is not a results table: expected the authors' columns "
                         "(Architecture, Accuracy, hAURC_…) or hsc evaluate's (model, metric, value … or model, "
                         "top-1 accuracy, hAURC×1000 …)")
    return with_flags(table)


def with_flags(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with ``regimes`` (``;``-joined keys) and ``suspect`` (reasons, "" when none)."""
    out = table.copy()
    out["regimes"] = [";".join(training_regimes(m)) for m in out["model"]]
    out["suspect"] = [suspect_reasons(r) for r in out.to_dict("records")]
    return out


# ---------------------------------------------------------------------------- suspect rows
def suspect_reasons(row: dict[str, Any]) -> str:
    """Why a model's numbers are doubtful ("" when they are not): a non-finite hAURC or gain, or a
    temperature at the
    optimiser's starting point 1.5 (LBFGS never moved), below 0.1 or above 100 (definitions §5.1).

    >>> suspect_reasons({"T": 1.5, "gain % Climbing (TS)": float("nan")})
    'non-finite gain % Climbing (TS); T = 1.5 is the optimiser’s starting point (never moved)'
    """
    reasons = []
    bad = [k for k, v in row.items() if k.startswith(("hAURC", "gain")) and isinstance(v, (float, int))
           and not math.isfinite(v)]
    if bad:
        reasons.append(f"non-finite {bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else ""))
    t = row.get("T")
    if isinstance(t, (float, int)) and math.isfinite(t):
        if t == TS_INIT:
            reasons.append("T = 1.5 is the optimiser’s starting point (never moved)")
        elif t > TS_MAX_PLAUSIBLE:
            reasons.append(f"T = {t:.4g} is implausibly large (> {TS_MAX_PLAUSIBLE:g})")
        elif t < TS_MIN:
            reasons.append(f"T = {t:.4g} is below the refit bound {TS_MIN:g}")
    return "; ".join(reasons)


# ---------------------------------------------------------------------------- aggregates
def _ms(values) -> tuple[float, float]:
    return mean_sem(np.asarray(values, dtype=float).tolist())


def rule_summary(table: pd.DataFrame, *, loss: str = "01") -> list[dict[str, Any]]:
    """The paper's Table 7 (Table 8 for ``loss="severity"``): per TS setting and rule, mean ± SEM
    over models of hAURC×1000 and gain % (non-finite values left out, as ``mean_sem``)."""
    out = []
    for ts in (False, True):
        for rule in RULES:
            h = _ms(table[metric_column("haurc", rule, loss, ts)])
            g = (float("nan"), float("nan")) if rule == "selective" else _ms(
                table[metric_column("gain_percent", rule, loss, ts)])
            out.append({"loss": loss, "ts": ts, "rule": rule, "n_models": int(len(table)),
                        "haurc_x1000_mean": h[0], "haurc_x1000_sem": h[1],
                        "gain_percent_mean": g[0], "gain_percent_sem": g[1]})
    return out


def paper_table1(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's Table 1 (ImageNet-1k columns) as printed: Selective and Max-Coverage without
    TS, Climbing with TS, and each gain against Selective *without* TS (so Climbing's 14.94 % is
    the gain of Climbing + TS over plain selective classification, per model, then averaged).

    Returns one dict per row: ``rule``, ``ts``, ``n_models``, ``haurc_x1000_mean``/``_sem``,
    ``gain_percent_mean``/``_sem`` (NaN for Selective).
    """
    base = table[metric_column("haurc", "selective", "01", False)].to_numpy(float)
    out = []
    for rule, ts in (("selective", False), ("max_coverage", False), ("climbing", True)):
        h = table[metric_column("haurc", rule, "01", ts)].to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = (base - h) / base * 100.0
        g = (float("nan"), float("nan")) if rule == "selective" else _ms(gain)
        hm = _ms(h)
        out.append({"rule": rule, "ts": ts, "n_models": int(len(table)), "haurc_x1000_mean": hm[0],
                    "haurc_x1000_sem": hm[1], "gain_percent_mean": g[0], "gain_percent_sem": g[1]})
    return out


def regime_summary(table: pd.DataFrame, *, rule: str = "climbing", loss: str = "01",
                   ts: bool = True) -> list[dict[str, Any]]:
    """Figure 4's comparison as a table: per regime (a model counts in each of its regimes), the
    number of models and mean ± SEM of top-1 accuracy (%), ``rule``'s hAURC×1000 and gain %."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {quote(rule)}; choose one of {', '.join(RULES)}")
    haurc = table[metric_column("haurc", rule, loss, ts)].to_numpy(float)
    gain = (np.full(len(table), np.nan) if rule == "selective"
            else table[metric_column("gain_percent", rule, loss, ts)].to_numpy(float))
    acc = table["top-1 accuracy"].to_numpy(float) * 100.0
    keys = [set(k.split(";")) for k in table["regimes"]]
    out = []
    for regime in (*REGIMES, PLAIN):
        mask = np.array([regime.key in k for k in keys], dtype=bool)
        if not mask.any():
            continue
        a, h, g = _ms(acc[mask]), _ms(haurc[mask]), _ms(gain[mask])
        out.append({"regime": regime.key, "label": regime.label, "rule": rule, "loss": loss, "ts": ts,
                    "n_models": int(mask.sum()), "top1_percent_mean": a[0], "top1_percent_sem": a[1],
                    "haurc_x1000_mean": h[0], "haurc_x1000_sem": h[1],
                    "gain_percent_mean": g[0], "gain_percent_sem": g[1]})
    return out


def rule_label(rule: str) -> str:
    return RULE_LABELS.get(rule, rule)
