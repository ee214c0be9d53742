"""One self-contained, offline HTML file with every figure and table of some models (``hsc report``,
whose command line is ``hsc_core.cli.report``, and the dashboard's download button).

A front end of the evaluation layer (``hsc_core.evaluation``): each model is a
``ModelEvaluation``, and the report only lays out what its settings return. Per model: a headline
sentence, hAURC×1000 and gain of every rule with 95 % bootstrap intervals, with and without
temperature scaling; RC curves of all rules (TS off / on), calibration–coverage curves, and the
models compared rule by rule; then the provenance (files, manifests, versions) and the tidy result
rows as an embedded CSV (the layer's result schema, ``evaluation.RESULT_COLUMNS``).

The file makes no network request: plotly.js is inlined once (the first figure), no fonts, images
or scripts are linked, and every user-provided text (model names, manifests, tags) is escaped.
``build_report`` is the library function the dashboard's download button calls; it reads each
model once, so the command line holds one model's logits at a time.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.curves import COMMON_RANGE_NOTE, RCCurve, coverage_range_text
from ..core.protocol import protocol_text
from ..core.rule_registry import is_rule, rule_label, rule_names
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES, Interval
from ..evaluation import RESULT_COLUMNS, ModelEvaluation, ResultRow, column_label, to_csv, wide_table
from ..evaluation.calibrator_benchmark import benchmark_csv, benchmark_table, calibrator_benchmark
from ..evaluation.card import card_markdown, decision_card, realised_words, status_words
from ..evaluation.results import GAIN_RANGE_COLUMN, display_value, gain_coverage
from . import export, figures

HEADLINE_RULE = "climbing"
DISPLAY_POINTS = 1500  # points per curve in the file; every number uses the full curve
CSV_NAME = "hsc_report_results.csv"
BOOTSTRAP_TEXT = (
    "Intervals: 95 % paired percentile bootstrap over the evaluation samples (scipy.stats.bootstrap, "
    "{n:,} resamples, seed {seed}); every rule is scored on the same resample, so a gain's interval "
    "accounts for the rules' shared samples. An interval that contains 0 means no clear difference."
)


# ---------------------------------------------------------------------------- the numbers
def result_rows(ev: ModelEvaluation, *, n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> list[ResultRow]:
    """The report's numbers of one model: the layer's tidy rows (``evaluation.RESULT_COLUMNS``) of
    both TS settings, 0/1 loss, exact curves, with bootstrap intervals.

    Every table, headline and gain figure of the report is laid out from these rows, and the
    embedded CSV is these rows, so what the report shows and what it exports cannot disagree.
    """
    return ev.results(("01",), intervals=True, n_resamples=n_resamples, seed=seed)


def _by_key(rows: Iterable[ResultRow]) -> dict[tuple[bool, str, str], ResultRow]:
    """(ts, rule, metric) → row (one model, one loss)."""
    return {(r["ts"], r["rule"], r["metric"]): r for r in rows}


def _interval(row: ResultRow) -> Interval:
    """A tidy row as an ``Interval`` in display units (hAURC ×1000, gain in %)."""
    return Interval(display_value(row), display_value(row, "ci_low"), display_value(row, "ci_high"))


# ---------------------------------------------------------------------------- words
def headline_sentence(model: str, dataset: str, n_eval: int, ts: bool, gain: Interval,
                      rule: str = HEADLINE_RULE) -> str:
    """The one message for a stakeholder, from the data: how much ``rule`` changes the risk–coverage
    area vs plain selective classification, with its 95 % interval, honest when it is negative or
    when the interval contains 0. Plain text (escape it for HTML; it holds user names)."""
    where = f"On {dataset} ({n_eval:,} evaluation images, {model})" if dataset else \
        f"On {n_eval:,} evaluation images ({model})"
    setting = "with temperature scaling" if ts else "without temperature scaling"
    name = rule_label(rule) if is_rule(rule) else rule
    if not np.isfinite(gain.estimate):
        return f"{where}, {setting}, plain selective classification makes no errors, so there is no gain to measure."
    g, lo, hi = gain.estimate, gain.low, gain.high
    if lo > 0:
        return (f"{where}, {setting}, {name} lowers the risk–coverage area by {g:.1f} % (95 % CI {lo:.1f}–{hi:.1f} %) "
                "vs plain selective classification.")
    if hi < 0:
        return (f"{where}, {setting}, {name} raises the risk–coverage area by {-g:.1f} % "
                f"(95 % CI {-hi:.1f}–{-lo:.1f} %) vs plain selective classification, which is better here.")
    return (f"{where}, {setting}, {name} {'lowers' if g >= 0 else 'raises'} the risk–coverage area by "
            f"{abs(g):.1f} % vs plain selective classification, but the 95 % CI of the reduction "
            f"({lo:+.1f} % to {hi:+.1f} %) contains 0: no clear difference on this many images.")


def worse_sentence(rows: Iterable[ResultRow]) -> str:
    """The negative result in one sentence per TS setting: the rules (all models) whose hierarchical
    gain vs Selective is below 0, grouped by model, e.g. "Without temperature scaling, some rules do
    worse than plain selective classification (negative gain): efficientnet_lite1: Jumping −18.2 %
    (95 % CI −28.6 to −8.9 %), …". A row with an interval counts only when the whole interval is
    below 0 ("clearly worse"); one without is marked as a point estimate. "" when no rule does
    worse. Plain text (escape it for HTML; it holds user names)."""
    worse: dict[bool, dict[str, list[str]]] = {False: {}, True: {}}
    for r in _worse_rows(rows):
        how = (f" (95 % CI {display_value(r, 'ci_low'):.1f} to {display_value(r, 'ci_high'):.1f} %)"
               if r["ci_high"] is not None else " (point estimate)")
        span = gain_coverage(r)
        if span is not None:  # a gain over the common coverage range says which
            how = how[:-1] + f", over {coverage_range_text(*span)})"
        item = f"{rule_label(r['rule'])} {display_value(r):.1f} %{how}"
        worse[bool(r["ts"])].setdefault(r["model"], []).append(item)
    parts = [f"{'With' if ts else 'Without'} temperature scaling, some rules do worse than plain selective "
             "classification (negative gain): " + "; ".join(f"{m}: {', '.join(items)}" for m, items in by.items()) + "."
             for ts, by in worse.items() if by]
    return " ".join(parts)


def _worse_rows(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """The gain rows (0/1 loss, not Selective) below 0: the whole interval when there is one."""
    out = []
    for r in rows:
        if r["metric"] != "gain_percent" or r["rule"] == "selective" or r["loss"] != "01":
            continue
        g, high = display_value(r), r["ci_high"]
        if np.isfinite(g) and g < 0 and (high is None or display_value(r, "ci_high") < 0):
            out.append(r)
    return out


def worse_rules(rows: Iterable[ResultRow]) -> set[str]:
    """The rules (any model, either TS setting) that ``worse_sentence`` names: clearly worse than Selective."""
    return {str(r["rule"]) for r in _worse_rows(rows)}


def worse_summary(rows: Iterable[ResultRow]) -> str:
    """``worse_sentence`` in one short sentence per TS setting (a projector's screen): how many
    models have a rule that does worse than Selective, and the worst one, e.g. "Without
    temperature scaling, 3 of 4 models have a rule that does worse than plain selective
    classification (worst: efficientnet_lite1, Jumping −18.2 %)." "" when none does."""
    rows = list(rows)
    models = {r["model"] for r in rows}
    parts = []
    for ts in (False, True):
        worse = [r for r in _worse_rows(rows) if bool(r["ts"]) == ts]
        if not worse:
            continue
        n = len({r["model"] for r in worse})
        low = min(worse, key=display_value)
        parts.append(f"{'With' if ts else 'Without'} temperature scaling, {n} of {len(models)} "
                     f"model{'s' if len(models) != 1 else ''} {'have' if n != 1 else 'has'} a rule that does worse "
                     f"than plain selective classification (worst: {low['model']}, {rule_label(low['rule'])} "
                     f"{display_value(low):.1f} %{'' if low['ci_high'] is not None else ', point estimate'}).")
    return " ".join(parts)


def interval_text(iv: Interval, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
    """``estimate [low, high]`` (× ``scale``), or "–" when the estimate is not a number."""
    if not np.isfinite(iv.estimate):
        return "–"
    return (f"{scale * iv.estimate:.{digits}f}{unit} [{scale * iv.low:.{digits}f}, {scale * iv.high:.{digits}f}]")


# ---------------------------------------------------------------------------- HTML pieces
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1150px;
padding:0 1rem;color:#1a1a1a;line-height:1.45}
h1{font-size:1.8rem;margin-bottom:.2rem} h2{margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
.headline{font-size:1.2rem;background:#eef5fb;border-left:5px solid #0072B2;padding:.6rem 1rem;margin:.6rem 0}
.note{color:#444;font-size:.95rem} table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #ccc;padding:.25rem .55rem;text-align:right} th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left} .grid{display:grid;grid-template-columns:1fr 1fr;gap:.5rem}
code{background:#f4f4f4;padding:0 .25rem} .meta{color:#555;font-size:.9rem}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Figures:
    """Figures as HTML fragments: plotly.js inlined with the first, none after."""

    def __init__(self) -> None:
        self.first = True

    def __call__(self, fig, name: str) -> str:
        out = fig.to_html(full_html=False, include_plotlyjs=self.first, default_width="100%",
                          config={"displaylogo": False,
                                  "toImageButtonOptions": {"format": "png", "filename": export.safe_filename(name),
                                                           "scale": 2}})
        self.first = False
        return f'<div class="figure">{out}</div>'


def _decimated(curve: RCCurve) -> tuple[np.ndarray, np.ndarray]:
    """At most ``DISPLAY_POINTS`` points of a curve (copies, so the full curve is not kept alive)."""
    n = curve.coverage.size
    if n <= DISPLAY_POINTS:
        return curve.coverage.copy(), curve.risk.copy()
    idx = np.unique(np.linspace(0, n - 1, DISPLAY_POINTS).round().astype(np.int64))
    return curve.coverage[idx], curve.risk[idx]


def _context(ev: ModelEvaluation, ts: bool | None) -> export.ExportContext:
    # A figure of both settings is labelled with the TS setting's sample count (the same under the
    # project protocol; the held-out split under the paper's).
    n = ev.setting(True if ts is None else ts).n
    return export.ExportContext(ev.name, ev.dataset, ev.subset_name, ts, ev.temperature if ts else None, None, n)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _headline(rows: dict, ts: bool) -> str:
    r = rows[(ts, HEADLINE_RULE, "gain_percent")]
    return headline_sentence(r["model"], r["dataset"], r["n_eval"], ts, _interval(r))


def _rule_table(rows: dict) -> str:
    """One row per rule: hAURC×1000 and gain with their intervals, without and with TS."""
    header = ["rule"]
    for ts in (False, True):
        header += [f"{column_label('haurc', ts=ts)} [95 % CI]", f"{column_label('gain_percent', ts=ts)} [95 % CI]"]
    body = []
    for rule in rule_names(paper=True):
        cells = [rule_label(rule)]
        for ts in (False, True):
            cells.append(interval_text(_interval(rows[(ts, rule, "haurc")])))
            cells.append("0 (reference)" if rule == "selective"
                         else interval_text(_interval(rows[(ts, rule, "gain_percent")]), digits=1, unit=" %"))
        body.append(cells)
    return _table(header, body)


def _gain_rows(rows: dict, settings: Sequence[bool], label: str = "") -> list[dict]:
    """``figures.gain_figure`` rows of every rule but Selective, from the tidy rows."""
    out = []
    for ts in settings:
        for rule in rule_names(paper=True)[1:]:
            iv = _interval(rows[(ts, rule, "gain_percent")])
            name = f"{label} · {rule_label(rule)}" if label else f"{rule_label(rule)} · {'TS' if ts else 'no TS'}"
            out.append({"label": name, "rule": rule, "estimate": iv.estimate, "low": iv.low, "high": iv.high})
    return out


def _curve_figures(ev: ModelEvaluation, fig: _Figures) -> list[str]:
    """RC curves (decimated; the legend's hAURC from the full curve) and calibration–coverage curves."""
    parts = []
    for ts in (False, True):
        ctx, curves = _context(ev, ts), ev.setting(ts).curves()
        rc = figures.rc_figure({rule: _decimated(c) for rule, c in curves.items()},
                               {rule: c.haurc for rule, c in curves.items()})
        parts.append(fig(figures.titled(rc, "Risk–coverage curves", ctx), f"rc_{ctx.slug()}"))
    for ts in (False, True):
        ctx = _context(ev, ts)
        cc = figures.cc_figure(ev.setting(ts).cc_curves())
        parts.append(fig(figures.titled(cc, "Calibration–coverage (ECE, 15 bins)", ctx), f"cc_{ctx.slug()}"))
    return parts


def _model_section(ev: ModelEvaluation, rows: dict, fig: _Figures) -> str:
    ctx = _context(ev, None)
    gain = figures.titled(figures.gain_figure(_gain_rows(rows, (False, True))), "Hierarchical gain vs Selective", ctx)
    return "\n".join([
        f'<h2 id="{_e(export.safe_filename(ev.name))}">{_e(ev.name)}</h2>',
        f'<p class="headline">{_e(_headline(rows, True))}</p>',
        f'<p class="note">{_e(_headline(rows, False))}</p>',
        _rule_table(rows),
        f'<p class="meta">TS: temperature T = {ev.temperature:.3f}, fitted on {ev.n_cal:,} calibration samples.</p>',
        fig(gain, f"gain_{ctx.slug()}"),
        '<div class="grid">', *_curve_figures(ev, fig), "</div>",
    ])


def _beyond_section(ev: ModelEvaluation, fig: _Figures, n_resamples: int, seed: int) -> str:
    """Rules and metrics beyond the paper, with TS: every rule's hAURC, excess and achievable hAURC
    and micro hF1 at θ = 0 (95 % intervals where the layer has them), the arg-max leaf's AURC
    (Zhou et al.) and AUGRC, and the RC and calibration–coverage curves of the new rules beside Climbing."""
    es = ev.setting(True)
    rows = {(r["rule"], r["metric"]): r for r in es.extra_results(rule_names(), intervals=True,
                                                                  n_resamples=n_resamples, seed=seed)}

    def cell(rule: str, metric: str) -> str:
        r = rows[(rule, metric)]
        iv = _interval(r)
        if r["ci_low"] is None:
            return f"{iv.estimate:.2f}" if np.isfinite(iv.estimate) else "–"
        return interval_text(iv, digits=4 if metric == "hf1_micro" else 2)

    def gain(rule: str) -> tuple[str, str]:
        # gain vs Selective and, when the rule's curve stops short of coverage 1, the range it is over
        if rule == "selective":
            return "0.00", ""
        g = es.gain_range(rule)
        return (f"{g.gain:+.2f}" if np.isfinite(g.gain) else "–"), (g.range_text() if g.restricted else "")

    metrics = ("excess_haurc", "achievable_haurc", "hf1_micro")
    header = (["rule", column_label("haurc", ts=True), column_label("gain_percent", ts=True), GAIN_RANGE_COLUMN]
              + [f"{column_label(m)} [95 % CI]" for m in metrics])
    body = [[rule_label(rule), f"{1000 * es.haurc(rule):.2f}", *gain(rule), *(cell(rule, m) for m in metrics)]
            for rule in rule_names()]
    shown = ("climbing", *rule_names(paper=False))
    curves = {rule: es.curve(rule) for rule in shown}
    rc = figures.rc_figure({rule: _decimated(c) for rule, c in curves.items()},
                           {rule: c.haurc for rule, c in curves.items()}, rules=shown)
    cc = figures.cc_figure({rule: es.cc_curve(rule) for rule in shown}, rules=shown)
    ctx = _context(ev, True)
    return "\n".join([
        "<h3>Beyond the paper: metric-optimal and Pareto rules, more metrics (TS on)</h3>",
        _table(header, body),
        f'<p class="meta">{_e(COMMON_RANGE_NOTE)}</p>',
        f'<p class="meta">Arg-max leaf: {_e(column_label("aurc_zhou"))} {cell("", "aurc_zhou")}, '
        f'{_e(column_label("augrc"))} {cell("", "augrc")}. Excess hAURC is measured against the oracle ordering '
        "of each rule's own operating points; achievable hAURC is the area under the convex hull of its "
        "operating points.</p>",
        fig(figures.titled(rc, "Risk–coverage: rules beyond the paper", ctx), f"rc_beyond_{ctx.slug()}"),
        fig(figures.titled(cc, "Calibration–coverage (ECE, 15 bins): rules beyond the paper", ctx),
            f"cc_beyond_{ctx.slug()}"),
    ])


def card_section(card: dict) -> str:
    """The decision card (``evaluation.card.decision_card``) as HTML, every text escaped, with its
    Markdown (YAML front matter) embedded as a download."""
    r = card["realised"]
    h = card["haurc_climbing"]
    verdict, detail = status_words(card)
    rows = [
        ["θ to ship" if card["method"] != "darts" else "λ to ship", f"{card['theta']:.6g}"],
        ["method", f"{card['method_label']} ({card['method']}; {card['method_source']})"],
        ["guarantee", card["guarantee"]],
        ["status", f"{verdict}: {detail}" if detail else f"{verdict}."],
        *([["held-out answers", f"{r['answered_at_leaf']:.1%} at a leaf, {r['answered_coarser']:.1%} at a coarser "
            f"node, {r['abstained']:.1%} abstained; "
            + ("none answered" if r["answered_accuracy"] is None else
               f"{r['answered_accuracy']:.1%} of the answers correct")
            + (f"; {realised_words(card)}" if realised_words(card) else "")]] if "abstained" in r else []),
        ["realised hierarchical accuracy [95 % CI]", f"{r['accuracy']:.4f} [{r['accuracy_interval'][0]:.4f}, "
                                        f"{r['accuracy_interval'][1]:.4f}] (target {card['target_accuracy']:.4g})"],
        ["realised coverage [95 % CI]", f"{r['coverage']:.4f} [{r['coverage_interval'][0]:.4f}, "
                                        f"{r['coverage_interval'][1]:.4f}]"],
        ["hAURC×1000 Climbing [95 % CI]", f"{1000 * h['value']:.2f} [{1000 * h['interval'][0]:.2f}, "
                                          f"{1000 * h['interval'][1]:.2f}]"],
        ["calibration / test samples", f"{card['n_cal']:,} / {card['n_test']:,} (seed {card['seed']})"],
    ]
    ev = card.get("evidence") or {}
    if ev:
        rows.append([f"violation rate over {ev['reps']:,} calibration sets",
                     f"{ev['violation_rate']:.1%} (95 % upper limit {ev['violation_high_95']:.1%}; δ = "
                     f"{card['delta']:.4g})"])
    md = base64.b64encode(card_markdown(card).encode("utf-8")).decode("ascii")
    name = export.safe_filename(f"decision_card_{card['model']}_{card['method']}") + ".md"
    return "\n".join([
        f"<h3>Decision card: {_e(card['model'])}</h3>",
        _table(["", ""], rows),
        f'<p class="meta"><a download="{_e(name)}" href="data:text/markdown;base64,{md}">Download the decision '
        "card (Markdown with YAML front matter)</a></p>",
    ])


# ---------------------------------------------------------------------------- one model, laid out
@dataclass(frozen=True)
class _Laid:
    """One model as the report lays it out. Its own section is HTML already; the summary, the
    comparison and the CSV read its tidy rows. No logits and no full curves: see ``build_report``."""

    section: str
    rows: list[ResultRow]
    curves: dict[str, tuple[np.ndarray, np.ndarray]]  # rule → decimated RC curve with TS
    provenance: list

    @property
    def name(self) -> str:
        return self.rows[0]["model"]

    @property
    def protocol(self) -> str:
        return self.rows[0]["protocol"]


def _provenance_row(ev: ModelEvaluation) -> list:
    m = ev.manifest
    ds = m.get("dataset")
    ds_text = ds.get("name", "") if isinstance(ds, dict) else (ds or "")
    return [ev.name, ev.file or "(in memory)", m.get("model", "–"), m.get("weights", "–"),
            ds_text or ev.dataset or "–", m.get("date", "–"), f"{ev.n_samples:,}"]


CALIBRATORS_NOTE = (
    "Every calibrator is fitted on the calibration split; every number is on the evaluation split, with its 95 % "
    "paired bootstrap interval. ★ marks the best of each column (lowest hAURC, ECE and CC area; highest gain over "
    "Selective). An internal node is scored on the leaf distribution with its leaves merged into one class; for "
    "scores that are not probabilities (margin, entropy, DOCTOR, energy) the ECE columns say how far the score "
    "is from one rather than a calibration error."
)


def calibrators_section(ev: ModelEvaluation, calibrators: Sequence[str] | None = None,
                        confidences: Sequence[str] | None = None, *, n_resamples: int = N_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> str:
    """One model's calibrator × confidence benchmark (``evaluation.calibrator_benchmark``) as HTML:
    the table with the best of each column marked, and its rows as a CSV inside the file."""
    rows = calibrator_benchmark(ev, calibrators=calibrators, confidences=confidences, n_resamples=n_resamples,
                                seed=seed)
    shown = benchmark_table(rows)
    header = list(shown[0]) if shown else []
    name = f"{export.safe_filename(ev.name)}_calibrators.csv"
    data = base64.b64encode(benchmark_csv(rows).encode("utf-8")).decode("ascii")
    return "\n".join([
        f'<h3 id="{_e(export.safe_filename(ev.name))}-calibrators">Calibrators and confidence scores '
        f"({_e(rule_label(rows[0]['rule']) if rows else '')})</h3>",
        f"<p>{_e(CALIBRATORS_NOTE)}</p>",
        _table(header[1:], [[r[h] for h in header[1:]] for r in shown]),
        f'<p class="meta"><a download="{_e(name)}" href="data:text/csv;charset=utf-8;base64,{data}">{_e(name)}</a></p>',
    ])


def _lay_out(ev: ModelEvaluation, fig: _Figures, n_resamples: int, seed: int, card: dict | None = None,
             scores: dict | None = None) -> _Laid:
    tidy = result_rows(ev, n_resamples=n_resamples, seed=seed)
    section = _model_section(ev, _by_key(tidy), fig) + "\n" + _beyond_section(ev, fig, n_resamples, seed)
    if scores is not None:
        section += "\n" + calibrators_section(ev, scores.get("calibrators"), scores.get("confidences"),
                                              n_resamples=n_resamples, seed=seed)
    if card is not None:
        section += "\n" + card_section(decision_card(ev, n_resamples=n_resamples, bootstrap_seed=seed, **card))
    return _Laid(section, tidy,
                 {rule: _decimated(c) for rule, c in ev.setting(True).curves().items()}, _provenance_row(ev))


# ---------------------------------------------------------------------------- the sections
COMPARE_HEADER = (["model", "data set", "evaluation samples", "calibration samples", column_label("temperature"),
                   column_label("top1")]
                  + [f"{column_label('gain_percent', rule, ts=True)} [95 % CI]" for rule in rule_names(paper=True)[1:]])


def _compare_row(rows: list[ResultRow], label: str) -> list:
    """The comparison table's row: the TS setting's wide table (``column_label`` columns)."""
    wide = wide_table(rows, ts=True, metrics=("top1", "temperature", "gain_percent"), intervals=True)[0]
    gains = []
    for rule in rule_names(paper=True)[1:]:
        name = column_label("gain_percent", rule, ts=True)
        gains.append(interval_text(Interval(wide[name], wide[f"{name} low"], wide[f"{name} high"]), digits=1,
                                   unit=" %"))
    return [label, rows[0]["dataset"] or "–", f"{wide['n_eval']:,}", f"{rows[0]['n_cal']:,}",
            f"{wide[column_label('temperature')]:.3f}", f"{wide[column_label('top1')]:.4f}", *gains]


def _compare_section(models: Sequence[_Laid], fig: _Figures) -> str:
    # Two files may hold models of the same name: number those, so no figure merges them.
    names = [m.name for m in models]
    labels = [n if names.count(n) == 1 else f"{n} ({k + 1})" for k, n in enumerate(names)]
    rows = [_by_key(m.rows) for m in models]
    gains = [g for r, label in zip(rows, labels, strict=True) for g in _gain_rows(r, (True,), label)]
    parts = ['<h2 id="compare">Models compared</h2>',
             _table(COMPARE_HEADER, [_compare_row(m.rows, label) for m, label in zip(models, labels, strict=True)]),
             fig(figures.titled(figures.gain_figure(gains), "Hierarchical gain vs Selective, with TS"),
                 "compare_gain_TS"), '<div class="grid">']
    for rule in rule_names(paper=True):
        curves = {label: m.curves[rule] for m, label in zip(models, labels, strict=True)}
        areas = {label: r[(True, rule, "haurc")]["value"] for r, label in zip(rows, labels, strict=True)}
        cmp = figures.compare_figure(curves, areas)
        parts.append(fig(figures.titled(cmp, f"{rule_label(rule)}: risk–coverage per model (TS on)"),
                         f"compare_{rule}_TS"))
    parts.append("</div>")
    return "\n".join(parts)


def _csv_link(rows: Sequence[ResultRow]) -> str:
    """The tidy rows as a CSV inside the file (a data: link: no request), formulas neutralised."""
    data = base64.b64encode(to_csv(rows, RESULT_COLUMNS).encode("utf-8")).decode("ascii")
    return (f'<p class="meta">Every number above, one per row, in the tidy result schema of the evaluation layer: '
            f'<a download="{CSV_NAME}" href="data:text/csv;charset=utf-8;base64,{data}">{CSV_NAME}</a></p>')


def _provenance(models: Sequence[_Laid], command: str | None) -> str:
    versions = {"hsc": hsc_version(), "python": platform.python_version(), "numpy": np.__version__}
    for mod in ("scipy", "plotly"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:  # pragma: no cover - both are requirements
            pass
    parts = ['<h2 id="provenance">Provenance</h2>',
             _table(["model", "file", "manifest model", "weights", "data set", "logits date", "samples"],
                    [m.provenance for m in models]),
             _csv_link([r for m in models for r in m.rows]),
             f'<p class="meta">Versions: {_e(", ".join(f"{k} {v}" for k, v in versions.items()))}.</p>']
    if command:
        parts.append(f'<p class="meta">Command: <code>{_e(command)}</code></p>')
    return "\n".join(parts)


def hsc_version() -> str:
    """The installed package's version, else the source tree's git commit (read from .git, no git call)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("hsc-toolkit")
    except (ImportError, PackageNotFoundError):
        pass
    git = Path(__file__).resolve().parents[2] / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = git / head[5:]
            head = ref.read_text().strip() if ref.is_file() else head[5:]
        return f"source tree {head[:12]}"
    except OSError:
        return "source tree"


def _one_protocol(models: Sequence[_Laid]) -> str:
    protocols = sorted({m.protocol for m in models})
    if len(protocols) > 1:
        raise ValueError(f"the models were evaluated under different protocols ({', '.join(protocols)}); "
                         "a report compares models under one")
    return protocols[0]


def build_report(evaluations: Iterable[ModelEvaluation], title: str | None = None, command: str | None = None, *,
                 n_resamples: int = N_RESAMPLES, seed: int = BOOTSTRAP_SEED, card: dict | None = None,
                 calibrators: dict | None = None) -> str:
    """The whole report as one HTML string (self-contained; no network requests when opened).

    Parameters
    ----------
    evaluations : the models, under one protocol. Read once, in order, and laid out as they come:
        pass a generator (as ``hsc report`` does) and only one model's logits are held at a time.
    title : the page title (default: names the models).
    command : the command line shown in the provenance.
    n_resamples, seed : the bootstrap of the 95 % intervals (``EvaluationSet.bootstrap``).
    card : ``decision_card`` options (``target_accuracy``, ``delta``, ``method`` …): each model's
        section then ends with its decision card.
    calibrators : {"calibrators": names or None, "confidences": names or None} (None: every listed
        one): each model's section gets the calibrator × confidence benchmark (``calibrators_section``).
    """
    fig = _Figures()
    models = []
    for ev in evaluations:
        models.append(_lay_out(ev, fig, n_resamples, seed, card, calibrators))
        protocol = _one_protocol(models)  # before the next model's work
        del ev  # nothing below needs the logits
    if not models:
        raise ValueError("no models to report")
    title = title or f"Hierarchical selective classification report — {', '.join(m.name for m in models)}"
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subset = models[0].rows[0]["subset"]
    subset = subset if subset not in ("", "all") else "all samples"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Generated {when} by hsc ({_e(hsc_version())}) · subset: {_e(subset)} · '
        f'protocol: {_e(protocol)} · {len(models)} model{"s" * (len(models) != 1)}</p>',
        '<h2 id="summary">In one sentence</h2>',
        *[f'<p class="headline">{_e(_headline(_by_key(m.rows), True))}</p>' for m in models],
        *([f'<p class="note">{_e(worse)}</p>'] if (worse := worse_sentence(r for m in models for r in m.rows))
          else []),
        '<h2 id="protocol">How these numbers were measured</h2>',
        f"<p>{_e(protocol_text(protocol))}</p>",
        f"<p>{_e(figures.RISK_NOTE)} hAURC is the area under the risk–coverage curve (lower is better; shown ×1000); "
        "the hierarchical gain is the % of Selective's hAURC that a rule saves (positive is better).</p>",
        f"<p>{_e(BOOTSTRAP_TEXT.format(n=n_resamples, seed=seed))}</p>",
        *[m.section for m in models],
        _compare_section(models, fig) if len(models) > 1 else "",
        _provenance(models, command),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


__all__ = ["build_report", "calibrators_section", "card_section", "headline_sentence", "interval_text",
           "result_rows"]
