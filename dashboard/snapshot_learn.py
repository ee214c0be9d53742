"""The Learn section's snapshots (``snapshot``): the guided story's steps and Try an image, each
drawn by the figure functions its live page calls (the other pages: ``snapshot_views``,
``snapshot_pages``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np

from hsc_core.core.rule_registry import rule_label

from . import catalog, evaluations, navigation, page_sentences, plots, views, widgets
from .snapshot import Snapshot, Unavailable, register
from .snapshot_views import (
    SNAPSHOT_WIDTH,
    caption_of,
    context_of,
    font_size,
    model_stamp,
    sample_image,
    settings,
    text_lines,
    theta_markdown,
)

#: Try an image's uploader (a public widget key of that page).
IMAGE_UPLOAD = "img_upload"


# ---------------------------------------------------------------------------- Try an image
def _shipped_image(values: Mapping[str, Any]) -> tuple[str, Path]:
    from hsc_core.datasets.imagenet import default_image_dir

    folder = default_image_dir()
    files = [] if folder is None else sorted(p.name for p in folder.iterdir()
                                             if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
    name = values["timg"] if values["timg"] is not None else (files[0] if files else None)  # as the page opens
    if folder is None or name not in files:  # the folder's own listing: a link can never name another path
        raise Unavailable("The image this snapshot showed is not among the shipped validation images any more.")
    return name, folder / name


def _image_model(values: Mapping[str, Any]) -> str:
    from .perturb import registered_models

    models = registered_models()
    if not models:
        raise Unavailable("No registered models: the image classifier cannot run.")
    if values["tmodel"] in models:
        return values["tmodel"]
    return values["model"] if values["model"] in models else models[0]  # as the page picks


def image_stamp(params: Mapping[str, str]) -> str:
    """The shipped image's name, size and time, the classifier, its cached logits' stamp and TS."""
    from . import perturb

    if not perturb.pipeline_installed():
        raise Unavailable("Classifying an image needs PyTorch and timm, which are not installed here.")
    values = settings(params)
    name, path = _shipped_image(values)
    model = _image_model(values)
    location = catalog.model_catalog().get(model)
    stat = path.stat()
    return json.dumps([name, stat.st_size, stat.st_mtime_ns, model,
                       catalog.stamp(location) if location else None, bool(values["ts"])])


@register("try_an_image", stamp=image_stamp, upload=IMAGE_UPLOAD)
def try_an_image(params: Mapping[str, str]) -> Snapshot:
    """The shipped image, its top-5 classes and every rule's pick at the link's θ, and its tree with
    the θ frames (the page's ``tree_figure`` call), degraded as the link says."""
    from hsc_core.core.probabilities import softmax
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.datasets.images import ImageReadError, display_image, open_image_safely
    from hsc_core.evaluation import subsets
    from hsc_core.report.tree_figure import record_rows, tree_figure

    from . import perturb

    values = settings(params)
    name, path = _shipped_image(values)
    model = _image_model(values)
    data = path.read_bytes()
    try:
        rgb = open_image_safely(data, name=name)
    except ImageReadError as exc:
        raise Unavailable(widgets.public_message(exc)) from exc
    logits = perturb.image_logits(data, rgb, model, shipped=True)  # the page's, kept on disk
    h = imagenet_hierarchy()
    t, t_note, location = 1.0, "no temperature scaling", catalog.model_catalog().get(model)
    if values["ts"] and location is not None:
        t, n_fit = evaluations.temperature(location, subsets.ALL)
        t_note = f"T = {t:.3f} fitted on the 10 % calibration split of {model}'s cached logits ({n_fit:,} samples)"
    leaf_probs = softmax(np.asarray(logits, dtype=np.float64)[None, :], t)[0]
    true_leaf = catalog.sample_label(location, name)
    kind, severity = values["degrade"], int(values["severity"])
    row = perturb.node_row(h, logits, t)
    if kind != "none":
        row = perturb.node_row(h, perturb.degraded_sweep(perturb.digest_of(data), data, model, kind)[0][severity], t)
    theta = round(float(values["theta"]), 2)
    fig = tree_figure(h, row, record_rows(views.single_sample_paths(h, row), 0), true_leaf, theta,
                      font_size=font_size(values["presenter"]), max_width=SNAPSHOT_WIDTH)
    top = np.argsort(-leaf_probs)[:5]
    lines = [page_sentences.climb(h, perturb.node_row(h, logits, t), int(np.argmax(leaf_probs)), true_leaf), ""]
    lines += ([f"**True class:** {widgets.plain(views.node_name(h, true_leaf))}"] if true_leaf is not None else [])
    lines += [f"**Top-5** ({t_note})"]
    lines += [f"{k + 1}. {widgets.plain(views.node_name(h, int(v)))}: {leaf_probs[v]:.4f}" for k, v in enumerate(top)]
    if kind != "none":
        lines.append(f"Degraded: {perturb.KINDS[kind]}, severity {severity}.")
    paths = views.single_sample_paths(h, row)
    texts = theta_markdown(lambda th: f"**Every rule's pick at θ = {th:.2f}**  \n" + views.choice_text(
        h, views.sample_view(h, row, paths, 0, th, true_leaf=true_leaf)))
    preview = _jpeg(display_image(rgb, max_side=512))
    return Snapshot("Try an image", text_lines(lines), (fig,), caption=f"{model} · {name}", image=preview,
                    image_caption=name, presenter=bool(values["presenter"]), theta_texts=texts, theta=f"{theta:.2f}")


def _jpeg(image) -> bytes:
    import io

    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


# ---------------------------------------------------------------------------- Guided story
@register("story", stamp=model_stamp)
def story(params: Mapping[str, str]) -> Snapshot:
    """The link's step of the story on its example sample (θ = 0.5, as each step opens): the
    step's numbers and its chart (the same figure calls as the page)."""
    from hsc_core.report.figures import leaf_bars_figure
    from hsc_core.report.tree_figure import record_rows, tree_figure

    values = settings(params)
    es = context_of(values)
    v, h = es.view, es.view.hierarchy
    step, theta, font = int(values["step"]), views.FIGURE1_THETA, font_size(values["presenter"])
    title = f"Guided story · {step}. {navigation.STORY_STEPS[step]}"
    sentence = page_sentences.story(v) + "  \n  \n"
    if step == 5:
        return _story_guarantee(es, values, title, sentence)
    if step == 4:
        cs = evaluations.curve_set(es, "01", None)
        sel, climb = cs.curves["selective"].haurc, cs.curves["climbing"].haurc
        text = sentence + (f"Over all {v.n:,} samples, the area under the curve (hAURC) is {1000 * sel:.1f} ×10⁻³ for "
                f"{rule_label('selective')} and {1000 * climb:.1f} ×10⁻³ for {rule_label('climbing')}.")
        fig = plots.rc_sweep(cs, ("selective", "climbing"), "01", font, None, theta)
        return Snapshot(title, text, (fig,), caption=caption_of(es), presenter=bool(values["presenter"]))
    i = views.figure1_example(h, cast(np.ndarray, es.node_probs), v.paths, v.labels, v.leaf_pred, v.leaf_conf)
    if i is None:
        raise Unavailable("This model has no unsure, wrong top-1 prediction that Climbing corrects at θ = 0.5.")
    true, pred = int(v.labels[i]), int(v.leaf_pred[i])
    text = sentence + widgets.sample_headline(h, true, pred, float(v.leaf_conf[i]))
    if step == 1:
        leaf_p = es.node_probs[i, : h.n_leaves]
        top = np.argsort(-leaf_p, kind="stable")[:5]
        fig = leaf_bars_figure([views.node_name(h, k) for k in top], leaf_p[top], top == true, font)
    else:
        rules = ("selective",) if step == 2 else ("selective", "climbing")
        fig = tree_figure(h, v.node_row(i), record_rows(v.paths, i), true, theta, font_size=font, rules=rules,
                          max_width=SNAPSHOT_WIDTH)
        picks = views.sample_view(h, v.node_row(i), views.selected_paths(v, rules), i, theta, true_leaf=true)
        text += f"  \n  \n**At θ = {theta:.2f}**  \n" + views.choice_text(h, picks)
    image, image_caption = sample_image(es, str(v.sample_ids[i]))
    return Snapshot(title, text, (fig,), caption=caption_of(es), image=image, image_caption=image_caption,
                    presenter=bool(values["presenter"]))


def _story_guarantee(es: evaluations.ModelContext, values: Mapping[str, Any], title: str,
                     sentence: str) -> Snapshot:
    from hsc_core.core.thresholds import theorem1_epsilon

    from . import state

    target = state.SETTINGS["acc"].default
    delta = round(1 - state.SETTINGS["conf"].default, 6)
    n_cal = int(min(max(10, int(state.SETTINGS["n"].default)), max(20, int(es.view.n * 0.9))))
    split = es.view.threshold(target, "theorem1", delta=delta, n=n_cal, seed=int(state.SETTINGS["split_seed"].default))
    eps = theorem1_epsilon(n_cal, round(1 - target, 6), delta)
    text = sentence + text_lines([f"Calibrated on **{n_cal:,}** samples for accuracy **{target:.0%}** with confidence "
                   f"**{1 - delta:.0%}**:", f"**θ̂**: {split.theta:.3f}", f"**ε (Theorem 1)**: {eps:.4f}",
                   f"**accuracy on the other {split.n_test:,}**: {split.test_accuracy:.1%} "
                   f"({split.test_accuracy - target:+.1%} vs target)", f"**coverage**: {split.test_coverage:.3f}"])
    return Snapshot(title, text, (), caption=caption_of(es), presenter=bool(values["presenter"]))
