"""The Monitor page's helpers: the deployed θ of the current model, the stream (the shipped clean
images then one shift, or the model's own file in its order: an upload too), the monitor's run
(``hsc_core.evaluation.monitor``, the same code as ``hsc monitor``), its figure and its sentence."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from hsc_core.datasets.logits_io import LogitsBundle
from hsc_core.evaluation.monitor import (
    QUANTITY_LABELS,
    Deployment,
    MonitorResult,
    formula_safe_frame,
    monitor_stream,
    simulate_chunks,
)
from hsc_core.evaluation.results import hierarchy_hash

from .catalog import shift_label
from .evaluations import ModelContext

#: The stream kinds the page offers: the model's file in its order (any model, uploads too), and a
#: stream file uploaded on the page itself (its samples in arrival order, this model's classes).
IN_ORDER = "in_order"
UPLOADED = "uploaded"
_RUNS: dict[tuple, MonitorResult] = {}
_MAX_RUNS = 8


def deployment(es: ModelContext, target: float, delta: float) -> tuple[Deployment, np.ndarray]:
    """The θ ``hsc card --method theorem1_pac`` ships for ``target`` with confidence 1 − ``delta`` (its
    default split) as a deployment of this model and tree, and the rows of the images it did not
    calibrate on (the stream draws from those)."""
    fit = es.view.threshold(target, "theorem1_pac", delta=delta)
    dep = Deployment(float(fit.theta), float(target), Deployment.from_theta(0.5, target).promises, float(delta),
                     temperature=float(es.view.temperature), model=es.model,
                     hierarchy_hash=hierarchy_hash(es.view.hierarchy))
    return dep, es.view.rows[fit.test_positions]


def run(es: ModelContext, target: float, delta: float, stream: str, n: int, labels_every: int, adapt: str,
        seed: int = 0, upload: LogitsBundle | None = None, session_runs: dict | None = None) -> MonitorResult:
    """The monitor over the page's stream (kept for the last few settings: ▶ Play re-reads it). With
    ``stream == UPLOADED``, ``upload`` is the stream and its runs are kept in ``session_runs`` (the
    session's own dict), never in this module's cache, which every session shares."""
    uploaded = stream == UPLOADED
    runs = (session_runs if session_runs is not None else {}) if uploaded else _RUNS
    key = (es.key, round(target, 6), round(delta, 6), stream, n, labels_every, adapt, seed, id(upload))
    if key in runs:
        return runs[key]
    dep, rows = deployment(es, target, delta)
    h = es.view.hierarchy
    if uploaded:
        chunks: Any = [uploaded_chunk(upload, es, dep, n, labels_every)]
    elif stream == IN_ORDER:
        ev = es.view.evaluation
        idx = es.view.rows[: int(n)]
        chunks = [{"scores": ev.logits[idx], "ids": np.arange(1, idx.size + 1),
                   "segment": np.full(idx.size, "file"),
                   "labels": np.where(np.arange(1, idx.size + 1) % labels_every == 0, ev.labels[idx], -1)}]
    else:
        chunks = simulate_chunks([("clean", int(n)), (stream, int(n))], model=es.model, rows=rows,
                                 labels_every=labels_every, seed=seed)
    res = monitor_stream(h, chunks, dep, adapt=adapt)
    if len(runs) >= _MAX_RUNS:
        runs.pop(next(iter(runs)))
    runs[key] = res
    return res


def uploaded_chunk(upload: LogitsBundle | None, es: ModelContext, dep: Deployment, n: int,
                   labels_every: int) -> dict[str, Any]:
    """The first ``n`` samples of an uploaded stream as one chunk for ``monitor_stream``, after one-line
    checks: a stream is there, it has this model's classes, and its manifest (when it names a model)
    names this one."""
    if upload is None:
        raise ValueError("upload a stream file (.npz in arrival order) first")
    h = es.view.hierarchy
    if upload.n_classes != h.n_leaves:
        raise ValueError(f"the stream {upload.name}.npz has {upload.n_classes:,} classes; {es.model} has "
                         f"{h.n_leaves:,}")
    manifest = upload.manifest or {}
    dep.check_stream(h, str(manifest.get("variant_of") or manifest.get("model") or ""))
    idx = np.arange(min(int(n), upload.n_samples))
    return {"scores": upload.logits[idx], "ids": None, "segment": np.full(idx.size, "upload"),
            "labels": np.where((idx + 1) % labels_every == 0, upload.labels[idx], -1),
            "image": upload.sample_ids[idx]}


def csv_text(res: MonitorResult) -> str:
    """The run's rows as CSV, its text columns (a stream's sample ids) formula-safe."""
    return formula_safe_frame(res.frame).to_csv(index=False)


#: How many times t a played stream stops at (frames of the swept figure, first and last sample included).
PLAY_STEPS = 101
#: At most this many points of each curve are drawn (the CSV has every sample).
DRAWN_POINTS = 400


def play_times(res: MonitorResult) -> list[int]:
    """The times t (1 … n) the swept figure has a frame for, in order."""
    n = len(res.frame)
    return sorted({int(v) for v in np.linspace(1, n, min(n, PLAY_STEPS)).round()})


def figure(res: MonitorResult, t: int, font_size: int = 14) -> go.Figure:
    """Accuracy over the stream up to sample ``t``: the running estimate and its anytime-valid band since
    deployment, the alarm's window bound, the promise, θ_t (right axis), the shifts, a "now" line and the alarm
    once rung; one frame per time of ``play_times`` (named by t), so the stream plays in the browser."""
    frame = res.frame
    n = len(frame)
    keep = np.unique(np.linspace(0, n - 1, min(n, DRAWN_POINTS)).round().astype(int))
    # Arrays, not lists: Plotly sends them as typed binary (float32: 7 digits, the sentence shows 3).
    x = frame["t"].to_numpy()[keep].astype(np.int32)
    cols = {c: frame[c].to_numpy()[keep].astype(np.float32) for c in ("accuracy_upper", "accuracy_lower", "accuracy",
                                                                      "accuracy_recent_upper", "theta")}
    target = res.deployment.target
    low = max(0.0, target - 0.35)
    alarm = res.first_alarm

    def upto(tt: int, full: bool = False) -> list[dict]:
        m = int(np.searchsorted(x, tt, side="right"))
        # Each curve holds every x and the y up to t: Plotly draws as many points as the shorter has, so a
        # frame sends the y alone (half the bytes the browser parses before it can draw).
        cut = [{"x": x, "y": cols[c][:m]} if full else {"y": cols[c][:m]}
               for c in ("accuracy_upper", "accuracy_lower", "accuracy", "accuracy_recent_upper", "theta")]
        rung = alarm is not None and alarm <= tt
        # Before the alarm its line is two gaps, not empty arrays: Plotly's animation skips an empty array in a
        # frame, so ▶ Play from the start kept the end's alarm line on screen.
        return [*cut, {"x": [tt, tt], "y": [low, 1.0]},
                {"x": [alarm, alarm] if rung else [None, None], "y": [low, 1.0] if rung else [None, None]}]

    start = upto(int(t), full=True)
    fig = go.Figure([
        go.Scatter(start[0], line={"width": 0}, showlegend=False, hoverinfo="skip"),
        go.Scatter(start[1], fill="tonexty", line={"width": 0}, fillcolor="rgba(31,119,180,0.2)",
                   name="band since deployment (anytime-valid)"),
        go.Scatter(start[2], line={"color": "#1f77b4"}, name="accuracy since deployment"),
        go.Scatter(start[3], line={"color": "#d62728", "dash": "dot"}, name="upper bound of the alarm's window"),
        go.Scatter(start[4], line={"color": "#2ca02c"}, name="θ_t", yaxis="y2"),
        go.Scatter(start[5], mode="lines", line={"color": "#808495", "width": 1}, name="now", showlegend=False,
                   hoverinfo="skip"),
        go.Scatter(start[6], mode="lines", line={"color": "#d62728", "width": 3}, name="alarm"),
    ])
    fig.add_hline(y=target, line={"color": "black", "dash": "dash"}, annotation_text=f"promised {target:.3g}")
    seg = frame["segment"].astype(str).to_numpy()
    for s in np.flatnonzero(seg[1:] != seg[:-1]) + 1:
        fig.add_vline(x=int(frame["t"][s]), line={"color": "gray"},
                      annotation_text=shift_label(seg[s]), annotation_position="top left")
    fig.update_layout(xaxis={"title": "sample t", "range": [1, n]},
                      yaxis={"title": QUANTITY_LABELS["accuracy"], "range": [low, 1.0]},
                      yaxis2={"title": "θ_t", "overlaying": "y", "side": "right", "range": [0, 1.05]},
                      legend={"orientation": "h", "y": -0.25}, font={"size": font_size}, height=480,
                      margin={"t": 30})
    # 101 frames × 7 traces of arrays this function built: Plotly's validation of them took ~1 s of a
    # fresh server's first visit and checks nothing that can be wrong here, so it is skipped.
    fig.frames = [go.Frame(name=str(tt), traces=list(range(7)), _validate=False,
                           data=[go.Scatter(d, _validate=False) for d in upto(tt)]) for tt in play_times(res)]
    return fig


def sentences(res: MonitorResult) -> dict[str, str]:
    """The page's sentence at every time of ``play_times`` (markdown, by frame name)."""
    return {str(tt): sentence(res, tt) for tt in play_times(res)}


def sentence(res: MonitorResult, t: int) -> str:
    """One sentence computed from the run at sample ``t``."""
    f = res.frame.iloc[max(1, int(t)) - 1]
    conf = 1.0 - res.deployment.delta / len(res.deployment.promises)
    where = shift_label(str(f["segment"])) if str(f["segment"]) not in ("file", "clean") else "clean images"
    head = (f"At sample **{int(f['t']):,}** ({where}), θ = {f['theta']:.3f}: accuracy so far {f['accuracy']:.3f}, "
            f"between {f['accuracy_lower']:.3f} and {f['accuracy_upper']:.3f} with {conf:.0%} confidence each; "
            f"{f['answered_share']:.0%} of the samples answered.")
    if res.first_alarm is not None and res.first_alarm <= int(f["t"]):
        a = res.frame.iloc[res.first_alarm - 1]
        return (head + f" **Alarm since sample {res.first_alarm:,}**: accuracy ≤ {a['accuracy_recent_upper']:.3f} "
                f"since sample {int(a['accuracy_since']):,}, below the promised {res.deployment.target:.3g}.")
    return head + f" No alarm: nothing shows the promised {res.deployment.target:.3g} broken."
