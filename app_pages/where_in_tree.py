"""Where the model stops: the hierarchy as a sunburst/icicle sized by samples and coloured by where
a rule's predictions land at θ, the samples behind a node (each a link to the Explorer), the LCA
depth of mistakes per rule, and RC curves per superclass."""

from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import catalog, entry, evaluations, headlines, presenter, sidebar, state, views, widgets
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.evaluation.diagnostics import (
    MAX_WEDGES,
    landing_counts,
    mistake_severity_histogram,
    samples_at_node,
    superclass_groups,
    superclass_rc_curves,
    wedge_nodes,
)
from hsc_core.report.diagnostics_figures import (
    COLOUR_BY,
    severity_figure,
    superclass_rc_figure,
    tree_map_figure,
)

entry.ensure_entrypoint(globals())

es = sidebar.require_model_context()
h = es.view.hierarchy
st.title("Where the model stops")
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
MAX_ROWS = 500  # samples listed behind a node

with presenter.controls("Rule, colour and chart"):
    cols = st.columns([1.2, 2.0, 1.0])
with cols[0]:
    state.bind(st.selectbox, "Rule", "cmp_rule", scope="wt", options=list(rule_names()), format_func=rule_label)
with cols[1]:
    state.bind(st.radio, "Colour", "wcolour", scope="wt", options=list(COLOUR_BY),
               format_func={"stopped_here": "share of the node's samples stopping here",
                            "accuracy_here": "accuracy of predictions landing here"}.get)
with cols[2]:
    state.bind(st.radio, "Chart", "wkind", scope="wt", options=["sunburst", "icicle"], horizontal=True)
rule = state.get("cmp_rule")
paths = es.view.decision_paths(rule)  # any registered rule: the layer's one accessor

# The drill-down node (an id from the link or the picker): its samples are listed, and the chart is
# rooted at it (at its parent for a leaf). Without one the chart shows the whole tree and the list
# the busiest internal node.
picked = None
if state.get("node") is not None:
    try:
        picked = h.index_of(state.get("node"))
    except (KeyError, ValueError):
        st.warning(f"Node {widgets.plain(state.get('node'))} from the link is not in this tree; showing the root.")
        state.set("node", None)
focus = h.root if picked is None else (picked if picked >= h.n_leaves else int(h.parent[picked]))


def _follow(theta: float) -> None:
    state.set("theta", round(min(max(theta, 0.0), 1.0), 2))


def _explorer_link(sample: str, theta: float) -> str:
    query = {"model": state.get("model") or es.model, "subset": es.subset, "ts": "1" if es.view.ts else "0",
             "sample": sample, "theta": f"{theta:.2f}", "pick": "random"}
    return "explorer?" + urlencode(query)


@state.fragment
def tree_view() -> None:
    theta = state.bind(st.slider, "Confidence threshold θ", "theta", scope="wt", min_value=0.0, max_value=1.0,
                       step=0.01, format="%.2f")
    table = landing_counts(h, paths, es.view.labels, theta)
    per_node = table.reindex(range(h.n_nodes), fill_value=0)  # every node, in index order
    sentence = headlines.where_headline(per_node["stops"].to_numpy(), per_node["stops_correct"].to_numpy(),
                                        h.leaf_count, rule_label(rule), theta)
    st.markdown(sentence)  # body text, as every page's sentence (at the projector too)
    nodes = wedge_nodes(h, table["samples"].to_numpy(), focus)
    left, right = st.columns([3, 2], gap="small")
    with left:
        fig = tree_map_figure(table, nodes, colour_by=state.get("wcolour"), kind=state.get("wkind"),
                              font_size=presenter.font_size(), height=430 if presenter.presenter() else 560)
        widgets.figure(fig, f"where_{rule}", key="where_chart", context=widgets.export_context(es, theta),
                  title=f"Where {rule_label(rule)} stops at θ = {theta:.2f}")
        st.caption(f"{len(nodes):,} of {h.n_nodes:,} nodes drawn (at most {MAX_WEDGES:,}: whole levels from "
                   f"{widgets.plain(views.node_name(h, focus))} down, then the largest); area = samples by true class; "
                   "grey = no prediction lands there. Click a wedge to zoom; pick a node on the right to list "
                   "its samples.")
        widgets.csv_download(lambda: table.assign(rule=rule), f"where_{rule}_nodes", key="dl_where_nodes",
                             context=widgets.export_context(es, theta))
    with right:
        internal = table.iloc[h.n_leaves:]
        node = picked if picked is not None else int(internal["stops"].idxmax())
        candidates = [int(v) for v in table.index[table["stops"] > 0]]
        candidates = sorted(set(candidates) | {node}, key=lambda v: -int(table.loc[v, "stops"]))[:2000]
        chosen = st.selectbox("Node (drill down)", candidates, index=candidates.index(node),
                              format_func=lambda v: f"{views.node_name(h, v)} — {int(table.loc[v, 'stops']):,} land",
                              key="where_node_pick", help="Nodes where predictions land, busiest first; the chart "
                                                          "re-roots here and the samples below are its own.")
        if chosen != node:
            state.set("node", h.node_ids[chosen])
            st.rerun()
        if picked is not None and st.button("Back to the whole tree", key="where_root"):
            state.set("node", None)
            st.rerun()
        at = samples_at_node(h, paths, es.view.labels, theta, node)
        pred, conf = paths.predict(theta)
        st.markdown(f"**{at.size:,} sample(s)** land at *{widgets.plain(views.node_name(h, node))}*"
                    + (f" (first {MAX_ROWS})" if at.size > MAX_ROWS else ""))
        shown = at[:MAX_ROWS]
        correct = es.view.correctness(pred[shown], shown)
        rows = pd.DataFrame({
            "sample": [str(es.view.sample_ids[i]) for i in shown],
            "true class": [views.node_name(h, es.view.labels[i]) for i in shown],
            "correct": np.where(correct, "✓", "✗"),
            "confidence": conf[shown].astype(float),
            "explorer": [_explorer_link(str(es.view.sample_ids[i]), theta) for i in shown],
        })
        st.dataframe(rows, hide_index=True, key="where_samples", column_config={
            "explorer": st.column_config.LinkColumn("open", display_text="Explorer ↗"),
            "confidence": st.column_config.NumberColumn(format="%.3f")})
        if shown.size:
            st.markdown("Open in the Explorer: " + " · ".join(
                f"[{widgets.plain(sid)}]({link})" for sid, link in zip(rows["sample"][:4], rows["explorer"][:4],
                                                                       strict=True)))
        widgets.csv_download(rows, f"where_{rule}_samples", key="dl_where_samples",
                             context=widgets.export_context(es, theta))

    hist = mistake_severity_histogram(h, es.view.paths, es.view.labels, theta)
    widgets.figure(severity_figure(hist, font_size=presenter.font_size()), "mistake_severity", key="where_severity",
                   context=widgets.export_context(es, theta),
                   title=f"How bad are the mistakes? LCA depth of wrong predictions at θ = {theta:.2f}")
    widgets.csv_download(hist, "mistake_severity", key="dl_where_severity", context=widgets.export_context(es, theta))


tree_view()


@catalog.cache_resource(max_entries=16, show_spinner=False)
def _superclass_curves(_es: evaluations.ModelContext, key: tuple, rule: str, level: int, loss: str):
    v = _es.view
    return superclass_rc_curves(v.hierarchy, v.decision_paths(rule), v.labels, level, loss=loss, top=6)


st.subheader("Risk–coverage per superclass")
level = int(min(max(1, state.get("level")), max(h.max_depth - 1, 1)))
state.set("level", level)
state.bind(st.slider, "Hierarchy level (depth of the superclasses)", "level", scope="wt", min_value=1,
           max_value=max(h.max_depth - 1, 2), step=1)
curves = _superclass_curves(es, es.key, rule, int(state.get("level")), state.get("loss"))
sizes = np.bincount(superclass_groups(h, es.view.labels, int(state.get("level"))), minlength=h.n_nodes)
named = {f"{views.node_name(h, g)} ({sizes[g]:,} samples)": c for g, c in curves.items()}
widgets.figure(superclass_rc_figure(named, loss=state.get("loss"), font_size=presenter.font_size()),
          f"superclass_rc_{rule}_level{state.get('level')}", key="where_superclass", context=widgets.export_context(es),
          title=f"{rule_label(rule)}: the six largest superclasses at depth {state.get('level')}")
widgets.csv_download([{"superclass": views.node_name(h, g), "node": h.node_ids[g], "rule": rule,
                       "loss": state.get("loss"), "haurc": c.haurc, "points": int(c.coverage.size)}
                      for g, c in curves.items()],
                     f"superclass_haurc_{rule}", key="dl_where_superclass", context=widgets.export_context(es))
