"""Hostile input (issue 12): file paths in sample ids, inflating and lying .npz files, huge and
16-bit images, markdown in links and names, link values no widget can hold.

Library tests build each hostile file here; the AppTest tests drive the dashboard with them.
The real-browser versions are in test_security_browser.py.
"""

from __future__ import annotations

import io
import re
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dashboard import state  # noqa: E402
from dashboard.widgets import plain, public_message  # noqa: E402
from hsc_core.datasets.images import (  # noqa: E402
    ImageReadError,
    max_image_pixels,
    open_image_safely,
    safe_image_path,
)
from hsc_core.datasets.logits_io import (  # noqa: E402
    MAX_ABS_LOGIT,
    LogitsFileError,
    load_logits,
    load_logits_bytes,
    save_logits,
)

APP = str(ROOT / "app.py")
TIMEOUT = 180


# ---------------------------------------------------------------------------- hostile files
def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def model_arrays(ids, logits=None, **extra) -> dict[str, np.ndarray]:
    n = len(ids)
    rng = np.random.default_rng(0)
    out = {"logits": rng.normal(size=(n, 1000)).astype(np.float16) if logits is None else logits,
           "labels": np.arange(n, dtype=np.int16) % 1000, "sample_ids": np.array(ids)}
    out.update(extra)
    return out


def zip_bomb(rows: int = 570_000, cols: int = 250) -> bytes:
    """An honest npz of zeros (rows × cols float32, 570 MB inflated) written in 1 MB pieces, so the
    test never holds the array; deflate squeezes it to about 0.6 MB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)})
        with zf.open("logits.npy", "w", force_zip64=True) as fh:
            fh.write(header.getvalue())
            left = rows * cols * 4
            chunk = bytes(1 << 20)
            while left:
                fh.write(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))
        for key, arr in (("labels", np.zeros(rows, np.int16)), ("sample_ids", np.array(["x"]))):
            b = io.BytesIO()
            np.save(b, arr)
            zf.writestr(f"{key}.npy", b.getvalue())
    return buf.getvalue()


def lying_npz(shape=(10**9, 1000), descr="<f4", payload: int = 4000) -> bytes:
    """An npz whose logits header claims ``shape`` but which stores ``payload`` bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
        zf.writestr("logits.npy", header.getvalue() + bytes(payload))
        for key, arr in (("labels", np.zeros(2, np.int16)), ("sample_ids", np.array(["a", "b"]))):
            b = io.BytesIO()
            np.save(b, arr)
            zf.writestr(f"{key}.npy", b.getvalue())
    return buf.getvalue()


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def grey16_png(size: int = 64) -> bytes:
    ramp = np.linspace(0, 65535, size * size).reshape(size, size).astype(np.uint16)
    return png_bytes(Image.fromarray(ramp))


# ---------------------------------------------------------------------------- 1. image paths
@pytest.fixture()
def image_tree(tmp_path):
    """<tmp>/images/{a.png, sub/b.jpg, notes.txt, dir.png/, inside.png → a.png, escape.png → ../secret.png}
    and <tmp>/secret.png outside the image folder."""
    images = tmp_path / "images"
    (images / "sub").mkdir(parents=True)
    Image.new("RGB", (8, 8), (0, 128, 0)).save(images / "a.png")
    Image.new("RGB", (8, 8), (0, 0, 128)).save(images / "sub" / "b.jpg")
    (images / "notes.txt").write_text("not an image")
    (images / "dir.png").mkdir()
    Image.new("RGB", (8, 8), (200, 0, 0)).save(tmp_path / "secret.png")
    (images / "inside.png").symlink_to(images / "a.png")
    (images / "escape.png").symlink_to(tmp_path / "secret.png")
    return images


def test_safe_image_path_accepts_plain_names_inside_the_folder(image_tree):
    assert safe_image_path(image_tree, "a.png") == (image_tree / "a.png").resolve()
    assert safe_image_path(image_tree, "sub/b.jpg") == (image_tree / "sub" / "b.jpg").resolve()
    assert safe_image_path(str(image_tree), "./a.png") == (image_tree / "a.png").resolve()
    assert safe_image_path(image_tree, "inside.png") == (image_tree / "a.png").resolve()  # link within
    assert safe_image_path(image_tree, "A.PNG") is None or sys.platform == "darwin"  # no such file


@pytest.mark.parametrize("sample_id", [
    "../secret.png", "sub/../../secret.png", "sub/../a.png", "/etc/passwd", "/etc/hostname.png",
    "escape.png", "notes.txt", "dir.png", "missing.png", "a.png\x00.txt", "sub\\b.jpg", "C:a.png",
    "", "a.png/", "//a.png",
])
def test_safe_image_path_refuses_everything_else(image_tree, sample_id):
    assert safe_image_path(image_tree, sample_id) is None


def test_safe_image_path_refuses_absolute_paths_even_to_real_images(image_tree):
    assert safe_image_path(image_tree, str(image_tree / "a.png")) is None
    assert safe_image_path(image_tree, str(image_tree.parent / "secret.png")) is None
    assert safe_image_path(None, "a.png") is None
    assert safe_image_path(image_tree, 12) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- 2 & 5. images
def test_sixteen_bit_greyscale_becomes_displayable_8_bit_rgb():
    data = grey16_png()
    assert Image.open(io.BytesIO(data)).mode == "I;16"
    img = open_image_safely(data, name="grey16.png")
    arr = np.asarray(img)
    assert img.mode == "RGB" and arr.dtype == np.uint8
    # Scaled, not clipped: the 0 … 65535 ramp spans 0 … 255, monotone along the rows.
    assert arr[0, 0, 0] == 0 and arr[-1, -1, 0] == 255
    assert np.all(np.diff(arr[:, :, 0].ravel().astype(int)) >= 0)
    assert (arr[:, :, 0] == arr[:, :, 1]).all()


@pytest.mark.parametrize("mode", ["P", "CMYK", "LA", "L", "1", "F"])
def test_other_modes_become_rgb(mode):
    img = Image.new("RGB", (16, 16), (10, 200, 30)).convert(mode)
    out = open_image_safely(img)
    assert out.mode == "RGB" and out.size == (16, 16)


def test_pixel_cap_refuses_before_decoding():
    # 12000 × 12000 grey PNG: 170 kB on disk, 144 MP; refused from its header, never decoded.
    data = png_bytes(Image.new("L", (12000, 12000), 128))
    assert len(data) < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ImageReadError, match=r"big\.png: image is 12,000 × 12,000 = 144 megapixels, more than "
                                                 r"the 40 allowed"):
            open_image_safely(data, name="big.png")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000


def test_pixel_cap_is_configurable(monkeypatch):
    small = png_bytes(Image.new("RGB", (40, 40)))
    assert max_image_pixels() == 40_000_000
    monkeypatch.setenv("HSC_MAX_IMAGE_MEGAPIXELS", "0.001")  # 1,000 pixels
    assert max_image_pixels() == 1000
    with pytest.raises(ImageReadError, match="1,600|40 × 40"):
        open_image_safely(small, name="s.png")
    assert open_image_safely(small, name="s.png", max_pixels=1600).size == (40, 40)


def test_non_images_are_refused_by_content_not_name(tmp_path):
    fake = tmp_path / "passwd.png"
    fake.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(ImageReadError, match=r"^passwd\.png: cannot read image \(not in a format"):
        open_image_safely(fake)


# ---------------------------------------------------------------------------- 2. npz memory
def test_zip_bomb_is_refused_from_its_headers_before_inflating():
    data = zip_bomb()
    assert len(data) < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(LogitsFileError, match=r"^bomb\.npz: its arrays inflate to 571\.1 MB, more than the "
                                                  r"200\.0 MB allowed here$"):
            load_logits_bytes(data, "bomb.npz", max_bytes=200_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(data) + 10_000_000  # the upload itself, not the 570 MB


def test_zip_bomb_cap_also_guards_files_on_disk(tmp_path):
    path = tmp_path / "bomb.npz"
    path.write_bytes(zip_bomb(rows=300_000, cols=100))  # 120 MB inflated
    with pytest.raises(LogitsFileError, match="inflate to 120.6 MB, more than the 100.0 MB allowed"):
        load_logits(path, max_bytes=100_000_000)


def test_header_claiming_a_huge_array_is_refused_without_memory_error():
    with pytest.raises(LogitsFileError, match=r"^liar\.npz: array 'logits' claims shape \(1000000000, 1000\) of "
                                              r"float32 \(4\.0 TB\), but the file stores 4,000 bytes for it"):
        load_logits_bytes(lying_npz(), "liar.npz")  # no cap at all: the size check alone stops it


def test_header_smaller_than_stored_data_is_refused():
    with pytest.raises(LogitsFileError, match=r"claims shape \(2, 1000\) of float32 \(8,000 bytes\), but the file "
                                              r"stores 12,000 bytes"):
        load_logits_bytes(lying_npz(shape=(2, 1000), payload=12_000), "x.npz")


def test_object_array_header_is_refused_before_unpickling():
    with pytest.raises(LogitsFileError, match="object \\(pickled\\) array, which is not loaded for safety"):
        load_logits_bytes(lying_npz(shape=(2,), descr="|O", payload=16), "x.npz")


def test_upload_messages_name_the_file_not_a_path():
    with pytest.raises(LogitsFileError) as err:
        load_logits_bytes(b"PK\x03\x04 broken", "my upload.npz")
    assert str(err.value).startswith("my upload.npz: not a valid .npz")
    assert "/" not in str(err.value)
    with pytest.raises(LogitsFileError, match=r"^x\.npz: not a valid \.npz file \(not a zip archive\)$"):
        load_logits_bytes(b"hello", "x.npz")


def test_upload_round_trip_matches_file_loading(tmp_path):
    ids = [f"img_{i}.JPEG" for i in range(5)]
    arrays = model_arrays(ids)
    path = save_logits(tmp_path / "m.npz", arrays["logits"].astype(np.float32), arrays["labels"], ids)
    from_file, from_bytes = load_logits(path), load_logits_bytes(path.read_bytes(), "m.npz", max_bytes=10**6)
    np.testing.assert_array_equal(from_file.logits, from_bytes.logits)
    assert from_bytes.name == "m" and from_bytes.manifest == {} and list(from_bytes.sample_ids) == ids


def test_shipped_logits_load_under_the_dashboard_cap():
    from dashboard.catalog import max_upload_bytes

    files = sorted((ROOT / "cached_logits").glob("*.npz"))
    if not files:
        pytest.skip("no shipped logits")
    for f in files:
        bundle = load_logits(f, max_bytes=max_upload_bytes())
        assert bundle.logits.shape[1] == 1000 and np.abs(bundle.logits).max() < 100


def test_upload_cap_is_configurable(monkeypatch):
    from dashboard.catalog import max_upload_bytes

    monkeypatch.delenv("HSC_MAX_UPLOAD_MB", raising=False)
    assert max_upload_bytes() == 200_000_000
    monkeypatch.setenv("HSC_MAX_UPLOAD_MB", "1.5")
    assert max_upload_bytes() == 1_500_000
    monkeypatch.setenv("HSC_MAX_UPLOAD_MB", "lots")
    assert max_upload_bytes() == 200_000_000


# ---------------------------------------------------------------------------- 5. logit bound
@pytest.mark.parametrize("value", [3e38, -3e38, MAX_ABS_LOGIT * 1.001])
def test_logits_beyond_the_bound_are_refused_naming_the_cause(value):
    logits = np.zeros((2, 1000), np.float32)
    logits[1, 7] = value
    data = npz_bytes(model_arrays(["a", "b"], logits=logits))
    expected = f"huge.npz: logits reach {value:.3g} (first in row 1); logits must lie within ±10000 ("
    with pytest.raises(LogitsFileError, match="^" + re.escape(expected)):
        load_logits_bytes(data, "huge.npz")


def test_logits_at_the_bound_load():
    logits = np.zeros((2, 1000), np.float32)
    logits[0, 0], logits[1, 1] = MAX_ABS_LOGIT, -MAX_ABS_LOGIT
    bundle = load_logits_bytes(npz_bytes(model_arrays(["a", "b"], logits=logits)), "edge.npz")
    assert bundle.logits[0, 0] == MAX_ABS_LOGIT


# ---------------------------------------------------------------------------- 3. plain text
HOSTILE = [
    "x** [log in](http://evil.example/) ![t](http://evil.example/t.png) **",
    "`x` [a](http://evil.example/) `",
    "<img src=x onerror=alert(1)> &amp; $x^2$ ~~s~~ :red[r] :smile: a@b.example www.evil.example",
    "line one\n# heading\n\n- item",
    "1. list", "__init__ *a* _b_",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_leaves_no_markdown_syntax(text):
    out = plain(text)
    assert "\n" not in out
    # Every syntax character is preceded by a backslash …
    assert not re.search(r"(?<!\\)[`*\[\]<>&$~|]", out)
    # … "_" stays only between letters/digits, URLs, addresses and :codes: are broken by a word joiner,
    assert not re.search(r"(?<![\\\w])_|(?<!\\)_(?!\w)", out)
    assert "://" not in out and "www." not in out and "@b" not in out and ":red" not in out
    # … and removing the escapes and joiners gives back the text, on one line.
    assert re.sub(r"\\(.)", r"\1", out).replace("\u2060", "") == " ".join(text.split())


def test_plain_keeps_ordinary_names_readable():
    assert plain("efficientnet_lite0") == "efficientnet_lite0"
    assert plain("ILSVRC2012_val_00000038.JPEG") == "ILSVRC2012_val_00000038.JPEG"
    assert plain("cat.png: cannot read image (x)") == "cat.png: cannot read image (x)"


def test_public_message_drops_server_folders():
    msg = "/work/main/cached_logits/x.npz: not a valid .npz (see /tmp/hsc_upload_1/x.npz)"
    assert public_message(msg) == "x.npz: not a valid .npz (see x.npz)"
    assert public_message("T = 1/2, a/b") == "T = 1/2, a/b"


# ---------------------------------------------------------------------------- 4. link values
def test_every_ranged_setting_parses_exactly_its_widget_range():
    ranged = {k: s for k, s in state.SETTINGS.items() if s.min_value is not None}
    assert {"theta", "bins", "acc", "conf", "reps", "eps", "seed", "split_seed"} <= set(ranged)
    for key, s in ranged.items():
        lo, hi = s.min_value, s.max_value
        assert s.parse(str(lo)) == lo and s.parse(str(hi)) == hi, key
        step = 1 if isinstance(lo, int) else 0.001
        for bad in (lo - step, hi + step, "nan", "inf", "x", "", "1" * 40):
            with pytest.raises(state.Invalid):
                s.parse(str(bad))
        assert s.widget_range() == {"min_value": lo, "max_value": hi}


def test_invalid_values_say_what_is_accepted():
    with pytest.raises(state.Invalid, match="^a whole number from 5 to 30$"):
        state.SETTINGS["bins"].parse("100000")
    with pytest.raises(state.Invalid, match="^a number from 0.7 to 0.995$"):
        state.SETTINGS["acc"].parse("0.1")
    with pytest.raises(state.Invalid, match="^rule names from selective, climbing"):
        state.SETTINGS["rules"].parse("climbing,nope")
    assert state.SETTINGS["rules"].parse("jumping,climbing") == ["climbing", "jumping"]


# ---------------------------------------------------------------------------- AppTest
AppTest = pytest.importorskip("streamlit.testing.v1").AppTest


@pytest.fixture()
def app_env(monkeypatch, tmp_path):
    """Shipped-like small models, and an image folder with a secret image just outside it."""
    from hsc_core.core.synthetic import synthetic_logits
    from hsc_core.datasets.imagenet import imagenet_hierarchy

    models = tmp_path / "cached_logits"
    images = tmp_path / "imgs" / "images"
    images.mkdir(parents=True)
    logits, labels = synthetic_logits(imagenet_hierarchy(), 200, top1=0.75, seed=3)
    save_logits(models / "alpha_net.npz", logits, labels, [f"s{i}.png" for i in range(200)], dtype="float32")
    Image.new("RGB", (12, 12), (200, 0, 0)).save(tmp_path / "imgs" / "secret.png")
    Image.new("RGB", (12, 12), (0, 0, 200)).save(images / "ok.png")
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.setenv("HSC_CACHED_LOGITS_DIR", str(models))
    monkeypatch.setenv("HSC_IMAGE_DIR", str(images))
    return tmp_path


def open_app(page: str = "", query: dict | None = None) -> AppTest:
    """One page run as the main script (it does app.py's setup itself: sidebar, URL, notices), so a
    test only depends on the page it is about."""
    at = AppTest.from_file(str(ROOT / (page or "app_pages/calibration_coverage.py")), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="_npz_upload").upload(name, data).run()
    return at


ISSUE_LINKS = [
    ("app_pages/calibration_coverage.py", {"bins": "0"}, "bins", "a whole number from 5 to 30"),
    ("app_pages/calibration_coverage.py", {"bins": "100000"}, "bins", "a whole number from 5 to 30"),
    ("app_pages/guaranteed_accuracy.py", {"acc": "0.1"}, "acc", "a number from 0.7 to 0.995"),
    ("app_pages/guaranteed_accuracy.py", {"conf": "0.999"}, "conf", "a number from 0.5 to 0.99"),
    ("app_pages/guaranteed_accuracy.py", {"reps": "1000000"}, "reps", "a whole number from 10 to 1,000"),
    ("app_pages/guaranteed_accuracy.py", {"solve": "n", "eps": "0.0001", "acc": "0.9999", "conf": "0.99"}, "acc",
     "a number from 0.7 to 0.995"),
    ("app_pages/explorer.py", {"seed": "9" * 25}, "seed", "a whole number from 0 to"),
]


@pytest.mark.parametrize("page, query, key, accepts", ISSUE_LINKS)
def test_issue_links_show_the_page_and_say_what_was_ignored(app_env, page, query, key, accepts):
    at = open_app(page, query)
    assert not at.exception, [e.value for e in at.exception]
    warning = " ".join(w.value for w in at.warning)
    assert f"**{key}** = {plain(query[key])} (must be {accepts}" in warning
    assert at.session_state[key] == state.SETTINGS[key].default
    for other, value in query.items():  # the valid ones were used
        if other != key:
            assert at.session_state[other] == state.SETTINGS[other].parse(value)


def test_every_widget_range_holds_at_both_ends_of_each_setting(app_env):
    pages = {"bins": "app_pages/calibration_coverage.py", "acc": "app_pages/guaranteed_accuracy.py",
             "conf": "app_pages/guaranteed_accuracy.py", "reps": "app_pages/guaranteed_accuracy.py",
             "eps": "app_pages/guaranteed_accuracy.py", "split_seed": "app_pages/guaranteed_accuracy.py",
             "theta": "app_pages/risk_coverage.py", "seed": "app_pages/explorer.py",
             "g_reps": "app_pages/guaranteed_accuracy.py", "g_cov": "app_pages/guaranteed_accuracy.py"}
    for key, page in pages.items():
        s = state.SETTINGS[key]
        for value in (s.min_value, s.max_value):
            at = open_app(page, {key: str(value)})
            assert not at.exception, (key, value, [e.value for e in at.exception])
            assert not at.warning or all(f"**{key}**" not in w.value for w in at.warning), (key, value)


def test_markdown_in_a_model_link_is_shown_as_text(app_env):
    at = open_app("", {"model": HOSTILE[0]})
    assert not at.exception
    error = " ".join(e.value for e in at.error)
    assert f"Unknown model **{plain(HOSTILE[0])}**" in error
    shown = error.split("Unknown model **", 1)[1].split("**: no such file", 1)[0]
    assert not re.search(r"(?<!\\)[\[\]`*<>]", shown)  # every bracket, backtick and star escaped
    at = open_app("app_pages/calibration_coverage.py", {"bins": "`x` [a](http://evil.example/) `"})
    warning = " ".join(w.value for w in at.warning)
    assert "\\`x\\` \\[a\\](http:\u2060//evil.example/) \\`" in warning


def test_uploaded_sample_ids_never_read_files_outside_the_image_folder(app_env):
    hostile = ["../secret.png", str(app_env / "imgs" / "secret.png"), "/etc/passwd", "images/../../secret.png"]
    ids = hostile + ["ok.png"] + [f"filler{i}.png" for i in range(35)]  # 90 % of them are evaluated
    at = upload(open_app("app_pages/explorer.py"), "paths.npz", npz_bytes(model_arrays(ids)))
    assert "Added **paths**" in " ".join(s.value for s in at.sidebar.success)
    for sample in hostile + ["ok.png"]:
        at.session_state["pick"] = "random"
        at.session_state["sample"] = sample
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state["sample"] == sample  # the page shows this sample …
        captions = " ".join(c.value for c in at.caption)
        if sample == "ok.png":
            assert len(at.get("image")) == 1
        else:  # … but never the file its id names
            assert not at.get("image")
            assert f"Sample {plain(sample)} (no image with this name in the image folder)" in captions


def test_zip_bomb_upload_is_refused_with_a_message(app_env, monkeypatch):
    at = upload(open_app(), "bomb.npz", zip_bomb())
    assert not at.exception
    msg = " ".join(e.value for e in at.sidebar.error)
    assert "Cannot add **bomb.npz**: its arrays inflate to 571.1 MB" in msg and "more than the 200.0 MB allowed" in msg
    assert "bomb" not in at.selectbox(key="_w.sb.model").options
    monkeypatch.setenv("HSC_MAX_UPLOAD_MB", "0.01")  # configurable: now a 2-sample file is too big
    at = upload(open_app(), "small.npz", npz_bytes(model_arrays([f"{i}.png" for i in range(10)])))
    assert "more than the 10,000 bytes allowed" in " ".join(e.value for e in at.sidebar.error)


def test_lying_header_and_huge_logits_uploads_are_refused(app_env):
    at = upload(open_app(), "liar.npz", lying_npz())
    assert not at.exception
    assert "claims shape (1000000000, 1000)" in " ".join(e.value for e in at.sidebar.error)
    logits = np.full((2, 1000), 3e38, np.float32)
    at = upload(open_app(), "huge.npz", npz_bytes(model_arrays(["a", "b"], logits=logits)))
    assert "logits reach 3e+38" in " ".join(e.value for e in at.sidebar.error)


def _cached_values(session_id):
    """Values held by st.cache_resource: the global caches (None) or one session's (internal API)."""
    from streamlit.runtime.caching import cache_resource_api as cra

    caches = cra._resource_caches._function_caches.get(session_id, {})
    return [r.value for c in caches.values() for r in list(c._mem_cache.values())]


def test_uploads_live_in_the_session_and_leave_with_it(app_env):
    from streamlit.runtime.caching import cache_resource_api as cra

    from dashboard import catalog

    at = upload(open_app(), "mine.npz", npz_bytes(model_arrays([f"m{i}.png" for i in range(50)])))
    location = at.session_state["_uploaded_models"]["mine"]
    assert location.startswith("upload:") and not Path(location).exists()  # nothing written to disk
    assert not at.exception and "**mine**" in " ".join(c.value for c in at.caption)

    def from_upload(values):
        return [v for v in values if getattr(v, "name", None) == "mine" or getattr(v, "model", None) == "mine"]

    assert from_upload(_cached_values("test session id"))  # AppTest's session id
    assert not from_upload(_cached_values(None))  # nothing in the caches every session shares
    bundles = at.session_state["_uploaded_bundles"]
    assert [b.name for b in bundles.values()] == ["mine"]
    cra._resource_caches.clear_session("test session id")  # what Streamlit does when a session disconnects
    assert not from_upload(_cached_values("test session id"))
    assert not bundles  # the upload itself is released too
    with pytest.raises(catalog.DataError, match="belongs to another \\(or an expired\\) browser session"):
        catalog._uploaded_bundle(location)  # outside that session's state


def test_an_uploads_evaluation_is_kept_for_its_session_only(app_env):
    """The ModelEvaluation of an uploaded file (its logits, decision paths, curves) is cached for
    that browser session only, never where every session can reach it, and released with it."""
    import gc
    import weakref

    from streamlit.runtime.caching import cache_resource_api as cra

    from hsc_core.evaluation import ModelEvaluation

    at = upload(open_app(), "mine.npz", npz_bytes(model_arrays([f"m{i}.png" for i in range(50)])))
    assert not at.exception and len(at.dataframe) == 1  # the page evaluated the upload (its ECE table)

    def evaluations(session_id) -> dict[str, ModelEvaluation]:
        return {v.name: v for v in _cached_values(session_id) if isinstance(v, ModelEvaluation)}

    mine = evaluations("test session id")["mine"]
    assert "mine" not in evaluations(None) and "alpha_net" in evaluations(None)  # a shared file: shared
    assert mine.setting(False).n == 45 and mine.setting(False).evaluation is mine
    released = weakref.ref(mine)
    del mine
    cra._resource_caches.clear_session("test session id")  # what Streamlit does when a session disconnects
    AppTest.from_string("x = 1").run()  # the next script run (of any session) replaces the last one's globals
    gc.collect()
    assert released() is None  # nothing else holds the upload's logits or results


def test_sources_tags_and_file_names_are_plain(app_env):
    tag = "x** [log in](http://evil.example/) **"
    name = "[evil](http:evil.example).npz"
    at = upload(open_app(), name, npz_bytes(model_arrays(["a.png", "b.png", "c.png"],
                                                           sources=np.array([tag] * 3))))
    assert not at.exception
    assert "Added **evil_http_evil.example**" in " ".join(s.value for s in at.sidebar.success)  # a safe stem
    bad = upload(open_app(), name, b"junk")
    assert f"Cannot add **{plain(name)}**: not a valid .npz file" in " ".join(e.value for e in bad.sidebar.error)
    assert plain(name) == "\\[evil\\](http:\u2060evil.example).npz"
    at = AppTest.from_file(str(ROOT / "app_pages/explorer.py"), default_timeout=TIMEOUT)
    ids = [f"{i}.png" for i in range(20)]
    at = upload(at.run(), name, npz_bytes(model_arrays(ids, sources=np.array([tag] * 20))))
    at.run()
    captions = " ".join(c.value for c in at.caption)
    assert f"Source: {plain(tag)}" in captions


def test_try_an_image_shows_16_bit_png_and_refuses_huge_ones(app_env):
    pytest.importorskip("timm")
    at = open_app("app_pages/try_an_image.py")
    at.file_uploader(key="img_upload").upload("grey16.png", grey16_png(), "image/png").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("image")) == 1 and not at.error
    t0 = time.perf_counter()
    at.file_uploader(key="img_upload").upload("big.png", png_bytes(Image.new("L", (12000, 12000), 128)),
                                              "image/png").run()
    assert not at.exception
    assert any("big.png: image is 12,000 × 12,000 = 144 megapixels" in e.value for e in at.error)
    assert time.perf_counter() - t0 < 30


def test_added_data_set_leaves_no_files_and_no_server_paths(app_env):
    """A hierarchy added in the sidebar is parsed and kept in the session only: no temp folder
    stays behind, the caption names no server folder and the user's name is shown literally."""
    import tempfile

    def leftovers() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).iterdir()
                if p.name.startswith(("hsc_datasets_", "hsc_upload_"))}

    before = leftovers()
    at = open_app()
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "`datasets/` folder next to `cached_logits/`" in captions
    assert not re.search(r"(?<![\w.~`])/(?:[^\s/:'\"`]+/)+", captions), captions  # no absolute path
    assert str(ROOT) not in captions and str(app_env) not in captions
    at.text_input(key="_ds_name").input("toy.v1")
    at.file_uploader(key="_ds_tree").upload("t.nwk", b"((a,b)x,(c,d)y)r;", "text/plain").run()
    next(b for b in at.button if b.label == "Add data set").click().run()
    assert not at.exception
    assert f"Added data set **{plain('toy.v1')}** (4 classes, 7 nodes)" in " ".join(s.value for s in at.sidebar.success)
    assert leftovers() == before
    ds = at.session_state["_session_dataset_objects"][at.session_state["_session_datasets"]["toy.v1"]]
    assert ds.class_names == ("a", "b", "c", "d") and ds.image_dir is None
    # A rejected file: its error names the file, never the temp folder it was parsed from.
    at.text_input(key="_ds_name").input("loop")
    at.file_uploader(key="_ds_tree").upload("loop.csv", b"parent,child\na,b\nb,a\nb,c\n", "text/csv").run()
    next(b for b in at.button if b.label == "Add data set").click().run()
    msg = " ".join(e.value for e in at.sidebar.error)
    assert msg.startswith("Cannot add data set loop") and tempfile.gettempdir() not in msg
    assert leftovers() == before


def test_explorer_says_when_the_data_set_has_no_image_folder(app_env, monkeypatch):
    # A CIFAR-100 file (picked in the sidebar): that data set has no image folder, unlike a refused id.
    arrays = model_arrays([f"{i}.png" for i in range(40)], logits=np.zeros((40, 100), np.float16))
    arrays["labels"] = np.arange(40, dtype=np.int16)
    at = upload(open_app("app_pages/explorer.py"), "plain.npz", npz_bytes(arrays))
    next(sb for sb in at.sidebar.selectbox if sb.key.startswith("_dataset_pick.")).set_value("cifar100").run()
    at.session_state["pick"] = "random"
    at.run()
    captions = " ".join(c.value for c in at.caption)
    assert not at.exception and not at.get("image")
    assert "(no image folder for this data set: set `HSC_IMAGE_DIR`" in captions
    assert "no image with this name" not in captions
