"""The package as users get it: build the wheel, check what is in it, install it elsewhere and run it.

The wheel is built from a copy of the sources (so no build/ or *.egg-info lands in the checkout)
with the development environment's setuptools (``--no-build-isolation``: no network), installed
with ``--no-deps --target`` (the dependencies are this venv's) and run from a folder outside the
repository with only the installed copy on the path.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hsc_core

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = {"hsc_core", "dashboard", "hsc_dashboard_app"}
_SKIP_COPY = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis",
                                    ".pytest_cache", "*.partial")


def _run(cmd: list[str], cwd: Path, env: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_library_and_dashboard_data_import_without_torch():
    """torch is the `pipeline` extra: the library, its settings and the dashboard's data layer must
    not pull it in (a fresh interpreter, so no other test's imports count)."""
    code = ("import sys, hsc_core, hsc_core.config, dashboard.evaluations; "
            "loaded = [m for m in ('torch', 'timm', 'torchvision') if m in sys.modules]; "
            "assert not loaded, loaded; print('ok')")
    res = _run([sys.executable, "-c", code], REPO, {**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools")
    src = tmp_path_factory.mktemp("src") / "hsc"
    shutil.copytree(REPO, src, ignore=_SKIP_COPY)
    out = tmp_path_factory.mktemp("wheel")
    res = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                "-w", str(out), str(src)], cwd=src, env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-3000:]
    (whl,) = out.glob("hsc_toolkit-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, dict, Path]:
    """(install folder, environment that sees only it besides the venv, a working folder outside the repo)."""
    target = tmp_path_factory.mktemp("site")
    res = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target),
                str(wheel)], cwd=target, env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HSC_CACHED_LOGITS_DIR")}
    env["PYTHONPATH"] = str(target)
    return target, env, tmp_path_factory.mktemp("elsewhere")


def _evaluate_the_example(hsc: str, example: Path, cwd: Path, env: dict) -> None:
    """``hsc evaluate`` on the installed example logits (two rules keep it quick) gives Lite0's
    Climbing gain with TS, 12.6159 %."""
    res = _run([hsc, "evaluate", str(example), "--rules", "selective,climbing", "--out", "results.csv"], cwd, env,
               timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = (cwd / "results.csv").read_text(encoding="utf-8").splitlines()
    gain = [r for r in rows if ",climbing,01,true," in r and ",gain_percent," in r]
    assert len(gain) == 1 and float(gain[0].split(",gain_percent,")[1].split(",")[0]) == pytest.approx(12.6159,
                                                                                                      abs=1e-4)


def test_wheel_holds_the_library_data_and_dashboard_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    # Every module of the library and the dashboard, the app and every page.
    expected = {p.relative_to(REPO).as_posix() for d in ("hsc_core", "dashboard") for p in (REPO / d).rglob("*.py")
                if "__pycache__" not in p.parts}
    expected |= {f"hsc_dashboard_app/{p.relative_to(REPO).as_posix()}" for p in [REPO / "app.py",
                                                                              *(REPO / "app_pages").glob("*.py")]}
    # The dashboard's CSS and JavaScript (dashboard/static/), read at run time.
    expected |= {f"dashboard/static/{p.name}" for p in (REPO / "dashboard/static").iterdir()
                 if p.suffix in (".css", ".js")}
    # The chart component (its page, style, scripts and plotly.js's basic bundle; issues 29 and 40).
    component = REPO / "dashboard/static/plotly_component"
    expected |= {f"dashboard/static/plotly_component/{p.name}"
                 for p in component.iterdir() if p.suffix in (".html", ".js", ".css")}
    # py.typed: the package's type hints are public (PEP 561).
    expected |= {"hsc_dashboard_app/.streamlit/config.toml", "hsc_core/datasets/data/README.md", "hsc_core/py.typed"}
    expected |= {f"hsc_core/datasets/data/{p.name}" for p in (REPO / "hsc_core/datasets/data").iterdir()
                 if p.suffix in (".json", ".csv", ".txt")}
    # The example logits, on purpose: the installed dashboard works at once, as a checkout's does.
    expected |= {f"hsc_dashboard_app/cached_logits/{p.name}" for p in (REPO / "cached_logits").iterdir()
                 if p.suffix in (".npz", ".json")}
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
    payload = {n for n in names if ".dist-info/" not in n}
    assert {n.split("/")[0] for n in payload} == TOP_LEVEL
    assert not payload - expected - {"hsc_dashboard_app/cached_logits/README.md"}, sorted(payload - expected)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or ".partial" in n
                or n.startswith(("tests/", "bench/", "docs/")) or "shared" in n.split("/")]

    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as z:
        entry = configparser.ConfigParser()
        entry.read_string(z.read(f"{dist_info}/entry_points.txt").decode())
        meta = z.read(f"{dist_info}/METADATA").decode()
    assert dict(entry["console_scripts"]) == {"hsc": "hsc_core.cli:entry_point"}
    assert "Requires-Python: >=3.10" in meta
    extras = {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Provides-Extra:")}
    assert extras == {"dashboard", "pipeline", "distributed", "sklearn", "torchmetrics", "hiclass", "test", "docs",
                      "all"}

    assert f"Version: {hsc_core.__version__}" in meta
    # the version is the changelog's newest release
    changelog = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M).group(1) == hsc_core.__version__ == "1.4.3"
    # 1.0: stable, typed, the Python versions it is tested on; the README as the long description
    for classifier in ("Development Status :: 5 - Production/Stable", "Programming Language :: Python :: 3.10",
                       "Operating System :: OS Independent", "Typing :: Typed"):
        assert f"Classifier: {classifier}" in meta, classifier
    assert "License-Expression: MIT" in meta and "Description-Content-Type: text/markdown" in meta
    assert "# HSC toolkit" in meta and "Project-URL: " in meta
    assert "docs" in {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Provides-Extra:")}


def test_installed_commands_run_outside_the_repository(installed):
    target, env, elsewhere = installed
    hsc = str(target / "bin" / "hsc")
    res = _run([hsc, "--help"], elsewhere, env)
    assert res.returncode == 0 and "commands:" in res.stdout
    assert all(c in res.stdout for c in ("dashboard", "cache-logits", "evaluate", "report"))
    res = _run([sys.executable, "-m", "hsc_core", "--help"], elsewhere, env)
    assert res.returncode == 0 and res.stdout.startswith("usage: python -m hsc_core COMMAND")
    for command, option in [("evaluate", "--help"), ("cache-logits", "--decode"), ("dashboard", "--logits-dir"),
                            ("report", "--help")]:
        res = _run([hsc, command, "--help"], elsewhere, env)
        assert res.returncode == 0 and option in res.stdout, (command, res.stderr[-2000:])
    # The imports resolve to the installed copy, not to this checkout.
    code = "import hsc_core, dashboard; print(hsc_core.__file__); print(dashboard.__file__)"
    res = _run([sys.executable, "-c", code], elsewhere, env)
    assert res.returncode == 0 and all(line.startswith(str(target)) for line in res.stdout.split())
    # The version, and hsc evaluate on the installed example logits (two rules keep it quick).
    res = _run([hsc, "--version"], elsewhere, env)
    assert res.returncode == 0 and res.stdout.strip() == f"hsc {hsc_core.__version__}", res.stderr[-2000:]
    example = target / "hsc_dashboard_app" / "cached_logits" / "efficientnet_lite0.npz"
    _evaluate_the_example(hsc, example, elsewhere, env)
    # Bad input: one line, exit 2.
    res = _run([hsc, "cache-logits", "--model", "x", "--data", str(elsewhere / "nope"), "--out", "o.npz"],
               elsewhere, env)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "neither a labels CSV" in res.stderr


def test_installed_dashboard_runs_its_own_copy(installed):
    target, env, elsewhere = installed
    res = _run([str(target / "bin" / "hsc"), "dashboard", "--port", "8613", "--print-command"], elsewhere, env)
    assert res.returncode == 0, res.stderr
    app = target / "hsc_dashboard_app" / "app.py"
    assert res.stdout.splitlines() == [
        f"cd {app.parent} && {sys.executable} -m streamlit run {app} --server.port 8613",
        f"HSC_CACHED_LOGITS_DIR={app.parent / 'cached_logits'}",
    ]
    pytest.importorskip("streamlit")
    # The installed app, every page, on the shipped example logits, with nothing from the checkout.
    script = f"""
import os
os.environ["HSC_CACHED_LOGITS_DIR"] = {str(app.parent / "cached_logits")!r}
from streamlit.testing.v1 import AppTest
import dashboard, hsc_core
assert dashboard.__file__.startswith({str(target)!r}) and hsc_core.__file__.startswith({str(target)!r})
at = AppTest.from_file({str(app)!r}, default_timeout=120)
at.run()
assert not at.exception, [e.value for e in at.exception]
for page in ("app_pages/risk_coverage.py", "app_pages/explorer.py"):
    at.switch_page(page).run()
    assert not at.exception, (page, [e.value for e in at.exception])
models = next(sb.options for sb in at.sidebar.selectbox if sb.label == "Model (cached logits)")
assert set(models) >= set(["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]), models
print("ok")
"""
    res = _run([sys.executable, "-c", script], elsewhere, env, timeout=240)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_wheel_installs_in_a_fresh_venv_with_its_dependencies(wheel, tmp_path):
    """A new virtual environment (no system packages, none of this venv's): ``pip install`` the wheel
    pulls the base dependencies from the package index (pip's cache after the first time), then
    ``hsc --version`` and ``hsc evaluate`` on the example logits run there. Skipped without an index."""
    fresh = tmp_path / "fresh"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "HSC_CACHED_LOGITS_DIR")}
    res = _run([sys.executable, "-m", "venv", str(fresh)], tmp_path, env)
    assert res.returncode == 0, res.stderr[-2000:]
    pip, hsc = str(fresh / "bin" / "pip"), str(fresh / "bin" / "hsc")
    res = _run([pip, "install", "-q", "--disable-pip-version-check", str(wheel)], tmp_path, env, timeout=900)
    if res.returncode != 0 and any(s in res.stderr for s in ("No matching distribution", "Could not find a version",
                                                             "NewConnectionError", "Network is unreachable")):
        pytest.skip(f"no package index reachable: {res.stderr.strip().splitlines()[-1][:200]}")
    assert res.returncode == 0, res.stderr[-3000:]
    # only the base dependencies came in: no torch, no Streamlit
    listed = _run([pip, "list", "--format=freeze"], tmp_path, env).stdout.lower()
    assert f"hsc-toolkit=={hsc_core.__version__}" in listed and "numpy==" in listed
    assert "torch==" not in listed and "streamlit==" not in listed
    res = _run([hsc, "--version"], tmp_path, env)
    assert res.returncode == 0 and res.stdout.strip() == f"hsc {hsc_core.__version__}", res.stderr[-2000:]
    example = next((fresh / "lib").glob("python3*/site-packages/hsc_dashboard_app/cached_logits/"
                                        "efficientnet_lite0.npz"))
    _evaluate_the_example(hsc, example, tmp_path, env)  # the same gain as in the development venv
