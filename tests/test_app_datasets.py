"""The dashboard on data sets other than ImageNet-1k (``streamlit.testing.v1.AppTest``).

A synthetic CIFAR-100 model (100 classes, manifest ``dataset_id: cifar100``), a user data set
folder next to the cached-logits folder (a hand-made toy tree as an edge-list CSV + classes.txt),
a file that names no data set (the sidebar picker) and files whose class count does not match.
Reference numbers come from ``hsc_core`` directly: the CIFAR-100 tree read with
``formats.load_hierarchy`` from the shipped files, the toy tree built by hand with
``Hierarchy.from_parent_map``, and ``rc_curves_from_logits``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from app_support import open_page as _open_page
from app_support import plotly_figures

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from hsc_core.core.hierarchy import Hierarchy  # noqa: E402
from hsc_core.core.logit_chunks import rc_curves_from_logits  # noqa: E402
from hsc_core.core.probabilities import node_probabilities, softmax  # noqa: E402
from hsc_core.core.protocol import calibration_mask  # noqa: E402
from hsc_core.core.rules import RULE_LABELS, RULES, decision_paths  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.datasets.formats import load_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits, save_logits  # noqa: E402
from hsc_core.evaluation.threshold import calibration_draw  # noqa: E402

APP = str(ROOT / "app.py")
DATA = ROOT / "hsc_core" / "datasets" / "data"
TIMEOUT = 180
PAGES = {
    "app_pages/overview.py": "Hierarchical Selective Classification",
    "app_pages/story.py": "Guided story",
    "app_pages/explorer.py": "Explorer",
    "app_pages/risk_coverage.py": "Risk–coverage",
    "app_pages/calibration_coverage.py": "Calibration–coverage",
    "app_pages/guaranteed_accuracy.py": "Guaranteed accuracy",
    "app_pages/compare_models.py": "Compare models",
    "app_pages/try_an_image.py": "Try an image",
}
TOY_EDGES = [("animal", "cat"), ("animal", "dog"), ("vehicle", "car"), ("vehicle", "truck"), ("vehicle", "bus"),
             ("root", "animal"), ("root", "vehicle")]
TOY_CLASSES = ["truck", "cat", "bus", "dog", "car"]  # logit order differs from the file's order on purpose


def open_page(page: str, query: dict | None = None) -> AppTest:
    """``app_support.open_page`` without temperature scaling: these tests compare with the library's
    raw-softmax numbers (the pages open with TS on)."""
    return _open_page(page, {"ts": "0", **(query or {})})


def cifar_hierarchy() -> Hierarchy:
    return load_hierarchy(DATA / "cifar100_hierarchy.csv", DATA / "cifar100_classes.txt")


def toy_hierarchy() -> Hierarchy:
    parent_of = {child: parent for parent, child in TOY_EDGES}
    return Hierarchy.from_parent_map(parent_of, TOY_CLASSES)


def _save(path: Path, h: Hierarchy, n: int, seed: int, manifest: dict | None, top1: float = 0.6) -> Path:
    logits, labels = synthetic_logits(h, n, top1=top1, seed=seed)
    ids = [f"{path.stem}_{i:05d}.png" for i in range(n)]
    return save_logits(path, logits, labels, ids, manifest=manifest, dtype="float32")


@pytest.fixture(scope="session")
def cifar_dir(tmp_path_factory) -> Path:
    """A cached-logits folder with one synthetic CIFAR-100 model that names its data set."""
    d = tmp_path_factory.mktemp("cifar") / "cached_logits"
    d.mkdir()
    _save(d / "cifar_net.npz", cifar_hierarchy(), 500, seed=6,
          manifest={"model": "cifar_net", "dataset_id": "cifar100"})
    return d


@pytest.fixture(scope="session")
def mixed_dir(tmp_path_factory) -> Path:
    """``<base>/cached_logits`` + ``<base>/datasets/toy`` (a user data set folder next to it): a toy
    model, a 100-class file naming no data set, and two files whose class count does not match."""
    base = tmp_path_factory.mktemp("mixed")
    toy = base / "datasets" / "toy"
    toy.mkdir(parents=True)
    (toy / "hierarchy.csv").write_text("parent,child\n" + "".join(f"{p},{c}\n" for p, c in TOY_EDGES))
    (toy / "classes.txt").write_text("\n".join(TOY_CLASSES) + "\n")
    d = base / "cached_logits"
    d.mkdir()
    _save(d / "toy_net.npz", toy_hierarchy(), 300, seed=4, manifest={"model": "toy_net", "dataset_id": "toy"},
          top1=0.5)
    _save(d / "unlabelled_net.npz", cifar_hierarchy(), 200, seed=5, manifest={"model": "unlabelled_net"})
    _save(d / "wrong_net.npz", cifar_hierarchy(), 150, seed=6, manifest={"model": "wrong_net", "dataset_id": "toy"})
    return d


@pytest.fixture
def use_dir(monkeypatch):
    def use(directory: Path):
        for var in ("HSC_SYNTHETIC", "HSC_SYNTHETIC_TAXONOMY", "HSC_DATASETS_DIR"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(directory))
    return use


def frame(at: AppTest, column: str):
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with column {column!r}")


def unescape(markdown: str) -> str:
    """Markdown text as shown (user-provided names are backslash-escaped in the source)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.error)


def rc_haurc_table(at: AppTest) -> dict[str, float]:
    table = frame(at, "hAURC×1000")
    return {row["rule"]: float(row["hAURC×1000"]) for _, row in table.iterrows()}


def evaluated(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logits, labels, sample ids) of the protocol's evaluation split: every page's samples."""
    b = load_logits(path)
    ev = ~calibration_mask(b.labels)
    return b.logits[ev], b.labels[ev], b.sample_ids[ev]


def assert_haurc_equals_library(at: AppTest, h: Hierarchy, path: Path) -> None:
    logits, labels, _ = evaluated(path)
    want = rc_curves_from_logits(h, logits, labels, losses=("01",))
    shown = rc_haurc_table(at)
    assert set(shown) == {RULE_LABELS[r] for r in RULES}
    for rule in RULES:
        assert shown[RULE_LABELS[rule]] == pytest.approx(1000 * want[(rule, "01")].haurc, rel=1e-12), rule


# ---------------------------------------------------------------------------- CIFAR-100
@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_renders_on_cifar100(page, use_dir, cifar_dir):
    use_dir(cifar_dir)
    at = open_page(page)
    assert [t.value for t in at.title] == [PAGES[page]]
    assert not at.error, errors(at)
    assert at.selectbox(key="_w.sb.model").value == "cifar_net"
    assert any("Data set: **cifar100**" in unescape(c.value) for c in at.sidebar.caption)  # named by the manifest
    if page == "app_pages/try_an_image.py":  # ImageNet models only: the page says so
        assert any("ImageNet-1k models only" in i.value and "cifar100" in i.value for i in at.info)


def test_cifar100_haurc_equals_library(use_dir, cifar_dir):
    use_dir(cifar_dir)
    at = open_page("app_pages/risk_coverage.py")
    assert_haurc_equals_library(at, cifar_hierarchy(), cifar_dir / "cifar_net.npz")
    # The authors' grid variant runs through the chunked θ grid.
    at.radio(key="_w.rc.dec").set_value("2").run()
    logits, labels, _ = evaluated(cifar_dir / "cifar_net.npz")
    want = rc_curves_from_logits(cifar_hierarchy(), logits, labels, losses=("01",), dec=2)
    for rule in RULES:
        assert rc_haurc_table(at)[RULE_LABELS[rule]] == pytest.approx(1000 * want[(rule, "01")].haurc, rel=1e-12)
    # The Overview: the model's data set, its top-1 and every rule's exact hAURC without TS.
    at.switch_page("app_pages/overview.py").run()
    assert not at.exception and not at.error, errors(at)
    table = frame(at, "top-1 accuracy")
    assert list(table["model"]) == ["cifar_net"] and list(table["dataset"]) == ["cifar100"]
    assert float(table["top-1 accuracy"].iloc[0]) == pytest.approx((logits.argmax(1) == labels).mean())
    exact = rc_curves_from_logits(cifar_hierarchy(), logits, labels, losses=("01",))
    rules = frame(at, "hAURC×1000")
    for rule in RULES:
        row = rules[(rules["rule"] == RULE_LABELS[rule]) & (rules["TS"] == "off")].iloc[0]
        assert row["hAURC×1000"] == pytest.approx(1000 * exact[(rule, "01")].haurc, rel=1e-12), rule
    assert len(rules) == 2 * len(RULES)  # without and with TS


def test_explorer_shows_cifar100_superclasses(use_dir, cifar_dir):
    use_dir(cifar_dir)
    h = cifar_hierarchy()
    logits, labels, ids = evaluated(cifar_dir / "cifar_net.npz")
    probs = node_probabilities(h, softmax(logits))
    maple = h.names.index("maple_tree")
    trees = h.names.index("trees")
    # A correctly classified maple_tree sample whose leaf is below θ = 0.99 and whose superclass is not:
    # Climbing backs off to "trees".
    climbs = (labels == maple) & (probs[:, : h.n_leaves].argmax(1) == maple) & (probs[:, maple] < 0.99) \
        & (probs[:, trees] >= 0.99)
    assert climbs.any(), "the fixture should hold such a sample"
    i = int(np.flatnonzero(climbs)[0])
    at = open_page("app_pages/explorer.py", {"sample": str(ids[i]), "theta": "0.99"})
    assert not at.error, errors(at)
    info = "\n".join(m.value for m in at.markdown)
    assert "**True class:** maple tree" in info
    fig = plotly_figures(at)[0].spec
    assert "maple tree" in fig and "trees" in fig  # the leaf → root path passes the superclass
    table = frame(at, "node id")
    for rule in RULES:
        node, conf = decision_paths(h, probs, rule).predict(0.99)
        row = table[table["rule"] == RULE_LABELS[rule]].iloc[0]
        assert row["node id"] == h.node_ids[int(node[i])], rule
        assert row["confidence"] == pytest.approx(float(conf[i]))
    # By class: the class list shows CIFAR-100 names.
    at.selectbox(key="_w.ex.pick").set_value("class").run()
    assert not at.exception
    classes = at.selectbox(key="_w.ex.cls")
    assert "maple tree" in " ".join(classes.options)


# ---------------------------------------------------------------------------- user data set folder
def test_user_dataset_folder_next_to_cached_logits(use_dir, mixed_dir):
    use_dir(mixed_dir)
    at = open_page("app_pages/risk_coverage.py", {"model": "toy_net"})
    assert not at.error, errors(at)
    assert_haurc_equals_library(at, toy_hierarchy(), mixed_dir / "toy_net.npz")
    at.switch_page("app_pages/explorer.py").run()
    assert not at.exception and not at.error, errors(at)
    fig = plotly_figures(at)[0].spec
    assert "animal" in fig or "vehicle" in fig
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])


def test_unknown_dataset_shows_picker(use_dir, mixed_dir):
    use_dir(mixed_dir)
    location = str(mixed_dir / "unlabelled_net.npz")
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net"})
    msg = unescape(" ".join(i.value for i in at.info))  # not a fault: an info that asks for the data set
    assert "unlabelled_net" in msg and "100 classes" in msg and "pick its data set in the sidebar" in msg
    assert not at.error
    picker = at.selectbox(key=f"_dataset_pick.{location}")
    assert picker.value is None
    # Only data sets with the logits' class count are offered (imagenet1k: 1,000 and toy: 5 are not).
    assert "cifar100 (100 classes)" in picker.options
    assert not any(o.startswith(("imagenet1k", "toy")) for o in picker.options)
    at.selectbox(key=f"_dataset_pick.{location}").set_value("cifar100").run()
    assert not at.exception and not at.error, errors(at)
    assert_haurc_equals_library(at, cifar_hierarchy(), mixed_dir / "unlabelled_net.npz")


def test_manifest_with_wrong_class_count(use_dir, mixed_dir):
    use_dir(mixed_dir)
    at = open_page("app_pages/explorer.py", {"model": "wrong_net"})
    msg = unescape(errors(at))
    assert "wrong_net" in msg and "the logits have 100 classes but data set 'toy' has 5 classes" in msg
    at.switch_page("app_pages/overview.py").run()  # listed as unusable; the toy model still summarised
    assert not at.exception
    assert "wrong_net" in errors(at)
    assert "toy_net" in list(frame(at, "top-1 accuracy")["model"])


# ---------------------------------------------------------------------------- data set upload
def test_add_a_dataset_in_the_sidebar(use_dir, mixed_dir):
    use_dir(mixed_dir)
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net"})
    # A broken hierarchy (a cycle): a one-line error, nothing added.
    at.text_input(key="_ds_name").input("loop")
    at.file_uploader(key="_ds_tree").upload("loop.csv", b"parent,child\na,b\nb,a\nb,c\n", "text/csv").run()
    next(b for b in at.button if b.label == "Add data set").click().run()
    assert not at.exception
    msg = unescape(" ".join(e.value for e in at.sidebar.error))
    assert msg.startswith("Cannot add data set loop") and "cycle" in msg
    picker = at.selectbox(key=f"_dataset_pick.{mixed_dir / 'unlabelled_net.npz'}")
    assert not any(o.startswith("loop") for o in picker.options)
    # CIFAR-100's own files under another name: added for this session, then picked for the file.
    at.text_input(key="_ds_name").input("my_cifar")
    at.file_uploader(key="_ds_tree").upload("tree.csv", (DATA / "cifar100_hierarchy.csv").read_bytes(), "text/csv")
    at.file_uploader(key="_ds_classes").upload("classes.txt", (DATA / "cifar100_classes.txt").read_bytes(),
                                               "text/plain").run()
    next(b for b in at.button if b.label == "Add data set").click().run()
    assert not at.exception
    assert any("Added data set **my_cifar** (100 classes" in unescape(s.value) for s in at.sidebar.success)
    at.selectbox(key=f"_dataset_pick.{mixed_dir / 'unlabelled_net.npz'}").set_value("my_cifar").run()
    assert not at.exception and not at.error, errors(at)
    assert_haurc_equals_library(at, cifar_hierarchy(), mixed_dir / "unlabelled_net.npz")


def test_add_a_dataset_refuses_a_deep_tree_and_says_what_it_assumed(use_dir, mixed_dir):
    use_dir(mixed_dir)
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net"})

    def add(name: str, filename: str, content: bytes) -> None:
        at.text_input(key="_ds_name").input(name)
        at.file_uploader(key="_ds_tree").upload(filename, content, "text/plain").run()
        next(b for b in at.button if b.label == "Add data set").click().run()
        assert not at.exception

    # Newick nested 100,000 deep: one message in the sidebar, at once, no traceback.
    add("deep", "deep.nwk", b"(" * 100_000 + b"a,b" + b")" * 100_000 + b";")
    msg = unescape(" ".join(e.value for e in at.sidebar.error))
    assert msg.startswith("Cannot add data set deep: deep.nwk: hierarchy too deep: over 1,000 levels"), msg
    # A headerless levels file: detection takes its first row as column names, and says so.
    plants = b"fruit,apple\nflower,rose\nflower,tulip\n"
    add("plants", "plants.csv", plants)
    warning = unescape(" ".join(w.value for w in at.sidebar.warning))
    assert "Added data set **plants** (2 classes" in warning and "took the first row" in warning
    # "First row: a class (no header)" keeps it.
    at.radio(key="_ds_header").set_value("data").run()
    add("plants3", "plants.csv", plants)
    assert any("Added data set **plants3** (3 classes" in unescape(s.value) for s in at.sidebar.success)


# ---------------------------------------------------------------------------- synthetic taxonomy
def test_synthetic_taxonomy_is_opt_in(monkeypatch, use_dir, cifar_dir):
    use_dir(cifar_dir)
    monkeypatch.setenv("HSC_SYNTHETIC", "300")
    monkeypatch.setenv("HSC_SYNTHETIC_TAXONOMY", "1")
    at = open_page("app_pages/explorer.py")
    assert at.selectbox(key="_w.sb.model").options == ["synthetic-300-taxonomy"]
    assert any("Synthetic data" in w.value for w in at.sidebar.warning)
    assert not at.error, errors(at)
    assert "Data set: **synthetic-taxonomy-10k**" in unescape(" ".join(c.value for c in at.sidebar.caption))
    at.switch_page("app_pages/risk_coverage.py").run()
    assert not at.exception and not at.error
    from hsc_core.core.synthetic import synthetic_taxonomy

    h = synthetic_taxonomy(10_000, 7, seed=0)
    logits, labels = synthetic_logits(h, 300, top1=0.8, seed=0)
    ev = ~calibration_mask(labels)
    want = rc_curves_from_logits(h, logits[ev], labels[ev], rules=("climbing",), losses=("01",))
    assert rc_haurc_table(at)["Climbing"] == pytest.approx(1000 * want[("climbing", "01")].haurc, rel=1e-12)



# ---------------------------------------------------------------------------- chunked computation
def per_sample_bytes(h: Hierarchy) -> int:
    """One sample's share of a chunk's float32 working memory (``logit_chunks.auto_chunk_size``)."""
    return 4 * 4 * (h.n_nodes + h.n_leaves)


def budget_mb(rows: int, h: Hierarchy) -> str:
    """``HSC_MEMORY_BUDGET_MB`` for chunks of ``rows`` samples (exact: a power-of-two fraction)."""
    return repr(rows * per_sample_bytes(h) / 2**20)


def test_chunked_decision_paths_equal_whole(monkeypatch):
    """The dashboard's evaluation (the layer's, of a subset, a chunk of rows at a time under the
    memory budget) has the unchunked decision paths, bit for bit, and reports each chunk to the
    progress bar."""
    from dashboard import progress
    from hsc_core.evaluation import ModelEvaluation

    h = cifar_hierarchy()
    logits, labels = synthetic_logits(h, 778, top1=0.5, seed=9)
    subset = np.arange(778) % 2 == 0
    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", budget_mb(50, h))  # 50 rows a chunk
    ev = ModelEvaluation(h, logits, labels, subset=subset, subset_name="even")
    seen: list[tuple[int, int]] = []
    es = ev.setting(True, progress=lambda done, total: seen.append((done, total)))
    index = np.flatnonzero(subset & ~calibration_mask(labels))
    n = index.size
    assert np.array_equal(es.rows, index) and -(-n // 50) == 7
    assert seen == [(0, n)] + [(min(50 * k, n), n) for k in range(1, 8)]  # 7 chunks
    bar = progress.ProgressBar("test")
    for done, total in seen:
        bar(done, total)
    assert bar.chunks == 7 and bar.shown == 20  # a bar (≥ 4 chunks), filled
    probs = node_probabilities(h, softmax(logits[index], ev.temperature))
    np.testing.assert_array_equal(es.leaf_conf, probs[:, : h.n_leaves].max(axis=1))
    for rule in RULES:
        whole = decision_paths(h, probs, rule)
        for part in ("nodes", "values", "lengths"):
            np.testing.assert_array_equal(getattr(es.paths[rule], part), getattr(whole, part), err_msg=f"{rule} {part}")


def test_pages_compute_in_chunks(monkeypatch, use_dir, tmp_path):
    """With 64 rows a chunk (8 chunks, so the progress bar shows), the RC curves, the authors' grid
    and Guaranteed accuracy's θ̂ equal the library's unchunked values."""
    from hsc_core.core.thresholds import climbing_tight_thresholds, select_threshold

    h = cifar_hierarchy()
    monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", budget_mb(64, h))
    d = tmp_path / "cached_logits"
    d.mkdir()
    path = _save(d / "chunky_net.npz", h, 450, seed=11, manifest={"model": "chunky_net", "dataset_id": "cifar100"})
    use_dir(d)
    at = open_page("app_pages/risk_coverage.py")
    assert not at.error, errors(at)
    assert_haurc_equals_library(at, h, path)
    at.radio(key="_w.rc.dec").set_value("2").run()
    logits, labels, _ = evaluated(path)
    want = rc_curves_from_logits(h, logits, labels, losses=("01",), dec=2)
    for rule in RULES:
        assert rc_haurc_table(at)[RULE_LABELS[rule]] == pytest.approx(1000 * want[(rule, "01")].haurc, rel=1e-12)
    at.switch_page("app_pages/calibration_coverage.py").run()
    assert not at.exception and len(frame(at, "max ECE")) == len(RULES)
    at.switch_page("app_pages/guaranteed_accuracy.py").run()
    assert not at.exception and not at.error, errors(at)
    at.selectbox(key="_w.ga.split_method").set_value("theorem1").run()  # the paper's θ̂, checked by hand below
    assert not at.exception and not at.error, errors(at)
    probs = node_probabilities(h, softmax(logits))
    n = int(len(labels) * 0.9)  # the default n = 1,000 is capped at 90 % of the samples
    cal, _ = calibration_draw(labels, n, 0)  # the page's (and the decision card's) stratified draw
    theta_hat = select_threshold(climbing_tight_thresholds(h, probs, labels)[cal], 0.05)
    shown = next(m.value for m in at.metric if m.label == "θ̂ (threshold)")
    assert shown == f"{theta_hat:.4f}"


def test_repetitions_refuse_a_too_large_dense_matrix(monkeypatch, use_dir, tmp_path):
    """DARTS needs every node probability at once: beyond the memory cap the page says so in one
    line instead of building the matrix; CRC and the single split still work."""
    from dashboard import evaluations
    from hsc_core.evaluation import guarantee_methods

    d = tmp_path / "cached_logits"
    d.mkdir()  # a model of its own, so no earlier test has cached its matrix
    _save(d / "big_net.npz", cifar_hierarchy(), 500, seed=8, manifest={"model": "big_net", "dataset_id": "cifar100"})
    use_dir(d)
    monkeypatch.setattr(evaluations, "DENSE_LIMIT_BYTES", 1000)
    monkeypatch.setattr(guarantee_methods, "DENSE_LIMIT_BYTES", 1000)
    at = open_page("app_pages/guaranteed_accuracy.py")
    at.slider(key="_w.ga.reps").set_value(10)
    at.multiselect(key="ga_baselines").set_value(["crc"])
    next(b for b in at.button if b.label == "Run repetitions").click().run()
    assert not at.exception and not at.error, errors(at)  # CRC reads no dense matrix: it runs at any size
    at.multiselect(key="ga_baselines").set_value(["darts", "crc"])
    next(b for b in at.button if b.label == "Run repetitions").click().run()
    assert not at.exception
    msg = unescape(errors(at))
    assert "Cannot run the repetitions" in msg and "450 samples × 121 nodes is too large" in msg, msg
    assert next(m.value for m in at.metric if m.label == "θ̂ (threshold)")


def test_node_probabilities_are_computed_by_row(use_dir, cifar_dir, monkeypatch):
    """``ModelContext.node_probs`` indexes like the dense matrix but computes only the rows asked for."""
    from dashboard import catalog, evaluations

    use_dir(cifar_dir)
    h = cifar_hierarchy()
    path = cifar_dir / "cifar_net.npz"
    logits, labels, _ = evaluated(path)
    es = evaluations.model_context("cifar_net", str(path))
    probs = node_probabilities(h, softmax(logits))
    assert es.node_probs.shape == probs.shape
    np.testing.assert_array_equal(es.node_probs[7], probs[7])
    np.testing.assert_array_equal(es.node_probs[7, : h.n_leaves], probs[7, : h.n_leaves])
    np.testing.assert_array_equal(es.node_probs[[3, 1, 4], 105], probs[[3, 1, 4], 105])
    np.testing.assert_array_equal(es.node_probs[10:20], probs[10:20])
    monkeypatch.setattr(evaluations, "DENSE_LIMIT_BYTES", probs[:5].nbytes)
    with pytest.raises(catalog.DataError, match="450 samples × 121 nodes is too large"):
        np.asarray(es.node_probs)
    np.testing.assert_array_equal(es.node_probs[2, 3], probs[2, 3])  # single rows still work


# ---------------------------------------------------------------------------- data set in the link
def test_link_carries_the_picked_data_set(use_dir, mixed_dir):
    use_dir(mixed_dir)
    pick_key = f"_dataset_pick.{mixed_dir / 'unlabelled_net.npz'}"
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net"})
    at.selectbox(key=pick_key).set_value("cifar100").run()
    assert not at.exception and at.query_params["dataset"] == "cifar100"  # the picked data set joins the link
    # That link, opened afresh: the data set is used without picking it again.
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net", "dataset": "cifar100"})
    assert at.selectbox(key=pick_key).value == "cifar100" and not at.warning, errors(at)
    assert_haurc_equals_library(at, cifar_hierarchy(), mixed_dir / "unlabelled_net.npz")


@pytest.mark.parametrize(("value", "reason"), [
    ("toy", "it has 5 classes, the logits have 100"),
    ("nope", "there is no data set with this name"),
])
def test_link_data_set_that_does_not_fit_is_ignored(use_dir, mixed_dir, value, reason):
    use_dir(mixed_dir)
    at = open_page("app_pages/risk_coverage.py", {"model": "unlabelled_net", "dataset": value})
    warnings = unescape(" ".join(w.value for w in at.sidebar.warning))
    assert f"The link's data set **{value}** was ignored: {reason}." in warnings
    assert at.selectbox(key=f"_dataset_pick.{mixed_dir / 'unlabelled_net.npz'}").value is None
