"""The accuracy-guarantee methods, their settings and the per-sample data they share.

``METHODS`` names every method (its label, the nested node family it thresholds, its kind of
guarantee and its source); ``GuaranteeSettings`` holds the requirement (α, δ, second risks) and
the methods' options; ``GuaranteeData`` holds the per-sample quantities every method reads,
computed once per data set. Calibrating the methods is ``calibration``; repeating it over
thousands of calibration sets is ``shootout``; ``guarantees`` is the one front door to all three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..core.conformal import lca_set_paths, top_down_paths
from ..core.hierarchy import Hierarchy
from ..core.ltt import P_VALUES, PValue
from ..core.rules import DecisionPaths, concat_decision_paths, decision_paths
from ..core.thresholds import QuantileMethod, climbing_tight_thresholds, last_incorrect_values
from ..core.validation import check_labels, quote

Sampling = Literal["iid", "split"]
SAMPLINGS: tuple[Sampling, ...] = ("iid", "split")
Kind = Literal["pac", "marginal", "marginal per group", "heuristic"]
#: Which accuracy a method guarantees: ``"hierarchical"``, the paper's (every sample counts, an
#: abstention at the root counts as correct), or ``"answers"``, the accuracy of the answers given
#: (samples predicted below the root only; abstentions excluded: a selective risk).
Quantity = Literal["hierarchical", "answers"]
QUANTITY_WORDS: dict[str, str] = {
    "hierarchical": "hierarchical accuracy (every sample counts; an abstention at the root counts as correct)",
    "answers": "accuracy of the answers given (abstentions at the root excluded)",
}

#: The most memory DARTS' dense (n, n_nodes) node probabilities may take (at least float32).
DENSE_LIMIT_BYTES = 1_000_000_000


@dataclass(frozen=True)
class MethodInfo:
    """What a method is: its label, the nested family it thresholds, its guarantee and source."""

    label: str
    family: str  # "climbing", "lca_set" or "darts"
    kind: Kind
    source: str
    quantity: Quantity = "hierarchical"


METHODS: dict[str, MethodInfo] = {
    "theorem1": MethodInfo("Algorithm 2 θ̂ (paper)", "climbing", "marginal",
                           "Goren et al. 2024, Algorithm 2 (order statistic ⌈(n+1)(1−α)⌉)"),
    "theorem1_pac": MethodInfo("Theorem 1, one-sided (PAC)", "climbing", "pac",
                               "Theorem 1's Beta law, one-sided: smallest rank k with "
                               "P(Beta(k, n+1−k) < 1−α) ≤ δ (Vovk 2012, training-conditional)"),
    "crc": MethodInfo("Conformal risk control", "climbing", "marginal",
                      "Angelopoulos et al. 2024, 0/1 loss (definitions §6.6)"),
    "ltt_bonferroni": MethodInfo("LTT · Bonferroni", "climbing", "pac", "Angelopoulos et al. 2021, Bonferroni"),
    "ltt_fixed_sequence": MethodInfo("LTT · fixed sequence", "climbing", "pac",
                                     "Angelopoulos et al. 2021, fixed-sequence testing from θ = 1 down"),
    "ltt_holm": MethodInfo("LTT · Holm", "climbing", "pac", "Angelopoulos et al. 2021, Holm step-down"),
    "ltt_selective": MethodInfo("LTT on the answers' accuracy (selective)", "climbing", "pac",
                                "Angelopoulos et al. 2021 on the selective risk P(wrong | answered) (Geifman & "
                                "El-Yaniv 2017): binomial p-value given the number answered, fallback testing "
                                "from θ = 1 (Wiens 2003)", "answers"),
    "ltt_multi": MethodInfo("LTT · several risks", "climbing", "pac",
                            "Angelopoulos et al. 2021 §4: max of the risks' p-values, Holm"),
    "conformal_lca": MethodInfo("Conformal node (LCA of the flat set)", "lca_set", "marginal",
                                "split conformal on node-valued sets (Mortier et al. 2025)"),
    "conformal_top_down": MethodInfo("Conformal node (greedy top-down)", "top_down", "marginal",
                                     "split conformal on the greedy top-down node (Mortier et al. 2025)"),
    "theorem1_mondrian": MethodInfo("Algorithm 2 per superclass (Mondrian)", "climbing", "marginal per group",
                                    "Mondrian split conformal (Vovk et al. 2005) on Climbing"),
    "conformal_mondrian": MethodInfo("Conformal node per superclass (Mondrian)", "lca_set", "marginal per group",
                                     "Mondrian split conformal on node-valued sets"),
    "darts": MethodInfo("DARTS", "darts", "heuristic", "Deng et al. 2012, as the authors run it"),
}
#: Methods the shoot-out runs by default (``ltt_multi`` joins when a second risk is given).
DEFAULT_METHODS: tuple[str, ...] = (
    "theorem1", "theorem1_pac", "crc", "ltt_bonferroni", "ltt_fixed_sequence", "ltt_holm", "ltt_selective",
    "conformal_lca", "conformal_top_down", "theorem1_mondrian", "conformal_mondrian", "darts")
N_REPS = 1000
SEED = 0
MONDRIAN_DEPTH = 2
N_LAMBDAS = 100


def check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    """The methods, validated (one line naming the unknown one)."""
    out = tuple(dict.fromkeys(methods))
    unknown = [m for m in out if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {quote(unknown[0])}; choose from {', '.join(METHODS)}")
    if not out:
        raise ValueError("give at least one method")
    return out



@dataclass(frozen=True)
class GuaranteeSettings:
    """The requirement and the methods' options.

    Parameters
    ----------
    alpha : 1 − target accuracy.
    delta : PAC methods' failure probability; only the methods that read it (``needs_delta``) ask
        for it, so it may be None (the default) for the others (Algorithm 2, CRC, conformal,
        Mondrian, DARTS). ``GuaranteeSettings(alpha, delta)`` keeps working as before.
    min_coverage, max_severity : optional second risks of ``ltt_multi`` (mean coverage ≥ c,
        mean severity ≤ s).
    p_value : LTT's p-values: ``"binomial"`` (exact binomial tail, 0/1 losses) or
        ``"hoeffding_bentkus"``; second risks always use Hoeffding–Bentkus (non-binary losses).
    n_lambdas : LTT's grid size (``ltt_theta_grid``).
    mondrian_depth : depth of the superclasses of the Mondrian methods.
    quantile : Algorithm 2's θ̂ (``theorem1``): ``"order_statistic"`` (the paper's
        θ_(⌈(n+1)(1−α)⌉)) or ``"quantile"`` (the authors' code, ``numpy.quantile``).

    Examples
    --------
    >>> GuaranteeSettings(alpha=0.05).delta is None      # Algorithm 2, CRC, conformal: no δ
    True
    >>> GuaranteeSettings(alpha=0.05).delta_for("theorem1_pac")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: δ (delta) is needed for method 'theorem1_pac': ...
    >>> GuaranteeSettings(0.05, 0.1).delta_for("theorem1_pac")
    0.1
    """

    alpha: float
    delta: float | None = None
    min_coverage: float | None = None
    max_severity: float | None = None
    p_value: PValue = "binomial"
    n_lambdas: int = N_LAMBDAS
    mondrian_depth: int = MONDRIAN_DEPTH
    quantile: QuantileMethod = "order_statistic"

    def __post_init__(self) -> None:
        for name in ("alpha", "delta"):
            v = getattr(self, name)
            if (v is not None or name == "alpha") and not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {v}")
        for name in ("min_coverage", "max_severity"):
            v = getattr(self, name)
            if v is not None and not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name.replace('_', ' ')} must lie in (0, 1), got {v}")
        if self.p_value not in P_VALUES:
            raise ValueError(f"unknown p-value {quote(self.p_value)}; choose one of {', '.join(P_VALUES)}")
        if int(self.mondrian_depth) != self.mondrian_depth or self.mondrian_depth < 0:
            raise ValueError(f"the Mondrian depth must be a non-negative integer, got {self.mondrian_depth}")
        if self.quantile not in ("order_statistic", "quantile"):
            raise ValueError(f"unknown θ̂ rule {quote(self.quantile)}; use 'order_statistic' or 'quantile'")

    @property
    def target(self) -> float:
        return 1.0 - self.alpha

    def delta_for(self, method: str) -> float:
        """δ for ``method``, which reads it (``needs_delta``); one clear error when it was not given."""
        if self.delta is None:
            raise ValueError(f"δ (delta) is needed for method {quote(method)}: its guarantee holds with probability "
                             "≥ 1 − δ over the calibration set; give delta in (0, 1)")
        return float(self.delta)


def needs_delta(method: str) -> bool:
    """Whether ``method`` reads δ: the PAC methods (Theorem 1 one-sided, LTT) do, no other does."""
    return METHODS[check_methods([method])[0]].kind == "pac"



# ---------------------------------------------------------------------------- the data
@dataclass
class GuaranteeData:
    """Per-sample quantities every method needs, computed once per data set.

    Attributes
    ----------
    hierarchy : the class tree.
    labels : (n,) true leaves.
    paths : family → ``DecisionPaths`` (``"climbing"``, ``"lca_set"``, ``"top_down"``), (n, n_records).
    last_incorrect : family → (n,) value the parameter must exceed for the node to be correct
        (−inf: always correct).
    tight : (n,) the paper's per-sample thresholds (Algorithm 3) for Algorithm 2's θ̂.
    leaf_pred : (n,) arg-max leaves (Mondrian groups are their ancestors).
    node_probs : optional (n, n_nodes) probabilities, or a callable returning them; DARTS only.
    """

    hierarchy: Hierarchy
    labels: np.ndarray
    paths: dict[str, DecisionPaths]
    last_incorrect: dict[str, np.ndarray]
    tight: np.ndarray
    leaf_pred: np.ndarray
    node_probs: np.ndarray | Callable[[], np.ndarray] | None = None
    _probs: np.ndarray | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return int(self.labels.size)

    def probabilities(self) -> np.ndarray:
        """(n, n_nodes) node probabilities (DARTS), loaded once."""
        if self._probs is None:
            if self.node_probs is None:
                raise ValueError("DARTS needs the node probabilities; this data set was built without them")
            if callable(self.node_probs):
                # DARTS reads every sample's node probabilities at once: refuse before building a
                # matrix that would not fit (the dashboard's repetitions reach this with any model)
                size = self.n * self.hierarchy.n_nodes * 4
                if size > DENSE_LIMIT_BYTES:
                    raise ValueError(f"DARTS needs every node probability at once: {self.n:,} samples × "
                                     f"{self.hierarchy.n_nodes:,} nodes is too large to hold in memory "
                                     f"({size / 1e9:.1f} GB); use a subset or drop DARTS")
            self._probs = np.asarray(self.node_probs() if callable(self.node_probs) else self.node_probs)
        return self._probs

    def answer_score(self, family: str = "climbing") -> np.ndarray:
        """(n,) the largest record value below the root on each sample's ``family`` path: the rule
        answers (predicts a node below the root) at θ iff this score ≥ θ (−inf: it never does)."""
        paths = self.paths[family]
        return np.where(paths.nodes == self.hierarchy.root, -np.inf, paths.values).max(axis=1)

    @classmethod
    def from_arrays(cls, hierarchy: Hierarchy, node_probs: np.ndarray, labels: np.ndarray) -> GuaranteeData:
        """From (n, n_nodes) node probabilities and true leaves (small data, tests, synthetic)."""
        probs = np.asarray(node_probs)
        labels = check_labels(labels, probs.shape[0], hierarchy.n_leaves)
        climbing = decision_paths(hierarchy, probs, "climbing")
        return cls._build(hierarchy, labels, climbing, lca_set_paths(hierarchy, probs),
                          top_down_paths(hierarchy, probs), climbing_tight_thresholds(hierarchy, probs, labels), probs)

    @classmethod
    def from_evaluation_set(cls, es: Any) -> GuaranteeData:
        """From an ``EvaluationSet`` (its cached paths and tight thresholds; the LCA family is
        built chunk by chunk, never holding samples × nodes at once)."""
        from ..core.logit_chunks import node_probability_chunks

        ev = es.evaluation
        lca, top = [], []
        for _, probs in node_probability_chunks(es.hierarchy, ev.logits, temperature=es.temperature, rows=es.rows,
                                                precision=ev.precision):
            lca.append(lca_set_paths(es.hierarchy, probs))
            top.append(top_down_paths(es.hierarchy, probs))
        return cls._build(es.hierarchy, es.labels, es.paths["climbing"], concat_decision_paths(lca),
                          concat_decision_paths(top), es.tight_thresholds(),
                          lambda: es.node_probabilities(np.arange(es.n)))

    @classmethod
    def _build(cls, hierarchy: Hierarchy, labels: np.ndarray, climbing: DecisionPaths, lca: DecisionPaths,
               top: DecisionPaths, tight: np.ndarray, probs: Any) -> GuaranteeData:
        paths = {"climbing": climbing, "lca_set": lca, "top_down": top}
        return cls(hierarchy, labels, paths,
                   {k: last_incorrect_values(hierarchy, p, labels) for k, p in paths.items()},
                   np.asarray(tight, dtype=float), climbing.nodes[:, 0], probs)



__all__ = [
    "DEFAULT_METHODS", "METHODS", "MONDRIAN_DEPTH", "N_LAMBDAS", "N_REPS", "QUANTITY_WORDS", "SAMPLINGS", "SEED",
    "GuaranteeData", "GuaranteeSettings", "Kind", "MethodInfo", "Quantity", "Sampling", "check_methods",
    "needs_delta",
]
