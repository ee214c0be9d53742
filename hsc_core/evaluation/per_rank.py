"""One θ per rank with a guarantee, for per-rank scores: the controller, the split study and the card.

``PerRankThresholds`` (MAPIE-style: settings in the constructor, ``fit`` on a calibration set,
``predict`` on new samples) learns one θ per rank by Learn then Test over ``core.per_rank``'s
monotone paths, so that an accuracy ≥ 1 − α with probability ≥ 1 − δ over the calibration set:
the hierarchical accuracy (every sample counts, an abstention counts as correct) or, with
``quantity="answers"``, the accuracy of the answers given (abstentions excluded; ``QUANTITY_WORDS``);
``fit_rank_thresholds`` is the one call. ``compare_rank_thresholds`` repeats the
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
    SHARED_SHARE,
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
from .guarantee_methods import QUANTITY_WORDS, Quantity

N_REPS = 1000
SEED = 0
CAL_FRACTION = 0.5
N_LAMBDAS = 100
LTT_NAME = "LTT per rank"
SHARED_NAME = "LTT shared θ"


def _check_levels(target_accuracy: float, delta: float) -> tuple[float, float]:
    if not 0.0 < float(target_accuracy) < 1.0:
        raise ValueError(f"the target accuracy must lie in (0, 1), got {target_accuracy}")
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    return 1.0 - float(target_accuracy), float(delta)


def _check_quantity(quantity: str) -> Quantity:
    if quantity not in QUANTITY_WORDS:
        raise ValueError(f"unknown quantity {quantity!r}; choose one of {', '.join(QUANTITY_WORDS)}")
    return quantity  # type: ignore[return-value]


class PerRankThresholds:
    """Learn one θ per rank so that the accuracy ≥ target with probability ≥ 1 − δ.

    Parameters
    ----------
    target_accuracy : 1 − α, the accuracy to guarantee.
    delta : the probability, over the calibration set, that the guarantee may fail.
    quantity : which accuracy (``QUANTITY_WORDS``): ``"hierarchical"`` (every sample counts; an
        abstention counts as correct; fixed-sequence testing along each path) or ``"answers"`` (the
        accuracy of the answers given, abstentions excluded: the binomial p-value given the number
        answered, the fallback procedure along each path; ``core.per_rank.ltt_select``).
    n_lambdas : points per path (``core.ltt.ltt_theta_grid``).
    tilts : the paths' tilts (``core.per_rank.theta_paths``); the first (1: one shared θ) is tested
        at δ·``SHARED_SHARE``, the others share the rest; ``tilts=(1.0,)`` is a shared-θ LTT at δ.

    Attributes
    ----------
    thetas_ : (R,) the θ per rank, coarsest first (set by ``fit``); +inf everywhere when no vector was certified.
    found_ : whether a vector was certified (else every sample abstains).
    ranks_ : the rank names.
    n_cal_ : the calibration size.
    """

    def __init__(self, target_accuracy: float = 0.95, delta: float = 0.1, *, quantity: Quantity = "hierarchical",
                 n_lambdas: int = N_LAMBDAS, tilts: Sequence[float] = TILTS) -> None:
        self.alpha, self.delta = _check_levels(target_accuracy, delta)
        self.quantity = _check_quantity(quantity)
        self.target_accuracy = float(target_accuracy)
        self.n_lambdas = int(n_lambdas)
        self.tilts = tuple(float(t) for t in tilts)

    def vectors(self, n_ranks: int) -> np.ndarray:
        """(S, m, R) the θ vectors LTT tests (fixed before seeing data)."""
        return theta_paths(n_ranks, self.n_lambdas, self.tilts)

    def fit(self, scores: PerRankScores) -> PerRankThresholds:
        """Calibrate on ``scores`` (every row is a calibration sample)."""
        paths = self.vectors(len(scores.ranks))
        errors, cov, answered = vector_outcomes(scores.conf, scores.correct, scores.coverage, paths)
        shape = paths.shape[:2]
        n_answered = answered.sum(axis=1).reshape(shape) if self.quantity == "answers" else None
        choice, found = ltt_select(errors.sum(axis=1).reshape(shape), cov.sum(axis=1, dtype=float).reshape(shape),
                                   scores.n, self.alpha, self.delta, cal_answered=n_answered)
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


def _accuracy(errors: np.ndarray, count: np.ndarray | float, quantity: Quantity) -> np.ndarray:
    """1 − errors / count; for the answers' accuracy a vector answering nothing has accuracy 1 (no
    answer is wrong: the convention of abstaining everywhere)."""
    count = np.asarray(count, dtype=float)
    if quantity == "hierarchical":
        return 1.0 - errors / count
    return np.where(count > 0, 1.0 - errors / np.where(count > 0, count, 1.0), 1.0)


def _fit_paths(counts: tuple[np.ndarray, np.ndarray, np.ndarray | None], part: slice, shape: tuple[int, int],
               n_cal: int, alpha: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """``ltt_select`` on the (r, V) calibration counts (errors, coverage, answered or None) of the
    vectors ``part``, read as (r, S, m) = (r, *shape) paths."""
    cal_e, cal_c, cal_a = counts
    sub = (-1, *shape)
    return ltt_select(cal_e[:, part].reshape(sub), cal_c[:, part].reshape(sub), n_cal, alpha, delta,
                      cal_answered=None if cal_a is None else cal_a[:, part].reshape(sub))


def compare_rank_thresholds(scores: PerRankScores, target_accuracy: float, delta: float, *, reps: int = N_REPS,
                            cal_fraction: float = CAL_FRACTION, seed: int = SEED, n_lambdas: int = N_LAMBDAS,
                            tilts: Sequence[float] = TILTS, chunk: int = 250,
                            quantity: Quantity = "hierarchical") -> pd.DataFrame:
    """LTT per rank against a shared-θ LTT and the hand-picked thresholds over ``reps`` random
    calibration/test splits, for one accuracy ``quantity`` (``QUANTITY_WORDS``).

    Each repetition draws ``round(cal_fraction · n)`` calibration rows without replacement; LTT per
    rank (``ltt_select`` over every path) and the shared-θ LTT (the flat path alone, at the full δ)
    are fitted on them for ``quantity`` and every method is scored on the remaining rows, on the
    same quantity: the hierarchical accuracy (every sample counts, an abstention counts as correct)
    or the accuracy of the answers given, 1 − (errors among the answered) / (number answered); a
    vector answering nothing has answers' accuracy 1 by convention (no answer is wrong), as when
    no vector is certified and every sample abstains. Vectorised: each candidate vector's per-sample
    errors, coverage and answering are computed once, and each repetition's calibration counts are
    one matrix product.

    Returns
    -------
    One row per method: ``method``, ``thetas`` (text), ``violation_rate`` (share of repetitions whose
    accuracy on the whole table, the population the splits are drawn from, is below the target: what
    a guarantee bounds by δ), ``violation_rate_test`` (the same read on the test rows alone, which adds
    their binomial noise: a rule exactly at the target is measured below it in about half the
    splits), ``test_noise`` (the binomial standard deviation sqrt(a(1−a)/k) of a test-half accuracy a
    at the target, k = n_test, or for the answers the mean number of test rows the method answers),
    ``mean_accuracy`` and ``mean_coverage`` (on the test rows), for the answers ``mean_answered`` (the
    share of test rows answered below the root), ``certified`` (share of repetitions where the LTT certified a
    vector; 1 for fixed thresholds), ``quantity``, ``reps``, ``n_cal``, ``n_test``.
    """
    alpha, delta = _check_levels(target_accuracy, delta)
    quantity = _check_quantity(quantity)
    if int(reps) != reps or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps}")
    n, n_ranks = scores.conf.shape
    check_study_size(n, n_ranks, n_lambdas=n_lambdas, tilts=tilts, chunk=chunk, quantity=quantity)
    n_cal = int(round(cal_fraction * n))
    if not 0 < n_cal < n:
        raise ValueError(f"the calibration fraction {cal_fraction} leaves no calibration or no test rows of {n}")
    n_test = n - n_cal
    paths = theta_paths(n_ranks, n_lambdas, tilts)
    shape = paths.shape[:2]
    hand = np.stack([f(n_ranks) for f in HAND_PICKED.values()])
    vectors = np.concatenate([paths.reshape(-1, n_ranks), hand])
    errors, cov, answered = vector_outcomes(scores.conf, scores.correct, scores.coverage, vectors)
    e_t, c_t = errors.T.astype(np.float32), cov.T.astype(np.float32)  # (n, V)
    tot_e, tot_c, tot_a = errors.sum(axis=1), cov.sum(axis=1, dtype=float), answered.sum(axis=1)
    a_t = answered.T.astype(np.float32) if quantity == "answers" else None
    del errors, cov, answered
    n_ltt = shape[0] * shape[1]
    shared = int(np.flatnonzero(np.asarray(tilts) == 1.0)[0]) if 1.0 in tilts else None
    rng = np.random.default_rng(seed)
    names = (LTT_NAME, *((SHARED_NAME,) if shared is not None else ()), *HAND_PICKED)
    keys = ("acc", "pop", "cov", "answered", "certified")
    got: dict[str, dict[str, list[np.ndarray]]] = {k: {name: [] for name in names} for k in keys}
    pop_acc = _accuracy(tot_e, tot_a if quantity == "answers" else n, quantity)
    for start in range(0, int(reps), chunk):
        mask = _split_masks(rng, min(chunk, int(reps) - start), n, n_cal)
        cal_e = np.rint(mask @ e_t).astype(np.int64)  # (r, V) exact counts
        cal_c = (mask @ c_t).astype(float)
        cal_a = np.rint(mask @ a_t).astype(np.int64) if a_t is not None else None
        test_a = tot_a[None, :] - cal_a if cal_a is not None else np.zeros_like(cal_e)  # read for the answers only
        test_acc = _accuracy(tot_e[None, :] - cal_e, test_a if quantity == "answers" else n_test, quantity)
        test_cov = (tot_c[None, :] - cal_c) / n_test
        rows = np.arange(mask.shape[0])
        counts = (cal_e, cal_c, cal_a)
        fits = {LTT_NAME: _fit_paths(counts, slice(0, n_ltt), shape, n_cal, alpha, delta)}
        if shared is not None:  # the flat path alone, at the full δ
            part = slice(shared * shape[1], (shared + 1) * shape[1])
            choice, found = _fit_paths(counts, part, (1, shape[1]), n_cal, alpha, delta)
            fits[SHARED_NAME] = (choice + shared * shape[1], found)
        for name, (choice, found) in fits.items():  # none certified: all abstain (accuracy 1, coverage 0)
            got["acc"][name].append(np.where(found, test_acc[rows, choice], 1.0))
            got["pop"][name].append(np.where(found, pop_acc[choice], 1.0))
            got["cov"][name].append(np.where(found, test_cov[rows, choice], 0.0))
            got["answered"][name].append(np.where(found, test_a[rows, choice], 0))
            got["certified"][name].append(found)
        for k, name in enumerate(HAND_PICKED):
            got["acc"][name].append(test_acc[:, n_ltt + k])
            got["pop"][name].append(np.full(mask.shape[0], pop_acc[n_ltt + k]))
            got["cov"][name].append(test_cov[:, n_ltt + k])
            got["answered"][name].append(test_a[:, n_ltt + k])
            got["certified"][name].append(np.ones(mask.shape[0], dtype=bool))
    target = 1.0 - alpha
    out = []
    for name in names:
        a, c, p, n_ans = (np.concatenate(got[key][name]) for key in ("acc", "cov", "pop", "answered"))
        th = ("fitted per split" if name in (LTT_NAME, SHARED_NAME)
              else thetas_text(scores.ranks, HAND_PICKED[name](n_ranks)))
        answers = quantity == "answers"
        noise_n = max(float(n_ans.mean()), 1.0) if answers else n_test
        out.append({"method": name, "thetas": th, "violation_rate": float(np.mean(p < target - 1e-12)),
                    "violation_rate_test": float(np.mean(a < target - 1e-12)),
                    "test_noise": float(np.sqrt(target * (1 - target) / noise_n)),
                    "mean_accuracy": float(a.mean()), "mean_coverage": float(c.mean()),
                    **({"mean_answered": float(n_ans.mean() / n_test)} if answers else {}),
                    "certified": float(np.concatenate(got["certified"][name]).mean()), "quantity": quantity,
                    "reps": int(reps), "n_cal": n_cal, "n_test": n_test})
    return pd.DataFrame(out)


def study_bytes(n: int, n_ranks: int, *, n_lambdas: int = N_LAMBDAS, tilts: Sequence[float] = TILTS,
                chunk: int = 250, quantity: Quantity = "hierarchical") -> int:
    """The working memory of ``compare_rank_thresholds`` on ``n`` rows of ``n_ranks`` ranks (measured
    by ``bench/decoded_size.py``): per row, each of the V θ vectors' outcomes (errors, answered: two
    bools, coverage: a float32, then errors and coverage as float32 columns: 14 bytes; for the answers'
    accuracy, answered as a float32 column too: 18) and one chunk of splits (``chunk`` draws, index
    and mask: 20 bytes each).

    >>> study_bytes(1000, 4), study_bytes(1000, 4, quantity="answers")
    (11026000, 12638000)
    """
    n_vectors = len(tilts) * int(n_lambdas) + len(HAND_PICKED)
    per_vector = 18 if _check_quantity(quantity) == "answers" else 14
    return int(n) * (per_vector * n_vectors + 20 * int(chunk) + 32 * int(n_ranks) + 256)


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
def method_text(quantity: Quantity, n_paths: int) -> str:
    """How LTT per rank tests its θ vectors for ``quantity``, in one sentence (the card's ``method``)."""
    if _check_quantity(quantity) == "answers":
        test, p_value = ("the fallback procedure (Wiens 2003)", "exact binomial p-values of the errors among the "
                         "answered given the number answered (1 where none is answered)")
    else:
        test, p_value = "fixed-sequence testing", "exact binomial p-values"
    return (f"Learn then Test (Angelopoulos et al. 2021): {test} along {n_paths} monotone paths of θ vectors, the "
            f"shared-θ path at δ·{SHARED_SHARE:g} and the tilted ones at the rest of δ (weighted Bonferroni), "
            f"{p_value}")


def rank_card(scores: PerRankScores, target_accuracy: float, delta: float, *, source: str = "scores",
              reps: int = N_REPS, seed: int = SEED, cal_fraction: float = CAL_FRACTION,
              quantity: Quantity = "hierarchical") -> dict[str, Any]:
    """The decision card of ``hsc ranks``: the θ per rank fitted on every row for ``quantity``
    (``QUANTITY_WORDS``), what it gives on them (shares answered at the finest rank, at a coarser
    rank and abstained; the answers' accuracy), a shared-θ LTT fitted on the same rows for the same
    quantity, the shared-θ RC curve's hAURC, and the split study against the shared-θ LTT and
    hand-picked thresholds, its violations read on that quantity."""
    quantity = _check_quantity(quantity)
    check_study_size(*scores.conf.shape, quantity=quantity)  # before the fit: one line, not a failed allocation
    ctl = fit_rank_thresholds(scores, target_accuracy, delta, quantity=quantity)
    ev = ctl.evaluate(scores)
    flat = fit_rank_thresholds(scores, target_accuracy, delta, quantity=quantity, tilts=(1.0,))
    flat_ev = flat.evaluate(scores)
    curve = rank_rc_curve(scores.conf, scores.correct, scores.coverage)
    table = compare_rank_thresholds(scores, target_accuracy, delta, reps=reps, seed=seed, cal_fraction=cal_fraction,
                                    quantity=quantity)
    share = {r: float(s) for r, s in zip((*scores.ranks, "root (abstain)"), ev["answer_share"], strict=True)}
    nan_free = (lambda x: None if not math.isfinite(x) else float(x))  # noqa: E731 - JSON has no NaN
    return {
        "format": "hsc-rank-card/2",
        "source": source,
        "n_samples": scores.n,
        "ranks": list(scores.ranks),
        "target_accuracy": float(target_accuracy),
        "delta": float(delta),
        "quantity": quantity,
        "guaranteed": {"quantity": QUANTITY_WORDS[quantity], "confidence": 1.0 - float(delta)},
        "method": method_text(quantity, len(ctl.tilts)),
        "final_answer": "the prediction of the finest rank whose confidence reaches its θ, judged at that rank; "
                        "coarser heads are not consulted (when heads disagree the finer head's label is the answer)",
        "heads_disagree": float(scores.disagreement.mean()),
        "certified": ctl.found_,
        "thetas": ctl.thetas_dict(),
        "realised_accuracy": ev["accuracy"],
        "realised_answered_accuracy": nan_free(ev["answered_accuracy"]),
        "realised_coverage": ev["coverage"],
        "answer_share": share,
        "shared_theta": {"certified": flat.found_, "theta": next(iter(flat.thetas_dict().values())),
                         "realised_accuracy": flat_ev["accuracy"],
                         "realised_answered_accuracy": nan_free(flat_ev["answered_accuracy"]),
                         "realised_coverage": flat_ev["coverage"],
                         "abstained": float(flat_ev["answer_share"][-1])},
        "shared_theta_haurc": curve.haurc,
        "comparison": table.to_dict(orient="records"),
        "seed": int(seed),
    }


def rank_card_json(card: dict[str, Any]) -> str:
    """The card as JSON (``thetas``: ``{rank: θ}``, null where a rank never answers)."""
    return json.dumps(card, indent=2, ensure_ascii=False) + "\n"


def rank_breakdown(card: dict[str, Any]) -> str:
    """Where the answers stop and how many are right, in words (the card's and the page's)."""
    shares = list(card["answer_share"].values())
    ranks = list(card["answer_share"])
    answered, finest = 1 - shares[-1], shares[-2]
    acc = card.get("realised_answered_accuracy")
    right = "none is answered" if acc is None else f"{acc:.1%} of the answers are correct"
    return (f"{finest:.1%} of the samples get an answer at {ranks[-2]}, {answered - finest:.1%} at a coarser rank and "
            f"{shares[-1]:.1%} abstain (the root); {right} ({card['realised_accuracy']:.1%} counting the abstentions "
            "as correct)")


def guarantee_text(quantity: str, target_accuracy: float) -> str:
    """What is guaranteed about ``quantity``, in plain words (the card's, the CLI's and the page's).

    >>> guarantee_text("answers", 0.9)[:60]
    'at least 90.0% of the answers given on new data are correct '
    """
    words = QUANTITY_WORDS[_check_quantity(quantity)]
    if quantity == "answers":
        return f"at least {target_accuracy:.1%} of the answers given on new data are correct ({words})"
    return (f"hierarchical accuracy ≥ {target_accuracy:.1%} on new data, every sample counting and an abstention "
            "counting as correct — not the accuracy of the answers alone")


def rank_card_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown (names from the file shown as plain text)."""
    target, delta = card["target_accuracy"], card["delta"]
    quantity = card.get("quantity", "hierarchical")
    lines = [f"# Decision card: one θ per rank for {md_text(card['source'])}", ""]
    if card["certified"]:
        lines.append(f"**Guaranteed with {1 - delta:.0%} confidence** (probability over the calibration set): Climbing "
                     f"by rank at these thresholds: {guarantee_text(quantity, target)}.")
    else:
        lines.append(f"No θ vector could be certified for accuracy ≥ {target:.1%} at δ = {delta:g} on "
                     f"{card['n_samples']:,} samples: ship abstention everywhere, or lower the target.")
    lines += ["", f"On the {card['n_samples']:,} samples it was fitted on: {md_text(rank_breakdown(card), 400)}; "
                  f"coverage {card['realised_coverage']:.3f}.", ""]
    lines += ["| rank | θ | share of answers stopping here |", "|---|---|---|"]
    for rank in card["ranks"]:
        t = card["thetas"][rank]
        lines.append(f"| {md_text(rank)} | {'never' if t is None else f'{t:.4f}'} | {card['answer_share'][rank]:.1%} |")
    lines.append(f"| root (abstain) | | {card['answer_share']['root (abstain)']:.1%} |")
    flat = card.get("shared_theta")
    if flat:
        theta = "none certified" if not flat["certified"] else f"θ = {flat['theta']:.4f}"
        answered = flat.get("realised_answered_accuracy")
        accuracy = (f"{answered:.2%} of the answers correct" if quantity == "answers" and answered is not None
                    else f"accuracy {flat['realised_accuracy']:.2%}")
        lines += ["", f"One shared θ by the same test at the full δ (a shared-θ LTT): {theta}, {accuracy}, "
                      f"coverage {flat['realised_coverage']:.3f}, "
                      f"{flat['abstained']:.1%} abstain. The search above includes the shared-θ path at "
                      f"δ·{SHARED_SHARE:g}, so it gives up at most the cost of that smaller level."]
    final = card.get("final_answer", "the finest rank whose confidence reaches its θ")
    lines += ["", f"Final answer: {md_text(final, 300)}."
              + (f" The heads disagree (predictions not nested) on {card['heads_disagree']:.1%} of the rows."
                 if card.get("heads_disagree") else ""),
              "", f"One shared θ: hAURC {card['shared_theta_haurc']:.5f}."]
    first = card["comparison"][0]
    lines += ["", f"## Against a shared-θ LTT and hand-picked thresholds ({first['reps']:,} random splits, "
                  f"{first['n_cal']:,} calibration / {first['n_test']:,} test)", "",
              f"Violation: {QUANTITY_WORDS[quantity]} below {target:.1%} on the whole table (the population the "
              "splits are drawn from); "
              f"a guarantee allows a violation rate up to δ = {delta:g}. Read on the {first['n_test']:,} test rows "
              f"alone, the accuracy carries their binomial noise (sd ≈ {first.get('test_noise', float('nan')):.4f} at "
              "the target; a rule exactly at the target is measured below it in about half the splits): that rate "
              "is shown beside it and is no guarantee's.", "",
              "| method | thresholds | violation rate | on the test half | mean accuracy | mean coverage |",
              "|---|---|---|---|---|---|"]
    for row in card["comparison"]:
        lines.append(f"| {row['method']} | {md_text(row['thetas'])} | {row['violation_rate']:.1%} | "
                     f"{row.get('violation_rate_test', float('nan')):.1%} | {row['mean_accuracy']:.2%} | "
                     f"{row['mean_coverage']:.3f} |")
    if quantity == "answers":
        lines += ["", "Here the accuracy is that of the answers: the noise above is over the answered test rows (on "
                  "average), and a vector answering nothing has accuracy 1 by convention (no answer is wrong), as when "
                  "no vector is certified and every sample abstains."]
    lines += ["", f"Method: {card['method']}. Seed {card['seed']}."]
    return "\n".join(lines) + "\n"


__all__ = ["HAND_PICKED", "SHARED_NAME", "PerRankThresholds", "check_study_size", "compare_rank_thresholds",
           "fit_rank_thresholds", "guarantee_text", "method_text", "rank_breakdown", "rank_card", "rank_card_json",
           "rank_card_markdown",
           "study_bytes", "thetas_text"]
