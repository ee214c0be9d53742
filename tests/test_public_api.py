"""The public API: ``from hsc_core import …``, lazy loading (no torch, no Streamlit), the moved
modules' old paths, the user guide's library snippet (docs/guide/library.md) and the doctested examples."""

from __future__ import annotations

import doctest
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import hsc_core

REPO = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves_to_its_defining_module():
    assert set(hsc_core.__all__) == {"__version__", *hsc_core._EXPORTS}
    for name, module in hsc_core._EXPORTS.items():
        value = getattr(hsc_core, name)
        assert value is getattr(importlib.import_module(f"hsc_core.{module}"), name), name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        hsc_core.nope  # noqa: B018


def test_importing_the_package_and_the_layer_loads_neither_torch_nor_streamlit_nor_sklearn():
    code = ("import sys, hsc_core, hsc_core.evaluation, hsc_core.report.html_report; "
            "from hsc_core import ModelEvaluation, climbing_predict; "
            "bad = [m for m in ('torch', 'timm', 'torchvision', 'streamlit', 'sklearn', 'torchmetrics') "
            "if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("old, new", sorted(hsc_core._MOVED.items()))
def test_moved_modules_import_from_their_old_path_with_a_warning(old, new):
    if new.startswith("pipeline."):
        pytest.importorskip("torch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(f"hsc_core.{old}")
    real = importlib.import_module(f"hsc_core.{new}")
    assert module is real and real.__spec__.name == f"hsc_core.{new}"
    assert any(f"hsc_core.{old} moved to hsc_core.{new}" in str(w.message) and w.category is DeprecationWarning
               for w in caught) or f"hsc_core.{old}" in sys.modules


def test_library_guide_snippet_runs(capsys, monkeypatch):
    text = (REPO / "docs" / "guide" / "library.md").read_text(encoding="utf-8")  # the README's, moved (issue 45)
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "from hsc_core import" in code
    monkeypatch.chdir(REPO)
    exec(compile(code, "library.md", "exec"), {})  # noqa: S102 - our own docs
    out = capsys.readouterr().out
    assert "0.015547" in out and "Interval(" in out and "12.6159" in out  # ε of Theorem 1; Lite0 TS gain


DOCTESTED = [
    "hsc_core.config", "hsc_core.core.rules", "hsc_core.core.probabilities", "hsc_core.core.curves",
    "hsc_core.core.thresholds", "hsc_core.core.events", "hsc_core.core.protocol", "hsc_core.core.validation",
    "hsc_core.core.ltt", "hsc_core.core.conformal",
    "hsc_core.evaluation.model", "hsc_core.evaluation.results", "hsc_core.evaluation.atlas",
    "hsc_core.evaluation.diagnostics", "hsc_core.evaluation.threshold",
    "hsc_core.evaluation.guarantee_methods", "hsc_core.core.node_scores", "hsc_core.core.pareto",
    "hsc_core.core.metric_rules",
    "hsc_core.core.selective_metrics", "hsc_core.core.hierarchical_prf",
    "hsc_core.datasets.corruptions", "hsc_core.datasets.imagenet_trees", "hsc_core.evaluation.sensitivity",
    "hsc_core.pipeline.caching.ensemble", "hsc_core.evaluation.one_call", "hsc_core.evaluation.card",
    "dashboard.headlines", "dashboard.navigation", "hsc_core.core.named_registry",
]


@pytest.mark.parametrize("name", DOCTESTED)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_guarantees_front_door_keeps_every_name_and_warns_on_the_old_settings_name():
    """``evaluation.guarantees`` re-exports the split modules' names (the same objects); the
    class's old second name ``Settings`` still works, with a DeprecationWarning."""
    from hsc_core.evaluation import calibration, guarantee_methods, guarantees, shootout

    for name in guarantees.__all__:
        value = getattr(guarantees, name)
        homes = [m for m in (guarantee_methods, calibration, shootout) if getattr(m, name, None) is value]
        assert homes or name == "FWER_PROCEDURES", name
    assert guarantees.GuaranteeSettings.__name__ == "GuaranteeSettings"
    with pytest.warns(DeprecationWarning, match="Settings is now GuaranteeSettings"):
        from hsc_core.evaluation.guarantees import Settings
    assert Settings is guarantee_methods.GuaranteeSettings
    assert Settings(alpha=0.1).target == pytest.approx(0.9)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        guarantees.nope  # noqa: B018


def test_the_chunk_loop_imports_from_its_old_path_with_a_warning():
    sys.modules.pop("hsc_core.core.evaluation", None)
    with pytest.warns(DeprecationWarning, match="hsc_core.core.evaluation moved to hsc_core.core.logit_chunks"):
        from hsc_core.core.evaluation import decision_paths_from_logits
    from hsc_core.core.logit_chunks import decision_paths_from_logits as new

    assert decision_paths_from_logits is new


def test_the_rule_registry_and_one_split_threshold_are_public():
    from hsc_core import RuleSpec, ThresholdResult, calibration_draw, get_rule, register_rule, rule_label, rule_names

    assert {"RuleSpec", "get_rule", "rule_names", "register_rule", "ThresholdResult", "calibration_draw"} <= set(
        hsc_core.__all__)
    assert rule_names(paper=True) == ("selective", "climbing", "jumping", "max_coverage")
    assert isinstance(get_rule("climbing"), RuleSpec) and rule_label("climbing") == "Climbing"
    assert callable(register_rule) and ThresholdResult.__name__ == "ThresholdResult"
    labels = np.repeat(np.arange(4), 25)
    cal, test = calibration_draw(labels, 20, seed=0)  # stratified: 5 of each of the 4 equal classes
    assert np.bincount(labels[cal]).tolist() == [5, 5, 5, 5] and int(test.sum()) == 80 and not test[cal].any()
