"""One image, live, on the CPU: its Explorer tree at θ (the Explorer's own figure, θ sweep and ▶
Play) and the same image degraded by ImageNet-C blur or noise, severity 0–5, re-run through the
model, with the path climbing as the image gets worse. Used by Try an image and the Explorer.

The pipeline (torch, timm) is imported inside the functions: a page that never degrades an image
never loads it.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.report.perturbation_figure import degradation_figure, picks_by_severity
from hsc_core.report.tree_figure import record_rows, tree_figure

if TYPE_CHECKING:
    from PIL import Image

from . import evaluation_cache, presenter, progress, state, views, widgets
from .sweep import theta_chart, theta_texts

KINDS = {"none": "none", "blur": "Gaussian blur", "noise": "Gaussian noise"}


def node_row(h: Hierarchy, logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Node probabilities of one logits vector as the rules see them (clipped to 1, root = 1)."""
    probs = node_probabilities(h, softmax(np.asarray(logits, dtype=np.float64)[None, :], temperature))[0]
    row = np.minimum(probs, 1.0)
    row[h.root] = 1.0
    return row


@st.cache_data(max_entries=16, show_spinner=False, scope="session")
def sweep(digest: str, _image: bytes, name: str, model: str, kind: str) -> tuple[np.ndarray, list[bytes], float]:
    """``degraded_sweep``, computed once per session (an uploaded image stays in its session)."""
    return degraded_sweep(digest, _image, model, kind)


def degraded_sweep(digest: str, image: bytes, model: str, kind: str) -> tuple[np.ndarray, list[bytes], float]:
    """(logits of severities 0–5, a PNG preview of each, seconds per severity step) of one image
    (``digest``: its SHA-256, which seeds the noise), model and corruption: one batch through the
    network. Uncached: a snapshot (outside any session) calls it too."""
    from hsc_core.pipeline.perturbation import degraded_images, degraded_logits

    start = time.perf_counter()
    images = degraded_images(image, kind, seed=int(digest[:8], 16))
    logits = degraded_logits(images, model)
    per_step = (time.perf_counter() - start) / len(images)
    previews = []
    for im in images:
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        previews.append(buf.getvalue())
    return logits, previews, per_step


def digest_of(image: bytes) -> str:
    return hashlib.sha256(image).hexdigest()


@st.cache_resource(max_entries=32, show_spinner=False, scope="session")
def _tree(key: tuple, _h: Hierarchy, _row: np.ndarray, true_leaf: int | None, theta: float, font_size: int,
          max_height: int | None = None, max_width: int | None = None):
    paths = views.single_sample_paths(_h, _row)
    return tree_figure(_h, _row, record_rows(paths, 0), true_leaf, theta, font_size=font_size,
                       max_height=max_height, max_width=max_width)


@st.cache_resource(max_entries=32, show_spinner=False, scope="session")
def _texts(key: tuple, _h: Hierarchy, _row: np.ndarray, true_leaf: int | None) -> dict[str, str]:
    paths = views.single_sample_paths(_h, _row)
    return theta_texts(lambda th: views.choice_text(_h, views.sample_view(_h, _row, paths, 0, th, true_leaf=true_leaf)))


def tree_chart(h: Hierarchy, row: np.ndarray, true_leaf: int | None, theta: float, *, key: str, name: str,
               context, cache_key: tuple, on_theta: Callable[[float], None], max_height: int | None = None,
               max_width: int | None = None, share_page: str | None = None) -> None:
    """The Explorer's tree of one node-probability row as a θ-swept view (``sweep.theta_chart``: its ▶ Play,
    θ slider, keys and every rule's pick under it), starting at ``theta``; ``max_height``/``max_width``
    (pixels) as ``tree_figure``'s, e.g. presenter mode's screen."""
    fig = _tree((*cache_key, key), h, row, true_leaf, round(float(theta), 2), presenter.font_size(), max_height,
                max_width)
    theta_chart(fig, key=key, theta=theta, on_theta=on_theta, name=name, context=context,
                title="Every rule's pick", texts=_texts((*cache_key, key), h, row, true_leaf), share_page=share_page)


def degrade_controls(key: str) -> tuple[str, int]:
    """The corruption and severity pickers; (kind, severity), severity 0 when not degraded."""
    cols = st.columns([1.3, 1])
    with cols[0]:
        kind = state.bind(st.radio, "Degrade the image", "degrade", scope=key, options=list(KINDS),
                          format_func=KINDS.get, horizontal=True,
                          help="ImageNet-C corruptions (Hendrycks & Dietterich 2019) of the image, re-run through "
                               "the model on the CPU.")
    if kind == "none":
        return kind, 0
    with cols[1]:
        severity = state.bind(st.select_slider, "Severity", "severity", scope=key, options=list(range(6)),
                              help="0 = the image as it is; 5 = ImageNet-C's strongest.")
    return kind, int(severity)


def degraded_logits(image: bytes, image_name: str, model: str, kind: str) -> tuple[np.ndarray, list[bytes], float]:
    """The cached sweep of one image (with a spinner the first time)."""
    with progress.spinner(f"Running {model} on 6 degraded copies on the CPU…"):
        return sweep(digest_of(image), image, image_name, model, kind)


def climb_view(h: Hierarchy, logits: np.ndarray, previews: list[bytes], per_step: float, *, kind: str,
               severity: int, theta: float, true_leaf: int | None, temperature: float, model: str,
               image_name: str, context, key: str) -> None:
    """The degraded image at ``severity`` beside the climb of every rule's pick over severities 0–5."""
    rows = [node_row(h, lg, temperature) for lg in logits]
    records = [record_rows(views.single_sample_paths(h, r), 0) for r in rows]
    left, right = st.columns([1, 3], gap="small")  # the figure's names and titles need the width
    with left:
        st.image(previews[severity], caption=f"{KINDS[kind]}, severity {severity}", width="stretch")
        st.caption(f"{per_step * 1000:.0f} ms per severity step (6 copies in one batch on the CPU).")
    with right:
        fig = degradation_figure(h, records, theta, true_leaf=true_leaf, kind=KINDS[kind].lower(),
                                 font_size=presenter.font_size())
        widgets.figure(fig, f"degrade_{kind}_{model}_{image_name}", key=f"{key}_climb", context=context,
                       title=f"Picks as the image degrades (θ = {theta:.2f})")
    picks = picks_by_severity(records, theta)
    table = [{"corruption": kind, "severity": s, "rule": r, "node": h.node_ids[int(n)], "name": h.names[int(n)],
              "depth": int(h.depth[n])} for r, nodes in picks.items() for s, n in enumerate(nodes)]
    widgets.csv_download(table, f"degrade_{kind}_{model}_{image_name}", key=f"dl_{key}_degrade", context=context)



PIPELINE_PACKAGES = ("torch", "timm")  # what classifying needs beyond the dashboard's own requirements


def registered_models() -> list[str]:
    """The image classifiers that load offline (``hsc_core.pipeline.registry``: torch-free)."""
    from hsc_core.pipeline.registry import list_registered_models

    return list_registered_models()


def image_logits(image: bytes, rgb: Image.Image, model: str, shipped: bool) -> np.ndarray:
    """(C,) float32 logits of ``model`` for ``rgb``, the image decoded from ``image``. A shipped
    validation image's are kept on disk (``evaluation_cache.image_logits``): a fresh server answers
    it without importing PyTorch. An upload's (``shipped=False``) are never written anywhere."""
    def forward() -> np.ndarray:
        from hsc_core.pipeline.inference import classify_image  # imports torch: only when the network runs

        return classify_image(rgb, model)

    return evaluation_cache.image_logits(image, model, forward) if shipped else forward()


def pipeline_installed() -> bool:
    """Whether torch and timm can be imported, found without importing them (timm takes seconds)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in PIPELINE_PACKAGES)
    except (ImportError, ValueError):  # a half-installed package: treat it as missing
        return False


def explorer_section(es, sample: str, i: int, theta: float) -> None:
    """The Explorer's "degrade this image" part for a shipped image: the current model re-run live on
    the image under blur or noise, its picks climbing over severities 0–5 at θ."""
    from hsc_core.datasets.images import safe_image_path

    with st.expander("Degrade this image (live on the CPU)", expanded=state.get("degrade") != "none"):
        if not pipeline_installed():
            st.caption("Needs PyTorch and timm: `pip install 'hsc-toolkit[pipeline]'`.")
            return
        if es.model not in registered_models() or es.image_dir is None:
            st.caption(f"Only the registered models ({', '.join(registered_models())}) run live, on images "
                       "in the image folder.")
            return
        path = safe_image_path(es.image_dir, sample)
        if path is None or not path.is_file():
            st.caption("No image file for this sample.")
            return
        kind, severity = degrade_controls("ex")
        if kind == "none":
            return
        image = path.read_bytes()
        logits, previews, per_step = degraded_logits(image, path.name, es.model, kind)
        v = es.view
        climb_view(v.hierarchy, logits, previews, per_step, kind=kind, severity=severity, theta=theta,
                   true_leaf=int(v.labels[i]), temperature=v.temperature if v.ts else 1.0, model=es.model,
                   image_name=path.name, context=widgets.export_context(es, theta), key="ex")
