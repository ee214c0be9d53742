"""The ``hsc`` command's shared arguments (``hsc_core.cli.args``), the subset resolver
(``evaluation.subsets``) and ``hsc evaluate --rules/--metrics/--subset``."""

from __future__ import annotations

import argparse
import csv
import importlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from hsc_core.cli import COMMANDS, main
from hsc_core.core.metric_rules import ALL_RULES
from hsc_core.core.risk import LOSSES
from hsc_core.core.rules import RULES
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits
from hsc_core.evaluation import ModelEvaluation
from hsc_core.evaluation.subsets import KNOWN_SOURCES, canonical_name, check_subset, file_subsets, subset_mask

SHIPPED = sorted((REPO / "cached_logits").glob("*.npz"))
TYPICAL_TAG = KNOWN_SOURCES["typical"][0]


def _parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"hsc {command}")
    importlib.import_module(COMMANDS[command][0]).configure_parser(parser)
    return parser


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------------------- the subset resolver
def test_file_subsets_toy():
    sources = np.array(["b", TYPICAL_TAG, "b", "a", TYPICAL_TAG, "b"])
    subsets = file_subsets(sources, 6)
    assert list(subsets) == ["all", "typical", "a", "b"]  # "all" first, then the tags sorted (known: short name)
    assert [(s.tag, s.n) for s in subsets.values()] == [("", 6), (TYPICAL_TAG, 2), ("a", 1), ("b", 3)]
    assert subset_mask(sources, 6, "all") is None and subset_mask(sources, 6, "") is None
    assert subset_mask(sources, 6, "b").tolist() == [True, False, True, False, False, True]
    # a known source by its full tag (the old `--subset TAG` spelling) is the same subset, named short
    assert subset_mask(sources, 6, TYPICAL_TAG).tolist() == subset_mask(sources, 6, "typical").tolist()
    assert check_subset(sources, 6, TYPICAL_TAG).name == "typical" == canonical_name(TYPICAL_TAG)
    assert canonical_name("") == "all" and canonical_name("b") == "b"
    assert list(file_subsets(None, 4)) == ["all"]


@pytest.mark.parametrize("sources, choices", [(np.array(["a", "b"]), "'all', 'a', 'b'"), (None, "'all'")])
def test_unknown_subset_is_one_line_naming_the_choices(sources, choices):
    with pytest.raises(ValueError) as err:
        subset_mask(sources, 2, "easier", where="m.npz")
    assert str(err.value) == f"m.npz: unknown subset 'easier'; choose one of {choices}"


@pytest.mark.skipif(not SHIPPED, reason="no shipped logits")
def test_shipped_typical_subset_has_594_images_and_evaluate_uses_it(tmp_path, capsys):
    b = load_logits(SHIPPED[0])
    subsets = file_subsets(b.sources, b.n_samples)
    assert list(subsets) == ["all", "typical", "easier"]
    assert subsets["typical"].n == 594 and subsets["typical"].n + subsets["easier"].n == b.n_samples
    out = tmp_path / "t.csv"
    code, _, err = _cli(capsys, "evaluate", SHIPPED[0], "--subset", "typical", "--rules", "climbing",
                        "--out", out, "--no-progress")
    assert code == 0, err
    rows = _rows(out)
    ev = ModelEvaluation.from_bundle(b, imagenet_hierarchy(), subset=subset_mask(b.sources, b.n_samples, "typical"),
                                     subset_name="typical", dataset="imagenet1k")
    assert {r["subset"] for r in rows} == {"typical"}
    assert {int(r["n_eval"]) for r in rows} == {ev.setting(False).n} and ev.setting(False).n < 594
    got = {(r["metric"], r["loss"], r["ts"]): float(r["value"]) for r in rows if r["rule"] == "climbing"}
    for ts in (False, True):
        for loss in LOSSES:
            assert got[("haurc", loss, str(ts).lower())] == ev.setting(ts).haurc("climbing", loss)
    # a name the file does not offer: exit 2, one line naming the choices
    code, _, err = _cli(capsys, "evaluate", SHIPPED[0], "--subset", "nope", "--out", tmp_path / "n.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "unknown subset 'nope'; choose one of 'all', 'typical', 'easier'" in err


# ---------------------------------------------------------------------------- shared arguments
@pytest.mark.parametrize("command, default", [("guarantees", True), ("card", True), ("atlas", True),
                                              ("hierarchy-sensitivity", False)])
def test_ts_and_no_ts(command, default):
    required = {"guarantees": ["x.npz", "--target-accuracy", "0.9", "--delta", "0.1"],
                "card": ["x.npz", "--target-accuracy", "0.9", "--delta", "0.1"], "atlas": ["t.csv"],
                "hierarchy-sensitivity": ["x.npz"]}[command]
    parser = _parser(command)
    assert parser.parse_args(required).ts is default
    assert parser.parse_args([*required, "--ts"]).ts is True
    assert parser.parse_args([*required, "--no-ts"]).ts is False


@pytest.mark.parametrize("command, required", [("report", ["x.npz"]), ("hierarchy-sensitivity", ["x.npz"])])
def test_n_resamples_and_its_old_spelling(command, required, capsys):
    parser = _parser(command)
    assert parser.parse_args([*required, "--n-resamples", "300"]).n_resamples == 300
    assert capsys.readouterr().err == ""
    assert parser.parse_args([*required, "--resamples", "200"]).n_resamples == 200
    err = capsys.readouterr().err
    assert err == f"hsc {command}: warning: --resamples is deprecated; use --n-resamples\n"


def test_report_seed_is_the_bootstrap_seed_for_one_more_release(capsys):
    parser = _parser("report")
    args = parser.parse_args(["x.npz"])
    assert args.bootstrap_seed == 0 and args.n_resamples == 1000
    assert parser.parse_args(["x.npz", "--bootstrap-seed", "7"]).bootstrap_seed == 7
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["x.npz", "--seed", "5"]).bootstrap_seed == 5
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("hsc report: warning: --seed is deprecated; use --bootstrap-seed")


def test_cache_logits_variant_seed_and_its_old_spelling(capsys):
    parser = _parser("cache-logits")
    assert parser.parse_args(["--variant-seed", "4"]).seed == 4 and parser.parse_args([]).seed == 0
    assert capsys.readouterr().err == ""
    assert parser.parse_args(["--seed", "3"]).seed == 3
    assert capsys.readouterr().err == "hsc cache-logits: warning: --seed is deprecated; use --variant-seed\n"


@pytest.mark.parametrize("command, seed", [("evaluate", 0), ("guarantees", 0), ("card", 0)])
def test_seed_is_the_calibration_split_or_draw(command, seed):
    parser = _parser(command)
    required = ["x.npz"] + (["--target-accuracy", "0.9", "--delta", "0.1"] if command != "evaluate" else [])
    assert parser.parse_args(required).seed == seed
    assert parser.parse_args([*required, "--seed", "3"]).seed == 3
    assert "calibration" in parser.format_help() or "split" in parser.format_help()


@pytest.mark.parametrize("command", ["evaluate", "report", "guarantees", "card"])
def test_hierarchy_and_classes_are_shared(command):
    required = ["x.npz"] + (["--target-accuracy", "0.9", "--delta", "0.1"] if command in ("guarantees", "card")
                            else [])
    args = _parser(command).parse_args([*required, "--hierarchy", "h.json", "--classes", "c.txt"])
    assert (args.hierarchy, args.classes) == ("h.json", "c.txt")


def test_every_command_still_parses_its_help():
    for command in COMMANDS:
        assert _parser(command).format_help()


# ---------------------------------------------------------------------------- hsc evaluate --rules / --metrics
@pytest.fixture(scope="module")
def shipped_one():
    if not SHIPPED:
        pytest.skip("no shipped logits")
    b = load_logits(SHIPPED[0])
    return SHIPPED[0], ModelEvaluation.from_bundle(b, imagenet_hierarchy(), dataset="imagenet1k")


def test_default_rules_are_all_rules(shipped_one, tmp_path, capsys):
    path, ev = shipped_one
    out = tmp_path / "r.csv"
    assert _cli(capsys, "evaluate", path, "--out", out, "--no-progress")[0] == 0
    rows = _rows(out)
    assert {r["rule"] for r in rows} == {"", *ALL_RULES}
    assert {r["metric"] for r in rows} == {"top1", "temperature", "haurc", "gain_percent"}  # --metrics: none
    want = [r for ts in (False, True) for r in ev.setting(ts).results(LOSSES, rules=ALL_RULES)]
    assert [(r["metric"], r["rule"], r["loss"], float(r["value"])) for r in rows] == [
        (w["metric"], w["rule"], w["loss"], w["value"]) for w in want]


def test_metrics_are_the_layers_extra_results(shipped_one, tmp_path, capsys):
    path, ev = shipped_one
    out = tmp_path / "m.csv"
    code, _, err = _cli(capsys, "evaluate", path, "--out", out, "--no-progress", "--rules", "climbing,pareto",
                        "--metrics", "hf1,aurc,excess_haurc")
    assert code == 0, err
    rows = _rows(out)
    assert {r["rule"] for r in rows} == {"", "climbing", "pareto"}
    got = {(r["metric"], r["rule"], r["loss"], r["ts"]): float(r["value"]) for r in rows}
    n_extra = 0
    for ts in (False, True):
        es = ev.setting(ts)
        for k, loss in enumerate(LOSSES):
            for w in es.extra_results(["climbing", "pareto"], loss):
                key = (w["metric"], w["rule"], w["loss"], str(ts).lower())
                if w["metric"] == "excess_haurc" or (k == 0 and w["metric"] in ("hf1_micro", "aurc_zhou")):
                    assert got[key] == w["value"], key
                    n_extra += 1
    assert n_extra == 2 * (2 * 2 + 2 + 1)  # per setting: excess × 2 rules × 2 losses, hF1 × 2 rules, AURC
    assert len(rows) == 2 * 1 + 1 + 2 * 2 * 2 * 2 + n_extra  # top-1 ×2, T, hAURC and gain of 2 rules, extras
    assert not {r["metric"] for r in rows} & {"augrc", "achievable_haurc"}
    # another --metrics is another cache key: recomputed, never the other run's rows
    code, out_text, _ = _cli(capsys, "evaluate", path, "--out", out, "--no-progress", "--rules", "climbing,pareto")
    assert code == 0 and "0 reused, 1 recomputed" in out_text
    assert {r["metric"] for r in _rows(out)} == {"top1", "temperature", "haurc", "gain_percent"}


@pytest.mark.parametrize("option, value, needle", [
    ("--rules", "zzz", "--rules: unknown rule 'zzz'; choose one of selective, climbing"),
    ("--rules", ",", "--rules: give at least one name"),
    ("--metrics", "bogus", "--metrics: unknown metric 'bogus'; choose from excess_haurc, achievable_haurc, aurc, "
                           "augrc, hf1 or all"),
])
def test_unknown_rule_or_metric_is_one_line_exit_2(shipped_one, tmp_path, capsys, option, value, needle):
    code, _, err = _cli(capsys, "evaluate", shipped_one[0], "--out", tmp_path / "x.csv", option, value)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "x.csv").exists()  # checked before any work


def test_python_m_and_old_import_paths_still_work():
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                           "import hsc_core.cli, hsc_core.cli.evaluate; from hsc_core.cli import entry_point, main"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-c", "import warnings; warnings.simplefilter('always');"
                           "import hsc_core.pipeline.evaluate as e; print(e.evaluate_many.__module__)"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "hsc_core.pipeline.many_models"
    assert "hsc_core.pipeline.evaluate is deprecated" in done.stderr
    assert RULES == ALL_RULES[:4]  # the paper's four lead every table, so their rows keep their order
