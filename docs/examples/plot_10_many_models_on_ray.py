"""
Many models on Ray
==================

``hsc evaluate --ray local`` (or ``--ray auto`` on a cluster) runs one Ray task per logits file; without Ray it uses
local processes, with identical numbers. Here the three shipped models, two rules, on a private local Ray with
two CPUs; if Ray cannot start on this machine the example falls back to one local process.
"""

import pandas as pd
import plotly.express as px

from hsc_core.config import cached_logits_dir
from hsc_core.pipeline.many_models import evaluate_many

files = sorted(cached_logits_dir().glob("efficientnet_lite*.npz"))
try:
    rows, errors, _ = evaluate_many(files, ray_address="local", workers=2, rules=("selective", "climbing"))
    where = "Ray (local, 2 CPUs)"
except Exception as exc:  # noqa: BLE001 - no Ray here (or it failed to start): the same numbers locally
    print(f"Ray unavailable ({exc}); evaluating locally")
    rows, errors, _ = evaluate_many(files, workers=1, rules=("selective", "climbing"))
    where = "one local process"
assert not errors, errors
table = pd.DataFrame(rows)
gains = table[(table.metric == "gain_percent") & (table.loss == "01")]
print(f"{len(files)} models on {where}")
print(gains[["model", "rule", "ts", "value"]].to_string(index=False))

# %%
fig = px.bar(gains.assign(setting=gains.ts.map({True: "with TS", False: "without TS"})), x="model", y="value",
             color="setting", barmode="group", labels={"value": "Climbing's gain over Selective (%)"},
             title=f"Climbing's gain per model ({where})")
fig.show()
