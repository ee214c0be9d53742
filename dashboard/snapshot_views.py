"""The pages' snapshots (``snapshot``): how each page builds its static view from its link's query
parameters, and the share links the live pages show.

A builder reads the link's parameters through the same ``state.SETTINGS`` parsers a session uses
(an invalid value falls back to its default, as in a session) and draws with the same functions
as its live page (``plots.explorer_tree``, ``plots.rc_sweep``, ``views``' texts), so a snapshot shows
the live page's numbers. A page gets snapshot links by registering a builder here
(``@snapshot.register(url_path, stamp=…)``); ``share_link`` then works for it and the sidebar
offers it (``share_box``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.evaluation import column_label
from hsc_core.report import style

from . import catalog, evaluations, page_sentences, plots, state, views, widgets
from .snapshot import BUILDERS, Snapshot, Unavailable, View, default_store, register

#: Pages whose swept view (``sweep.swept_chart``) offers the view's one share link, with the θ (or t) on screen;
#: the sidebar offers none for them.
THETA_PAGES = frozenset({"explorer", "risk_coverage", "try_an_image", "monitor"})
#: The share box's words while a page shows an uploaded file.
UPLOAD_NOTE = ("No snapshot link while this page shows an uploaded file: uploads are not in links (they stay in "
               "this session only). Without the upload, the page's link works again.")
#: The width (px) a snapshot's chart is drawn for: the page's figure column at 1280 px.
SNAPSHOT_WIDTH = 900


store = default_store  # the snapshot folder (``HSC_SNAPSHOT_DIR``)


def settings(params: Mapping[str, str]) -> dict[str, Any]:
    """Every setting's value from a link's ``params``, parsed as a session parses its link: an
    invalid or missing value gives the default; a list is cut to its cap."""
    out: dict[str, Any] = {}
    for key, setting in state.SETTINGS.items():
        default = list(setting.default) if isinstance(setting.default, list) else setting.default
        raw = params.get(key)
        if raw is None:
            out[key] = default
            continue
        raw, _ = state.capped_list(key, raw, setting.max_items)
        try:
            out[key] = setting.parse(raw)
        except state.Invalid:
            out[key] = default
    return out


def text_lines(rows: list[str]) -> str:
    """Markdown lines as one headline text (a hard line break between them)."""
    return "  \n".join(rows)


def theta_markdown(markdown_at) -> dict[str, str]:
    """A θ-swept view's θ-dependent text (markdown) at every θ of its frames, by frame name."""
    from hsc_core.report.tree_figure import THETA_GRID

    return {f"{t:.2f}": markdown_at(float(t)) for t in THETA_GRID}


def current_params() -> dict[str, str]:
    """This session's settings as a link's query parameters (what ``state.write_query_params`` writes)."""
    return {k: s.encode(v) for k, s in state.SETTINGS.items() if (v := state.get(k)) is not None}


# ---------------------------------------------------------------------------- the model a link names
def model_of(values: Mapping[str, Any]) -> tuple[str, str]:
    """(name, location) of the link's model (a shipped file: uploads live in their session only),
    on its ``shift``'s images; Unavailable when the folder has no such model."""
    cat = catalog.model_catalog()
    name = values["model"] if values["model"] is not None else catalog.default_model(cat)
    if name not in cat:
        raise Unavailable("The model this snapshot showed is not in the cached-logits folder any more.")
    found_name, location = catalog.shifted_model(name, cat[name], values["shift"])
    assert found_name is not None and location is not None
    return found_name, location


def model_stamp(params: Mapping[str, str]) -> str:
    """A cheap stamp of the data a model page shows: the model file's (and shift file's) name, size
    and modification time, the subset and TS setting. A replaced file changes it."""
    values = settings(params)
    name, location = model_of(values)
    return json.dumps([name, catalog.stamp(location), values["subset"], bool(values["ts"])])


def context_of(values: Mapping[str, Any]) -> evaluations.ModelContext:
    """The evaluation samples of the link's model (``model_of``); Unavailable when it cannot be loaded."""
    name, location = model_of(values)
    try:
        return evaluations.model_context(name, location, values["subset"], bool(values["ts"]))
    except catalog.LOAD_ERRORS as exc:
        raise Unavailable("The model this snapshot showed cannot be loaded any more.") from exc


def font_size(presenter: bool) -> int:
    """The figures' font size (px) in presenter mode or not, as the live pages set it."""
    return style.PRESENTER_FONT_SIZE if presenter else style.BASE_FONT_SIZE


def sample_image(es: evaluations.ModelContext, sample: str) -> tuple[bytes | None, str]:
    """The sample's image as JPEG bytes (read as the live page reads it), and its caption."""
    from hsc_core.datasets.images import ImageReadError, display_image, open_image_safely, safe_image_path

    path = safe_image_path(es.image_dir, sample) if es.image_dir is not None else None
    if path is None:
        return None, f"Sample {sample} (no image)"
    try:
        image = display_image(open_image_safely(path), max_side=512)
    except ImageReadError:
        return None, f"Sample {sample} (its image file cannot be read)"
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=85)
    return buf.getvalue(), sample


# ---------------------------------------------------------------------------- the pages' builders
@register("explorer", stamp=model_stamp)
def explorer(params: Mapping[str, str]) -> Snapshot:
    """The Explorer's view: the link's sample as the tree with its θ frames, the true class and top-1
    leaf, and every rule's pick at the link's θ."""
    values = settings(params)
    es = context_of(values)
    sample = values["sample"]
    if sample not in es.view.id_index:
        raise Unavailable("The sample this snapshot showed is not among the model's evaluation samples.")
    i = es.view.id_index[sample]
    theta = round(float(values["theta"]), 2)
    h = es.view.hierarchy
    true_leaf, pred_leaf = int(es.view.labels[i]), int(es.view.leaf_pred[i])
    rules = tuple(values["rules"])
    fig = plots.explorer_tree(es, i, font_size(values["presenter"]), None, SNAPSHOT_WIDTH, theta, rules)
    paths = views.selected_paths(es.view, rules)
    image, image_caption = sample_image(es, sample)
    headline = (page_sentences.climb(h, es.view.node_row(i), pred_leaf, true_leaf) + "  \n  \n"
                + widgets.sample_headline(h, true_leaf, pred_leaf, float(es.view.leaf_conf[i])))
    texts = theta_markdown(lambda th: f"**Every rule's pick at θ = {th:.2f}**  \n" + views.choice_text(
        h, views.sample_view(h, es.view.node_row(i), paths, i, th, true_leaf=true_leaf)))
    return Snapshot("Explorer", headline, (fig,), caption=caption_of(es), image=image, image_caption=image_caption,
                    presenter=bool(values["presenter"]), theta_texts=texts, theta=f"{theta:.2f}")


@register("risk_coverage", stamp=model_stamp)
def risk_coverage(params: Mapping[str, str]) -> Snapshot:
    """Risk–Coverage's view: the curves with their θ frames, the operating points at the link's θ
    and each rule's hAURC."""
    values = settings(params)
    es = context_of(values)
    rules = [r for r in rule_names() if r in values["rules"]]
    if not rules:
        raise Unavailable("This snapshot's link selects no rule.")
    loss = values["loss"]
    dec = None if values["dec"] == "exact" else 2
    theta = round(float(values["theta"]), 2)
    cs = evaluations.curve_set(es, loss, dec)
    fig = plots.rc_sweep(cs, tuple(rules), loss, font_size(values["presenter"]), None, theta)
    table = cs.haurc_table(rules)
    areas = "  \n".join(f"**{row['rule']}**: hAURC×1000 {row[column_label('haurc')]:.3f}, "
                        f"gain {row[column_label('gain_percent')]:.2f} %" for row in table.to_dict("records"))
    headline = (page_sentences.risk_coverage(cs, rules, loss) + "  \n  \n**Area under the curves**  \n" + areas)
    texts = theta_markdown(lambda th: f"**Operating points** (θ = {th:.2f})  \n"
                                      + views.operating_point_text(views.operating_points(cs, th, rules)))
    return Snapshot("Risk–coverage", headline, (fig,), caption=caption_of(es), presenter=bool(values["presenter"]),
                    theta_texts=texts, theta=f"{theta:.2f}")


@register("calibration_coverage", stamp=model_stamp)
def calibration_coverage(params: Mapping[str, str]) -> Snapshot:
    """Calibration–Coverage's view: the ECE curves of the link's rules and bins, and the page's
    summary table as text (4 decimals, as the page's table shows them)."""
    from hsc_core.report.figures import cc_figure

    values = settings(params)
    es = context_of(values)
    rules = [r for r in rule_names() if r in values["rules"]]
    if not rules:
        raise Unavailable("This snapshot's link selects no rule.")
    bins = int(values["bins"])
    fig = cc_figure(evaluations.cc_curves(es, bins), rules)
    lines, summary = [], es.view.cc_summary(rules, bins)
    for row in summary:  # the layer's numbers, as the page's table
        cells = [f"{k} {v:.4f}" for k, v in row.items() if k != "rule" and isinstance(v, (int, float))]
        lines.append(f"**{rule_label(row['rule'])}**: " + ", ".join(cells))
    headline = (page_sentences.calibration_coverage(summary) + "  \n  \n"
                + f"**Calibration–coverage summary** ({bins} bins)  \n" + "  \n".join(lines))
    return Snapshot("Calibration–coverage", headline, (fig,), caption=caption_of(es),
                    presenter=bool(values["presenter"]))


def _overview_model(values: Mapping[str, Any]) -> tuple[str, str]:
    # The Overview shows the picked model itself (never its copy on shifted images).
    cat = catalog.model_catalog()
    name = values["model"] if values["model"] is not None else catalog.default_model(cat)
    if name not in cat:
        raise Unavailable("The model this snapshot showed is not in the cached-logits folder any more.")
    return name, cat[name]


def overview_stamp(params: Mapping[str, str]) -> str:
    """The Overview's data stamp: its model file's, and the subset."""
    values = settings(params)
    name, location = _overview_model(values)
    return json.dumps([name, catalog.stamp(location), values["subset"]])


def overview(params: Mapping[str, str]) -> Snapshot:
    """The Overview's view of the link's model: the headline (with its 95 % interval, when the live
    page computes it without being asked), the illustration and the gain-interval chart."""
    from hsc_core.report.figures import gain_figure, illustration_figure
    from hsc_core.report.html_report import HEADLINE_RULE, headline_sentence

    from .evaluation_cache import gain_interval, result_rows

    values = settings(params)
    name, location = _overview_model(values)
    subset, shown_presenter = values["subset"], bool(values["presenter"])
    try:
        sets = {ts: evaluations.model_context(name, location, subset, ts) for ts in (True, False)}
    except catalog.LOAD_ERRORS as exc:
        raise Unavailable("The model this snapshot showed cannot be loaded any more.") from exc
    on = sets[True]
    figures = [illustration_figure(on.view.hierarchy)]
    title = "Hierarchical Selective Classification"
    if evaluations.intervals_on_request(on):  # the live page waits for a click: no interval here either
        return Snapshot(title, "Open the live page for the 95 % intervals.", tuple(figures), caption=caption_of(on),
                        presenter=shown_presenter)
    sentences = [headline_sentence(name, on.dataset.name, on.view.n, ts,
                                   gain_interval(name, location, subset, ts, HEADLINE_RULE)) for ts in (True, False)]
    lines = [f"**{widgets.plain(sentence)}**" for sentence in sentences]
    # The live page's gain chart without "intervals for every model": the picked model's rows only.
    gains = views.gain_intervals([r for ts in (False, True) for r in result_rows(name, location, subset, ts, True)])
    lines += [widgets.plain(f"{g['label']}: gain {g['estimate']:.2f} % (95 % interval {g['low']:.2f} to "
                            f"{g['high']:.2f})") for g in gains]
    figures.append(gain_figure(gains))
    return Snapshot(title, "  \n".join(lines), tuple(figures), caption=caption_of(on), presenter=shown_presenter)


for _page in ("", "overview"):  # the default page at "/" and its twin "/overview"
    register(_page, stamp=overview_stamp)(overview)


def caption_of(es: evaluations.ModelContext) -> str:
    """The live pages' caption of the evaluation samples (``sidebar.eval_caption``)."""
    from .sidebar import eval_caption

    return eval_caption(es)


# ---------------------------------------------------------------------------- the live pages' links
def share_link(page: str, params: Mapping[str, str] | None = None) -> str | None:
    """The snapshot link (``s/<key>``, relative to the app's root) of ``page`` with ``params`` (this
    session's settings by default); the view is kept in the snapshot folder. None when the page
    registered no builder or the view cannot have one (an uploaded model)."""
    builder = BUILDERS.get(page)
    if builder is None:
        return None
    chosen = dict(current_params() if params is None else params)
    try:
        stamp = builder.stamp(chosen)
        key = store().save_view(View(page, chosen, stamp))
    except (Unavailable, *catalog.LOAD_ERRORS):
        return None
    return f"s/{key}"


def shows_upload(page: str, session: Any) -> bool:
    """Whether ``page`` shows an uploaded file in this ``session`` (``st.session_state`` or a dict:
    its uploader, ``Builder.upload``, holds one): a link cannot carry it."""
    builder = BUILDERS.get(page)
    return builder is not None and builder.upload is not None and session.get(builder.upload) is not None


def share_box(page: str) -> None:
    """The sidebar's snapshot link of the page shown (pages with a builder only): a fast, static
    copy of this view, with a button back to the live page."""
    import streamlit as st

    if page not in BUILDERS:
        return
    if shows_upload(page, st.session_state):
        st.sidebar.caption(UPLOAD_NOTE)
        return
    if page in THETA_PAGES:  # the view's own link (🔗 above its chart) carries the θ on screen
        st.sidebar.caption("Share this view: “Link to this view” above the chart (a snapshot at the θ on screen).")
        return
    link = share_link(page)
    with st.sidebar:
        if link is None:
            st.caption("No snapshot link for an uploaded model (it lives in this session only).")
            return
        st.markdown(f"[Snapshot link]({link})",
                    help="A static copy of this view that opens in about a second; its “Open interactive” "
                         "button leads back to the live page.")
