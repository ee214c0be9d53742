"""Every confidence score the toolkit knows, and how each scores an internal node (``rule_registry`` style).

**One principle for internal nodes.** A node v is scored by the flat score of the leaf
distribution *coarsened at v*: the leaves L(v) merged into one class, every other leaf kept. For
a leaf this is the flat score itself (merging one leaf changes nothing); for the root every
distribution collapses to one certain class. So, with f_v = Σ_{y∈L(v)} p_y:

==========  =====================================================  ===========================
key         node score κ(v) (root: 1)                              flat score at the leaves
==========  =====================================================  ===========================
softmax     f_v (today's, unchanged)                               max_y p_y
margin      max(0, f_v − max_{y∉L(v)} p_y)                         p_(1) − p_(2)
entropy     1 − H(p coarsened at v) / log C                        1 − H(p) / log C
doctor      Σ_{y∉L(v)} p_y² + f_v² (Gini; Granese et al. 2021)     Σ_y p_y²
energy      σ((E(x) − m) / s), E = logsumexp of the logits        the same
==========  =====================================================  ===========================

Every score lies in [0, 1] (a leaf other than the distribution's arg-max, which no rule ever
predicts, scores ``NOT_PREDICTED`` = −1 for every score but softmax: entropy, Gini and energy
are the same for every leaf of a sample, and the rules take the arg-max leaf from the scores)
and **never decreases along a root path** (merging classes raises a
margin, lowers an entropy and raises a Gini sum of squares: (a + b)² ≥ a² + b²), so Selective,
Climbing, Jumping, Max-Coverage, the exact RC curves, the tight thresholds and the threshold
algorithm run on it unchanged. The energy E(x) is unchanged by merging classes (log-sum-exp is
associative), so it scores every non-root node of a sample alike: every rule then reduces to
Selective ranked by energy (gain 0); m and s (median and spread of E on the calibration split)
only spread the scores over (0, 1) and change no ordering.

**What still holds for a score that is not a probability.** Each rule's prediction at θ is the
first candidate scoring ≥ θ, for any score. Algorithm 2's guarantee (marginal hierarchical
accuracy ≥ 1 − α over exchangeable calibration and test samples) needs only that correctness be
monotone in θ, which a path-monotone score gives, so it holds for every score here. What is lost:
θ is no longer a probability (a "confidence ≥ 0.9" reading, and the calibration–coverage ECE of
the rules' returned confidences, mean something only for ``softmax``).

**Scores over an ensemble's members** (``member_mean``, ``member_disagreement``;
``member_node_scores``) average the members' calibrated node scores f^(m) instead of coarsening
one distribution: f̄_v, and (#{m : ŷ_m ∈ L(v)} + f̄_v) / (M + 1), the share of the members' top-leaf
votes inside v with f̄ as a tie-breaking vote. Both are path-monotone with root 1, so the same
guarantees hold; ``member_mean`` is a probability, ``member_disagreement`` is not. They need the
members' logits (``MemberScorer``; ``datasets.members`` finds them through the manifest).

Examples
--------
>>> confidence_names()
('softmax', 'margin', 'entropy', 'doctor', 'energy', 'member_mean', 'member_disagreement')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .calibrators import FittedCalibrator, depth_groups, fit_calibrator, get_calibrator
from .hierarchy import Hierarchy
from .named_registry import NamedRegistry
from .probabilities import node_probabilities
from .validation import quote


@dataclass(frozen=True)
class ConfidenceSpec:
    """One confidence score.

    Attributes
    ----------
    key, label, source : name in code/CSV/CLI, display name, citation.
    node_scores : ``(hierarchy, leaf_probs (n, C), logits (n, C) or None, params) → (n, n_nodes)``.
    needs_logits : whether it reads the (calibrated) logits, not only the leaf probabilities.
    needs_members : whether it reads an ensemble's members (``member_node_scores``; its
        ``node_scores`` then only says so).
    """

    key: str
    label: str
    source: str
    node_scores: Callable[[Hierarchy, np.ndarray, np.ndarray | None, dict], np.ndarray]
    needs_logits: bool = False
    needs_members: bool = False


_SCORES = NamedRegistry[ConfidenceSpec]("confidence score")
#: The score of a leaf that is not the leaf distribution's arg-max, for every score but softmax:
#: below every real score, so the rules' arg-max leaf is the distribution's (never predicted).
NOT_PREDICTED = -1.0


def register_confidence(spec: ConfidenceSpec) -> ConfidenceSpec:
    """List ``spec`` under a new key. Returns it."""
    return _SCORES.register(spec)


def confidence_names() -> tuple[str, ...]:
    """The listed confidence scores, in registration order."""
    return _SCORES.names()


def get_confidence(name: str) -> ConfidenceSpec:
    """The spec of a listed score; one ValueError naming the choices otherwise."""
    return _SCORES.get(name)


def confidence_node_scores(name: str, hierarchy: Hierarchy, leaf_probs: np.ndarray, logits: np.ndarray | None = None,
                           params: dict | None = None) -> np.ndarray:
    """(n, n_nodes) node scores of score ``name`` in [0, 1], root 1, in ``leaf_probs``' precision;
    for every score but softmax, leaves other than the arg-max of ``leaf_probs`` score
    ``NOT_PREDICTED`` (−1).

    Parameters
    ----------
    leaf_probs : (n, C) leaf distribution (calibrated or not).
    logits : (n, C) (calibrated) logits; needed by ``energy`` only.
    params : fitted on the calibration split by ``fit_confidence`` (``energy``: m, s).
    """
    spec = get_confidence(name)
    if spec.needs_members:
        raise ValueError(f"confidence score {quote(name)} reads an ensemble's members: use member_node_scores")
    if spec.needs_logits and logits is None:
        raise ValueError(f"confidence score {quote(name)} needs the logits")
    p = np.asarray(leaf_probs)
    dtype = np.float32 if p.dtype in (np.float16, np.float32) else np.float64
    out = spec.node_scores(hierarchy, p, logits, dict(params or {}))
    out = np.clip(out, 0.0, 1.0).astype(dtype, copy=False)
    if spec.key != "softmax":
        # Every leaf of a sample has the same coarsened entropy, Gini or energy, so the rules'
        # arg-max over the leaf columns would pick leaf 0. Only the distribution's arg-max leaf
        # is ever predicted (every rule starts from it), so the others score NOT_PREDICTED.
        rows = np.arange(p.shape[0])
        top = p.argmax(axis=1)
        keep = out[rows, top]
        out[:, : hierarchy.n_leaves] = NOT_PREDICTED
        out[rows, top] = keep
    out[:, hierarchy.root] = 1.0
    return out


def energy(logits: np.ndarray) -> np.ndarray:
    """(n,) E(x) = logsumexp of the logits (the negative free energy; Liu et al. 2020), float64."""
    z = np.asarray(logits, dtype=np.float64)
    top = z.max(axis=1)
    return top + np.log(np.exp(z - top[:, None]).sum(axis=1))


def fit_confidence(name: str, logits: np.ndarray | None) -> dict:
    """The score's parameters from the calibration split's (calibrated) logits ({} for most)."""
    if get_confidence(name).key != "energy":
        return {}
    if logits is None:
        raise ValueError("confidence score 'energy' needs the logits")
    e = energy(logits)
    spread = float(np.subtract(*np.percentile(e, [75, 25]))) or float(e.std()) or 1.0
    return {"m": float(np.median(e)), "s": spread}


# ---------------------------------------------------------------------------- the scores
def _softmax(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    return node_probabilities(h, p)


def outside_max(hierarchy: Hierarchy, leaf_values: np.ndarray) -> np.ndarray:
    """(n, n_nodes) the largest leaf value outside each node's leaves, max_{y∉L(v)} (0 at the root).

    Bottom-up subtree maxima, then top-down: a node's outside is its parent's outside or a
    sibling subtree's maximum (the best or, for the best child itself, the second best).
    """
    n, c = leaf_values.shape
    inside = np.zeros((n, hierarchy.n_nodes), dtype=np.float64)
    inside[:, :c] = leaf_values
    groups = depth_groups(hierarchy)
    for nodes, parents, starts in reversed(groups):
        inside[:, parents] = np.maximum(inside[:, parents], np.maximum.reduceat(inside[:, nodes], starts, axis=1))
    out = np.zeros_like(inside)
    for nodes, parents, starts in groups:
        block = inside[:, nodes]
        k = nodes.size
        sizes = np.diff(np.r_[starts, k])
        best = np.maximum.reduceat(block, starts, axis=1)
        position = np.where(block == np.repeat(best, sizes, axis=1), np.arange(k), k)
        first = np.repeat(np.minimum.reduceat(position, starts, axis=1), sizes, axis=1)
        is_best = np.arange(k)[None, :] == first
        second = np.maximum.reduceat(np.where(is_best, -np.inf, block), starts, axis=1)
        siblings = np.where(is_best, np.repeat(second, sizes, axis=1), np.repeat(best, sizes, axis=1))
        out[:, nodes] = np.maximum(np.repeat(out[:, parents], sizes, axis=1), np.maximum(siblings, 0.0))
    return out


def _margin(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    f = node_probabilities(h, p.astype(np.float64))
    return f - outside_max(h, p)


def _xlogx(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)


def _entropy(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    p64 = p.astype(np.float64)
    plogp = node_probabilities(h, _xlogx(p64))  # S_v = Σ_{y∈L(v)} p log p
    f = node_probabilities(h, p64)
    # H(coarsened at v) = H(p) + S_v − f_v log f_v, with H(p) = −S_root
    ent = -plogp[:, h.root][:, None] + plogp - _xlogx(f)
    return 1.0 - np.maximum(ent, 0.0) / np.log(max(2, p.shape[1]))


def _doctor(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    p64 = p.astype(np.float64)
    sq = node_probabilities(h, p64 * p64)
    f = node_probabilities(h, p64)
    return sq[:, h.root][:, None] - sq + f * f


def _energy(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    assert z is not None
    e = (energy(z) - params.get("m", 0.0)) / params.get("s", 1.0)
    score = 1.0 / (1.0 + np.exp(-np.clip(e, -500, 500)))
    return np.repeat(score[:, None], h.n_nodes, axis=1)


def _members_only(h: Hierarchy, p: np.ndarray, z: np.ndarray | None, params: dict) -> np.ndarray:
    raise ValueError("this confidence score reads an ensemble's members (member_node_scores)")


def member_node_scores(name: str, hierarchy: Hierarchy, members: Sequence[np.ndarray]) -> np.ndarray:
    """(n, n_nodes) a member score from each member's (calibrated) node scores, in [0, 1], root 1.

    Parameters
    ----------
    name : ``member_mean`` or ``member_disagreement``.
    members : M ≥ 1 arrays (n, n_nodes), each member's node scores f^(m) (``FittedCalibrator.node_scores``
        of its logits: path-monotone, root 1).

    ``member_mean``: f̄_v = (1/M) Σ_m f_v^(m). ``member_disagreement``: 1 − the share of the M + 1
    votes that fall outside v, where member m votes for its top leaf ŷ_m (the arg-max of its leaf
    scores) and f̄_v counts as one more, soft vote (it breaks the ties of the M hard votes):
    κ(v) = (#{m : ŷ_m ∈ L(v)} + f̄_v) / (M + 1). Both are means of path-monotone scores with
    root 1, so they never decrease towards the root.
    """
    if get_confidence(name).key not in MEMBER_SCORES:
        raise ValueError(f"{quote(name)} is not a member score; choose one of {', '.join(MEMBER_SCORES)}")
    if not members:
        raise ValueError(f"confidence score {quote(name)} needs at least one member")
    mean = np.mean(np.stack(members), axis=0)
    if name == "member_mean":
        return mean
    c = hierarchy.n_leaves
    votes = np.zeros_like(mean)
    for f in members:
        top = np.zeros((f.shape[0], c), dtype=mean.dtype)
        top[np.arange(f.shape[0]), f[:, :c].argmax(axis=1)] = 1.0
        votes += node_probabilities(hierarchy, top)
    return (votes + mean) / (len(members) + 1)


#: The scores over an ensemble's members, in ``member_node_scores``.
MEMBER_SCORES = ("member_mean", "member_disagreement")

for _spec in (
    ConfidenceSpec("softmax", "Softmax response", "Geifman & El-Yaniv (NeurIPS 2017); the paper's", _softmax),
    ConfidenceSpec("margin", "Margin", "top-1 minus top-2 probability", _margin),
    ConfidenceSpec("entropy", "Negative entropy", "1 − H(p) / log C", _entropy),
    ConfidenceSpec("doctor", "DOCTOR (Gini)", "Granese et al., \"DOCTOR\" (NeurIPS 2021)", _doctor),
    ConfidenceSpec("energy", "Energy", "Liu et al., \"Energy-based out-of-distribution detection\" (NeurIPS 2020)",
                   _energy, needs_logits=True),
    ConfidenceSpec("member_mean", "Member mean", "mean over the ensemble's members of each member's calibrated "
                   "node probability (Lakshminarayanan et al., NeurIPS 2017)", _members_only, needs_members=True),
    ConfidenceSpec("member_disagreement", "Member agreement", "1 − the share of member votes outside the node "
                   "(the members' top leaves, the member mean as a tie-breaking vote)", _members_only,
                   needs_members=True),
):
    register_confidence(_spec)


@dataclass(frozen=True)
class NodeScorer:
    """A fitted (calibrator, confidence score) pair: logits chunk (n, C) → node scores (n, n_nodes).

    Made by ``fit_node_scorer``; the chunked loops of ``logit_chunks`` call it per chunk.
    """

    hierarchy: Hierarchy
    calibration: FittedCalibrator
    confidence: str
    params: dict

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        cal = self.calibration
        if self.confidence == "softmax":
            return cal.node_scores(self.hierarchy, logits)
        z = cal.logits(logits) if get_confidence(self.confidence).needs_logits else None
        return confidence_node_scores(self.confidence, self.hierarchy, cal.leaf_probs(logits), z, self.params)


@dataclass(frozen=True)
class MemberScorer:
    """A fitted (calibrator, member score) pair over an ensemble's members.

    The calibrator (fitted on the ensemble's own logits) maps each member's logits of the same
    rows; ``member_node_scores`` combines them. ``logit_chunks`` calls ``score_rows``.

    Attributes
    ----------
    members : M arrays (n_samples, C): each member's logits, in the rows of the ensemble's file.
    """

    hierarchy: Hierarchy
    calibration: FittedCalibrator
    confidence: str
    members: tuple[np.ndarray, ...]
    params: dict = field(default_factory=dict)

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        raise ValueError(f"confidence score {quote(self.confidence)} scores rows of the file (score_rows)")

    def score_rows(self, logits: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(n, n_nodes) the member score of ``rows`` (n,) (``logits`` (n, C) sets the precision)."""
        dtype = np.float32 if np.asarray(logits).dtype in (np.float16, np.float32) else np.float64
        scores = [self.calibration.node_scores(self.hierarchy, np.asarray(m[rows]).astype(dtype, copy=False))
                  for m in self.members]
        out = member_node_scores(self.confidence, self.hierarchy, scores).astype(dtype, copy=False)
        out[:, self.hierarchy.root] = 1.0
        return out


#: Why (calibrator, confidence) pairs that could run are refused anyway: their score would rank noise.
REFUSED_PAIRS: dict[tuple[str, str], str] = {
    ("isotonic", "energy"): "isotonic's calibrated logits are log-probabilities, so every sample's energy "
                            "(log-sum-exp) is 0 up to rounding (±1e-15) and ranks samples by floating-point noise; "
                            "pair isotonic with another score, or energy with another calibrator",
}


def compatible(calibrator: str, confidence: str) -> bool:
    """Whether the pair can be scored: ``depth_temperature`` scores nodes directly (one T per
    depth, no single leaf distribution), so it pairs with ``softmax`` and the member scores
    (which average node scores) only; a pair of ``REFUSED_PAIRS`` would rank noise.

    >>> compatible("isotonic", "energy"), compatible("temperature", "energy")
    (False, True)
    """
    cal, conf = get_calibrator(calibrator).key, get_confidence(confidence).key
    if (cal, conf) in REFUSED_PAIRS:
        return False
    return conf == "softmax" or get_confidence(confidence).needs_members or cal != "depth_temperature"


def fit_node_scorer(hierarchy: Hierarchy, calibrator: str | FittedCalibrator, confidence: str, logits: np.ndarray,
                    labels: np.ndarray, members: Sequence[np.ndarray] | None = None) -> NodeScorer | MemberScorer:
    """Fit ``calibrator`` (a name, or one already fitted on these rows) and ``confidence``'s
    parameters on calibration ``logits`` (n, C) and ``labels`` (n,).

    members : for a member score, the M members' logits (n_samples, C) in the rows of the file
        the scorer will be applied to (not only the calibration rows).
    """
    spec = get_confidence(confidence)
    key = calibrator.key if isinstance(calibrator, FittedCalibrator) else get_calibrator(calibrator).key
    if (key, spec.key) in REFUSED_PAIRS:
        raise ValueError(f"confidence {quote(spec.key)} after calibrator {quote(key)} is refused: "
                         f"{REFUSED_PAIRS[key, spec.key]}")
    if spec.needs_members and not members:
        raise ValueError(f"confidence score {quote(confidence)} needs an ensemble's members, and this model has none")
    cal = (calibrator if isinstance(calibrator, FittedCalibrator)
           else fit_calibrator(calibrator, hierarchy, logits, labels))
    if spec.needs_members:
        return MemberScorer(hierarchy, cal, spec.key, tuple(members or ()))
    if confidence != "softmax" and not cal.gives_leaf_distribution:
        raise ValueError(f"calibrator {quote(cal.key)} scores nodes directly (no single leaf distribution); "
                         "combine it with confidence 'softmax'")
    needs = get_confidence(confidence).needs_logits
    params = fit_confidence(confidence, cal.logits(logits) if needs else None)
    return NodeScorer(hierarchy, cal, confidence, params)
