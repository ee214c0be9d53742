"""The floor for bench/browser_latency.py's shared links: a Streamlit app that draws one Plotly figure
(read from the JSON file named by ``HSC_BENCH_FIGURE``, the dashboard's own chart as the browser
holds it) and nothing else. Its time to the chart is what Streamlit + Plotly cost on this machine.

    HSC_BENCH_FIGURE=/tmp/fig.json streamlit run bench/one_chart_app.py
"""

import json
import os

import plotly.graph_objects as go
import streamlit as st

st.set_page_config(layout="wide")
spec = json.loads(open(os.environ["HSC_BENCH_FIGURE"], encoding="utf-8").read())
spec["layout"].pop("template", None)  # Streamlit's theme, as the browser filled it in
key = os.environ.get("HSC_BENCH_KEY", "chart")
with st.container(key=key):
    st.plotly_chart(go.Figure(data=spec["data"], layout=spec["layout"], frames=spec.get("frames") or None),
                    key=f"{key}_chart")
