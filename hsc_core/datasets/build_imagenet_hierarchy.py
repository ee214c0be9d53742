"""Build the ImageNet-1k class tree from WordNet 3.0 and write it as hierarchy JSON.

Usage::

    python -m hsc_core.datasets.build_imagenet_hierarchy [--wordnet-dir /usr/share/wordnet]
        [--out hsc_core/datasets/data/imagenet_wordnet_hierarchy.json]
    python -m hsc_core.datasets.build_imagenet_hierarchy --tree authors_is_a \
        [--out hsc_core/datasets/data/imagenet_authors_is_a_hierarchy.json]

``--tree authors_is_a`` builds the authors' tree (``datasets.imagenet_trees``) from the same WordNet
data plus the shipped parent links where ImageNet's is-a file, scanned as the authors do, picks another
parent than WordNet's first hypernym (``imagenet_is_a_parent_overrides.json``, written from an is-a
file by ``--derive-overrides wordnet.is_a.txt``).

WordNet 3.0's ``data.noun`` comes from the Debian package ``wordnet-base``
(``sudo apt-get install wordnet-base``); it installs to ``/usr/share/wordnet``.

Each node is a noun synset with wnid ``'n%08d' % offset``. Its parent is the first
hypernym pointer (``@``) on its ``data.noun`` line, or the first instance-hypernym pointer
(``@i``) when it has no ``@``. The leaves are the 1000 ImageNet-1k wnids in the standard
sorted order, read from the list bundled with timm. :meth:`Hierarchy.from_parent_map` then
keeps only the leaves' ancestors, collapses single-child chains and orders the internal
nodes by coverage, as the authors do (hsc-definitions.md §1.1).

The result differs slightly from the paper's tree, which was built from ImageNet's own
is-a file. ``hsc_core/datasets/data/README.md`` says where. For the paper's exact tree, use
``hsc_core.datasets.imagenet.imagenet_hierarchy(source="is_a", is_a_path=...)``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from ..core.hierarchy import Hierarchy

DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "imagenet_wordnet_hierarchy.json"
NAMES_FILE = "imagenet_wordnet_names.json"  # written next to --out
OVERRIDES_FILE = Path(__file__).resolve().parent / "data" / "imagenet_is_a_parent_overrides.json"
AUTHORS_OUT = Path(__file__).resolve().parent / "data" / "imagenet_authors_is_a_hierarchy.json"
OVERRIDES_FORMAT = "hsc-parent-overrides/1"
INSTALL_HINT = "sudo apt-get install wordnet-base"


class WordNetError(RuntimeError):
    """WordNet's data files are missing or unreadable."""


def timm_imagenet_wnids() -> list[str]:
    """Return the 1000 ImageNet-1k wnids in the standard order (model output order).

    Read from timm's bundled ``timm/data/_info/imagenet_synsets.txt``: timm is already a
    dependency, and its list matches the usual sorted-wnid order of every ImageNet model.
    """
    try:
        text = resources.files("timm.data").joinpath("_info/imagenet_synsets.txt").read_text()
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover - timm is pinned
        raise FileNotFoundError(
            "timm's bundled timm/data/_info/imagenet_synsets.txt was not found; install timm"
        ) from exc
    wnids = [w.strip() for w in text.splitlines() if w.strip()]
    if len(wnids) != 1000 or len(set(wnids)) != 1000:
        raise ValueError(f"expected 1000 unique wnids in timm's imagenet_synsets.txt, got {len(wnids)}")
    return wnids


def parse_wordnet_nouns(data_noun: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Parse WordNet's ``data.noun`` into (wnid→hypernyms, wnid→first lemma).

    Each synset's hypernym list holds its ``@`` pointers in the order listed, followed by its
    ``@i`` (instance) pointers, so element 0 is the parent this module uses. The line format is
    described in WordNet's wndb(5) manual page: ``offset lex_filenum ss_type w_cnt
    (word lex_id)×w_cnt p_cnt (symbol offset pos source/target)×p_cnt … | gloss``. Here ``w_cnt``
    is hexadecimal and ``p_cnt`` is decimal.
    """
    if not data_noun.is_file():
        raise WordNetError(f"WordNet file {data_noun} not found; install it with `{INSTALL_HINT}`")
    hypernyms: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    with data_noun.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("  "):  # the licence header lines start with two spaces
                continue
            fields = line.split(" | ", 1)[0].split()
            wnid = "n" + fields[0]
            w_cnt = int(fields[3], 16)
            names[wnid] = fields[4]
            i = 4 + 2 * w_cnt
            p_cnt = int(fields[i])
            ptrs = [fields[i + 1 + 4 * k : i + 5 + 4 * k] for k in range(p_cnt)]
            hyper = ["n" + p[1] for p in ptrs if p[0] == "@" and p[2] == "n"]
            inst = ["n" + p[1] for p in ptrs if p[0] == "@i" and p[2] == "n"]
            # Class hypernyms first: an instance synset (no '@') falls back to its '@i'.
            if hyper or inst:
                hypernyms[wnid] = hyper + inst
    if not names:
        raise WordNetError(f"{data_noun} holds no synsets; reinstall it with `{INSTALL_HINT}`")
    return hypernyms, names


def ancestor_names(hypernyms: dict[str, list[str]], names: dict[str, str], leaves: Sequence[str]) -> dict[str, str]:
    """Names of the leaves and of every synset reachable from them through any hypernym.

    Shipped beside the tree so that a tree built from ImageNet's is-a file, which sometimes
    picks another of a synset's hypernyms, still gets readable names without WordNet.
    """
    seen = dict.fromkeys(leaves)
    queue = list(seen)
    for node in queue:
        for par in hypernyms.get(node, ()):
            if par not in seen:
                seen[par] = None
                queue.append(par)
    return {n: names[n] for n in sorted(seen) if n in names}


def build_wordnet_hierarchy(wordnet_dir: str | Path = DEFAULT_WORDNET_DIR,
                            leaves: Sequence[str] | None = None) -> Hierarchy:
    """Build the ImageNet-1k tree (or a tree over other ``leaves``) from WordNet 3.0."""
    hypernyms, names = parse_wordnet_nouns(Path(wordnet_dir) / "data.noun")
    return tree_from_hypernyms(hypernyms, names, leaves if leaves is not None else timm_imagenet_wnids())


def tree_from_hypernyms(hypernyms: dict[str, list[str]], names: dict[str, str], leaves: Sequence[str]) -> Hierarchy:
    """Build the tree from parsed WordNet data: each synset's parent is its first hypernym."""
    leaves = list(leaves)
    missing = [w for w in leaves if w not in names]
    if missing:
        raise WordNetError(f"{len(missing)} leaf wnids are not WordNet 3.0 noun synsets, e.g. {missing[:3]}")
    # Walk up breadth-first from the leaves in class order. The insertion order of this map
    # sets the tie order among internal nodes with equal coverage, as in the authors' loop.
    parent_of: dict[str, str] = {}
    queue = list(leaves)
    seen = set(queue)
    for node in queue:
        if node not in hypernyms:
            continue
        par = hypernyms[node][0]
        parent_of[node] = par
        if par not in seen:
            seen.add(par)
            queue.append(par)
    return Hierarchy.from_parent_map(parent_of, leaves, {n: names[n] for n in seen})


def derive_is_a_overrides(is_a_path: str | Path, hypernyms: dict[str, list[str]], leaves: Sequence[str]) -> dict:
    """The parent links of an is-a file's tree (first parent in the authors' scan, as
    ``Hierarchy.from_is_a_file`` picks them) that differ from WordNet's first hypernym, and its root.

    Returns the JSON-ready ``{"format", "root", "parents": {child: parent}, "not_in_wordnet": [child, …]}``;
    ``not_in_wordnet`` lists the children whose chosen parent is no WordNet 3.0 hypernym of theirs."""
    from ..core.hierarchy import _first_parent_scan

    pairs: list[tuple[str, str]] = []
    for line in Path(is_a_path).read_text().splitlines():
        if line.strip():
            parent, child = line.split()
            pairs.append((parent, child))
    chosen = _first_parent_scan(pairs, list(leaves))
    parents = {c: p for c, p in chosen.items() if hypernyms.get(c, [None])[0] != p}
    roots = sorted({p for p in chosen.values() if p not in chosen})
    if len(roots) != 1:
        raise WordNetError(f"the is-a tree has {len(roots)} roots ({roots[:5]}); expected one")
    return {"format": OVERRIDES_FORMAT, "root": roots[0], "parents": dict(sorted(parents.items())),
            "not_in_wordnet": sorted(c for c, p in parents.items() if p not in hypernyms.get(c, []))}


def tree_with_overrides(hypernyms: dict[str, list[str]], names: dict[str, str], leaves: Sequence[str],
                        overrides: dict) -> Hierarchy:
    """The tree whose parents are WordNet's first hypernyms except where ``overrides["parents"]`` says
    otherwise, cut at ``overrides["root"]`` (``derive_is_a_overrides``), then collapsed as usual."""
    if overrides.get("format") != OVERRIDES_FORMAT:
        raise WordNetError(f"parent overrides: expected format {OVERRIDES_FORMAT!r}, got {overrides.get('format')!r}")
    chosen, root = overrides["parents"], overrides["root"]
    parent_of: dict[str, str] = {}
    queue, seen = list(leaves), set(leaves)
    for node in queue:
        if node == root:
            continue
        par = chosen.get(node) or (hypernyms[node][0] if node in hypernyms else None)
        if par is None:
            raise WordNetError(f"{node} has no parent in WordNet 3.0 and none in the overrides")
        parent_of[node] = par
        if par not in seen:
            seen.add(par)
            queue.append(par)
    return Hierarchy.from_parent_map(parent_of, list(leaves), {n: names.get(n, n) for n in seen})


def build_authors_hierarchy(wordnet_dir: str | Path = DEFAULT_WORDNET_DIR,
                            overrides_path: str | Path = OVERRIDES_FILE) -> Hierarchy:
    """The authors' is-a tree over the 1000 ImageNet-1k classes, from WordNet 3.0 and the shipped overrides."""
    hypernyms, names = parse_wordnet_nouns(Path(wordnet_dir) / "data.noun")
    overrides = json.loads(Path(overrides_path).read_text())
    return tree_with_overrides(hypernyms, names, timm_imagenet_wnids(), overrides)


def compare_hierarchies(a: Hierarchy, b: Hierarchy) -> dict:
    """Summarise how two trees over the same leaves differ (used for data/README.md).

    Returns node counts, roots, leaf-depth distributions, the leaves whose parent differs
    (by wnid), and how many internal nodes cover exactly the same leaf set in both trees.
    """
    if a.node_ids[: a.n_leaves] != b.node_ids[: b.n_leaves]:
        raise ValueError("the two trees have different leaves")

    def clusters(t: Hierarchy) -> set[frozenset[int]]:
        return {frozenset(t.leaf_matrix[v].indices.tolist()) for v in range(t.n_leaves, t.n_nodes)}

    diff_parent = [
        (a.names[i], a.names[a.parent[i]], b.names[b.parent[i]])
        for i in range(a.n_leaves)
        if a.node_ids[a.parent[i]] != b.node_ids[b.parent[i]]
    ]
    ca, cb = clusters(a), clusters(b)
    ia, ib = set(a.node_ids[a.n_leaves:]), set(b.node_ids[b.n_leaves:])
    name_a, name_b = dict(zip(a.node_ids, a.names, strict=True)), dict(zip(b.node_ids, b.names, strict=True))
    return {
        "n_nodes": (a.n_nodes, b.n_nodes),
        "root": (f"{a.node_ids[a.root]} {a.names[a.root]}", f"{b.node_ids[b.root]} {b.names[b.root]}"),
        "max_depth": (a.max_depth, b.max_depth),
        "mean_leaf_depth": (float(a.depth[: a.n_leaves].mean()), float(b.depth[: b.n_leaves].mean())),
        "leaf_depths": tuple(dict(sorted(Counter(t.depth[: t.n_leaves].tolist()).items())) for t in (a, b)),
        "root_children": tuple([t.names[c] for c in t.children[t.root]] for t in (a, b)),
        "leaves_with_different_parent": diff_parent,
        "same_leaf_set_internal_nodes": len(ca & cb),
        "internal_ids_only_in_first": sorted(name_a[x] for x in ia - ib),
        "internal_ids_only_in_second": sorted(name_b[x] for x in ib - ia),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: build the tree and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wordnet-dir", type=Path, default=DEFAULT_WORDNET_DIR,
                    help=f"directory holding WordNet 3.0's data.noun (default {DEFAULT_WORDNET_DIR})")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"output JSON path (default {DEFAULT_OUT.name}, "
                         f"or {AUTHORS_OUT.name} with --tree authors_is_a)")
    ap.add_argument("--tree", choices=("wordnet", "authors_is_a"), default="wordnet",
                    help="which tree: WordNet's first hypernyms, or the authors' is-a tree (WordNet + overrides)")
    ap.add_argument("--derive-overrides", type=Path, default=None, metavar="IS_A_TXT",
                    help=f"write {OVERRIDES_FILE.name} from this ImageNet is-a file and stop")
    ap.add_argument("--compare-is-a", type=Path, default=None, metavar="IS_A_TXT",
                    help="also print how the tree differs from the one built from this ImageNet is-a file")
    args = ap.parse_args(argv)
    try:
        hypernyms, all_names = parse_wordnet_nouns(Path(args.wordnet_dir) / "data.noun")
        leaves = timm_imagenet_wnids()
        if args.derive_overrides is not None:
            overrides = derive_is_a_overrides(args.derive_overrides, hypernyms, leaves)
            OVERRIDES_FILE.write_text(json.dumps(overrides, indent=1) + "\n")
            print(f"wrote {OVERRIDES_FILE}: {len(overrides['parents'])} parent links, root {overrides['root']}")
            return 0
        if args.tree == "authors_is_a":
            tree = tree_with_overrides(hypernyms, all_names, leaves, json.loads(OVERRIDES_FILE.read_text()))
        else:
            tree = tree_from_hypernyms(hypernyms, all_names, leaves)
    except (WordNetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out = args.out or (AUTHORS_OUT if args.tree == "authors_is_a" else DEFAULT_OUT)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tree.to_json(args.out)
    if args.tree == "authors_is_a":
        print(f"wrote {args.out}: {tree.n_nodes} nodes, {tree.n_leaves} leaves, max depth {tree.max_depth}")
        return 0
    extra = ancestor_names(hypernyms, all_names, leaves)
    names_path = args.out.parent / NAMES_FILE
    names_path.write_text(json.dumps(extra, indent=0, ensure_ascii=False) + "\n")
    root = tree.root
    print(f"wrote {args.out}: {tree.n_nodes} nodes, {tree.n_leaves} leaves, "
          f"root {tree.node_ids[root]} {tree.names[root]}, max depth {tree.max_depth}")
    if args.compare_is_a is not None:
        # Name the is-a tree's nodes with WordNet lemmas too, so the two print alike.
        other = Hierarchy.from_is_a_file(args.compare_is_a, tree.node_ids[: tree.n_leaves], extra)
        for key, value in compare_hierarchies(tree, other).items():
            if key == "leaves_with_different_parent":
                print(f"{key}: {len(value)}")
                for leaf, pa, pb in value:
                    print(f"    {leaf}: {pa} (WordNet) vs {pb} (is-a)")
            else:
                print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
