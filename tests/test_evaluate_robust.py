"""``hsc evaluate`` against a damaged cache and degenerate data (issue 42, item 8): a cache entry that is
a folder, a cache that cannot be written, two samples or one class, numpy's warnings, and member or
folder files that are symbolic links out of their folder."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import random_tree

from hsc_core.cli import main
from hsc_core.core.protocol import DegenerateFitWarning, calibration_mask
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.datasets import logits_io
from hsc_core.datasets.atomic_files import write_bytes_atomic
from hsc_core.datasets.members import MembersError, member_path
from hsc_core.evaluation.result_cache import cache_dir_for, cache_file
from hsc_core.pipeline import many_models


def _save(path: Path, tree, n: int, seed: int = 0, labels: np.ndarray | None = None) -> Path:
    logits, drawn = synthetic_logits(tree, n, top1=0.6, seed=seed)
    with pytest.MonkeyPatch.context() as mp:  # no library versions: recording them imports torch
        mp.setattr(logits_io, "library_versions", dict)
        return logits_io.save_logits(path, logits, drawn if labels is None else labels,
                                     np.array([f"s{i}" for i in range(n)]), manifest={"model": path.stem},
                                     dtype="float32")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("robust")
    tree = random_tree(12, seed=1)
    tree.to_json(root / "tree.json")
    return tree, root / "tree.json", _save(root / "m.npz", tree, 200)


def _evaluate(capsys, npz: Path, tree_file: Path, out: Path, *extra: str) -> tuple[int, str]:
    code = main(["evaluate", str(npz), "--hierarchy", str(tree_file), "--out", str(out), "--no-progress", *extra])
    return code, capsys.readouterr().err


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_a_cache_entry_that_is_a_folder_costs_nothing_but_a_warning(model, tmp_path, capsys):
    _, tree_file, npz = model
    out = tmp_path / "results.csv"
    assert _evaluate(capsys, npz, tree_file, out)[0] == 0
    first = _rows(out)
    entry = cache_file(cache_dir_for(out), npz)
    entry.unlink()
    entry.mkdir()
    (entry / "keep.txt").write_text("mine")
    out.unlink()
    code, err = _evaluate(capsys, npz, tree_file, out)  # was: rc 2, nothing written
    assert code == 0 and _rows(out) == first
    warning = [line for line in err.splitlines() if "cannot keep results in the cache" in line]
    assert len(warning) == 1 and warning[0].startswith("hsc evaluate: warning: ") and "Traceback" not in err
    assert (entry / "keep.txt").read_text() == "mine"  # the folder is left alone


def test_a_cache_that_cannot_be_written_keeps_the_numbers(model, tmp_path, capsys, monkeypatch):
    _, tree_file, npz = model
    out = tmp_path / "results.csv"
    cache_dir_for(out).write_text("a file where the cache folder goes")
    code, err = _evaluate(capsys, npz, tree_file, out)
    assert code == 0 and len(_rows(out)) > 0 and err.count("cannot keep results in the cache") == 1
    # a read-only folder, as a non-root user sees it (root may write anywhere): every write refused
    cache_dir_for(out).unlink()

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(many_models, "write_json_atomic", refuse)
    monkeypatch.setattr(many_models, "write_bytes_atomic", refuse)
    out.unlink()
    code, err = _evaluate(capsys, npz, tree_file, out, "--rc-table", str(tmp_path / "rc.csv"))
    assert code == 0 and len(_rows(out)) > 0 and (tmp_path / "rc.csv").is_file()
    assert err.count("cannot keep results in the cache") == 1 and "Permission denied" in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_cache_folder_keeps_the_numbers(model, tmp_path, capsys):
    _, tree_file, npz = model
    out = tmp_path / "results.csv"
    cache_dir_for(out).mkdir()
    cache_dir_for(out).chmod(0o500)
    try:
        code, err = _evaluate(capsys, npz, tree_file, out)
    finally:
        cache_dir_for(out).chmod(0o700)
    assert code == 0 and len(_rows(out)) > 0 and err.count("cannot keep results in the cache") == 1


@pytest.mark.parametrize("n, one_class, words", [(2, False, "holds 1 sample of 2 and the labels 2 classes"),
                                                 (60, True, "holds 6 samples of 60 and the labels 1 class:")])
def test_a_degenerate_fit_is_one_warning(model, tmp_path, capsys, n, one_class, words):
    tree, tree_file, _ = model
    npz = _save(tmp_path / "tiny.npz", tree, n, labels=np.zeros(n, dtype=np.int64) if one_class else
                np.array([0, 1][:n]) if n == 2 else None)
    code, err = _evaluate(capsys, npz, tree_file, tmp_path / "r.csv", "--calibrator", "none,temperature,vector")
    lines = [line for line in err.splitlines() if "calibration split" in line]
    assert code == 0 and len(lines) == 1 and words in lines[0]
    assert lines[0].startswith("hsc evaluate: warning: tiny.npz: ") and "Traceback" not in err


def test_enough_samples_of_two_classes_warn_nothing():
    labels = np.repeat([0, 1], 50)
    with pytest.warns(DegenerateFitWarning, match="holds 9 samples"):
        calibration_mask(labels[:90].copy(), 0.1)  # 9 calibration samples: one short
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)
        assert calibration_mask(labels, 0.1).sum() == 10


def test_numpys_runtime_warnings_are_one_line(model, tmp_path, capsys, monkeypatch):
    _, tree_file, npz = model
    real = many_models.evaluation_rows

    def noisy(*args, **kwargs):
        np.log(np.zeros(3))  # numpy: "divide by zero encountered in log"
        return real(*args, **kwargs)

    monkeypatch.setattr(many_models, "evaluation_rows", noisy)
    code, err = _evaluate(capsys, npz, tree_file, tmp_path / "r.csv")
    lines = [line for line in err.splitlines() if "divide by zero" in line]
    assert code == 0 and len(lines) == 1 and lines[0].startswith("hsc evaluate: warning: m.npz: divide by zero")
    assert "np.log" not in err  # no source line


def test_a_member_that_links_out_of_its_folder_is_refused(model, tmp_path):
    tree = model[0]
    outside, variants = tmp_path / "outside", tmp_path / "models" / "variants"
    outside.mkdir()
    variants.mkdir(parents=True)
    _save(outside / "m1.npz", tree, 50)
    variant = _save(variants / "ens.npz", tree, 50)
    (variants / "m1.npz").symlink_to(outside / "m1.npz")
    with pytest.raises(MembersError, match="member m1.npz of ens.npz is a link that leads outside its folder"):
        member_path(variant, "m1")
    (variants / "m1.npz").unlink()
    shutil.copy(outside / "m1.npz", tmp_path / "models" / "m1.npz")  # the shipped layout: one folder up
    (tmp_path / "models" / "m2.npz").symlink_to(tmp_path / "models" / "m1.npz")  # a link inside the folder: fine
    assert member_path(variant, "m1") == tmp_path / "models" / "m1.npz"
    assert member_path(variant, "m2") == tmp_path / "models" / "m2.npz"


def test_a_folder_of_logits_skips_links_that_lead_out(model, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    write_bytes_atomic(folder / "a.npz", model[2].read_bytes())
    (folder / "b.npz").symlink_to(model[2])  # the fixture's file, outside this folder
    with pytest.warns(UserWarning, match="b.npz: skipped, it is a link that leads outside"):
        assert logits_io.list_cached_logits(folder) == [folder / "a.npz"]
