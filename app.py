"""Hierarchical Selective Classification dashboard.

Run with ``streamlit run app.py``. The model picker, data subset and temperature-scaling toggle
live in the sidebar and apply to every page; all settings are mirrored in the URL (written here, before
and after the page in each full run, and by ``state.fragment`` after each fragment rerun).
"""

import streamlit as st

from dashboard import entry, presenter, report, session_memory, sidebar, state, widgets

st.set_page_config(page_title="Hierarchical Selective Classification", page_icon="🌳", layout="wide")
state.init_state()
widgets.warm_plotly()  # first thing in a new session: the browser loads plotly.js while this run computes
if state.get("presenter"):
    st.set_page_config(initial_sidebar_state="collapsed")

# The page files live in app_pages/, not pages/: Streamlit treats a folder named pages/ beside the
# entry point as its legacy multipage app and, on a fresh server, would run a deep link such as
# /explorer as that file alone, without this script. The url_path values are the deep links.
PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/home:", url_path="home", default=True),
    st.Page("app_pages/story.py", title="Guided story", icon=":material/school:", url_path="story"),
    st.Page("app_pages/explorer.py", title="Explorer", icon=":material/account_tree:", url_path="explorer"),
    st.Page("app_pages/risk_coverage.py", title="Risk–Coverage", icon=":material/show_chart:",
            url_path="risk_coverage"),
    st.Page("app_pages/calibration_coverage.py", title="Calibration–Coverage", icon=":material/tune:",
            url_path="calibration_coverage"),
    st.Page("app_pages/calibrators.py", title="Calibrators", icon=":material/thermostat:", url_path="calibrators"),
    st.Page("app_pages/guaranteed_accuracy.py", title="Guaranteed accuracy", icon=":material/verified:",
            url_path="guaranteed_accuracy"),
    st.Page("app_pages/compare_models.py", title="Compare models", icon=":material/compare_arrows:",
            url_path="compare_models"),
    st.Page("app_pages/where_in_tree.py", title="Where it stops", icon=":material/donut_large:",
            url_path="where_in_tree"),
    st.Page("app_pages/model_atlas.py", title="Model atlas", icon=":material/scatter_plot:", url_path="model_atlas"),
    st.Page("app_pages/hierarchy_sensitivity.py", title="Hierarchy sensitivity", icon=":material/park:",
            url_path="hierarchy_sensitivity"),
    st.Page("app_pages/try_an_image.py", title="Try an image", icon=":material/image:", url_path="try_an_image"),
    # The default page lives at "/"; this hidden twin makes a shared "/overview" link open it too.
    st.Page("app_pages/overview.py", title="Overview", icon=":material/home:", url_path="overview",
            visibility="hidden"),
]

page = st.navigation(PAGES)
state.set_page(page.url_path)
sidebar.sidebar()
with st.sidebar:
    state.bind(st.toggle, "Presenter mode", "presenter", scope="sb",
               help="Bigger type for a projector, page controls folded away; the link keeps it (presenter=1).")
presenter.presenter_style()
report.sidebar_button()
sidebar.notices()
entry.mark_entry()
# The link is right as soon as the sidebar has settled (a slow page, e.g. the Overview's intervals,
# does not hold it back), and again after the page, so what the page itself settles (Explorer's
# sample, the story's step) is in it too, also when the page stops early (st.stop); only changed
# keys are sent. Fragment-only reruns write through state.fragment.
state.write_query_params()
try:
    page.run()
finally:
    state.write_query_params()
    session_memory.track_uploaded_files()  # this run's file objects: closed when the session ends
