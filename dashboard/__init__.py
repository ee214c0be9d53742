"""Helpers for the Streamlit dashboard (``app.py`` + ``app_pages/``).

* ``data``  — where models come from, loading, the temperature-scaling split and every cached
  computation (node probabilities, decision paths, curves, summaries).
* ``views`` — the small, pure computations behind the θ sliders (operating points, a sample's
  path and chosen nodes); the benchmark times exactly these.
* ``plots`` — plotly figure builders and the modebar download config.
* ``state`` — session state shared by all pages and its mirror in the URL query string.
* ``ui``    — Streamlit rendering helpers used by several pages (sidebar, errors, downloads).
"""
