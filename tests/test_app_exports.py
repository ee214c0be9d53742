"""One export path and one subset resolver for the dashboard and the ``hsc`` command: the
Risk–Coverage page's full-curve CSV is the layer's RC table (``hsc evaluate --rc-table``'s
schema and rows), and the sidebar offers exactly the subsets ``hsc evaluate/report --subset`` accept."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

import pytest
from app_support import download_rows, open_page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard import catalog  # noqa: E402
from hsc_core.cli import main  # noqa: E402
from hsc_core.datasets.imagenet import imagenet_hierarchy  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402
from hsc_core.evaluation import ModelEvaluation  # noqa: E402
from hsc_core.evaluation.rc_table import RC_TABLE_COLUMNS, rc_table_rows  # noqa: E402
from hsc_core.evaluation.results import to_csv  # noqa: E402
from hsc_core.evaluation.subsets import file_subsets  # noqa: E402

SHIPPED = sorted((ROOT / "cached_logits").glob("*.npz"))
pytestmark = pytest.mark.skipif(not SHIPPED, reason="no shipped logits")


@pytest.fixture
def shipped_dir(monkeypatch):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(ROOT / "cached_logits"))


@pytest.mark.parametrize("dec, ts", [("exact", "0"), ("2", "1")])
def test_full_curve_csv_is_the_layers_rc_table(shipped_dir, downloads, tmp_path, dec, ts):
    model = SHIPPED[0].stem
    at = open_page("app_pages/risk_coverage.py", {"model": model, "ts": ts, "rules": "climbing,pareto",
                                                  "dec": dec, "loss": "severity"})
    assert not at.exception
    got = download_rows(downloads["dl_rc_curves"])
    assert list(got[0]) == list(RC_TABLE_COLUMNS)  # the schema of `hsc evaluate --rc-table`: θ is `theta`
    b = load_logits(SHIPPED[0])
    ev = ModelEvaluation.from_bundle(b, imagenet_hierarchy(), name=model, dataset="imagenet1k")
    want = rc_table_rows(ev.setting(ts == "1"), ["climbing", "pareto"], ("severity",),
                         None if dec == "exact" else 2)
    assert got == list(csv.DictReader(io.StringIO(to_csv(want, RC_TABLE_COLUMNS))))
    if dec == "exact":  # ... and the very rows `hsc evaluate --rc-table` writes for this model and setting
        out = tmp_path / "rc.csv"
        assert main(["evaluate", str(SHIPPED[0]), "--out", str(tmp_path / "r.csv"), "--rc-table", str(out),
                     "--rules", "climbing,pareto", "--no-progress"]) == 0
        with open(out, newline="", encoding="utf-8") as fh:
            cli = [r for r in csv.DictReader(fh) if r["loss"] == "severity" and r["ts"] == "false"]
        assert cli == got


def test_sidebar_offers_exactly_what_the_cli_accepts(tmp_path, capsys):
    for path in SHIPPED:
        bundle = load_logits(path)
        offered = set(catalog.subset_options(bundle))
        assert offered == set(file_subsets(bundle.sources, bundle.n_samples)) == {"all", "typical", "easier"}
        for name in offered:  # each one a valid subset for `hsc evaluate` (cheapest: one rule)
            out = tmp_path / f"{name}.csv"
            assert main(["evaluate", str(path), "--subset", name, "--rules", "selective", "--out", str(out),
                         "--no-progress"]) == 0
            with open(out, newline="", encoding="utf-8") as fh:
                assert {r["subset"] for r in csv.DictReader(fh)} == {name}
            assert catalog.subset_mask(bundle, name).sum() == file_subsets(bundle.sources, bundle.n_samples)[name].n
    with pytest.raises(catalog.DataError, match="unknown subset 'nope'; choose one of 'all', 'typical', 'easier'"):
        catalog.subset_mask(load_logits(SHIPPED[0]), "nope")
    capsys.readouterr()


def test_report_accepts_typical(tmp_path, capsys):
    out = tmp_path / "r.html"
    code = main(["report", str(SHIPPED[0]), "--subset", "typical", "--n-resamples", "100", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "subset: typical" in out.read_text(encoding="utf-8")
    assert "hsc report" in out.read_text(encoding="utf-8")
    code = main(["report", str(SHIPPED[0]), "--subset", "nope", "--out", str(tmp_path / "n.html")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown subset 'nope'; choose one of 'all', 'typical', 'easier'" in err
