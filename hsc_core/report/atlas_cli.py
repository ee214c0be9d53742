"""The model atlas as text (``format_atlas``, ``sample_note``): what ``hsc atlas`` prints and the
dashboard's Model atlas page notes. The command line itself is ``hsc_core.cli.atlas``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core.rule_registry import rule_label, rule_names
from ..evaluation.atlas import (
    AUTHORS_SAMPLES,
    paper_table1,
    regime_summary,
    rule_summary,
)


def _pm(mean: float, sem: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.2f}" if not math.isfinite(sem) else f"{mean:.2f} ± {sem:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(r[k])) for r in (header, *rows)) for k in range(len(header))]
    return ["  " + "  ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w)
                             for k, (c, w) in enumerate(zip(r, widths, strict=True))) for r in (header, *rows)]


def format_atlas(table, *, rule: str = "climbing", loss: str = "01", ts: bool = True) -> str:
    """The atlas as text: Table 1, Table 7 (``loss``), the regimes for ``rule``, the suspect rows."""
    n = len(table)
    sizes = sorted({(int(a), int(b)) for a, b in zip(table["n_eval"], table["n_eval (TS)"], strict=True)
                    if math.isfinite(a) and math.isfinite(b)})
    samples = ", ".join(f"{a:,} / {b:,}" for a, b in sizes[:3]) + (" …" if len(sizes) > 3 else "")
    lines = [f"{n} models; evaluation samples without / with TS: {samples}", "",
             "Table 1 (as the paper prints it: Selective and MC without TS, Climbing with TS, gains vs Selective "
             "without TS)"]
    lines += _table(("rule", "hAURC×1000", "gain %"),
                    [(f"{rule_label(r['rule'])}{' (TS)' if r['ts'] else ''}",
                      _pm(r["haurc_x1000_mean"], r["haurc_x1000_sem"]),
                      _pm(r["gain_percent_mean"], r["gain_percent_sem"])) for r in paper_table1(table)])
    lines += ["", f"Every rule without / with TS ({'0/1' if loss == '01' else 'severity'} loss; the paper's Table "
              f"{7 if loss == '01' else 8})"]
    by = {(r["ts"], r["rule"]): r for r in rule_summary(table, loss=loss)}
    lines += _table(("rule", "hAURC×1000", "gain %", "hAURC×1000 (TS)", "gain % (TS)"),
                    [(rule_label(rule_), *(c for ts_ in (False, True) for c in (
                        _pm(by[(ts_, rule_)]["haurc_x1000_mean"], by[(ts_, rule_)]["haurc_x1000_sem"]),
                        _pm(by[(ts_, rule_)]["gain_percent_mean"], by[(ts_, rule_)]["gain_percent_sem"]))))
                     for rule_ in rule_names(paper=True)])
    lines += ["", f"Training regimes, {rule_label(rule)} {'with' if ts else 'without'} TS (a model counts in "
              "each of its regimes)"]
    lines += _table(("regime", "models", "top-1 %", "hAURC×1000", "gain %"),
                    [(s["label"], str(s["n_models"]), _pm(s["top1_percent_mean"], s["top1_percent_sem"]),
                      _pm(s["haurc_x1000_mean"], s["haurc_x1000_sem"]),
                      _pm(s["gain_percent_mean"], s["gain_percent_sem"]))
                     for s in regime_summary(table, rule=rule, loss=loss, ts=ts)])
    suspect = table[table["suspect"] != ""]
    lines += ["", f"{len(suspect)} suspect row{'s' * (len(suspect) != 1)} (kept in every mean, as the paper did)"]
    lines += [f"  {m}: {s}" for m, s in zip(suspect["model"][:30], suspect["suspect"][:30], strict=True)]
    if len(suspect) > 30:
        lines.append(f"  … and {len(suspect) - 30} more (in --out)")
    return "\n".join(lines)


def sample_note(yours, authors_samples: dict[bool, int] = AUTHORS_SAMPLES) -> str:
    """The plain sentence on how the user's models' samples differ from the authors' (empty when same)."""
    if yours is None or yours.empty:
        return ""
    sizes = sorted({int(v) for v in yours["n_eval"] if math.isfinite(v)})
    if sizes == [authors_samples[False]]:
        return ""
    shown = ", ".join(f"{v:,}" for v in sizes[:3])
    return (f"Different samples: your models on {shown} images, the authors' on {authors_samples[False]:,} "
            f"({authors_samples[True]:,} with TS), so yours are noisier and not strictly comparable.")
