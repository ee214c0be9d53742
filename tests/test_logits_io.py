"""Cached-logits files: round trip, each kind of damage, and atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import numpy as np
import pytest

from hsc_core.datasets import logits_io
from hsc_core.datasets.logits_io import LogitsFileError, list_cached_logits, load_logits, manifest_path, save_logits


def _arrays(n: int = 20, c: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, c)) * 3
    labels = rng.integers(0, c, size=n)
    ids = np.array([f"img_{i:03d}.JPEG" for i in range(n)])
    sources = np.array(["a" if i % 3 else "b" for i in range(n)])
    return logits, labels, ids, sources


@pytest.fixture
def saved(tmp_path):
    logits, labels, ids, sources = _arrays()
    path = save_logits(tmp_path / "m.npz", logits, labels, ids, sources, manifest={"model": "m"})
    return path, (logits, labels, ids, sources)


def test_round_trip(saved):
    path, (logits, labels, ids, sources) = saved
    b = load_logits(path, require_manifest=True)
    assert b.name == "m" and b.n_samples == 20 and b.n_classes == 10
    assert b.logits.dtype == np.float32
    np.testing.assert_allclose(b.logits, logits, atol=1e-2, rtol=1e-3)  # float16 storage
    np.testing.assert_array_equal(b.labels, labels)
    assert b.labels.dtype == np.int64
    assert b.sample_ids.tolist() == ids.tolist() and b.sources.tolist() == sources.tolist()
    m = b.manifest
    assert m["model"] == "m" and m["n_samples"] == 20 and m["n_classes"] == 10
    assert m["dtype"] == "float16" and m["format"] == logits_io.FORMAT_VERSION
    assert m["top1"] == pytest.approx(b.top1())
    assert m["top1_per_source"] == pytest.approx(b.top1_per_source())
    assert set(m["top1_per_source"]) == {"a", "b"}
    assert {"numpy", "torch", "timm"} <= set(m["versions"]) and m["date"]
    with np.load(path) as z:
        assert z["logits"].dtype == np.float16 and z["labels"].dtype == np.int16


def test_optional_sources_and_float32(tmp_path):
    logits, labels, ids, _ = _arrays()
    path = save_logits(tmp_path / "x.npz", logits, labels, ids, dtype="float32")
    b = load_logits(path)
    assert b.sources is None and b.top1_per_source() == {}
    np.testing.assert_allclose(b.logits, logits, rtol=1e-6)


def test_list_cached_logits(saved, tmp_path):
    path, _ = saved
    (tmp_path / ".m.npz.123.tmp").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    assert list_cached_logits(tmp_path) == [path]
    assert list_cached_logits(tmp_path / "missing") == []


def _write_raw(path, **arrays):
    np.savez_compressed(path, **arrays)
    return path


def test_missing_file(tmp_path):
    with pytest.raises(LogitsFileError, match="not found"):
        load_logits(tmp_path / "nope.npz")


def test_truncated_file(saved, tmp_path):
    path, _ = saved
    data = path.read_bytes()
    bad = tmp_path / "half.npz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(LogitsFileError, match="truncated or corrupt"):
        load_logits(bad)


def test_not_a_zip(tmp_path):
    bad = tmp_path / "text.npz"
    bad.write_text("this is not an npz archive")
    with pytest.raises(LogitsFileError, match="not a zip archive"):
        load_logits(bad)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(LogitsFileError, match="empty"):
        load_logits(empty)


def test_corrupt_member(saved, tmp_path):
    path, _ = saved
    data = bytearray(path.read_bytes())
    # Flip bytes in the middle of the compressed data, keeping the zip directory intact.
    mid = len(data) // 3
    data[mid : mid + 16] = bytes(16)
    bad = tmp_path / "flipped.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(LogitsFileError):
        load_logits(bad)


@pytest.mark.parametrize("save", [np.savez_compressed, np.savez])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_logits_member_is_inflated_into_the_array_numpy_reads(tmp_path, save, dtype):
    """The logits member is read by ``_read_npy_member`` (deflated over several 4 MB blocks, or
    stored) into the very array ``np.load`` gives; the file's digest is unchanged; a flipped byte
    in the member fails one way or another (inflate error, size or CRC-32)."""
    logits, labels, ids, _ = _arrays(n=700, c=4000, seed=1)
    path = tmp_path / "big.npz"
    save(path, logits=logits.astype(dtype), labels=labels, sample_ids=ids)
    with np.load(path) as npz:
        expected = npz["logits"]
    for bundle in (load_logits(path, keep_float16=True),
                   logits_io.load_logits_stream(logits_io.HashingReader(path.open("rb")), str(path),
                                                keep_float16=True)):
        assert bundle.logits.dtype == dtype and bundle.logits.tobytes() == expected.tobytes()
    reader = logits_io.HashingReader(path.open("rb"))
    logits_io.load_logits_stream(reader, str(path))
    assert reader.sha256() == hashlib.sha256(path.read_bytes()).digest()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the logits member
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    with pytest.raises(LogitsFileError, match="truncated or corrupt"):
        load_logits(tmp_path / "bad.npz")


def test_missing_array(tmp_path):
    logits, labels, _, _ = _arrays()
    p = _write_raw(tmp_path / "x.npz", logits=logits, labels=labels)
    with pytest.raises(LogitsFileError, match=r"missing arrays \['sample_ids'\]"):
        load_logits(p)


@pytest.mark.parametrize("value, word", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "inf")])
def test_non_finite_logits(tmp_path, value, word):
    logits, labels, ids, _ = _arrays()
    logits[3, 2] = value
    p = _write_raw(tmp_path / "x.npz", logits=logits, labels=labels, sample_ids=ids)
    with pytest.raises(LogitsFileError, match=f"contain {word} in 1 rows \\(first: row 3\\)"):
        load_logits(p)
    with pytest.raises(LogitsFileError, match=word):
        save_logits(tmp_path / "y.npz", logits, labels, ids)


def test_wrong_shapes(tmp_path):
    logits, labels, ids, _ = _arrays()
    p = _write_raw(tmp_path / "a.npz", logits=logits[0], labels=labels, sample_ids=ids)
    with pytest.raises(LogitsFileError, match="logits must be 2-D"):
        load_logits(p)
    p = _write_raw(tmp_path / "b.npz", logits=logits, labels=labels[:-1], sample_ids=ids)
    with pytest.raises(LogitsFileError, match=r"labels must have shape \(20,\)"):
        load_logits(p)
    p = _write_raw(tmp_path / "c.npz", logits=logits, labels=labels, sample_ids=ids[:5])
    with pytest.raises(LogitsFileError, match=r"sample_ids must have shape \(20,\)"):
        load_logits(p)
    p = _write_raw(tmp_path / "d.npz", logits=logits, labels=labels, sample_ids=ids, sources=ids[:3])
    with pytest.raises(LogitsFileError, match="sources must have shape"):
        load_logits(p)


def test_labels_out_of_range(tmp_path):
    logits, labels, ids, _ = _arrays()
    labels[5] = 10
    p = _write_raw(tmp_path / "x.npz", logits=logits, labels=labels, sample_ids=ids)
    with pytest.raises(LogitsFileError, match=r"1 labels out of range \[0, 10\) \(first: 10 at row 5\)"):
        load_logits(p)
    labels[5] = -1
    with pytest.raises(LogitsFileError, match="out of range"):
        save_logits(tmp_path / "y.npz", logits, labels, ids)


def test_duplicate_sample_ids(tmp_path):
    logits, labels, ids, _ = _arrays()
    ids[1] = ids[0]
    with pytest.raises(LogitsFileError, match="not unique"):
        save_logits(tmp_path / "y.npz", logits, labels, ids)


def test_out_of_bound_logits_are_refused_before_writing(tmp_path):
    # |logits| > MAX_ABS_LOGIT (1e4, below float16's 65504) would also overflow float16.
    logits, labels, ids, _ = _arrays()
    logits[0, 0] = 1e6
    with pytest.raises(LogitsFileError, match=r"logits reach 1e\+06 \(first in row 0\); logits must lie within"):
        save_logits(tmp_path / "y.npz", logits, labels, ids)
    assert not (tmp_path / "y.npz").exists()


def test_malformed_manifest(saved):
    path, _ = saved
    manifest_path(path).write_text("{not json")
    with pytest.raises(LogitsFileError, match="manifest is not valid JSON"):
        load_logits(path)
    manifest_path(path).write_text("[1, 2]")
    with pytest.raises(LogitsFileError, match="must be a JSON object"):
        load_logits(path)


def test_manifest_disagreeing_with_arrays(saved):
    path, _ = saved
    mp = manifest_path(path)
    meta = json.loads(mp.read_text())
    mp.write_text(json.dumps({**meta, "n_samples": 21}))
    with pytest.raises(LogitsFileError, match="manifest says n_samples=21 but the arrays have 20"):
        load_logits(path)
    mp.write_text(json.dumps({**meta, "n_classes": 1000}))
    with pytest.raises(LogitsFileError, match="n_classes=1000"):
        load_logits(path)
    mp.write_text(json.dumps({**meta, "format": "hsc-logits/99"}))
    with pytest.raises(LogitsFileError, match="unsupported format"):
        load_logits(path)


def test_missing_manifest(saved):
    path, _ = saved
    manifest_path(path).unlink()
    assert load_logits(path).manifest == {}
    with pytest.raises(LogitsFileError, match="manifest m.json not found"):
        load_logits(path, require_manifest=True)


def test_wrong_suffix(tmp_path):
    logits, labels, ids, _ = _arrays()
    with pytest.raises(LogitsFileError, match=".npz"):
        save_logits(tmp_path / "x.npy", logits, labels, ids)


class _Crash(Exception):
    pass


def test_atomic_write_survives_crash(saved, monkeypatch):
    path, (logits, labels, ids, sources) = saved
    before_npz, before_json = path.read_bytes(), manifest_path(path).read_bytes()
    real_savez = np.savez

    def crashing_savez(fh, **arrays):
        real_savez(fh, **arrays)  # some bytes hit the temp file …
        fh.flush()
        raise _Crash("power cut")  # … then the process dies before the rename

    monkeypatch.setattr(logits_io.np, "savez", crashing_savez)
    with pytest.raises(_Crash):
        save_logits(path, logits[:5], labels[:5], ids[:5], manifest={"model": "new"})
    monkeypatch.undo()
    assert path.read_bytes() == before_npz
    assert manifest_path(path).read_bytes() == before_json
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.json", "m.npz"], "temp file left behind"
    assert load_logits(path).n_samples == 20


def test_atomic_write_crash_in_rename(saved, monkeypatch):
    path, (logits, labels, ids, _) = saved
    before = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(logits_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_logits(path, logits, labels, ids)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_written_files_are_world_readable(saved):
    path, _ = saved
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_no_samples_and_wrong_class_count(tmp_path):
    logits, labels, ids, _ = _arrays(c=1000)
    p = _write_raw(tmp_path / "empty.npz", logits=logits[:0], labels=labels[:0], sample_ids=ids[:0])
    with pytest.raises(LogitsFileError, match=r"holds no samples \(logits shape \(0, 1000\)\)"):
        load_logits(p)
    with pytest.raises(LogitsFileError, match="no samples"):
        save_logits(tmp_path / "e.npz", logits[:0], labels[:0], ids[:0])
    # 999 columns: a valid file in itself, but not ImageNet-1k logits.
    p = save_logits(tmp_path / "c999.npz", logits[:, :999], np.minimum(labels, 998), ids)
    assert load_logits(p).n_classes == 999
    with pytest.raises(LogitsFileError, match="logits have 999 classes, expected 1000"):
        load_logits(p, n_classes=1000)
    assert load_logits(save_logits(tmp_path / "ok.npz", logits, labels, ids), n_classes=1000).n_classes == 1000


def test_pickled_object_array_is_refused(tmp_path):
    logits, labels, ids, _ = _arrays()
    p = _write_raw(tmp_path / "obj.npz", logits=logits, labels=labels, sample_ids=ids.astype(object))
    with pytest.raises(LogitsFileError, match=r"object \(pickled\) array, which is not loaded for safety"):
        load_logits(p)


def test_keep_float16_keeps_the_stored_values_at_half_the_memory(saved):
    path, _ = saved
    default, half = load_logits(path), load_logits(path, keep_float16=True)
    assert half.logits.dtype == np.float16 and default.logits.dtype == np.float32
    assert np.array_equal(half.logits.astype(np.float32), default.logits)  # float16 → float32 is exact


@pytest.mark.parametrize("budget_mb", [None, "0.0001"])
def test_value_checks_name_the_same_rows_for_any_memory_budget(tmp_path, monkeypatch, budget_mb):
    """The NaN/inf and bound checks walk row blocks (one row each at the tiny budget): same messages."""
    if budget_mb:
        monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", budget_mb)
    logits, labels, ids, _ = _arrays()
    logits[7, 2], logits[12, 0], logits[15, 3] = 2e4, -3e4, 5e3
    with pytest.raises(LogitsFileError, match=r"logits reach -3e\+04 \(first in row 7\)"):
        save_logits(tmp_path / "y.npz", logits, labels, ids)
    logits[12, 0], logits[9, 1], logits[14, 1] = 0.0, np.inf, np.nan
    with pytest.raises(LogitsFileError, match=r"logits contain NaN in 2 rows \(first: row 9\)"):
        save_logits(tmp_path / "y.npz", logits, labels, ids)


@pytest.mark.parametrize("budget_mb", [None, "0.0001"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_streamed_file_is_checked_as_it_is_read_with_the_whole_arrays_messages(tmp_path, monkeypatch, budget_mb,
                                                                                  dtype):
    """``save_logits`` stores the logits member (not deflated). A stream reads it into its array and checks the
    rows on its reading thread as they come in (blocks of one row at the tiny budget): ``finish`` raises what the
    whole-array check raises, and a clean file gives numpy's array."""
    if budget_mb:
        monkeypatch.setenv("HSC_MEMORY_BUDGET_MB", budget_mb)
    logits, labels, ids, _ = _arrays()
    path = save_logits(tmp_path / "ok.npz", logits, labels, ids, dtype=np.dtype(dtype).name)
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("logits.npy").compress_type == zipfile.ZIP_STORED
    with np.load(path) as npz, path.open("rb") as fh, logits_io.LogitsStream(fh, path.name, keep_float16=True) as s:
        assert s.finish().logits.tobytes() == npz["logits"].tobytes()
    cases = (({(7, 2): 2e4, (12, 0): -3e4, (15, 3): 5e3}, r"logits reach -3e\+04 \(first in row 7\)"),
             ({(9, 1): np.inf, (14, 1): np.nan, (15, 3): 5e3}, r"contain NaN in 2 rows \(first: row 9\)"))
    for change, message in cases:
        bad = logits.astype(dtype)
        for at, value in change.items():
            bad[at] = value
        raw = tmp_path / "bad.npz"
        np.savez(raw, logits=bad, labels=labels, sample_ids=ids)  # stored, as save_logits writes (it refuses these)
        with pytest.raises(LogitsFileError, match=message):
            logits_io._check_logit_values(bad, "bad.npz")
        with raw.open("rb") as fh, logits_io.LogitsStream(fh, raw.name, keep_float16=True) as stream:
            with pytest.raises(LogitsFileError, match=message):
                stream.finish()


def test_the_atomic_writers_moved_to_atomic_files_and_keep_their_old_home(tmp_path):
    from hsc_core.datasets import atomic_files

    for name in ("write_npz_atomic", "write_json_atomic", "write_text_atomic", "write_bytes_atomic"):
        assert getattr(logits_io, name) is getattr(atomic_files, name), name
    atomic_files.write_json_atomic(tmp_path / "a.json", {"θ": 0.5})
    assert (tmp_path / "a.json").read_text(encoding="utf-8") == '{\n  "θ": 0.5\n}\n'
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
