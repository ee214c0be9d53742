"""``hsc dashboard``: start the Streamlit dashboard, from a source checkout or from an installed wheel.

In a checkout this is ``streamlit run app.py`` in the repository. An installed wheel carries
``app.py``, ``app_pages/`` and the Streamlit config as the package ``hsc_dashboard_app`` (see
pyproject.toml), with the shipped example logits; this runs that copy. Streamlit runs with the
app's folder as its working directory, so its ``.streamlit/config.toml`` applies.

Options after ``--`` go to ``streamlit run`` unchanged (``hsc dashboard -- --theme.base dark``).
This module never imports Streamlit itself: ``hsc dashboard --help`` works without it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from .. import config
from ..core.validation import clip_path

# A checkout: hsc_core/ sits beside app.py and dashboard/.
_CHECKOUT = Path(__file__).resolve().parents[2]  # hsc_core/cli/dashboard.py → the checkout
INSTALLED_APP_PACKAGE = "hsc_dashboard_app"
CACHED_LOGITS_ENV = config.CACHED_LOGITS_DIR  # read by hsc_core.config.cached_logits_dir


def app_path() -> Path:
    """The ``app.py`` to run: this checkout's, else the installed ``hsc_dashboard_app`` copy."""
    if (_CHECKOUT / "app.py").is_file() and (_CHECKOUT / "dashboard").is_dir():
        return _CHECKOUT / "app.py"
    spec = importlib.util.find_spec(INSTALLED_APP_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / "app.py").is_file():
            return Path(folder) / "app.py"
    raise FileNotFoundError(f"the dashboard's app.py is neither beside {_CHECKOUT / 'hsc_core'} nor installed "
                            f"(package {INSTALLED_APP_PACKAGE}); reinstall with `pip install 'hsc-toolkit[dashboard]'`")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, help="port to serve on (Streamlit's default: 8501)")
    parser.add_argument("--host", help="address to listen on (Streamlit's default: all interfaces)")
    parser.add_argument("--logits-dir",
                        help=f"folder of cached-logits .npz files to list (default: ${CACHED_LOGITS_ENV}, "
                             "else the shipped examples)")
    parser.add_argument("--browser", action="store_true", help="open a browser tab (the config runs headless)")
    parser.add_argument("--print-command", action="store_true",
                        help="print the streamlit command and its working directory instead of running it")
    parser.add_argument("streamlit_args", nargs="*", metavar="-- STREAMLIT_OPTION",
                        help="after --: options passed to `streamlit run` unchanged")


def streamlit_command(args: argparse.Namespace) -> tuple[list[str], Path, dict[str, str]]:
    """(command, working directory, environment) that start the dashboard as ``args`` ask."""
    app = app_path()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app)]
    if args.port is not None:
        cmd += ["--server.port", str(args.port)]
    if args.host:
        cmd += ["--server.address", args.host]
    if args.browser:
        cmd += ["--server.headless", "false"]
    cmd += list(args.streamlit_args)
    env = dict(os.environ)
    if args.logits_dir:
        folder = Path(args.logits_dir).expanduser().resolve()  # Streamlit runs in another folder
        if not folder.is_dir():
            raise FileNotFoundError(f"--logits-dir {clip_path(args.logits_dir)}: no such folder")
        env[CACHED_LOGITS_ENV] = str(folder)
    elif config.is_set(CACHED_LOGITS_ENV):  # made absolute: Streamlit runs in another folder
        env[CACHED_LOGITS_ENV] = str(config.cached_logits_dir().resolve())
    elif app.parent != _CHECKOUT and (app.parent / "cached_logits").is_dir():
        env[CACHED_LOGITS_ENV] = str(app.parent / "cached_logits")  # the wheel's example logits
    return cmd, app.parent, env


def run(args: argparse.Namespace) -> int:
    cmd, cwd, env = streamlit_command(args)
    if args.print_command:
        print(f"cd {cwd} && " + " ".join(cmd))
        if env.get(CACHED_LOGITS_ENV):
            print(f"{CACHED_LOGITS_ENV}={env[CACHED_LOGITS_ENV]}")
        return 0
    if importlib.util.find_spec("streamlit") is None:
        print("hsc dashboard: error: Streamlit is not installed; run `pip install 'hsc-toolkit[dashboard]'`",
              file=sys.stderr)
        return 2
    sys.stdout.flush()
    if os.name == "posix":
        # Become Streamlit: Ctrl-C, SIGTERM and the exit status are its own, and no parent lingers.
        os.chdir(cwd)
        os.execve(sys.executable, cmd, env)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # the console sent Ctrl-C to Streamlit too: let it stop cleanly
        return proc.wait()
