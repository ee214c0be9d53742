"""Figures and reports shared by the dashboard and ``hsc report`` (plotly; no Streamlit)."""
