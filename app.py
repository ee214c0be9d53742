"""Hierarchical Selective Classification dashboard.

Run with ``streamlit run app.py`` (or ``hsc dashboard``). The model picker, data subset and temperature-scaling toggle
live in the sidebar and apply to every page; all settings are mirrored in the URL (written here, before
and after the page in each full run, and by ``state.fragment`` after each fragment rerun).
"""

import streamlit as st

if __name__ != "__main__":
    # `streamlit run app.py` reads this file for an `st.App` and, finding one, imports it as a
    # module (so __name__ is "app") to serve it; each browser session then runs the file as
    # "__main__", the dashboard below. The App adds the snapshot links' routes (/s/<key>) to the
    # same server; nothing heavy is imported here (the builders load on the first snapshot asked for).
    import faulthandler
    import importlib
    import signal

    from dashboard import snapshot, warmup
    from hsc_core import config

    if config.debug() and hasattr(signal, "SIGUSR1"):
        # HSC_DEBUG: `kill -USR1 <server pid>` writes every thread's stack to the server's stderr
        # (what a stuck run is waiting on).
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    # What the first page needs, imported while the browser loads Streamlit's frontend (dashboard.warmup).
    warmup.start(("numpy", "pandas", "plotly.graph_objects", "streamlit.elements.plotly_chart", "hsc_core.evaluation",
                  "dashboard.entry", "dashboard.state", "dashboard.sidebar", "dashboard.widgets", "dashboard.presenter",
                  "dashboard.report", "dashboard.session_memory", "dashboard.evaluations", "dashboard.evaluation_cache",
                  "dashboard.views", "dashboard.snapshot_views", "dashboard.snapshot_pages", "dashboard.snapshot_learn",
                  "hsc_core.report.figures", "hsc_core.report.html_report", "hsc_core.report.tree_figure",
                  "hsc_core.report.sweep"))

    def _load_builders() -> None:
        warmup.wait()  # never two threads importing the same module
        for name in ("dashboard.snapshot_pages", "dashboard.snapshot_learn"):  # every page's builder
            importlib.import_module(name)  # (snapshot_views' too)

    app = st.App(__file__, routes=snapshot.routes(snapshot.default_store, _load_builders,
                                                  str(st.get_option("server.baseUrlPath") or "")))
else:
    from dashboard import warmup

    warmup.wait()  # a fresh server's background imports (a no-op afterwards, and without a server)
    from dashboard import (
        entry,
        navigation,
        presenter,
        progress,
        report,
        session_memory,
        sidebar,
        snapshot_learn,  # noqa: F401 - registers the Learn pages' builders (their share links)
        snapshot_pages,  # noqa: F401 - registers the other pages' builders (their share links)
        snapshot_views,
        state,
        widgets,
    )

    st.set_page_config(page_title="Hierarchical Selective Classification", page_icon="🌳", layout="wide")
    state.init_state()
    widgets.warm_plotly()  # first thing in a new session: the browser loads plotly.js while this run computes
    if state.get("presenter"):
        st.set_page_config(initial_sidebar_state="collapsed")

    # Every spinner of this run (this page's, the caches' loads, "Working on …") shows in one slot that floats
    # over the page (progress.floating_slot): one that came and went among the page's elements would move them
    # and reload a chart's frame (issue 40).
    with progress.floating_slot(st.container(key="hsc_working")):
        # The page files live in app_pages/, not pages/: Streamlit treats a folder named pages/ beside the
        # entry point as its legacy multipage app and, on a fresh server, would run a deep link such as
        # /explorer as that file alone, without this script. The url_path values are the deep links.
        # Grouped in the sidebar (dashboard.navigation.SECTIONS: Learn / Explore / Decide / Research); the
        # Overview names them all.
        SECTIONS = {section: [st.Page(f"app_pages/{p.file}", title=p.title, icon=p.icon, url_path=p.url_path,
                                      default=p.url_path == "home") for p in pages]
                    for section, pages in navigation.SECTIONS.items()}
        # The default page lives at "/"; this hidden twin makes a shared "/overview" link open it too.
        SECTIONS["Learn"].append(st.Page("app_pages/overview.py", title="Overview", icon=":material/home:",
                                         url_path="overview", visibility="hidden"))
        PAGES = [p for pages in SECTIONS.values() for p in pages]

        page = st.navigation(SECTIONS, expanded=True)  # every group visible: no "View 3 more" hiding Research
        state.set_page(page.url_path)
        sidebar.sidebar()
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
            # Any full run that takes a while (a model's first evaluation, the atlas, intervals) says so at
            # the top of the window, with the seconds counting (Streamlit shows it only after half a second).
            # It floats over the page with the run's other spinners (progress.floating_slot).
            with progress.spinner(f"Working on {page.title}…", show_time=True):
                page.run()
        finally:
            state.write_query_params()
            # Drawn after the page (also when it stops early), so the page's elements keep their places
            # in every run; its CSS puts it at the top right of the page.
            presenter.switch()
            session_memory.track_uploaded_files()  # this run's file objects: closed when the session ends
        snapshot_views.share_box(page.url_path)  # after the page: the link holds what the page settled (its sample)
