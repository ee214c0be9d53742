"""``hsc evaluate --rc-table``: the stable schema, rows equal to the evaluation layer's curves,
operating points, Parquet, and one-line errors (exit 2) for bad rules, β ≤ 0 and points."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from conftest import random_tree

from hsc_core.cli import main
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import logits_io
from hsc_core.datasets.logits_io import save_logits
from hsc_core.evaluation import ModelEvaluation
from hsc_core.evaluation.rc_table import POINT_COLUMNS, RC_TABLE_COLUMNS, accepted_counts, rc_table_rows


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("rc")
    tree = random_tree(12, seed=5)
    tree_file = root / "tree.json"
    tree.to_json(tree_file)
    logits, labels = synthetic_logits(tree, 200, top1=0.6, seed=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logits_io, "library_versions", dict)
        path = save_logits(root / "m.npz", logits, labels, np.array([f"s{i}" for i in range(200)]),
                           manifest={"model": "m"}, dtype="float32")
    return tree, tree_file, path, logits, labels


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv], prog="hsc")
    out, err = capsys.readouterr()
    return code, out, err


def _read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_rc_table_schema_and_rows_equal_the_layer(model, tmp_path, capsys):
    tree, tree_file, path, logits, labels = model
    table = tmp_path / "rc.csv"
    code, out, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                          "--rc-table", table, "--rules", "climbing,hf0.5,pareto", "--no-progress", "--workers", 1)
    assert code == 0, err
    assert f"RC table → {table}" in out
    with table.open(newline="", encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == list(RC_TABLE_COLUMNS)
    rows = _read(table)
    es = ModelEvaluation(tree, logits, labels, name="m").setting(ts=True)
    for rule in ("climbing", "hf0.5", "pareto"):
        mine = [r for r in rows if r["rule"] == rule and r["ts"] == "true" and r["loss"] == "01"]
        curve = es.curve(rule)
        assert [float(r["coverage"]) for r in mine] == pytest.approx(curve.coverage.tolist())
        assert [float(r["risk"]) for r in mine] == pytest.approx(curve.risk.tolist())
        assert [float(r["theta"]) for r in mine] == pytest.approx(curve.thresholds.tolist())
        assert {int(r["n"]) for r in mine} == {es.n}
        # n_accepted: the samples not at the root, checked by predicting at each θ
        for r in mine[:: max(1, len(mine) // 15)]:
            nodes, _ = es.predict(rule, float(r["theta"]))
            assert int(r["n_accepted"]) == int((nodes != tree.root).sum())
    assert {r["loss"] for r in rows} == {"01", "severity"} and {r["ts"] for r in rows} == {"true", "false"}


def test_operating_points_file(model, tmp_path, capsys):
    tree, tree_file, path, logits, labels = model
    table = tmp_path / "rc.csv"
    code, out, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                          "--rc-table", table, "--rules", "selective,min_severity", "--coverage-points", "0.5,0.9",
                          "--risk-points", "0.05", "--no-progress", "--workers", 1)
    assert code == 0, err
    points = tmp_path / "rc_points.csv"
    with points.open(newline="", encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == list(POINT_COLUMNS)
    rows = _read(points)
    assert len(rows) == 2 * 2 * 2 * 3   # rules × losses × TS × points
    es = ModelEvaluation(tree, logits, labels, name="m").setting(ts=False)
    row = next(r for r in rows if r["rule"] == "min_severity" and r["ts"] == "false" and r["loss"] == "01"
               and r["target"] == "coverage" and r["point"] == "0.9")
    curve = es.curve("min_severity")
    cov, risk = curve.at(float(row["theta"]))
    assert cov >= 0.9 and float(row["risk"]) == pytest.approx(risk)
    # the largest θ that still reaches the coverage: just above it, coverage falls below 0.9
    above = np.nextafter(np.float32(row["theta"]), np.float32(2))
    if above <= 1:
        assert curve.at(float(above))[0] < 0.9


def test_parquet_when_pyarrow_is_installed(model, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    tree, tree_file, path, _, _ = model
    table = tmp_path / "rc.parquet"
    code, _, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                        "--rc-table", table, "--rules", "climbing", "--no-progress", "--workers", 1)
    assert code == 0, err
    t = pq.read_table(table)
    assert t.column_names == list(RC_TABLE_COLUMNS)
    assert len(_read(tmp_path / "r.csv")) > 0 and t.num_rows > 10


def _one_line(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hsc evaluate: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(("extra", "needles"), [
    (["--rules", "wu_palmer"], ["unknown rule 'wu_palmer'", "hf<β>"]),
    (["--rules", "hf0"], ["beta must be a finite number > 0, got 0.0"]),
    (["--rules", "climbing,hf-2"], ["beta must be a finite number > 0, got -2.0"]),
    (["--coverage-points", "0.5,1.2"], ["--coverage-points: point 1.2 is outside [0, 1]"]),
    (["--risk-points", "-0.1"], ["--risk-points: point -0.1 is outside [0, 1]"]),
    (["--risk-points", "abc"], ["--risk-points: 'abc' is not a number"]),
])
def test_bad_input_is_one_line_exit_2(model, tmp_path, capsys, extra, needles):
    _, tree_file, path, _, _ = model
    code, _, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                        "--rc-table", tmp_path / "rc.csv", *extra, "--no-progress")
    _one_line(code, err, *needles)
    assert not (tmp_path / "r.csv").exists()   # checked before any work


def test_options_need_rc_table_and_a_known_format(model, tmp_path, capsys):
    _, tree_file, path, _, _ = model
    code, _, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                        "--coverage-points", "0.5")
    _one_line(code, err, "need --rc-table PATH")
    code, _, err = _cli(capsys, "evaluate", path, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                        "--rc-table", tmp_path / "rc.xlsx")
    _one_line(code, err, "must end in .csv or .parquet")


def test_accepted_counts_toy():
    from hsc_core.core.rules import DecisionPaths
    # sample 0: leaf (0.4) → root; sample 1: only a node of probability 1.0 that is not the root
    paths = DecisionPaths("x", np.array([[0, 9], [5, 5]]), np.array([[0.4, 1.0], [1.0, 1.0]]), np.array([2, 1]))
    assert accepted_counts(paths, 9, np.array([0.0, 0.4, 0.41, 1.0])).tolist() == [2, 2, 1, 1]


def test_rows_function_matches_schema(model):
    tree, _, _, logits, labels = model
    es = ModelEvaluation(tree, logits, labels, name="m", dataset="d").setting(ts=False)
    rows = rc_table_rows(es, ["selective"])
    assert all(tuple(r) == RC_TABLE_COLUMNS for r in rows)
    assert rows[-1]["theta"] == 1.0 and rows[-1]["n_accepted"] == 0 and rows[0]["coverage"] == 1.0


# ---------------------------------------------------------------------------- workers and the cache
@pytest.fixture(scope="module")
def three_models(model, tmp_path_factory):
    """Three files of the module's tree (different sizes and accuracies) in one folder."""
    tree, tree_file, *_ = model
    root = tmp_path_factory.mktemp("rc_many")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logits_io, "library_versions", dict)
        for k in range(3):
            logits, labels = synthetic_logits(tree, 120 + 40 * k, top1=0.5 + 0.1 * k, seed=10 + k)
            save_logits(root / f"m{k}.npz", logits, labels, np.array([f"s{i}" for i in range(labels.size)]),
                        manifest={"model": f"m{k}"}, dtype="float32")
    return tree_file, root


RC_ARGS = ("--rules", "selective,climbing,hf0.5,pareto", "--coverage-points", "0.5,0.9", "--risk-points", "0.1")


def _rc_run(capsys, tree_file, root, out_dir, *extra):
    code, out, err = _cli(capsys, "evaluate", root, "--hierarchy", tree_file, "--out", out_dir / "r.csv",
                          "--rc-table", out_dir / "rc.csv", *RC_ARGS, "--no-progress", *extra)
    assert code == 0, err
    return out, err


def test_rc_table_is_computed_by_the_workers_one_or_two_give_identical_files(three_models, tmp_path, capsys,
                                                                               monkeypatch):
    from hsc_core.pipeline import many_models as evaluate

    tree_file, root = three_models
    calls = []
    real = evaluate._model_evaluation
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    _rc_run(capsys, tree_file, root, tmp_path / "one", "--workers", 1)
    # one evaluation per model, in the worker path, for the results and the RC table together
    assert sorted(calls) == ["m0", "m1", "m2"]
    _rc_run(capsys, tree_file, root, tmp_path / "two", "--workers", 2)
    for name in ("rc.csv", "rc_points.csv", "r.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    rows = _read(tmp_path / "one" / "rc.csv")
    assert [m for m in dict.fromkeys(r["model"] for r in rows)] == ["m0", "m1", "m2"]
    assert {r["rule"] for r in rows} == {"selective", "climbing", "hf0.5", "pareto"}


def test_rc_table_is_cached_and_reused(three_models, tmp_path, capsys, monkeypatch):
    from hsc_core.pipeline import many_models as evaluate

    tree_file, root = three_models
    _rc_run(capsys, tree_file, root, tmp_path, "--workers", 1)
    first = (tmp_path / "rc.csv").read_bytes(), (tmp_path / "rc_points.csv").read_bytes()
    entries = sorted((tmp_path / "r.csv.d").glob("*.rc.npz"))
    assert len(entries) == 3
    calls = []
    real = evaluate._model_evaluation
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    out, err = _rc_run(capsys, tree_file, root, tmp_path, "--workers", 1)
    assert calls == [] and err == "" and "3 reused, 0 recomputed" in out
    assert ((tmp_path / "rc.csv").read_bytes(), (tmp_path / "rc_points.csv").read_bytes()) == first
    # other rules: another entry key, so every model is computed again
    code, _, err = _cli(capsys, "evaluate", root, "--hierarchy", tree_file, "--out", tmp_path / "r.csv",
                        "--rc-table", tmp_path / "rc2.csv", "--rules", "climbing", "--no-progress", "--workers", 1)
    assert code == 0 and sorted(calls) == ["m0", "m1", "m2"]
    # a damaged entry (one byte of a column changed) is recomputed with one line, never used
    calls.clear()
    _rc_run(capsys, tree_file, root, tmp_path, "--workers", 1)   # back to the first tables' entries
    calls.clear()
    target = entries[0]
    with np.load(target) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["table.risk"] = arrays["table.risk"] + 1e-3
    np.savez_compressed(target, **arrays)
    out, err = _rc_run(capsys, tree_file, root, tmp_path, "--workers", 1)
    assert calls == [target.name.split("-")[0]] and "unusable cached RC table (checksum mismatch)" in err
    assert ((tmp_path / "rc.csv").read_bytes(), (tmp_path / "rc_points.csv").read_bytes()) == first


def test_rc_table_on_local_ray_equals_processes(three_models, tmp_path, capsys):
    """Starts a private local Ray (about 10–20 s)."""
    pytest.importorskip("ray")
    tree_file, root = three_models
    (tmp_path / "local").mkdir()
    (tmp_path / "ray").mkdir()
    _rc_run(capsys, tree_file, root, tmp_path / "local", "--workers", 2)
    _rc_run(capsys, tree_file, root, tmp_path / "ray", "--ray", "local", "--workers", 2)
    for name in ("rc.csv", "rc_points.csv"):
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes(), name
