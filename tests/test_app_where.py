"""AppTest of "Where it stops": the samples behind a node, the mistake histogram and the
per-superclass curves on the shipped logits, each recomputed with ``hsc_core`` directly (not
through the dashboard's helpers); deep links and presenter mode."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from app_support import download_rows, open_page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402
from hsc_core.evaluation.diagnostics import (  # noqa: E402
    landing_counts,
    mistake_severity_histogram,
    samples_at_node,
    superclass_rc_curves,
)
from hsc_core.evaluation.model import ModelEvaluation  # noqa: E402

PAGE = "app_pages/where_in_tree.py"
LITE0 = ROOT / "cached_logits" / "efficientnet_lite0.npz"
pytestmark = pytest.mark.skipif(not LITE0.exists(), reason="no shipped logits")


@pytest.fixture(scope="module")
def lite0():
    ev = ModelEvaluation.from_bundle(load_logits(LITE0), imagenet_hierarchy(), name="efficientnet_lite0",
                                     dataset="imagenet1k")
    return ev.setting(False)




def test_default_lists_the_busiest_internal_node(lite0, downloads):
    at = open_page(PAGE, {"model": "efficientnet_lite0", "theta": "0.7", "cmp_rule": "climbing", "ts": "0"})
    assert not at.error, [e.value for e in at.error]
    h = lite0.hierarchy
    table = landing_counts(h, lite0.paths["climbing"], lite0.labels, 0.7)
    busiest = int(table.iloc[h.n_leaves:]["stops"].idxmax())
    want = samples_at_node(h, lite0.paths["climbing"], lite0.labels, 0.7, busiest)
    listed = download_rows(downloads["dl_where_samples"])
    assert [r["sample"] for r in listed] == [str(lite0.sample_ids[i]) for i in want[:500]]
    assert all(r["theta"] == "0.7" and r["model"] == "efficientnet_lite0" for r in listed)  # self-describing
    link = parse_qs(listed[0]["explorer"].split("?", 1)[1])
    assert link["sample"] == [listed[0]["sample"]] and link["theta"] == ["0.70"] and link["model"] == [
        "efficientnet_lite0"]
    nodes = download_rows(downloads["dl_where_nodes"])
    assert [int(r["stops"]) for r in nodes] == table["stops"].tolist()
    hist = mistake_severity_histogram(h, lite0.paths, lite0.labels, 0.7)
    got = [(r["rule"], int(r["lca_depth"]), int(r["mistakes"])) for r in download_rows(downloads["dl_where_severity"])]
    assert got == list(zip(hist["rule"], hist["lca_depth"], hist["mistakes"], strict=True))
    curves = superclass_rc_curves(h, lite0.paths["climbing"], lite0.labels, 2, top=6)
    sup = download_rows(downloads["dl_where_superclass"])
    assert [float(r["haurc"]) for r in sup] == pytest.approx([c.haurc for c in curves.values()])
    assert len(at.get("plotly_chart")) == 3


def test_node_deep_link_and_bad_node(lite0, downloads):
    h = lite0.hierarchy
    dog = h.index_of(next(n for n, name in zip(h.node_ids, h.names, strict=True) if name == "dog"))
    at = open_page(PAGE, {"model": "efficientnet_lite0", "theta": "0.5", "node": h.node_ids[dog], "ts": "0",
                          "cmp_rule": "max_coverage", "wkind": "icicle", "presenter": "1"})
    assert not at.error, [e.value for e in at.error]
    want = samples_at_node(h, lite0.paths["max_coverage"], lite0.labels, 0.5, dog)
    listed = [r["sample"] for r in download_rows(downloads["dl_where_samples"])]
    assert listed == [str(lite0.sample_ids[i]) for i in want]
    assert any(f"**{want.size:,} sample(s)** land at *dog*" in m.value for m in at.markdown)
    at = open_page(PAGE, {"node": "no_such_node"})
    assert any("not in this tree" in w.value for w in at.warning)
    assert not at.error


def test_level_link_at_both_ends_is_held(lite0):
    deepest = lite0.hierarchy.max_depth - 1
    for value, shown in (("1", 1), ("64", deepest)):
        at = open_page(PAGE, {"level": value})
        assert not at.exception and not at.error, [e.value for e in at.exception]
        assert at.slider(key="_w.wt.level").value == shown
