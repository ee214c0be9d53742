"""What reading a per-rank table and its split study really take, beside the estimates that bound them
(``datasets.per_rank.decoded_size``, ``evaluation.per_rank.study_bytes``; issue 42).

Each case runs in a fresh process and prints the growth of its peak resident memory (``ru_maxrss``)
while reading (or studying), next to the estimate the readers check against ``HSC_MAX_DECODED_MB``;
an estimate below its measurement is a bound that lets too much through.

    .venv/bin/python bench/decoded_size.py [--rows 30000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import io, json, resource, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/tests")
from hsc_core.datasets.per_rank import read_per_rank, per_rank_from_frame, decoded_size
from hsc_core.evaluation.per_rank import rank_card, study_bytes
from per_rank_support import synthetic_per_rank_frame
case, n = sys.argv[2], int(sys.argv[3])
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if case == "study":
    scores = per_rank_from_frame(synthetic_per_rank_frame(n, seed=0))
    base = rss()
    rank_card(scores, 0.9, 0.1, reps=250)
    print(json.dumps({"measured": rss() - base, "estimate": study_bytes(n, len(scores.ranks))}))
    raise SystemExit
buf = io.BytesIO()
if case == "long labels (Parquet, dictionary)":
    value = "x" * 1000
    cols = {"sample_id": pa.array([str(i) for i in range(n)])}
    for r in ("a", "b"):
        lab = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value + r]))
        cols[f"true_{r}"], cols[f"pred_{r}"], cols[f"conf_{r}"] = lab, lab, pa.array(np.full(n, 0.5))
    pq.write_table(pa.table(cols), buf, compression="zstd")
    name, text, cells = "t.parquet", 4 * n * 1001 + sum(len(str(i)) for i in range(n)) + 48 * n, 7 * n
else:  # short cells (CSV)
    rows = "sample_id,true_a,pred_a,conf_a,true_b,pred_b,conf_b\n" + "".join(
        f"{i},a,a,0.5,a.b,a.b,0.5\n" for i in range(n))
    buf.write(rows.encode())
    name, text, cells = "t.csv", len(rows), 7 * (rows.count("\n") + 1)
data = buf.getvalue()
base = rss()
read_per_rank(data, name=name, max_decoded=10**13)
print(json.dumps({"measured": rss() - base, "estimate": decoded_size(cells, text), "file": len(data)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=30_000)
    args = ap.parse_args()
    print(f"{'case':<36} {'rows':>8} {'file kB':>8} {'measured MB':>12} {'estimate MB':>12}")
    for case, n in (("long labels (Parquet, dictionary)", args.rows), ("short cells (CSV)", 5 * args.rows),
                    ("study", args.rows)):
        out = subprocess.run([sys.executable, "-c", CHILD, str(REPO), case, str(n)], capture_output=True, text=True,
                             check=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        file_kb = f"{got['file'] / 1000:,.0f}" if "file" in got else "-"
        print(f"{case:<36} {n:>8,} {file_kb:>8} {got['measured'] / 2**20:>12,.0f} {got['estimate'] / 2**20:>12,.0f}")


if __name__ == "__main__":
    main()
