"""One θ per rank with a guarantee, for per-rank scores: the controller, the split study and the card.

``PerRankThresholds`` (MAPIE-style: settings in the constructor, ``fit`` on a calibration set,
``predict`` on new samples) learns one θ per rank by Learn then Test over ``core.per_rank``'s
monotone paths, so that hierarchical accuracy ≥ 1 − α with probability ≥ 1 − δ over the
calibration set; ``fit_rank_thresholds`` is the one call. ``compare_rank_thresholds`` repeats the
calibration over ≥ 1,000 random calibration/test splits, beside hand-picked thresholds, and
``rank_card`` / ``rank_card_markdown`` / ``rank_card_json`` write the decision card of ``hsc ranks``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import config
from ..core.per_rank import (
    TILTS,
    answer_ranks,
    evaluate_thetas,
    ltt_select,
    rank_rc_curve,
    theta_paths,
    vector_outcomes,
)
from ..datasets.per_rank import PerRankScores
from .card import md_text

N_REPS = 1000
SEED = 0
CAL_FRACTION = 0.5
N_LAMBDAS = 100
LTT_NAME = "LTT per rank"


def _check_levels(target_accuracy: float, delta: float) -> tuple[float, float]:
    if not 0.0 < float(target_accuracy) < 1.0:
        raise ValueError(f"the target accuracy must lie in (0, 1), got {target_accuracy}")
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return 1.0 - float(target_accuracy), float(delta)


class PerRankThresholds:
    """Learn one θ per rank so that hierarchical accuracy ≥ target with probability ≥ 1 − δ.

    Parameters
    ----------
    target_accuracy : 1 − α, the accuracy to guarantee (abstentions count as correct).
    delta : the probability, over the calibration set, that the guarantee may fail.
    n_lambdas : points per path (``core.ltt.ltt_theta_grid``).
    tilts : the paths' tilts (``core.per_rank.theta_paths``).

    Attributes
    ----------
    thetas_ : (R,) the θ per rank, coarsest first (set by ``fit``); +inf everywhere when no vector was certified.
    found_ : whether a vector was certified (else every sample abstains).
    ranks_ : the rank names.
    n_cal_ : the calibration size.
    """

    def __init__(self, target_accuracy: float = 0.95, delta: float = 0.1, *, n_lambdas: int = N_LAMBDAS,
                 tilts: Sequence[float] = TILTS) -> None:
        self.alpha, self.delta = _check_levels(target_accuracy, delta)
        self.target_accuracy = float(target_accuracy)
        self.n_lambdas = int(n_lambdas)
        self.tilts = tuple(float(t) for t in tilts)

    def vectors(self, n_ranks: int) -> np.ndarray:
        """(S, m, R) the θ vectors LTT tests (fixed before seeing data)."""
        return theta_paths(n_ranks, self.n_lambdas, self.tilts)

    def fit(self, scores: PerRankScores) -> PerRankThresholds:
        """Calibrate on ``scores`` (every row is a calibration sample)."""
        paths = self.vectors(len(scores.ranks))
        errors, cov = vector_outcomes(scores.conf, scores.correct, scores.coverage, paths)
        shape = paths.shape[:2]
        choice, found = ltt_select(errors.sum(axis=1).reshape(shape), cov.sum(axis=1, dtype=float).reshape(shape),
                                   scores.n, self.alpha, self.delta)
        self.found_ = bool(found)
        flat = paths.reshape(-1, len(scores.ranks))
        self.thetas_ = flat[int(choice)].copy() if self.found_ else np.full(len(scores.ranks), np.inf)
        self.ranks_ = tuple(scores.ranks)
        self.n_cal_ = scores.n
        return self

    def _fitted(self) -> np.ndarray:
        if not hasattr(self, "thetas_"):
            raise ValueError("call fit(calibration scores) first")
        return self.thetas_

    def predict(self, scores: PerRankScores) -> np.ndarray:
        """(n,) the rank each sample answers at (index into ``ranks_``; −1: the root, abstain)."""
        thetas = self._fitted()
        if tuple(scores.ranks) != self.ranks_:
            raise ValueError(f"these scores have ranks {list(scores.ranks)}, the fit had {list(self.ranks_)}")
        return answer_ranks(scores.conf, thetas)

    def evaluate(self, scores: PerRankScores) -> dict[str, Any]:
        """Accuracy, coverage and answer share per rank on ``scores`` at the fitted θ."""
        return evaluate_thetas(scores.conf, scores.correct, scores.coverage, self._fitted())

    def thetas_dict(self) -> dict[str, float | None]:
        """``{rank: θ}``, coarsest first; None where the rank never answers (no certified vector)."""
        return {r: (None if not math.isfinite(t) else float(t)) for r, t in zip(self.ranks_, self._fitted(),
                                                                                  strict=True)}


def fit_rank_thresholds(scores: PerRankScores, target_accuracy: float, delta: float, **options: Any
                        ) -> PerRankThresholds:
    """One call: ``PerRankThresholds(target_accuracy, delta, **options).fit(scores)``."""
    return PerRankThresholds(target_accuracy, delta, **options).fit(scores)


# ------------------------------------------------------------------------ hand-picked thresholds
def _finest_three(n_ranks: int) -> np.ndarray:
    """0.8 / 0.6 / 0.4 from the finest rank up; coarser ranks never answer (as the hard-coded rule)."""
    th = np.full(n_ranks, np.inf)
    for k, value in enumerate((0.8, 0.6, 0.4)[:n_ranks]):
        th[n_ranks - 1 - k] = value
    return th


HAND_PICKED: dict[str, Callable[[int], np.ndarray]] = {
    "0.8/0.6/0.4 (finest three ranks)": _finest_three,
    "flat 0.5": lambda n_ranks: np.full(n_ranks, 0.5),
    "flat 0.8": lambda n_ranks: np.full(n_ranks, 0.8),
}


def _split_masks(rng: np.random.Generator, reps: int, n: int, n_cal: int) -> np.ndarray:
    """(reps, n) float32 0/1: exactly ``n_cal`` calibration rows per repetition (uniform, no replacement)."""
    pick = np.argpartition(rng.random((reps, n)), n_cal - 1, axis=1)[:, :n_cal]
    mask = np.zeros((reps, n), dtype=np.float32)
    np.put_along_axis(mask, pick, 1.0, axis=1)
    return mask


def compare_rank_thresholds(scores: PerRankScores, target_accuracy: float, delta: float, *, reps: int = N_REPS,
                            cal_fraction: float = CAL_FRACTION, seed: int = SEED, n_lambdas: int = N_LAMBDAS,
                            tilts: Sequence[float] = TILTS, chunk: int = 250) -> pd.DataFrame:
    """LTT per rank against the hand-picked thresholds over ``reps`` random calibration/test splits.

    Each repetition draws ``round(cal_fraction · n)`` calibration rows without replacement; LTT is
    fitted on them and every method is scored on the remaining rows. Vectorised: each candidate
    vector's per-sample errors and coverage are computed once, and each repetition's calibration
    counts are one matrix product.

    Returns
    -------
    One row per method: ``method``, ``thetas`` (text), ``violation_rate`` (share of repetitions
    whose test accuracy < target), ``mean_accuracy``, ``mean_coverage`` (specificity reached),
    ``certified`` (share of repetitions where LTT certified a vector; 1 for fixed thresholds),
    ``reps``, ``n_cal``, ``n_test``.
    """
    alpha, delta = _check_levels(target_accuracy, delta)
    if int(reps) != reps or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps}")
    n, n_ranks = scores.conf.shape
    check_study_size(n, n_ranks, n_lambdas=n_lambdas, tilts=tilts, chunk=chunk)
    n_cal = int(round(cal_fraction * n))
    if not 0 < n_cal < n:
        raise ValueError(f"the calibration fraction {cal_fraction} leaves no calibration or no test rows of {n}")
    n_test = n - n_cal
    paths = theta_paths(n_ranks, n_lambdas, tilts)
    shape = paths.shape[:2]
    hand = np.stack([f(n_ranks) for f in HAND_PICKED.values()])
    vectors = np.concatenate([paths.reshape(-1, n_ranks), hand])
    errors, cov = vector_outcomes(scores.conf, scores.correct, scores.coverage, vectors)
    e_t, c_t = errors.T.astype(np.float32), cov.T.astype(np.float32)  # (n, V)
    tot_e, tot_c = errors.sum(axis=1), cov.sum(axis=1, dtype=float)
    n_ltt = shape[0] * shape[1]
    rng = np.random.default_rng(seed)
    acc: dict[str, list[np.ndarray]] = {name: [] for name in (LTT_NAME, *HAND_PICKED)}
    covs: dict[str, list[np.ndarray]] = {name: [] for name in acc}
    certified: list[np.ndarray] = []
    for start in range(0, int(reps), chunk):
        mask = _split_masks(rng, min(chunk, int(reps) - start), n, n_cal)
        cal_e = np.rint(mask @ e_t).astype(np.int64)  # (r, V) exact counts
        cal_c = (mask @ c_t).astype(float)
        test_acc = 1.0 - (tot_e[None, :] - cal_e) / n_test
        test_cov = (tot_c[None, :] - cal_c) / n_test
        choice, found = ltt_select(cal_e[:, :n_ltt].reshape(-1, *shape), cal_c[:, :n_ltt].reshape(-1, *shape),
                                   n_cal, alpha, delta)
        rows = np.arange(choice.size)
        acc[LTT_NAME].append(np.where(found, test_acc[rows, choice], 1.0))  # none certified: all abstain
        covs[LTT_NAME].append(np.where(found, test_cov[rows, choice], 0.0))
        certified.append(found)
        for k, name in enumerate(HAND_PICKED):
            acc[name].append(test_acc[:, n_ltt + k])
            covs[name].append(test_cov[:, n_ltt + k])
    target = 1.0 - alpha
    out = []
    for k, name in enumerate(acc):
        a, c = np.concatenate(acc[name]), np.concatenate(covs[name])
        th = "fitted per split" if name == LTT_NAME else thetas_text(scores.ranks, hand[k - 1])
        out.append({"method": name, "thetas": th, "violation_rate": float(np.mean(a < target - 1e-12)),
                    "mean_accuracy": float(a.mean()), "mean_coverage": float(c.mean()),
                    "certified": float(np.concatenate(certified).mean()) if name == LTT_NAME else 1.0,
                    "reps": int(reps), "n_cal": n_cal, "n_test": n_test})
    return pd.DataFrame(out)


def study_bytes(n: int, n_ranks: int, *, n_lambdas: int = N_LAMBDAS, tilts: Sequence[float] = TILTS,
                chunk: int = 250) -> int:
    """The working memory of ``compare_rank_thresholds`` on ``n`` rows of ``n_ranks`` ranks (measured
    by ``bench/decoded_size.py``): per row, each of the V θ vectors' outcomes (a bool and a float32,
    then both as float32 columns: 13 bytes) and one chunk of splits (``chunk`` draws, index and mask:
    20 bytes each).

    >>> study_bytes(1000, 4)
    10623000
    """
    n_vectors = len(tilts) * int(n_lambdas) + len(HAND_PICKED)
    return int(n) * (13 * n_vectors + 20 * int(chunk) + 32 * int(n_ranks) + 256)


def check_study_size(n: int, n_ranks: int, budget: int | None = None, **sizes: Any) -> None:
    """One ValueError when the study of ``n`` rows (``study_bytes``) would need more memory than
    ``budget`` (default ``hsc_core.config.max_decoded_bytes()``), before anything is allocated."""
    need = study_bytes(n, n_ranks, **sizes)
    budget = config.max_decoded_bytes() if budget is None else int(budget)
    if need > budget:
        most = int(n * budget // need)
        raise ValueError(f"{n:,} rows need about {need / 2**20:,.0f} MB for the split study, over the "
                         f"{budget / 2**20:,.0f} MB accepted ({config.MAX_DECODED_MB}); use at most {most:,} rows "
                         "(a random sample of them) or raise the limit")


def thetas_text(ranks: Sequence[str], thetas: np.ndarray) -> str:
    """``"family 0.40 · genus 0.60 · species 0.80"`` (a rank that never answers: ``never``)."""
    return " · ".join(f"{r} {t:.2f}" if math.isfinite(t) else f"{r} never" for r, t in zip(ranks, thetas,
                                                                                           strict=True))


# ------------------------------------------------------------------------------------ the card
def rank_card(scores: PerRankScores, target_accuracy: float, delta: float, *, source: str = "scores",
              reps: int = N_REPS, seed: int = SEED, cal_fraction: float = CAL_FRACTION) -> dict[str, Any]:
    """The decision card of ``hsc ranks``: the θ per rank fitted on every row, what it gives on
    them, the shared-θ RC curve's hAURC, and the split study against hand-picked thresholds."""
    check_study_size(*scores.conf.shape)  # before the fit: one line, not an allocation that fails
    ctl = fit_rank_thresholds(scores, target_accuracy, delta)
    ev = ctl.evaluate(scores)
    curve = rank_rc_curve(scores.conf, scores.correct, scores.coverage)
    table = compare_rank_thresholds(scores, target_accuracy, delta, reps=reps, seed=seed, cal_fraction=cal_fraction)
    share = {r: float(s) for r, s in zip((*scores.ranks, "root (abstain)"), ev["answer_share"], strict=True)}
    return {
        "format": "hsc-rank-card/1",
        "source": source,
        "n_samples": scores.n,
        "ranks": list(scores.ranks),
        "target_accuracy": float(target_accuracy),
        "delta": float(delta),
        "method": "Learn then Test (Angelopoulos et al. 2021): fixed-sequence testing along "
                  f"{len(ctl.tilts)} monotone paths of θ vectors (Bonferroni over paths), exact binomial p-values",
        "certified": ctl.found_,
        "thetas": ctl.thetas_dict(),
        "realised_accuracy": ev["accuracy"],
        "realised_coverage": ev["coverage"],
        "answer_share": share,
        "shared_theta_haurc": curve.haurc,
        "comparison": table.to_dict(orient="records"),
        "seed": int(seed),
    }


def rank_card_json(card: dict[str, Any]) -> str:
    """The card as JSON (``thetas``: ``{rank: θ}``, null where a rank never answers)."""
    return json.dumps(card, indent=2, ensure_ascii=False) + "\n"


def rank_card_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown (names from the file shown as plain text)."""
    target, delta = card["target_accuracy"], card["delta"]
    lines = [f"# Decision card: one θ per rank for {md_text(card['source'])}", ""]
    if card["certified"]:
        lines.append(f"With probability ≥ {1 - delta:.0%} over the calibration set, Climbing by rank at these "
                     f"thresholds has hierarchical accuracy ≥ {target:.1%} (abstentions count as correct).")
    else:
        lines.append(f"No θ vector could be certified for accuracy ≥ {target:.1%} at δ = {delta:g} on "
                     f"{card['n_samples']:,} samples: ship abstention everywhere, or lower the target.")
    lines += ["", "| rank | θ | share of answers stopping here |", "|---|---|---|"]
    for rank in card["ranks"]:
        t = card["thetas"][rank]
        lines.append(f"| {md_text(rank)} | {'never' if t is None else f'{t:.4f}'} | {card['answer_share'][rank]:.1%} |")
    lines.append(f"| root (abstain) | | {card['answer_share']['root (abstain)']:.1%} |")
    lines += ["", f"On the {card['n_samples']:,} samples it was fitted on: accuracy {card['realised_accuracy']:.2%}, "
                  f"coverage {card['realised_coverage']:.3f}. One shared θ: hAURC {card['shared_theta_haurc']:.5f}.",
              "", f"## Against hand-picked thresholds ({card['comparison'][0]['reps']:,} random splits, "
                  f"{card['comparison'][0]['n_cal']:,} calibration / {card['comparison'][0]['n_test']:,} test)", "",
              f"Violation: test accuracy below {target:.1%}. A guarantee allows a violation rate up to δ = {delta:g}.",
              "", "| method | thresholds | violation rate | mean accuracy | mean coverage |", "|---|---|---|---|---|"]
    for row in card["comparison"]:
        lines.append(f"| {row['method']} | {md_text(row['thetas'])} | {row['violation_rate']:.1%} | "
                     f"{row['mean_accuracy']:.2%} | {row['mean_coverage']:.3f} |")
    lines += ["", f"Method: {card['method']}. Seed {card['seed']}."]
    return "\n".join(lines) + "\n"


__all__ = ["HAND_PICKED", "PerRankThresholds", "check_study_size", "compare_rank_thresholds", "fit_rank_thresholds",
           "rank_card", "rank_card_json", "rank_card_markdown", "study_bytes", "thetas_text"]
