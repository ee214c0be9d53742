"""What the θ sliders recompute, and how the tables lay out the layer's results: cheap, pure
functions over cached results.

Moving θ never touches node probabilities or curves: an operating point is a binary search in a
cached curve (``RCCurve.at``), and a sample's chosen nodes are one comparison per record of its
cached decision paths. ``bench/dashboard_bench.py`` times these plus the figures built from them.
The tables are the layer's tidy result rows (``hsc_core.evaluation.results``) reshaped, with its
column names (``column_label``), so every page and export names a number the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from hsc_core.core.curves import coverage_range_text
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.core.rules import RULES, DecisionPaths, decision_paths, record_index
from hsc_core.core.validation import check_theta
from hsc_core.evaluation import EvaluationSet, ResultRow, column_label, wide_table
from hsc_core.evaluation.results import EXTRA_METRICS, GAIN_RANGE_COLUMN, display_value, gain_coverage

from .evaluations import CurveSet


def node_name(h: Hierarchy, v: int) -> str:
    return h.names[int(v)].replace("_", " ")


# ---------------------------------------------------------------------------- RC operating points
def operating_points(cs: CurveSet, theta: float, rules=RULES) -> pd.DataFrame:
    """(coverage, risk) of each rule at θ, exactly the exact curve's ``curve.at(theta)``."""
    rows = []
    for rule in rules:
        cov, risk = cs.at(rule, theta)
        rows.append({"rule": rule_label(rule), "key": rule, "θ": float(theta),
                     "coverage": cov, "risk": risk})
    return pd.DataFrame(rows, columns=["rule", "key", "θ", "coverage", "risk"])


def operating_point_text(points: pd.DataFrame) -> str:
    """One line per rule, e.g. ``Climbing: coverage 0.8123, risk 0.0412``."""
    return "  \n".join(
        f"**{r.rule}** at θ = {r.θ:.2f}: coverage **{r.coverage:.4f}**, risk **{r.risk:.4f}**"
        for r in points.itertuples()
    )


# ---------------------------------------------------------------------------- one sample
def chosen_record(paths: DecisionPaths, i: int, theta: float) -> tuple[int, float]:
    """Node and confidence that ``paths`` picks for row ``i`` at θ (as DecisionPaths.predict)."""
    k = int(record_index(paths.values[i], theta))
    return int(paths.nodes[i, k]), float(paths.values[i, k])


@dataclass(frozen=True)
class Choice:
    rule: str
    node: int
    confidence: float
    coverage: float
    correct: bool | None  # None when the true label is unknown


@dataclass(frozen=True)
class SampleView:
    """A sample at θ: the predicted leaf's path to the root, the true leaf's branch below the
    point where it joins that path, and the node every rule picks."""

    theta: float
    probs: np.ndarray          # node probabilities of this sample (n_nodes,)
    pred_leaf: int
    true_leaf: int | None
    path: np.ndarray           # predicted leaf → root
    true_branch: np.ndarray    # true leaf → just below the LCA (empty when the leaf is right)
    choices: dict[str, Choice]


def sample_view(h: Hierarchy, probs: np.ndarray, paths: dict[str, DecisionPaths], i: int, theta: float,
                true_leaf: int | None = None) -> SampleView:
    """``probs``: the sample's node probabilities; ``paths``: decision paths holding it as row ``i``."""
    # every paper rule starts at the arg-max leaf (the metric-optimal ones need not)
    pred = (int(paths["selective"].nodes[i, 0]) if "selective" in paths
            else int(np.argmax(np.asarray(probs)[: h.n_leaves])))
    path = h.path_to_root(pred)
    branch = np.zeros(0, dtype=np.int64)
    if true_leaf is not None and true_leaf != pred:
        tpath = h.path_to_root(true_leaf)
        lca = int(h.lca(pred, true_leaf))
        branch = tpath[: int(np.flatnonzero(tpath == lca)[0])]
    choices = {}
    for rule, p in paths.items():
        node, conf = chosen_record(p, i, theta)
        ok = None if true_leaf is None else bool(h.is_ancestor(node, true_leaf))
        choices[rule] = Choice(rule, node, conf, float(h.coverage[node]), ok)
    return SampleView(float(theta), probs, pred, true_leaf, path, branch, choices)


CORRECT_MD = ":blue[**✓ correct**]"  # blue/orange + ✓/✗: readable without colour vision
WRONG_MD = ":orange[**✗ wrong**]"


def verdict_md(correct: bool | None) -> str:
    return "" if correct is None else (CORRECT_MD if correct else WRONG_MD)


def choice_text(h: Hierarchy, view: SampleView) -> str:
    """One markdown line per rule, e.g. ``Climbing → dog (p = 0.930, coverage 0.309) ✓ correct``;
    a root prediction reads ``Selective → reject (root): abstains``."""
    lines = []
    for rule in rule_names():
        c = view.choices.get(rule)
        if c is None:
            continue
        if c.node == h.root:
            lines.append(f"**{rule_label(rule)}** → **reject (root)**: abstains, predicting only "
                         f"“{node_name(h, c.node)}” (p = {c.confidence:.3f}, coverage {c.coverage:.3f})")
            continue
        mark = verdict_md(c.correct)
        lines.append(f"**{rule_label(rule)}** → {node_name(h, c.node)} "
                     f"(p = {c.confidence:.3f}, coverage {c.coverage:.3f}) {mark}".rstrip())
    return "  \n".join(lines)


def choice_table(h: Hierarchy, view: SampleView) -> pd.DataFrame:
    rows = []
    for rule in rule_names():
        c = view.choices.get(rule)
        if c is None:
            continue
        name = f"reject (root: {node_name(h, c.node)})" if c.node == h.root else node_name(h, c.node)
        rows.append({"rule": rule_label(rule), "chosen node": name,
                     "node id": h.node_ids[c.node], "confidence": c.confidence,
                     "coverage": c.coverage,
                     "correct": "" if c.correct is None else ("yes" if c.correct else "no")})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- curated samples
CURATED = {
    "rescue": "Climbing rescues a wrong leaf",
    "disagree": "Rules disagree",
    "worst": "Confident mistake",
    "easy": "Easy correct",
}


def curated_rows(h: Hierarchy, paths: dict[str, DecisionPaths], labels: np.ndarray, leaf_pred: np.ndarray,
                 leaf_conf: np.ndarray, theta: float) -> dict[str, np.ndarray]:
    """Rows (best example first) of each teaching case at θ.

    * rescue: the top-1 leaf is wrong but Climbing at θ predicts a correct node other than the
      root; the most specific rescue (deepest node) first, then the least confident leaf.
    * disagree: Climbing, Jumping and Max-Coverage do not all pick the same node at θ; first
      where their correctness differs, then by the number of different picks (all four rules).
    * worst: wrong top-1, most confident first. easy: right top-1, most confident first.
    """
    theta = check_theta(theta)
    picks = {rule: p.predict(theta)[0] for rule, p in paths.items()}
    ok = {rule: h.is_ancestor(nodes, labels) for rule, nodes in picks.items()}
    wrong = leaf_pred != labels
    climb = picks["climbing"]
    rescue = np.flatnonzero(wrong & ok["climbing"] & (climb != h.root))
    rescue = rescue[np.lexsort((leaf_conf[rescue], -h.depth[climb[rescue]]))]
    hier = np.stack([picks[r] for r in ("climbing", "jumping", "max_coverage")], axis=1)
    differ = (hier != hier[:, :1]).any(axis=1)
    every = np.sort(np.stack([picks[r] for r in RULES], axis=1), axis=1)
    n_distinct = 1 + (np.diff(every, axis=1) != 0).sum(axis=1)
    oks = np.stack([ok[r] for r in ("climbing", "jumping", "max_coverage")], axis=1)
    # (n,) bool; numpy's stubs allow a scalar for any(axis=1)
    mixed = cast(np.ndarray, oks.any(axis=1) & ~oks.all(axis=1))
    disagree = np.flatnonzero(differ)
    disagree = disagree[np.lexsort((-n_distinct[disagree], ~mixed[disagree]))]
    worst = np.flatnonzero(wrong)
    worst = worst[np.argsort(-leaf_conf[worst], kind="stable")]
    easy = np.flatnonzero(~wrong)
    easy = easy[np.argsort(-leaf_conf[easy], kind="stable")]
    return {"rescue": rescue, "disagree": disagree, "worst": worst, "easy": easy}


FIGURE1_THETA = 0.5


def figure1_example(h: Hierarchy, node_probs: np.ndarray, paths: dict[str, DecisionPaths], labels: np.ndarray,
                    leaf_pred: np.ndarray, leaf_conf: np.ndarray) -> int | None:
    """The row most like the paper's Figure 1 at θ = 0.5: an unsure (p < 0.5) wrong top-1 leaf
    that Climbing lifts to a correct ancestor, the closer to the leaf the better (a sibling
    mix-up such as golden vs Labrador retriever), then a leaf probability nearest 0.29."""
    rows = curated_rows(h, paths, labels, leaf_pred, leaf_conf, FIGURE1_THETA)["rescue"]
    rows = rows[leaf_conf[rows] < FIGURE1_THETA]
    if rows.size == 0:
        return None
    climb = paths["climbing"].predict(FIGURE1_THETA)[0][rows]
    gap = h.depth[leaf_pred[rows]] - h.depth[climb]  # levels climbed
    order = np.lexsort((np.abs(leaf_conf[rows] - 0.29), gap))
    return int(rows[order[0]])


def selected_paths(view: EvaluationSet, rules: Sequence[str]) -> dict[str, DecisionPaths]:
    """Decision paths of ``rules`` (listed rules of ``rule_registry``; the paper's four when none)
    of the layer's ``view``, in the registry's order, each from its one accessor."""
    chosen = [r for r in rule_names() if r in rules] or list(rule_names(paper=True))
    return {r: view.decision_paths(r) for r in chosen}


def single_sample_paths(h: Hierarchy, node_probs_row: np.ndarray) -> dict[str, DecisionPaths]:
    """Decision paths of every rule for one sample (e.g. an uploaded image)."""
    probs = np.asarray(node_probs_row, dtype=float)[None, :]
    return {rule: decision_paths(h, probs, rule) for rule in RULES}


# ---------------------------------------------------------------------------- result tables
CI = "95 % CI"  # the suffix of an interval shown as text, e.g. "hAURC×1000 95 % CI"


def model_rows(rows: list[ResultRow], limits: list[ResultRow] | None = None, **wide_options) -> list[dict]:
    """One dict per model: ``wide_table(rows, **wide_options)`` with the model's data set and
    calibration size after its name (``model, dataset, n_eval, n_cal``, then the metric columns).

    limits : rows with bootstrap limits whose ``… low``/``… high`` columns are added (e.g. the
        exact curves' intervals next to the values of the authors' grid curves).
    """
    meta: dict[str, dict[str, Any]] = {}
    for r in rows:
        meta.setdefault(r["model"], {"dataset": r["dataset"], "n_cal": r["n_cal"]})
    extra = {w["model"]: {k: v for k, v in w.items() if k.endswith((" low", " high"))}
             for w in wide_table(limits or [], **{**wide_options, "intervals": True})}
    out = []
    for w in wide_table(rows, **wide_options):
        model, n_eval = w.pop("model"), w.pop("n_eval")
        out.append({"model": model, "dataset": meta[model]["dataset"], "n_eval": n_eval, "n_cal": meta[model]["n_cal"],
                    **w, **extra.get(model, {})})
    return out


def rule_rows(rows: list[ResultRow]) -> list[dict]:
    """One dict per (model, TS setting, rule): ``model, dataset, rule, TS`` ("on"/"off"), then
    hAURC×1000 and gain % with their ``… low``/``… high`` limits (None when not computed); when
    some rule's gain is over a common coverage range (its row's ``coverage_low``/``_high``), a
    ``GAIN_RANGE_COLUMN`` after the gain says which ("" for the rules compared over the whole range)."""
    out: dict[tuple, dict] = {}
    ranges: dict[tuple, str] = {}
    for r in rows:
        if r["metric"] not in ("haurc", "gain_percent"):
            continue
        key = (r["model"], r["dataset"], r["subset"], r["loss"], r["ts"], r["rule"])
        entry = out.setdefault(key, {"model": r["model"], "dataset": r["dataset"], "rule": rule_label(r["rule"]),
                                     "TS": "on" if r["ts"] else "off"})
        name = column_label(r["metric"])
        ci = r["ci_low"] is not None and not (r["metric"] == "gain_percent" and r["rule"] == "selective")
        entry[name] = display_value(r)
        entry[f"{name} low"] = display_value(r, "ci_low") if ci else None
        entry[f"{name} high"] = display_value(r, "ci_high") if ci else None
        span = gain_coverage(r)
        if span is not None:
            ranges[key] = coverage_range_text(*span)
    if ranges:
        for key, entry in out.items():
            text = ranges.get(key, "")
            items = list(entry.items())
            at = next((i for i, (k, _) in enumerate(items) if k == f"{column_label('gain_percent')} high"), len(items))
            out[key] = dict([*items[: at + 1], (GAIN_RANGE_COLUMN, text), *items[at + 1:]])
    return list(out.values())


def interval_text(low: float | None, high: float | None, gain: bool = False) -> str:
    """``[1.23, 4.56]`` for hAURC×1000, ``[+1.2, +3.4]`` for a gain in %; "" without an interval."""
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f"[{low:+.1f}, {high:+.1f}]" if gain else f"[{low:.2f}, {high:.2f}]"


def metric_rule_rows(rows: list[ResultRow]) -> list[dict]:
    """One dict per (model, TS setting, rule) of the metrics beyond the paper
    (``EvaluationSet.extra_results``): ``model, rule, TS``, then one column per metric
    (``column_label``, display units) with its ``… low``/``… high`` limits; the model-level metrics
    (arg-max leaf AURC and AUGRC) sit in a row whose rule is "(arg-max leaf)". Columns in
    ``EXTRA_METRICS`` order: the per-rule areas first, where a narrow screen shows them."""
    out: dict[tuple, dict] = {}
    for r in rows:
        rule = rule_label(r["rule"]) if r["rule"] else "(arg-max leaf)"
        key = (r["model"], r["subset"], r["loss"] if r["rule"] else "", r["ts"], rule)
        entry = out.setdefault(key, {"model": r["model"], "rule": rule, "TS": "on" if r["ts"] else "off"})
        name = column_label(r["metric"])
        entry[name] = display_value(r)
        if r.get("ci_low") is not None:
            entry[f"{name} low"], entry[f"{name} high"] = display_value(r, "ci_low"), display_value(r, "ci_high")
    # Every row gets every column, in one order (a table's columns follow its first row's keys).
    seen = {r["metric"] for r in rows}
    names = [column_label(m) for m in (*EXTRA_METRICS, *sorted(seen - set(EXTRA_METRICS))) if m in seen]
    limits = any(k.endswith(" low") for e in out.values() for k in e)
    cols = [c for n in names for c in ((n, f"{n} low", f"{n} high") if limits else (n,))]
    return [{"model": e["model"], "rule": e["rule"], "TS": e["TS"], **{c: e.get(c) for c in cols}}
            for e in out.values()]


def with_fair_gain(table: list[dict], view: Any, loss: str = "01") -> list[dict]:
    """``metric_rule_rows`` rows with each rule's gain % vs Selective after its name, and the
    coverage range that gain is over (``GAIN_RANGE_COLUMN``; "" when over Selective's whole range)
    beside it (``EvaluationSet.gain_range``); the arg-max leaf's row gets neither (None, "")."""
    key_of = {rule_label(r): r for r in rule_names()}
    out = []
    for row in table:
        rule = key_of.get(row["rule"])
        g = None if rule is None else view.gain_range(rule, loss)
        items = list(row.items())
        gain = None if g is None else (0.0 if rule == "selective" else g.gain)
        text = g.range_text() if g is not None and g.restricted else ""
        out.append(dict([*items[:3], (column_label("gain_percent"), gain), (GAIN_RANGE_COLUMN, text), *items[3:]]))
    return out


def metric_formats(df: pd.DataFrame) -> dict[str, str]:
    """printf formats of a ``metric_rule_rows`` table's number columns: the ×1000 areas to 2
    decimals (as their intervals), hF1 to 4."""
    return {c: "%.4f" if c.startswith("hF1") else "%.2f" for c in df.columns
            if c not in ("model", "rule", "TS") and not c.endswith(CI) and pd.api.types.is_numeric_dtype(df[c])}


MISSING_NOTE = ("— : the metric does not apply to that row (the arg-max leaf has only the flat AURC and AUGRC; "
                "the rules have no flat ones).")


def dash_for_missing(df: pd.DataFrame):
    """``df`` styled for the screen: ``metric_formats``' formats and "—" in every empty cell (a bare
    table shows "None" there); the values themselves are unchanged (the CSV keeps them)."""
    formats = {c: "{:" + f[1:] + "}" for c, f in metric_formats(df).items()}
    return df.style.format(formats, na_rep="—").format(na_rep="—", subset=[c for c in df.columns if c not in formats])


def with_interval_text(table: list[dict]) -> pd.DataFrame:
    """``table`` for the screen: each ``X low``/``X high`` pair becomes one text column ``X 95 % CI``
    right after ``X`` ("" where no interval was computed)."""
    out = []
    for row in table:
        shown = {}
        for k, v in row.items():
            if k.endswith((" low", " high")):
                continue
            shown[k] = v
            if f"{k} low" in row:
                shown[f"{k} {CI}"] = interval_text(row[f"{k} low"], row[f"{k} high"], k.startswith("gain"))
        out.append(shown)
    return pd.DataFrame(out)


def sensitivity_gains(table: list[dict]) -> list[dict]:
    """Hierarchy sensitivity's gain rows (``sensitivity_table``'s, Selective left out) as
    ``figures.gain_figure`` takes them, labelled "tree · rule". The page and its snapshot draw these."""
    from hsc_core.datasets.imagenet_trees import TREES

    return [{"label": f"{TREES[d['tree']].label} · {rule_label(d['rule'])}", "rule": d["rule"],
             "estimate": d["gain_percent"], "low": d["gain_percent_low"], "high": d["gain_percent_high"]}
            for d in table if d["rule"] != "selective"]


def gain_intervals(rows: list[ResultRow], with_ts: bool = True) -> list[dict]:
    """The gain rows with bootstrap limits, as ``figures.gain_figure`` takes them (Selective left out)."""
    out = []
    for r in rows:
        if r["metric"] == "gain_percent" and r["rule"] != "selective" and r["ci_low"] is not None:
            label = f"{r['model']} · {rule_label(r['rule'])}"
            if with_ts:
                label += f" · {'TS' if r['ts'] else 'no TS'}"
            out.append({"label": label, "rule": r["rule"], "estimate": r["value"], "low": r["ci_low"],
                        "high": r["ci_high"]})
    return out


def climb_path(h: Hierarchy, probs: np.ndarray, leaf: int,
               true_leaf: int | None) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """The top-1 ``leaf``'s path up to the root, as ``headlines.climb_headline`` reads it.

    Parameters
    ----------
    h : the hierarchy. probs : (n_nodes,) one sample's node probabilities (root = 1).
    leaf : the top-1 leaf. true_leaf : the true leaf (None: unknown, e.g. an upload).

    Returns
    -------
    names : (k,) node names, the leaf first and the root last. path_probs : (k,) their probabilities.
    correct : (k,) bool, each node an ancestor of the true leaf (None when it is unknown).
    """
    path = h.path_to_root(int(leaf))
    correct = None if true_leaf is None else np.asarray(h.is_ancestor(path, int(true_leaf)), dtype=bool)
    return [node_name(h, int(v)) for v in path], np.asarray(probs, dtype=float)[path], correct


def rescued_share(view: EvaluationSet, theta: float) -> tuple[float, float]:
    """(the share of samples whose top-1 leaf is wrong, the share of those that Climbing at ``theta``
    answers correctly with a coarser node below the root)."""
    labels = np.asarray(view.labels)
    wrong = np.asarray(view.leaf_pred) != labels
    if not wrong.any():
        return 0.0, 0.0
    h = view.hierarchy
    node = np.asarray(view.paths["climbing"].predict(theta)[0])
    right = np.asarray(h.is_ancestor(node, labels), dtype=bool) & (node != h.root)
    return float(wrong.mean()), float(right[wrong].mean())
