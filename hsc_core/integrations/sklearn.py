"""Hierarchical selective classification as a scikit-learn estimator (needs scikit-learn).

``HierarchicalSelectiveClassifier`` wraps any classifier with ``predict_proba`` (a ``Pipeline``,
a prefit model as MAPIE's ``prefit``), a class tree and a rule: ``fit`` trains the classifier on
part of the data and calibrates on the held-out rest (T, and the certified θ when a target accuracy
is given); ``predict`` returns node labels, ``predict_nodes`` / ``predict_proba_nodes`` the node
ids and probabilities, ``decision_card()`` the card. The numbers come from the evaluation layer:
the calibration is ``ModelEvaluation(hierarchy, log p, labels).setting(ts)`` and its ``threshold``,
so ``haurc_`` and ``theta_`` equal ``rc_curve_and_haurc`` and ``threshold_for_accuracy`` on the same
probabilities (``probability_logits``: the log of ``predict_proba``).

``score`` is −hAURC (higher is better, as scikit-learn's ``neg_*`` scorers), so ``GridSearchCV``
selects by hAURC with no ``scoring`` argument; ``haurc_scorer`` does the same for any classifier,
and ``haurc_score`` is the plain metric for ``make_scorer``.

Examples
--------
>>> from sklearn.datasets import load_digits
>>> from sklearn.linear_model import LogisticRegression
>>> from hsc_core import Hierarchy
>>> X, y = load_digits(return_X_y=True)
>>> tree = Hierarchy.from_parent_map({**{str(d): "even" if d % 2 == 0 else "odd" for d in range(10)},
...                                   "even": "digit", "odd": "digit"}, [str(d) for d in range(10)])
>>> clf = HierarchicalSelectiveClassifier(LogisticRegression(max_iter=2000), tree, target_accuracy=0.95,
...                                       random_state=0).fit(X, y)
>>> clf.predict(X[:3]).tolist(), clf.threshold_.target_accuracy, 0.0 <= clf.theta_ <= 1.0   # the engine's method
(['0', '1', '2'], 0.95, True)
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing, check_random_state, get_tags, indexable
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d

from ..core.conformal import lca_set_paths, top_down_paths
from ..core.curves import hierarchical_rc_curve
from ..core.hierarchy import Hierarchy
from ..core.logit_chunks import node_probabilities_rows
from ..core.metric_rules import any_decision_paths, check_rule
from ..core.probabilities import node_probabilities, probability_logits
from ..core.rules import decision_paths
from ..core.validation import quote
from ..evaluation.card import decision_card
from ..evaluation.guarantee_methods import METHODS, GuaranteeData
from ..evaluation.model import ModelEvaluation
from .trees import as_hierarchy, leaf_indices

__all__ = ["HierarchicalSelectiveClassifier", "as_hierarchy", "haurc_score", "haurc_scorer", "leaf_indices"]

#: Fewest samples ``fit`` splits into a training and a calibration part.
MIN_SAMPLES = 4


def _flat_tree(classes: np.ndarray) -> Hierarchy:
    """The classes directly under one root: flat selective classification."""
    ids = [str(c) for c in classes.tolist()]
    root = "root" if "root" not in ids else "__root__"
    n = len(ids)
    return Hierarchy.from_parents([n] * n + [-1], n, ids + [root], ids + [root])


def _probability_columns(hierarchy: Hierarchy, proba: np.ndarray, classes: np.ndarray | None) -> np.ndarray:
    """(n, n_leaves) leaf probabilities from ``proba`` whose columns are ``classes`` (None: the
    leaves in order); a class outside the tree or a column count that does not match is one line."""
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"probabilities must be 2-D (n_samples, n_classes), got shape {p.shape}")
    if classes is None:
        if p.shape[1] != hierarchy.n_leaves:
            raise ValueError(f"the probabilities have {p.shape[1]} columns but the tree has {hierarchy.n_leaves} "
                             "leaves: give one column per leaf, in the tree's leaf order")
        return p
    if len(classes) != p.shape[1]:
        raise ValueError(f"the probabilities have {p.shape[1]} columns for {len(classes)} classes")
    try:
        cols = leaf_indices(hierarchy, classes)
    except ValueError as exc:
        raise ValueError(f"the classifier's classes do not match the tree's leaves: {exc}") from None
    if np.unique(cols).size != cols.size:
        raise ValueError("the classifier's classes do not match the tree's leaves: two classes are one leaf")
    out = np.zeros((p.shape[0], hierarchy.n_leaves))
    out[:, cols] = p  # a leaf the classifier never saw has probability 0
    return out


# ------------------------------------------------------------------------------------ scoring
def haurc_score(y_true: Any, y_proba: np.ndarray, *, hierarchy: Hierarchy | str | os.PathLike | Mapping[str, str],
                rule: str = "climbing", classes: Any = None) -> float:
    """hAURC of ``rule`` (lower is better) from leaf probabilities: the metric for ``make_scorer``.

    Parameters
    ----------
    y_true : (n,) true labels (leaf ids, names or indices; ``leaf_indices``).
    y_proba : (n, n_classes) probabilities; columns are ``classes`` (None: the tree's leaves in order).
    hierarchy : the class tree (``as_hierarchy``).
    rule : any registered rule (``rule_names()``).
    classes : the columns' labels (a classifier's ``classes_``), or None.

    Returns
    -------
    float : the exact hAURC on these samples and probabilities (``hierarchical_rc_curve``).

    Examples
    --------
    ``make_scorer(haurc_score, greater_is_better=False, response_method="predict_proba",
    hierarchy=tree)`` (columns in the tree's leaf order), or ``haurc_scorer(tree)``, which reads the
    classifier's ``classes_``.
    """
    h = as_hierarchy(hierarchy)
    leaf = _probability_columns(h, y_proba, None if classes is None else np.asarray(classes))
    labels = leaf_indices(h, column_or_1d(y_true))
    if labels.size != leaf.shape[0]:
        raise ValueError(f"{labels.size} labels for {leaf.shape[0]} rows of probabilities")
    rule = check_rule(rule)
    probs = node_probabilities(h, leaf)
    return float(hierarchical_rc_curve(h, probs, labels, paths=any_decision_paths(h, probs, rule)).haurc)


class _HaurcScorer:
    """``scorer(estimator, X, y)`` = −hAURC, reading the estimator's ``classes_`` (picklable)."""

    def __init__(self, hierarchy: Any, rule: str) -> None:
        self.hierarchy, self.rule = hierarchy, rule

    def __call__(self, estimator: Any, X: Any, y: Any) -> float:
        return -haurc_score(y, estimator.predict_proba(X), hierarchy=self.hierarchy, rule=self.rule,
                            classes=getattr(estimator, "classes_", None))

    def __repr__(self) -> str:
        return f"haurc_scorer(rule={self.rule!r})"


def haurc_scorer(hierarchy: Hierarchy | str | os.PathLike | Mapping[str, str], rule: str = "climbing") -> Any:
    """A scorer for ``GridSearchCV(scoring=…)``: −hAURC of ``rule`` (higher is better) of any
    classifier with ``predict_proba`` and ``classes_``, its columns mapped to the tree's leaves."""
    check_rule(rule)
    return _HaurcScorer(as_hierarchy(hierarchy), rule)


def _unlabelled(hierarchy: Hierarchy, probs: np.ndarray, family: str) -> GuaranteeData:
    """The ``GuaranteeData`` a calibrated rule reads to predict (paths, arg-max leaves, node
    probabilities) for samples without labels."""
    climbing = decision_paths(hierarchy, probs, "climbing")
    paths = {"climbing": climbing}
    if family == "lca_set":
        paths["lca_set"] = lca_set_paths(hierarchy, probs)
    elif family == "top_down":
        paths["top_down"] = top_down_paths(hierarchy, probs)
    n = probs.shape[0]
    return GuaranteeData(hierarchy, np.zeros(n, dtype=np.int64), paths, {}, np.zeros(n), climbing.nodes[:, 0], probs)


# ------------------------------------------------------------------------------------ the estimator
class HierarchicalSelectiveClassifier(ClassifierMixin, BaseEstimator):
    """Hierarchical selective classification around any scikit-learn classifier.

    Parameters
    ----------
    estimator : a classifier with ``predict_proba`` (default ``LogisticRegression()``); cloned and
        trained by ``fit`` unless ``prefit``.
    hierarchy : the class tree (``as_hierarchy``: a ``Hierarchy``, a hierarchy file, or a
        {child: parent} mapping of node ids); labels are its leaves' ids, names or indices. None:
        the classes of ``y`` under one root (flat selective classification).
    rule : the rule whose hAURC ``haurc_`` and ``score`` report (``rule_names()``).
    target_accuracy : 1 − α; None: no θ is certified and ``predict`` returns the arg-max leaf.
    method : a guarantee method (``guarantee_methods.METHODS``); None: the engine's default
        (``EvaluationSet.threshold``'s). The certified θ thresholds the method's own rule.
    delta : δ of the PAC methods (``needs_delta``); None for the others.
    n_cal : calibration size of the θ (default: the engine's, ``threshold.default_n_cal``).
    cal_size : share (float) or count (int) of the samples ``fit`` holds out for calibration.
    prefit : ``estimator`` is already trained: ``fit`` calibrates on all it is given.
    ts : fit a temperature T on the protocol's calibration split of the held-out data.
    random_state : seeds the train/calibration split and the θ's calibration draw.

    Attributes
    ----------
    estimator_ : the trained classifier.
    hierarchy_ : the ``Hierarchy``.
    classes_ : (n_leaves,) the leaves' labels (the tree's leaf names; with no tree, ``y``'s classes).
    node_labels_ : (n_nodes,) what ``predict`` returns for each node.
    temperature_ : T (1.0 without ``ts``).
    haurc_ : hAURC of ``rule`` on the held-out evaluation split (``rc_curve_and_haurc``'s).
    threshold_ : the ``ThresholdResult`` (θ, guarantee, held-out accuracy), or None.
    theta_ : the certified θ (0.0 with no target); method_ : the method used (None with no target).
    seed_ : the seed of the θ's calibration draw.
    calibration_scores_, calibration_labels_ : (n_cal, n_leaves) log-probabilities and (n_cal,)
        leaf indices of the calibration data (``decision_card()`` reads them).
    n_features_in_ : as the classifier's.
    """

    def __init__(self, estimator: Any = None, hierarchy: Any = None, rule: str = "climbing", *,
                 target_accuracy: float | None = None, method: str | None = None, delta: float | None = None,
                 n_cal: int | None = None, cal_size: float | int = 0.3, prefit: bool = False, ts: bool = True,
                 random_state: Any = None) -> None:
        self.estimator = estimator
        self.hierarchy = hierarchy
        self.rule = rule
        self.target_accuracy = target_accuracy
        self.method = method
        self.delta = delta
        self.n_cal = n_cal
        self.cal_size = cal_size
        self.prefit = prefit
        self.ts = ts
        self.random_state = random_state

    def _base(self) -> Any:
        return LogisticRegression() if self.estimator is None else self.estimator

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = get_tags(self._base()).input_tags.sparse
        return tags

    # -------------------------------------------------------------- fitting
    def fit(self, X: Any, y: Any, **fit_params: Any) -> HierarchicalSelectiveClassifier:
        """Train the classifier on ``1 − cal_size`` of the samples (all of it is calibration with
        ``prefit``) and calibrate T and θ on the rest (``calibrate``).

        Parameters
        ----------
        X : (n, …) what the classifier takes (arrays, sparse matrices, data frames, text …).
        y : (n,) labels: the tree's leaf ids, names or indices.
        fit_params : passed to the classifier's ``fit``.
        """
        X, y = indexable(X, self._check_y(y))  # one length, and X indexable by rows
        base = self._base()
        if not hasattr(base, "predict_proba"):
            raise TypeError(f"the classifier {type(base).__name__} has no predict_proba: pick one that has, or "
                            "wrap it in sklearn.calibration.CalibratedClassifierCV")
        rng = check_random_state(self.random_state)
        seed = self.random_state if isinstance(self.random_state, numbers.Integral) else int(rng.randint(2**31 - 1))
        self.seed_ = int(seed)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes, got {classes.size} class")
        self._set_tree(classes)
        if self.hierarchy is not None:
            leaf_indices(self.hierarchy_, y)  # a label outside the tree: one line, before any training
        if self.prefit:
            check_is_fitted(base)
            self.estimator_ = base
            X_cal, y_cal = X, y
        else:
            n = y.shape[0]
            if n < MIN_SAMPLES:
                raise ValueError(f"{type(self).__name__} needs at least {MIN_SAMPLES} samples to train and "
                                 f"calibrate, got {n} sample(s)")
            _, counts = np.unique(y, return_counts=True)
            n_hold = self.cal_size if isinstance(self.cal_size, numbers.Integral) else int(np.ceil(self.cal_size * n))
            stratify = y if counts.min() >= 2 and classes.size <= n_hold <= n - classes.size else None
            train, cal = train_test_split(np.arange(n), test_size=self.cal_size, random_state=self.seed_,
                                          stratify=stratify)
            if cal.size < 2:
                raise ValueError(f"cal_size={self.cal_size!r} leaves {cal.size} calibration sample(s); need ≥ 2")
            self.estimator_ = clone(base).fit(_safe_indexing(X, train), y[train], **fit_params)
            X_cal, y_cal = _safe_indexing(X, cal), y[cal]
        if hasattr(self.estimator_, "n_features_in_"):
            self.n_features_in_ = self.estimator_.n_features_in_
        if hasattr(self.estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.estimator_.feature_names_in_
        return self._calibrate(X_cal, y_cal)

    def calibrate(self, X: Any, y: Any) -> HierarchicalSelectiveClassifier:
        """Fit T and the certified θ on held-out ``(X, y)`` with the trained classifier (MAPIE's
        ``conformalize``): ``ModelEvaluation(tree, log p, labels).setting(ts)`` and its ``threshold``."""
        check_is_fitted(self, "estimator_")
        return self._calibrate(X, self._check_y(y))

    def _check_y(self, y: Any) -> np.ndarray:
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = column_or_1d(y, warn=True)
        if y.dtype.kind in "fc":
            check_array(y, ensure_2d=False, dtype=None, input_name="y")  # NaN / inf: one line
        check_classification_targets(y)
        return y

    def _set_tree(self, classes: np.ndarray) -> None:
        if self.hierarchy is None:
            self.hierarchy_ = _flat_tree(classes)
            self.classes_ = classes
        else:
            self.hierarchy_ = as_hierarchy(self.hierarchy)
            self.classes_ = np.asarray(self.hierarchy_.names[: self.hierarchy_.n_leaves])
        h = self.hierarchy_
        labels = list(self.classes_.tolist()) + list(h.names[h.n_leaves:])
        self.node_labels_ = np.asarray(labels) if self.hierarchy is not None else np.array(labels, dtype=object)

    def _labels(self, y: Any) -> np.ndarray:
        """(n,) leaf index of each label."""
        if self.hierarchy is None:
            index = {c: i for i, c in enumerate(self.classes_.tolist())}
            values = np.asarray(y).tolist()
            bad = [v for v in values if v not in index]
            if bad:
                raise ValueError(f"label {quote(bad[0])} was not among the classes seen in fit "
                                 f"({', '.join(quote(c) for c in self.classes_.tolist()[:5])}"
                                 f"{', …' if len(self.classes_) > 5 else ''})")
            return np.array([index[v] for v in values], dtype=np.int64)
        return leaf_indices(self.hierarchy_, y)

    def _calibrate(self, X: Any, y: np.ndarray) -> HierarchicalSelectiveClassifier:
        labels = self._labels(y)
        scores = self._scores(X)
        rule = check_rule(self.rule)
        es = ModelEvaluation(self.hierarchy_, scores, labels, name=type(self.estimator_).__name__).setting(self.ts)
        self.temperature_ = float(es.temperature)
        self.haurc_ = float(es.haurc(rule))
        self.threshold_ = None
        self.theta_, self.method_ = 0.0, None
        if self.target_accuracy is not None:
            chosen = {} if self.method is None else {"method": self.method}  # None: the engine's default
            self.threshold_ = es.threshold(self.target_accuracy, delta=self.delta, n=self.n_cal, seed=self.seed_,
                                           **chosen)
            self.theta_, self.method_ = float(self.threshold_.theta), self.threshold_.method
        self.calibration_scores_, self.calibration_labels_ = scores, labels
        return self

    # -------------------------------------------------------------- predicting
    def _scores(self, X: Any) -> np.ndarray:
        """(n, n_leaves) log-probabilities of the classifier, in the tree's leaf order."""
        est = self.estimator_
        return probability_logits(_probability_columns(self.hierarchy_, est.predict_proba(X),
                                                       np.asarray(getattr(est, "classes_", self.classes_))))

    def predict_proba_nodes(self, X: Any) -> np.ndarray:
        """(n, n_nodes) node probabilities (leaf probabilities at T, summed up the tree)."""
        check_is_fitted(self, "temperature_")
        scores = self._scores(X)
        return node_probabilities_rows(self.hierarchy_, scores, np.arange(scores.shape[0]), self.temperature_)

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, n_leaves) leaf probabilities at T; columns are ``classes_``."""
        return self.predict_proba_nodes(X)[:, : self.hierarchy_.n_leaves]

    def predict_nodes(self, X: Any) -> np.ndarray:
        """(n,) int64 node index predicted for each sample: the calibrated rule at θ (with no
        target, the arg-max leaf)."""
        probs = self.predict_proba_nodes(X)
        if self.threshold_ is None or self.threshold_.calibration is None:
            return decision_paths(self.hierarchy_, probs, "climbing").nodes[:, 0]
        cal = self.threshold_.calibration
        return cal.predict(_unlabelled(self.hierarchy_, probs, METHODS[cal.method].family))

    def predict(self, X: Any) -> np.ndarray:
        """(n,) node label of each prediction (``node_labels_``): a leaf's class, or an inner
        node's name when the rule abstains to it (the root: no answer)."""
        nodes = self.predict_nodes(X)
        if nodes.size and nodes.max() < self.hierarchy_.n_leaves:
            return self.classes_[nodes]  # leaves only: the classes' own dtype
        return self.node_labels_[nodes]

    def score(self, X: Any, y: Any) -> float:
        """−hAURC of ``rule`` on ``(X, y)`` at the fitted T (higher is better): what ``GridSearchCV``
        maximises by default."""
        probs = self.predict_proba_nodes(X)
        labels = self._labels(column_or_1d(y))
        rule = check_rule(self.rule)
        paths = any_decision_paths(self.hierarchy_, probs, rule)
        return -float(hierarchical_rc_curve(self.hierarchy_, probs, labels, paths=paths).haurc)

    def decision_card(self, **options: Any) -> dict[str, Any]:
        """The decision card of the certified θ (``decision_card``), on the calibration data;
        ``options``: ``reps``, ``n_resamples`` … Render it with ``card_markdown``."""
        check_is_fitted(self, "temperature_")
        if self.target_accuracy is None:
            raise ValueError("a decision card needs a target accuracy: set target_accuracy and fit again")
        ev = ModelEvaluation(self.hierarchy_, self.calibration_scores_, self.calibration_labels_,
                             name=type(self.estimator_).__name__)
        return decision_card(ev, target_accuracy=self.target_accuracy, delta=self.delta, method=str(self.method_),
                             n_cal=self.n_cal, ts=self.ts, seed=self.seed_, **options)
