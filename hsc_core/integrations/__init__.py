"""Bring a model, not a logits file: the toolkit inside the ecosystems researchers already use.

* ``hsc_core.integrations.sklearn``: ``HierarchicalSelectiveClassifier``, a scikit-learn estimator
  that wraps any classifier with ``predict_proba`` (needs scikit-learn), and ``haurc_score`` /
  ``haurc_scorer`` for ``GridSearchCV``.
* ``hsc_core.integrations.torchmetrics``: ``HierarchicalAURC`` and ``HierarchicalRiskAtCoverage``,
  ``torchmetrics.Metric`` s for training loops (needs torch and torchmetrics).
* ``hsc_core.integrations.hiclass``: a HiClass classifier's tree and per-level probabilities as the
  toolkit's ``Hierarchy`` and node scores (needs HiClass).

Every number comes from the evaluation layer (``ModelEvaluation``, the guarantee engine), so an
estimator's hAURC and θ equal ``rc_curve_and_haurc`` / ``threshold_for_accuracy`` on the same
probabilities. Nothing here is imported by ``import hsc_core``: each module imports its third-party
package at the top, and only when it is itself imported.
"""
