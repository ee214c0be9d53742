"""``hsc evaluate``: rows against an independent computation, many models = single models, resume,
local Ray, the Table-1 summary, and the one-line errors of bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, random_tree
from hsc_core.cli import main
from hsc_core.core.evaluation import rc_curves_from_logits
from hsc_core.core.probabilities import fit_temperature
from hsc_core.core.protocol import calibration_mask
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets import logits_io
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.pipeline import evaluate

SHIPPED = sorted((REPO / "cached_logits").glob("*.npz"))
RULES = ("selective", "climbing", "jumping", "max_coverage")
LOSSES = ("01", "severity")


# ---------------------------------------------------------------------------- helpers
def _save(path: Path, hierarchy, n: int, top1: float, seed: int) -> Path:
    logits, labels = synthetic_logits(hierarchy, n, top1=top1, seed=seed)
    ids = np.array([f"s{i}" for i in range(n)])
    # No library versions in the manifest: recording them imports torch (seconds), for nothing here.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logits_io, "library_versions", dict)
        return save_logits(path, logits, labels, ids, manifest={"model": path.stem}, dtype="float32")


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Three synthetic models on a random 30-leaf tree, and the tree as a project-JSON file."""
    root = tmp_path_factory.mktemp("synth")
    tree = random_tree(30, seed=3)
    tree_file = root / "tree.json"
    tree.to_json(tree_file)
    models = root / "models"
    files = [_save(models / f"m{k}.npz", tree, 300 + 50 * k, top1=0.55 + 0.1 * k, seed=k) for k in range(3)]
    return tree, tree_file, files


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv], prog="hsc")
    out, err = capsys.readouterr()
    return code, out, err


def _read(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _expected(hierarchy, path: Path, dec=None) -> dict[tuple[str, str, bool], float]:
    """hAURC of every (rule, loss, TS) by the protocol, computed here from the file directly."""
    b = load_logits(path)
    cal = calibration_mask(b.labels, 0.1, 0)
    t = fit_temperature(b.logits[cal], b.labels[cal])
    out = {}
    for scaled, temp in ((False, 1.0), (True, t)):
        curves = rc_curves_from_logits(hierarchy, b.logits[~cal], b.labels[~cal], temperature=temp, dec=dec)
        for (rule, loss), curve in curves.items():
            out[(rule, loss, scaled)] = curve.haurc
    out["T"] = t
    out["top1"] = float((b.logits[~cal].argmax(1) == b.labels[~cal]).mean())
    return out


def _by_key(rows: list[dict]) -> dict[tuple, dict]:
    return {(r["model"], r["rule"], r["loss"], r["temperature_scaled"]): r for r in rows}


# ---------------------------------------------------------------------------- values
def test_rows_equal_independent_computation(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    out = tmp_path / "res.csv"
    code, stdout, err = _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", out, "--workers", 2)
    assert code == 0, err
    rows = _read(out)
    assert len(rows) == 3 * 4 * 2 * 2
    assert set(rows[0]) >= {"model", "rule", "loss", "temperature_scaled", "haurc", "gain_percent", "top1", "n_samples"}
    keyed = _by_key(rows)
    assert len(keyed) == len(rows)
    for f in files:
        exp = _expected(tree, f)
        n = load_logits(f).n_samples
        for scaled in (False, True):
            for loss in LOSSES:
                sel = exp[("selective", loss, scaled)]
                for rule in RULES:
                    r = keyed[(f.stem, rule, loss, "true" if scaled else "false")]
                    h = exp[(rule, loss, scaled)]
                    assert float(r["haurc"]) == pytest.approx(h, rel=1e-12, abs=1e-15)
                    assert float(r["haurc_x1000"]) == pytest.approx(1000 * h, rel=1e-12)
                    assert float(r["gain_percent"]) == pytest.approx(100 * (sel - h) / sel, rel=1e-9, abs=1e-12)
                    assert float(r["temperature"]) == pytest.approx(exp["T"] if scaled else 1.0, rel=1e-12)
                    assert float(r["top1"]) == pytest.approx(exp["top1"], rel=1e-12)
                    assert int(r["n_samples"]) == n
                    assert int(r["n_cal"]) == round(0.1 * n) and int(r["n_eval"]) == n - round(0.1 * n)
                    assert r["dec"] == "exact" and r["dataset"] == "custom"
                assert float(keyed[(f.stem, "selective", loss, "true" if scaled else "false")]["gain_percent"]) == 0.0
        # TS really changes the numbers (T was fitted, not 1).
        assert exp["T"] != pytest.approx(1.0, abs=1e-3)
        assert exp[("climbing", "01", True)] != exp[("climbing", "01", False)]
    assert "Climbing" in stdout and "±" in stdout and "mean ± SEM over 3 models" in stdout


def test_models_and_summary_tables(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    out = tmp_path / "res.csv"
    code, stdout, _ = _cli(capsys, "evaluate", files[0].parent, "--hierarchy", tree_file, "--out", out)
    assert code == 0
    rows, models = _read(out), _read(tmp_path / "res_models.csv")
    summary = _read(tmp_path / "res_summary.csv")
    assert [m["model"] for m in models] == ["m0", "m1", "m2"]  # a folder is read in name order
    keyed = _by_key(rows)
    for m in models:
        assert float(m["haurc_x1000_climbing"]) == float(keyed[(m["model"], "climbing", "01", "false")]["haurc_x1000"])
        assert float(m["haurc_x1000_jumping_severity_ts"]) == float(
            keyed[(m["model"], "jumping", "severity", "true")]["haurc_x1000"])
        assert float(m["gain_percent_max_coverage_ts"]) == float(
            keyed[(m["model"], "max_coverage", "01", "true")]["gain_percent"])
        assert float(m["temperature"]) == float(keyed[(m["model"], "climbing", "01", "true")]["temperature"])
        assert "gain_percent_selective" not in m
    assert len(summary) == 2 * 2 * 4
    for s in summary:
        vals = np.array([float(keyed[(k, s["rule"], s["loss"], s["temperature_scaled"])]["haurc_x1000"])
                         for k in ("m0", "m1", "m2")])
        gains = np.array([float(keyed[(k, s["rule"], s["loss"], s["temperature_scaled"])]["gain_percent"])
                          for k in ("m0", "m1", "m2")])
        assert int(s["n_models"]) == 3
        assert float(s["haurc_x1000_mean"]) == pytest.approx(vals.mean(), rel=1e-12)
        assert float(s["haurc_x1000_sem"]) == pytest.approx(vals.std(ddof=1) / math.sqrt(3), rel=1e-9)
        assert float(s["gain_percent_mean"]) == pytest.approx(gains.mean(), rel=1e-9, abs=1e-12)
    # The printed table carries the same numbers, 2 decimals.
    clim = next(s for s in summary if (s["rule"], s["loss"], s["temperature_scaled"]) == ("climbing", "01", "true"))
    assert f"{float(clim['haurc_x1000_mean']):.2f} ± {float(clim['haurc_x1000_sem']):.2f}" in stdout


def test_many_models_equal_single_model_runs(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    code, _, _ = _cli(capsys, "evaluate", files[0].parent / "m*.npz", "--hierarchy", tree_file,
                      "--out", tmp_path / "all.csv", "--dec", 2)
    assert code == 0
    together = _read(tmp_path / "all.csv")
    assert len(together) == 48
    for f in files:
        code, _, _ = _cli(capsys, "evaluate", f, "--hierarchy", tree_file, "--out", tmp_path / f"{f.stem}.csv",
                          "--dec", 2)
        assert code == 0
        alone = _read(tmp_path / f"{f.stem}.csv")
        assert alone == [r for r in together if r["model"] == f.stem]
        # ... and the library function gives the same numbers (authors' dec=2 grid).
        exp = _expected(tree, f, dec=2)
        for r in alone:
            assert float(r["haurc"]) == pytest.approx(exp[(r["rule"], r["loss"], r["temperature_scaled"] == "true")],
                                                      rel=1e-12, abs=1e-15)
            assert r["dec"] == "2"


def test_rerun_skips_finished_models(synth, tmp_path, capsys, monkeypatch):
    tree, tree_file, files = synth
    models = tmp_path / "models"
    models.mkdir()
    copies = []
    for f in files[:2]:
        (models / f.name).write_bytes(f.read_bytes())
        (models / f"{f.stem}.json").write_bytes(f.with_suffix(".json").read_bytes())
        copies.append(models / f.name)
    calls = []
    real = evaluate.evaluate_model
    monkeypatch.setattr(evaluate, "evaluate_model", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    out = tmp_path / "res.csv"
    argv = ("evaluate", models, "--hierarchy", tree_file, "--out", out, "--workers", 1)  # in-process: counted
    assert _cli(capsys, *argv)[0] == 0
    assert sorted(calls) == ["m0", "m1"]
    first = out.read_bytes()
    cache = sorted((tmp_path / "res.csv.d").glob("*.json"))
    assert [p.name.split("-")[0] for p in cache] == ["m0", "m1"]
    stamps = [p.stat().st_mtime_ns for p in cache]

    calls.clear()
    code, stdout, _ = _cli(capsys, *argv)
    assert code == 0 and calls == []
    assert "2 reused" in stdout
    assert out.read_bytes() == first
    assert [p.stat().st_mtime_ns for p in cache] == stamps

    # A changed file is evaluated again, the unchanged one is not; other settings are a new result.
    _save(copies[1], tree, 320, top1=0.6, seed=11)
    assert _cli(capsys, *argv)[0] == 0 and calls == ["m1"]
    calls.clear()
    assert _cli(capsys, *argv, "--seed", 1)[0] == 0 and sorted(calls) == ["m0", "m1"]
    calls.clear()
    assert _cli(capsys, *argv, "--seed", 1, "--recompute")[0] == 0 and sorted(calls) == ["m0", "m1"]


def test_shipped_logits_without_hierarchy(tmp_path, capsys):
    if not SHIPPED:
        pytest.skip("no shipped cached_logits/*.npz")
    out = tmp_path / "shipped.csv"
    code, stdout, err = _cli(capsys, "evaluate", REPO / "cached_logits", "--out", out)
    assert code == 0, err
    rows = _read(out)
    assert len(rows) == len(SHIPPED) * 16
    assert {r["dataset"] for r in rows} == {"imagenet1k"}
    assert {int(r["n_samples"]) for r in rows} == {1894}
    exp = _expected(imagenet_hierarchy(), SHIPPED[0])
    for r in rows:
        if r["model"] == SHIPPED[0].stem:
            assert float(r["haurc"]) == pytest.approx(exp[(r["rule"], r["loss"], r["temperature_scaled"] == "true")],
                                                      rel=1e-12)
    # Known values of this data: T is fitted below 1 and TS makes Climbing beat Selective on every model.
    keyed = _by_key(rows)
    for f in SHIPPED:
        assert float(keyed[(f.stem, "climbing", "01", "true")]["temperature"]) < 1
        assert float(keyed[(f.stem, "climbing", "01", "true")]["gain_percent"]) > 5
    assert "imagenet1k — 0/1 loss, mean ± SEM over 3 models" in stdout


def test_ray_local_gives_identical_numbers(synth, tmp_path, capsys):
    """Starts a private local Ray (about 10–20 s): the one Ray test."""
    pytest.importorskip("ray")
    tree, tree_file, files = synth
    assert _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", tmp_path / "local.csv")[0] == 0
    code, _, err = _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", tmp_path / "ray.csv",
                        "--ray", "local", "--workers", 2)
    assert code == 0, err
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    assert (tmp_path / "ray_models.csv").read_bytes() == (tmp_path / "local_models.csv").read_bytes()


# ---------------------------------------------------------------------------- bad input
def _one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hsc evaluate: error: ")
    for needle in needles:
        assert needle in lines[0]


def test_missing_file_and_empty_inputs(synth, tmp_path, capsys):
    _, tree_file, files = synth
    code, _, err = _cli(capsys, "evaluate", files[0], tmp_path / "nope.npz", "--hierarchy", tree_file,
                        "--out", tmp_path / "r.csv")
    _one_line_error(code, err, "nope.npz", "not found")
    assert not (tmp_path / "r.csv").exists()  # nothing ran
    (tmp_path / "empty").mkdir()
    _one_line_error(*_cli(capsys, "evaluate", tmp_path / "empty")[::2], "holds no .npz")
    _one_line_error(*_cli(capsys, "evaluate", str(tmp_path / "x*.npz"))[::2], "matches no .npz")


def test_bad_files_fail_alone_and_keep_the_others(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a_good.npz").write_bytes(files[0].read_bytes())
    data = files[1].read_bytes()
    (folder / "b_truncated.npz").write_bytes(data[: len(data) // 2])
    out = tmp_path / "r.csv"
    code, _, err = _cli(capsys, "evaluate", folder, "--hierarchy", tree_file, "--out", out)
    _one_line_error(code, err, "b_truncated.npz", "truncated or corrupt", "the other 1 model is in")
    rows = _read(out)
    assert len(rows) == 16 and {r["model"] for r in rows} == {"a_good"}
    assert len(list((tmp_path / "r.csv.d").glob("a_good-*.json"))) == 1

    # NaN logits (written by hand: the writer refuses them).
    b = load_logits(files[2])
    logits = b.logits.copy()
    logits[5, 3] = np.nan
    np.savez(tmp_path / "nan.npz", logits=logits, labels=b.labels, sample_ids=b.sample_ids)
    code, _, err = _cli(capsys, "evaluate", tmp_path / "nan.npz", "--hierarchy", tree_file, "--out", out)
    _one_line_error(code, err, "nan.npz", "NaN", "row 5")


def test_hierarchy_mismatches(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    # 100-class logits and no --hierarchy: no built-in tree fits.
    rng = np.random.default_rng(0)
    c100 = tmp_path / "c100.npz"
    np.savez(c100, logits=rng.normal(size=(40, 100)), labels=rng.integers(0, 100, 40),
             sample_ids=np.array([f"s{i}" for i in range(40)]))
    code, _, err = _cli(capsys, "evaluate", c100, "--out", tmp_path / "r.csv")
    _one_line_error(code, err, "c100.npz", "100-class", "--hierarchy")
    # 30-class logits against the 1000-leaf ImageNet tree.
    imagenet_json = tmp_path / "imagenet.json"
    imagenet_hierarchy().to_json(imagenet_json)
    code, _, err = _cli(capsys, "evaluate", files[0], "--hierarchy", imagenet_json, "--out", tmp_path / "r.csv")
    _one_line_error(code, err, "m0.npz", "30 classes", "1000 leaves")


def test_bad_options(synth, tmp_path, capsys):
    _, tree_file, files = synth
    for argv, needle in [
        (("--dec", 9), "--dec must be between 0 and 6"),
        (("--dec", -1), "--dec must be between 0 and 6"),
        (("--cal-fraction", 1.5), "--cal-fraction"),
        (("--workers", 0), "--workers"),
        (("--out", tmp_path / "r.txt"), "--out must name a .csv"),
        (("--classes", tree_file), "--classes"),
    ]:
        code, _, err = _cli(capsys, "evaluate", files[0], *argv)
        _one_line_error(code, err, needle)
    bad_tree = tmp_path / "tree.json"
    bad_tree.write_text(json.dumps({"format": "nope"}))
    code, _, err = _cli(capsys, "evaluate", files[0], "--hierarchy", bad_tree, "--out", tmp_path / "r.csv")
    _one_line_error(code, err)


# ---------------------------------------------------------------------------- hierarchy sources
def test_csv_hierarchy_with_class_list_matches_json(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    # The same tree as a parent,child edge list in shuffled order; the class list fixes the leaf order.
    edges = [(tree.node_ids[p], tree.node_ids[c]) for c, p in enumerate(tree.parent.tolist()) if p >= 0]
    order = np.random.default_rng(1).permutation(len(edges))
    csv_tree = tmp_path / "tree.csv"
    csv_tree.write_text("parent,child\n" + "".join(f"{edges[k][0]},{edges[k][1]}\n" for k in order))
    classes = tmp_path / "classes.txt"
    classes.write_text("\n".join(tree.node_ids[: tree.n_leaves]) + "\n")
    assert _cli(capsys, "evaluate", files[0], "--hierarchy", tree_file, "--out", tmp_path / "j.csv")[0] == 0
    code, _, err = _cli(capsys, "evaluate", files[0], "--hierarchy", csv_tree, "--classes", classes,
                        "--out", tmp_path / "c.csv")
    assert code == 0, err
    from_json, from_csv = _read(tmp_path / "j.csv"), _read(tmp_path / "c.csv")
    assert len(from_csv) == 16
    for a, b in zip(from_json, from_csv):
        assert (a["rule"], a["loss"], a["temperature_scaled"]) == (b["rule"], b["loss"], b["temperature_scaled"])
        assert float(b["haurc"]) == pytest.approx(float(a["haurc"]), rel=1e-9, abs=1e-15)
    # Without the class list the leaves come in the file's order, which is not the logits' order:
    # the numbers differ (the tree is the same, the columns are matched to other classes).
    assert _cli(capsys, "evaluate", files[0], "--hierarchy", csv_tree, "--out", tmp_path / "u.csv")[0] == 0
    unordered = _read(tmp_path / "u.csv")
    assert any(float(u["haurc"]) != pytest.approx(float(a["haurc"]), rel=1e-6)
               for u, a in zip(unordered, from_json) if u["rule"] == "climbing")


def test_manifest_dataset_id_picks_the_builtin_tree(tmp_path, capsys):
    from hsc_core.datasets.registry import load_dataset

    cifar = load_dataset("cifar100").hierarchy
    path = _save(tmp_path / "cifar_model.npz", cifar, 400, top1=0.6, seed=5)
    manifest = json.loads(path.with_suffix(".json").read_text())
    manifest["dataset_id"] = "cifar100"
    path.with_suffix(".json").write_text(json.dumps(manifest))
    code, _, err = _cli(capsys, "evaluate", path, "--out", tmp_path / "r.csv")
    assert code == 0, err
    rows = _read(tmp_path / "r.csv")
    assert {r["dataset"] for r in rows} == {"cifar100"} and len(rows) == 16
    exp = _expected(cifar, path)
    for r in rows:
        assert float(r["haurc"]) == pytest.approx(exp[(r["rule"], r["loss"], r["temperature_scaled"] == "true")],
                                                  rel=1e-12)
    # A dataset_id that names no data set: one line, pointing at --hierarchy.
    manifest["dataset_id"] = "no_such_set"
    path.with_suffix(".json").write_text(json.dumps(manifest))
    code, _, err = _cli(capsys, "evaluate", path, "--out", tmp_path / "r2.csv")
    _one_line_error(code, err, "cifar_model.npz", "no_such_set", "--hierarchy")
