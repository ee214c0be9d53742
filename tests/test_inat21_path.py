"""The iNat21-size evaluation path (issue 46): one read of the file, hashed as it is decoded, float16
kept; every rule's records from one pass; chunks on several threads with the same numbers."""

from __future__ import annotations

import hashlib
import zipfile

import numpy as np
import pytest
from conftest import REPO

from hsc_core.core import probabilities
from hsc_core.core.logit_chunks import decision_paths_from_logits
from hsc_core.core.metric_rules import ALL_RULES, any_decision_paths
from hsc_core.core.parallel import ordered_map
from hsc_core.core.probabilities import fit_temperature, node_probabilities, softmax
from hsc_core.core.rules import nonzero_rows_cols
from hsc_core.core.synthetic import synthetic_logits, synthetic_taxonomy
from hsc_core.datasets import logits_io
from hsc_core.datasets.logits_io import HashingReader, load_logits
from hsc_core.evaluation.model import ModelEvaluation
from hsc_core.evaluation.result_cache import ContentRead, file_digest

SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"


def test_hashing_reader_hashes_the_whole_file_once_while_zipfile_reads_it():
    with SHIPPED.open("rb") as raw:
        reader = HashingReader(raw)
        with zipfile.ZipFile(reader) as zf:  # central directory first (not hashed then), then members
            names = zf.namelist()
            for name in names:
                zf.read(name)
        assert reader.sha256() == hashlib.sha256(SHIPPED.read_bytes()).digest()


def _read_content(path):
    with ContentRead(path) as read:
        return read.finish()


def test_content_read_keeps_float16_and_the_digest_of_the_bytes_it_decoded():
    bundle, digest = _read_content(SHIPPED)
    assert digest == file_digest(SHIPPED)[0]
    assert bundle.logits.dtype == np.float16
    assert np.array_equal(bundle.logits.astype(np.float32), load_logits(SHIPPED).logits)
    assert bundle.manifest["model"] == "efficientnet_lite0"


def test_content_read_refuses_bad_logits_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(logits_io, "library_versions", dict)
    h = synthetic_taxonomy(40, 3, seed=0)
    logits, labels = synthetic_logits(h, 50, seed=0, dtype=np.float16)
    logits[7, 3] = np.inf
    path = tmp_path / "m.npz"
    logits_io.write_npz_atomic(path, {"logits": logits, "labels": labels.astype(np.int16),
                                      "sample_ids": np.array([f"s{i}" for i in range(50)])})
    with pytest.raises(logits_io.LogitsFileError, match=r"contain inf in 1 rows \(first: row 7\)"):
        _read_content(path)


def test_nonzero_rows_cols_is_numpys_nonzero():
    mask = np.random.default_rng(0).random((37, 53)) > 0.8
    for got, want in zip(nonzero_rows_cols(mask), np.nonzero(mask), strict=True):
        assert np.array_equal(got, want)
    assert all(a.size == 0 for a in nonzero_rows_cols(np.zeros((3, 0), dtype=bool)))


def test_ordered_map_keeps_order_for_any_thread_count():
    items = list(range(23))
    for threads in (1, 2, 3, 8):
        for warm in (True, False):
            assert list(ordered_map(lambda i: i * i, items, threads, warm_first=warm)) == [i * i for i in items]


@pytest.fixture(scope="module")
def case():
    h = synthetic_taxonomy(300, 5, seed=1)  # leaves at several depths: hFβ's mixed path
    logits, labels = synthetic_logits(h, 900, top1=0.6, seed=3, dtype=np.float16)
    return h, logits, labels


def test_one_pass_on_several_threads_gives_each_rules_own_records(case, monkeypatch):
    h, logits, labels = case
    dense = node_probabilities(h, softmax(logits.astype(np.float32), 0.8))
    want = {rule: any_decision_paths(h, dense, rule) for rule in ALL_RULES}
    for threads in ("1", "3"):
        monkeypatch.setenv("HSC_THREADS", threads)
        got = decision_paths_from_logits(h, logits, 0.8, ALL_RULES[::-1], chunk_size=70)  # Pareto before Max-Coverage
        for rule in ALL_RULES:
            assert got[rule].rule == rule
            assert np.array_equal(got[rule].nodes, want[rule].nodes), rule
            assert np.array_equal(got[rule].values, want[rule].values), rule


def test_temperature_fit_is_the_same_on_any_thread_count(case, monkeypatch):
    _, logits, labels = case
    monkeypatch.setattr(probabilities, "rows_per_chunk", lambda *_a, **_k: 200)  # several chunks and blocks
    fits = set()
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("HSC_THREADS", threads)
        fits.add(fit_temperature(logits, labels))
    assert len(fits) == 1


def test_a_setting_builds_every_rule_asked_for_in_its_one_pass(case, monkeypatch):
    h, logits, labels = case
    calls = []
    real = probabilities.softmax_node_probabilities
    monkeypatch.setattr("hsc_core.core.logit_chunks.softmax_node_probabilities",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    ev = ModelEvaluation(h, logits, labels)
    es = ev.setting(False, rules=ALL_RULES)
    passes = len(calls)
    for rule in ALL_RULES:
        es.haurc(rule)
    assert len(calls) == passes  # no second pass for the rules beyond the paper's four
