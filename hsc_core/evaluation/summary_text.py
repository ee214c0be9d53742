"""The paper's Table 1 as text (``hsc evaluate`` prints it): ``summary_rows`` laid out per data
set and loss, then the sentence stating the protocol of the run."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.protocol import CALIBRATION_FRACTION, SPLIT_SEED, protocol_text
from ..core.risk import LOSSES
from ..core.rules import RULE_LABELS, RULES

__all__ = ["format_summary", "protocol_sentence"]


def _percent(fraction: float) -> str:
    return f"{round(100 * fraction, 2):g} %"


def protocol_sentence(protocol: str, *, cal_fraction: float = CALIBRATION_FRACTION, seed: int = SPLIT_SEED) -> str:
    """``protocol_text(protocol)`` for this run: its split sizes (the text states the default
    10 % / 90 %) and its seed."""
    text = protocol_text(protocol)
    for default, mine in ((CALIBRATION_FRACTION, cal_fraction), (1 - CALIBRATION_FRACTION, 1 - cal_fraction)):
        text = text.replace(_percent(default), _percent(mine))
    return f"{text} Split seed: {seed}."


def _pm(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.2f}" if not math.isfinite(sem) else f"{mean:.2f} ± {sem:.2f}"


def format_summary(summary: Sequence[dict], *, protocol: str = "project", cal_fraction: float = CALIBRATION_FRACTION,
                   seed: int = SPLIT_SEED) -> str:
    """The paper's Table 1 as text, from ``summary_rows``: per data set and loss, a row per rule
    with hAURC×1000 and gain (mean ± SEM over models), without and with temperature scaling, then
    the protocol sentence."""
    lines: list[str] = []
    index = {(s["dataset"], s["loss"], s["ts"], s["rule"]): s for s in summary}
    for ds in dict.fromkeys(s["dataset"] for s in summary):
        for loss in LOSSES:
            rules = [r for r in RULES if (ds, loss, False, r) in index and (ds, loss, True, r) in index]
            if not rules:
                continue
            n = index[(ds, loss, False, rules[0])]["n_models"]
            loss_name = "0/1 loss" if loss == "01" else "severity loss"
            lines.append(f"{ds or 'models'} — {loss_name}, mean ± SEM over {n} model{'s' * (n != 1)}")
            header = ("rule", "hAURC×1000", "gain %", "hAURC×1000 (TS)", "gain % (TS)")
            table: list[tuple[str, ...]] = [header]
            for rule in rules:
                cells = [RULE_LABELS[rule]]
                for ts in (False, True):
                    s = index[(ds, loss, ts, rule)]
                    cells.append(_pm(s["haurc_x1000_mean"], s["haurc_x1000_sem"]))
                    cells.append("–" if rule == "selective" else _pm(s["gain_percent_mean"], s["gain_percent_sem"]))
                table.append(tuple(cells))
            widths = [max(len(row[k]) for row in table) for k in range(len(header))]
            for row in table:
                lines.append("  " + "  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                                               for k, (c, w) in enumerate(zip(row, widths, strict=True))))
            lines.append("")
    lines.append(protocol_sentence(protocol, cal_fraction=cal_fraction, seed=seed))
    return "\n".join(lines)
