"""Benchmark of stream monitoring (``hsc_core.evaluation.monitor``, ``hsc monitor``) on the shipped
logits: throughput and peak memory of ``hsc monitor --simulate`` (1,000 classes) at two stream
lengths (memory must not grow with the length), the alarm's detection delay per shipped shift,
θ fixed vs ACI vs recalibration on every shift, and MAPIE's ``RiskMonitoring`` update cost.

    .venv/bin/python bench/monitor_bench.py [--samples 1000000] [--target-accuracy 0.85] [--seeds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hsc_core.core.confseq import bernstein_bounds  # noqa: E402
from hsc_core.datasets.logits_io import load_logits  # noqa: E402
from hsc_core.evaluation.card import card_json, decision_card  # noqa: E402
from hsc_core.evaluation.model import ModelEvaluation  # noqa: E402
from hsc_core.evaluation.monitor import (  # noqa: E402
    Deployment,
    detection_delays,
    held_out_rows,
    monitor_stream,
    policy_table,
    shift_names,
    simulate_chunks,
)
from hsc_core.evaluation.resolve import resolve_hierarchy  # noqa: E402

MODEL = "efficientnet_lite0"


def _cli(card: Path, n: int, out: Path) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and the verdict of one ``hsc monitor --simulate`` run
    (CPU time too: on a shared machine the wall time counts the other users' load)."""
    cmd = [sys.executable, "-c", "import resource, sys; from hsc_core.cli import main; rc = main(); "
           "u = resource.getrusage(resource.RUSAGE_SELF); "
           "print(u.ru_utime + u.ru_stime, u.ru_maxrss, file=sys.stderr); sys.exit(rc)",
           "monitor", "--card", str(card), "--simulate", f"clean:{n // 2},gaussian_noise-5:{n - n // 2}",
           "--labels-every", "10", "--out", str(out)]
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(done.stderr)
    cpu, rss_kb = done.stderr.strip().splitlines()[-1].split()
    return wall, float(cpu), int(rss_kb) / 1024, done.stdout.splitlines()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--target-accuracy", type=float, default=0.85)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    path = ROOT / "cached_logits" / f"{MODEL}.npz"
    bundle = load_logits(path)
    ds, h = resolve_hierarchy(bundle, str(path))
    ev = ModelEvaluation.from_bundle(bundle, h, dataset=ds, file=str(path))
    card = decision_card(ev, target_accuracy=args.target_accuracy, delta=0.1, method="theorem1_pac", reps=0,
                         n_resamples=10)
    dep = Deployment.from_card(card)
    rows = held_out_rows(ev, card)
    print(f"card: θ = {card['theta']:.4f} for accuracy ≥ {args.target_accuracy} (theorem1_pac, n_cal {card['n_cal']}), "
          f"δ = {dep.delta}; streams drawn from the {rows.size} held-out images")

    with tempfile.TemporaryDirectory() as tmp:
        card_path = Path(tmp) / "card.json"
        card_path.write_text(card_json(card), encoding="utf-8")
        if not args.skip_speed:
            print("\n## hsc monitor --simulate (1,000 classes, labels every 10th, CSV written)")
            for n in (args.samples // 5, args.samples):
                wall, cpu, rss, verdict = _cli(card_path, n, Path(tmp) / "m.csv")
                print(f"{n:>9,} samples: wall {wall:6.1f} s ({n / wall * 60 / 1e6:5.2f} M/min), CPU {cpu:6.1f} s "
                      f"({n / cpu * 60 / 1e6:5.2f} M/min), peak RSS {rss:6.0f} MB  | {verdict}")

    print(f"\n## detection delay per shipped shift (clean:2000 then the shift:3000, θ fixed; mean of {args.seeds} "
          "seeds; 'since deployment' = the first t the confidence sequence's upper bound < target)")
    out = []
    for s in shift_names(MODEL):
        for seed in range(args.seeds):
            res = monitor_stream(h, simulate_chunks([("clean", 2000), (s, 3000)], model=MODEL, rows=rows, seed=seed),
                                 dep)
            d = detection_delays(res.frame).set_index("segment")
            f = res.frame
            cs = f.loc[f["accuracy_upper"] < dep.target, "t"]
            out.append({"shift": s, "seed": seed, "clean acc": d.loc["clean", "accuracy"],
                        "shift acc": d.loc[s, "accuracy"], "alarm delay": d.loc[s, "delay"],
                        "since deployment": (int(cs.iloc[0]) - 2001) if len(cs) else np.nan})
    t = pd.DataFrame(out).groupby("shift", sort=False).agg(
        {"clean acc": "mean", "shift acc": "mean", "alarm delay": ["mean", "count"],
         "since deployment": ["mean", "count"]})
    t.columns = ["clean acc", "shift acc", "alarm delay", "rang", "CS delay", "CS rang"]
    print(t.round(3).to_string())

    print("\n## θ policies on every shift (clean:1000 then the shift:4000, all labelled; ACI γ = 0.005, "
          "recalibration on the last 500 every 100)")
    tabs = []
    for s in shift_names(MODEL):
        tab = policy_table(h, lambda s=s: simulate_chunks([("clean", 1000), (s, 4000)], model=MODEL, rows=rows), dep)
        tabs.append(tab.assign(shift=s))
    full = pd.concat(tabs)
    print(full.pivot(index="shift", columns="policy", values="miscoverage").round(4)
          .join(full.set_index(["shift", "policy"])["bound"].unstack()["aci"].rename("ACI bound").round(4))
          .join(full.pivot(index="shift", columns="policy", values="coverage").round(3).add_suffix(" cov"))
          .to_string())
    print(f"(target miscoverage {1 - args.target_accuracy:.2f}; 'cov' = mean hierarchical coverage)")

    print("\n## vs MAPIE RiskMonitoring: 5,000 binary outcomes in 50 updates")
    try:
        from mapie.exchangeability_testing import RiskMonitoring
    except ImportError:
        print("mapie not installed")
        return
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 5000)
    pred = np.where(rng.random(5000) < 0.15, 1 - y, y)
    mon = RiskMonitoring(risk="accuracy", threshold=0.1, test_level=0.2, warn=False)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for a in range(0, 5000, 100):
            mon.update(y[a:a + 100], pred[a:a + 100])
    t_mapie = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = bernstein_bounds((pred == y).astype(float), 0.1)
    t_ours = time.perf_counter() - t0
    lb = mon.online_risk_lower_bound_sequence_history
    print(f"MAPIE {t_mapie:.2f} s (recomputes the history), ours {t_ours * 1000:.1f} ms; first t with the error's "
          f"lower bound > 0.1: MAPIE {int(np.argmax(lb > 0.1)) + 1 if (lb > 0.1).any() else 'never'}, ours "
          f"{int(np.argmax(1 - b.upper > 0.1)) + 1 if (1 - b.upper > 0.1).any() else 'never'}")
    print(f"peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
