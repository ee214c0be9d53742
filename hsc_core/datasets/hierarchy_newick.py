"""Newick trees, read by a small iterative parser (``_parse_newick``: no recursion, so a deep but
allowed tree loads and a 100,000-deep one fails in milliseconds), with the ``newick`` package's
reading: labels unquoted, ``[comments]`` and branch lengths dropped, duplicate labels kept.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ..core.hierarchy import LIMITS, HierarchyError, too_large
from ..core.validation import clip_path, quote
from .hierarchy_text import check_no_duplicates, fresh_id, in_file

# ---------------------------------------------------------------------------------------- newick
# One token at a time: whitespace, punctuation, a quoted label ('' or \' escape a quote), the start of
# a [comment], an unquoted word, or anything else (an error).
_NEWICK_TOKEN = re.compile(r"""(?P<space>\s+)|(?P<punct>[(),:;])|(?P<quoted>'(?:[^'\\]|''|\\.)*')"""
                           r"""|(?P<comment>\[)|(?P<word>[^\s(),:;'\[\]]+)|(?P<bad>.)""", re.DOTALL)


# Tokens one node may carry between the punctuation around it: its label, a ':' and length, a few
# comments and the whitespace between. More is refused, so that a file of millions of comments or
# lengths on one node costs no more than its nodes would.
_NEWICK_TOKENS_PER_NODE = 64


class _NewickError(ValueError):
    """A syntax error, reported as ``<file>: not valid Newick (…)``."""


def _skip_comment(text: str, pos: int) -> int:
    """Position after the ``[comment]`` opening at ``pos`` (comments nest, as in the newick package)."""
    depth, i = 0, pos
    while True:
        opening, closing = text.find("[", i), text.find("]", i)
        if closing < 0:
            raise _NewickError("unterminated comment")
        if 0 <= opening < closing:
            depth, i = depth + 1, opening + 1
        else:
            depth, i = depth - 1, closing + 1
            if depth == 0:
                return i


def _unquote(label: str) -> str:
    return label[1:-1].replace("''", "'").replace("\\'", "'")


def _parse_newick(text: str) -> tuple[list[int], list[str], list[bool], int]:
    """(parent index, label, is internal, number of trees) of the nodes of the first tree, pre-order.

    An explicit stack instead of recursion, one pass over the text, and the nesting checked as it
    grows: a tree over ``LIMITS.max_depth`` or ``LIMITS.max_nodes`` stops at the first node too many.
    """
    parent: list[int] = [-1]
    label: list[str] = [""]
    internal: list[bool] = [False]
    named = [False]  # whether the node's label was read (a second word is an error)
    stack: list[int] = []  # the open '(' nodes
    cur, in_length, pos, n, tokens = 0, False, 0, len(text), 0
    while pos < n:
        m = _NEWICK_TOKEN.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind, token, pos = m.lastgroup, m.group(), m.end()
        tokens += 1
        if tokens > _NEWICK_TOKENS_PER_NODE:
            raise _NewickError(f"over {_NEWICK_TOKENS_PER_NODE} comments, lengths or words on one node "
                               f"(near character {pos})")
        if kind == "space":
            continue
        if kind == "comment":
            pos = _skip_comment(text, m.start())
        elif kind == "bad":
            raise _NewickError("unterminated quote" if token == "'" else f"unexpected {quote(token)} at "
                                                                         f"character {pos}")
        elif kind in ("word", "quoted"):
            if in_length:
                continue  # a branch length: not kept
            if named[cur]:
                raise _NewickError(f"node names must not contain whitespace or punctuation (near character {pos})")
            label[cur], named[cur] = (_unquote(token) if kind == "quoted" else token), True
        elif token == ":":
            in_length = True
        elif token == "(":
            if internal[cur] or named[cur] or in_length:
                raise _NewickError(f"unexpected '(' at character {pos}")
            internal[cur] = True
            stack.append(cur)
            if len(stack) > LIMITS.max_depth:
                raise HierarchyError(f"hierarchy too deep: over {LIMITS.max_depth:,} levels of Newick nesting "
                                     f"(at most {LIMITS.max_depth:,} are supported)")
            cur, in_length, tokens = _newick_node(parent, label, internal, named, cur), False, 0
        elif token == ",":
            if not stack:
                raise _NewickError(f"',' outside parentheses at character {pos}")
            cur, in_length, tokens = _newick_node(parent, label, internal, named, stack[-1]), False, 0
        elif token == ")":
            if not stack:
                raise _NewickError("invalid brace nesting (a ')' without its '(')")
            cur, in_length, tokens = stack.pop(), False, 0  # the closed node's label and length follow
        else:  # ";": the end of the first tree
            break
        if len(parent) > LIMITS.max_nodes:
            raise too_large("large", len(parent), LIMITS.max_nodes, "nodes")
    if stack:
        raise _NewickError("different number of opening and closing braces")
    rest = text[pos:]
    trees = 1 + sum(1 for part in rest.split(";") if part.strip())
    return parent, label, internal, trees


def _newick_node(parent: list[int], label: list[str], internal: list[bool], named: list[bool], above: int) -> int:
    parent.append(above)
    label.append("")
    internal.append(False)
    named.append(False)
    return len(parent) - 1


def read_newick(path: Path, text: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    try:
        parent, label, internal, trees = _parse_newick(text.strip())
    except _NewickError as exc:
        raise HierarchyError(f"{clip_path(path)}: not valid Newick ({exc})") from None
    except HierarchyError as exc:
        raise in_file(path, exc) from None
    if trees != 1:
        raise HierarchyError(f"{clip_path(path)}: expected one Newick tree, found {trees}")
    if not internal[0]:
        raise HierarchyError(f"{clip_path(path)}: the Newick tree has no branches (expected e.g. '(a,b)root;')")

    leaf_labels = [lab for lab, inner in zip(label, internal, strict=True) if not inner]
    if "" in leaf_labels:
        raise HierarchyError(f"{clip_path(path)}: a leaf of the Newick tree has no name; every class needs a label")
    check_no_duplicates(leaf_labels, f"Newick tree {path}")
    uses = Counter(lab for lab, inner in zip(label, internal, strict=True) if inner and lab)
    unique = {x for x, k in uses.items() if k == 1} - set(leaf_labels)
    taken = set(leaf_labels)  # internal ids never take a class's name
    counters: dict[str, int] = {}
    parent_of: dict[str, str] = {}
    names: dict[str, str] = {}
    leaves: list[str] = []
    ids: list[str] = []
    unnamed, id_chars = 0, 0
    for up, lab, inner in zip(parent, label, internal, strict=True):  # pre-order: parents first
        parent_id = ids[up] if up >= 0 else None
        if not inner:
            node_id = lab
            leaves.append(lab)
        else:
            if lab in unique:
                node_id = lab
            elif lab:  # a repeated label is told apart by its path (and #k among same-named siblings)
                node_id = fresh_id(f"{parent_id}/{lab}" if parent_id else lab, taken, counters)
                id_chars += len(node_id)
                if id_chars > LIMITS.max_id_chars:
                    raise HierarchyError(
                        f"{clip_path(path)}: hierarchy too large: the paths of its repeated labels (the node "
                        f"ids) exceed "
                        f"{LIMITS.max_id_chars:,} characters in all")
            else:
                node_id, unnamed = fresh_id(f"node{unnamed}", taken, counters), unnamed + 1
                lab = node_id
            taken.add(node_id)
        ids.append(node_id)
        names[node_id] = lab
        if parent_id is not None:
            parent_of[node_id] = parent_id
    return parent_of, leaves, names
