"""The reading every hierarchy format shares: bounded text, CSV rows, the header decision, the
class list, and the last step of every reader (``build_tree``: match the leaves to the class list,
then let ``Hierarchy`` order and validate the tree). Errors name the file (``in_file``).
"""

from __future__ import annotations

import csv
import io
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..core.hierarchy import LIMITS, Hierarchy, HierarchyError, file_too_large, too_large
from ..core.validation import clip_path, quote

FORMATS = ("edges", "levels", "is_a", "json", "newick")
# Suffixes a hierarchy file may have (user data set folders use ``hierarchy.<suffix>``).
HIERARCHY_SUFFIXES = (".csv", ".tsv", ".txt", ".json", ".nwk", ".newick")
# Header cells that mark a two-column CSV as an edge list rather than coarse,fine levels.
EDGE_HEADER_WORDS = frozenset({
    "parent", "child", "parent_id", "child_id", "parent_name", "child_name", "source", "target",
})
# Cells that mark a first row as column names of a levels file (lower case), besides the words above.
LEVEL_HEADER_WORDS = frozenset({
    "root", "group", "subgroup", "supergroup", "class", "classes", "subclass", "superclass", "label", "labels",
    "fine", "coarse", "fine_label", "coarse_label", "category", "subcategory", "supercategory", "name", "id",
    "level", "leaf", "node", "domain", "kingdom", "phylum", "division", "order", "suborder", "family",
    "subfamily", "tribe", "genus", "species", "subspecies", "taxon",
})
_NUMBERED_HEADER = re.compile(r"(level|lvl|depth|rank|tier|layer|column|col)[ _-]?\d+")
ROOT_ID = "root"
_MAX_NAMED = 5  # how many offending names an error message lists


class HierarchyNote(UserWarning):
    """Something :func:`load_hierarchy` assumed that the user should hear about: a first row taken as
    column names by detection. One line, naming the file and how to say otherwise."""

ClassesArg = str | os.PathLike | Sequence[str] | None



# ---------------------------------------------------------------------------------------- reading
def read_class_list(path: str | os.PathLike) -> list[str]:
    """Class names in logit-column order: a UTF-8 text file, one name per line.

    Surrounding whitespace and blank lines are ignored; a duplicate name or an empty file is an error.
    """
    path = Path(path)
    names: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(read_text(path, "class list").splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if name in first_line:
            raise HierarchyError(
                f"{clip_path(path)}:{number}: duplicate class name {quote(name)} (first on line {first_line[name]})")
        first_line[name] = number
        names.append(name)
    if not names:
        raise HierarchyError(f"{clip_path(path)}: the class list is empty")
    return names


def fresh_id(base: str, taken, counters: dict[str, int] | None = None) -> str:
    """``base``, else the first free ``base#k``. ``counters`` (one per ``taken``, whose ids are never
    removed) remembers where each base's search ended, so n repeats cost n steps, not n²/2."""
    if base not in taken:
        return base
    k = counters.get(base, 1) if counters is not None else 1
    while f"{base}#{k}" in taken:
        k += 1
    if counters is not None:
        counters[base] = k + 1
    return f"{base}#{k}"


def read_text(path: Path, what: str) -> str:
    try:
        size = path.stat().st_size
        if size > LIMITS.max_file_bytes:
            raise HierarchyError(f"{clip_path(path)}: {file_too_large(size)}")
        return path.read_text(encoding="utf-8-sig")  # -sig: drop a BOM that spreadsheets write
    except FileNotFoundError:
        raise HierarchyError(f"{what} {clip_path(path)} not found") from None
    except UnicodeDecodeError as exc:
        raise HierarchyError(f"{clip_path(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise HierarchyError(f"cannot read {what} {clip_path(path)}: {exc.strerror or exc}") from None


def as_class_list(classes: ClassesArg) -> list[str] | None:
    if classes is None:
        return None
    if isinstance(classes, (str, os.PathLike)):
        return read_class_list(classes)
    names = [str(c).strip() for c in classes]
    if not names:
        raise HierarchyError("the class list is empty")
    check_no_duplicates(names, "class list")
    return names


def check_no_duplicates(names: Sequence[str], where: str) -> None:
    seen: set[str] = set()
    dup = []
    for n in names:
        if n in seen:
            dup.append(n)
        seen.add(n)
    if dup:
        raise HierarchyError(f"duplicate class names in the {where}: {few_names(dict.fromkeys(dup))}")


def few_names(items: Iterable[str]) -> str:
    items = list(items)
    shown = ", ".join(quote(x) for x in items[:_MAX_NAMED])
    return shown + (f" and {len(items) - _MAX_NAMED} more" if len(items) > _MAX_NAMED else "")


# What str.splitlines splits at ("\r\n" counts once).
_LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def check_lines(path: Path, text: str) -> list[str]:
    """The file's lines, refused beyond ``LIMITS.max_file_lines`` — counted before they are split."""
    breaks = sum(text.count(b) for b in _LINE_BREAKS) - text.count("\r\n")
    count = breaks + (not text.endswith(_LINE_BREAKS))
    if count > LIMITS.max_file_lines:
        raise HierarchyError(f"{clip_path(path)}: " + str(too_large("large", count, LIMITS.max_file_lines, "lines")))
    return text.splitlines()


def too_many_names(path: Path, line: int) -> HierarchyError:
    return HierarchyError(f"{clip_path(path)}:{line}: hierarchy too large: over {LIMITS.max_nodes:,} different "
                          f"node names "
                          f"(at most {LIMITS.max_nodes:,} nodes are supported)")


def read_rows(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """Non-blank CSV rows as (line number, stripped cells); tab-separated when the file says so.

    Bounded before the csv module builds any row: at most ``LIMITS.max_file_lines`` lines of at most
    ``LIMITS.max_level_columns`` columns (delimiters counted on the raw lines), and at most
    ``LIMITS.max_nodes`` different names (each names a node). Equal cells share one string.
    """
    lines = check_lines(path, text)
    first = next(line for line in lines if line.strip())
    tab = path.suffix.lower() == ".tsv" or ("\t" in first and "," not in first)
    delimiter = "\t" if tab else ","
    counts = [line.count(delimiter) for line in lines]
    columns = max(counts) + 1
    if columns > LIMITS.max_level_columns:
        raise HierarchyError(f"{clip_path(path)}:{counts.index(columns - 1) + 1}: "
                             + str(too_large("deep", columns, LIMITS.max_level_columns, "level columns")))
    del lines
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = []
    interned: dict[str, str] = {}
    most = LIMITS.max_nodes + LIMITS.max_level_columns + 1  # the nodes, a header row and ""
    try:
        for cells in reader:
            cells = [interned.setdefault(c, c) for c in (c.strip() for c in cells)]
            if any(cells):
                rows.append((reader.line_num, cells))
            if len(interned) > most:
                raise too_many_names(path, reader.line_num)
    except csv.Error as exc:
        raise HierarchyError(f"{clip_path(path)}:{reader.line_num}: malformed CSV ({exc})") from None
    return rows


def _is_header_word(cell: str) -> bool:
    low = cell.lower()
    return low in EDGE_HEADER_WORDS or low in LEVEL_HEADER_WORDS or bool(_NUMBERED_HEADER.fullmatch(low))


def decide_header(path: Path, rows: list[tuple[int, list[str]]], header: bool | None,
                   classes: Sequence[str] | None) -> bool:
    """Whether the first row holds column names: ``header`` when given, else detected (the module
    docstring's rules); a row that could be data but is taken as a header is named in a
    :class:`HierarchyNote` warning."""
    if header is not None:
        return bool(header)
    if len(rows) < 2:
        return False
    line, first = rows[0]
    cells = [c for c in first if c]
    if not cells:
        return False
    if all(_is_header_word(c) for c in cells):
        return True
    rest = {c for _, row in rows[1:] for c in row}
    if any(c in rest for c in cells):
        return False  # a name used again below: the row is part of the tree
    if classes is not None:  # the class list settles it: a class is data, anything else a header
        return not set(cells) & set(classes)
    shown = ",".join(first)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    warnings.warn(HierarchyNote(
        f"{clip_path(path)}: took the first row ({quote(shown)}, line {line}) as column names, since none of its "
        f"names occurs again; if it is data, say the file has no header (header=False, --no-header)"),
        stacklevel=4)
    return True




# ---------------------------------------------------------------------------------------- common
def in_file(path: Path, exc: HierarchyError) -> HierarchyError:
    """``exc`` with the file named first, unless its message already names it."""
    message = str(exc)
    return exc if str(path) in message or clip_path(path) in message else HierarchyError(f"{clip_path(path)}: "
                                                                                         f"{message}")


def build_tree(path, parent_of, leaves, names, classes, collapse) -> Hierarchy:
    """Match the leaves to the class list, then let Hierarchy order and validate the tree."""
    if classes is not None:
        leaf_set, class_set = set(leaves), set(classes)
        missing = [c for c in classes if c not in leaf_set]
        if missing:
            parents = set(parent_of.values())
            inner = [c for c in missing if c in parents]
            if inner:
                raise HierarchyError(f"{clip_path(path)}: classes of the class list are internal nodes of the "
                                     f"hierarchy "
                                     f"(they have children): {few_names(inner)}")
            raise HierarchyError(f"{clip_path(path)}: {len(missing)} classes of the class list are not in the "
                                 f"hierarchy: "
                                 f"{few_names(missing)}")
        extra = [x for x in leaves if x not in class_set]
        if extra:
            raise HierarchyError(f"{clip_path(path)}: {len(extra)} leaves of the hierarchy are not in the class list: "
                                 f"{few_names(extra)}")
        leaves = list(classes)
    try:
        return Hierarchy.from_parent_map(parent_of, leaves, names or None, collapse_single_child=collapse)
    except HierarchyError as exc:
        raise in_file(path, exc) from None
