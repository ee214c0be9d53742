"""Issue 33: the dashboard under hostile input — a results table with a duplicated column or an
infinite sample count is one ``st.error`` line on the Model atlas page, and a link cannot ask for
unbounded work (the number of rules and the length of ``?atlas=`` are capped, said in one line)."""

from __future__ import annotations

import pytest
from app_support import open_page
from test_atlas_hostile import _authors_with_two_architectures, _models_csv, own_rows  # noqa: F401

ATLAS_PAGE = "app_pages/model_atlas.py"


@pytest.mark.parametrize("kind", ["duplicate", "inf", "1e400"])
def test_the_atlas_page_shows_one_error_line(own_rows, kind, monkeypatch, tmp_path):  # noqa: F811 (fixture)
    text = _authors_with_two_architectures() if kind == "duplicate" else _models_csv(own_rows, kind)
    (tmp_path / "hostile.csv").write_text(text)
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))
    at = open_page(ATLAS_PAGE, {"atlas": "hostile.csv"})  # open_page: no exception (traceback) on the page
    assert len(at.error) == 1, [e.value for e in at.error]
    assert "\n" not in at.error[0].value
    assert ("more than once" if kind == "duplicate" else f"row 3 has '{kind}'") in at.error[0].value


def test_a_link_carries_at_most_12_rules_and_says_so_in_one_line():
    # the 13th entry (Max-Coverage) is past the cap: dropped, and one line says why
    listed = "selective,climbing" + ",selective" * 10 + ",max_coverage" + ",jumping" * 30
    at = open_page("app_pages/risk_coverage.py", {"rules": listed})
    assert at.session_state["rules"] == ["selective", "climbing"]
    notes = [i.value for i in at.info if "rules=" in i.value]
    assert notes == ["The link's rules= named 43 entries; only the first 12 are used (a link carries at most 12)."]
    assert not at.error and not at.warning, [w.value for w in (*at.error, *at.warning)]
    at = open_page("app_pages/risk_coverage.py", {"rules": "selective,jumping"})  # under the cap: no note
    assert at.session_state["rules"] == ["selective", "jumping"]
    assert not [i.value for i in at.info if "rules=" in i.value]


def test_a_long_atlas_name_in_a_link_is_refused_before_any_file_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))
    (tmp_path / ("a" * 124 + ".csv")).write_text("x,y\n1,2\n")  # 128 characters: still a name a link may give
    at = open_page(ATLAS_PAGE, {"atlas": "a" * 296 + ".csv"})
    warned = [w.value for w in at.warning if "Ignored invalid link parameters" in w.value]
    assert len(warned) == 1 and "must be a file name of 1 to 128 printable characters" in warned[0]
    assert at.session_state["atlas"] == "a" * 124 + ".csv"  # the folder's own table, not the link's
    assert len(at.error) == 1 and "is not a results table" in at.error[0].value
    at = open_page(ATLAS_PAGE, {"atlas": "a" * 124 + ".csv"})
    assert not [w.value for w in at.warning if "Ignored invalid link parameters" in w.value]


def test_capped_list_cuts_a_links_list_and_says_so():
    from dashboard import state

    assert state.capped_list("rules", "a,b,c", 2) == (
        "a,b", "The link's rules= named 3 entries; only the first 2 are used (a link carries at most 2).")
    assert state.capped_list("rules", "a,b", 2) == ("a,b", "")
    assert state.capped_list("rules", "", 2) == ("", "")
    assert state.capped_list("theta", "0.5", None) == ("0.5", "")
    assert state.SETTINGS["rules"].max_items == state.MAX_LINK_RULES == 12
    assert state.SETTINGS["atlas"].parse("x" * 124 + ".csv") == "x" * 124 + ".csv"
    with pytest.raises(state.Invalid, match="a file name of 1 to 128"):
        state.SETTINGS["atlas"].parse("x" * 125 + ".csv")


def test_risk_coverage_on_a_deep_caterpillar_leaves_the_bootstrap_for_a_request(monkeypatch, tmp_path):
    # Issue 33 (3): 1,000 resamples over ~n × depth events took minutes; the page shows the exact
    # areas (the library's) and no interval column, as for a large sample.
    import numpy as np

    from hsc_core.core.hierarchy import Hierarchy
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.logits_io import save_logits
    from hsc_core.evaluation.model import ModelEvaluation

    depth, n_samples = 400, 2000  # 401 records × ~1,800 evaluation samples > 20,000 × 32
    n_leaves = depth + 1
    parent = np.r_[n_leaves + np.arange(depth), n_leaves + depth - 1, -1, n_leaves + np.arange(depth - 1)]
    names = [f"c{k}" for k in range(n_leaves)] + [f"n{k}" for k in range(depth)]
    h = Hierarchy.from_parents(parent, n_leaves, node_ids=names, names=names)
    folder = tmp_path / "datasets" / "caterpillar"
    folder.mkdir(parents=True)
    (folder / "hierarchy.csv").write_text("parent,child\n" + "".join(
        f"{names[p]},{names[c]}\n" for c, p in enumerate(parent) if p >= 0))
    (folder / "classes.txt").write_text("\n".join(names[:n_leaves]) + "\n")
    logits, labels = synthetic_logits(h, n_samples, top1=0.6, seed=0)
    cached = tmp_path / "cached_logits"
    cached.mkdir()
    save_logits(cached / "deep_net.npz", logits, labels, [f"s{i:05d}" for i in range(n_samples)],
                manifest={"model": "deep_net", "dataset_id": "caterpillar"}, dtype="float32")
    for var in ("HSC_SYNTHETIC", "HSC_SYNTHETIC_TAXONOMY", "HSC_DATASETS_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(cached))

    at = open_page("app_pages/risk_coverage.py", {"ts": "0", "rules": "selective,climbing"})
    assert not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    assert not [c for c in table.columns if "95 %" in c]
    want = ModelEvaluation(h, logits, labels, name="deep_net", dataset="caterpillar").setting(False)
    got = dict(zip(table["rule"], table["hAURC×1000"].astype(float), strict=True))
    assert got[want_label("climbing")] == pytest.approx(1000 * want.haurc("climbing"), abs=5e-4)


def want_label(rule: str) -> str:
    from hsc_core.core.rule_registry import rule_label

    return rule_label(rule)


def test_the_overview_of_the_shipped_variants_lists_each_of_them(monkeypatch):
    """A folder of real variants (bf16, int8, MC dropout, sizes, ensemble): every file is evaluated
    and gets its row, with no error; a second visit is served from the cache."""
    from pathlib import Path

    variants = Path(__file__).resolve().parents[1] / "cached_logits" / "variants"
    if not variants.is_dir():
        pytest.skip("no shipped variants")
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(variants))
    at = open_page("app_pages/overview.py")
    assert not at.error and not at.exception
    models = next(d.value for d in at.dataframe if "top-1 accuracy" in d.value.columns)
    names = sorted(p.stem for p in variants.glob("*.npz"))
    assert sorted(models["model"]) == names
    assert models["top-1 accuracy"].between(0.5, 1.0).all()  # ImageNet variants of the Lite models, none broken
