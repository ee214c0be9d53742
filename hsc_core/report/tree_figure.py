"""The paper's Figure 1 as a live node-link tree, with a client-side θ sweep.

One sample: the predicted leaf's path to the root (one column), the true label's branch hanging
off the lowest common ancestor (a second column), and any node a rule can pick that is on
neither (placed by depth where a row is free, joined to its nearest shown ancestor by a dotted
edge). Each node shows its name, probability and ✓/✗ (ancestor of the true leaf or not); the
other children of its parent are summarised under it ("+12 siblings: 0.08"). Each rule's pick is
a marker of that rule's colour and shape in its own slot left of the node, so no mark hides
another. θ is drawn as a probability level: under each node's label a small bar runs from 0 to 1,
filled up to the node's probability, and a black tick marks θ on it; the tick is left of the fill's
end exactly when p ≥ θ (the node is drawn filled), so the drawing and the printed numbers agree.

The figure carries one Plotly frame per θ of a grid (default 0, 0.01, …, 1) plus Plotly's own
slider and play button: dragging or playing restyles it in the browser with no server round
trip. A frame only changes the node symbols (filled when p ≥ θ), the four pick markers, the θ
ticks and the title, so 101 frames stay small.

Pure function of the sample's node probabilities and its rules' decision records
(``DecisionPaths`` rows); nothing here depends on a data set. Node names and ids come from
hierarchy files, so they are escaped (``style.plain``) and cut before they reach the figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.core.rules import below_theta, record_index

from . import style

#: The rules shown by default: the paper's four (``rule_registry``).
PAPER_RULES: tuple[str, ...] = rule_names(paper=True)

THETA_GRID = np.round(np.linspace(0.0, 1.0, 101), 2)
HEAD_LINES = 3           # headline above the root: θ + key, then two rules per line
SYMBOL_GLYPH = {"square": "■", "circle": "●", "triangle-up": "▲", "diamond": "◆", "x": "✖",
                "star": "★", "hexagon": "⬢", "pentagon": "⬟", "cross": "✚"}  # the last four: metric_rules
REJECT = "reject (root)"
NAME_CHARS = 32          # longer node names are cut with "…" (ImageNet: 11 of 1,000 leaves)
CHAR_EM = 0.6            # mean glyph width / font size, to size labels before the browser draws them
GAUGE_EM = 3.6          # width of a node's probability bar (0 … 1) / font size
# Figure trace order (frames address traces by index): T_BELOW … T_HEAD change with θ.
T_EDGES, T_LINKS, T_GAUGE, T_FILL, T_NODES, T_BELOW, T_THETA, T_PICKS, T_HEAD = range(9)


# ---------------------------------------------------------------------------- picks
def pick_index(values: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
    """Index of the record a rule picks at θ: ``rules.record_index`` (the library's one θ
    comparison, in the records' precision). values: (n_records,); broadcasts over θ."""
    return record_index(values, theta)


def record_rows(paths: dict, i: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """rule → (nodes, values) of row ``i`` of each rule's ``DecisionPaths``, padding dropped.
    Values keep their precision (float32 records compare θ in float32, as ``predict`` does)."""
    out = {}
    for rule, p in paths.items():
        k = int(p.lengths[i])
        out[rule] = (np.asarray(p.nodes[i, :k], dtype=np.int64), np.array(p.values[i, :k]))
    return out


def node_label(h: Hierarchy, v: int) -> str:
    """Display name of a node for the figure (escaped Plotly text, cut at ``NAME_CHARS``); the
    root says what predicting it means."""
    name = style.plain(h.names[int(v)].replace("_", " "), NAME_CHARS)
    return f"{REJECT}: {name}" if int(v) == h.root else name


def decision_text(h: Hierarchy, node: int, correct: bool | None) -> str:
    """``dog ✓``, ``golden retriever ✗`` or ``reject (root)`` (abstaining is neither)."""
    if int(node) == h.root:
        return REJECT
    mark = "" if correct is None else f" {style.CORRECT_MARK if correct else style.WRONG_MARK}"
    return node_label(h, node) + mark


# ---------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class TreeLayout:
    """Where each shown node goes. ``nodes``/``x``/``row``: parallel arrays; ``edges``: (child,
    parent) pairs drawn solid; ``links``: (node, shown ancestor) pairs that skip levels (dotted);
    ``folded``: shown path node → number of never-picked ancestors left out just above it."""

    nodes: np.ndarray
    x: np.ndarray
    row: np.ndarray
    edges: list[tuple[int, int]]
    links: list[tuple[int, int]]
    folded: dict[int, int]
    pred_leaf: int
    lca: int


def tree_layout(h: Hierarchy, probs: np.ndarray, records: dict[str, tuple[np.ndarray, np.ndarray]],
                true_leaf: int | None = None, grid: np.ndarray = THETA_GRID) -> TreeLayout:
    """Columns and rows of the shown nodes (row 0 = root, one row per depth).

    Path nodes above the LCA that no rule picks at any θ of ``grid`` are left out (the sibling
    summary and a dotted edge say so), so a deep ImageNet path fits a 720p screen.
    """
    first = next(iter(records.values()))[0]
    pred = int(first[0])  # every rule starts at the arg-max leaf
    path = [int(v) for v in h.path_to_root(pred)]  # leaf → root
    lca = pred if true_leaf is None else int(h.lca(pred, int(true_leaf)))
    branch: list[int] = []
    if true_leaf is not None and int(true_leaf) != pred:
        tpath = [int(v) for v in h.path_to_root(int(true_leaf))]
        branch = tpath[: tpath.index(lca)][::-1]  # just below the LCA … true leaf
    picked = {int(nodes[k]) for nodes, values in records.values() for k in np.unique(pick_index(values, grid))}
    keep = picked | {pred, lca, h.root}
    # Path nodes strictly above the LCA that no rule picks at any θ of the grid are left out; the
    # next shown node below says how many levels were skipped (its edge up is dotted).
    top_down = path[::-1]
    lca_depth = int(h.depth[lca])
    removed = {v for v in top_down if int(h.depth[v]) < lca_depth and v not in keep}
    folded: dict[int, int] = {}
    skipped = 0
    for v in top_down:
        if v in removed:
            skipped += 1
        elif skipped:
            folded[v], skipped = skipped, 0
    shown_path = [v for v in top_down if v not in removed]

    def row_of(v: int) -> int:
        anc = h.path_to_root(v)
        return int(h.depth[v]) - sum(1 for a in anc.tolist() if a in removed)

    nodes: list[int] = []
    x: list[float] = []
    rows: list[int] = []
    occupied: dict[int, set[int]] = {0: set(), 1: set()}
    for v in shown_path:
        nodes.append(v)
        x.append(0)
        rows.append(row_of(v))
        occupied[0].add(rows[-1])
    for v in branch:
        nodes.append(v)
        x.append(1)
        rows.append(row_of(v))
        occupied[1].add(rows[-1])
    shown = set(nodes)
    others = sorted((v for v in picked if v not in shown and v not in removed), key=lambda v: int(h.depth[v]))
    for v in others:
        r = row_of(v)
        col = 1
        while r in occupied.setdefault(col, set()):
            col += 1
        occupied[col].add(r)
        nodes.append(v)
        x.append(col)
        rows.append(r)
    shown = set(nodes)
    edges, links = [], []
    for v in nodes:
        if v == h.root:
            continue
        parent = int(h.parent[v])
        if parent in shown:
            edges.append((v, parent))
            continue
        anc = next(int(a) for a in h.path_to_root(v)[1:] if int(a) in shown)
        links.append((v, anc))
    return TreeLayout(np.asarray(nodes, dtype=np.int64), np.asarray(x, dtype=float), np.asarray(rows, dtype=np.int64),
                      edges, links, folded, pred, lca)


# ---------------------------------------------------------------------------- figure
def _label_parts(h: Hierarchy, lay: TreeLayout, probs: np.ndarray, correct: dict[int, bool | None]
                 ) -> list[tuple[str, str]]:
    """(main text, note) per shown node: name, probability, ✓/✗; the note summarises the other
    children of its parent and any folded levels."""
    shown = set(lay.nodes.tolist())
    out = []
    for v in lay.nodes.tolist():
        ok = correct[v]
        mark = "" if ok is None or v == h.root else f" {style.CORRECT_MARK if ok else style.WRONG_MARK}"
        main = f"{node_label(h, v)} {probs[v]:.2f}{mark}" + (" · top-1" if v == lay.pred_leaf else "")
        notes = []
        if v in lay.folded:
            k = lay.folded[v]
            notes.append(f"⋮ {k} level{'s' if k > 1 else ''} skipped")
        if v != h.root:
            sibs = [int(s) for s in h.children[int(h.parent[v])] if int(s) != v and int(s) not in shown]
            mass = float(np.sum(probs[sibs])) if sibs else 0.0
            if mass >= 0.005:  # siblings with (almost) no mass are left to the hover text
                notes.append(f"+{len(sibs)} other{'s' if len(sibs) > 1 else ''}: {mass:.2f}")
        out.append((main, " · ".join(notes)))
    return out


def _text_px(html: str, font_size: int) -> float:
    """Estimated drawn width of one line of Plotly text at ``font_size`` (tags removed, character
    references counted as the character they draw; smaller spans are counted at full size, which
    errs on the wide side)."""
    return len(style.shown_text(html)) * CHAR_EM * font_size


def _label_html(main: str, note: str, small: int, note_first: bool) -> str:
    bold = f"<b>{main}</b>"
    if not note:
        return bold
    span = f"<span style='font-size:{small}px;color:#505050'>{note}</span>"
    return f"{span}  {bold}" if note_first else f"{bold}  {span}"


def _geometry(lay: TreeLayout, parts: list[tuple[str, str]], font_size: int, small: int, n_rules: int,
              slot: float, left_slots: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
    """x (in pixels at the intended scale) of each node and of its first rule slot direction,
    plus the left and right edges. Column 0 (the predicted path) has its rule slots on the left and
    labels on the right; column 1 (the true label's branch) sits left of it with labels on the
    left and slots on the right, facing the path; further columns follow right of the path."""
    char, small_char = CHAR_EM * font_size, CHAR_EM * small
    shown = [(len(style.shown_text(m)), len(style.shown_text(n))) for m, n in parts]
    width = np.array([max(m * char + (n * small_char + 2 * char if n else 0), GAUGE_EM * font_size + char)
                      for m, n in shown])
    col = lay.x.astype(int)
    slots_w = (n_rules + 0.8) * slot
    x = np.zeros(len(parts))
    side = np.where(col == 1, 1.0, -1.0)  # slots to the right (+1) or left (−1) of the node
    left = -slots_w - 8 * char  # room for the "θ = 0.50" text at the θ line's left end
    if (col == 1).any():
        x[col == 1] = -slots_w - (slots_w if left_slots else 0) - 2 * char
        left = min(left, float((x[col == 1] - width[col == 1]).min()) - char)
    right = float((width[col == 0]).max()) + slot
    for c in range(2, int(col.max()) + 1 if col.size else 0):
        if (col == c).any():
            x[col == c] = right + slots_w
            right = float(right + slots_w + width[col == c].max() + slot)
    return x, side, left, right


def tree_figure(h: Hierarchy, probs: np.ndarray, records: dict[str, tuple[np.ndarray, np.ndarray]],
                true_leaf: int | None = None, theta: float = 0.5, *, grid: np.ndarray = THETA_GRID,
                font_size: int = style.BASE_FONT_SIZE, animate: bool = True, rules=PAPER_RULES,
                title: str | None = None, max_height: int | None = None,
                max_width: int | None = None) -> go.Figure:
    """Figure 1 for one sample at θ, with one frame per θ of ``grid`` when ``animate``.

    probs: (n_nodes,) node probabilities; records: rule → (nodes, values) from ``record_rows``;
    true_leaf: the label, or None when unknown (then nothing is marked correct or wrong).
    A node whose probability is below θ is drawn hollow and its bar's θ tick lies right of the
    bar's fill; the picks of all rules are one trace (one marker per rule, each in its own slot) so
    a frame restyles only four traces. ``max_height``: rows are squeezed (down to 1.45 × the font
    size) so the figure fits this many pixels, e.g. a 720-pixel projector screen. ``max_width``:
    when the tree would be wider, the notes beside the labels ("+12 others: 0.08") move to the
    hover text, so no label is cut at the page's edge.
    """
    raw_probs = np.asarray(probs)  # θ is compared in the probabilities' own precision (below_theta)
    probs = raw_probs.astype(float)
    rules = [r for r in rules if r in records]
    records = {r: records[r] for r in rules}
    lay = tree_layout(h, probs, records, true_leaf, grid)
    nodes = lay.nodes.tolist()
    small = max(11, int(round(font_size * 0.72)))
    marker_px = int(round(font_size * 1.15))
    slot = marker_px + 5.0
    parts = _label_parts(h, lay, probs, {v: (None if true_leaf is None else bool(h.is_ancestor(v, int(true_leaf))))
                                         for v in nodes})
    picked = {int(rn[k]) for rn, rv in records.values() for k in np.unique(pick_index(rv, grid))}
    left_slots = bool(set(lay.nodes[lay.x == 1].tolist()) & picked)
    x, side, left_edge, right = _geometry(lay, parts, font_size, small, len(rules), slot, left_slots)
    notes = {int(v): n for v, (_, n) in zip(lay.nodes, parts, strict=True)}
    if max_width is not None and right - left_edge + 28 > max_width:
        # Too wide for the page: the notes move to the hover text rather than be cut at the edge.
        parts = [(m, "") for m, _ in parts]
        x, side, left_edge, right = _geometry(lay, parts, font_size, small, len(rules), slot, left_slots)
        notes_in_hover = True
    else:
        notes_in_hover = False
    y = -lay.row.astype(float)
    pos = {v: (float(x[k]), float(y[k])) for k, v in enumerate(nodes)}
    correct = {v: (None if true_leaf is None else bool(h.is_ancestor(v, int(true_leaf)))) for v in nodes}
    raw_node_p = raw_probs[lay.nodes]
    n_rows = int(lay.row.max()) + 1
    head_px = HEAD_LINES * 1.3 * font_size + 8
    row_px = max(30, int(round(font_size * 1.8)))  # a label and its probability bar under it
    if max_height is not None:
        controls = 30 + 2.2 * font_size if animate else 0  # add_theta_sweep's slider and Play
        fit = (max_height - 20 - controls - head_px) / n_rows
        row_px = int(max(min(row_px, fit), 30, font_size * 1.45))
    head_rows = head_px / row_px  # the headline's height in rows
    side_of = {v: float(side[k]) for k, v in enumerate(nodes)}
    on_left = lay.x == 1
    # Each node's probability bar (0 … 1) sits under its label: from the label's start (path,
    # further columns) or ending at its end (the true branch, whose labels are on the left).
    gauge_w = GAUGE_EM * font_size
    gauge_x0 = np.where(on_left, x - marker_px / 2 - 6 - gauge_w, x + marker_px / 2 + 6)
    gauge_y = y - min(0.44, 0.55 * font_size / row_px + 0.06)
    tick = 0.13  # half the θ tick's height, in rows
    labels = [_label_html(m, n, small, bool(on_left[k])) for k, (m, n) in enumerate(parts)]
    is_root = lay.nodes == h.root
    symbols = ["square" if v == h.root else (style.WRONG_SYMBOL if correct[v] is False else style.CORRECT_SYMBOL)
               for v in nodes]
    colours = [style.NEUTRAL_COLOUR if (v == h.root or correct[v] is None) else
               (style.CORRECT_COLOUR if correct[v] else style.WRONG_COLOUR) for v in nodes]
    hover = []
    for v in nodes:
        state = "" if correct[v] is None else ("ancestor of the true leaf (correct)" if correct[v] else "wrong")
        hover.append(f"{style.plain(h.names[v], style.HOVER_CHARS)} ({style.plain(h.node_ids[v], 40)})<br>"
                     f"p = {probs[v]:.4f}<br>coverage {h.coverage[v]:.3f} · "
                     f"{int(h.leaf_count[v])} leaves<br>"
                     + ("predicting the root = abstaining (reject)" if v == h.root else state)
                     + (f"<br>{notes[v]}" if notes_in_hover and notes[v] else ""))

    def segs(pairs):
        xs, ys = [], []
        for a, b in pairs:
            xs += [pos[a][0], pos[b][0], None]
            ys += [pos[a][1], pos[b][1], None]
        return xs, ys

    def below(th: float) -> dict:  # hollow centres of the nodes whose probability is below θ
        return dict(y=np.where(below_theta(raw_node_p, th) & ~is_root, y, np.nan))

    def theta_ticks(th: float) -> dict:  # θ on every node's probability bar
        xs, ys = [], []
        for gx, gy in zip(gauge_x0 + th * gauge_w, gauge_y, strict=True):
            xs += [float(gx), float(gx), None]
            ys += [float(gy) - tick, float(gy) + tick, None]
        return dict(x=xs, y=ys)

    def bars(upto: np.ndarray) -> dict:
        xs, ys = [], []
        for gx, gy, u in zip(gauge_x0, gauge_y, upto, strict=True):
            xs += [float(gx), float(gx + u * gauge_w), None]
            ys += [float(gy), float(gy), None]
        return dict(x=xs, y=ys)

    def picks(th: float) -> dict:
        xs, ys, text = [], [], []
        for k_slot, rule in enumerate(rules):
            rn, rv = records[rule]
            k = int(pick_index(rv, th))
            v = int(rn[k])
            xs.append(pos[v][0] + side_of[v] * (k_slot + 1) * slot)
            ys.append(pos[v][1])
            text.append(f"{rule_label(rule)} at θ = {th:.2f} → {decision_text(h, v, correct.get(v))} "
                        f"(p = {rv[k]:.3f})")
        return dict(x=xs, y=ys, hovertext=text)

    key = f"<span style='font-size:{small}px'>○ p < θ  bar: p, ┃ θ</span>" if true_leaf is None else (
        f"<span style='font-size:{small}px'><span style='color:{style.CORRECT_COLOUR}'>●</span> ✓ correct  "
        f"<span style='color:{style.WRONG_COLOUR}'>✖</span> ✗ wrong  ○ p < θ  bar: p, ┃ θ</span>")

    def headline(th: float) -> dict:
        parts = []
        for rule in rules:
            rn, rv = records[rule]
            v = int(rn[int(pick_index(rv, th))])
            colour = style.rule_colour(rule)
            parts.append(f"<span style='color:{colour}'>{SYMBOL_GLYPH[style.rule_symbol(rule)]}</span> "
                         f"{rule_label(rule)} → <b>{decision_text(h, v, correct.get(v))}</b>")
        lines = [" · ".join(parts[k: k + 2]) for k in range(0, len(parts), 2)]
        return dict(text=[title or "<br>".join([f"<b>θ = {th:.2f}</b>   {key}"] + lines)])

    ex, ey = segs(lay.edges)
    lx, ly = segs(lay.links)
    traces = [
        go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#8C8C8C", width=2), hoverinfo="skip",
                   showlegend=False, name="tree edges"),
        go.Scatter(x=lx, y=ly, mode="lines", line=dict(color="#8C8C8C", width=1.5, dash="dot"), hoverinfo="skip",
                   showlegend=False, name="descendant (levels skipped)"),
        go.Scatter(mode="lines", line=dict(color="#D9D9D9", width=max(4.0, font_size / 4)), hoverinfo="skip",
                   showlegend=False, name="probability bar (0 … 1)", cliponaxis=False,
                   **bars(np.ones(len(nodes)))),
        go.Scatter(mode="lines", line=dict(color="#505050", width=max(4.0, font_size / 4)), hoverinfo="skip",
                   showlegend=False, name="probability", cliponaxis=False, **bars(np.clip(probs[lay.nodes], 0, 1))),
        go.Scatter(x=x, y=y, mode="markers+text", name="nodes", showlegend=False,
                   marker=dict(size=marker_px, color=colours, symbol=symbols, line=dict(color=colours, width=2)),
                   text=labels, textposition=["middle left" if o else "middle right" for o in on_left],
                   textfont=dict(size=font_size, color="#1A1A1A"), hovertext=hover, hoverinfo="text",
                   cliponaxis=False),
        go.Scatter(x=x, mode="markers", name="p < θ", showlegend=False, hoverinfo="skip",
                   marker=dict(size=max(4, marker_px - 8), color="white", symbol=symbols), **below(theta)),
        go.Scatter(mode="lines", line=dict(color=style.OKABE_ITO["black"], width=max(2.0, font_size / 8)),
                   hoverinfo="skip", showlegend=False, name="θ on each probability bar", cliponaxis=False,
                   **theta_ticks(theta)),
        go.Scatter(mode="markers", name="rule picks", showlegend=False, hoverinfo="text", cliponaxis=False,
                   marker=dict(size=marker_px, color=[style.rule_colour(r) for r in rules],
                               symbol=[style.rule_symbol(r) for r in rules], line=dict(color="white", width=1)),
                   **picks(theta)),
        go.Scatter(mode="text", name="headline", showlegend=False, hoverinfo="skip", cliponaxis=False,
                   x=[left_edge], y=[head_rows + 0.1], textposition="bottom right",
                   textfont=dict(size=font_size, color="#1A1A1A"),
                   **headline(theta)),
    ]

    fig = go.Figure(traces)
    # x is in pixels, so the figure gets its natural width: wide enough for the tree, the widest
    # headline over the θ grid and the sweep controls, and no wider (a stretched axis would only
    # pull the columns apart). Shown with width="content", a narrower page shrinks it.
    heads = [headline(float(th)) for th in grid]  # reused by the frames below
    head_px = max(_text_px(line, font_size) for head in heads for line in head["text"][0].split("<br>"))
    plot_w = max(right - left_edge + 8, head_px + 8, 34 * font_size)
    fig.update_xaxes(visible=False, range=[left_edge - 4, left_edge - 4 + plot_w], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-(n_rows - 0.4), head_rows + 0.2], fixedrange=True)
    top = 10
    fig.update_layout(
        width=int(plot_w + 20),
        height=int(top + 10 + (n_rows + head_rows) * row_px),
        margin=dict(l=10, r=10, t=top, b=10),
        font=dict(size=font_size),
        template="plotly_white",
        showlegend=False,
        hoverlabel=dict(font_size=small + 1),
    )
    if animate:
        frames = [go.Frame(name=f"{th:.2f}", traces=[T_BELOW, T_THETA, T_PICKS, T_HEAD],
                           data=[below(float(th)), theta_ticks(float(th)), picks(float(th)), head])
                  for th, head in zip(grid, heads, strict=True)]
        add_theta_sweep(fig, grid, theta, font_size, frames)
    return fig


def add_theta_sweep(fig: go.Figure, grid: np.ndarray, theta: float, font_size: int, frames: list,
                    frame_ms: int = 30) -> None:
    """Attach ``frames`` (one per θ of ``grid``, named ``f"{θ:.2f}"``) with Plotly's slider and a
    play/pause button. ``frame_ms`` = 30 asks for 33 frames/s (≥ 25 with drawing). Frames only
    restyle scatter traces, so Plotly can skip the full redraw."""
    fig.frames = frames
    active = int(np.argmin(np.abs(np.asarray(grid) - theta)))
    step_args = dict(mode="immediate", frame=dict(duration=0, redraw=False), transition=dict(duration=0))
    steps = [dict(method="animate", args=[[f"{th:.2f}"], step_args],
                  label=f"{th:.2f}", value=f"{th:.2f}") for th in grid]
    small = max(11, int(round(font_size * 0.8)))
    fig.update_layout(
        sliders=[dict(active=active, steps=steps, x=0.12, len=0.88, y=1.0, yanchor="bottom", pad=dict(t=0, b=10),
                      currentvalue=dict(prefix="θ = ", font=dict(size=font_size, color="#1A1A1A"), visible=True,
                                        xanchor="left"),
                      font=dict(size=small, color="rgba(0,0,0,0)"),  # 101 tick labels would overlap
                      ticklen=4, minorticklen=2, transition=dict(duration=0))],
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=1.0, xanchor="left", yanchor="bottom",
                          pad=dict(b=12, r=10), showactive=False, font=dict(size=small),
                          buttons=[
                              dict(label="▶ Play", method="animate",
                                   args=[None, dict(frame=dict(duration=frame_ms, redraw=False), fromcurrent=True,
                                                    mode="immediate", transition=dict(duration=0))]),
                              dict(label="❚❚", method="animate",
                                   args=[[None], dict(frame=dict(duration=0, redraw=False), mode="immediate",
                                                      transition=dict(duration=0))]),
                          ])],
    )
    fig.layout.margin.t = (fig.layout.margin.t or 0) + 30 + 2.2 * font_size
    fig.layout.height = (fig.layout.height or 450) + 30 + 2.2 * font_size
