"""Every private key the dashboard keeps in ``st.session_state``, named once.

A private key starts with ``_`` (the settings mirrored in the URL have plain names: ``state.SETTINGS``).
Each constant's comment says what the key holds and which module writes it. Keys built per item
(a widget of a scope, a model's data-set picker, a chart's θ sweep) come from the functions below,
so their prefixes are named here too. ``tests/test_dashboard_layering.py`` checks that no module
or page spells a private key as a literal, and that the keys are unique.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------- URL and runs (state.py)
QUERY_PARAMS_LOADED = "_query_params_loaded"  #: True once the link's query string was read (state.init_state)
URL_IGNORED = "_url_ignored"  #: (key, value, what it accepts) of each link parameter not used (state)
URL_CAPPED = "_url_capped"  #: one line per link list cut to its cap (state)
URL_VALUES = "_url_values"  #: key → raw value of every parameter the link set (state)
MISSING_MODEL = "_missing_model"  #: a requested model not in the catalog, shown once replaced (sidebar, state)
FULL_RUN = "_full_run"  #: the number of this session's full runs (state.init_state)
PAGE = "_page"  #: the page this run shows (state.set_page, from app.py)
BOUND_IN_RUN = "_bound_in_run"  #: widget key → (page, full run) that last drew it (state.bind)
RESEND_IN_RUN = "_resend_in_run"  #: the full run that sends bound widgets their values again (state.resend_in_next_run)
UNSENT = "_bind_unsent"  #: bound widgets whose value was set in a run that stopped inside their call (state.bind)
WIDGET_PREFIX = "_w."  #: prefix of a bound widget's own key: ``widget_key`` (state.bind)

# ---------------------------------------------------------------------------- entry (entry.py)
ENTERED_VIA_APP = "_entered_via_app"  #: set by app.py right before the page runs (entry.mark_entry)

# ---------------------------------------------------------------------------- models and uploads
UPLOADED_MODELS = "_uploaded_models"  #: model name → "upload:…" location of each upload (sidebar)
UPLOADED_BUNDLES = "_uploaded_bundles"  #: upload location → its validated LogitsBundle (uploads.keep_upload)
NPZ_UPLOAD = "_npz_upload"  #: the sidebar's .npz file uploader widget (sidebar)
UPLOAD_ID = "_upload_id"  #: file_id of the last upload validated, so a rerun does not redo it (sidebar)
UPLOAD_MSG = "_upload_msg"  #: (st function name, message) about the last upload (sidebar)

# ---------------------------------------------------------------------------- data sets
DATASET_CHOICES = "_dataset_choices"  #: model location → data set picked in the sidebar (sidebar)
SESSION_DATASETS = "_session_datasets"  #: data set name → "session:<token>" of an uploaded one (sidebar)
SESSION_DATASET_OBJECTS = "_session_dataset_objects"  #: "session:<token>" → its parsed Dataset (sidebar)
DATASET_PICK_PREFIX = "_dataset_pick."  #: prefix of a model's data-set selectbox: ``dataset_pick`` (sidebar)
URL_DATASET_DONE = "_url_dataset_done"  #: True once the link's ``dataset`` was applied (sidebar)
URL_DATASET_MSG = "_url_dataset_msg"  #: (location, why the link's data set was ignored) (sidebar)
DS_NAME = "_ds_name"  #: "Add a data set": the name text input (sidebar)
DS_TREE = "_ds_tree"  #: "Add a data set": the hierarchy file uploader (sidebar)
DS_CLASSES = "_ds_classes"  #: "Add a data set": the class-list file uploader (sidebar)
DS_HEADER = "_ds_header"  #: "Add a data set": the CSV first-row radio (sidebar)
DS_ADD = "_ds_add"  #: "Add a data set": the button (sidebar)
DS_MSG = "_ds_msg"  #: (st function name, message) about the last data set added (sidebar)

# ---------------------------------------------------------------------------- first paint, presenter mode, θ sweep
PLOTLY_WARM = "_plotly_warm"  #: True once this session's first run sent the warm-up chart (widgets.warm_plotly)
VIEWPORT = "_viewport"  #: the viewport probe component's state: ``.size`` = "WxH" (presenter)
VIEWPORT_FRESH = "_viewport_fresh"  #: True in the run a new browser size started (presenter)
PRESENTER_SWITCH = "_presenter_switch"  #: the top-right button that turns presenter mode on or off (its slot too)
SWEEP_PREFIX = "_sweep_"  #: prefix of a θ-swept view's server side (rev, θ, ack): ``sweep`` (sweep.theta_chart)

# ---------------------------------------------------------------------------- pages
EXPLORER_RESAMPLE = "_explorer_resample"  #: the Explorer's sample must be drawn again (app_pages/explorer)
EXPLORER_LIST_THETA = "_explorer_list_theta"  #: θ the Explorer's curated list was drawn at (app_pages/explorer)
EXPLORER_PAGE_THETA = "_explorer_page_theta"  #: θ the Explorer's degraded-image part was drawn at (app_pages/explorer)
JOBS_ASKED = "_jobs_asked"  #: long job button key → True (clicked) or the settings it runs with (widgets.job_button)
GA_RUNS = "_ga_runs"  #: repetitions: key → table, the last few kept (app_pages/guaranteed_accuracy)
GA_SHOOTOUTS = "_ga_shootouts"  #: shoot-outs: key → ShootoutResult, the last few kept (guaranteed_accuracy)
GA_CARDS = "_ga_cards"  #: decision cards: key → card, the last few kept (app_pages/guaranteed_accuracy)
ATLAS_UPLOAD = "_atlas_upload"  #: the Model atlas's results-table uploader (app_pages/model_atlas)
PER_RANK_UPLOAD = "_per_rank_upload"  #: the per-rank page's scores-table uploader (app_pages/per_rank)
OVERVIEW_CI_REQUESTED = "_overview_ci_requested"  #: models whose large-set intervals were asked for (overview)
STORY_SHOWN_STEP = "_story_shown_step"  #: the step the story's last run showed (app_pages/story)
STORY_THETA = "_story_theta"  #: (step, θ) of the story's example (app_pages/story)


def widget_key(scope: str, key: str) -> str:
    """The key of the widget that edits setting ``key`` in ``scope`` (``state.bind``)."""
    return f"{WIDGET_PREFIX}{scope}.{key}"


def dataset_pick(location: str) -> str:
    """The key of the sidebar's data-set picker of the model at ``location``."""
    return f"{DATASET_PICK_PREFIX}{location}"


def sweep(chart_key: str) -> str:
    """The key of the server's side of the θ-swept view drawn with ``key=chart_key`` (``sweep.theta_chart``)."""
    return f"{SWEEP_PREFIX}{chart_key}"


#: Every fixed key and prefix above (the uniqueness test reads this).
ALL_KEYS: tuple[str, ...] = tuple(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str))
MONITOR_UPLOAD_RUNS = "_monitor_upload_runs"  #: the Monitor page's runs on this session's uploaded stream
