"""The docs site's sources: the API reference lists every public name, the CLI reference is
generated from the parsers ``hsc`` runs, the guide takes pages by glob, and the gallery has its
examples. (The build itself, warnings as errors, runs in .ci/run: it executes the gallery.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import hsc_core
from hsc_core.cli import COMMANDS, build_parser

DOCS = Path(__file__).resolve().parents[1] / "docs"
BUILD_COMMAND = ".venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html"


def _autosummary_names(rst: str) -> list[str]:
    names: list[str] = []
    for block in re.findall(r"\.\. autosummary::\n((?:   .*\n|\n)+)", rst):
        names += [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith(":")]
    return names


def test_api_reference_lists_every_public_name_once():
    listed = _autosummary_names((DOCS / "api.rst").read_text(encoding="utf-8"))
    public = set(hsc_core.__all__) - {"__version__"}
    assert len(listed) == len(set(listed)), sorted(n for n in listed if listed.count(n) > 1)
    assert not public - set(listed), f"missing from docs/api.rst: {sorted(public - set(listed))}"
    assert not set(listed) - public, f"not in hsc_core.__all__: {sorted(set(listed) - public)}"
    assert len(listed) >= 68


def _extension(name: str):
    pytest.importorskip("docutils")
    pytest.importorskip("sphinx")
    spec = importlib.util.spec_from_file_location(name, DOCS / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli_extension():
    return _extension("hsc_cli")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_reference_is_generated_from_the_real_parser(command):
    rst = "\n".join(_cli_extension().command_rst(command, COMMANDS[command][1], build_parser(command)))
    assert rst.startswith(f"hsc {command}\n")
    parser = build_parser(command)
    for action in parser._actions:
        for flag in action.option_strings:
            if flag not in ("-h", "--help") and action.help != "==SUPPRESS==":
                assert flag in rst, (command, flag)
    assert ".. hsc-cli::" in (DOCS / "cli.rst").read_text(encoding="utf-8")


def test_cli_reference_escapes_markup_in_help_texts():
    escape = _cli_extension()._escape
    assert escape("a *star* and `tick` | bar_") == r"a \*star\* and \`tick\` \| bar\_"


def test_guide_takes_every_page_by_glob_and_the_gallery_has_its_examples():
    index = (DOCS / "guide" / "index.md").read_text(encoding="utf-8")
    assert ":glob:" in index and "\n*\n" in index  # a helper's docs/guide/<feature>.md joins by itself
    examples = sorted((DOCS / "examples").glob("plot_*.py"))
    assert len(examples) >= 10
    for path in examples:
        text = path.read_text(encoding="utf-8")
        assert text.startswith('"""\n') and ".show()" in text, path.name  # a title, and a figure for the scraper


def test_readme_and_ci_name_the_one_build_command():
    repo = DOCS.parent
    assert BUILD_COMMAND in (repo / "README.md").read_text(encoding="utf-8")
    assert BUILD_COMMAND.replace("--keep-going", "--keep-going -q") in (repo / ".ci" / "run").read_text(
        encoding="utf-8")


def test_numpydoc_fields_of_this_project_render_as_descriptions():
    split = _extension("docstring_fields").split_fields
    doc = ["One line.", "", "Parameters", "----------", "labels : (n,) true leaves; each class keeps its share.",
           "    Continued.", "n_cal, seed : calibration size and seed.", "", "Returns", "-------",
           "ThresholdResult", "", "Examples", "--------", ">>> d = {'a : b': 1}"]
    assert split(doc) == ["One line.", "", "Parameters", "----------", "labels",
                          "    (n,) true leaves; each class keeps its share.", "    Continued.", "n_cal, seed",
                          "    calibration size and seed.", "", "Returns", "-------", "ThresholdResult", "",
                          "Examples", "--------", ">>> d = {'a : b': 1}"]
