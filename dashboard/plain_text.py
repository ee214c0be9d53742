"""User-provided text (model, file, node and rank names, sample ids, link values) made safe for a
markdown body: ``plain`` shows it literally. Pure (no Streamlit), so the pages' sentences
(``headlines``) and the widgets use the same escaping."""

from __future__ import annotations

import re

# Characters that can start markdown/HTML syntax anywhere in a line: emphasis, code, links and
# images (all need "["), HTML and autolinks ("<"), entities, math, strike-through, Streamlit's
# ":red[…]" / ":emoji:" (broken by a word joiner after ":"). "_" between two letters or digits cannot
# (CommonMark's intraword rule), so names like alpha_net and plain prose stay readable.
_MARKDOWN_CHARS = re.compile(r"[\\`*{}\[\]<>|~$&]|(?<![^\W_])_|_(?![^\W_])")
# GFM turns bare URLs and e-mail addresses into links, and Streamlit ":smile:" into emoji, even
# when every character is escaped: an invisible word joiner after ":", "www" and "@" keeps them text.
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)|(?<=:)(?=\w)")
_LINE_START = re.compile(r"^(?:(\d+)(?=[.)])|(?=[#+\-=]))")  # lists, headings, rules at the start


def plain(text: object) -> str:
    """User-provided text (model and file names, sample ids, source tags, link values) for a
    markdown body, shown literally: one line, markdown/HTML syntax escaped, no autolinks."""
    one_line = _AUTOLINK.sub("\u2060", " ".join(str(text).split()))
    escaped = _MARKDOWN_CHARS.sub(lambda m: "\\" + m.group(0), one_line)
    return _LINE_START.sub(lambda m: (m.group(1) or "") + "\\", escaped, count=1)
