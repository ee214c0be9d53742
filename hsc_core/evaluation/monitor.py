"""After deployment: watch a certified θ on a live stream, alarm when its promise breaks, adapt θ.

A decision card (``evaluation.card``) certifies θ on one calibration set, for data like it. This
module watches that θ on a stream of samples in arrival order (logits or probabilities; labels
for all, some or none of them) and keeps, for each promised quantity,

* ``accuracy``           hierarchical accuracy at θ (the predicted node contains the label; labelled samples),
* ``answered_accuracy``  accuracy among the answers (labelled samples answered below the root),
* ``answered_share``     share answered (every sample; needs no label),

an anytime-valid confidence sequence of its running mean since deployment (``core.confseq``:
predictable plug-in empirical Bernstein, Waudby-Smith & Ramdas 2023), O(1) memory and work per
sample. The alarm watches each promised quantity with ``confseq.detector_update``: for every
window "since sample s" it bets against "the quantity is ≥ its level" and rings at the first sample
where some window's evidence reaches K/δ; that window's upper bound is then below the level (the
verdict's "accuracy ≤ 0.8812 since sample 3,001"). **Guarantee**: if every sample's conditional
expectation of a promised quantity meets its level (no harmful shift, i.i.d. or not), the alarm
ever rings with probability ≤ δ, however long the stream and however often one looks; δ is split
evenly between the promised quantities. A window starting at the change forgets the clean prefix,
so the delay does not grow with it (``bench/monitor_bench.py`` reports it per shipped shift).

θ itself can follow the stream (``adapt``):

* ``"fixed"``        the card's θ throughout;
* ``"aci"``          adaptive conformal inference on the hierarchical 0/1 loss (Gibbs & Candès
  2021), after each labelled sample θ ← max(0, θ + γ (err − α)), α = 1 − target. **Guarantee**
  (deterministic, any stream, shifted or adversarial): over the first T labelled samples the
  miscoverage (1/T) Σ err_t ≤ α + (1 + γ(1 − α) − θ₁) / (γ T) (``aci_bound``), since an error
  needs θ ≤ 1 (the root is always right), so θ never exceeds 1 + γ(1 − α);
* ``"recalibrate"``  every ``period`` labelled samples, θ = Algorithm 2's θ̂ (the card's
  ``theorem1`` order statistic) on the last ``window`` labelled samples.

``StreamMonitor`` is the controller (``update`` per chunk, constant memory); ``monitor_stream``
the one-call entry point; ``simulate_chunks`` plays the shipped clean and shifted sets as a
stream. ``hsc monitor``, the dashboard's Monitor page and ``bench/monitor_bench.py`` use these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .. import config
from ..core.confseq import BernsteinState, DetectorState, bernstein_update, detector_update
from ..core.hierarchy import Hierarchy
from ..core.logit_chunks import decision_paths_from_logits
from ..core.probabilities import node_probabilities
from ..core.rules import DecisionPaths, decision_paths
from ..core.thresholds import last_incorrect_values, select_threshold
from ..core.validation import clip, quote
from .guarantee_methods import METHODS
from .results import formula_safe_texts, hierarchy_hash

__all__ = [
    "ADAPT", "QUANTITIES", "QUANTITY_LABELS", "Deployment", "MonitorResult", "Promise", "StreamMonitor",
    "aci_bound", "detection_delays", "held_out_rows", "monitor_stream", "parse_simulation", "policy_table",
    "shift_names",
    "simulate_chunks",
]

Adapt = Literal["fixed", "aci", "recalibrate"]
ADAPT: tuple[str, ...] = ("fixed", "aci", "recalibrate")
QUANTITIES: tuple[str, ...] = ("accuracy", "answered_accuracy", "answered_share")
QUANTITY_LABELS: dict[str, str] = {"accuracy": "hierarchical accuracy", "answered_accuracy": "accuracy among answers",
                                   "answered_share": "share answered"}
#: Rules whose correctness is monotone in θ (correct at θ iff θ > the sample's last wrong value):
#: the ones θ can adapt on.
MONOTONE_RULES: tuple[str, ...] = ("climbing", "selective")
DEFAULT_DELTA = 0.1
DEFAULT_GAMMA = 0.005
DEFAULT_WINDOW = 500
DEFAULT_PERIOD = 100
#: The card keys (today's and issue 41's candidates) that promise the other two quantities.
_CARD_KEYS = {"answered_accuracy": ("accuracy_among_answers", "answered_accuracy", "accuracy_answered"),
              "answered_share": ("answered", "answered_share", "min_answered", "share_answered")}


@dataclass(frozen=True)
class Promise:
    """A promised quantity (a name of ``QUANTITIES``) is at least ``level``."""

    quantity: str
    level: float

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {quote(self.quantity)}; choose one of {', '.join(QUANTITIES)}")
        if not 0.0 < float(self.level) < 1.0:
            raise ValueError(f"the promised {QUANTITY_LABELS[self.quantity]} must lie in (0, 1), got {self.level}")


@dataclass(frozen=True)
class Deployment:
    """What is deployed: θ for a rule, the promises it carries, and whose model and tree they are for.

    theta : the deployed θ in [0, 1]; rule : the rule it thresholds (``"climbing"`` for cards).
    target : the promised accuracy 1 − α (ACI tracks it); promises : what the alarm watches.
    delta : the alarm's error probability (split evenly between the promises).
    temperature : the softmax temperature applied to streamed logits (the card's T).
    model, hierarchy_hash : the card's identity ("" = not checked).
    """

    theta: float
    target: float
    promises: tuple[Promise, ...]
    delta: float = DEFAULT_DELTA
    rule: str = "climbing"
    temperature: float = 1.0
    model: str = ""
    hierarchy_hash: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.theta) <= 1.0:
            raise ValueError(f"θ must lie in [0, 1], got {self.theta}")
        if not 0.0 < float(self.target) < 1.0:
            raise ValueError(f"the target accuracy must lie in (0, 1), got {self.target}")
        if not 0.0 < float(self.delta) < 1.0:
            raise ValueError(f"δ must lie in (0, 1), got {self.delta}")
        if not self.temperature > 0:
            raise ValueError(f"the temperature must be positive, got {self.temperature}")

    @classmethod
    def from_theta(cls, theta: float, target: float, *, delta: float = DEFAULT_DELTA, rule: str = "climbing",
                   temperature: float = 1.0, min_answered: float | None = None,
                   min_answered_accuracy: float | None = None) -> Deployment:
        """θ and a rule, promising accuracy ≥ ``target`` (and optionally the other two quantities)."""
        promises = [Promise("accuracy", target)]
        if min_answered_accuracy is not None:
            promises.append(Promise("answered_accuracy", min_answered_accuracy))
        if min_answered is not None:
            promises.append(Promise("answered_share", min_answered))
        return cls(float(theta), float(target), tuple(promises), float(delta), rule, float(temperature))

    @classmethod
    def from_card(cls, card: Mapping[str, Any], *, delta: float | None = None, min_answered: float | None = None,
                  min_answered_accuracy: float | None = None) -> Deployment:
        """A decision card's θ and promises, read by the keys that exist (one-line errors).

        δ: ``delta`` if given, else the card's δ, else ``DEFAULT_DELTA``. A card that promises
        accuracy among answers or a share answered (``guaranteed``) adds those promises.
        """
        if not isinstance(card, Mapping):
            raise ValueError("not a decision card: expected a JSON object")
        fmt = str(card.get("format", ""))
        if not fmt.startswith("hsc-decision-card/"):
            raise ValueError(f"not a decision card (format {quote(clip(fmt, 40) or 'missing')}, "
                             "expected hsc-decision-card/…)")
        for key in ("theta", "target_accuracy"):
            if not isinstance(card.get(key), (int, float)) or isinstance(card.get(key), bool):
                raise ValueError(f"the decision card has no numeric {key!r}")
        method = str(card.get("method", "theorem1"))
        info = METHODS.get(method)
        if info is None or info.family != "climbing":
            raise ValueError(f"the card deploys {quote(clip(method, 40))}, which thresholds no Climbing θ; "
                             "monitoring reads Climbing cards")
        if card.get("thetas_by_group"):
            raise ValueError(f"the card deploys one θ per superclass ({quote(method)}); monitoring reads one θ")
        g = card.get("guaranteed")
        guaranteed: Mapping[str, Any] = g if isinstance(g, Mapping) else {}
        target = float(card["target_accuracy"])
        extra: dict[str, float | None] = {"answered_accuracy": min_answered_accuracy, "answered_share": min_answered}
        for quantity, keys in _CARD_KEYS.items():
            if extra[quantity] is None:
                found = [float(guaranteed[k]) for k in keys if isinstance(guaranteed.get(k), (int, float))
                         and not isinstance(guaranteed.get(k), bool)]
                extra[quantity] = found[0] if found else None
        promises = [Promise("accuracy", target)]
        promises += [Promise(q, v) for q, v in extra.items() if v is not None]
        d = delta if delta is not None else card.get("delta")
        d = float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else DEFAULT_DELTA
        temp = card.get("temperature", 1.0)
        temperature = float(temp) if card.get("ts", True) and isinstance(temp, (int, float)) else 1.0
        return cls(float(card["theta"]), target, tuple(promises), d, "climbing", temperature,
                   str(card.get("model", "")), str(card.get("hierarchy_hash", "")))

    def check_stream(self, hierarchy: Hierarchy, model: str = "") -> None:
        """One line when the stream's tree or model is not the card's."""
        if self.hierarchy_hash and self.hierarchy_hash != hierarchy_hash(hierarchy):
            raise ValueError(f"the card is for another hierarchy (tree hash {clip(self.hierarchy_hash, 20)}, the "
                             f"stream's is {hierarchy_hash(hierarchy)})")
        if self.model and model and self.model != model:
            raise ValueError(f"the card is for model {quote(clip(self.model, 60))}, the stream comes from "
                             f"{quote(clip(model, 60))}")

    @property
    def alpha(self) -> float:
        return 1.0 - self.target


def aci_bound(n_labelled: int | np.ndarray, alpha: float, gamma: float, theta0: float) -> np.ndarray:
    """ACI's long-run guarantee: miscoverage over the first T labelled samples is at most this.

    α + (1 + γ(1 − α) − θ₁) / (γ T), for any stream (θ never exceeds 1 + γ(1 − α), and clipping θ
    at 0 only lowers the errors). Shape of ``n_labelled``; +inf where T = 0.

    >>> round(float(aci_bound(1000, 0.1, 0.01, 0.5)), 4)
    0.1509
    """
    t = np.asarray(n_labelled, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, alpha + (1.0 + gamma * (1.0 - alpha) - theta0) / (gamma * np.maximum(t, 1)), np.inf)


def _aci(c: list[float], theta: float, alpha: float, gamma: float) -> list[float]:
    """θ after each labelled sample (c: the samples' last wrong values, −inf = always right)."""
    out = []
    up, down = gamma * (1.0 - alpha), gamma * alpha
    for cj in c:
        if cj < theta:  # right at θ
            theta -= down
            if theta < 0.0:
                theta = 0.0
        else:
            theta += up
        out.append(theta)
    return out


class StreamMonitor:
    """The stream controller: one deployed θ, its confidence sequences, its alarm, its θ policy.

    Parameters
    ----------
    hierarchy : the class tree (the stream's columns are its leaves in order).
    deployment : ``Deployment`` (``Deployment.from_card`` or ``.from_theta``).
    adapt : ``"fixed"``, ``"aci"`` or ``"recalibrate"`` (module docstring).
    gamma : ACI's step γ > 0.
    window, period : recalibration on the last ``window`` labelled samples every ``period`` of them.
    inputs : ``"logits"`` (softmax with the deployment's temperature) or ``"probabilities"`` (rows
        of leaf probabilities, used as given).

    ``update`` takes one chunk and returns its rows; the state between chunks is a few numbers
    (and the recalibration window), so memory does not grow with the stream.

    Examples
    --------
    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> z, y = synthetic_logits(h, 2000, seed=0)
    >>> mon = StreamMonitor(h, Deployment.from_theta(0.7, 0.8))
    >>> rows = mon.update(z, y)
    >>> len(rows["t"]), mon.first_alarm
    (2000, None)
    """

    def __init__(self, hierarchy: Hierarchy, deployment: Deployment, *, adapt: str = "fixed",
                 gamma: float = DEFAULT_GAMMA, window: int = DEFAULT_WINDOW, period: int = DEFAULT_PERIOD,
                 inputs: Literal["logits", "probabilities"] = "logits") -> None:
        if adapt not in ADAPT:
            raise ValueError(f"unknown θ policy {quote(adapt)}; choose one of {', '.join(ADAPT)}")
        if adapt != "fixed" and deployment.rule not in MONOTONE_RULES:
            raise ValueError(f"θ adapts only for rules whose correctness is monotone in θ "
                             f"({', '.join(MONOTONE_RULES)}), not {quote(deployment.rule)}")
        if not gamma > 0:
            raise ValueError(f"γ must be positive, got {gamma}")
        if window < 1 or period < 1:
            raise ValueError(f"window and period must be at least 1, got {window} and {period}")
        if inputs not in ("logits", "probabilities"):
            raise ValueError(f"inputs must be 'logits' or 'probabilities', got {quote(str(inputs))}")
        self.hierarchy, self.deployment, self.adapt, self.inputs = hierarchy, deployment, adapt, inputs
        self.gamma, self.window, self.period = float(gamma), int(window), int(period)
        # θ as compared with float32 record values (the card's θ, as ``rules.below_theta`` rounds it)
        self.theta = float(np.float32(deployment.theta))
        self.theta0 = self.theta
        self.delta_each = deployment.delta / len(deployment.promises)
        self._bounds = {q: BernsteinState.empty() for q in QUANTITIES}
        self._detectors = {p.quantity: DetectorState.empty() for p in deployment.promises}
        self._recent = np.empty(0)  # recalibration window: last wrong values of the last labelled samples
        self.t = 0  # samples seen
        self.n_labelled = 0
        self.n_errors = 0
        self._last_id: Any = None
        self._ids_seen: set[str] = set()
        self.first_alarm: int | None = None
        self.alarm_quantity: str | None = None
        self.alarm_bound: float | None = None
        self.alarm_since: int | None = None
        self._alarm_j = 0
        self.last: dict[str, float] = {}

    # ------------------------------------------------------------------ input
    def _paths(self, scores: np.ndarray) -> DecisionPaths:
        h, rule = self.hierarchy, self.deployment.rule
        s = np.asarray(scores)
        if s.ndim != 2 or s.shape[1] != h.n_leaves:
            raise ValueError(f"a chunk of the stream must have shape (n, {h.n_leaves}) (the tree's leaves), "
                             f"got {s.shape}")
        if not np.issubdtype(s.dtype, np.floating) or not np.isfinite(s).all():
            raise ValueError("the stream's scores must be finite floats")
        if self.inputs == "logits":
            return decision_paths_from_logits(h, s, self.deployment.temperature, rules=(rule,))[rule]
        if (s < 0).any() or not np.allclose(s.sum(axis=1), 1.0, atol=1e-3):
            raise ValueError("probabilities must be non-negative and sum to 1 per sample")
        return decision_paths(h, node_probabilities(h, s), rule)  # type: ignore[arg-type]

    def _labels(self, labels: np.ndarray | None, n: int) -> np.ndarray:
        if labels is None:
            return np.full(n, -1, dtype=np.int64)
        y = np.asarray(labels)
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"labels must be {n} integers (−1 = no label yet), got shape {y.shape} {y.dtype}")
        bad = np.flatnonzero((y < -1) | (y >= self.hierarchy.n_leaves))
        if bad.size:
            raise ValueError(f"label {int(y[bad[0]])} of sample {self.t + int(bad[0]) + 1} is outside the tree "
                             f"(leaves 0–{self.hierarchy.n_leaves - 1}; −1 = no label)")
        return y.astype(np.int64)

    def _check_ids(self, ids: Sequence[Any] | np.ndarray | None, n: int) -> None:
        if ids is None:
            return
        arr = np.asarray(ids)
        if arr.shape != (n,):
            raise ValueError(f"sample ids must be {n} values, got shape {arr.shape}")
        if np.issubdtype(arr.dtype, np.number):  # arrival stamps: strictly increasing (constant memory)
            prev = np.concatenate([[self._last_id], arr]) if self._last_id is not None else arr
            step = np.diff(prev.astype(float))
            if (step <= 0).any():
                j = int(np.flatnonzero(step <= 0)[0])
                what = "duplicated" if step[j] == 0 else "out of order"
                raise ValueError(f"sample id {prev[j + 1].item()!r} is {what} (after {prev[j].item()!r}): "
                                 "the stream's ids must increase in arrival order")
            self._last_id = arr[-1] if n else self._last_id
            return
        text = [str(v) for v in arr.tolist()]  # names: no repeats (remembered: memory grows with the ids)
        for v in text:
            if v in self._ids_seen:
                raise ValueError(f"sample id {quote(clip(v, 60))} is duplicated in the stream")
            self._ids_seen.add(v)

    # ------------------------------------------------------------------ θ policy
    def _thetas(self, c: np.ndarray, labelled: np.ndarray) -> np.ndarray:
        """θ_t for each sample of the chunk (predictable: from earlier labels only)."""
        n = labelled.size
        if self.adapt == "fixed":
            return np.full(n, self.theta)
        lab_c = c[labelled]
        if self.adapt == "aci":
            after = _aci(lab_c.tolist(), self.theta, self.deployment.alpha, self.gamma)
        else:  # recalibrate on the last `window` labelled samples every `period` of them
            after = []
            theta = self.theta
            for j in range(lab_c.size):
                done = self.n_labelled + j + 1
                if done % self.period == 0:
                    hist = np.concatenate([self._recent, lab_c[: j + 1]])[-self.window:]
                    theta = float(np.clip(select_threshold(hist, self.deployment.alpha), 0.0, 1.0))
                after.append(theta)
            self._recent = np.concatenate([self._recent, lab_c])[-self.window:]
        seq = np.concatenate([[self.theta], np.asarray(after, dtype=float)])
        before = np.cumsum(labelled) - labelled  # labelled samples before each one in the chunk
        self.theta = float(seq[-1])
        return seq[before]

    # ------------------------------------------------------------------ one chunk
    def update(self, scores: np.ndarray, labels: np.ndarray | None = None, *,
               ids: Sequence[Any] | np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Feed one chunk (arrival order) and return its tidy rows.

        Parameters
        ----------
        scores : (n, n_leaves) logits or leaf probabilities (``inputs``).
        labels : (n,) true leaves, −1 where no label (has) arrived; None: no labels.
        ids : (n,) optional sample ids: numbers must increase strictly across the stream (arrival
            stamps); names must not repeat.

        Returns
        -------
        dict of (n,) arrays: ``t`` (1-based), ``theta``, ``labelled``, ``correct`` (NaN without a
        label), ``answered``, ``coverage``, then per quantity ``<q>``, ``<q>_lower``, ``<q>_upper``
        (running estimate and its anytime-valid bounds at δ per promise), ``alarm`` (the alarm
        has rung by t).
        """
        paths = self._paths(scores)
        n = paths.n_samples
        y = self._labels(labels, n)
        self._check_ids(ids, n)
        h = self.hierarchy
        labelled = y >= 0
        c = np.full(n, -np.inf)
        if labelled.any():
            c[labelled] = last_incorrect_values(h, DecisionPaths(paths.rule, paths.nodes[labelled],
                                                                 paths.values[labelled], paths.lengths[labelled]),
                                                y[labelled])
        theta = self._thetas(c, labelled)
        k = (paths.values.astype(np.float64) < theta[:, None]).sum(axis=1)
        nodes = np.take_along_axis(paths.nodes, k[:, None], axis=1)[:, 0]
        answered = h.leaf_count[nodes] < h.n_leaves
        correct = np.where(labelled, c < theta, False)
        obs = {"accuracy": np.where(labelled, correct, np.nan),
               "answered_accuracy": np.where(labelled & answered, correct, np.nan),
               "answered_share": answered.astype(float)}
        t = self.t + np.arange(1, n + 1)
        rows: dict[str, np.ndarray] = {"t": t, "theta": theta, "labelled": labelled,
                                       "correct": obs["accuracy"], "answered": answered,
                                       "coverage": h.coverage[nodes]}
        promised = {p.quantity: p.level for p in self.deployment.promises}
        for q in QUANTITIES:
            b = bernstein_update(self._bounds[q], obs[q], self.delta_each)
            rows[q], rows[f"{q}_lower"], rows[f"{q}_upper"] = b.estimate, b.lower, b.upper
        for q, level in promised.items():
            d = detector_update(self._detectors[q], obs[q], level, self.delta_each, times=t)
            rows[f"{q}_since"], rows[f"{q}_recent"], rows[f"{q}_recent_upper"] = d.since, d.estimate, d.upper
            hit = d.statistic >= 0
            if self.first_alarm is None and hit.any():
                j = int(np.argmax(hit))
                # the first alarm of the chunk; a quantity that rang earlier in it wins
                if self.alarm_quantity is None or j < self._alarm_j:
                    self._alarm_j, self.alarm_quantity = j, q
                    self.alarm_bound, self.alarm_since = float(d.upper[j]), int(d.since[j])
        if self.first_alarm is None and self.alarm_quantity is not None:
            self.first_alarm = int(self.t + self._alarm_j + 1)
        rows["alarm"] = t >= self.first_alarm if self.first_alarm is not None else np.zeros(n, dtype=bool)
        self.t += n
        self.n_labelled += int(labelled.sum())
        self.n_errors += int((labelled & ~correct).sum())
        if n:
            self.last = {key: float(v[-1]) for key, v in rows.items() if key not in ("labelled", "answered")}
        return rows

    # ------------------------------------------------------------------ verdict
    def verdict(self) -> str:
        """One line: where the alarm rang and what is known then, or what holds so far."""
        conf = 1.0 - self.delta_each
        if self.t == 0:
            return "no samples yet"
        if self.first_alarm is not None:
            q = self.alarm_quantity or "accuracy"
            level = {p.quantity: p.level for p in self.deployment.promises}[q]
            return (f"alarm at sample {self.first_alarm:,}: {QUANTITY_LABELS[q]} ≤ {self.alarm_bound:.4f} since "
                    f"sample {self.alarm_since:,} (promised ≥ {level:.3g}) with {conf:.0%} confidence")
        parts = []
        for p in self.deployment.promises:
            lo = self.last.get(f"{p.quantity}_lower", 0.0)
            parts.append(f"{QUANTITY_LABELS[p.quantity]} ≥ {lo:.4f} (promised ≥ {p.level:.3g})")
        return f"no alarm over {self.t:,} samples: " + ", ".join(parts) + f" with {conf:.0%} confidence"


@dataclass(frozen=True)
class MonitorResult:
    """A whole stream's rows (``frame``: one row per sample), its verdict and alarm."""

    frame: pd.DataFrame
    verdict: str
    first_alarm: int | None
    alarm_quantity: str | None
    deployment: Deployment
    adapt: str
    gamma: float


def monitor_stream(hierarchy: Hierarchy, chunks: Iterable[Mapping[str, Any]],
                   deployment: Deployment | Mapping[str, Any], **options: Any) -> MonitorResult:
    """One call: watch ``deployment`` (a ``Deployment`` or a decision card) over a stream of chunks.

    Parameters
    ----------
    hierarchy : the class tree.
    chunks : mappings with ``scores`` (n, n_leaves), optional ``labels`` (−1 = none), ``ids`` and any
        further per-sample columns (``segment``, ``image``), which are kept in the frame.
    deployment : the θ and promises, or a card (``Deployment.from_card``).
    options : ``StreamMonitor``'s keywords (``adapt``, ``gamma``, ``window``, ``period``, ``inputs``).

    Returns
    -------
    ``MonitorResult``: the rows of every sample (hold a long stream chunk by chunk with
    ``StreamMonitor`` instead, as ``hsc monitor`` does).
    """
    dep = deployment if isinstance(deployment, Deployment) else Deployment.from_card(deployment)
    mon = StreamMonitor(hierarchy, dep, **options)
    parts = []
    for chunk in chunks:
        rows = mon.update(chunk["scores"], chunk.get("labels"), ids=chunk.get("ids"))
        extra = {k: np.asarray(v) for k, v in chunk.items() if k not in ("scores", "labels", "ids")}
        parts.append(pd.DataFrame({**extra, **rows}))
    if not parts or mon.t == 0:
        raise ValueError("the stream is empty: no samples to monitor")
    frame = pd.concat(parts, ignore_index=True)
    return MonitorResult(frame, mon.verdict(), mon.first_alarm, mon.alarm_quantity, dep, mon.adapt, mon.gamma)


# ---------------------------------------------------------------------------- shipped shifts as a stream
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(\d+)\s*$")


def shift_names(model: str, folder: Path | None = None) -> list[str]:
    """The shipped shifts of ``model`` (``<corruption>-<severity>``), sorted by name then severity."""
    folder = (config.cached_logits_dir() / "shifted") if folder is None else folder
    names = [p.stem.split("__")[-1] for p in folder.glob(f"{model}__*.npz")]
    return sorted(set(names), key=lambda s: (s.rsplit("-", 1)[0], int(s.rsplit("-", 1)[-1])
                                            if s.rsplit("-", 1)[-1].isdigit() else 0))


def parse_simulation(spec: str) -> list[tuple[str, int]]:
    """``"clean:2000,gaussian_blur-3:2000"`` → [("clean", 2000), ("gaussian_blur-3", 2000)]."""
    out = []
    for part in [p for p in spec.split(",") if p.strip()]:
        m = _SPEC.match(part)
        if m is None:
            raise ValueError(f"--simulate expects SOURCE:N items separated by commas, got {quote(clip(part, 40))}")
        out.append((m.group(1), int(m.group(2))))
    if not out or sum(n for _, n in out) == 0:
        raise ValueError("the stream is empty: --simulate names no samples")
    return out


def _source_path(model: str, source: str, folder: Path) -> Path:
    if source == "clean":
        return folder / f"{model}.npz"
    found = sorted(p for p in (folder / "shifted").glob(f"{model}__*.npz") if p.stem.split("__")[-1] == source)
    if not found:
        raise ValueError(f"no shipped shift {quote(clip(source, 40))} for {quote(clip(model, 40))}; choose clean or "
                         f"one of {', '.join(shift_names(model, folder / 'shifted')) or 'none'}")
    return found[0]


def simulate_chunks(spec: Sequence[tuple[str, int]], *, model: str, rows: np.ndarray | None = None,
                    labels_every: int = 1, chunk_size: int = 50_000, seed: int = 0,
                    folder: Path | None = None) -> Iterator[dict[str, Any]]:
    """The shipped sets played in order as a stream: each segment draws its N samples uniformly
    with replacement from ``rows`` (default all) of its file (clean: the model's own; a shift:
    ``shifted/<model>__…__<shift>.npz``, the same images).

    Yields chunks of at most ``chunk_size`` samples: ``scores`` (float16 logits), ``labels``
    (−1 except every ``labels_every``-th sample), ``ids`` (arrival index), ``segment``, ``image``.
    """
    from ..datasets.logits_io import load_logits

    folder = config.cached_logits_dir() if folder is None else Path(folder)
    if labels_every < 1:
        raise ValueError(f"--labels-every must be at least 1, got {labels_every}")
    rng = np.random.default_rng(seed)
    loaded: dict[str, Any] = {}
    ref_ids = None
    t = 0
    for source, count in spec:
        if source not in loaded:
            loaded[source] = load_logits(_source_path(model, source, folder), keep_float16=True)
        b = loaded[source]
        if ref_ids is None:
            ref_ids = b.sample_ids
        elif not np.array_equal(ref_ids, b.sample_ids):
            raise ValueError(f"{source}: the shifted set holds other images than the clean one")
        pool = np.arange(b.n_samples) if rows is None else np.asarray(rows)
        left = int(count)
        while left > 0:
            m = min(left, chunk_size)
            pick = pool[rng.integers(0, pool.size, m)]
            idx = t + np.arange(m)
            yield {"scores": b.logits[pick], "labels": np.where((idx + 1) % labels_every == 0, b.labels[pick], -1),
                   "ids": idx + 1, "segment": np.full(m, source), "image": b.sample_ids[pick]}
            t += m
            left -= m


def formula_safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its text columns (a stream's sample ids) as ``results.csv_cell`` writes text: a
    cell a spreadsheet would run as a formula prefixed with ``'``. Numbers are untouched."""
    texts = [c for c in frame.columns if frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c])]
    return frame.assign(**{c: formula_safe_texts(frame[c]) for c in texts}) if texts else frame


def detection_delays(frame: pd.DataFrame) -> pd.DataFrame:
    """Per segment of a simulated stream: where it starts, its realised accuracy and share
    answered, and the alarm's delay in samples after its start (NaN: no alarm in or after it;
    negative: the alarm rang before the segment began)."""
    alarm_t = frame.loc[frame["alarm"].astype(bool), "t"]
    first = int(alarm_t.iloc[0]) if len(alarm_t) else None
    seg = frame["segment"].astype(str)
    starts = np.flatnonzero(np.r_[True, seg.to_numpy()[1:] != seg.to_numpy()[:-1]])
    out = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(frame)
        part = frame.iloc[s:e]
        t0 = int(part["t"].iloc[0])
        out.append({"segment": seg.iloc[s], "start": t0, "n": int(e - s),
                    "accuracy": float(np.nanmean(part["correct"])) if part["labelled"].any() else float("nan"),
                    "answered_share": float(part["answered"].mean()),
                    "delay": float("nan") if first is None else float(first - t0)})
    return pd.DataFrame(out)


def policy_table(hierarchy: Hierarchy, make_chunks: Any, deployment: Deployment, *,
                 policies: Sequence[str] = ADAPT, **options: Any) -> pd.DataFrame:
    """Fixed θ, ACI and recalibration on the same stream (``make_chunks()`` replays it), one row each:
    long-run miscoverage over the labelled samples, ACI's bound, share answered, mean coverage,
    the first alarm and the final θ."""
    rows = []
    for policy in policies:
        res = monitor_stream(hierarchy, make_chunks(), deployment, adapt=policy, **options)
        f = res.frame
        lab = f["labelled"].to_numpy(bool)
        miss = 1.0 - float(f.loc[lab, "correct"].mean()) if lab.any() else float("nan")
        gamma = options.get("gamma", DEFAULT_GAMMA)
        rows.append({"policy": policy, "n": len(f), "labelled": int(lab.sum()), "miscoverage": miss,
                     "bound": float(aci_bound(int(lab.sum()), deployment.alpha, gamma,
                                              float(np.float32(deployment.theta))))
                     if policy == "aci" else float("nan"),
                     "answered_share": float(f["answered"].mean()), "coverage": float(f["coverage"].mean()),
                     "first_alarm": res.first_alarm, "final_theta": float(f["theta"].iloc[-1])})
    return pd.DataFrame(rows)


def held_out_rows(evaluation: Any, card: Mapping[str, Any] | None) -> np.ndarray:
    """Rows of ``evaluation``'s logits a card never calibrated on: its evaluation split less its
    seeded calibration draw (``threshold.calibration_draw`` with the card's n_cal and seed); the
    whole split when the card does not say how it drew."""
    from .threshold import calibration_draw

    card = card or {}
    rows = evaluation.rows_for(bool(card.get("ts", True)))
    n_cal, seed = card.get("n_cal"), card.get("seed", 0)
    if isinstance(n_cal, int) and 0 < n_cal < rows.size and isinstance(seed, int):
        _, test = calibration_draw(evaluation.labels[rows], n_cal, seed)
        rows = rows[test]
    return rows
