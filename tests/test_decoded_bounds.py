"""Inputs bounded by what they cost once decoded, not by their bytes (issue 42, items 1, 4 and 6): a
Parquet file of a few kB whose dictionary-encoded labels inflate, a CSV of many cells, the per-rank
split study's rows, every count option's upper bound, ``--percent`` on [0, 1] confidences, and a
memory error as the last resort: each one line, before the allocation."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
from per_rank_support import synthetic_per_rank_frame

from hsc_core import config
from hsc_core.cli import build_parser, main
from hsc_core.datasets import per_rank as reader
from hsc_core.datasets.per_rank import CELL_BYTES, TEXT_COPIES, ScoresFileError, decoded_size, read_per_rank
from hsc_core.evaluation import per_rank as study
from hsc_core.evaluation.per_rank import HAND_PICKED, N_LAMBDAS, check_study_size, study_bytes

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

LONG = 1000  # characters of the one label value the inflating file repeats


def _inflating_parquet(path, n: int, *, dictionary: bool = True) -> int:
    """A Parquet table of ``n`` rows whose two ranks' true and predicted labels are one LONG-character
    value each (dictionary-encoded, zstd: a few kB), sample ids ``0 … n-1`` and confidences 0.5.
    Returns the exact text the four label columns decode to (bytes)."""
    cols = {"sample_id": pa.array([str(i) for i in range(n)])}
    for rank in ("genus", "species"):
        value = "x" * (LONG - 1) + rank[0]
        labels = (pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value]))
                  if dictionary else pa.array([value] * n))
        cols[f"true_{rank}"], cols[f"pred_{rank}"] = labels, labels
        cols[f"conf_{rank}"] = pa.array(np.full(n, 0.5))
    pq.write_table(pa.table(cols), path, compression="zstd", use_dictionary=dictionary)
    return 4 * n * LONG


# ---------------------------------------------------------------------------------------- item 1: Parquet
def test_an_inflating_parquet_file_is_refused_before_it_is_decoded(tmp_path, monkeypatch):
    n = 3000
    path = tmp_path / "inflating.parquet"
    labels = _inflating_parquet(path, n)
    assert path.stat().st_size < 40_000  # ~12 MB of text in a few kB
    ids = sum(len(str(i)) for i in range(n))
    text = labels + ids + 2 * 24 * n  # each confidence counts as 24 characters
    expected = n * 7 * CELL_BYTES + TEXT_COPIES * text
    assert decoded_size(n * 7, text) == expected
    # nothing is expanded to strings: the refusal comes from the dictionaries' lengths
    monkeypatch.setattr(reader, "_frame", lambda *a, **k: pytest.fail("decoded before the check"))
    with pytest.raises(ScoresFileError) as info:
        read_per_rank(path, max_decoded=expected - 1)
    message = str(info.value)
    assert "\n" not in message and f"{n:,} rows × 7 columns" in message
    assert f"decode to {expected / 2**20:,.0f} MB, over the" in message and config.MAX_DECODED_MB in message
    monkeypatch.undo()
    scores = read_per_rank(path, max_decoded=expected)  # at the bound: read, the same labels
    assert scores.n == n and scores.ranks == ("genus", "species")
    assert scores.hierarchy.n_leaves == 1 and scores.correct.all()


def test_the_default_bound_is_the_config_variable(tmp_path, monkeypatch):
    path = tmp_path / "inflating.parquet"
    _inflating_parquet(path, 3000)
    monkeypatch.setenv(config.MAX_DECODED_MB, "10")
    assert config.max_decoded_bytes() == 10 * 2**20
    with pytest.raises(ScoresFileError, match=r"over the 10 MB accepted \(HSC_MAX_DECODED_MB\)"):
        read_per_rank(path)
    monkeypatch.setenv(config.MAX_DECODED_MB, "100")
    assert read_per_rank(path).n == 3000


def test_plain_pages_that_inflate_are_refused_from_the_footer(tmp_path, monkeypatch):
    """Not dictionary-encoded: zstd still shrinks the repeated value, but the footer's uncompressed page
    sizes say what decoding needs, before a single page is read."""
    path = tmp_path / "plain.parquet"
    labels = _inflating_parquet(path, 3000, dictionary=False)
    footer = pq.ParquetFile(path).metadata
    pages = sum(footer.row_group(g).column(j).total_uncompressed_size
                for g in range(footer.num_row_groups) for j in range(footer.num_columns))
    assert path.stat().st_size < 100_000 and pages > labels  # the pages hold the text (and their lengths)

    def read(*args, **kwargs):
        raise AssertionError("pages read before the footer's check")

    monkeypatch.setattr(pq.ParquetFile, "read", read)
    with pytest.raises(ScoresFileError, match="3,000 rows × 7 columns"):
        read_per_rank(path, max_decoded=decoded_size(3000 * 7, labels))


def test_parquet_and_csv_read_the_same_table(tmp_path):
    frame = synthetic_per_rank_frame(300, seed=1)
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    a, b = read_per_rank(tmp_path / "t.csv"), read_per_rank(tmp_path / "t.parquet")
    assert a.ranks == b.ranks and a.sample_ids.tolist() == b.sample_ids.tolist()
    np.testing.assert_array_equal(a.conf, b.conf)
    assert a.correct.tolist() == b.correct.tolist()


def test_a_corrupt_parquet_file_is_one_line(tmp_path):
    path = tmp_path / "t.parquet"
    synthetic_per_rank_frame(50, seed=1).to_parquet(path)
    path.write_bytes(path.read_bytes()[:-20] + b"\0" * 16 + b"PAR1")
    with pytest.raises(ScoresFileError, match="not a readable Parquet file") as info:
        read_per_rank(path)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------- item 4: CSV and rows
def test_a_csv_of_many_cells_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    header = "sample_id,true_a,pred_a,conf_a,x,y,z,w\n"
    body = "".join(f"{i},a,a,0.5,,,,\n" for i in range(20_000))
    path = tmp_path / "wide.csv"
    path.write_text(header + body)
    rows = (header + body).count("\n") + 1  # the reader's bound on the rows: its line breaks
    expected = decoded_size(rows * 8, len(header) + len(body))
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: pytest.fail("parsed before the check"))
    with pytest.raises(ScoresFileError, match=f"{rows:,} rows × 8 columns") as info:
        read_per_rank(path, max_decoded=expected - 1)
    assert f"decode to {expected / 2**20:,.0f} MB" in str(info.value)


def test_study_bytes_counts_every_theta_vector():
    n_vectors = len(study.TILTS) * N_LAMBDAS + len(HAND_PICKED)
    assert study_bytes(1000, 3) == 1000 * (14 * n_vectors + 20 * 250 + 32 * 3 + 256)
    assert study_bytes(1000, 3, quantity="answers") == 1000 * (18 * n_vectors + 20 * 250 + 32 * 3 + 256)
    assert study_bytes(2000, 3) == 2 * study_bytes(1000, 3)  # linear in the rows
    assert study_bytes(1000, 3, n_lambdas=10) < study_bytes(1000, 3)


def test_a_study_too_large_is_refused_before_the_fit(monkeypatch):
    scores = reader.per_rank_from_frame(synthetic_per_rank_frame(2000, seed=2))
    need = study_bytes(2000, 3)
    with pytest.raises(ValueError) as info:
        check_study_size(2000, 3, budget=need - 1)
    message = str(info.value)
    assert "\n" not in message and "2,000 rows need about" in message
    assert f"use at most {2000 * (need - 1) // need:,} rows" in message
    check_study_size(2000, 3, budget=need)  # at the bound: accepted
    monkeypatch.setattr(study, "fit_rank_thresholds", lambda *a, **k: pytest.fail("fitted before the check"))
    monkeypatch.setenv(config.MAX_DECODED_MB, str((need - 1) / 2**20))
    with pytest.raises(ValueError, match="for the split study"):
        study.rank_card(scores, 0.9, 0.1)
    with pytest.raises(ValueError, match="for the split study"):
        study.compare_rank_thresholds(scores, 0.9, 0.1, reps=10)


def _ranks(tmp_path, *extra: str, rows: int = 400) -> list[str]:
    path = tmp_path / "scores.csv"
    synthetic_per_rank_frame(rows, seed=5).to_csv(path, index=False)
    return ["ranks", str(path), "--target-accuracy", "0.9", "--delta", "0.1", "--out", str(tmp_path / "c.md"), *extra]


def test_hsc_ranks_over_the_budget_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(config.MAX_DECODED_MB, "1")
    assert main(_ranks(tmp_path, rows=2000)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hsc ranks: error: ") and "HSC_MAX_DECODED_MB" in err
    assert not (tmp_path / "c.md").exists()


def test_an_out_of_memory_error_is_one_line(tmp_path, capsys, monkeypatch):
    from hsc_core.cli import ranks as ranks_cli

    def allocate(*args, **kwargs):
        return np.ones((64, 2**40, 2), dtype=bool)  # numpy's _ArrayMemoryError, as the 60 MB CSV gave

    monkeypatch.setattr(ranks_cli, "rank_card", allocate)
    assert main(_ranks(tmp_path, rows=100)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hsc ranks: error: out of memory (shape (64, 1099511627776, 2)")
    assert "Traceback" not in err


@pytest.mark.parametrize("command, option, value, bounds", [
    ("ranks", "--reps", "1000000000", "from 1 to 100,000"),
    ("ranks", "--reps", "0", "from 1 to 100,000"),
    ("guarantees", "--reps", "100001", "from 1 to 100,000"),
    ("guarantees", "--n-lambdas", "1000000", "from 1 to 100,000"),
    ("card", "--reps", "-1", "from 0 to 100,000"),
    ("report", "--n-resamples", "10000000", "from 1 to 100,000"),
    ("guarantees", "--mondrian-depth", "x", "from 0 to 10,000"),
])
def test_every_count_option_has_an_upper_bound(capsys, command, option, value, bounds):
    parser = build_parser(command)
    required = {"ranks": ["s.csv", "--target-accuracy", "0.9", "--delta", "0.1"],
                "guarantees": ["m.npz", "--target-accuracy", "0.9"], "card": ["m.npz", "--target-accuracy", "0.9"],
                "report": ["m.npz"], "evaluate": ["m.npz"]}[command]
    with pytest.raises(SystemExit) as info:
        parser.parse_args([*required, option, value])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"{option} must be a whole number {bounds}, got {value!r}" in err


def test_evaluate_bounds_its_workers_in_one_line(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "m.npz"), "--workers", "100000"]) == 2
    err = capsys.readouterr().err
    assert err == "hsc evaluate: error: --workers must be from 1 to 256, got 100000\n"


def test_count_accepts_its_bounds():
    from hsc_core.cli.args import count

    parse = count("--reps", 1, 5)
    assert parse("1") == 1 and parse("5") == 5
    for bad in ("6", "0", "2.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 5"):
            parse(bad)


# ---------------------------------------------------------------------------------------- item 6: --percent
def test_percent_on_unit_confidences_is_refused(tmp_path, capsys):
    assert main(_ranks(tmp_path, "--percent")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "percentages were asked for" in err and "drop --percent" in err


def test_percent_on_percentages_reads_them(tmp_path):
    frame = synthetic_per_rank_frame(200, seed=6)
    unit = reader.per_rank_from_frame(frame)
    for col in [c for c in frame.columns if c.startswith("conf_")]:
        frame[col] = (frame[col] * 100).round(2)
    np.testing.assert_allclose(reader.per_rank_from_frame(frame, percent=True).conf, unit.conf, atol=1e-12)


def test_the_per_rank_page_refuses_an_inflating_upload_at_its_own_bound(tmp_path):
    """The attack's upload (the page raised the server by 900 MB): refused by the page's 512 MB bound, in one
    line, before the table is decoded."""
    from dashboard import per_rank as page

    path = tmp_path / "inflating.parquet"
    _inflating_parquet(path, 30_000)  # 120 MB of labels in ~100 kB
    with pytest.raises(ScoresFileError, match=r"over the 512 MB accepted") as info:
        page.load_scores("inflating.parquet", path.read_bytes(), False)
    assert str(info.value).startswith("inflating.parquet: 30,000 rows × 7 columns")
    assert page.MAX_DECODED_BYTES == 512 * 2**20
