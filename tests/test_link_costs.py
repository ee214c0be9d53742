"""What one link may cost the server (issue 42, item 2): the Calibrators page starts at most
``RUN_BUDGET_S`` seconds of new work a run (its estimate scaled from the shipped models' times), the pairs
beyond wait for the next run, and a fit longer than a run is refused in one line; the rows a run shows
are the library's (``calibrator_benchmark``) numbers, whichever run computed them. A temperature per
depth on a tree deeper than 64 (its work grows as depth² on a caterpillar) is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_tree

from dashboard import calibrators as cal
from hsc_core.core.calibrators import MAX_TEMPERATURE_DEPTHS, calibrator_limit, fit_calibrator
from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.synthetic import synthetic_logits
from hsc_core.evaluation.calibrator_benchmark import calibrator_benchmark, row_held
from hsc_core.evaluation.model import ModelEvaluation

CALS = ("none", "temperature", "vector", "isotonic")
SCORES = ("softmax", "margin", "entropy")


def _model(n_leaves: int = 20, n: int = 400, seed: int = 0, name: str = "m") -> ModelEvaluation:
    tree = random_tree(n_leaves, seed=seed)
    logits, labels = synthetic_logits(tree, n, top1=0.6, seed=seed)
    return ModelEvaluation(tree, logits, labels, name=name)


def test_estimates_scale_from_the_shipped_models():
    ev = _model()
    ref = cal.REFERENCE
    classes, n_cal, n_eval = ev.hierarchy.n_leaves / ref["classes"], ev.n_cal / ref["n_cal"], \
        (ev.n_samples - ev.n_cal) / ref["n_eval"]
    assert cal.fit_seconds(ev, "dirichlet") == pytest.approx(cal.FIT_SECONDS["dirichlet"] * classes ** 2 * n_cal)
    assert cal.fit_seconds(ev, "vector") == pytest.approx(cal.FIT_SECONDS["vector"] * classes * n_cal)
    assert cal.fit_seconds(ev, "none") == cal.fit_seconds(ev, "isotonic") == 0.0  # no fit worth counting
    assert cal.pair_seconds(ev, True) == pytest.approx((cal.ROW_SECONDS + cal.INTERVAL_SECONDS) * n_eval * classes)
    ev.fitted_calibrator("vector")
    assert cal.fit_seconds(ev, "vector") == 0.0  # held: free


def test_a_run_stops_at_its_budget_and_the_next_goes_on():
    evs = [_model(seed=1, name="a"), _model(seed=2, name="b")]
    one = cal.pair_seconds(evs[0], False)
    budget = 3.5 * one  # three pairs a run (vector's fit is about a tenth of a pair here)
    total = len(CALS) * len(SCORES) * 2
    seen = []
    for _ in range(20):
        bench = cal.benchmark(evs, CALS, SCORES, "climbing", False, budget=budget)
        seen.append(len(bench.rows))
        if not bench.left:
            break
        assert bench.left == total - len(bench.rows) and bench.left_seconds > 0
        assert "more calibrator × score pairs need about" in cal.left_note(bench)
    assert seen[0] == 3 and seen == sorted(seen) and seen[-1] == total and cal.left_note(bench) is None
    full = calibrator_benchmark(evs, calibrators=CALS, confidences=SCORES, intervals=False)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in bench.rows]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in full]  # the library's rows, ★ too


def test_a_fit_longer_than_a_run_is_refused_and_never_started(monkeypatch):
    ev = _model(n_leaves=12, n=300, seed=3, name="wide")
    monkeypatch.setitem(cal.FIT_SECONDS, "dirichlet", 1e6)
    bench = cal.benchmark([ev], ("temperature", "dirichlet"), ("softmax",), "climbing", False)
    assert [r["calibrator"] for r in bench.rows] == ["temperature"] and not ev.is_fitted("dirichlet")
    assert len(bench.refused) == 1 and "\n" not in bench.refused[0]
    assert bench.refused[0].startswith("Dirichlet") and "s to fit on wide, more than one run" in bench.refused[0]
    assert "`hsc evaluate --calibrator dirichlet`" in bench.refused[0]
    other = _model(n_leaves=12, n=300, seed=4, name="other")
    bench = cal.benchmark([ev, other], ("dirichlet",), ("softmax", "margin"), "climbing", False)
    assert len(bench.refused) == 1 and "to fit on each of 2 models" in bench.refused[0]  # one line per calibrator
    assert not row_held(ev, "dirichlet", "softmax", intervals=False)


def test_the_shipped_link_of_every_pair_on_every_model_is_bounded():
    """The attack's link (c_scope=all, all 7 calibrators × all 7 scores, intervals) on three models of the
    shipped size: what the first run would start is at most the budget, by the estimates."""
    class Shipped:  # the size of the shipped ImageNet models, nothing computed
        hierarchy = type("H", (), {"n_leaves": 1000})()
        n_cal, n_samples = 189, 1894

        def is_fitted(self, calibrator):
            return calibrator == "none"

    fits = sum(cal.fit_seconds(Shipped(), c) for c in cal.CALIBRATOR_CHOICES)
    pairs = len(cal.CALIBRATOR_CHOICES) * 5 * cal.pair_seconds(Shipped(), True)  # 5 scores without members
    assert 3 * (fits + pairs) > 10 * cal.RUN_BUDGET_S  # the whole link: minutes
    assert cal.fit_seconds(Shipped(), "dirichlet") > cal.RUN_BUDGET_S  # refused on the page
    assert cal.fit_seconds(Shipped(), "matrix") < cal.RUN_BUDGET_S  # one a run
    assert np.isclose(cal.pair_seconds(Shipped(), True), cal.ROW_SECONDS + cal.INTERVAL_SECONDS)


def caterpillar(depth: int) -> Hierarchy:
    """Internal n0 (root) … n{depth-1}, leaf c{k} under n{k}, c{depth} under the deepest: ``depth`` deep."""
    n_leaves = depth + 1
    parent = np.empty(n_leaves + depth, dtype=np.int64)
    parent[:depth] = n_leaves + np.arange(depth)
    parent[depth] = n_leaves + depth - 1
    parent[n_leaves] = -1
    parent[n_leaves + 1:] = n_leaves + np.arange(depth - 1)
    return Hierarchy.from_parents(parent, n_leaves)


def test_a_tree_too_deep_for_a_temperature_per_depth_is_refused_in_one_line():
    assert calibrator_limit("depth_temperature", caterpillar(MAX_TEMPERATURE_DEPTHS - 1)) is None
    deep = caterpillar(100)
    assert deep.max_depth == 100
    why = calibrator_limit("depth_temperature", deep)
    assert why == ("depth_temperature fits one temperature per depth: this tree is 100 deep, over the 64 it accepts "
                   "(its work grows as depth × samples × classes); use temperature")
    assert all(calibrator_limit(c, deep) is None for c in cal.CALIBRATOR_CHOICES if c != "depth_temperature")
    logits, labels = synthetic_logits(deep, 200, top1=0.6, seed=0)
    with pytest.raises(ValueError, match="this tree is 100 deep"):
        fit_calibrator("depth_temperature", deep, logits, labels)
    ev = ModelEvaluation(deep, logits, labels, name="cat")
    bench = cal.benchmark([ev], ("temperature", "depth_temperature"), ("softmax", "margin"), "climbing", False)
    assert [r["calibrator"] for r in bench.rows] == ["temperature", "temperature"]
    assert bench.refused == [f"cat: {why}"] and not ev.is_fitted("depth_temperature")


def test_every_listed_model_means_at_most_the_models_the_server_keeps():
    from dashboard.evaluations import EVALUATIONS_KEPT

    few = {f"m{k}": f"/x/m{k}.npz" for k in range(3)}
    assert cal.scope_models(few) == (few, None)
    many = {f"m{k:02d}": f"/x/m{k}.npz" for k in range(EVALUATIONS_KEPT + 5)}
    kept, note = cal.scope_models(many)
    assert list(kept) == list(many)[:EVALUATIONS_KEPT]
    assert note == f"The first {EVALUATIONS_KEPT} of {EVALUATIONS_KEPT + 5} listed models: the server keeps the " \
                   f"evaluations of {EVALUATIONS_KEPT} models at a time."
