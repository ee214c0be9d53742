"""Risk–Coverage: every rule's hierarchical RC curve (the paper's four and the metric-optimal / Pareto
ones) and their operating points at θ."""

import pandas as pd
import streamlit as st

from dashboard import (
    catalog,
    entry,
    evaluation_cache,
    evaluations,
    page_sentences,
    plots,
    presenter,
    sections,
    sidebar,
    state,
    sweep,
    views,
    widgets,
)
from hsc_core.core.curves import COMMON_RANGE_NOTE
from hsc_core.core.protocol import PROTOCOL_TEXT
from hsc_core.core.rule_registry import rule_label, rule_names
from hsc_core.evaluation.rc_table import RC_TABLE_COLUMNS, rc_table_rows
from hsc_core.evaluation.results import GAIN_RANGE_COLUMN
from hsc_core.report.export import export_name

entry.ensure_entrypoint(globals())

st.title("Risk–coverage")
with presenter.controls("Rules, risk and curve"):
    # The rules get a row of their own, so every chip ("Max-Coverage" too) shows its whole name.
    state.bind(st.multiselect, "Rules", "rules", scope="rc", options=list(rule_names()), format_func=rule_label)
    controls = st.columns([1.1, 1.5, 1.1])
with controls[0]:
    state.bind(st.radio, "Risk", "loss", scope="rc", options=["01", "severity"],
               format_func={"01": "0/1 (hierarchical)", "severity": "LCA severity"}.get)
with controls[1]:
    state.bind(st.radio, "Curve", "dec", scope="rc", options=["exact", "2"],
               format_func={"exact": "exact (every breakpoint)", "2": "authors' grid (θ to 2 decimals)"}.get)
with controls[2]:
    state.bind(st.toggle, "Temp. scaling", "ts", scope="rc",
               help="Same switch as in the sidebar. " + PROTOCOL_TEXT)

es = sidebar.require_model_context()
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
rules = [r for r in rule_names() if r in state.get("rules")]
if not rules:
    st.info("Select at least one rule.")
    st.stop()
loss = state.get("loss")
dec = None if state.get("dec") == "exact" else 2
cs = sidebar.curve_set_or_stop(es, loss, dec)
# the conclusion first, at the projector too (issue 35); the chart and its θ then fill the rest of the screen
st.markdown(page_sentences.risk_coverage(cs, rules, loss))


@catalog.cache_resource(max_entries=32, show_spinner=False)
def _sweep_figure(_cs, key: tuple, rules: tuple, loss: str, font_size: int, height: int | None, _theta: float):
    """The RC figure with one frame per θ of the 0.01 grid, built once per curve set; the page
    shows any θ by animating to its frame in the browser."""
    return plots.rc_sweep(_cs, rules, loss, font_size, height, _theta)


def _follow(theta: float) -> None:
    state.set("theta", round(min(max(theta, 0.0), 1.0), 2))


@catalog.cache_resource(max_entries=32, show_spinner=False)
def _texts(_cs, key: tuple, rules: tuple) -> dict[str, str]:
    """Each rule's operating point at every θ of the grid, as the view shows it beside the curves."""
    return sweep.theta_texts(lambda th: f"**Operating points** (θ = {th:.2f})  \n"
                                        + views.operating_point_text(views.operating_points(_cs, th, rules)))


@state.fragment
def theta_view() -> None:
    theta = float(state.get("theta"))
    key = (*es.key, loss, state.get("dec"))
    # One view owns θ: the curves with each rule's operating point, ▶ Play, θ slider, keys, the points' text.
    fig = _sweep_figure(cs, key, tuple(rules), loss, presenter.font_size(), presenter.fit_height(14.2),
                        round(theta, 2))
    sweep.theta_chart(fig, key="rc_chart", theta=theta, on_theta=_follow, name=f"rc_{loss}_{state.get('dec')}",
                      context=widgets.export_context(es),
                      title="Risk–coverage curves and each rule's operating point",
                      texts=_texts(cs, key, tuple(rules)), text_side="right", text_ratio="27%",
                      share_page="risk_coverage")
    points = views.operating_points(cs, theta, rules).drop(columns="key")
    widgets.csv_download(points, "rc_operating_points", key="dl_rc_points",
                         label=f"Operating points at θ = {theta:.2f} (CSV)", context=widgets.export_context(es, theta))


theta_view()
sections.shift_overlay_section(es, rules, loss, dec)

st.subheader("Area under the curves")
table = cs.haurc_table(rules)
if not evaluations.intervals_on_request(es):  # larger sets, deep trees: the Overview computes them on request
    # The layer's paired bootstrap on the exact curves, as its result rows kept on disk (evaluation_cache): once
    # per content for every server. A gain over a common coverage range has no interval (the bootstrap's is of
    # the raw areas), so its row has none.
    limits = {(r["rule"], r["metric"]): (r["ci_low"], r["ci_high"]) for r in evaluation_cache.result_rows(
        es.model, es.location, es.subset, es.view.ts, intervals=True, losses=(loss,), rules=tuple(rules))
        if r["ci_low"] is not None}
    table.insert(2, f"hAURC×1000 {views.CI}", [views.interval_text(*(1000 * v for v in limits[r, "haurc"]))
                                                if (r, "haurc") in limits else "" for r in rules])
    table.insert(4, f"gain % {views.CI}", [views.interval_text(*limits[r, "gain_percent"], gain=True)
                                           if (r, "gain_percent") in limits else "" for r in rules])
if GAIN_RANGE_COLUMN in table.columns:
    st.caption(COMMON_RANGE_NOTE)
st.dataframe(table, hide_index=True, key="rc_table",
             column_config={"hAURC×1000": st.column_config.NumberColumn(format="%.3f"),
                            "gain %": st.column_config.NumberColumn(format="%.2f",
                                                                    help="hierarchical gain vs Selective")})
c1, c2 = st.columns(2)
with c1:
    widgets.csv_download(table, f"haurc_{loss}_{state.get('dec')}", key="dl_rc_table",
                         context=widgets.export_context(es))
with c2:
    def _curve_points() -> pd.DataFrame:
        # The layer's RC table, the schema of `hsc evaluate --rc-table` (θ is `theta`: the largest θ of each point).
        rows = rc_table_rows(es.view, rules, (loss,), dec)
        return pd.DataFrame(rows, columns=list(RC_TABLE_COLUMNS))

    # No context columns in front: the RC table names its model, data set, subset and setting itself;
    # the file name still says them.
    widgets.csv_download(_curve_points, export_name(f"rc_curves_{loss}_{state.get('dec')}", widgets.export_context(es)),
                         key="dl_rc_curves", label="Full curves (CSV)")
st.caption(
    "Point k of a curve holds for every θ in (θ_{k−1}, θ_k]. The exact curve has every breakpoint; the authors' "
    "variant evaluates θ only at node probabilities rounded to 2 decimals; the 95 % intervals (paired bootstrap) "
    "are those of the exact curves. The plot shows at most "
    "1,500 points per curve; hAURC uses the full curve, and each marker is the rule's exact (coverage, risk) at θ "
    "(on the authors' grid the two agree at every grid value of θ)."
)
