"""Helpers for the Streamlit dashboard (``app.py`` + ``app_pages/``), one job per module.

* ``catalog`` — where models and data sets come from (model, shifted-data and data-set catalogs),
  loading a model's logits, a file's subsets, and the session-aware ``cache_resource``.
* ``uploads`` — checking an uploaded logits file or data set and keeping it for this session only.
* ``session_memory`` — what a browser session holds, released (and the heap trimmed) when it ends.
* ``evaluations`` — the one cached ``ModelEvaluation`` of each model (``hsc_core.evaluation``: every
  number comes from it); ``ModelContext`` (its ``EvaluationSet`` as ``view``, plus the model's name,
  location, subset and data set); the curves the pages draw from it.
* ``progress`` — the progress bar of a long evaluation job.
* ``views`` — the small, pure computations behind the θ sliders (operating points, a sample's
  path and chosen nodes; the benchmark times exactly these), and the tables laid out from the
  layer's result rows.
* ``plots`` — plotly figure builders and the modebar download config.
* ``report`` — the "Download report (HTML)" button, built from the pages' cached evaluations.
* ``atlas`` — the model atlas page's data (results tables, the user's own models as rows).
* ``perturb`` — one image, live: its Explorer tree and the same image degraded (Try an image, Explorer).
* ``state`` — session state shared by all pages and its mirror in the URL query string.
* ``session_keys`` — every private session-state key, named once.
* ``entry`` — how a page run starts (inside app.py's navigation, or alone).
* ``sidebar`` — the sidebar's pickers and the current model's context (or an in-page error).
* ``widgets`` — figures, literal user text, error messages, sample images, CSV downloads, the plotly
  warm-up.
* ``sections`` — page sections shared by pages (clean vs corrupted images, the guarantee under shift).
* ``presenter`` — presenter mode (scaled layout, viewport, font sizes) and the page CSS.
* ``sweep`` — the θ sweep that keeps a chart and the page's θ slider in step.
* ``assets`` — the CSS and JavaScript files in ``dashboard/static/``.
* ``streamlit_internals`` — the only uses of Streamlit internals, where no public API exists.
"""
