"""How long does one θ-slider move take on the server at 50,000 samples?

Builds 50,000 × 1,000 synthetic logits on the ImageNet tree (``HSC_SYNTHETIC``, the same path the
app uses with that variable set), warms the model's ``ModelEvaluation`` exactly as the app does
(``evaluations.model_context``: the four rules' decision paths; ``evaluations.curve_set``: the exact
RC curves), then times the work a θ change triggers in the slider fragments:

* Risk–Coverage fragment: the four operating points (``RCCurve.at``), the RC figure with moving
  markers, and its serialisation as ``st.plotly_chart`` does it (validate + to_json).
* Explorer fragment: the sample's chosen node per rule, the path figure (+ serialisation), the
  choice text and table (+ its CSV download payload).

Usage::

    python bench/dashboard_bench.py [--samples 50000] [--moves 200] [--apptest]

``--apptest`` also times a whole Risk–Coverage page rerun through ``streamlit.testing`` (an
upper bound: a fragment rerun does strictly less).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _quiet_streamlit() -> None:
    # Outside `streamlit run` every cached call warns about a missing ScriptRunContext.
    names = ["streamlit"] + [n for n in logging.root.manager.loggerDict if n.startswith("streamlit.")]
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)


def serialise(fig) -> str:
    """What st.plotly_chart does with a figure on the server."""
    import plotly.io
    import plotly.tools

    figure = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
    return plotly.io.to_json(figure, validate=False)


def stats(ms: list[float]) -> str:
    a = np.asarray(ms)
    return f"median {np.median(a):7.2f} ms   p95 {np.percentile(a, 95):7.2f} ms   max {a.max():7.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--moves", type=int, default=200, help="number of θ changes to time")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--apptest", action="store_true", help="also time full page reruns with AppTest")
    args = ap.parse_args()

    os.environ["HSC_SYNTHETIC"] = str(args.samples)
    _quiet_streamlit()
    import streamlit  # noqa: F401  (configures logging; silence it again afterwards)

    _quiet_streamlit()
    from dashboard import catalog, evaluations, plots, views
    from hsc_core.core.rules import RULES
    from hsc_core.report.tree_figure import record_rows, tree_figure

    _quiet_streamlit()  # loggers created by the imports above

    name, location = next(iter(catalog.model_catalog().items()))
    print(f"model {name}: {args.samples:,} samples × 1,000 classes (synthetic, ImageNet tree)")
    t0 = time.perf_counter()
    bundle = catalog.load_bundle(location)
    t1 = time.perf_counter()
    es = evaluations.model_context(name, location)
    t2 = time.perf_counter()
    cs = evaluations.curve_set(es, "01", None)
    t3 = time.perf_counter()
    print(f"warm-up (once per model/setting, kept by its ModelEvaluation): logits {t1 - t0:.1f} s, decision "
          f"paths {t2 - t1:.1f} s, exact RC curves {t3 - t2:.1f} s "
          f"({sum(c.coverage.size for c in cs.curves.values()):,} curve points)")
    h = es.view.hierarchy
    i = int(es.view.most_confident_wrong[0]) if es.view.most_confident_wrong.size else 0
    true_leaf = int(es.view.labels[i])
    del bundle

    rng = np.random.default_rng(args.seed)
    thetas = np.round(rng.uniform(0, 1, args.moves), 2)
    # The Explorer's tree (101 θ frames) is built once per sample and cached; a θ move re-sends it.
    a = time.perf_counter()
    tree = tree_figure(h, es.view.node_row(i), record_rows(es.view.paths, i), true_leaf, 0.5)
    print(f"Explorer tree with its θ frames, built once per sample: {1000 * (time.perf_counter() - a):.0f} ms, "
          f"{len(serialise(tree)) / 1e3:.0f} kB of JSON")
    # One untimed pass so imports and plotly's validators are loaded.
    for theta in thetas[:3]:
        serialise(plots.rc_figure(cs, views.operating_points(cs, theta), RULES))
        views.sample_view(h, es.view.node_row(i), es.view.paths, i, theta, true_leaf)

    rc_ms, ex_ms, total_ms = [], [], []
    for theta in thetas:
        a = time.perf_counter()
        points = views.operating_points(cs, theta, RULES)
        views.operating_point_text(points)
        serialise(plots.rc_figure(cs, points, RULES, "01"))
        points.drop(columns="key").to_csv(index=False)
        b = time.perf_counter()
        view = views.sample_view(h, es.view.node_row(i), es.view.paths, i, theta, true_leaf=true_leaf)
        views.choice_text(h, view)
        serialise(tree)
        views.choice_table(h, view).to_csv(index=False)
        c = time.perf_counter()
        rc_ms.append(1000 * (b - a))
        ex_ms.append(1000 * (c - b))
        total_ms.append(1000 * (c - a))
        # The numbers the page shows are the curve's own operating points.
        for rule, row in zip(RULES, points.itertuples(), strict=True):
            assert (row.coverage, row.risk) == cs.exact[rule].at(theta)

    print(f"\nper θ move over {args.moves} moves (server side, warm caches):")
    print(f"  Risk–Coverage fragment (4 operating points + RC figure): {stats(rc_ms)}")
    print(f"  Explorer fragment (chosen nodes + cached tree re-sent):   {stats(ex_ms)}")
    print(f"  both together:                                            {stats(total_ms)}")

    # Guaranteed accuracy: what its fragment recomputes when 1 − α, 1 − δ or n moves (the
    # per-sample tight thresholds are cached once per model).
    es.view.guarantee_data()  # built once per model, as the page caches it
    n_max = int(es.view.n * 0.9)
    ga_ms = []
    for k in range(min(args.moves, 100)):
        target = float(rng.uniform(0.8, 0.99))
        n_cal = int(rng.integers(1000, n_max))
        a = time.perf_counter()
        es.view.threshold(target, "theorem1", delta=0.1, n=n_cal, seed=k)
        ga_ms.append(1000 * (time.perf_counter() - a))
    print(f"  Guaranteed-accuracy fragment (θ̂, ε, test accuracy/coverage): {stats(ga_ms)}")
    budget = 200.0
    worst = max(np.percentile(total_ms, 95), np.percentile(ga_ms, 95))
    verdict = "OK" if worst < budget else "OVER BUDGET"
    print(f"  budget {budget:.0f} ms per slider move: {verdict}")

    if args.apptest:
        from streamlit.testing.v1 import AppTest

        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
        print()
        for page, slider, title in [("risk_coverage", "_w.rc.theta", "Risk–Coverage"),
                                    ("explorer", "_w.ex.theta", "Explorer")]:
            at.switch_page(f"app_pages/{page}.py").run()
            ms = []
            for theta in thetas[:10]:
                a = time.perf_counter()
                at.slider(key=slider).set_value(float(theta)).run()
                ms.append(1000 * (time.perf_counter() - a))
                assert not at.exception, at.exception
            print(f"whole {title} page rerun via AppTest (upper bound, 10 moves): {stats(ms)}")


if __name__ == "__main__":
    main()
