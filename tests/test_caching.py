"""The caching package's parts on their own: CacheOptions, the chunk store, the decode choice, the
module boundaries (which modules stay torch-free) and the compatibility module."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hsc_core.pipeline.caching import CacheOptions, CacheRunError, decoding, store
from hsc_core.pipeline.caching.samples import SampleList

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- CacheOptions
def test_options_defaults_are_the_clis():
    o = CacheOptions()
    assert (o.batch_size, o.workers, o.device, o.decode, o.amp, o.amp_dtype_name) == (64, 2, "auto", "auto", None, None)
    assert o.channels_last is None and o.pretrained and o.progress and o.chunk_size is None
    assert o.images_per_chunk == 8 * 64 and CacheOptions(batch_size=4, chunk_size=3).images_per_chunk == 3


def test_options_are_keyword_only_frozen_and_copy_their_dataset_info():
    with pytest.raises(TypeError):
        CacheOptions(32)  # type: ignore[misc]  # positional on purpose: it must fail
    info = {"name": "x"}
    o = CacheOptions(dataset_info=info)
    info["name"] = "changed"
    assert o.dataset_info == {"name": "x"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.batch_size = 3
    assert dataclasses.replace(o, batch_size=3).batch_size == 3
    hash(o)  # dataset_info is left out of the hash


@pytest.mark.parametrize("field, value, message", [
    ("batch_size", 0, "batch_size must be an integer from 1 to 65,536, got 0"),
    ("batch_size", 2.0, "batch_size must be an integer from 1 to 65,536, got 2.0"),
    ("batch_size", True, "batch_size must be an integer from 1 to 65,536, got True"),
    ("workers", -1, "workers must be an integer from 0 to 256, got -1"),
    ("workers", 257, "workers must be an integer from 0 to 256, got 257"),  # every count is bounded above (issue 42)
    ("batch_size", 65_537, "batch_size must be an integer from 1 to 65,536, got 65537"),
    ("device", "tpu", "device must be one of auto, cpu, cuda, got 'tpu'"),
    ("amp", 1, "amp must be None, True or False, got 1"),
    ("amp_dtype_name", "float32", "amp_dtype_name must be None or one of float16, bfloat16, got 'float32'"),
    ("channels_last", "yes", "channels_last must be None, True or False, got 'yes'"),
    ("pretrained", None, "pretrained must be True or False, got None"),
    ("chunk_size", 0, "chunk_size must be None or an integer from 1 to 10,000,000, got 0"),
    ("decode", "nvjpeg", "decode must be one of auto, gpu, cpu, got 'nvjpeg'"),
    ("progress", 0, "progress must be True or False, got 0"),
    ("dataset_info", ["a"], "dataset_info must be None or a dict, got ['a']"),
    ("batch_size", np.array([[1, 2], [3, 4]]),
     "batch_size must be an integer from 1 to 65,536, got array([[1, 2], [3, 4]])"),
])
def test_each_bad_option_is_a_one_line_value_error(field, value, message):
    with pytest.raises(ValueError) as err:
        CacheOptions(**{field: value})
    assert str(err.value) == message and "\n" not in str(err.value)


def test_cache_logits_checks_its_options_before_loading_anything(tmp_path):
    from hsc_core.pipeline.caching.runner import cache_logits

    samples = SampleList((tmp_path / "a.jpg",), np.zeros(1, dtype=np.int64), ("a.jpg",), None, "t")
    with pytest.raises(ValueError, match="batch_size must be an integer from 1 to 65,536, got 0"):
        cache_logits("no_such_model_xyz", samples, tmp_path / "o.npz", batch_size=0)
    with pytest.raises(TypeError, match="options must be a CacheOptions, got int; pass settings by keyword"):
        cache_logits("no_such_model_xyz", samples, tmp_path / "o.npz", 64)  # the old positional batch_size
    with pytest.raises(TypeError, match="no_such_option"):
        cache_logits("no_such_model_xyz", samples, tmp_path / "o.npz", CacheOptions(), no_such_option=1)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------- the chunk store
def _samples(n: int) -> SampleList:
    ids = tuple(f"s{i}.jpg" for i in range(n))
    return SampleList(tuple(Path(i) for i in ids), np.arange(n, dtype=np.int64) % 3, ids, None, "t")


def test_chunk_plan_never_straddles_chunks_and_splits_by_rank(tmp_path):
    ranges = store.chunk_ranges(7, 3)
    assert ranges == [(0, 3), (3, 6), (6, 7)]
    pending, mine = store.pending_chunks(tmp_path, ranges, rank=1, world=2)
    assert (pending, mine) == ([(1, 3, 6)], 1)
    pending, _ = store.pending_chunks(tmp_path, ranges)
    assert store.batch_plan(pending, 2) == [[0, 1], [2], [3, 4], [5], [6]]


def test_collector_writes_complete_chunks_that_merge_into_the_final_file(tmp_path):
    samples, partial = _samples(5), tmp_path / "o.npz.partial"
    ranges = store.chunk_ranges(5, 2)
    store.open_partial(partial, {"model": "m"})
    pending, _ = store.pending_chunks(partial, ranges)
    collector = store.ChunkCollector(partial, pending)
    logits = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)
    done = [collector.add(np.asarray(b), logits[b]) for b in store.batch_plan(pending, 1)]
    assert done == [False, True, False, True, True]
    assert store.pending_chunks(partial, ranges) == ([], 3)  # all three resume as done
    bundle = store.write_final(tmp_path / "o.npz", partial, ranges, samples, 3, {"model": "m"})
    np.testing.assert_array_equal(bundle.logits, logits)
    assert bundle.manifest["model"] == "m" and not partial.exists()


def test_partial_folder_of_another_run_is_refused_and_left_alone(tmp_path):
    partial = tmp_path / "o.npz.partial"
    store.open_partial(partial, {"model": "a"})
    store.open_partial(partial, {"model": "a"})  # the same run resumes
    with pytest.raises(CacheRunError, match="holds chunks from a different run"):
        store.open_partial(partial, {"model": "b"})
    assert json.loads((partial / store.PARTIAL_META).read_text()) == {"model": "a"}


def test_damaged_chunk_is_recomputed_and_a_missing_one_stops_the_merge(tmp_path):
    partial = tmp_path / "p"
    partial.mkdir()
    (partial / "chunk_000000.npz").write_bytes(b"not a zip")
    assert store.pending_chunks(partial, [(0, 2)]) == ([(0, 0, 2)], 1)
    with pytest.raises(CacheRunError, match="chunk 0 .* is missing or damaged"):
        store.merge_chunks(partial, [(0, 2)], 3)


# ---------------------------------------------------------------------------- choosing the decoder
def test_choose_decode(monkeypatch):
    import torch

    cpu = torch.device("cpu")
    assert decoding.choose_decode("cpu", cpu, [], None, lambda x: x) == (False, None)
    with pytest.raises(CacheRunError, match="--decode gpu needs CUDA"):
        decoding.choose_decode("gpu", cpu, [], None, lambda x: x)
    monkeypatch.setattr(decoding, "_use_device_decode", lambda decode, device, supported: True)
    monkeypatch.setattr(decoding, "check_device_decode", lambda *a: ("differs", "off by 9"))
    assert decoding.choose_decode("gpu", cpu, [], None, None) == (
        True, "warning: off by 9; going on because --decode gpu was asked for")
    on, note = decoding.choose_decode("auto", cpu, [], None, None)
    assert not on and note.startswith("GPU decoding is off for this run: off by 9; PIL decodes")
    monkeypatch.setattr(decoding, "check_device_decode", lambda *a: ("failed", "boom"))
    with pytest.raises(CacheRunError, match="--decode gpu: boom; use --decode cpu or auto"):
        decoding.choose_decode("gpu", cpu, [], None, None)
    monkeypatch.setattr(decoding, "check_device_decode", lambda *a: None)
    assert decoding.choose_decode("auto", cpu, [], None, None) == (True, None)


# ---------------------------------------------------------------------------- module boundaries
def test_front_end_options_samples_and_store_do_not_import_torch():
    code = ("import sys, hsc_core, hsc_core.pipeline.caching, hsc_core.pipeline.caching.cli, "
            "hsc_core.cli.cache_logits, hsc_core.cli.evaluate, hsc_core.cli.report, "
            "hsc_core.pipeline.caching.store, hsc_core.pipeline.caching.samples; "
            "print(sorted(m for m in ('torch', 'timm', 'torchvision') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr[-2000:]


def test_compatibility_module_re_exports_the_same_objects():
    from hsc_core.cli import COMMANDS
    from hsc_core.pipeline import cache_logits as cl
    from hsc_core.pipeline.caching import cli, runner, samples

    assert cl.cache_logits is runner.cache_logits and cl.read_samples is samples.read_samples
    assert cl.configure_parser is cli.configure_parser and cl.run is cli.run and cl.main is cli.main
    assert cl.decode_batch is decoding.decode_batch and cl.partial_dir is store.partial_dir
    assert all(hasattr(cl, name) for name in cl.__all__)
    from hsc_core.cli import cache_logits as command

    assert COMMANDS["cache-logits"][0] == command.__name__ == "hsc_core.cli.cache_logits"
    assert command.configure_parser is cli.configure_parser and command.run is cli.run
