"""The caching CLI: a full run, interruption and resume, input formats and errors."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from hsc_core.datasets.imagenet import imagenet_wnids
from hsc_core.datasets.logits_io import load_logits
from hsc_core.pipeline import cache_logits as cl
from hsc_core.pipeline.caching import decoding, store
from hsc_core.pipeline.inference import ImageReadError

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "imagenet-val-sample"
SHIPPED = REPO / "cached_logits" / "efficientnet_lite0.npz"
# A random-init model keeps these tests offline and independent of the shared images.
FAST = ["--model", "efficientnet_lite0", "--random-init", "--device", "cpu", "--workers", "0", "--no-progress",
        "--batch-size", "2", "--chunk-size", "2"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """Six small random JPEGs and their labels.csv."""
    return cl.make_synthetic_jpegs(6, tmp_path_factory.mktemp("syn"), size=(96, 72))


class _Interrupted(Exception):
    pass


def test_interrupt_and_resume_matches_uninterrupted_run(synthetic, tmp_path, monkeypatch, capsys):
    full = tmp_path / "full.npz"
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(full)]) == 0
    assert "6 of 6 images computed" in capsys.readouterr().out

    out = tmp_path / "resumed.npz"
    partial = tmp_path / "resumed.npz.partial"
    real_write = store._write_chunk
    calls = []

    def write_then_die(*args, **kwargs):
        real_write(*args, **kwargs)
        calls.append(args[1])
        raise _Interrupted("killed after the first chunk")

    monkeypatch.setattr(store, "_write_chunk", write_then_die)
    with pytest.raises(_Interrupted):
        cl.main([*FAST, "--data", str(synthetic), "--out", str(out)])
    monkeypatch.undo()
    assert calls == [0]
    assert not out.exists()
    assert sorted(p.name for p in partial.iterdir()) == ["chunk_000000.npz", "meta.json"]

    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "4 of 6 images computed" in printed.out
    assert "resuming: 1 of 3 chunks already done" in printed.err
    assert not partial.exists(), "partial folder must be removed after the merge"

    a, b = load_logits(full, require_manifest=True), load_logits(out, require_manifest=True)
    np.testing.assert_array_equal(a.logits, b.logits)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.sample_ids.tolist() == b.sample_ids.tolist() == [f"synthetic_{i:06d}.JPEG" for i in range(6)]
    m = b.manifest
    assert m["model"] == "efficientnet_lite0" and m["pretrained"] is False and m["weights"] == "random init"
    assert m["dataset"] == {"name": "syn0", "n_images": 6, "sources": {"synthetic": 6}}
    assert m["preprocessing"]["center_crop"] == 224 and m["n_samples"] == 6
    assert m["device"] == "cpu" and m["channels_last"] is True and m["amp"] is None


def test_partial_from_another_run_is_refused(synthetic, tmp_path, capsys):
    out = tmp_path / "x.npz"
    (tmp_path / "x.npz.partial").mkdir()
    (tmp_path / "x.npz.partial" / "meta.json").write_text('{"model": "other"}')
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(out)]) == 1
    assert "x.npz.partial holds chunks from a different run" in capsys.readouterr().err
    assert (tmp_path / "x.npz.partial" / "meta.json").read_text() == '{"model": "other"}'  # left alone
    samples = cl.read_samples(synthetic)
    with pytest.raises(cl.CacheRunError, match="different run"):
        cl.cache_logits("efficientnet_lite0", samples, out, pretrained=False, workers=0, progress=False)


def test_ctrl_c_keeps_finished_chunks_and_says_how_to_resume(synthetic, tmp_path, monkeypatch, capsys):
    out = tmp_path / "i.npz"
    real_write = store._write_chunk

    def write_then_ctrl_c(*args, **kwargs):
        real_write(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_write_chunk", write_then_ctrl_c)
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(out)]) == 130
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert "interrupted: 1 finished chunk(s) kept in" in err and "rerun the same command" in err
    assert "Traceback" not in err and not out.exists()
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(out)]) == 0
    assert "4 of 6 images computed" in capsys.readouterr().out


@pytest.mark.parametrize("extra, code, message", [
    (["--model", "no_such_model_xyz"], 2, "unknown model 'no_such_model_xyz'"),
    (["--device", "cuda"], 1, "CUDA is not available"),
    # A timm model whose head is not ImageNet-1k's (random init: no download).
    (["--model", "vit_tiny_patch16_224.augreg_in21k"], 1, "has 21843 outputs, but the labels are ImageNet-1k"),
])
def test_cli_usage_errors_are_one_line(synthetic, tmp_path, capsys, extra, code, message):
    import torch

    if "cuda" in extra and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(tmp_path / "o.npz"), *extra]) == code
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir()), "nothing is written for a usage error"


def test_out_must_be_npz(synthetic, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cl.main([*FAST, "--data", str(synthetic), "--out", str(tmp_path / "o.txt")])
    assert exc.value.code == 2 and "argument --out: must end in .npz" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["under_a_file", "a_folder", "read_only_dir"])
def test_unwritable_out_is_a_one_line_error(synthetic, tmp_path, capsys, where):
    import os

    if where == "a_folder":
        out = tmp_path / "o.npz"
        out.mkdir()
        expected = f"cannot write {out}: it is a folder"
    elif where == "under_a_file":
        (tmp_path / "plain.txt").write_text("x")
        out = tmp_path / "plain.txt" / "sub" / "o.npz"
        expected = f"cannot write {out}: {tmp_path / 'plain.txt'} is not a folder"
    else:
        if os.geteuid() == 0:
            pytest.skip("root may write into read-only folders")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        out = ro / "o.npz"
        expected = f"cannot write {out}: no write permission in {ro}"
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {expected}\n"


def test_limit_and_image_folder(synthetic, tmp_path):
    # Re-arrange the synthetic images as an ImageFolder tree named by wnid.
    wnids = imagenet_wnids()
    root = tmp_path / "folder"
    with (synthetic.parent / "labels.csv").open() as fh:
        for row in csv.DictReader(fh):
            d = root / wnids[int(row["label"])]
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy(synthetic.parent / "images" / row["file"], d / row["file"])
    out = tmp_path / "f.npz"
    assert cl.main([*FAST, "--data", str(root), "--out", str(out), "--limit", "3"]) == 0
    b = load_logits(out)
    assert b.n_samples == 3 and b.sources is None
    assert all("/" in s and s.split("/")[0] in wnids for s in b.sample_ids.tolist())
    assert [wnids[y] for y in b.labels] == [s.split("/")[0] for s in b.sample_ids.tolist()]


@pytest.mark.parametrize("workers", [0, 1])
def test_unreadable_image_is_named(synthetic, tmp_path, workers, capsys):
    data = tmp_path / "data"
    shutil.copytree(synthetic.parent, data)
    bad = data / "images" / "synthetic_000003.JPEG"
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    args = [*FAST, "--workers", str(workers), "--data", str(data / "labels.csv"), "--out", str(tmp_path / "o.npz")]
    assert cl.main(args) == 1
    err = capsys.readouterr().err
    assert "unreadable image" in err and "synthetic_000003.JPEG" in err
    assert "finished chunks are kept" in err and "Traceback" not in err
    samples = cl.read_samples(data / "labels.csv")
    with pytest.raises(ImageReadError, match="synthetic_000003.JPEG"):
        cl.cache_logits("efficientnet_lite0", samples, tmp_path / "p.npz", batch_size=2, workers=workers,
                        pretrained=False, progress=False)


def test_bad_csv_rows(tmp_path, capsys):
    (tmp_path / "images").mkdir()
    csv_path = tmp_path / "labels.csv"
    csv_path.write_text("file,wnid,label,source\na.JPEG,n01443537,0,x\n")
    assert cl.main([*FAST, "--data", str(csv_path), "--out", str(tmp_path / "o.npz")]) == 2
    assert "label 0 is n01440764, but the row says n01443537" in capsys.readouterr().err
    assert cl.main([*FAST, "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o.npz")]) == 2
    assert "--data" in capsys.readouterr().err


def test_bad_image_lists_fail_before_the_model_loads(synthetic, tmp_path, capsys):
    def run(*data_args):
        code = cl.main([*FAST, *data_args, "--out", str(tmp_path / "o.npz")])
        return code, capsys.readouterr().err

    # A labels.csv whose images are elsewhere: all six are missing from the CSV's folder.
    elsewhere = tmp_path / "elsewhere.csv"
    shutil.copy(synthetic, elsewhere)
    code, err = run("--data", str(elsewhere))
    assert code == 2 and "6 of 6 images listed in" in err and "synthetic_000000.JPEG; is --images-dir right?" in err
    assert run("--data", str(elsewhere), "--images-dir", str(synthetic.parent / "images"))[0] == 0
    # The same file twice would give duplicate sample ids, refused at save time: refuse it up front.
    dup = tmp_path / "dup.csv"
    rows = synthetic.read_text().splitlines()
    dup.write_text("\n".join([*rows, rows[2]]) + "\n")
    code, err = run("--data", str(dup), "--images-dir", str(synthetic.parent / "images"))
    assert code == 2 and "dup.csv:8: 'synthetic_000001.JPEG' is listed twice (first on line 3)" in err
    # A binary file (here an image) given as the CSV.
    code, err = run("--data", str(synthetic.parent / "images" / "synthetic_000000.JPEG"))
    assert code == 2 and "not a readable labels CSV (UnicodeDecodeError" in err
    # The sample folder itself instead of its labels.csv: say which file to pass.
    code, err = run("--data", str(synthetic.parent))
    assert code == 2 and "folder name is not an ImageNet-1k wnid" in err and f"pass --data {synthetic}" in err
    assert "Traceback" not in err


def test_amp_and_device_resolution():
    import torch

    cpu = torch.device("cpu")
    assert cl.amp_dtype(cpu, None) is None and cl.amp_dtype(cpu, False) is None
    assert cl.amp_dtype(cpu, True) == torch.bfloat16
    assert cl.resolve_device("cpu") == cpu
    if not torch.cuda.is_available():
        assert cl.resolve_device("auto") == cpu
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            cl.resolve_device("cuda")


@pytest.mark.skipif(not (SAMPLE / "labels.csv").is_file(), reason="shared image sample absent")
def test_pretrained_on_shared_images_matches_shipped(tmp_path, capsys):
    out = tmp_path / "lite0.npz"
    args = ["--model", "efficientnet_lite0", "--data", str(SAMPLE / "labels.csv"), "--out", str(out),
            "--limit", "6", "--workers", "0", "--batch-size", "3", "--no-progress"]
    assert cl.main(args) == 0
    assert "top-1" in capsys.readouterr().out
    b = load_logits(out, require_manifest=True)
    shipped = load_logits(SHIPPED)
    np.testing.assert_allclose(b.logits, shipped.logits[:6], atol=0.05, rtol=0.01)
    assert b.sample_ids.tolist() == shipped.sample_ids[:6].tolist()
    assert "/" not in b.manifest["dataset"]["name"]


def test_torchrun_two_ranks_matches_single_process(synthetic, tmp_path):
    import os
    import subprocess
    import sys

    import torch.distributed

    if not torch.distributed.is_available():
        pytest.skip("torch.distributed not available")
    common = ["--model", "efficientnet_lite0", "--random-init", "--device", "cpu", "--workers", "0", "--no-progress",
              "--batch-size", "2", "--chunk-size", "2", "--data", str(synthetic)]
    dist_out, single_out = tmp_path / "dist.npz", tmp_path / "single.npz"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # --standalone: a rendezvous on a free localhost port; gloo backend on the CPU.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "hsc_core.pipeline.cache_logits", *common, "--out", str(dist_out)]
    res = subprocess.run(cmd, check=False, env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "2 of 6 images computed" in res.stdout and "4 of 6 images computed" in res.stdout
    assert not (tmp_path / "dist.npz.partial").exists()
    assert cl.main([*common, "--out", str(single_out)]) == 0
    a, b = load_logits(dist_out, require_manifest=True), load_logits(single_out)
    assert a.sample_ids.tolist() == b.sample_ids.tolist()
    np.testing.assert_allclose(a.logits, b.logits, atol=0.01)


# ---------------------------------------------------------------------------- decoding on the device
# The "gpu" decode path (bytes in the workers, torchvision.io.decode_jpeg + make_tensor_transform on
# the device) runs here with device="cpu": the same code, libjpeg-turbo instead of nvJPEG.
def _pil_pixels(paths, info):
    import torch

    from hsc_core.pipeline.inference import read_image
    from hsc_core.pipeline.models import make_transform

    transform = make_transform(info.data_config, uint8=True)
    return torch.stack([transform(read_image(p)) for p in paths]), transform


def _device_pixels(paths, info, transform):
    import torch

    from hsc_core.pipeline.models import make_tensor_transform

    dataset = cl.EncodedImageDataset(paths, transform)
    items = [dataset[i][0] for i in range(len(paths))]
    return items, cl.decode_batch(items, paths, torch.device("cpu"), transform, make_tensor_transform(info))


@pytest.mark.parametrize("crop_mode, interpolation", [("center", "bicubic"), ("squash", "bicubic"),
                                                      ("center", "bilinear")])
def test_tensor_transform_matches_pil_within_one_grey_level(tmp_path, crop_mode, interpolation):
    from dataclasses import replace

    from PIL import Image

    from hsc_core.pipeline.models import load_model

    _, _, info = load_model("efficientnet_lite0", pretrained=False)
    info = replace(info, crop_mode=crop_mode, interpolation=interpolation)
    csv_path = cl.make_synthetic_jpegs(4, tmp_path, size=(500, 375))
    paths = list(cl.read_samples(csv_path).paths)
    # A portrait and an upscaled small image too: both resize branches and both directions.
    Image.open(paths[0]).transpose(Image.Transpose.ROTATE_90).save(paths[1], quality=90)
    Image.open(paths[0]).resize((150, 120)).save(paths[2], quality=90)
    pil, transform = _pil_pixels(paths, info)
    items, dev = _device_pixels(paths, info, transform)
    assert [x.ndim for x in items] == [1, 1, 1, 1]  # all four went to decode_jpeg
    assert dev.shape == pil.shape == (4, 3, 224, 224) and dev.dtype == pil.dtype
    diff = (dev.int() - pil.int()).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 0.05


def test_tensor_transform_declines_unsupported_preprocessing():
    from dataclasses import replace

    from hsc_core.pipeline.models import load_model, make_tensor_transform

    _, _, info = load_model("efficientnet_lite0", pretrained=False)
    assert make_tensor_transform(info) is not None
    assert make_tensor_transform(replace(info, crop_mode="border")) is None
    assert make_tensor_transform(replace(info, interpolation="nearest")) is None
    import torch

    with pytest.raises(cl.CacheRunError, match="--decode gpu needs CUDA"):
        decoding._use_device_decode("gpu", torch.device("cpu"), True)
    assert decoding._use_device_decode("auto", torch.device("cpu"), True) is False


@pytest.mark.skipif(not (SAMPLE / "images").is_dir(), reason="shared image sample absent")
def test_device_decode_gives_the_pil_paths_logits_on_real_images():
    import torch
    from PIL import Image

    from hsc_core.pipeline.models import load_model, normalize_batch

    files = sorted((SAMPLE / "images").iterdir())
    grey = [p for p in files if Image.open(p).mode == "L"][:2]
    paths = files[:5] + files[-5:] + grey  # both sources (224² and 227²) and greyscale JPEGs
    model, _, info = load_model("efficientnet_lite0")
    pil, transform = _pil_pixels(paths, info)
    _, dev = _device_pixels(paths, info, transform)
    diff = (dev.int() - pil.int()).abs()
    # Measured: at most 1 grey level, on 0.01 % of the values; logits within 0.004.
    assert diff.max() <= 1 and (diff > 0).float().mean() < 0.001
    with torch.inference_mode():
        a = model(normalize_batch(pil, info.mean, info.std))
        b = model(normalize_batch(dev, info.mean, info.std))
    assert torch.equal(a.argmax(1), b.argmax(1))
    assert (a - b).abs().max() < 0.02


def test_device_decode_run_matches_cpu_run_with_every_kind_of_file(synthetic, tmp_path, monkeypatch, capsys):
    from PIL import Image

    data = tmp_path / "data"
    shutil.copytree(synthetic.parent, data)
    images = data / "images"
    Image.open(images / "synthetic_000001.JPEG").save(images / "synthetic_000001.JPEG", format="PNG")
    Image.open(images / "synthetic_000002.JPEG").convert("CMYK").save(images / "synthetic_000002.JPEG")
    rotated = Image.open(images / "synthetic_000003.JPEG")
    exif = rotated.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    rotated.save(images / "synthetic_000003.JPEG", exif=exif, quality=90)
    from hsc_core.pipeline.models import load_model, make_transform

    _, _, info = load_model("efficientnet_lite0", pretrained=False)
    samples = cl.read_samples(data / "labels.csv")
    dataset = cl.EncodedImageDataset(samples.paths, make_transform(info.data_config, uint8=True))
    # PNG, CMYK and EXIF-rotated files are decoded by PIL in the worker; plain JPEGs are sent as bytes.
    assert [dataset[i][0].ndim for i in range(6)] == [1, 3, 3, 3, 1, 1]
    # An image above the pixel cap never reaches the decoder: PIL's path refuses it by name.
    monkeypatch.setenv("HSC_MAX_IMAGE_MEGAPIXELS", "0.005")  # the fixture's images are 96 × 72 = 0.0069 MP
    assert "synthetic_000000.JPEG" in dataset[0][0] and "allowed" in dataset[0][0]
    monkeypatch.delenv("HSC_MAX_IMAGE_MEGAPIXELS")

    cpu_out, dev_out = tmp_path / "cpu.npz", tmp_path / "dev.npz"
    assert cl.main([*FAST, "--data", str(data / "labels.csv"), "--out", str(cpu_out)]) == 0
    monkeypatch.setattr(decoding, "_use_device_decode", lambda decode, device, supported: supported)
    assert cl.main([*FAST, "--data", str(data / "labels.csv"), "--out", str(dev_out)]) == 0
    assert "decode=gpu" in capsys.readouterr().out
    a, b = load_logits(cpu_out), load_logits(dev_out, require_manifest=True)
    assert b.manifest["decode"].startswith("JPEGs by nvJPEG")
    np.testing.assert_array_equal(a.logits.argmax(1), b.logits.argmax(1))
    np.testing.assert_allclose(a.logits, b.logits, atol=0.02)

    # A JPEG that only fails when decoded: the decoder refuses it, PIL names it as the CPU path does.
    bad = images / "synthetic_000004.JPEG"
    bad.write_bytes(bad.read_bytes()[:700])
    assert cl.main([*FAST, "--data", str(data / "labels.csv"), "--out", str(tmp_path / "bad.npz")]) == 1
    err = capsys.readouterr().err
    assert "unreadable image" in err and "synthetic_000004.JPEG: cannot read image" in err and "Traceback" not in err
    # Decoding runs a batch ahead, yet the two batches before the bad one were saved, in turn.
    assert sorted(p.name for p in (tmp_path / "bad.npz.partial").glob("chunk_*")) == ["chunk_000000.npz",
                                                                                    "chunk_000001.npz"]


def test_device_decode_check_passes_a_sound_decoder_and_names_a_broken_one(synthetic, monkeypatch):
    import torch

    from hsc_core.pipeline.models import (
        load_model,
        make_tensor_transform,
        make_transform,
    )

    _, _, info = load_model("efficientnet_lite0", pretrained=False)
    transform, tensor_transform = make_transform(info.data_config, uint8=True), make_tensor_transform(info)
    paths = list(cl.read_samples(synthetic).paths)
    cpu = torch.device("cpu")
    assert cl.check_device_decode(paths, cpu, transform, tensor_transform) is None
    sound = cl.decode_batch

    # A decoder that writes black: off by PIL's mean grey level.
    monkeypatch.setattr(decoding, "decode_batch", lambda *a: torch.zeros_like(sound(*a)))
    pil_mean = float(torch.stack([transform(cl.read_image(p)) for p in paths]).float().mean())
    assert pil_mean > 50
    assert cl.check_device_decode(paths, cpu, transform, tensor_transform) == (
        "differs", f"6 JPEGs decoded on cpu differ from PIL's by {pil_mean:.1f} grey levels on average (tolerance 3)")

    def broken(*a):
        raise RuntimeError("nvjpegDecodeBatched failed: 7")

    monkeypatch.setattr(decoding, "decode_batch", broken)
    assert cl.check_device_decode(paths, cpu, transform, tensor_transform) == (
        "failed", "decoding 6 JPEGs on cpu failed (RuntimeError: nvjpegDecodeBatched failed: 7)")
    # No JPEG among the files (PIL decodes them either way): nothing to check.
    assert cl.check_device_decode([synthetic], cpu, transform, tensor_transform) is None


def test_auto_decode_falls_back_to_pil_when_the_device_decoder_is_broken(synthetic, tmp_path, monkeypatch, capsys):
    cpu_out, auto_out = tmp_path / "cpu.npz", tmp_path / "auto.npz"
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(cpu_out)]) == 0
    # As on a GPU whose nvJPEG fails: "auto" picks the device decoder, its check fails.
    monkeypatch.setattr(decoding, "_use_device_decode", lambda decode, device, supported: supported)

    def broken(*a):
        raise RuntimeError("nvjpegDecodeBatched failed: 7")

    monkeypatch.setattr(decoding, "decode_batch", broken)
    capsys.readouterr()
    assert cl.main([*FAST, "--data", str(synthetic), "--out", str(auto_out)]) == 0
    printed = capsys.readouterr()
    assert "decode=cpu" in printed.out
    assert ("[rank 0] GPU decoding is off for this run: decoding 6 JPEGs on cpu failed (RuntimeError: "
            "nvjpegDecodeBatched failed: 7); PIL decodes in the CPU workers instead") in printed.err
    a, b = load_logits(cpu_out), load_logits(auto_out, require_manifest=True)
    assert b.manifest["decode"] == "PIL in CPU workers"
    np.testing.assert_array_equal(a.logits, b.logits)
    # Asked for by name, a failing device decoder stops the run with one line and writes nothing.
    gpu_out = tmp_path / "gpu.npz"
    assert cl.main([*FAST, "--decode", "gpu", "--data", str(synthetic), "--out", str(gpu_out)]) == 1
    err = capsys.readouterr().err
    assert "--decode gpu: decoding 6 JPEGs on cpu failed" in err and "Traceback" not in err
    assert not gpu_out.exists() and not cl.partial_dir(gpu_out).exists()


# ---------------------------------------------------------------------------- several models on Ray
def test_models_on_local_ray_one_task_each_resumable(synthetic, tmp_path, capsys):
    pytest.importorskip("ray")
    out_dir = tmp_path / "logits"
    args = ["--models", "test_efficientnet,no_such_model_xyz,test_resnet", "--random-init", "--device", "cpu",
            "--workers", "0", "--batch-size", "3", "--data", str(synthetic), "--out-dir", str(out_dir),
            "--ray", "local"]
    assert cl.main(args) == 2  # the unknown model's usage error; the other two finish
    printed = capsys.readouterr()
    errors = [ln for ln in printed.err.splitlines() if ln.startswith("error:")]
    assert errors == [ln for ln in printed.err.splitlines() if "no_such_model_xyz" in ln]
    assert len(errors) == 1 and errors[0].startswith("error: no_such_model_xyz: unknown model")
    assert "Traceback" not in printed.err
    assert sorted(p.name for p in out_dir.iterdir()) == ["test_efficientnet.json", "test_efficientnet.npz",
                                                          "test_resnet.json", "test_resnet.npz"]
    for name in ("test_efficientnet", "test_resnet"):
        b = load_logits(out_dir / f"{name}.npz", require_manifest=True)
        assert b.manifest["model"] == name and b.manifest["device"] == "cpu" and b.n_samples == 6
    # The same numbers as a plain in-process run.
    single = tmp_path / "single.npz"
    assert cl.main([*FAST[:1], "test_resnet", *FAST[2:], "--data", str(synthetic), "--out", str(single)]) == 0
    np.testing.assert_allclose(load_logits(single).logits, load_logits(out_dir / "test_resnet.npz").logits, atol=1e-3)
    capsys.readouterr()
    # Rerun without Ray: finished models are skipped, not recomputed.
    assert cl.main(["--models", "test_efficientnet,test_resnet", *args[2:-2]]) == 0
    out = capsys.readouterr().out
    assert "test_efficientnet: already done" in out and "test_resnet: already done" in out
