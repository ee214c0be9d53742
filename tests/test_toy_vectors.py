"""The §9 test vectors of the definitions file, and hand-computed toy-tree values."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TOY_LABELS, TOY_LEAF_PROBS

from hsc_core.core.curves import area_under_rc, hierarchical_rc_curve
from hsc_core.core.risk import hierarchical_correctness, severity_loss
from hsc_core.core.rules import RULES, predict
from hsc_core.core.thresholds import climbing_tight_thresholds, selective_thresholds

GRID = [0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.60, 0.65, 0.70, 0.80, 0.90, 1.00]

PREDICTIONS = {  # θ → rule → nodes of s0…s4 (definitions §9)
    0.3: {"selective": [0, 0, 3, 8, 4], "climbing": [0, 0, 3, 5, 4], "max_coverage": [0, 0, 3, 5, 4], "jumping": [0, 0, 3, 6, 4]},
    0.4: {"selective": [8, 0, 8, 8, 4], "climbing": [8, 0, 6, 5, 4], "max_coverage": [6, 0, 6, 5, 4], "jumping": [6, 0, 6, 6, 4]},
    0.55: {"selective": [8, 0, 8, 8, 4], "climbing": [8, 0, 6, 8, 4], "max_coverage": [7, 0, 6, 7, 4], "jumping": [7, 0, 6, 7, 4]},
    0.9: {"selective": [8, 8, 8, 8, 8], "climbing": [8, 8, 8, 8, 7], "max_coverage": [8, 8, 8, 8, 7], "jumping": [8, 8, 8, 8, 7]},
}


def test_coverage_and_heights(toy):
    np.testing.assert_allclose(toy.coverage, [1, 1, 1, 1, 1, .569323, .569323, .317394, 0], atol=1e-6)
    assert toy.heights == ((0, 1), (0, 1), (0, 1), (0,), (0,), (2,), (1,), (2,), (3,))
    assert int(toy.lca(0, 1)) == 5 and int(toy.lca(3, 2)) == 7 and int(toy.lca(0, 4)) == 8


@pytest.mark.parametrize("theta", sorted(PREDICTIONS))
@pytest.mark.parametrize("rule", RULES)
def test_predictions(toy, toy_probs, theta, rule):
    nodes, conf = predict(toy, toy_probs, theta, rule)
    assert nodes.tolist() == PREDICTIONS[theta][rule]
    # Confidence is the chosen node's probability, exactly 1.0 at the root.
    expected = np.where(nodes == toy.root, 1.0, toy_probs[np.arange(5), nodes])
    np.testing.assert_allclose(conf, expected, atol=1e-12)


def test_thresholds_and_severity(toy, toy_probs):
    np.testing.assert_allclose(climbing_tight_thresholds(toy, toy_probs, TOY_LABELS),
                               [0.35000068, 0.70000011, 0.35000023, 0, 0], atol=5e-8)
    np.testing.assert_allclose(selective_thresholds(toy, toy_probs, TOY_LABELS),
                               [0.300001, 0.700001, 0.350001, 0, 0], atol=1e-9)
    np.testing.assert_allclose(severity_loss(toy, [0, 0, 3, 0, 4], TOY_LABELS),
                               [1.0, 0.430677, 0.430677, 0, 0], atol=1e-6)


@pytest.mark.parametrize("loss, expected", [("01", 0.320000), ("severity", 0.171976)])
@pytest.mark.parametrize("dec", [None, 2])
def test_selective_haurc_matches_authors(toy, toy_probs, loss, expected, dec):
    assert hierarchical_rc_curve(toy, toy_probs, TOY_LABELS, "selective", loss, dec=dec).haurc == pytest.approx(expected, abs=5e-7)


def _hand_haurc(toy, toy_probs, rule, loss):
    """Trapezoid over the §9 θ grid with predictions taken straight from the table-style rules."""
    cov, risk = [], []
    for theta in GRID:
        nodes, _ = predict(toy, toy_probs, theta, rule)
        cov.append(toy.coverage[nodes].mean())
        risk.append(1 - hierarchical_correctness(toy, nodes, TOY_LABELS).mean() if loss == "01"
                    else severity_loss(toy, nodes, TOY_LABELS).mean())
    return area_under_rc(cov, risk, GRID)


# The definitions' §9 hAURC, from the authors' float32 node probabilities (their torch matmul).
AUTHORS_HAURC = {
    "selective": (0.320000, 0.171976),
    "climbing": (0.239787, 0.134273),
    "max_coverage": (0.257169, 0.138113),
    "jumping": (0.310314, 0.191258),
}


def _authors_float32_node_probs(toy):
    """``desc_matrix @ probs_leafᵀ`` in float32 as the authors' torch matmul returned it.

    A float32 matmul's last bit depends on its kernel's summation order, which differs between
    CPUs and BLAS builds: torch gives s2's node B (0.2 + 0.35 + 0.25) as 0.79999995 on some
    machines and 0.8 on others. The authors' numbers need 0.79999995 there (with 0.8 they are the
    exact values below), so the test builds that table explicitly: float32 sums in leaf order,
    with s2's B set to the authors' 0.79999995 = float32((0.2 + 0.25) + 0.35).
    """
    leaf = TOY_LEAF_PROBS.astype(np.float32)
    desc = toy.leaf_matrix.toarray().astype(bool)
    out = np.array([[np.float32(sum((row[j] for j in np.flatnonzero(m)), np.float32(0))) for m in desc]
                    for row in leaf], dtype=np.float32)
    b = toy.node_ids.index("B")
    assert out[2, b] == np.float32(0.8)
    out[2, b] = np.float32(np.float32(0.2) + np.float32(0.25)) + np.float32(0.35)
    assert out[2, b] == np.float32(0.79999995)
    return out


@pytest.mark.parametrize("rule", sorted(AUTHORS_HAURC))
def test_haurc_reproduces_authors_vectors_exactly(toy, rule):
    """Fed the authors' float32 probabilities, the dec=2 curve gives their numbers to 6 decimals.

    s2's node B sums to 0.79999995 in torch float32 (0.8 exactly in real arithmetic), so at the
    grid θ = 0.8 it is rejected there: the only reason these differ from the exact values below.
    """
    probs32 = _authors_float32_node_probs(toy)
    for loss, expected in zip(("01", "severity"), AUTHORS_HAURC[rule], strict=True):
        got = hierarchical_rc_curve(toy, probs32, TOY_LABELS, rule, loss, dec=2).haurc
        assert round(got, 6) == pytest.approx(expected, abs=1e-9)


# Exact-arithmetic values of the same toy set: every grid θ that equals a node probability
# accepts it (the §9 prediction table is exact arithmetic too and matches ours in full).
EXACT = {"climbing": (0.233440, 0.131539), "max_coverage": (0.250821, 0.135379), "jumping": (0.303966, 0.188524)}


@pytest.mark.parametrize("rule", sorted(EXACT))
def test_hierarchical_haurc_toy(toy, toy_probs, rule):
    for loss, expected in zip(("01", "severity"), EXACT[rule], strict=True):
        assert _hand_haurc(toy, toy_probs, rule, loss) == pytest.approx(expected, abs=5e-7)
        for dec in (None, 2):
            assert hierarchical_rc_curve(toy, toy_probs, TOY_LABELS, rule, loss, dec=dec).haurc == pytest.approx(expected, abs=5e-7)


def test_exact_curve_points_by_hand(toy, toy_probs):
    """Selective on the toy set: accept s4 (0.7), s1 (0.7), s2 (0.35), s0 (0.30), s3 (0.20)."""
    c = hierarchical_rc_curve(toy, toy_probs, TOY_LABELS, "selective")
    np.testing.assert_allclose(c.events, [0.2, 0.3, 0.35, 0.7])
    np.testing.assert_allclose(c.coverage, [1.0, 0.8, 0.6, 0.4, 0.0])
    # Wrong when accepted: s0 (pred 0, y 2), s1 (pred 0, y 1), s2 (pred 3, y 4); s3 and s4 right.
    np.testing.assert_allclose(c.risk, [0.6, 0.6, 0.4, 0.2, 0.0])
    assert c.at(0.0) == (1.0, 0.6)
    assert c.at(0.3) == pytest.approx((0.8, 0.6))  # θ = 0.3 still accepts s0 (≥)
    assert c.at(0.31) == pytest.approx((0.6, 0.4))
    assert c.at(1.0) == (0.0, 0.0)
