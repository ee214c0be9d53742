"""The snapshots of the pages ``snapshot_views`` does not cover: Guaranteed accuracy, Compare
models, Where it stops, Model atlas, Hierarchy sensitivity, Try an image, the Guided story,
Per-rank thresholds, Calibrators and Monitor.

Each builder reads its link's parameters as a session does (``snapshot_views.settings``) and draws
with the function its live page calls (``figures.compare_figure``, ``tree_map_figure``,
``accuracy_histogram``, ``per_rank.rc_figure``, …), so a snapshot shows the live page's numbers.
What only a session holds (an upload; widgets whose value is not in the link) is not in a link: an
upload's page says so in its share box (``register(…, upload=…)``), other widgets take their
defaults. Expensive views (repetitions, every model's curves) are built once per link: the page is
then served from the snapshot folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from hsc_core.core.rule_registry import rule_label, rule_names

from . import catalog, evaluation_cache, evaluations, headlines, page_sentences, session_keys, views, widgets
from .snapshot import Snapshot, Unavailable, register
from .snapshot_views import (
    caption_of,
    context_of,
    font_size,
    model_of,
    model_stamp,
    settings,
    text_lines,
)

#: The θ̂ rule of the Guaranteed accuracy page's one split when the link does not say (its radio's first option).
DEFAULT_QUANTILE: Literal["order_statistic"] = "order_statistic"
#: The repetitions' baselines the Guaranteed accuracy page opens with.
DEFAULT_BASELINES = ("darts", "crc")


# ---------------------------------------------------------------------------- Guaranteed accuracy
@register("guaranteed_accuracy", stamp=model_stamp)
def guaranteed_accuracy(params: Mapping[str, str]) -> Snapshot:
    """One split's θ̂, ε and test numbers (the page's sentence and metrics) and the repetitions'
    histogram (the link's count, the page's default baselines) for the link's requirement."""
    from hsc_core.core.thresholds import theorem1_epsilon
    from hsc_core.evaluation.repeated_splits import split_repetitions
    from hsc_core.report.guarantee_figures import accuracy_histogram

    values = settings(params)
    es = context_of(values)
    n_all = es.view.n
    if n_all < 40:
        raise Unavailable(f"Only {n_all} samples: too few to split into calibration and test sets.")
    target, confidence = float(values["acc"]), float(values["conf"])
    alpha, delta = round(1.0 - target, 6), round(1.0 - confidence, 6)
    n = int(min(max(10, int(values["n"])), max(20, int(n_all * 0.9))))  # the page's slider range
    seed, method, reps = int(values["split_seed"]), str(values["split_method"]), int(values["reps"])
    options: dict[str, Any] = {"quantile": DEFAULT_QUANTILE, **({"min_coverage": 0.5} if method == "ltt_multi" else {})}
    try:
        split = es.view.threshold(target, method, delta=delta, n=n, seed=seed, **options)
    except ValueError as exc:
        raise Unavailable(f"Cannot calibrate: {widgets.public_message(exc)}") from exc
    eps = theorem1_epsilon(n, alpha, delta)
    numbers = [headlines.guarantee_headline(split, confidence), "",
               *(f"**{label}**: {value}" + (f" ({d})" if d else "")
                 for label, value, d, _ in headlines.guarantee_metrics(split, eps)),
               f"One split: {split.n_cal:,} calibration / {split.n_test:,} test samples (seed {seed}), {split.label}."]
    df = split_repetitions(es.view.guarantee_data(), [alpha], n, reps, seed=seed, method=DEFAULT_QUANTILE,
                           baselines=DEFAULT_BASELINES)
    fig = accuracy_histogram(df, target, eps)
    return Snapshot("Guaranteed accuracy", text_lines(numbers), (fig,), caption=caption_of(es),
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Compare models
def _all_models(values: Mapping[str, Any]) -> dict[str, str]:
    """The shipped models (name → file), and the link's model on the link's corrupted images."""
    cat = dict(catalog.model_catalog())
    if not cat:
        raise Unavailable("There are no models in the cached-logits folder any more.")
    name = values["model"] if values["model"] in cat else catalog.default_model(cat)
    shifts = catalog.shift_catalog(name)
    return {**cat, **{Path(shifts[k]).stem: shifts[k] for k in values["shifts"] if k in shifts}}


def compare_stamp(params: Mapping[str, str]) -> str:
    """Every compared model file's stamp, and the subset and TS setting."""
    values = settings(params)
    models = _all_models(values)
    return json.dumps([[m, catalog.stamp(loc)] for m, loc in sorted(models.items())]
                      + [values["subset"], bool(values["ts"])])


@register("compare_models", stamp=compare_stamp)
def compare_models(params: Mapping[str, str]) -> Snapshot:
    """The chart's rule's curve of every model (``figures.compare_figure``), the page's sentence and
    each model's hAURC and gain for that rule."""
    values = settings(params)
    rule, loss = values["cmp_rule"], values["loss"]
    dec = None if values["dec"] == "exact" else 2
    from hsc_core.report.figures import compare_figure

    table_rules = tuple(r for r in rule_names() if r in values["rules"] or r in ("selective", rule))  # the page's
    compared, lines = {}, []
    for name, location in _all_models(values).items():
        try:  # the live page's kept content (evaluation_cache.compared_model), so the numbers are the same
            compared[name] = evaluation_cache.compared_model(name, location, values["subset"], bool(values["ts"]),
                                                             loss, dec, rule, table_rules)
        except catalog.LOAD_ERRORS:
            lines.append(f"**{widgets.plain(name)}** is left out (its file cannot be loaded).")
    if not compared:
        raise Unavailable("None of the compared models can be loaded any more.")
    rows = [{r["metric"]: r["value"] for r in c.rows if r["rule"] == rule and r["loss"] == loss}
            for c in compared.values()]
    lines = [f"**{widgets.plain(name)}**: hAURC×1000 {1000 * row['haurc']:.3f}, gain {row['gain_percent']:.2f} %"
             for name, row in zip(compared, rows, strict=True)] + lines
    head = headlines.compare_headline({widgets.plain(m): c.haurc for m, c in compared.items()}, rule_label(rule))
    fig = compare_figure({m: (c.coverage, c.risk) for m, c in compared.items()},
                         {m: c.haurc for m, c in compared.items()}, loss)
    caption = (f"{len(compared)} model(s) · subset *{widgets.plain(values['subset'])}* · "
               + ("temperature scaling on (each model's own T)" if values["ts"] else "no temperature scaling")
               + " · the shipped models (uploads are not in links)")
    return Snapshot("Compare models", head + "  \n  \n" + text_lines(lines), (fig,), caption=caption,
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Where it stops
@register("where_in_tree", stamp=model_stamp)
def where_in_tree(params: Mapping[str, str]) -> Snapshot:
    """Where the link's rule stops at its θ: the page's sentence, the busiest nodes and the
    sunburst/icicle (``tree_map_figure``), rooted at the link's node as on the page."""
    from hsc_core.evaluation.diagnostics import landing_counts, wedge_nodes
    from hsc_core.report.diagnostics_figures import tree_map_figure

    values = settings(params)
    es = context_of(values)
    h, rule = es.view.hierarchy, values["cmp_rule"]
    theta = round(float(values["theta"]), 2)
    picked = None
    if values["node"] is not None:
        try:
            picked = h.index_of(values["node"])
        except (KeyError, ValueError):
            picked = None  # the page shows the root then, too
    focus = h.root if picked is None else (picked if picked >= h.n_leaves else int(h.parent[picked]))
    table = landing_counts(h, es.view.decision_paths(rule), es.view.labels, theta)
    per_node = table.reindex(range(h.n_nodes), fill_value=0)
    sentence = headlines.where_headline(per_node["stops"].to_numpy(), per_node["stops_correct"].to_numpy(),
                                        h.leaf_count, rule_label(rule), theta)
    busiest = table["stops"].sort_values(ascending=False, kind="stable").head(5)
    lines = [sentence, "", "**Where most predictions land**"]
    lines += [f"{widgets.plain(views.node_name(h, int(v)))}: {int(c):,}" for v, c in busiest.items() if c > 0]
    nodes = wedge_nodes(h, table["samples"].to_numpy(), focus)
    fig = tree_map_figure(table, nodes, colour_by=values["wcolour"], kind=values["wkind"],
                          font_size=font_size(values["presenter"]), height=430 if values["presenter"] else 560)
    return Snapshot("Where the model stops", text_lines(lines), (fig,), caption=caption_of(es),
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Hierarchy sensitivity
@register("hierarchy_sensitivity", stamp=model_stamp)
def hierarchy_sensitivity(params: Mapping[str, str]) -> Snapshot:
    """Each chosen tree's hAURC and gain (with the page's 95 % intervals) and its gain chart."""
    from hsc_core.datasets.imagenet_trees import TREES
    from hsc_core.evaluation.sensitivity import sensitivity_table
    from hsc_core.report.figures import gain_figure

    values = settings(params)
    es = context_of(values)
    if es.dataset.name != catalog.IMAGENET:
        raise Unavailable("The built-in alternative trees are ImageNet-1k's; this model's data set is another.")
    trees = [t for t in TREES if t in values["trees"]]
    if not trees:
        raise Unavailable("This snapshot's link selects no tree.")
    table = sensitivity_table(evaluation_cache.sensitivity_rows(es, tuple(trees)))
    lines = [f"**{widgets.plain(TREES[d['tree']].label)} · {rule_label(d['rule'])}**: hAURC×1000 "
             f"{d['haurc_x1000']:.2f}" + ("" if d["rule"] == "selective" else f", gain {d['gain_percent']:.2f} % "
                                          f"({d['gain_percent_low']:.2f} to {d['gain_percent_high']:.2f})")
             for d in table]
    fig = gain_figure(views.sensitivity_gains(table))
    lines = [page_sentences.sensitivity(table, trees), ""] + lines
    return Snapshot("Hierarchy sensitivity", text_lines(lines), (fig,), caption=caption_of(es),
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Model atlas
def _atlas_source(values: Mapping[str, Any]) -> tuple[str | None, Path | None]:
    """(name, path) of the link's results table in the results folder, or (None, None) for none."""
    from . import atlas

    files = atlas.table_files()
    chosen = values["atlas"]
    if chosen is None and files:
        chosen = next((f for f in files if "models_comparison" in f), files[0])
    if chosen is None or chosen.startswith("(none"):
        return None, None
    if chosen not in files:  # the folder's own listing: a link can never name another path
        raise Unavailable("The results table this snapshot showed is not in the results folder any more.")
    folder = atlas.results_folder()
    assert folder is not None
    return chosen, folder / chosen


def atlas_stamp(params: Mapping[str, str]) -> str:
    """The results table's name, size and time, and every shipped model's stamp (the stars)."""
    values = settings(params)
    name, path = _atlas_source(values)
    stat = path.stat() if path is not None else None
    return json.dumps([name, [stat.st_size, stat.st_mtime_ns] if stat else None, values["subset"],
                       [[m, catalog.stamp(loc)] for m, loc in sorted(catalog.model_catalog().items())]])


@register("model_atlas", stamp=atlas_stamp, upload=session_keys.ATLAS_UPLOAD)
def model_atlas(params: Mapping[str, str]) -> Snapshot:
    """The atlas of the link's results table (or the shipped models only), its sentence and chart."""
    import pandas as pd

    from hsc_core.evaluation.atlas import PLAIN, REGIMES, regime_summary
    from hsc_core.report.atlas_figure import atlas_figure

    from . import atlas

    values = settings(params)
    rule = values["cmp_rule"] if values["cmp_rule"] in rule_names(paper=True) else "climbing"
    loss, ts, y, regime = values["loss"], bool(values["ts"]), values["atlas_y"], values["regime"]
    name, _ = _atlas_source(values)
    yours, _ = atlas.your_models(values["subset"])
    if name is not None:
        try:
            table, source = atlas.table_from_folder(name), name
        except ValueError as exc:
            raise Unavailable(widgets.public_message(exc)) from exc
    elif not yours.empty:
        table, source, yours = yours, "your models", pd.DataFrame()
    else:
        raise Unavailable("There is no results table and no shipped model to place.")
    shown = table if regime == "all" else table[table["regimes"].str.split(";").map(lambda ks: regime in ks)]
    lead = headlines.atlas_headline(regime_summary(shown, rule=atlas.gain_rule(rule), loss=loss, ts=ts),
                                    len(shown), rule_label(atlas.gain_rule(rule)))
    regimes = {"all": "all regimes", **{r.key: r.label for r in (*REGIMES, PLAIN)}}  # the page's names
    caption = (f"**{len(table):,} models** from *{widgets.plain(source)}* · {regimes.get(regime, regime)} · "
               f"{rule_label(rule)}, {'with' if ts else 'without'} TS")
    fig = atlas_figure(shown, rule=atlas.chart_rule(rule, y), loss=loss, ts=ts, y=y,
                       yours=yours if not yours.empty else None, font_size=font_size(values["presenter"]),
                       height=440 if values["presenter"] else 520)
    if values["presenter"]:
        fig.update_layout(**atlas.presenter_layout(font_size(True)))
    return Snapshot("Model atlas", lead, (fig,), caption=caption, presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Per-rank thresholds
def per_rank_stamp(params: Mapping[str, str]) -> str:
    """The shipped example table's size and time (an upload is not in links)."""
    from hsc_core.datasets.per_rank import EXAMPLE

    stat = EXAMPLE.stat()
    return json.dumps([EXAMPLE.name, stat.st_size, stat.st_mtime_ns])


@register("per_rank", stamp=per_rank_stamp, upload=session_keys.PER_RANK_UPLOAD)
def per_rank(params: Mapping[str, str]) -> Snapshot:
    """The shipped example's card at the link's target, δ and quantity: the page's verdict, each rank's θ, and
    its two figures."""
    from . import per_rank as pr

    values = settings(params)
    scores, source, digest = pr.load_scores(None, None, False)
    target, delta = float(values["r_acc"]), float(values["r_delta"])
    card = pr.card_for(scores, digest, source, target, delta, values["r_quantity"])
    lines = [f"**{scores.n:,} samples** from *{widgets.plain(source)}* · ranks "
             + " → ".join(widgets.plain(r) for r in scores.ranks), "", page_sentences.per_rank(card, target, delta), "",
                                                            pr.verdict(card, target, delta, scores.n), ""]
    lines += [", ".join(f"{k} {widgets.plain(str(val))}" for k, val in row.items()) for row in pr.thetas_rows(card)]
    font = font_size(values["presenter"])
    return Snapshot("Per-rank thresholds", text_lines(lines), (pr.rc_figure(scores, font), pr.stops_figure(card, font)),
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Calibrators
@register("calibrators", stamp=compare_stamp)
def calibrators(params: Mapping[str, str]) -> Snapshot:
    """The benchmark table of the link's calibrators, scores, rule and intervals (``c_cals``,
    ``c_scores``, ``c_rule``, ``c_ci``) for the link's model or, with ``c_scope=all``, every shipped
    model, as text (the page's cells: ★ marks each column's best)."""
    from . import calibrators as cal

    values = settings(params)
    chosen_cals, chosen_scores = tuple(values["c_cals"]), tuple(values["c_scores"])
    if not chosen_cals or not chosen_scores:
        raise Unavailable("This link selects no calibrator or no confidence score.")
    name, location = model_of(values)
    models, left_out = (({name: location}, None) if values["c_scope"] == "model"
                        else cal.scope_models(_all_models(values)))
    contexts, lines = [], [left_out] if left_out else []
    for model, path in models.items():
        try:  # the page fits with TS on
            contexts.append(evaluations.model_context(model, path, values["subset"], True))
        except catalog.LOAD_ERRORS:
            lines.append(f"**{widgets.plain(model)}** is left out (its file cannot be loaded).")
    if not contexts:
        raise Unavailable("The model this snapshot showed cannot be loaded any more.")
    sets, rule = [es.view.evaluation for es in contexts], values["c_rule"]
    try:
        bench = cal.benchmark(sets, chosen_cals, chosen_scores, rule, bool(values["c_ci"]))
    except ValueError as exc:
        raise Unavailable(str(exc)) from exc
    rows = bench.rows
    if not rows:
        raise Unavailable(" ".join(bench.refused) or "This link's choice is more than one run may compute.")
    table = cal.shown_table(rows)
    lines += [widgets.plain(note) for note in (*bench.refused, cal.left_note(bench)) if note]
    head = [page_sentences.calibrators(rows), "", f"**Rule**: {rule_label(rule)}"]
    for rec in table.to_dict("records"):  # one line per pair, the page's cells (★: the column's best)
        pair = f"**{widgets.plain(str(rec.pop('calibrator', '')))} · {widgets.plain(str(rec.pop('confidence', '')))}**"
        model = rec.pop("model", None)
        prefix = f"{widgets.plain(str(model))}: " if len(sets) > 1 and model is not None else ""
        head.append(prefix + pair + ": " + ", ".join(f"{k} {widgets.plain(str(val))}" for k, val in rec.items()))
    caption = (caption_of(contexts[0]) if len(contexts) == 1
               else f"{len(contexts)} models · the shipped models (uploads are not in links)")
    return Snapshot("Calibrators and confidence scores", text_lines(head + lines), (), caption=caption,
                    presenter=bool(values["presenter"]))


# ---------------------------------------------------------------------------- Monitor
@register("monitor", stamp=model_stamp)
def monitor(params: Mapping[str, str]) -> Snapshot:
    """The link's stream and promise played to its time (``m_t``; 0: the end): the page's sentence,
    its figure and the whole stream's verdict."""
    from hsc_core.evaluation.monitor import shift_names

    from . import monitor as mon

    values = settings(params)
    es = context_of(values)
    stream = str(values["m_stream"])
    shifts = shift_names(es.model)
    if stream != mon.IN_ORDER and stream not in shifts:
        stream = shifts[0] if shifts else mon.IN_ORDER
    try:
        res = mon.run(es, float(values["m_acc"]), float(values["m_delta"]), stream, int(values["m_n"]),
                      int(values["m_labels"]), str(values["m_adapt"]))
    except ValueError as exc:
        raise Unavailable(str(exc)) from None
    n = len(res.frame)
    at = min(n, int(values["m_t"]) or n)
    t = min(mon.play_times(res), key=lambda tt: abs(tt - at))
    return Snapshot("Monitor", "", (mon.figure(res, t, font_size(values["presenter"])),),
                    caption=f"Verdict over the whole stream: {res.verdict}.", presenter=bool(values["presenter"]),
                    theta_texts=mon.sentences(res), theta=str(t), param="m_t")
