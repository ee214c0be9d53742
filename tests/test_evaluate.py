"""``hsc evaluate``: tidy rows against an independent computation and the evaluation layer, many
models = single models, the paper protocol, resume (and damaged cache entries), local Ray, the
Table-1 summary, formula-neutralised CSVs, and the one-line errors of bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, random_tree

from hsc_core.cli import main
from hsc_core.core.logit_chunks import decision_paths_from_logits, rc_curves_from_logits
from hsc_core.core.metric_rules import ALL_RULES
from hsc_core.core.probabilities import fit_temperature
from hsc_core.core.protocol import calibration_mask
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import logits_io
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits, save_logits
from hsc_core.evaluation import (
    RESULT_COLUMNS,
    SUMMARY_COLUMNS,
    ModelEvaluation,
    column_label,
    result_cache,
    summary_text,
)
from hsc_core.pipeline import many_models as evaluate
from hsc_core.pipeline.distributed import LOCAL_RAY, ray_decision_paths, ray_session

SHIPPED = sorted((REPO / "cached_logits").glob("*.npz"))
RULES = ("selective", "climbing", "jumping", "max_coverage")
LOSSES = ("01", "severity")
# Per model: top-1 per setting, T with TS, and hAURC + gain per rule × loss × setting.
# default --rules: every rule of ALL_RULES (top-1 twice, T, hAURC and gain × loss × setting)
ROWS_PER_MODEL = 2 + 1 + 2 * 2 * len(ALL_RULES) * 2


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


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as fh:
        return next(csv.reader(fh))


def _expected(hierarchy, path: Path, dec=None) -> dict:
    """hAURC of every (rule, loss, TS) by the project protocol, computed here from the file directly."""
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
    """(model, metric, rule, loss, ts) → tidy row ("true"/"false" as in the CSV)."""
    return {(r["model"], r["metric"], r["rule"], r["loss"], r["ts"]): r for r in rows}


def _haurc(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["metric"] == "haurc" and r["rule"] in RULES]  # the paper's four: _expected's


def _tf(flag: bool) -> str:
    return "true" if flag else "false"


# ---------------------------------------------------------------------------- values
def test_rows_equal_independent_computation(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    out = tmp_path / "res.csv"
    code, stdout, err = _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", out, "--workers", 2)
    assert code == 0, err
    assert _header(out) == [*RESULT_COLUMNS, "file"]
    rows = _read(out)
    assert len(rows) == 3 * ROWS_PER_MODEL
    keyed = _by_key(rows)
    assert len(keyed) == len(rows)
    for f in files:
        exp = _expected(tree, f)
        n = load_logits(f).n_samples
        for scaled in (False, True):
            ts = _tf(scaled)
            top1 = keyed[(f.stem, "top1", "", "", ts)]
            assert float(top1["value"]) == pytest.approx(exp["top1"], rel=1e-12)
            for loss in LOSSES:
                sel = exp[("selective", loss, scaled)]
                for rule in RULES:
                    h = exp[(rule, loss, scaled)]
                    r = keyed[(f.stem, "haurc", rule, loss, ts)]
                    g = keyed[(f.stem, "gain_percent", rule, loss, ts)]
                    assert float(r["value"]) == pytest.approx(h, rel=1e-12, abs=1e-15)
                    assert float(g["value"]) == pytest.approx(100 * (sel - h) / sel, rel=1e-9, abs=1e-12)
                    for row in (r, g):
                        assert float(row["temperature"]) == pytest.approx(exp["T"] if scaled else 1.0, rel=1e-12)
                        assert int(row["n_cal"]) == round(0.1 * n) and int(row["n_eval"]) == n - round(0.1 * n)
                        assert row["dec"] == "" and row["dataset"] == "custom" and row["protocol"] == "project"
                        assert row["subset"] == "all" and row["file"] == str(f) and row["ci_low"] == ""
                assert float(keyed[(f.stem, "gain_percent", "selective", loss, ts)]["value"]) == 0.0
        assert float(keyed[(f.stem, "temperature", "", "", "true")]["value"]) == pytest.approx(exp["T"], rel=1e-12)
        # TS really changes the numbers (T was fitted, not 1).
        assert exp["T"] != pytest.approx(1.0, abs=1e-3)
        assert exp[("climbing", "01", True)] != exp[("climbing", "01", False)]
    assert "Climbing" in stdout and "±" in stdout and "mean ± SEM over 3 models" in stdout
    assert "every metric (with or without temperature scaling) is computed on the other 90 %. Split seed: 0." in stdout


def test_rows_are_the_layers_rows(synth, tmp_path, capsys):
    """The CLI only lays out ``ModelEvaluation.results``: the same numbers, to the bit."""
    tree, tree_file, files = synth
    out = tmp_path / "res.csv"
    assert _cli(capsys, "evaluate", files[0], "--hierarchy", tree_file, "--out", out, "--dec", 2)[0] == 0
    b = load_logits(files[0])
    ev = ModelEvaluation(tree, b.logits, b.labels, name="m0", dataset="custom")
    want = [r for ts in (False, True) for r in ev.setting(ts).results(LOSSES, 2, rules=ALL_RULES)]
    got = _read(out)
    assert len(got) == len(want) == ROWS_PER_MODEL
    for g, w in zip(got, want, strict=True):
        assert (g["metric"], g["rule"], g["loss"], g["ts"]) == (w["metric"], w["rule"], w["loss"], _tf(w["ts"]))
        assert float(g["value"]) == w["value"] and g["hierarchy_hash"] == w["hierarchy_hash"]
        assert g["dec"] == ("2" if w["metric"] in ("haurc", "gain_percent") else "")  # top-1 and T need no grid


def test_models_and_summary_tables(synth, tmp_path, capsys):
    _, tree_file, files = synth
    out = tmp_path / "res.csv"
    code, stdout, _ = _cli(capsys, "evaluate", files[0].parent, "--hierarchy", tree_file, "--out", out)
    assert code == 0
    rows, models = _read(out), _read(tmp_path / "res_models.csv")
    summary = _read(tmp_path / "res_summary.csv")
    assert [m["model"] for m in models] == ["m0", "m1", "m2"]  # a folder is read in name order
    keyed = _by_key(rows)
    for m in models:
        k = m["model"]
        assert m["dataset"] == "custom" and m["file"].endswith(f"{k}.npz")
        assert float(m[column_label("haurc", "climbing", ts=False)]) == pytest.approx(
            1000 * float(keyed[(k, "haurc", "climbing", "01", "false")]["value"]), rel=1e-15)
        assert float(m[column_label("haurc", "jumping", "severity", ts=True)]) == pytest.approx(
            1000 * float(keyed[(k, "haurc", "jumping", "severity", "true")]["value"]), rel=1e-15)
        assert float(m["gain % Max-Coverage (TS)"]) == float(
            keyed[(k, "gain_percent", "max_coverage", "01", "true")]["value"])
        assert float(m["T"]) == float(keyed[(k, "temperature", "", "", "true")]["value"])
        assert float(m["top-1 accuracy"]) == float(keyed[(k, "top1", "", "", "false")]["value"])
        assert column_label("gain_percent", "selective", ts=False) not in m
    assert "hAURC×1000 Climbing (TS)" in models[0]
    assert _header(tmp_path / "res_summary.csv") == list(SUMMARY_COLUMNS)
    assert len(summary) == 2 * 2 * len(ALL_RULES)
    for s in summary:
        vals = np.array([1000 * float(keyed[(k, "haurc", s["rule"], s["loss"], s["ts"])]["value"])
                         for k in ("m0", "m1", "m2")])
        gains = np.array([float(keyed[(k, "gain_percent", s["rule"], s["loss"], s["ts"])]["value"])
                          for k in ("m0", "m1", "m2")])
        assert int(s["n_models"]) == 3
        assert float(s["haurc_x1000_mean"]) == pytest.approx(vals.mean(), rel=1e-12)
        assert float(s["haurc_x1000_sem"]) == pytest.approx(vals.std(ddof=1) / math.sqrt(3), rel=1e-9)
        assert float(s["gain_percent_mean"]) == pytest.approx(gains.mean(), rel=1e-9, abs=1e-12)
    # The printed table carries the same numbers, 2 decimals.
    clim = next(s for s in summary if (s["rule"], s["loss"], s["ts"]) == ("climbing", "01", "true"))
    assert f"{float(clim['haurc_x1000_mean']):.2f} ± {float(clim['haurc_x1000_sem']):.2f}" in stdout


def test_format_summary_lays_out_table_1():
    summary = [{"dataset": "toy", "loss": loss, "ts": ts, "rule": rule, "n_models": 2,
                "haurc_x1000_mean": 40.0 + k, "haurc_x1000_sem": 0.5, "gain_percent_mean": 1.5 * k,
                "gain_percent_sem": float("nan")}
               for loss in LOSSES for ts in (False, True) for k, rule in enumerate(RULES)]
    text = summary_text.format_summary(summary, protocol="paper", cal_fraction=0.2, seed=3)
    lines = text.splitlines()
    assert lines[0] == "toy — 0/1 loss, mean ± SEM over 2 models"
    assert lines[1].split() == ["rule", "hAURC×1000", "gain", "%", "hAURC×1000", "(TS)", "gain", "%", "(TS)"]
    assert lines[2].split() == ["Selective", "40.00", "±", "0.50", "–", "40.00", "±", "0.50", "–"]
    assert lines[3].split() == ["Climbing", "41.00", "±", "0.50", "1.50", "41.00", "±", "0.50", "1.50"]
    assert "toy — severity loss, mean ± SEM over 2 models" in lines
    # The protocol sentence names this run's split, not the default 10 %.
    assert lines[-1].startswith("As in the paper's code:") and "20 % calibration split" in lines[-1]
    assert "the other 80 %" in lines[-1] and lines[-1].endswith("Split seed: 3.")


def test_many_models_equal_single_model_runs(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    code, _, _ = _cli(capsys, "evaluate", files[0].parent / "m*.npz", "--hierarchy", tree_file,
                      "--out", tmp_path / "all.csv", "--dec", 2)
    assert code == 0
    together = _read(tmp_path / "all.csv")
    assert len(together) == 3 * ROWS_PER_MODEL
    for f in files:
        code, _, _ = _cli(capsys, "evaluate", f, "--hierarchy", tree_file, "--out", tmp_path / f"{f.stem}.csv",
                          "--dec", 2)
        assert code == 0
        alone = _read(tmp_path / f"{f.stem}.csv")
        assert alone == [r for r in together if r["model"] == f.stem]
        # ... and the library function gives the same numbers (authors' dec=2 grid).
        exp = _expected(tree, f, dec=2)
        for r in _haurc(alone):
            assert float(r["value"]) == pytest.approx(exp[(r["rule"], r["loss"], r["ts"] == "true")],
                                                      rel=1e-12, abs=1e-15)
            assert r["dec"] == "2"


def test_paper_protocol(synth, tmp_path, capsys):
    tree, tree_file, files = synth
    out = tmp_path / "paper.csv"
    code, stdout, err = _cli(capsys, "evaluate", files[1], "--hierarchy", tree_file, "--out", out,
                             "--protocol", "paper")
    assert code == 0, err
    rows = _read(out)
    b = load_logits(files[1])
    n_held_out = b.n_samples - round(0.1 * b.n_samples)
    assert {r["protocol"] for r in rows} == {"paper"}
    assert {(r["ts"], int(r["n_eval"])) for r in rows} == {("false", b.n_samples), ("true", n_held_out)}
    ev = ModelEvaluation(tree, b.logits, b.labels, name="m1", dataset="custom", protocol="paper")
    want = [r for ts in (False, True) for r in ev.setting(ts).results(LOSSES, rules=ALL_RULES)]
    assert [float(r["value"]) for r in rows] == [w["value"] for w in want]
    # The project protocol scores no-TS on the held-out split only: other numbers.
    assert _cli(capsys, "evaluate", files[1], "--hierarchy", tree_file, "--out", tmp_path / "project.csv")[0] == 0
    project = _by_key(_read(tmp_path / "project.csv"))
    paper = _by_key(rows)
    key = ("m1", "haurc", "climbing", "01", "false")
    assert paper[key]["value"] != project[key]["value"]
    ts_key = ("m1", "haurc", "climbing", "01", "true")
    assert paper[ts_key]["value"] == project[ts_key]["value"]
    assert "metrics without temperature scaling use all samples" in stdout
    models = _read(tmp_path / "paper_models.csv")
    assert int(models[0]["n_eval"]) == b.n_samples


@pytest.mark.parametrize("protocol", ["project", "paper"])
def test_progress_counts_the_samples_of_both_settings(synth, protocol):
    tree, _, files = synth
    calls = []
    rows = evaluate.evaluate_model(files[0], tree, protocol=protocol, progress=lambda d, t: calls.append((d, t)))
    n_eval = {r["ts"]: r["n_eval"] for r in rows}
    total = n_eval[False] + n_eval[True]
    assert {t for _, t in calls} == {total} and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and (n_eval[False], total) in calls


def test_bad_protocol_is_one_line(synth, tmp_path, capsys):
    _, tree_file, files = synth
    code, _, err = _cli(capsys, "evaluate", files[0], "--hierarchy", tree_file, "--protocol", "authors",
                        "--out", tmp_path / "r.csv")
    _one_line_error(code, err, "unknown protocol 'authors'; choose one of project, paper")


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
    real = evaluate._model_evaluation  # the one evaluation of each computed model
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    out = tmp_path / "res.csv"
    argv = ("evaluate", models, "--hierarchy", tree_file, "--out", out, "--workers", 1)  # in-process: counted
    assert _cli(capsys, *argv)[0] == 0
    assert sorted(calls) == ["m0", "m1"]
    first = out.read_bytes()
    cache = sorted((tmp_path / "res.csv.d").glob("*.json"))
    assert [p.name.split("-")[0] for p in cache] == ["m0", "m1"]
    assert json.loads(cache[0].read_text())["format"] == result_cache.CACHE_FORMAT
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
    assert _cli(capsys, *argv, "--seed", 1, "--protocol", "paper")[0] == 0 and sorted(calls) == ["m0", "m1"]
    calls.clear()
    assert _cli(capsys, *argv, "--seed", 1, "--protocol", "paper", "--recompute")[0] == 0
    assert sorted(calls) == ["m0", "m1"]


def _reseal(entry: dict) -> dict:
    """The entry with its checksum recomputed (as a hand-editor who knows the scheme would)."""
    return {**entry, "checksum": result_cache.entry_checksum(entry)}


def _set(entry: dict, k: int, **values) -> dict:
    rows = [dict(r) for r in entry["rows"]]
    rows[k].update(values)
    return {**entry, "rows": rows}


# (damage, whether the checksum is recomputed after it, what the one line on stderr says)
DAMAGES = {
    "empty": (lambda e: {**e, "rows": []}, True, "its rows are not a non-empty list"),
    "not-a-list": (lambda e: {**e, "rows": "x"}, True, "its rows are not a non-empty list"),
    "numbers": (lambda e: {**e, "rows": [1, 2]}, True, "row 0 is not a dict"),
    "empty-dict": (lambda e: {**e, "rows": [{}]}, True, "row 0 is not a dict"),
    "extra-key": (lambda e: _set(e, 0, extra=1), True, "row 0 is not a dict with the 24 result columns"),
    "missing-key": (lambda e: {**e, "rows": [{k: v for k, v in e["rows"][0].items() if k != "value"}]
                                           + e["rows"][1:]}, True, "row 0 is not a dict"),
    "text-value": (lambda e: _set(e, 0, value="0.5"), True, "its value is not a number"),
    "not-a-dict": (lambda e: {**e, "rows": e["rows"][:1] + [7]}, True, "row 1 is not a dict"),
    "nan-n-eval": (lambda e: _set(e, 3, n_eval=float("nan")), True, "its n_eval is not an integer"),
    "nan-haurc": (lambda e: _set(e, 3, value=float("nan")), True, "not a finite number"),
    "other-model": (lambda e: {**e, "rows": [{**r, "model": "m1"} for r in e["rows"]]}, True,
                    "its model 'm1' is not this file's 'm0'"),
    "duplicate-row": (lambda e: {**e, "rows": e["rows"] + e["rows"][-1:]}, True, "not one of each"),
    "dropped-row": (lambda e: {**e, "rows": e["rows"][:-1]}, True, "not one of each"),
    "other-protocol": (lambda e: {**e, "rows": [{**r, "protocol": "paper"} for r in e["rows"]]}, True,
                       "its protocol or seed is not this run's"),
    "tampered-value": (lambda e: _set(e, 3, value=e["rows"][3]["value"] / 2), False, "checksum mismatch"),
    "no-checksum": (lambda e: {k: v for k, v in e.items() if k != "checksum"}, False, "checksum mismatch"),
    "not-an-object": (lambda e: [e], False, "not a JSON object"),
    "truncated": ("truncated", False, "not valid JSON"),
    "garbage": ("{not json", False, "not valid JSON"),
    "binary": (b"\xff\xfe\x00garbage", False, "unreadable (UnicodeDecodeError)"),
    "deep": ("[" * 100_000 + "]" * 100_000, False, "unreadable (RecursionError)"),
    "huge-int": (lambda e: {**e, "rows": [{**r, "value": 10 ** 400} for r in e["rows"]]}, True, "not a finite number"),
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_unusable_cache_entry_is_recomputed(synth, tmp_path, capsys, monkeypatch, name):
    """Whatever an entry holds, the run recomputes it with one line on stderr, reports the right
    counts and writes exactly the CSVs of a clean run (and repairs the entry)."""
    _, tree_file, files = synth
    clean = tmp_path / "clean" / "res.csv"
    assert _cli(capsys, "evaluate", files[0], files[1], "--hierarchy", tree_file, "--out", clean)[0] == 0
    out = tmp_path / "res.csv"
    argv = ("evaluate", files[0], files[1], "--hierarchy", tree_file, "--out", out, "--workers", 1)
    assert _cli(capsys, *argv)[0] == 0
    entry = result_cache.cache_file(tmp_path / "res.csv.d", files[0])
    data = json.loads(entry.read_text())
    assert data["checksum"] == result_cache.entry_checksum(data) and data["rows"]
    damage, reseal, why = DAMAGES[name]
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    elif isinstance(damage, (str, bytes)):
        entry.write_bytes(damage.encode() if isinstance(damage, str) else damage)
    else:
        damaged = damage(data)
        entry.write_text(json.dumps(_reseal(damaged) if reseal else damaged))
    calls = []
    real = evaluate._model_evaluation  # the one evaluation of each computed model
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    code, stdout, err = _cli(capsys, *argv)
    assert code == 0, err
    assert calls == ["m0"]  # the damaged one again, the good one from the cache
    assert "2 models, 1 reused, 1 recomputed →" in stdout
    assert err.count("\n") == 1 and why in err and err.rstrip().endswith("; recomputing"), err
    assert err.startswith(f"{entry}: unusable cached result (")
    for suffix in (".csv", "_models.csv", "_summary.csv"):
        assert (tmp_path / f"res{suffix}").read_bytes() == (tmp_path / "clean" / f"res{suffix}").read_bytes()
    assert json.loads(entry.read_text()) == data  # repaired
    # ... and reused from then on, silently.
    code, stdout, err = _cli(capsys, *argv)
    assert code == 0 and calls == ["m0"] and "2 models, 2 reused, 0 recomputed" in stdout and err == ""


def test_entry_of_one_file_is_not_reused_for_another(synth, tmp_path, capsys):
    """An intact entry copied over another file's entry (or a stale checksum-valid one) is not
    that file's result: another key, so it is recomputed."""
    _, tree_file, files = synth
    out = tmp_path / "res.csv"
    argv = ("evaluate", files[0], files[1], "--hierarchy", tree_file, "--out", out, "--workers", 1)
    assert _cli(capsys, *argv)[0] == 0
    first = out.read_bytes()
    cache = tmp_path / "res.csv.d"
    result_cache.cache_file(cache, files[0]).write_bytes(result_cache.cache_file(cache, files[1]).read_bytes())
    code, stdout, err = _cli(capsys, *argv)
    assert code == 0 and "1 reused, 1 recomputed" in stdout and err == ""  # a stale key: no note
    assert out.read_bytes() == first


def _copy_model(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(src.read_bytes())
    dst.with_suffix(".json").write_bytes(src.with_suffix(".json").read_bytes())


def test_a_file_with_nothing_kept_is_read_once(synth, tmp_path, capsys, monkeypatch):
    """With no kept entry to look up, the file is not hashed before its evaluation: the worker reads
    it once and keys what it read. With an entry, it is hashed to look the entry up, and reused."""
    _, tree_file, files = synth
    hashed = []
    real = evaluate.file_digest
    monkeypatch.setattr(evaluate, "file_digest", lambda p: hashed.append(Path(p).name) or real(p))
    argv = ("evaluate", files[0], "--hierarchy", tree_file, "--out", tmp_path / "res.csv")
    code, stdout, _ = _cli(capsys, *argv)
    assert code == 0 and hashed == [] and "reused" not in stdout
    code, stdout, _ = _cli(capsys, *argv)
    assert code == 0 and hashed == [files[0].name] and "1 model, 1 reused, 0 recomputed" in stdout
    code, stdout, _ = _cli(capsys, *argv, "--recompute")  # nothing is looked up
    assert code == 0 and hashed == [files[0].name]


def test_file_replaced_mid_run_is_never_reused(synth, tmp_path, capsys, monkeypatch):
    """The file is replaced after the run hashed it (to look up its kept entry, made under another seed)
    and before the worker read it: the run's rows and cache entry are of what the worker read."""
    _, tree_file, files = synth
    target = tmp_path / "models" / "m0.npz"
    _copy_model(files[0], target)
    clean = tmp_path / "clean.csv"
    assert _cli(capsys, "evaluate", target, "--hierarchy", tree_file, "--out", clean)[0] == 0
    other = tmp_path / "other" / "m0.npz"  # m1's content under m0's name: the rows differ only in numbers
    _copy_model(files[1], other)
    assert _cli(capsys, "evaluate", other, "--hierarchy", tree_file, "--out", tmp_path / "other.csv")[0] == 0

    real_read = result_cache.read_content

    def swap_then_read(path):
        _copy_model(other, target)
        return real_read(path)

    out = tmp_path / "res.csv"  # an entry for target, of another seed: looked up (the file hashed), not reused
    assert _cli(capsys, "evaluate", target, "--hierarchy", tree_file, "--out", out, "--seed", 1)[0] == 0
    monkeypatch.setattr(result_cache, "read_content", swap_then_read)
    calls = []
    real = evaluate._model_evaluation  # the one evaluation of each computed model
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    argv = ("evaluate", target, "--hierarchy", tree_file, "--out", out, "--workers", 1)
    code, _, err = _cli(capsys, *argv)
    assert code == 0 and calls == ["m0"]
    assert err == f"note: {target} changed while this run read it; its results are of the content evaluated\n"
    values = [r["value"] for r in _read(out)]
    assert values == [r["value"] for r in _read(tmp_path / "other.csv")]  # the numbers of what was read
    assert values != [r["value"] for r in _read(clean)]
    entry = json.loads(result_cache.cache_file(tmp_path / "res.csv.d", target).read_text())
    assert entry["content_sha256"] == result_cache.file_digest(other)[0] != result_cache.file_digest(files[0])[0]
    assert "changed" in entry["note"] and entry["checksum"] == result_cache.entry_checksum(entry)

    # Restored: the entry is of the other content, so it is recomputed, not reused.
    monkeypatch.setattr(result_cache, "read_content", real_read)
    _copy_model(files[0], target)
    calls.clear()
    code, stdout, err = _cli(capsys, *argv)
    assert code == 0 and calls == ["m0"] and err == ""
    assert "1 model, 0 reused, 1 recomputed" in stdout
    assert out.read_bytes() == clean.read_bytes()
    entry = json.loads(result_cache.cache_file(tmp_path / "res.csv.d", target).read_text())
    assert entry["content_sha256"] == result_cache.file_digest(files[0])[0] and "note" not in entry
    calls.clear()
    assert _cli(capsys, *argv)[0] == 0 and calls == []  # now reused
    assert out.read_bytes() == clean.read_bytes()


def test_file_replaced_after_the_worker_read_it(synth, tmp_path, capsys, monkeypatch):
    """Replaced once the worker has decoded the file (in one pass that hashes it): the rows and
    entry are of the bytes read (the original), so a rerun on the replacement recomputes and one
    on the restored file reuses."""
    _, tree_file, files = synth
    target = tmp_path / "models" / "m0.npz"
    _copy_model(files[0], target)
    clean = tmp_path / "clean.csv"
    assert _cli(capsys, "evaluate", target, "--hierarchy", tree_file, "--out", clean)[0] == 0

    real_finish = result_cache.LogitsStream.finish

    def finish_then_swap(stream):
        bundle = real_finish(stream)
        _copy_model(files[1], target)  # rewritten in place, before the hash is finished
        return bundle

    monkeypatch.setattr(result_cache.LogitsStream, "finish", finish_then_swap)
    out = tmp_path / "res.csv"
    argv = ("evaluate", target, "--hierarchy", tree_file, "--out", out, "--workers", 1)
    code, _, err = _cli(capsys, *argv)
    assert code == 0 and err == ""  # what was read is what was looked up
    assert out.read_bytes() == clean.read_bytes()
    monkeypatch.setattr(result_cache.LogitsStream, "finish", real_finish)
    calls = []
    real = evaluate._model_evaluation  # the one evaluation of each computed model
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    assert _cli(capsys, *argv)[0] == 0 and calls == ["m0"]  # the replacement: another key
    assert out.read_bytes() != clean.read_bytes()
    _copy_model(files[0], target)
    calls.clear()
    assert _cli(capsys, *argv)[0] == 0 and calls == ["m0"]  # the entry is the replacement's now
    assert out.read_bytes() == clean.read_bytes()


def test_manifest_change_is_a_new_result(synth, tmp_path, capsys, monkeypatch):
    """The manifest is hashed with the arrays (it can change the data set and so the tree)."""
    _, tree_file, files = synth
    target = tmp_path / "models" / "m0.npz"
    _copy_model(files[0], target)
    out = tmp_path / "res.csv"
    argv = ("evaluate", target, "--hierarchy", tree_file, "--out", out, "--workers", 1)
    assert _cli(capsys, *argv)[0] == 0
    calls = []
    real = evaluate._model_evaluation  # the one evaluation of each computed model
    monkeypatch.setattr(evaluate, "_model_evaluation", lambda b, *a, **k: calls.append(b.name) or real(b, *a, **k))
    manifest = json.loads(target.with_suffix(".json").read_text())
    target.with_suffix(".json").write_text(json.dumps({**manifest, "note": "edited"}))
    assert _cli(capsys, *argv)[0] == 0 and calls == ["m0"]
    target.with_suffix(".json").unlink()
    assert _cli(capsys, *argv)[0] == 0 and calls == ["m0", "m0"]
    calls.clear()
    assert _cli(capsys, *argv)[0] == 0 and calls == []


def test_formula_names_are_neutralised(synth, tmp_path, capsys):
    _, tree_file, files = synth
    hostile = tmp_path / "=HYPERLINK(1).npz"
    hostile.write_bytes(files[0].read_bytes())
    out = tmp_path / "r.csv"
    assert _cli(capsys, "evaluate", hostile, "--hierarchy", tree_file, "--out", out)[0] == 0
    for name in ("r.csv", "r_models.csv"):
        rows = _read(tmp_path / name)
        assert {r["model"] for r in rows} == {"'=HYPERLINK(1)"}, name
        assert not any(v.startswith("=") for r in rows for v in r.values())
    assert _read(out)[0]["file"] == str(hostile)  # an absolute path: starts with "/", nothing to neutralise
    assert "'=HYPERLINK(1)" in (tmp_path / "r.csv").read_text(encoding="utf-8")


def test_files_sharing_a_stem_keep_their_own_rows(synth, tmp_path, capsys):
    _, tree_file, files = synth
    for folder, f in (("a", files[0]), ("b", files[1])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "model.npz").write_bytes(f.read_bytes())
    out = tmp_path / "r.csv"
    code, _, err = _cli(capsys, "evaluate", tmp_path / "a" / "model.npz", tmp_path / "b" / "model.npz",
                        "--hierarchy", tree_file, "--out", out)
    assert code == 0, err
    models = _read(tmp_path / "r_models.csv")
    assert [m["model"] for m in models] == [str(tmp_path / "a" / "model"), str(tmp_path / "b" / "model")]
    assert models[0]["T"] != models[1]["T"]


def test_shipped_logits_without_hierarchy(tmp_path, capsys):
    if not SHIPPED:
        pytest.skip("no shipped cached_logits/*.npz")
    out = tmp_path / "shipped.csv"
    code, stdout, err = _cli(capsys, "evaluate", REPO / "cached_logits", "--out", out)
    assert code == 0, err
    rows = _read(out)
    assert len(rows) == len(SHIPPED) * ROWS_PER_MODEL
    assert {r["dataset"] for r in rows} == {"imagenet1k"}
    assert {int(r["n_eval"]) + int(r["n_cal"]) for r in rows} == {1894}
    exp = _expected(imagenet_hierarchy(), SHIPPED[0])
    for r in _haurc(rows):
        if r["model"] == SHIPPED[0].stem:
            assert float(r["value"]) == pytest.approx(exp[(r["rule"], r["loss"], r["ts"] == "true")], rel=1e-12)
    # Known values of this data: T is fitted below 1 and TS makes Climbing beat Selective on every model.
    keyed = _by_key(rows)
    for f in SHIPPED:
        assert float(keyed[(f.stem, "temperature", "", "", "true")]["value"]) < 1
        assert float(keyed[(f.stem, "gain_percent", "climbing", "01", "true")]["value"]) > 5
    assert "imagenet1k — 0/1 loss, mean ± SEM over 3 models" in stdout
    # The numbers docs/guide/cache_and_evaluate.md quotes.
    assert "Selective     49.13 ± 1.22              –     45.52 ± 0.54" in stdout
    assert "Climbing      50.32 ± 2.83   -2.27 ± 3.44     39.28 ± 0.67  13.73 ± 0.56" in stdout
    # A rerun reuses every model: the worker keys its entry with the built-in tree the lookup expects.
    before = out.read_bytes()
    code, stdout, err = _cli(capsys, "evaluate", REPO / "cached_logits", "--out", out)
    assert code == 0 and err == "" and f"{len(SHIPPED)} models, {len(SHIPPED)} reused, 0 recomputed" in stdout
    assert out.read_bytes() == before


def test_ray_local_gives_identical_numbers(synth, tmp_path, capsys):
    """Starts a private local Ray (about 10–20 s): the one Ray test."""
    pytest.importorskip("ray")
    _, tree_file, files = synth
    assert _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", tmp_path / "local.csv")[0] == 0
    code, _, err = _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", tmp_path / "ray.csv",
                        "--ray", "local", "--workers", 2)
    assert code == 0, err
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    assert (tmp_path / "ray_models.csv").read_bytes() == (tmp_path / "local_models.csv").read_bytes()


def test_ray_local_splits_one_files_rows_with_identical_numbers(synth, tmp_path, capsys):
    """One file under ``--ray local``: its task splits the rows across the Ray's two CPUs
    (``ray_decision_paths``), and every number is the plain run's; the split itself, called inside
    a Ray session, gives the plain pass's records bit for bit (blocks of unequal record widths)."""
    ray = pytest.importorskip("ray")
    tree, tree_file, files = synth
    assert _cli(capsys, "evaluate", files[2], "--hierarchy", tree_file, "--out", tmp_path / "plain.csv")[0] == 0
    code, _, err = _cli(capsys, "evaluate", files[2], "--hierarchy", tree_file, "--out", tmp_path / "ray.csv",
                        "--ray", "local", "--workers", 2)
    assert code == 0, err
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "plain.csv").read_bytes()
    logits, _ = synthetic_logits(tree, 400, top1=0.6, seed=9, dtype=np.float16)
    rows = np.arange(1, 400, 3)
    plain = decision_paths_from_logits(tree, logits, 0.8, ALL_RULES, rows=rows)
    with ray_session(LOCAL_RAY, 2):
        assert ray.cluster_resources()["CPU"] == 2  # so the rows go to two tasks
        split = ray_decision_paths(tree, logits, 0.8, ALL_RULES, rows=rows)
    halves = [decision_paths_from_logits(tree, logits, 0.8, ALL_RULES, rows=h) for h in np.array_split(rows, 2)]
    assert any(halves[0][r].nodes.shape[1] != halves[1][r].nodes.shape[1] for r in ALL_RULES)  # padding is tested
    for rule in ALL_RULES:
        for field in ("nodes", "values", "lengths"):
            np.testing.assert_array_equal(getattr(split[rule], field), getattr(plain[rule], field))


def test_processes_give_identical_numbers(synth, tmp_path, capsys):
    _, tree_file, files = synth
    for name, workers in (("one", 1), ("two", 2)):
        assert _cli(capsys, "evaluate", *files, "--hierarchy", tree_file, "--out", tmp_path / f"{name}.csv",
                    "--workers", workers)[0] == 0
    for suffix in (".csv", "_models.csv", "_summary.csv"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"two{suffix}").read_bytes()


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
    _, tree_file, files = synth
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a_good.npz").write_bytes(files[0].read_bytes())
    data = files[1].read_bytes()
    (folder / "b_truncated.npz").write_bytes(data[: len(data) // 2])
    out = tmp_path / "r.csv"
    code, _, err = _cli(capsys, "evaluate", folder, "--hierarchy", tree_file, "--out", out)
    _one_line_error(code, err, "b_truncated.npz", "truncated or corrupt", "the other 1 model is in")
    rows = _read(out)
    assert len(rows) == ROWS_PER_MODEL and {r["model"] for r in rows} == {"a_good"}
    assert len(list((tmp_path / "r.csv.d").glob("a_good-*.json"))) == 1

    # NaN logits (written by hand: the writer refuses them).
    b = load_logits(files[2])
    logits = b.logits.copy()
    logits[5, 3] = np.nan
    np.savez(tmp_path / "nan.npz", logits=logits, labels=b.labels, sample_ids=b.sample_ids)
    code, _, err = _cli(capsys, "evaluate", tmp_path / "nan.npz", "--hierarchy", tree_file, "--out", out)
    _one_line_error(code, err, "nan.npz", "NaN", "row 5")


def test_the_setting_without_ts_is_built_while_the_file_is_decoded(tmp_path, monkeypatch):
    """The worker builds the setting without TS while the logits are still being inflated
    (``ContentRead``, ``LogitsStream.wait_rows`` as the chunk pass's ``ready``): a chunk waits for its
    rows, and the records, rows and digest are those of the file read first and evaluated after. A
    byte flipped in the logits member fails with the file's own error, not numbers of damaged rows."""
    import threading
    from functools import partial

    tree = random_tree(300, seed=5)
    path = _save(tmp_path / "m.npz", tree, 2_000, 0.6, seed=4)  # float32: 2.4 MB, many 16 kB blocks
    monkeypatch.setattr(logits_io, "_INFLATE_BLOCK", 16 << 10)
    row_bytes = tree.n_leaves * 4
    behind = threading.Event()  # a chunk asked for rows not decoded yet
    real_advance = logits_io.LogitsStream._advance

    def held_advance(stream, done):  # the decoder stops after 256 rows until a chunk waits for more
        real_advance(stream, done)
        if done >= 256 * row_bytes:
            behind.wait(timeout=60)

    monkeypatch.setattr(logits_io.LogitsStream, "_advance", held_advance)
    asked = []
    with result_cache.ContentRead(path) as read:
        def ready(stop):
            asked.append((stop, read.decoded_rows))
            if stop > read.decoded_rows:
                behind.set()
            read.wait_rows(stop)

        ev = ModelEvaluation.from_bundle(read.bundle, tree, paths_of=partial(
            decision_paths_from_logits, ready=ready, chunk_size=128))
        streamed = ev.setting(False).paths
        bundle, digest = read.finish()
    assert behind.is_set() and any(stop > done for stop, done in asked), asked
    assert len(asked) == math.ceil(ev.rows_for(False).size / 128)  # each chunk waited for its rows
    plain = ModelEvaluation.from_bundle(load_logits(path), tree)
    assert np.array_equal(bundle.logits, plain.logits)
    for rule, p in plain.setting(False).paths.items():
        q = streamed[rule]
        assert np.array_equal(p.nodes, q.nodes) and np.array_equal(p.values, q.values), rule
    assert digest == result_cache.file_digest(path)[0]
    monkeypatch.setattr(logits_io.LogitsStream, "_advance", real_advance)

    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside the logits member
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(data))
    out = evaluate._evaluate_one(str(bad), tree, {"dec": None, "protocol": "project", "cal_fraction": 0.1, "seed": 0,
                                                  "subset": "all", "rules": RULES, "metrics": ()})
    assert "truncated or corrupt" in out.get("error", ""), out


def test_bad_manifest_is_one_line(synth, tmp_path, capsys):
    """The worker checks the manifest it read with the arrays as ``load_logits`` does."""
    _, tree_file, files = synth
    target = tmp_path / "m.npz"
    _copy_model(files[0], target)
    manifest = json.loads(target.with_suffix(".json").read_text())
    for text, needle in ((json.dumps({**manifest, "n_samples": 7}), "manifest says n_samples=7"),
                         ("{oops", "manifest is not valid JSON"), ("[1]", "manifest must be a JSON object"),
                         (json.dumps({**manifest, "format": "other/9"}), "unsupported format")):
        target.with_suffix(".json").write_text(text)
        code, _, err = _cli(capsys, "evaluate", target, "--hierarchy", tree_file, "--out", tmp_path / "r.csv")
        _one_line_error(code, err, "m.json" if "manifest" in needle and "says" not in needle else "m.npz", needle)


def test_hierarchy_mismatches(synth, tmp_path, capsys):
    *_, files = synth
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
        (("--protocol", "Paper"), "unknown protocol"),
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
    from_json, from_csv = _haurc(_read(tmp_path / "j.csv")), _haurc(_read(tmp_path / "c.csv"))
    assert len(from_csv) == 16
    for a, b in zip(from_json, from_csv, strict=True):
        assert (a["rule"], a["loss"], a["ts"]) == (b["rule"], b["loss"], b["ts"])
        assert float(b["value"]) == pytest.approx(float(a["value"]), rel=1e-9, abs=1e-15)
    # Without the class list the leaves come in the file's order, which is not the logits' order:
    # the numbers differ (the tree is the same, the columns are matched to other classes).
    assert _cli(capsys, "evaluate", files[0], "--hierarchy", csv_tree, "--out", tmp_path / "u.csv")[0] == 0
    unordered = _haurc(_read(tmp_path / "u.csv"))
    assert any(float(u["value"]) != pytest.approx(float(a["value"]), rel=1e-6)
               for u, a in zip(unordered, from_json, strict=True) if u["rule"] == "climbing")


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
    assert {r["dataset"] for r in rows} == {"cifar100"} and len(rows) == ROWS_PER_MODEL
    exp = _expected(cifar, path)
    for r in _haurc(rows):
        assert float(r["value"]) == pytest.approx(exp[(r["rule"], r["loss"], r["ts"] == "true")], rel=1e-12)
    code, stdout, err = _cli(capsys, "evaluate", path, "--out", tmp_path / "r.csv")
    assert code == 0 and err == "" and "1 model, 1 reused, 0 recomputed" in stdout
    # A dataset_id that names no data set: one line, pointing at --hierarchy.
    manifest["dataset_id"] = "no_such_set"
    path.with_suffix(".json").write_text(json.dumps(manifest))
    code, _, err = _cli(capsys, "evaluate", path, "--out", tmp_path / "r2.csv")
    _one_line_error(code, err, "cifar_model.npz", "no_such_set", "--hierarchy")
