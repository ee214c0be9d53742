"""What an exported figure or table shows: its context (model, data set, subset, TS, θ), the
file name it is saved under and the CSV columns that lead it.

Every user-provided name reaches a title through ``ExportContext.describe`` and a file name
through ``safe_filename``: escaped or reduced to safe characters, and cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from . import style


# ---------------------------------------------------------------------------- export context
@dataclass(frozen=True)
class ExportContext:
    """What a figure or table shows, for its title, its file name and its CSV columns.

    ``ts`` None: the export covers both settings (e.g. a with/without-TS table); ``theta`` None:
    no single operating point.
    """

    model: str
    dataset: str = ""
    subset: str = "all"
    ts: bool | None = None
    temperature: float | None = None
    theta: float | None = None
    n_samples: int | None = None

    def describe(self, name_chars: int | None = None) -> str:
        """One line: ``efficientnet_lite0 · imagenet1k · all samples (1,705) · TS on (T = 1.234) · θ = 0.70``.
        ``name_chars`` cuts each name (model, data set, subset) to that many characters."""
        def name(text: str) -> str:
            return style.clip(text, name_chars)

        subset = "all samples" if self.subset in ("", "all") else f"subset {name(self.subset)}"
        if self.n_samples is not None:
            subset += f" ({self.n_samples:,} evaluated)"
        parts = [name(self.model)] + ([name(self.dataset)] if self.dataset else []) + [subset]
        if self.ts is True:
            parts.append("TS on" + (f" (T = {self.temperature:.3f})" if self.temperature is not None else ""))
        elif self.ts is False:
            parts.append("TS off")
        if self.theta is not None:
            parts.append(f"θ = {self.theta:.2f}")
        return " · ".join(parts)

    def slug(self) -> str:
        """The same facts for a file name: ``efficientnet_lite0_imagenet1k_all_TS_theta0.70``."""
        parts = [self.model] + ([self.dataset] if self.dataset else []) + [self.subset or "all"]
        if self.ts is not None:
            parts.append("TS" if self.ts else "noTS")
        if self.theta is not None:
            parts.append(f"theta{self.theta:.2f}")
        return safe_filename("_".join(parts))

    def columns(self) -> dict[str, Any]:
        """CSV columns saying the same (they lead every exported table)."""
        return {"model": self.model, "dataset": self.dataset, "subset": self.subset or "all",
                "temperature_scaling": "both" if self.ts is None else ("on" if self.ts else "off"),
                "temperature": self.temperature if self.ts else None,
                "theta": self.theta}


FILENAME_CHARS = 150  # file systems allow 255 bytes; a user's name may be far longer


def safe_filename(text: str, default: str = "figure") -> str:
    """Letters, digits, '.', '_' and '-' only (anything else becomes '_'), at most ``FILENAME_CHARS``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)[: 4 * FILENAME_CHARS]).strip("._")[:FILENAME_CHARS] or default


def export_name(name: str, context: ExportContext | None) -> str:
    """``name`` plus the context's slug, for a downloaded file (no extension)."""
    return safe_filename(name if context is None else f"{name}_{context.slug()}")


def with_context_columns(df: pd.DataFrame, context: ExportContext | None) -> pd.DataFrame:
    """``df`` with the context's columns in front (a column the table already has is kept as is)."""
    if context is None:
        return df
    front = {k: v for k, v in context.columns().items() if k not in df.columns}
    out = df.copy()
    for k, (col, value) in enumerate(front.items()):
        out.insert(k, col, value)
    return out
