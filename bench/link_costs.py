"""What the costliest links cost one server run (issue 42, item 2): each opened straight from its link in
a fresh AppTest session (``streamlit.testing.v1``), with its wall-clock time and the process's peak
resident memory after it; every link runs in its own process, so one link's caches never help another.

* ``calibrators-all``: ``/calibrators?c_scope=all&c_ci=1&c_cals=<all 7>&c_scores=<all 7>`` on the shipped
  models (first run, then the same session's "Compute the next pairs" runs until nothing is left, or
  ``--runs``);
* ``cat-overview``, ``cat-where``, ``cat-calibrators`` (and ``cat-<page>`` for the Explorer, Risk–Coverage,
  Calibration–coverage, Guaranteed accuracy, Compare models, Hierarchy sensitivity and the story): ``/``,
  ``/where_in_tree``, ``/calibrators``, … on a 1,000-deep caterpillar model (``bench/deep_tree_pages.py``'s
  tree, ``--samples`` samples: 300 make a file of about 1 MB, the attack's size).

    .venv/bin/python bench/link_costs.py [--links calibrators-all,cat-overview,cat-where,cat-calibrators]
                                         [--samples 300] [--runs 3]

Measured on the busy 2-core development machine (AppTest; the peak resident memory of the whole process,
Streamlit and the app included; the caterpillar built in a process of its own). "Before" is the issue's
figure (the attack's machine, a browser) and, in brackets, this script's before the fix, where measured:

==========================  ==========================  ===============  ===============================
link                        before: issue 42 (here)     runs             peak RSS
==========================  ==========================  ===============  ===============================
calibrators-all             not settled after 90 s      24.0, 15.6, 9.1  543 MB (Dirichlet refused, 347
                                                                         pairs left for later runs)
cat-overview (``/``)        59 s (66 s)                 2.7 s            298 MB (intervals on request)
cat-where                   39 s (5.6 s)                2.7 s            284 MB
cat-calibrators             35 s (247 s here)           6.4 s            403 MB (depth_temperature refused)
cat-explorer                                            9.8 s            730 MB
cat-risk_coverage                                       10.6 s           280 MB
cat-calibration_coverage                                6.5 s            273 MB
cat-guaranteed_accuracy                                 11.6 s           271 MB
cat-compare_models                                      4.9 s            278 MB
cat-hierarchy_sensitivity                               7.8 s            260 MB
cat-story                                               7.2 s            267 MB
==========================  ==========================  ===============  ===============================
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALL_CALS = "none,temperature,vector,matrix,dirichlet,isotonic,depth_temperature"
ALL_SCORES = "softmax,margin,entropy,doctor,energy,member_mean,member_disagreement"
LINKS = {
    "calibrators-all": ("app_pages/calibrators.py", {"c_scope": "all", "c_ci": "1", "c_cals": ALL_CALS,
                                                      "c_scores": ALL_SCORES}, False),
    "cat-overview": ("app_pages/overview.py", {}, True),
    "cat-where": ("app_pages/where_in_tree.py", {}, True),
    "cat-calibrators": ("app_pages/calibrators.py", {}, True),
    **{f"cat-{page}": (f"app_pages/{page}.py", {}, True)
       for page in ("explorer", "risk_coverage", "calibration_coverage", "guaranteed_accuracy", "compare_models",
                    "hierarchy_sensitivity", "story")},
}


def build_caterpillar(folder: str, samples: int) -> None:
    """The caterpillar model's folders, made in a process of their own (so their memory is not the pages')."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from deep_tree_pages import build

    print(build(Path(folder), 1000, samples))


def child(name: str, runs: int, cached: str) -> None:
    sys.path.insert(0, str(ROOT))
    from streamlit.testing.v1 import AppTest

    page, query, deep = LINKS[name]
    if deep:
        os.environ["HSC_CACHED_LOGITS_DIR"] = cached
        os.environ.pop("HSC_DATASETS_DIR", None)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=3600)
    for k, v in query.items():
        at.query_params[k] = v
    times = []
    t = time.perf_counter()
    at.switch_page(page).run()
    times.append(time.perf_counter() - t)
    for _ in range(runs - 1):
        more = [b for b in at.button if b.key == "calib_more"]
        if not more:
            break
        t = time.perf_counter()
        more[0].click().run()
        times.append(time.perf_counter() - t)
    notes = [str(e.value)[:200] for e in (*at.exception, *at.error, *at.warning, *at.info)]
    print(json.dumps({"times": times, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "notes": notes}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default=",".join(LINKS))
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3, help="runs of the calibrators page (its button between them)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cached", help=argparse.SUPPRESS)
    ap.add_argument("--build", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build_caterpillar(args.build, args.samples)
        return
    if args.child:
        child(args.child, args.runs, args.cached)
        return
    base = tempfile.mkdtemp(prefix="hsc-link-")
    made = subprocess.run([sys.executable, __file__, "--build", base, "--samples", str(args.samples)],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    cached = made.stdout.strip().splitlines()[-1]
    for name in args.links.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", name, "--runs", str(args.runs), "--cached", cached],
                             capture_output=True, text=True, cwd=ROOT)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        if out.returncode or not lines:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            continue
        got = json.loads(lines[-1])
        runs = ", ".join(f"{t:.1f} s" for t in got["times"])
        print(f"{name:16s} runs {runs:30s} peak RSS {got['rss_mb']:,.0f} MB")
        for note in got["notes"]:
            print(f"    {note}")


if __name__ == "__main__":
    main()
