"""Helpers for the Streamlit dashboard (``app.py`` + ``app_pages/``).

* ``data``  — where models and data sets come from, uploads, subsets, and the one cached
  ``ModelEvaluation`` of each (``hsc_core.evaluation``: every number comes from it), with progress
  bars for its long jobs.
* ``views`` — the small, pure computations behind the θ sliders (operating points, a sample's
  path and chosen nodes; the benchmark times exactly these), and the tables laid out from the
  layer's result rows.
* ``plots`` — plotly figure builders and the modebar download config.
* ``state`` — session state shared by all pages and its mirror in the URL query string.
* ``ui``    — Streamlit rendering helpers used by several pages (sidebar, errors, downloads).
"""
