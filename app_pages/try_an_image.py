"""Try an image: classify an upload (or a shipped validation image, with its true label) on the CPU,
see the Explorer's tree with θ swept in the browser, and degrade the image (ImageNet-C blur or
noise) to watch the predicted path climb.

The classifier (``hsc_core.pipeline``: PyTorch and timm) is imported only once the page knows they
are installed: ``pip install 'hsc-toolkit[dashboard]'`` has neither, and there the page says how to
add them instead of failing.
"""

import dataclasses
import io

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluations,
    page_sentences,
    perturb,
    presenter,
    progress,
    sidebar,
    state,
    views,
    widgets,
)
from hsc_core.core.probabilities import softmax
from hsc_core.datasets.imagenet import default_image_dir, imagenet_hierarchy
from hsc_core.datasets.images import ImageReadError, display_image, max_image_pixels, open_image_safely
from hsc_core.evaluation import subsets
from hsc_core.report.export import ExportContext

entry.ensure_entrypoint(globals())
MAX_IMAGE_MB = 50  # per upload; the pixel cap (HSC_MAX_IMAGE_MEGAPIXELS) is checked before decoding
PIPELINE_MISSING = ("Classifying an image needs PyTorch and timm, which are not installed: "
                    "`pip install 'hsc-toolkit[pipeline]'` (or `pip install -r requirements.txt` in a checkout).")


st.title("Try an image")
if not perturb.pipeline_installed():
    st.info(PIPELINE_MISSING)
    st.stop()
h = imagenet_hierarchy()
current, current_location = sidebar.current_model()
if current is not None:
    try:
        current_dataset = catalog.dataset_name_for(current, current_location)
    except catalog.LOAD_ERRORS:
        current_dataset = None
    if current_dataset != catalog.IMAGENET:
        st.info(f"This page classifies with the registered ImageNet-1k models only, on the ImageNet hierarchy; "
                f"the model picked in the sidebar ({widgets.plain(current)}) belongs to "
                + (f"data set {widgets.plain(current_dataset)}." if current_dataset else "no known data set.")
                + " Its pages are Explorer, Risk–Coverage and the others.")
models = perturb.registered_models()
if not models:
    st.error("No registered models: the image classifier cannot run.")
    st.stop()
if state.get("tmodel") not in models:
    current = state.get("model")
    state.set("tmodel", current if current in models else models[0])


@st.cache_data(max_entries=8, show_spinner=False, scope="session")
def classify(image: bytes, model: str, name: str, shipped: bool) -> tuple[np.ndarray, bytes]:
    """(logits, a ≤ 1024 px PNG preview) of an image, decoded once per image and model, kept for
    this browser session only (an uploaded image and its preview leave with the session). A shipped
    validation image's logits are also kept on disk (``evaluation_cache.image_logits``): a fresh
    server answers it without loading the network.

    open_image_safely (what the pipeline's read_image calls) refuses images above the pixel cap
    before decoding them and turns 16-bit, palette, CMYK and alpha images into 8-bit RGB, so the
    preview always displays; an unreadable file's error names it as the user did."""
    rgb = open_image_safely(image, name=name)
    preview = io.BytesIO()
    display_image(rgb).save(preview, format="PNG")
    return perturb.image_logits(image, rgb, model, shipped), preview.getvalue()


image_bytes, image_name = None, None
with presenter.controls("Model and image"):
    c = st.columns([1, 2])
    with c[0]:
        model = state.bind(st.selectbox, "Model", "tmodel", scope="img", options=models,
                           help="Registered models run offline on the CPU.")
    with c[1]:
        upload = st.file_uploader("Image (JPEG, PNG, WebP, …)", key="img_upload", max_upload_size=MAX_IMAGE_MB,
                                  type=["jpg", "jpeg", "png", "webp", "bmp", "gif", "tif", "tiff"],
                                  help=f"Up to {MAX_IMAGE_MB} MB and {max_image_pixels() / 1e6:.0f} megapixels.")
    sample_dir = default_image_dir()
    if upload is not None:
        image_bytes, image_name = upload.getvalue(), upload.name
        state.set("timg", None)  # an upload cannot be linked to
    elif sample_dir is not None:
        files = sorted(p.name for p in sample_dir.iterdir() if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
        linked = state.get("timg") in files  # a deep link to a shipped image opens it
        if state.get("timg") is not None and not linked:
            st.warning(f"Image {widgets.plain(state.get('timg'))} from the link is not among the shipped images.")
        # On by default, so the page (and a projector) opens on a real example, not an empty upload box.
        if files and st.toggle("Or use one of the shipped validation images", key="img_use_sample", value=True):
            if not linked:
                state.set("timg", files[0])
            image_name = state.bind(st.selectbox, "Validation image", "timg", scope="img", options=files)
            image_bytes = (sample_dir / image_name).read_bytes()
        else:
            state.set("timg", None)
if image_bytes is None:
    also = "" if sample_dir is None else " (or turn on “Or use one of the shipped validation images” above)"
    st.info(f"Upload an image{also} to see the model's top-5 classes and the Climbing path.")
    st.stop()

try:
    with progress.spinner(f"Running {model} on the CPU…"):
        logits, preview = classify(image_bytes, model, image_name, upload is None)
except ImageReadError as exc:
    st.error(widgets.plain(widgets.public_message(exc)))
    st.stop()
except Exception as exc:  # model loading (missing weights package, …): show it, never a traceback
    st.error(f"Cannot run {widgets.plain(model)}: {type(exc).__name__}: {widgets.plain(widgets.public_message(exc))}")
    st.stop()

t, t_note = 1.0, "no temperature scaling"
location = sidebar.catalog().get(model)
if state.get("ts"):
    if location is None:
        t_note = f"no cached logits for {model}, so T = 1"
    else:
        try:
            t, n_fit = evaluations.temperature(location, subsets.ALL)
            t_note = f"T = {t:.3f} fitted on the 10 % calibration split of {model}'s cached logits ({n_fit:,} samples)"
        except catalog.LOAD_ERRORS as exc:
            t_note = f"T = 1 ({widgets.plain(widgets.public_message(exc))})"


true_leaf = None if upload is not None else catalog.sample_label(location, image_name)  # an upload has none
leaf_probs = softmax(np.asarray(logits, dtype=np.float64)[None, :], t)
row = perturb.node_row(h, logits, t)
st.markdown(page_sentences.climb(h, row, int(np.argmax(leaf_probs[0])), true_leaf))
context = ExportContext(model=model, dataset=catalog.IMAGENET, ts=bool(state.get("ts")),
                        temperature=t if state.get("ts") else None, n_samples=1)

RIGHT = 2.4 if presenter.presenter() else 2.0  # the tree's share of the page beside the image (1)
left, right = st.columns([1, RIGHT], gap="medium")
with left:
    st.image(preview, caption=widgets.plain(image_name), width="stretch")
    if true_leaf is not None:
        st.markdown(f"**True class:** {widgets.plain(views.node_name(h, true_leaf))}")
    top = np.argsort(-leaf_probs[0])[:5]
    top5 = pd.DataFrame({"rank": np.arange(1, 6), "class": [views.node_name(h, k) for k in top],
                         "wnid": [h.node_ids[k] for k in top], "probability": leaf_probs[0][top]})
    st.markdown(f"**Top-5** ({t_note})")
    # the narrow column: no wnid column on screen, so the probabilities are never cut (the CSV has it)
    st.dataframe(top5.drop(columns="wnid"), hide_index=True, key="img_top5",
                 column_config={"rank": st.column_config.NumberColumn("#", width="small"),
                                "probability": st.column_config.NumberColumn(format="%.4f")})
    widgets.csv_download(top5, f"top5_{model}_{image_name}", key="dl_top5", context=context)


def _follow(theta: float) -> None:
    state.set("theta", round(min(max(theta, 0.0), 1.0), 2))


CHART = "img_tree"


@state.fragment
def theta_view() -> None:
    # One view owns θ: the tree, its ▶ Play, θ slider and keys, every rule's pick under it, the share link.
    # Presenter mode: the tree fills the screen's height and the degradation pickers come after it.
    theta = float(state.get("theta"))
    pickers = st.container()
    tree = st.container()
    with pickers if not presenter.presenter() else st.container():
        kind, severity = perturb.degrade_controls("img")
    shown = row
    if kind != "none":
        sweep = perturb.degraded_logits(image_bytes, image_name, model, kind)
        shown = perturb.node_row(h, sweep[0][severity], t)
    at_theta = dataclasses.replace(context, theta=float(theta))
    with tree:
        perturb.tree_chart(h, shown, true_leaf, theta, key=CHART, name=f"tree_{model}_{image_name}",
                           context=context, cache_key=(perturb.digest_of(image_bytes), model, t, kind, severity),
                           on_theta=_follow, max_height=presenter.fit_height(9.5),
                           max_width=presenter.fit_width(RIGHT / (1 + RIGHT)) - 30 if presenter.presenter() else None,
                           share_page="try_an_image" if upload is None else None)
    if kind != "none":
        perturb.climb_view(h, *sweep, kind=kind, severity=severity, theta=theta, true_leaf=true_leaf,
                           temperature=t, model=model, image_name=image_name, context=at_theta, key="img")
    with st.expander(f"Table of the picks (θ = {theta:.2f})"):
        view = views.sample_view(h, shown, views.single_sample_paths(h, shown), 0, theta, true_leaf=true_leaf)
        table = views.choice_table(h, view)
        st.dataframe(table, hide_index=True, key="img_choices", column_config=widgets.CHOICE_COLUMNS)
        widgets.csv_download(table, f"choices_{model}_{image_name}", key="dl_img_choices", context=at_theta)


with right:
    theta_view()
