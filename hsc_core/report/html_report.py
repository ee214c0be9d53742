"""``hsc report``: one self-contained, offline HTML file with every figure and table of some models.

::

    hsc report cached_logits/*.npz --out report.html [--hierarchy FILE [--classes FILE]] [--subset TAG]

Per model, under the one evaluation protocol (``core.protocol``): a headline sentence, hAURC×1000
and gain of every rule with 95 % bootstrap intervals (``core.uncertainty``), with and without
temperature scaling; RC curves of all rules (TS off / on), calibration–coverage curves, and the
models compared rule by rule; then the provenance (files, manifests, versions).

The file makes no network request: plotly.js is inlined once (the first figure), no fonts, images
or scripts are linked, and every user-provided text (model names, manifests, tags) is escaped.
``build_report`` is the library function the dashboard's download button calls.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import html
import os
import platform
import shlex
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.curves import CCCurve, RCCurve, calibration_coverage_curve, hierarchical_rc_curve, rounded_threshold_grid
from ..core.hierarchy import Hierarchy
from ..core.probabilities import fit_temperature, node_probabilities, softmax
from ..core.protocol import CALIBRATION_FRACTION, PROTOCOL_TEXT, SPLIT_SEED, calibration_mask
from ..core.rules import RULE_LABELS, RULES, decision_paths
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES, BootstrapResult, Interval, bootstrap_haurc
from ..datasets.logits_io import LogitsBundle, load_logits
from . import figures

HEADLINE_RULE = "climbing"
DISPLAY_POINTS = 1500  # points per curve in the file; every number uses the full curve
BOOTSTRAP_TEXT = (
    "Intervals: 95 % paired percentile bootstrap over the evaluation samples (scipy.stats.bootstrap, "
    "{n:,} resamples, seed {seed}); every rule is scored on the same resample, so a gain's interval "
    "accounts for the rules' shared samples. An interval that contains 0 means no clear difference."
)


# ---------------------------------------------------------------------------- the numbers
@dataclass(frozen=True, eq=False)
class ModelResult:
    """Everything the report shows of one model, with and without temperature scaling (key: ts)."""

    name: str
    dataset: str
    subset: str
    n_samples: int
    n_cal: int
    n_eval: int
    temperature: float
    top1: float
    curves: dict[bool, dict[str, RCCurve]]
    cc: dict[bool, dict[str, CCCurve]]
    boot: dict[bool, BootstrapResult]
    file: str = ""
    manifest: dict = field(default_factory=dict)


def evaluate_for_report(
    bundle: LogitsBundle,
    hierarchy: Hierarchy,
    *,
    dataset: str = "",
    subset: np.ndarray | None = None,
    subset_name: str = "all",
    n_resamples: int = N_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    file: str = "",
) -> ModelResult:
    """One model under the protocol: T on the calibration split, every number on the evaluation
    split (∩ ``subset``, a boolean mask over the file's samples), with and without TS."""
    if bundle.n_classes != hierarchy.n_leaves:
        raise ValueError(f"{file or bundle.name}: logits have {bundle.n_classes} classes but the hierarchy has "
                         f"{hierarchy.n_leaves} leaves")
    cal = calibration_mask(bundle.labels, CALIBRATION_FRACTION, SPLIT_SEED)
    keep = ~cal if subset is None else (~cal & np.asarray(subset, dtype=bool))
    if keep.sum() < 2:
        raise ValueError(f"{file or bundle.name}: fewer than 2 evaluation samples in subset {subset_name!r}")
    t = fit_temperature(bundle.logits[cal], bundle.labels[cal])
    logits, labels = bundle.logits[keep], bundle.labels[keep]
    curves, cc, boot = {}, {}, {}
    for ts in (False, True):
        probs = node_probabilities(hierarchy, softmax(logits, t if ts else 1.0))
        paths = {rule: decision_paths(hierarchy, probs, rule) for rule in RULES}
        curves[ts] = {rule: hierarchical_rc_curve(hierarchy, probs, labels, rule, paths=paths[rule]) for rule in RULES}
        grid = rounded_threshold_grid(probs, 2)
        cc[ts] = {rule: calibration_coverage_curve(hierarchy, probs, labels, rule, thresholds=grid, paths=paths[rule])
                  for rule in RULES}
        boot[ts] = bootstrap_haurc(hierarchy, labels, paths, n_resamples=n_resamples, seed=seed)
        del probs
    top1 = float((logits.argmax(axis=1) == labels).mean())
    return ModelResult(bundle.name, dataset, subset_name, bundle.n_samples, int(cal.sum()), int(keep.sum()),
                       float(t), top1, curves, cc, boot, file, dict(bundle.manifest or {}))


# ---------------------------------------------------------------------------- words
def headline_sentence(model: str, dataset: str, n_eval: int, ts: bool, gain: Interval,
                      rule: str = HEADLINE_RULE) -> str:
    """The one message for a stakeholder, from the data: how much ``rule`` changes the risk–coverage
    area vs plain selective classification, with its 95 % interval, honest when it is negative or
    when the interval contains 0. Plain text (escape it for HTML; it holds user names)."""
    where = f"On {dataset} ({n_eval:,} evaluation images, {model})" if dataset else \
        f"On {n_eval:,} evaluation images ({model})"
    setting = "with temperature scaling" if ts else "without temperature scaling"
    name = RULE_LABELS.get(rule, rule)
    if not np.isfinite(gain.estimate):
        return f"{where}, {setting}, plain selective classification makes no errors, so there is no gain to measure."
    g, lo, hi = gain.estimate, gain.low, gain.high
    if lo > 0:
        return (f"{where}, {setting}, {name} lowers the risk–coverage area by {g:.1f} % (95 % CI {lo:.1f}–{hi:.1f} %) "
                "vs plain selective classification.")
    if hi < 0:
        return (f"{where}, {setting}, {name} raises the risk–coverage area by {-g:.1f} % (95 % CI {-hi:.1f}–{-lo:.1f} %) "
                "vs plain selective classification, which is better here.")
    return (f"{where}, {setting}, {name} {'lowers' if g >= 0 else 'raises'} the risk–coverage area by {abs(g):.1f} % vs "
            f"plain selective classification, but the 95 % CI of the reduction ({lo:+.1f} % to {hi:+.1f} %) contains 0: "
            "no clear difference on this many images.")


def interval_text(iv: Interval, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
    if not np.isfinite(iv.estimate):
        return "–"
    return (f"{scale * iv.estimate:.{digits}f}{unit} [{scale * iv.low:.{digits}f}, {scale * iv.high:.{digits}f}]")


def result_rows(result: ModelResult) -> list[dict]:
    """One row per rule × TS: hAURC×1000 and gain with their intervals (the report's and the CSV's table)."""
    rows = []
    for ts in (False, True):
        b = result.boot[ts]
        for rule in RULES:
            h = b.haurc[rule]
            g = b.gain.get(rule)
            rows.append({
                "model": result.name, "dataset": result.dataset, "subset": result.subset,
                "temperature_scaling": "on" if ts else "off", "temperature": result.temperature if ts else None,
                "rule": RULE_LABELS[rule], "n_eval": result.n_eval,
                "haurc_x1000": 1000 * h.estimate, "haurc_x1000_low": 1000 * h.low, "haurc_x1000_high": 1000 * h.high,
                "gain_percent": 0.0 if g is None else g.estimate,
                "gain_percent_low": None if g is None else g.low, "gain_percent_high": None if g is None else g.high,
            })
    return rows


# ---------------------------------------------------------------------------- HTML
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
                                  "toImageButtonOptions": {"format": "png", "filename": figures.safe_filename(name),
                                                           "scale": 2}})
        self.first = False
        return f'<div class="figure">{out}</div>'


def _decimated(curve: RCCurve) -> tuple[np.ndarray, np.ndarray]:
    n = curve.coverage.size
    if n <= DISPLAY_POINTS:
        return curve.coverage, curve.risk
    idx = np.unique(np.linspace(0, n - 1, DISPLAY_POINTS).round().astype(np.int64))
    return curve.coverage[idx], curve.risk[idx]


def _context(r: ModelResult, ts: bool | None) -> figures.ExportContext:
    return figures.ExportContext(r.name, r.dataset, r.subset, ts, r.temperature if ts else None, None, r.n_eval)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _model_section(r: ModelResult, fig) -> str:
    parts = [f'<h2 id="{_e(figures.safe_filename(r.name))}">{_e(r.name)}</h2>',
             f'<p class="headline">{_e(headline_sentence(r.name, r.dataset, r.n_eval, True, r.boot[True].gain[HEADLINE_RULE]))}</p>',
             f'<p class="note">{_e(headline_sentence(r.name, r.dataset, r.n_eval, False, r.boot[False].gain[HEADLINE_RULE]))}</p>']
    rows = []
    for rule in RULES:
        cells = [RULE_LABELS[rule]]
        for ts in (False, True):
            b = r.boot[ts]
            cells.append(interval_text(b.haurc[rule], 1000))
            cells.append("0 (reference)" if rule == "selective" else interval_text(b.gain[rule], 1, 1, " %"))
        rows.append(cells)
    parts.append(_table(["rule", "hAURC×1000 [95 % CI], no TS", "gain vs Selective, no TS",
                         f"hAURC×1000 [95 % CI], TS (T = {r.temperature:.3f})", "gain vs Selective, TS"], rows))
    gains = [{"label": f"{RULE_LABELS[rule]} · {'TS' if ts else 'no TS'}", "rule": rule,
              "estimate": r.boot[ts].gain[rule].estimate, "low": r.boot[ts].gain[rule].low,
              "high": r.boot[ts].gain[rule].high} for ts in (False, True) for rule in RULES[1:]]
    parts.append(fig(figures.titled(figures.gain_figure(gains), "Hierarchical gain vs Selective", _context(r, None)),
                     f"gain_{_context(r, None).slug()}"))
    parts.append('<div class="grid">')
    for ts in (False, True):
        ctx = _context(r, ts)
        rc = figures.rc_figure({rule: _decimated(c) for rule, c in r.curves[ts].items()},
                               {rule: c.haurc for rule, c in r.curves[ts].items()})
        parts.append(fig(figures.titled(rc, "Risk–coverage curves", ctx), f"rc_{ctx.slug()}"))
    for ts in (False, True):
        ctx = _context(r, ts)
        parts.append(fig(figures.titled(figures.cc_figure(r.cc[ts]), "Calibration–coverage (ECE, 15 bins)", ctx),
                         f"cc_{ctx.slug()}"))
    parts.append("</div>")
    return "\n".join(parts)


def _compare_section(results: Sequence[ModelResult], fig) -> str:
    parts = ['<h2 id="compare">Models compared</h2>']
    rows = [[r.name, r.dataset or "–", f"{r.n_eval:,}", f"{r.n_cal:,}", f"{r.temperature:.3f}", f"{r.top1:.4f}"]
            + [interval_text(r.boot[True].gain[rule], 1, 1, " %") for rule in RULES[1:]] for r in results]
    parts.append(_table(["model", "data set", "evaluation samples", "calibration samples", "T", "top-1 (eval)"]
                        + [f"{RULE_LABELS[rule]} gain, TS" for rule in RULES[1:]], rows))
    gains = [{"label": f"{r.name} · {RULE_LABELS[rule]}", "rule": rule, "estimate": r.boot[True].gain[rule].estimate,
              "low": r.boot[True].gain[rule].low, "high": r.boot[True].gain[rule].high}
             for r in results for rule in RULES[1:]]
    parts.append(fig(figures.titled(figures.gain_figure(gains), "Hierarchical gain vs Selective, with TS"),
                     "compare_gain_TS"))
    parts.append('<div class="grid">')
    for rule in RULES:
        cmp = figures.compare_figure({r.name: _decimated(r.curves[True][rule]) for r in results},
                                     {r.name: r.curves[True][rule].haurc for r in results})
        parts.append(fig(figures.titled(cmp, f"{RULE_LABELS[rule]}: risk–coverage per model (TS on)"),
                         f"compare_{rule}_TS"))
    parts.append("</div>")
    return "\n".join(parts)


def _provenance(results: Sequence[ModelResult], command: str | None) -> str:
    rows = []
    for r in results:
        m = r.manifest
        ds = m.get("dataset")
        ds_text = ds.get("name", "") if isinstance(ds, dict) else (ds or "")
        rows.append([r.name, r.file or "(in memory)", m.get("model", "–"), m.get("weights", "–"),
                     ds_text or r.dataset or "–", m.get("date", "–"), f"{r.n_samples:,}"])
    versions = {"hsc": hsc_version(), "python": platform.python_version(), "numpy": np.__version__}
    for mod in ("scipy", "plotly"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:  # pragma: no cover - both are requirements
            pass
    parts = ['<h2 id="provenance">Provenance</h2>',
             _table(["model", "file", "manifest model", "weights", "data set", "logits date", "samples"], rows),
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


def build_report(results: Sequence[ModelResult], title: str | None = None, command: str | None = None) -> str:
    """The whole report as one HTML string (self-contained; no network requests when opened)."""
    if not results:
        raise ValueError("no models to report")
    first = results[0]
    title = title or f"Hierarchical selective classification report — {', '.join(r.name for r in results)}"
    fig = _Figures()
    b = first.boot[True]
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subset = first.subset if first.subset not in ("", "all") else "all samples"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Generated {when} by hsc ({_e(hsc_version())}) · subset: {_e(subset)} · '
        f'{len(results)} model{"s" * (len(results) != 1)}</p>',
        '<h2 id="summary">In one sentence</h2>',
        *[f'<p class="headline">{_e(headline_sentence(r.name, r.dataset, r.n_eval, True, r.boot[True].gain[HEADLINE_RULE]))}</p>'
          for r in results],
        '<h2 id="protocol">How these numbers were measured</h2>',
        f"<p>{_e(PROTOCOL_TEXT)}</p>",
        f"<p>{_e(figures.RISK_NOTE)} hAURC is the area under the risk–coverage curve (lower is better; shown ×1000); "
        "the hierarchical gain is the % of Selective's hAURC that a rule saves (positive is better).</p>",
        f"<p>{_e(BOOTSTRAP_TEXT.format(n=b.n_resamples, seed=b.seed))}</p>",
        *[_model_section(r, fig) for r in results],
        _compare_section(results, fig) if len(results) > 1 else "",
        _provenance(results, command),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# ---------------------------------------------------------------------------- command line
def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="LOGITS",
                        help=".npz logits files, folders (every .npz inside) or quoted glob patterns")
    parser.add_argument("--out", default="report.html", metavar="HTML", help="the report file (default report.html)")
    parser.add_argument("--hierarchy", metavar="FILE",
                        help="class tree (default: the built-in tree of each file's data set, e.g. ImageNet-1k)")
    parser.add_argument("--classes", metavar="FILE", help="class list giving the logits' column order of the leaves")
    parser.add_argument("--first-parent", action="store_true",
                        help="in a DAG hierarchy, keep each node's first listed parent")
    parser.add_argument("--subset", default="all", metavar="TAG",
                        help="evaluate only the samples with this source tag (default: all)")
    parser.add_argument("--resamples", type=int, default=N_RESAMPLES, metavar="B",
                        help=f"bootstrap resamples for the 95 %% intervals (default {N_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=f"bootstrap seed (default {BOOTSTRAP_SEED})")
    parser.add_argument("--title", help="report title (default: names the models)")


def subset_mask(bundle: LogitsBundle, tag: str) -> np.ndarray | None:
    """None for "all"; else the samples whose source tag is ``tag`` (ValueError naming the tags there are)."""
    if tag in ("", "all"):
        return None
    if bundle.sources is None:
        raise ValueError(f"{bundle.name}: --subset {tag!r} needs source tags, and this file has none")
    sources = bundle.sources.astype(str)
    mask = sources == tag
    if not mask.any():
        known = ", ".join(repr(str(t)) for t in np.unique(sources)[:8])
        raise ValueError(f"{bundle.name}: no samples with source tag {tag!r}; the file has {known}")
    return mask


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    from ..pipeline.evaluate import builtin_hierarchy, expand_inputs, load_user_hierarchy
    from ..datasets.registry import dataset_for_manifest

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out must name an .html file, got {args.out}")
    if args.resamples < 100:
        raise ValueError(f"--resamples must be at least 100 for a 95 % interval, got {args.resamples}")
    if args.classes and not args.hierarchy:
        raise ValueError("--classes orders the leaves of --hierarchy FILE; pass --hierarchy too")
    paths = expand_inputs(args.inputs)
    tree = load_user_hierarchy(args.hierarchy, args.classes, args.first_parent) if args.hierarchy else None
    # Check every file first (classes, tree, subset), so bad input fails before any long work.
    jobs = []
    for p in paths:
        bundle = load_logits(p)
        if tree is None:
            dataset, hierarchy = builtin_hierarchy(bundle, str(p))
        else:
            try:
                dataset = dataset_for_manifest(bundle.manifest, bundle.n_classes) or "custom"
            except ValueError:
                dataset = "custom"
            hierarchy = tree
        if bundle.n_classes != hierarchy.n_leaves:
            raise ValueError(f"{p}: logits have {bundle.n_classes} classes but the hierarchy has "
                             f"{hierarchy.n_leaves} leaves")
        subset_mask(bundle, args.subset)
        jobs.append((p, dataset, hierarchy))
        del bundle
    results = []
    for p, dataset, hierarchy in jobs:
        bundle = load_logits(p)
        print(f"{p}: evaluating ({bundle.n_samples:,} samples, {args.resamples:,} bootstrap resamples)…",
              file=sys.stderr, flush=True)
        results.append(evaluate_for_report(bundle, hierarchy, dataset=dataset, subset=subset_mask(bundle, args.subset),
                                           subset_name=args.subset or "all", n_resamples=args.resamples,
                                           seed=args.seed, file=str(p)))
    command = shlex.join(["hsc", "report", *args.inputs, "--out", args.out]
                         + (["--hierarchy", args.hierarchy] if args.hierarchy else [])
                         + (["--classes", args.classes] if args.classes else [])
                         + (["--subset", args.subset] if args.subset not in ("", "all") else []))
    _write_atomic(out, build_report(results, args.title, command))
    print(f"{len(results)} model{'s' * (len(results) != 1)} → {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


__all__ = ["ModelResult", "build_report", "evaluate_for_report", "headline_sentence", "result_rows",
           "configure_parser", "run"]
