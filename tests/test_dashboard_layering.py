"""The dashboard's layers, checked from its source (tests/test_architecture.py checks hsc_core's).

    hsc_core ← dashboard/* (no cycles among them) ← app_pages/*, app.py

A dashboard module imports other dashboard modules and hsc_core, never a page; a page imports
dashboard modules and hsc_core, never another page, never ``hsc_core.cli`` and never
``hsc_core.pipeline`` at module level (torch is imported lazily, where a page runs a model);
hsc_core never imports the dashboard. Imports inside functions count (a lazy import is still a
dependency); ``if TYPE_CHECKING:`` imports do not. Also: every private session-state key is named
once, in ``dashboard/session_keys.py``, and nowhere spelled as a literal.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "dashboard"
PAGES = REPO / "app_pages"


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for n in ast.walk(node)}
    return out


def imports(path: Path, package: str | None) -> list[tuple[str, bool]]:
    """(imported module, at module level?) of one file; ``from . import x`` / ``from pkg import x``
    count as importing ``pkg.x`` when that is a module of the repository's packages."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                assert package is not None, path
                base = f"{package}.{base}" if base else package
            out.append((base, id(node) in top))
            out += [(f"{base}.{a.name}", id(node) in top) for a in node.names
                    if (REPO / base.replace(".", "/") / f"{a.name}.py").exists()]
    return out


def dashboard_modules() -> dict[str, Path]:
    return {f"dashboard.{p.stem}": p for p in sorted(DASHBOARD.glob("*.py")) if p.stem != "__init__"}


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in dashboard_modules().items():
        g.add_node(name)
        for target, _ in imports(path, "dashboard"):
            if target.startswith("dashboard.") and target in dashboard_modules():
                g.add_edge(name, target)
    return g


def test_the_graph_sees_the_dashboards_imports(graph):
    # A module known to import two others: guards against a scan that finds nothing.
    assert {"dashboard.catalog", "dashboard.session_memory"} <= set(graph.successors("dashboard.uploads"))
    assert "dashboard.sidebar" in set(graph.successors("dashboard.entry"))


def test_no_import_cycles_among_dashboard_modules(graph):
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {cycles}"


def test_dashboard_never_imports_a_page_and_hsc_core_never_imports_the_dashboard():
    for path in dashboard_modules().values():
        bad = [m for m, _ in imports(path, "dashboard") if m.split(".")[0] in ("app_pages", "app")]
        assert not bad, f"{path.name} imports {bad}"
    for path in (REPO / "hsc_core").rglob("*.py"):
        package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
        bad = [m for m, _ in imports(path, package) if m.split(".")[0] in ("dashboard", "app_pages", "app")]
        assert not bad, f"{path.relative_to(REPO)} imports {bad}"


def test_pages_import_only_the_dashboard_and_hsc_core_layers():
    pages = {p.stem for p in PAGES.glob("*.py")}
    for path in [*sorted(PAGES.glob("*.py")), REPO / "app.py"]:
        found = imports(path, "app_pages")
        for module, _ in found:
            root = module.split(".")[0]
            assert root != "app_pages" and root not in pages, f"{path.name} imports another page: {module}"
            assert not module.startswith("hsc_core.cli"), f"{path.name} imports {module}"
        assert any(m.startswith("dashboard") for m, _ in found), path.name
        # hsc_core.pipeline imports torch: at module level only after the page's guard has stopped
        # a run without it (``perturb.pipeline_installed()`` … ``st.stop()``), else in a function.
        text = path.read_text(encoding="utf-8")
        guard = text.find("pipeline_installed()")
        for node in ast.parse(text).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n.startswith("hsc_core.pipeline") for n in names):
                    offset = sum(len(line) + 1 for line in text.splitlines()[: node.lineno - 1])
                    assert 0 <= guard < offset and "st.stop()" in text[guard:offset], \
                        f"{path.name}:{node.lineno} imports the pipeline (torch) before checking it is installed"


# ---------------------------------------------------------------------------- session keys
def _private_literal(node: ast.AST) -> str | None:
    """The text of a string literal (or an f-string's leading text) that starts with "_"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_") \
            and not node.value.startswith("__"):  # dunders (``__file__``) are no session keys
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("_"):
            return first.value
    return None


def private_key_literals(path: Path) -> list[tuple[int, str]]:
    """(line, literal) of every "_…" string used as a session-state key: a subscript of the session
    state, the key of get/setdefault/pop on it, a widget's ``key=``, or a module constant (the
    scattered key constants this registry replaced)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and "session_state" in ast.unparse(node.value) + " " and (
                text := _private_literal(node.slice)):
            out.append((node.lineno, text))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "ss" and (
                text := _private_literal(node.slice)):
            out.append((node.lineno, text))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop") and node.args and (
                    text := _private_literal(node.args[0])):
                out.append((node.lineno, text))
            out += [(node.lineno, t) for k in node.keywords if k.arg == "key" and (t := _private_literal(k.value))]
    for node in tree.body:
        if isinstance(node, ast.Assign) and (text := _private_literal(node.value)) and len(text) > 1 \
                and text[1].isalpha():
            out.append((node.lineno, text))
    return out


def test_private_session_keys_are_named_only_in_the_registry():
    files = [p for p in [*DASHBOARD.glob("*.py"), *PAGES.glob("*.py"), REPO / "app.py"] if p.name != "session_keys.py"]
    found = {f"{p.relative_to(REPO)}:{line}": text for p in files for line, text in private_key_literals(p)}
    assert not found, f"session keys spelled as literals (use dashboard.session_keys): {found}"


def test_the_scan_finds_literal_keys(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('X = "_some_key"\nimport streamlit as st\nst.session_state["_a"] = 1\nss = {}\nss.get("_b")\n'
                   'st.text_input("n", key="_c")\nst.session_state.setdefault(f"_d.{X}", {})\n')
    assert sorted(t for _, t in private_key_literals(bad)) == ["_a", "_b", "_c", "_d.", "_some_key"]


def test_registry_keys_are_unique_private_and_cover_the_dynamic_ones():
    from dashboard import session_keys as keys

    assert len(keys.ALL_KEYS) == len(set(keys.ALL_KEYS)) >= 35
    assert all(k.startswith("_") for k in keys.ALL_KEYS)
    # No fixed key is the prefix of a built one's space (a built key can never equal a fixed key).
    prefixes = (keys.WIDGET_PREFIX, keys.DATASET_PICK_PREFIX, keys.SWEEP_PREFIX)
    assert not [k for k in keys.ALL_KEYS if k not in prefixes and k.startswith(prefixes)]
    assert keys.widget_key("ga", "reps") == "_w.ga.reps"  # the key tests and links already use
    assert keys.dataset_pick("upload:abc/x") == "_dataset_pick.upload:abc/x"
    assert keys.sweep("rc_chart") == "_sweep_rc_chart"
    # The values are the ones sessions already hold (renaming one would drop a live session's state).
    assert (keys.UPLOADED_MODELS, keys.UPLOADED_BUNDLES, keys.VIEWPORT) == ("_uploaded_models", "_uploaded_bundles",
                                                                           "_viewport")


# ---------------------------------------------------------------------------- one job per module
MAX_MODULE_LINES = 500


def reexported_names(path: Path) -> list[str]:
    """Names a module imports but never uses itself (a re-export: its users should import them from
    the module that defines them). ``if TYPE_CHECKING:`` imports count as used (annotations)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            for a in node.names:
                imported[(a.asname or a.name).split(".")[0]] = node.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}  # annotations included (parsed, not text)
    return [f"{name} (line {line})" for name, line in imported.items() if name not in used]


def test_no_dashboard_module_reexports_a_name():
    for path in [*sorted(DASHBOARD.glob("*.py")), *sorted(PAGES.glob("*.py"))]:
        if path.name == "__init__.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert "noqa: F401" not in text, f"{path.name} re-exports a name (noqa: F401): import it where it is defined"
        assert not reexported_names(path), f"{path.name} imports without using: {reexported_names(path)}"
    # the old catch-all modules are gone; their names live in the module of their job
    assert not (DASHBOARD / "data.py").exists() and not (DASHBOARD / "ui.py").exists()


def test_the_reexport_scan_finds_an_unused_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from __future__ import annotations\nfrom typing import TYPE_CHECKING\nimport numpy as np\n"
                   "from .catalog import DataError, stamp  # noqa: F401\nif TYPE_CHECKING:\n    from .x import Y\n"
                   "def f(a: Y) -> int:\n    return stamp(a)\nTYPE_CHECKING\n")
    assert [r.split()[0] for r in reexported_names(bad)] == ["np", "DataError"]


def test_every_dashboard_module_is_at_most_500_lines():
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in DASHBOARD.glob("*.py")}
    assert len(lengths) >= 20  # the scan sees the package
    too_long = {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"split these by job: {too_long}"
