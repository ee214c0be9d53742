"""Sphinx configuration of the HSC toolkit's documentation.

Build (the one command, also run by CI with warnings as errors):

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

The gallery (``examples/plot_*.py``) is executed at build time on the shipped logits; each example
shows its interactive Plotly figure through plotly's sphinx-gallery scraper.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))  # this checkout's hsc_core, not another installed copy
sys.path.insert(0, str(DOCS / "_ext"))
os.environ.setdefault("HSC_CACHED_LOGITS_DIR", str(REPO / "cached_logits"))

import plotly.io as pio  # noqa: E402

import hsc_core  # noqa: E402

pio.renderers.default = "sphinx_gallery_png"  # fig.show() → the scraper embeds it, interactive

project = "HSC toolkit"
author = "The HSC toolkit contributors"
copyright = "2024–2026, The HSC toolkit contributors"  # noqa: A001
release = hsc_core.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "hsc_cli",
    "docstring_fields",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "examples/README.rst", "**.ipynb_checkpoints", "auto_examples/*.py",
                    "auto_examples/*.ipynb", "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json"]
templates_path = ["_templates"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

# API reference: one page per public name (autosummary), docstrings in numpydoc style.
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc sections say the shapes and types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": ["examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "image_scrapers": ("plotly.io.sg_scraper.plotly_sg_scraper",),
    "reset_modules": ("plotly.io.sg_scraper.reset_renderer",),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "show_memory": False,
    "min_reported_time": 1,
}

html_theme = "pydata_sphinx_theme"
html_title = f"HSC toolkit {release}"
# plotly.js from the installed plotly, served with the pages: the gallery's figures also draw offline
# (the scraper's own <script> tag loads the same version from its CDN when online)
_PLOTLY_JS = DOCS / "_build" / "plotly_js"
_PLOTLY_JS.mkdir(parents=True, exist_ok=True)
shutil.copyfile(Path(pio.__file__).parents[1] / "package_data" / "plotly.min.js", _PLOTLY_JS / "plotly.min.js")
html_static_path = ["_static", str(_PLOTLY_JS)]
html_js_files = ["plotly.min.js"]
smartquotes = False  # flags stay "--flag", not "–flag"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_context = {"default_mode": "light"}

# Without kaleido (not a dependency) the plotly scraper cannot write PNG thumbnails: the gallery
# keeps its placeholder thumbnails and the pages their interactive figures. Nothing else is silenced.
suppress_warnings = ["plotly.sg_scraper"]
nitpicky = False
