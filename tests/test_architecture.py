"""The package's layers, checked from its source: no import cycles, no sideways imports, and the
math never imports torch, Streamlit or the pipeline.

    config ← core ← datasets ← evaluation ← {report, pipeline, integrations} ← cli (the ``hsc`` command)

A module may import its own layer and the layers to its left; ``report``, ``pipeline`` and
``integrations`` (the scikit-learn estimator, the torchmetrics metrics, HiClass) sit side by side
and never import each other; nothing imports ``integrations``, which, like ``pipeline``, imports its
third-party package (scikit-learn, torch) at the top. ``cli`` is the top layer: it may import every layer and no
layer imports it; the dashboard (``dashboard/``, ``app_pages/``, ``app.py``) never imports it either.
The package's own ``__init__``/``__main__`` and the deprecated ``dashboard_launcher`` shim sit with
it. Imports inside functions count too (a lazy import is still a dependency), except the heavy
third-party ones, which must be lazy where the table says so.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "hsc_core"

# layer → the hsc_core layers it may import (besides itself)
ALLOWED = {
    "config": set(),
    "core": {"config"},
    "datasets": {"config", "core"},
    "evaluation": {"config", "core", "datasets"},
    "report": {"config", "core", "datasets", "evaluation"},
    "pipeline": {"config", "core", "datasets", "evaluation"},
    "integrations": {"config", "core", "datasets", "evaluation"},
    "cli": {"config", "core", "datasets", "evaluation", "report", "pipeline"},
    "package": {"config", "core", "datasets", "evaluation", "report", "pipeline", "cli"},  # __init__, __main__, shims
}
# Third-party modules a layer must never import at module level (they may be imported inside a function).
NOT_AT_IMPORT = {"torch", "torchvision", "timm", "streamlit", "ray", "sklearn", "torchmetrics", "hiclass",
                 "lightning"}
#: Layers that are front doors to a heavy package and import it at the top (each needs its extra).
HEAVY_LAYERS = ("pipeline", "integrations")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__", "dashboard_launcher"):
        return "package"
    return parts[1]


def imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) of one file, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` blocks are for type checkers only
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            top_level -= {id(n) for n in ast.walk(node)}
            for n in ast.walk(node):
                n._type_checking = True  # type: ignore[attr-defined]
    out = []
    for node in ast.walk(tree):
        if getattr(node, "_type_checking", False):
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top_level) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append((mod, id(node) in top_level))
            if node.module is None or node.level:  # `from . import x` may name submodules
                out += [(f"{mod}.{a.name}", id(node) in top_level) for a in node.names]
    return out


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    known = {module_name(p) for p in files}
    for p in files:
        src = module_name(p)
        g.add_node(src)
        for mod, top in imports(p):
            if mod.startswith("hsc_core"):
                while mod not in known and "." in mod:  # `from .x import name` → module x
                    mod = mod.rsplit(".", 1)[0]
                g.add_edge(src, mod, top=top)
            else:
                g.nodes[src].setdefault("third_party", []).append((mod.split(".")[0], top))
    return g


def test_no_import_cycles(graph):
    # The package __init__ is imported by everything (Python imports parents first) and only names
    # submodules lazily, so it is left out: a cycle through it would not be a real one.
    inner = graph.subgraph(n for n in graph if n != "hsc_core")
    cycles = list(nx.simple_cycles(inner))
    assert not cycles, cycles[:5]


def test_no_sideways_or_upward_imports(graph):
    bad = [(a, b) for a, b in graph.edges if b != "hsc_core" and layer(b) != layer(a)
           and layer(b) not in ALLOWED[layer(a)]]
    assert not bad, bad


def test_math_data_evaluation_and_report_never_import_heavy_modules_at_import_time(graph):
    bad = [(n, mod) for n, data in graph.nodes(data=True) if layer(n) not in HEAVY_LAYERS
           for mod, top in data.get("third_party", []) if top and mod in NOT_AT_IMPORT]
    assert not bad, bad
    core_third = {mod for n, d in graph.nodes(data=True) if layer(n) == "core" for mod, _ in d.get("third_party", [])}
    assert core_third <= {"numpy", "scipy", "__future__", "dataclasses", "typing", "collections", "functools",
                          "math", "json", "re", "warnings", "itertools", "threading", "pathlib", "hashlib", "os",
                          "heapq", "bisect", "operator",
                          "concurrent"}, core_third  # the math stays numpy/scipy (stdlib threads: core.parallel)


def test_cli_is_the_top_layer():
    """No layer of the package imports ``hsc_core.cli`` (only ``__main__`` and the launcher shim
    may), and the dashboard never does: the CLI stays a front end, never a dependency."""
    assert layer("hsc_core.cli.evaluate") == "cli" and layer("hsc_core.cli") == "cli"
    g = nx.DiGraph()
    for p in PACKAGE.rglob("*.py"):
        for mod, _ in imports(p):
            g.add_edge(module_name(p), mod)
    users = {a for a, b in g.edges if b.startswith("hsc_core.cli") and layer(a) not in ("cli", "package")}
    assert not users, users
    front = [p for d in ("dashboard", "app_pages") for p in (REPO / d).rglob("*.py")] + [REPO / "app.py"]
    bad = [str(p.relative_to(REPO)) for p in front
           if any(m.startswith("hsc_core.cli") or m == "hsc_core.dashboard_launcher" for m, _ in imports(p))]
    assert not bad, bad


def test_nothing_imports_the_integrations(graph):
    """``hsc_core.integrations`` is a leaf: no layer (not the package's ``__init__``, not the CLI)
    imports it, so ``import hsc_core`` never needs scikit-learn, torch or torchmetrics."""
    assert layer("hsc_core.integrations.sklearn") == "integrations"
    users = {a for a, b in graph.edges if layer(b) == "integrations" and layer(a) != "integrations"}
    assert not users, users
    assert any(layer(n) == "integrations" for n in graph), "the integrations package is missing"
