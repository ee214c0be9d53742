"""What a hierarchy may cost: the reported hostile inputs are refused in one line and at once, deep
but legal trees load, every tree table is linear (checked against brute force), and the header of a
levels CSV is decided in the open. Memory is measured in ``bench/hierarchy_bench.py``, not here."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import random_tree
from reference_rules import RULE_FUNCTIONS

from hsc_core.cli import main
from hsc_core.core.curves import hierarchical_rc_curve
from hsc_core.core.hierarchy import LIMITS, Hierarchy, HierarchyError, _first_parent_scan
from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.core.rules import RULES, climbing_predict, decision_paths, predict
from hsc_core.datasets.formats import HierarchyNote, load_hierarchy, load_hierarchy_with_notes

CPU_SECONDS = 2.0  # each refusal below takes milliseconds; the unbounded code took 15–74 s


def refused(path, match, **kwargs) -> str:
    """Load ``path``, expecting a one-line HierarchyError matching ``match`` within CPU_SECONDS."""
    start = time.process_time()
    with pytest.raises(HierarchyError, match=match) as err:
        load_hierarchy(path, **kwargs)
    assert time.process_time() - start < CPU_SECONDS
    assert "\n" not in str(err.value)
    return str(err.value)


def caterpillar_edges(depth: int) -> str:
    """The reported shape: ``n{i},n{i+1}`` and ``n{i},leaf{i}`` (each spine node has a class)."""
    return "".join(f"n{i},n{i + 1}\nn{i},leaf{i}\n" for i in range(depth))


def caterpillar_newick(n_classes: int) -> str:
    """(c0,(c1,(c2,…(c{n-2},c{n-1})…))): n classes, depth n − 1."""
    opening = "".join(f"(c{i}," for i in range(n_classes - 2))
    return opening + f"(c{n_classes - 2},c{n_classes - 1})" + ")" * (n_classes - 2) + ";"


# ---------------------------------------------------------------------------- the reported attacks
def test_caterpillar_edge_list_of_10000_levels_is_refused_at_once(tmp_path):
    path = tmp_path / "cat.csv"
    path.write_text(caterpillar_edges(10_000))  # 265 kB, as reported
    message = refused(path, r"hierarchy too deep: 10,000 levels \(at most 1,000 are supported\)")
    assert message.startswith(str(path))


@pytest.mark.parametrize("columns", [10_000, 20_000])
def test_levels_csv_with_thousands_of_columns_is_refused_before_parsing(tmp_path, columns):
    path = tmp_path / "wide.csv"
    path.write_text("".join(",".join(f"g{j}" for j in range(columns - 1)) + f",class{r}\n" for r in range(5)))
    refused(path, rf"wide.csv:1: hierarchy too deep: {columns:,} level columns \(at most 1,001 are supported\)")


def test_newick_nested_100000_deep_is_refused_at_once(tmp_path):
    path = tmp_path / "deep.nwk"
    path.write_text("(" * 100_000 + "a,b" + ")" * 100_000 + ";")  # 200 kB, as reported
    refused(path, r"deep.nwk: hierarchy too deep: over 1,000 levels of Newick nesting")
    path.write_text(caterpillar_newick(100_000))
    refused(path, r"hierarchy too deep")


def test_newick_with_millions_of_comments_or_lengths_on_a_node_is_refused_at_once(tmp_path):
    path = tmp_path / "flood.nwk"
    for flood in ("[x]" * 1_000_000, ":1" * 1_000_000):
        path.write_text(f"(a{flood},b);")
        refused(path, r"flood.nwk: not valid Newick \(over 64 comments, lengths or words on one node")
    path.write_text("(a[&&NHX:S=x][&R]:0.5 [note] ,  'b c'  :1e-3)root[c];")  # what real files carry
    assert load_hierarchy(path).names == ("a", "b c", "root")


def test_json_nested_100000_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "hsc-hierarchy/1", "nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(path, r"deep.json: the JSON is nested too deeply")
    with pytest.raises(HierarchyError, match="nested too deeply"):
        Hierarchy.from_json(path)


def test_a_json_list_of_millions_of_tiny_values_is_refused_before_parsing(tmp_path):
    path = tmp_path / "many.json"
    path.write_text('{"format": "hsc-hierarchy/1", "n_leaves": 1, "nodes": [' + "{}," * 4_000_000 + "{}]}")
    refused(path, r"many.json: hierarchy too large: 8,000,00\d JSON values \(at most 3,200,000 are supported")


def test_size_limits_each_have_their_one_line_message(tmp_path):
    big = tmp_path / "big.csv"
    big.write_bytes(b"a,b\n" * (LIMITS.max_file_bytes // 4 + 1))
    refused(big, r"big.csv: the file is too large: 32.0 MB \(hierarchy files of at most 32 MB are supported\)")
    lines = tmp_path / "lines.txt"
    lines.write_text("r a\n" * (LIMITS.max_file_lines + 1))
    refused(lines, r"hierarchy too large: 500,001 lines \(at most 500,000 are supported\)")
    names = tmp_path / "names.csv"
    names.write_text("".join(f"r{i},c{i}\n" for i in range(LIMITS.max_nodes // 2 + LIMITS.max_level_columns)))
    refused(names, r"names.csv:\d+: hierarchy too large: over 200,000 different node names")
    with pytest.raises(HierarchyError, match=r"hierarchy too large: 200,002 nodes \(at most 200,000"):
        Hierarchy.flat(LIMITS.max_nodes + 1)
    # A broom: a 999-node spine with a class on each, and 6,000 classes at its bottom, each at
    # depth 999 (legal), 6.5 million class–ancestor links in all (not).
    spine, bottom = 999, 6_000
    n_leaves = spine + bottom
    parent = np.r_[np.arange(spine) + n_leaves, np.full(bottom, n_leaves + spine - 1), -1,
                   np.arange(spine - 1) + n_leaves]
    with pytest.raises(HierarchyError, match=r"hierarchy too large: 6,\d{3},\d{3} class–ancestor links"):
        Hierarchy.from_parents(parent, n_leaves)


def test_repeated_names_and_wide_collapses_stay_linear(tmp_path):
    # 20,000 same-named groups under one parent (the #k ids) and 20,000 one-child groups under the
    # root (each collapsed in O(1)): the former quadratic bookkeeping took minutes for either.
    n = 20_000
    path = tmp_path / "same.nwk"
    path.write_text("(" + ",".join(f"(a{i},b{i})X" for i in range(n)) + ")R;")
    start = time.process_time()
    h = load_hierarchy(path)
    assert h.n_nodes == 3 * n + 1 and "R/X#19999" in h.node_ids
    path = tmp_path / "chains.csv"
    path.write_text("parent,child\n" + "".join(f"R,m{i}\nm{i},c{i}\n" for i in range(n)))
    h = load_hierarchy(path)
    assert h.n_nodes == n + 1 and h.depth.max() == 1
    assert time.process_time() - start < 4 * CPU_SECONDS


# ---------------------------------------------------------------------------- deep trees that are legal
def test_a_1000_class_newick_caterpillar_loads_and_equals_its_edge_list(tmp_path):
    nwk = tmp_path / "cat.nwk"
    nwk.write_text(caterpillar_newick(1_000))  # 6.9 kB, as reported
    assert 6_000 < nwk.stat().st_size < 8_000
    tree = load_hierarchy(nwk)
    assert tree.n_leaves == 1_000 and tree.n_nodes == 1_999 and tree.max_depth == 999
    # The same tree as an edge list: the unnamed internal nodes are node0 (the root) … node998.
    edges = tmp_path / "cat.csv"
    rows = [(f"node{i}", f"c{i}") for i in range(998)] + [(f"node{i}", f"node{i + 1}") for i in range(998)]
    rows += [("node998", "c998"), ("node998", "c999")]
    edges.write_text("parent,child\n" + "".join(f"{p},{c}\n" for p, c in rows))
    other = load_hierarchy(edges, [f"c{i}" for i in range(1_000)])
    assert other.node_ids == tree.node_ids and other.parent.tolist() == tree.parent.tolist()
    # At the limit itself: 1,001 classes, depth 1,000.
    nwk.write_text(caterpillar_newick(1_001))
    assert load_hierarchy(nwk).max_depth == LIMITS.max_depth


def test_newick_parser_reads_as_the_newick_package():
    """Our iterative parser against the ``newick`` package (which it replaced) on shallow trees:
    the same nodes in pre-order, parents, unquoted labels and leaves."""
    newick = pytest.importorskip("newick")
    from hsc_core.datasets.hierarchy_newick import _parse_newick

    def reference(text):  # the package's nodes, pre-order
        nodes = list(newick.loads(text)[0].walk())
        index = {id(n): i for i, n in enumerate(nodes)}
        return ([-1 if n.ancestor is None else index[id(n.ancestor)] for n in nodes],
                [n.unquoted_name if n.name else "" for n in nodes], [bool(n.descendants) for n in nodes])

    rng = np.random.default_rng(4)
    quoted = {0: "'{} x'", 1: "'it''s {}'", 2: "{}"}

    def text_of(tree, labels, v):
        kids = tree.children[v]
        inner = "(" + ",".join(text_of(tree, labels, int(c)) for c in kids) + ")" if len(kids) else ""
        name = "" if len(kids) and rng.random() < 0.3 else labels[v]
        length = f":{rng.random():.2f}" if rng.random() < 0.3 else ""
        comment = "[&&NHX:x=1]" if rng.random() < 0.1 else ""
        return inner + name + comment + length

    for _ in range(300):
        tree = random_tree(int(rng.integers(2, 12)), int(rng.integers(0, 10_000)))
        labels = [quoted[int(rng.choice(3, p=[0.1, 0.1, 0.8]))].format(n) for n in tree.node_ids]
        text = text_of(tree, labels, tree.root) + ";"
        *got, trees = _parse_newick(text)
        assert tuple(got) == reference(text) and trees == 1, text


def test_rc_curves_at_the_depth_limit_match_brute_force():
    """A caterpillar at the depth limit (1,001 classes): every rule's exact curve, at a sample of its
    breakpoints and just above them, equals literal per-sample rules, losses and coverage."""
    n_classes = LIMITS.max_depth + 1
    tree = load_hierarchy_from_text(caterpillar_newick(n_classes))
    assert tree.max_depth == LIMITS.max_depth
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, n_classes)) * 3
    logits[0, -1] += 20  # one sample's top class at the very bottom: a 1,001-node climb
    labels = rng.integers(0, n_classes, 3)
    probs = node_probabilities(tree, softmax(logits))
    up: dict[int, set] = {}

    def ancestors(v):
        if v not in up:
            up[v] = set(tree.path_to_root(v).tolist())
        return up[v]

    def loss(v, y, kind):
        if kind == "01":
            return float(v not in ancestors(y))
        lca = max(ancestors(v) & ancestors(y), key=lambda a: tree.depth[a])
        return 0.0 if tree.coverage[v] == 0 else 1 - tree.coverage[lca] / tree.coverage[v]

    jumping = _jumping_reference(tree)
    for rule in RULES:
        literal = jumping if rule == "jumping" else RULE_FUNCTIONS[rule]
        paths = decision_paths(tree, probs, rule)
        for kind in ("01", "severity"):
            curve = hierarchical_rc_curve(tree, probs, labels, rule, kind, paths=paths)
            events = curve.events[rng.permutation(curve.events.size)[:15]]
            for theta in np.clip(np.r_[0.0, events, np.nextafter(events, 2), 1.0], 0, 1):
                picks = [literal(tree, probs[i], theta) for i in range(3)]
                assert paths.predict(theta)[0].tolist() == picks
                cov, risk = curve.at(theta)
                assert cov == pytest.approx(np.mean([tree.coverage[v] for v in picks]), abs=1e-12)
                losses = [loss(v, y, kind) for v, y in zip(picks, labels, strict=True)]
                assert risk == pytest.approx(np.mean(losses), abs=1e-12)
    assert decision_paths(tree, probs, "climbing").lengths[0] > 900  # the long climb is really there


def load_hierarchy_from_text(text: str) -> Hierarchy:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.nwk"
        path.write_text(text)
        return load_hierarchy(path)


def _jumping_reference(tree: Hierarchy):
    """``reference_rules.jumping`` with its height layers built once (it rebuilds them per call)."""
    r = tree.max_depth
    nodes = np.arange(tree.n_nodes)
    internal = nodes >= tree.n_leaves
    layers = [nodes[(internal & (r - tree.depth == h)) | (~internal & (tree.depth <= r - h))] for h in range(r + 1)]

    def jumping(h, raw, theta):
        p = np.minimum(np.round(raw, 12), 1.0)
        p[h.root] = 1.0
        v = int(np.argmax(raw[: h.n_leaves]))
        if p[v] >= theta:
            return v
        for layer in layers[1:]:
            best = int(layer[np.argmax(p[layer])])  # first index among ties
            if p[best] >= theta:
                return best
        return h.root
    return jumping


# ---------------------------------------------------------------------------- the tables, against brute force
def test_lca_paths_and_leaf_matrix_match_brute_force_on_deep_and_random_trees():
    trees = [random_tree(60, s) for s in range(4)] + [load_hierarchy_from_text(caterpillar_newick(300))]
    rng = np.random.default_rng(1)
    for tree in trees:
        up = [tree.path_to_root(v).tolist() for v in range(tree.n_nodes)]
        u, v = rng.integers(0, tree.n_nodes, (2, 500))
        want = [next(a for a in up[x] if a in set(up[y])) for x, y in zip(u, v, strict=True)]
        assert tree.lca(u, v).tolist() == want
        assert tree.lca(u.reshape(20, 25), v.reshape(20, 25)).shape == (20, 25)
        leaves = rng.integers(0, tree.n_leaves, 50)
        paths = tree.paths_to_root(leaves)
        assert paths.shape == (50, int(tree.depth[leaves].max()) + 1)
        for row, leaf in zip(paths.tolist(), leaves, strict=True):
            assert row == up[leaf] + [tree.root] * (len(row) - len(up[leaf]))
        m = tree.leaf_matrix.toarray()
        assert all(set(np.flatnonzero(m[:, leaf])) == set(up[leaf]) for leaf in range(tree.n_leaves))
        depth = rng.integers(0, 1000, tree.n_nodes) % (tree.depth + 1)
        got = tree.ancestor_at_depth(np.arange(tree.n_nodes), depth)
        assert got.tolist() == [up[x][len(up[x]) - 1 - d] for x, d in enumerate(depth)]


def test_is_a_first_parent_scan_equals_the_authors_loop():
    """The event-driven scan gives exactly the authors' repeated-pass loop (build_wn_rels), order included."""
    def authors(pairs, leaves):
        d = {x: "" for x in leaves}
        changed = True
        while changed:
            changed = False
            for p, c in pairs:
                if c in d and d[c] == "":
                    d[c], d[p], changed = p, "", True
        return {c: p for c, p in d.items() if p != ""}

    rng = np.random.default_rng(2)
    for _ in range(400):
        n = int(rng.integers(3, 25))
        pairs = [(f"x{p}", f"x{c}") for c in range(1, n) for p in rng.choice(c, min(c, int(rng.integers(1, 4))),
                                                                             replace=False)]
        pairs = [pairs[k] for k in rng.permutation(len(pairs))]
        childless = sorted({c for _, c in pairs} - {p for p, _ in pairs})
        leaves = [childless[k] for k in rng.permutation(len(childless))[: int(rng.integers(1, len(childless) + 1))]]
        want, got = authors(pairs, leaves), _first_parent_scan(pairs, leaves)
        assert got == want and list(got) == list(want)


# ---------------------------------------------------------------------------- header of a CSV
HEADERLESS = "fruit,apple\nflower,rose\nflower,tulip\n"


def test_headerless_levels_csv_keeps_its_first_class_with_header_false(tmp_path):
    path = tmp_path / "plants.csv"
    path.write_text(HEADERLESS)
    tree = load_hierarchy(path, header=False)
    assert tree.names[: tree.n_leaves] == ("apple", "rose", "tulip")
    # Detection cannot tell this row from column names: it takes them as such and says so.
    with pytest.warns(HierarchyNote, match=r"took the first row \('fruit,apple', line 1\) as column names.*"
                                           r"header=False, --no-header"):
        assert load_hierarchy(path).n_leaves == 2
    tree, notes = load_hierarchy_with_notes(path)
    assert tree.n_leaves == 2 and len(notes) == 1 and "plants.csv" in notes[0]
    assert load_hierarchy_with_notes(path, header=False)[1] == []


def test_header_detection_uses_known_names_reuse_and_the_class_list(tmp_path, recwarn):
    path = tmp_path / "plants.csv"
    # Known column names: a header, nothing to say.
    path.write_text("superclass,class\n" + HEADERLESS)
    assert load_hierarchy(path).n_leaves == 3
    # A name used again below: data.
    path.write_text("fruit,apple\nfruit,pear\nflower,rose\n")
    assert load_hierarchy(path).n_leaves == 3
    # The class list settles an ambiguous row: it names a class, so it is data ...
    path.write_text(HEADERLESS)
    assert load_hierarchy(path, ["apple", "rose", "tulip"]).n_leaves == 3
    # ... or it does not, so it is a header.
    path.write_text("coarse_name,fine_name\n" + "fruit,apple\nflower,rose\n")
    assert load_hierarchy(path, ["apple", "rose"]).n_leaves == 2
    assert not [w for w in recwarn if issubclass(w.category, HierarchyNote)]


# ---------------------------------------------------------------------------- θ
@pytest.mark.parametrize("theta, shown", [(None, "None"), ("0.5", "'0.5'"), (float("nan"), "nan"), (True, "True")])
def test_theta_that_is_not_a_number_is_one_clear_error(toy, toy_probs, theta, shown):
    with pytest.raises(ValueError, match=rf"^theta must be a number in \[0, 1\], got {shown}$"):
        climbing_predict(toy, toy_probs, theta)
    with pytest.raises(ValueError, match=r"theta must be a number in \[0, 1\]"):
        decision_paths(toy, toy_probs, "jumping").predict(theta)
    assert predict(toy, toy_probs, np.float32(0.5), "climbing")[0].shape == (5,)


# ---------------------------------------------------------------------------- front ends
def _logits_file(tmp_path, n_classes: int):
    from hsc_core.datasets import logits_io

    rng = np.random.default_rng(0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logits_io, "library_versions", dict)  # recording versions would import torch
        return logits_io.save_logits(tmp_path / "m.npz", rng.normal(size=(30, n_classes)).astype(np.float32),
                                     rng.integers(0, n_classes, 30), [f"s{i}" for i in range(30)],
                                     manifest={"model": "m"}, dtype="float32")


@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_cli_refuses_a_deep_newick_with_exit_2_and_one_line(tmp_path, capsys, command):
    logits = _logits_file(tmp_path, 3)
    deep = tmp_path / "deep.nwk"
    deep.write_text("(" * 100_000 + "a,b" + ")" * 100_000 + ";")
    deep_json = tmp_path / "deep.json"
    deep_json.write_text("[" * 100_000 + "]" * 100_000)
    for tree, needle in ((deep, "hierarchy too deep"), (deep_json, "nested too deeply")):
        out = tmp_path / ("r.csv" if command == "evaluate" else "r.html")
        code = main([command, str(logits), "--hierarchy", str(tree), "--out", str(out)], prog="hsc")
        out, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err
        assert err.startswith(f"hsc {command}: error: ")


def test_cli_header_flags_and_the_detection_warning(tmp_path, capsys):
    logits = _logits_file(tmp_path, 3)
    tree = tmp_path / "plants.csv"
    tree.write_text(HEADERLESS)
    out = tmp_path / "r.csv"
    # Detected: the first row is taken as column names, said in one line; 2 classes ≠ 3.
    code = main(["evaluate", str(logits), "--hierarchy", str(tree), "--out", str(out), "--no-progress"], prog="hsc")
    err = capsys.readouterr().err
    assert code == 2 and "hsc evaluate: warning: " in err and "--no-header" in err
    assert "3 classes but the hierarchy has 2 leaves" in err and err.count("\n") == 2
    # --no-header keeps the row: 3 classes, the run succeeds.
    code = main(["evaluate", str(logits), "--hierarchy", str(tree), "--no-header", "--out", str(out),
                 "--no-progress", "--workers", "1"], prog="hsc")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # No header guess this time (the small-calibration warning of a 30-sample file may still show).
    assert "--no-header" not in captured.err and "first row" not in captured.err and out.is_file()


def test_dashboard_upload_refuses_deep_trees_and_reports_the_header_guess():
    from dashboard import catalog, uploads

    deep = ("(" * 100_000 + "a,b" + ")" * 100_000 + ";").encode()
    with pytest.raises(catalog.DataError, match=r"^deep.nwk: hierarchy too deep: over 1,000 levels") as err:
        uploads.add_session_dataset("deep", "deep.nwk", deep)
    assert "\n" not in str(err.value)
    with pytest.raises(catalog.DataError, match=r"^cannot read hierarchy deep.json: the JSON is nested too deeply"):
        uploads.add_session_dataset("deep", "deep.json", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(catalog.DataError, match=r"^big.csv: the file is too large"):
        uploads.add_session_dataset("big", "big.csv", b"a,b\n" * (LIMITS.max_file_bytes // 4 + 1))
    added = uploads.add_session_dataset("plants", "plants.csv", HEADERLESS.encode())
    assert added.dataset.n_classes == 2 and len(added.notes) == 1
    assert added.notes[0].startswith("plants.csv: took the first row ('fruit,apple'")
    added = uploads.add_session_dataset("plants2", "plants.csv", HEADERLESS.encode(), header=False)
    assert added.dataset.n_classes == 3 and added.notes == ()
    cat = caterpillar_newick(1_000).encode()
    assert uploads.add_session_dataset("cat", "cat.nwk", cat).dataset.hierarchy.max_depth == 999
