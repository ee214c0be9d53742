"""Old import paths of names that moved (issue 34): they keep working one release, with a
DeprecationWarning, and the old module path does not import the layer above ``core`` until the
moved name is asked for (tests/test_architecture.py forbids core → evaluation)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import hsc_core.thresholds as old
    loaded = sorted(k for k in sys.modules if k.startswith("hsc_core.evaluation"))
    from hsc_core.thresholds import repeated_split_evaluation, summarize_repetitions, select_threshold
from hsc_core.evaluation import repeated_splits
from hsc_core.core import thresholds
assert old is thresholds, "the old path is the same module object"
assert loaded == [], loaded
assert repeated_split_evaluation is repeated_splits.repeated_split_evaluation
assert summarize_repetitions is repeated_splits.summarize_repetitions
assert select_threshold is thresholds.select_threshold
messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
assert any("hsc_core.thresholds.repeated_split_evaluation moved to hsc_core.evaluation.repeated_splits" in m
           for m in messages), messages
try:
    thresholds.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("an unknown name must stay an AttributeError")
with warnings.catch_warnings(record=True) as caught:
    import hsc_core.core.repeated_splits as moved
assert moved is repeated_splits
assert any("hsc_core.core.repeated_splits moved to hsc_core.evaluation.repeated_splits" in str(w.message)
           for w in caught)
print("ok")
"""


def test_old_thresholds_path_still_offers_the_repeated_split_functions():
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
