"""HSC toolkit: Hierarchical Selective Classification (Goren, Galil & El-Yaniv, NeurIPS 2024).

The few names a researcher needs, importable from the package itself (one call per question:
``rc_curve_and_haurc``, ``threshold_for_accuracy``, ``decision_card``)::

    from hsc_core import ModelEvaluation, imagenet_hierarchy, load_logits

    h = imagenet_hierarchy()
    data = load_logits("cached_logits/efficientnet_lite0.npz")
    ev = ModelEvaluation.from_bundle(data, h)
    print(ev.setting(ts=True).haurc("climbing"))

Names are loaded lazily on first use (as MAPIE and SciPy do), so ``import hsc_core`` is quick and
never imports torch or Streamlit; the logits pipeline (``hsc_core.pipeline``) needs the
``[pipeline]`` extra. Modules that moved in 0.2 (``hsc_core.hierarchy`` → ``hsc_core.core.hierarchy``
…) still import from their old path, with a ``DeprecationWarning`` naming the new one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import TYPE_CHECKING, Any

__version__ = "1.4.3"

# name → module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    # the hierarchy and data
    "Hierarchy": "core.hierarchy",
    "load_hierarchy": "datasets.formats",
    "imagenet_hierarchy": "datasets.imagenet",
    "imagenet_tree": "datasets.imagenet_trees",
    "corrupt": "datasets.corruptions",
    "load_dataset": "datasets.registry",
    "load_logits": "datasets.logits_io",
    "save_logits": "datasets.logits_io",
    # probabilities
    "softmax": "core.probabilities",
    "node_probabilities": "core.probabilities",
    "fit_temperature": "core.probabilities",
    # the four rules
    "RULES": "core.rules",
    "decision_paths": "core.rules",
    "selective_predict": "core.rules",
    "climbing_predict": "core.rules",
    "jumping_predict": "core.rules",
    "max_coverage_predict": "core.rules",
    # curves and metrics
    "RCCurve": "core.curves",
    "hierarchical_rc_curve": "core.curves",
    "hierarchical_aurc": "core.curves",
    "hierarchical_gain": "core.curves",
    "bootstrap_haurc": "core.uncertainty",
    # every rule, named in one place (front ends list and label rules through it)
    "RuleSpec": "core.rule_registry",
    "get_rule": "core.rule_registry",
    "rule_names": "core.rule_registry",
    "rule_label": "core.rule_registry",
    "register_rule": "core.rule_registry",
    # calibrators and confidence scores beyond temperature scaling and softmax (issue 31)
    "calibrator_names": "core.calibrators",
    "get_calibrator": "core.calibrators",
    "fit_calibrator": "core.calibrators",
    "confidence_names": "core.confidence",
    "get_confidence": "core.confidence",
    "confidence_node_scores": "core.confidence",
    "fit_node_scorer": "core.confidence",
    "member_node_scores": "core.confidence",
    "load_members": "datasets.members",
    "calibrator_benchmark": "evaluation.calibrator_benchmark",
    # beyond the paper: metric-optimal and Pareto rules, and the metrics the field asks for
    "ALL_RULES": "core.metric_rules",
    "any_decision_paths": "core.metric_rules",
    "expected_scores": "core.node_scores",
    "node_scores": "core.node_scores",
    "pareto_records": "core.pareto",
    "aurc": "core.selective_metrics",
    "augrc": "core.selective_metrics",
    "oracle_haurc": "core.selective_metrics",
    "excess_haurc": "core.selective_metrics",
    "achievable_haurc": "core.selective_metrics",
    "risk_at_coverage": "core.selective_metrics",
    "coverage_at_risk": "core.selective_metrics",
    "hierarchical_prf": "core.hierarchical_prf",
    "RC_TABLE_COLUMNS": "evaluation.rc_table",
    "rc_table_rows": "evaluation.rc_table",
    # thresholds with a guarantee
    "optimal_threshold": "core.thresholds",
    "theorem1_epsilon": "core.thresholds",
    "solve_theorem1": "core.thresholds",
    "fwer_reject": "core.ltt",
    "lca_set_paths": "core.conformal",
    # the evaluation layer
    "ModelEvaluation": "evaluation.model",
    "EvaluationSet": "evaluation.model",
    "RESULT_COLUMNS": "evaluation.results",
    "wide_table": "evaluation.results",
    "to_csv": "evaluation.results",
    "GuaranteeData": "evaluation.guarantee_methods",
    "GuaranteeSettings": "evaluation.guarantee_methods",
    "calibrate": "evaluation.calibration",
    "shootout": "evaluation.shootout",
    "decision_card": "evaluation.card",
    "ThresholdResult": "evaluation.threshold",
    "calibration_draw": "evaluation.threshold",
    # one call per question, straight from logits
    "rc_curve_and_haurc": "evaluation.one_call",
    "threshold_for_accuracy": "evaluation.one_call",
    # the model atlas (per-model results tables, e.g. the authors' 1,116 models)
    "load_atlas_table": "evaluation.atlas",
    "training_regimes": "evaluation.atlas",
    "paper_table1": "evaluation.atlas",
    # where in the tree
    "landing_counts": "evaluation.diagnostics",
    "mistake_severity_histogram": "evaluation.diagnostics",
    "hierarchy_sensitivity": "evaluation.sensitivity",
    "guarantee_under_shift": "evaluation.shift",
    # after deployment: monitoring a θ on a stream
    "StreamMonitor": "evaluation.monitor",
    "Deployment": "evaluation.monitor",
    "monitor_stream": "evaluation.monitor",
    "confidence_sequence": "core.confseq",
    # per-rank scores (any hierarchical classifier's per-rank labels and confidences)
    "read_per_rank": "datasets.per_rank",
    "PerRankScores": "datasets.per_rank",
    "rank_rc_curve": "core.per_rank",
    "PerRankThresholds": "evaluation.per_rank",
    "fit_rank_thresholds": "evaluation.per_rank",
}

# spelled out (not derived from _EXPORTS) so linters and type checkers see the public names;
# tests/test_public_api.py checks that it matches _EXPORTS
__all__ = [
    "__version__",
    "Hierarchy", "load_hierarchy", "imagenet_hierarchy", "imagenet_tree", "corrupt", "load_dataset", "load_logits",
    "save_logits",
    "softmax", "node_probabilities", "fit_temperature",
    "RULES", "decision_paths", "selective_predict", "climbing_predict", "jumping_predict", "max_coverage_predict",
    "RCCurve", "hierarchical_rc_curve", "hierarchical_aurc", "hierarchical_gain", "bootstrap_haurc",
    "RuleSpec", "get_rule", "rule_names", "rule_label", "register_rule",
    "calibrator_names", "get_calibrator", "fit_calibrator", "confidence_names", "get_confidence",
    "confidence_node_scores", "fit_node_scorer", "member_node_scores", "load_members", "calibrator_benchmark",
    "ALL_RULES", "any_decision_paths", "expected_scores", "node_scores", "pareto_records",
    "aurc", "augrc", "oracle_haurc", "excess_haurc", "achievable_haurc", "risk_at_coverage", "coverage_at_risk",
    "hierarchical_prf", "RC_TABLE_COLUMNS", "rc_table_rows",
    "optimal_threshold", "theorem1_epsilon", "solve_theorem1", "fwer_reject", "lca_set_paths",
    "ModelEvaluation", "EvaluationSet", "RESULT_COLUMNS", "wide_table", "to_csv",
    "GuaranteeData", "GuaranteeSettings", "calibrate", "shootout", "decision_card", "ThresholdResult",
    "calibration_draw", "rc_curve_and_haurc", "threshold_for_accuracy",
    "load_atlas_table", "training_regimes", "paper_table1", "landing_counts", "mistake_severity_histogram",
    "hierarchy_sensitivity", "guarantee_under_shift",
    "StreamMonitor", "Deployment", "monitor_stream", "confidence_sequence",
    "read_per_rank", "PerRankScores", "rank_rc_curve", "PerRankThresholds", "fit_rank_thresholds",
]

# Modules that moved when the package was split into core/, datasets/ and pipeline/ (0.2).
_MOVED: dict[str, str] = {
    "baselines": "core.baselines", "curves": "core.curves", "hierarchy": "core.hierarchy",
    "probabilities": "core.probabilities", "risk": "core.risk", "rules": "core.rules",
    "synthetic": "core.synthetic", "thresholds": "core.thresholds", "validation": "core.validation",
    "build_imagenet_hierarchy": "datasets.build_imagenet_hierarchy", "imagenet": "datasets.imagenet",
    "logits_io": "datasets.logits_io", "cache_logits": "pipeline.cache_logits",
    "inference": "pipeline.inference", "models": "pipeline.models",
    # moved inside the package (0.3): the old dotted path, relative to hsc_core
    "core.repeated_splits": "evaluation.repeated_splits",
    "core.evaluation": "core.logit_chunks",  # the chunk loop over logits, not the evaluation layer
}
#: Names an old module path still offers although they moved on (old path → name → new module,
#: relative to hsc_core): ``from hsc_core.thresholds import repeated_split_evaluation`` keeps
#: working, with a DeprecationWarning. Resolved here, on first access, because ``core`` may not
#: import ``evaluation`` (tests/test_architecture.py).
_MOVED_NAMES: dict[str, dict[str, str]] = {
    "thresholds": {"repeated_split_evaluation": "evaluation.repeated_splits",
                   "summarize_repetitions": "evaluation.repeated_splits"},
}


def _moved_name_hook(old: str, module: Any) -> Any:
    """A module ``__getattr__`` for ``module`` (the new home of ``hsc_core.<old>``) that finds the
    names listed in ``_MOVED_NAMES[old]`` at their new module, with a DeprecationWarning."""
    names = _MOVED_NAMES[old]
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        if name in names:
            new = f"{__name__}.{names[name]}"
            warnings.warn(f"{__name__}.{old}.{name} moved to {new}.{name}: import it from there (the old path "
                          "goes in 1.1)", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(new), name)
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    return __getattr__


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _MOVED and "." not in name:  # a dotted old path is a module path, never an attribute
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``hsc_core.<old>`` as the module at its new path (the same module object, so
    classes and caches are shared), with a DeprecationWarning that names the new path."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(f"{__name__}.") or fullname[len(__name__) + 1:] not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = f"{__name__}.{_MOVED[spec.name[len(__name__) + 1:]]}"
        warnings.warn(f"{spec.name} moved to {new}: import it from there (the old path goes in 1.1)",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        old = spec.name[len(__name__) + 1:]
        if old in _MOVED_NAMES and "__getattr__" not in module.__dict__:  # names that moved on from there
            module.__dict__["__getattr__"] = _moved_name_hook(old, module)  # a PEP 562 module hook
        self._real_spec = module.__spec__  # the import system overwrites __spec__ after this
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self._real_spec  # keep the module's own identity


sys.meta_path.append(_MovedModules())

if TYPE_CHECKING:  # for type checkers and IDEs: the lazy names, statically
    from .core.calibrators import calibrator_names, fit_calibrator, get_calibrator
    from .core.confidence import (
        confidence_names,
        confidence_node_scores,
        fit_node_scorer,
        get_confidence,
        member_node_scores,
    )
    from .core.conformal import lca_set_paths
    from .core.confseq import confidence_sequence
    from .core.curves import RCCurve, hierarchical_aurc, hierarchical_gain, hierarchical_rc_curve
    from .core.hierarchy import Hierarchy
    from .core.ltt import fwer_reject
    from .core.probabilities import fit_temperature, node_probabilities, softmax
    from .core.rule_registry import RuleSpec, get_rule, register_rule, rule_label, rule_names
    from .core.rules import (
        RULES,
        climbing_predict,
        decision_paths,
        jumping_predict,
        max_coverage_predict,
        selective_predict,
    )
    from .core.thresholds import optimal_threshold, solve_theorem1, theorem1_epsilon
    from .core.uncertainty import bootstrap_haurc
    from .datasets.formats import load_hierarchy
    from .datasets.imagenet import imagenet_hierarchy
    from .datasets.logits_io import load_logits, save_logits
    from .datasets.members import load_members
    from .datasets.registry import load_dataset
    from .evaluation.calibration import calibrate
    from .evaluation.calibrator_benchmark import calibrator_benchmark
    from .evaluation.card import decision_card
    from .evaluation.guarantee_methods import GuaranteeData, GuaranteeSettings
    from .evaluation.model import EvaluationSet, ModelEvaluation
    from .evaluation.monitor import Deployment, StreamMonitor, monitor_stream
    from .evaluation.one_call import rc_curve_and_haurc, threshold_for_accuracy
    from .evaluation.results import RESULT_COLUMNS, to_csv, wide_table
    from .evaluation.shootout import shootout
    from .evaluation.threshold import ThresholdResult, calibration_draw
