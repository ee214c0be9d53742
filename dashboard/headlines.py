"""One plain-language sentence per page: what it shows and what to conclude, computed from the data.

Each function takes the numbers its page already has and returns a sentence (Markdown) for the page
to open with; none of them computes a number of its own beyond shares and differences of those given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .plain_text import plain

# What each guarantee kind (``guarantee_methods.METHODS[m].kind``) promises, in words: whether
# "holds" is about the average over calibration sets, one calibration with probability 1 − δ, or none.
KIND_WORDS = {
    "marginal": "marginal: on average over calibration sets (one calibration may fall below)",
    "marginal per group": "marginal per group: on average over calibration sets, in each superclass",
    "pac": "PAC: with probability ≥ 1 − δ for the one calibration you deploy",
    "heuristic": "no guarantee (a heuristic)",
}


def kind_words(kind: str) -> str:
    """The guarantee ``kind`` in words (the kind itself when it is not a known one).

    >>> kind_words("pac")
    'PAC: with probability ≥ 1 − δ for the one calibration you deploy'
    """
    return KIND_WORDS.get(kind, kind)


# What a method promises, in the fewest words (the method picker's).
PROMISE_WORDS = {
    "marginal": "on average",
    "marginal per group": "on average, per superclass",
    "pac": "with confidence 1 − δ",
    "heuristic": "no guarantee",
}


def method_words(label: str, kind: str) -> str:
    """A method's name and what it promises, for a picker.

    >>> method_words("Theorem 1, one-sided (PAC)", "pac")
    'Theorem 1, one-sided (PAC) — with confidence 1 − δ'
    """
    return f"{label} — {PROMISE_WORDS.get(kind, kind)}"


def guarantee_headline(split: Any, confidence: float) -> str:
    """The manager's answer for one calibrated split (``ThresholdResult``): the θ to deploy; the shares
    of the test samples answered at a leaf, at a coarser node and abstained; the accuracy of the
    answers; what is guaranteed, about which quantity, with what confidence; and whether the
    measured value meets the target.

    Parameters
    ----------
    split : ThresholdResult (``theta``, ``label``, ``kind``, ``quantity``, ``target_accuracy``,
        ``breakdown``, ``certified``, ``answer_sentence()``, ``target_sentence()``).
    confidence : 1 − δ of the page.
    """
    target = split.target_accuracy
    name = "λ" if split.method == "darts" else "θ"
    if not split.certified:
        return (f"**{split.label} cannot promise {target:.1%} here**: it predicts only the root (no answer); "
                f"lower the target or raise n.")
    what = (f"at least {target:.1%} of the answers on new data are correct (abstentions excluded)"
            if split.quantity == "answers" else
            f"the hierarchical accuracy on new data is at least {target:.1%} (abstentions count as correct)")
    if split.kind == "pac":
        promise = f"**guaranteed with {confidence:.0%} confidence: {what}**"
    elif split.kind.startswith("marginal"):
        promise = (f"**guaranteed only on average over calibration sets: {what}**, not with {confidence:.0%} "
                   "confidence for this one calibration (a marginal statement; a method “with confidence 1 − δ” "
                   "promises that)")
    else:
        promise = "**nothing is guaranteed** (a heuristic)"
    return (f"**Deploy {name} = {split.theta:.4f}** ({split.label}). {split.answer_sentence()}. {promise[:2]}"
            f"{promise[2].upper()}{promise[3:]}; {split.target_sentence()}.")


def guarantee_metrics(split: Any, eps: float) -> list[tuple[str, str, str | None, str]]:
    """The split's metrics row, as (label, value, delta, help), for the page and its snapshot: θ, the
    guaranteed quantity's test value against the target, coverage, and whether it meets the target
    (Theorem 1's "within target ± ε" for the paper's θ̂ only: its ε is about that method)."""
    on_answers = split.quantity == "answers"
    value = split.guaranteed_value
    rows = [("θ̂ (threshold)" if split.method != "darts" else "λ (DARTS)", f"{split.theta:.4f}", None,
             "The threshold to deploy."),
            ("Accuracy of the answers" if on_answers else "Hierarchical accuracy", f"{value:.4f}",
             f"{value - split.target_accuracy:+.4f} vs target",
             "On the test samples: the share of the answers that are correct (abstentions excluded)." if on_answers
             else "On the test samples: every sample counts, an abstention at the root counts as correct."),
            ("Answered", f"{split.breakdown['answered']:.1%}", None,
             "Share of the test samples answered below the root (at a leaf or a coarser node); the rest abstain."),
            ("Hierarchical coverage", f"{split.test_coverage:.4f}", None,
             "How specific the answers are on the test samples: the mean coverage of the predicted node (1 = a "
             "leaf for every sample, 0 = the root). Not the share of samples answered: see the sentence above.")]
    if split.method == "theorem1":
        inside = abs(split.test_accuracy - split.target_accuracy) <= eps + 1e-9
        rows.append(("Within target ± ε (on average)", "yes" if inside else "no", None,
                     "Theorem 1's two-sided band for the paper's marginal θ̂: with probability ≥ 1 − δ the accuracy "
                     "on new data lies within ε of the target, so it may lie below the target."))
    else:
        rows.append(("Meets the target", "yes" if split.meets_target else "no", None,
                     "Whether the guaranteed quantity, measured on the test samples, reaches the target (the "
                     "test samples add their own sampling noise)."))
    return rows


def holds_text(kind: str, holds: Any, violation_rate: float, delta: float | None) -> str:
    """The shoot-out's "holds" for one method, in words that say which promise was kept.

    A marginal method "holds" when its mean accuracy over the calibration sets reaches the target,
    even if many single sets fall below; a PAC one when at most δ of the sets fall below.

    >>> holds_text("marginal", True, 0.46, 0.1)
    'yes, on average (marginal): 46% of the sets fell below the target'
    >>> holds_text("pac", False, 0.2, 0.1)
    'no: 20% of the sets fell below the target, more than δ = 10% (PAC)'
    """
    below = f"{violation_rate:.0%} of the sets fell below the target"
    if kind == "pac":
        limit = "" if delta is None else f" δ = {delta:.0%}"
        return (f"yes: {below}, within{limit} (PAC)" if holds is True
                else f"no: {below}, more than{limit} (PAC)")
    if kind.startswith("marginal"):
        return f"yes, on average (marginal): {below}" if holds is True else f"no, not even on average: {below}"
    return f"no guarantee (heuristic): {below}"


def overview_lead(rule: str, gain: float, low: float | None = None, high: float | None = None) -> str:
    """The Overview's first sentence, without jargon: does backing off to a coarser class when unsure
    (``rule``, e.g. "Climbing") beat answering with a leaf or nothing? ``gain``: % of Selective's
    risk–coverage area the rule saves; ``low``/``high``: its 95 % interval (None: not computed yet).

    >>> overview_lead("Climbing", 12.6, 8.0, 17.1)[-47:]
    'leaf or not at all — a clear win on this model.'
    """
    if not np.isfinite(gain):
        return "This model makes no mistakes on these images, so backing off to a coarser class cannot help."
    verb = f"makes {abs(gain):.0f} % {'fewer' if gain >= 0 else 'more'} mistakes (averaged over every level of detail)"
    if low is None or high is None:
        verdict = "(a first estimate: its uncertainty is not computed yet)"
    elif low > 0:
        verdict = "— a clear win on this model"
    elif high < 0:
        verdict = "— worse on this model: keep plain answers"
    else:
        verdict = "— but that is within chance on this many images"
    return (f"Answering with a coarser class when unsure ({rule}) {verb} than answering with a leaf or not at all "
            f"{verdict}.")


def worse_conclusion(worse: set[str], headline_rule: str, label) -> str:
    """What to conclude from the rules that do worse than Selective somewhere (``worse``, rule names):
    whether the headline rule is among them. ``label``: rule name → its label.

    >>> worse_conclusion({"jumping"}, "climbing", str.title)[:48]
    'So: Climbing never does clearly worse than plain'
    """
    if not worse:
        return ""
    names = ", ".join(label(r) for r in sorted(worse))
    if headline_rule in worse:
        return f"So: no rule is safe everywhere — check {names} on your own model before using it."
    return (f"So: {label(headline_rule)} never does clearly worse than plain selective classification here; "
            f"check {names} on your own model before using it.")


def risk_coverage_headline(areas: dict[str, float], loss: str, label) -> str:
    """Risk–Coverage's sentence: what risk is, that lower is better, and which rule's curve is lowest.
    ``areas``: rule → area under its risk–coverage curve; ``label``: rule name → its label.

    >>> risk_coverage_headline({"selective": 0.046, "climbing": 0.040}, "01", str.title)[-79:]
    'Here **Climbing** has the lowest curve (area 40.0 ×10⁻³), 13 % below Selective.'
    """
    what = ("the share of wrong answers (a predicted class that does not contain the true one)" if loss == "01"
            else "how far off the wrong answers are (their distance in the class tree)")
    head = f"**Risk** is {what} at each level of detail (coverage): **lower is better**."
    finite = {r: a for r, a in areas.items() if np.isfinite(a)}
    if not finite:
        return head
    best = min(finite, key=finite.__getitem__)
    tail = f" Here **{label(best)}** has the lowest curve (area {1000 * finite[best]:.1f} ×10⁻³)"
    base = finite.get("selective")
    if base and best != "selective":
        tail += f", {100 * (1 - finite[best] / base):.0f} % below {label('selective')}"
    return head + tail + "."


def calibration_headline(areas: dict[str, float], label) -> str:
    """Calibration–Coverage's sentence: which rule's confidences are the most honest as θ rises.
    ``areas``: rule → area under its calibration–coverage (ECE) curve.

    >>> calibration_headline({"selective": 0.0103, "jumping": 0.0072}, str.title)[-101:]
    "Here **Jumping**'s confidences are the most honest (area 0.0072), **Selective**'s the least (0.0103)."
    """
    head = ("The curves show how far each rule's confidence is from its real accuracy (ECE) as it answers more "
            "coarsely: **lower is better**.")
    finite = {r: a for r, a in areas.items() if np.isfinite(a)}
    if len(finite) < 2:
        return head
    best, worst = min(finite, key=finite.__getitem__), max(finite, key=finite.__getitem__)
    return (head + f" Here **{label(best)}**'s confidences are the most honest (area {finite[best]:.4f}), "
            f"**{label(worst)}**'s the least ({finite[worst]:.4f}).")


def compare_headline(areas: dict[str, float], rule: str, close: float = 0.05) -> str:
    """Compare models' sentence: which model's ``rule`` curve is lowest, which highest, and how many lie
    within ``close`` (relative) of the best — near-identical curves are a finding too.
    ``areas``: model → area under its risk–coverage curve for ``rule`` (its label).

    >>> compare_headline({"a": 0.040, "b": 0.041, "c": 0.060}, "Climbing")[-95:]
    '**a** has the lowest (40.0 ×10⁻³), **c** the highest (60.0); 2 of 3 lie within 5 % of the best.'
    """
    head = f"Each curve is one model's risk with {rule} at each level of detail: **lower is better**."
    finite = {m: a for m, a in areas.items() if np.isfinite(a)}
    if len(finite) < 2:
        return head
    best, worst = min(finite, key=finite.__getitem__), max(finite, key=finite.__getitem__)
    near = sum(a <= finite[best] * (1 + close) for a in finite.values())
    return (head + f" **{best}** has the lowest ({1000 * finite[best]:.1f} ×10⁻³), **{worst}** the highest "
            f"({1000 * finite[worst]:.1f}); {near} of {len(finite)} lie within {100 * close:.0f} % of the best.")


def where_headline(stops: np.ndarray, stops_correct: np.ndarray, leaf_count: np.ndarray, rule: str,
                   theta: float) -> str:
    """Where it stops, in one sentence: the shares of predictions landing at a leaf, at a coarser class
    and at the root (a rejection), with how many of each are right.

    Parameters
    ----------
    stops, stops_correct : (n_nodes,) predictions landing exactly at each node, and of those the correct.
    leaf_count : (n_nodes,) leaves under each node (1 at a leaf; the root has all).
    rule : the rule's label. theta : the threshold.

    >>> stops, right = np.array([6, 2, 0, 1, 1]), np.array([3, 2, 0, 1, 1])
    >>> where_headline(stops, right, np.array([1, 1, 1, 2, 3]), "Climbing", 0.5)[57:]
    'leaf (62 % of them right), 10 % with a coarser class (100 % right) and rejects 10 % (the root).'
    """
    stops, right, counts = (np.asarray(a, dtype=float) for a in (stops, stops_correct, leaf_count))
    total = stops.sum()
    if total == 0:
        return f"At θ = {theta:.2f}, {rule} makes no predictions here."
    leaf, root = counts == 1, counts == counts.max()
    inner = ~leaf & ~root

    def part(mask: np.ndarray) -> tuple[float, str]:
        n = stops[mask].sum()
        return n / total, ("—" if n == 0 else f"{right[mask].sum() / n:.0%}".replace("%", " %"))

    (s_leaf, a_leaf), (s_inner, a_inner), (s_root, _) = part(leaf), part(inner), part(root)
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731 - one format, three uses
    return (f"At θ = {theta:.2f}, {rule} answers {pct(s_leaf)} of the samples with a leaf ({a_leaf} of them right), "
            f"{pct(s_inner)} with a coarser class ({a_inner} right) and rejects {pct(s_root)} (the root).")


def atlas_headline(summary: list[dict[str, Any]], n_models: int, rule: str) -> str:
    """Model atlas's sentence: which kind of model gains most from backing off when unsure, and which
    least. ``summary``: ``atlas.regime_summary`` rows of ``rule`` (its label given); ``n_models``: the
    table's size. Regimes of fewer than 5 models are left out of the comparison (a mean of 2 says little).

    >>> rows = [{"label": "distillation", "n_models": 90, "gain_percent_mean": 14.0},
    ...         {"label": "CLIP zero-shot", "n_models": 9, "gain_percent_mean": -3.0},
    ...         {"label": "plain", "n_models": 700, "gain_percent_mean": 9.5}]
    >>> atlas_headline(rows, 799, "Climbing")[-109:]
    '; it is largest for **distillation** models (14.0 % on average) and smallest for **CLIP zero-shot** (-3.0 %).'
    """
    rated = [r for r in summary if r["n_models"] >= 5 and np.isfinite(r.get("gain_percent_mean", np.nan))]
    head = (f"Each marker is one of {n_models:,} models: how much {rule} (backing off to a coarser class when unsure) "
            "saves against plain answers, by how the model was trained")
    if len(rated) < 2:
        return head + "."
    best = max(rated, key=lambda r: r["gain_percent_mean"])
    worst = min(rated, key=lambda r: r["gain_percent_mean"])
    best, worst = ({**r, "label": plain(r["label"])} for r in (best, worst))  # labels may come from a user's table
    return (head + f"; it is largest for **{best['label']}** models ({best['gain_percent_mean']:.1f} % on average) "
            f"and smallest for **{worst['label']}** ({worst['gain_percent_mean']:.1f} %).")


def _thetas(*ps: float) -> list[str]:
    """θs of one sentence in one format: as the sliders show them (2 decimals), or all with 4 where 2
    would round a probability below 1 up to 1.00; one below 1 never reads as 1 (0.99999 → 0.9999).

    >>> _thetas(0.31, 0.99999), _thetas(0.4, 0.95)
    (['0.3100', '0.9999'], ['0.40', '0.95'])
    """
    digits = 4 if any(p < 1 and round(p, 2) >= 1 for p in ps) else 2
    below = 1 - 10.0 ** -digits
    return [f"{min(p, below) if p < 1 else p:.{digits}f}" for p in ps]


def climb_headline(names: list[str], probs: np.ndarray, correct: np.ndarray | None, rule: str = "Climbing") -> str:
    """One image's sentence (Explorer, Try an image): is the top guess right, and for which θ does
    backing off when unsure (``rule``: from the top-1 leaf up to the first node of probability ≥ θ)
    give a correct answer or reject the image. It does not depend on the θ on screen.

    Parameters
    ----------
    names : (k,) names of the top-1 leaf and its ancestors, the root last.
    probs : (k,) their probabilities (non-decreasing up the path, the root's 1).
    correct : (k,) bool, whether each is an ancestor of the true leaf (None: the true class is unknown).
    rule : the rule's label.

    >>> climb_headline(["tabby", "cat", "animal", "root"], np.array([0.4, 0.7, 0.95, 1.0]),
    ...                np.array([False, True, True, True]))[-97:]
    'swers correctly, with **cat** or coarser, for θ from 0.40 to 0.95 and rejects the image above it.'
    """
    probs = np.asarray(probs, dtype=float)
    names = [plain(n) for n in names]  # node names may come from an uploaded tree: shown literally
    head = f"The model's top guess is **{names[0]}** (p = {probs[0]:.2f})"
    below_root = probs[-2] if len(probs) > 1 else 1.0
    reject = (" and never rejects it (every node on the path has probability 1)" if below_root >= 1
              else " and rejects the image above it")
    leaf_up_to, coarser_up_to = _thetas(probs[0], below_root)
    if correct is None:
        return (head + f"; backing off when unsure ({rule}) keeps it for θ up to {leaf_up_to} and answers a "
                f"coarser class for θ up to {coarser_up_to}{reject}.")
    correct = np.asarray(correct, dtype=bool)
    first = int(np.argmax(correct))  # the lowest correct node on the path (the root always is)
    if first == 0:
        return (head + f", and it is right: backing off when unsure ({rule}) stays right at every θ, with the leaf "
                f"for θ up to {leaf_up_to} and a coarser class for θ up to {coarser_up_to}{reject}.")
    head += ", and it is wrong"
    if first == len(probs) - 1:
        return (head + f"; no class on its path contains the true one, so backing off when unsure ({rule}) can "
                f"only reject it" + (f" (for θ above {_thetas(below_root)[0]})." if below_root < 1
                                     else " and never does."))
    low, high = _thetas(probs[first - 1], below_root)
    return (head + f"; backing off when unsure ({rule}) answers correctly, with **{names[first]}** or coarser, "
            f"for θ from {low} to {high}{reject}.")


def story_headline(n: int, top1_error: float, rescued: float, theta: float) -> str:
    """The guided story's sentence: how often this model's top guess is wrong, the share of those
    mistakes that backing off (Climbing at ``theta``) turns into a correct coarser answer, and where
    the five steps lead.

    >>> story_headline(1705, 0.2463, 0.41, 0.5)[:61]
    "On these 1,705 images the model's top guess is wrong 25 % of "
    """
    # no "θ = …" in it: while a chart sweeps θ, the only θ on screen is the chart's; two lines at the projector
    return (f"On these {n:,} images the model's top guess is wrong {100 * top1_error:.0f} % of the time; answering "
            f"with a coarser class when unsure (Climbing, threshold {theta:.2f}) makes {100 * rescued:.0f} % of those "
            "mistakes right. The steps show how, up to a guaranteed accuracy.")


def calibrators_headline(rows: list[dict[str, Any]], calibrator_label, confidence_label) -> str:
    """Calibrators' sentence: which calibrator × confidence score gives the lowest hAURC (lower is
    better), and by how much it beats the worst. ``rows``: ``calibrator_benchmark`` rows (``haurc``
    raw, ``calibrator``, ``confidence``); the labels: name → its label.

    >>> rows = [{"calibrator": "ts", "confidence": "softmax", "haurc": 0.040},
    ...         {"calibrator": "none", "confidence": "entropy", "haurc": 0.050}]
    >>> calibrators_headline(rows, str.upper, str.title)[-98:]
    'Here **TS + Softmax** is best (hAURC 40.0 ×10⁻³), 20 % below the worst, **NONE + Entropy** (50.0).'
    """
    head = ("Each row is one calibrator with one confidence score, judged by the hAURC: the mistakes left over "
            "every level of detail, **lower is better**.")
    finite = [r for r in rows if np.isfinite(r.get("haurc", np.nan))]
    if len(finite) < 2:
        return head
    best, worst = min(finite, key=lambda r: r["haurc"]), max(finite, key=lambda r: r["haurc"])

    def name(r: dict[str, Any]) -> str:
        return f"{calibrator_label(r['calibrator'])} + {confidence_label(r['confidence'])}"

    return (head + f" Here **{name(best)}** is best (hAURC {1000 * best['haurc']:.1f} ×10⁻³), "
            f"{100 * (1 - best['haurc'] / worst['haurc']):.0f} % below the worst, **{name(worst)}** "
            f"({1000 * worst['haurc']:.1f}).")


def per_rank_headline(answer_share: dict[str, float], certified: bool, target: float, delta: float,
                      accuracy: float, answered_accuracy: float | None = None, quantity: str = "hierarchical") -> str:
    """Per-rank thresholds' sentence: the shares answered at the finest rank, at a coarser rank and
    abstained, the accuracy of the answers, and what is guaranteed (``quantity``: the hierarchical
    accuracy, an abstention counting as correct, or the accuracy of the answers given, abstentions
    excluded) with what confidence.

    Parameters
    ----------
    answer_share : rank → share of samples stopping there, coarsest rank first, the finest last but one,
        "root (abstain)" last.
    certified : whether a θ per rank was found. target, delta : 1 − α and δ.
    accuracy : realised hierarchical accuracy (abstentions correct); answered_accuracy : realised
        accuracy of the answers (None: none answered, or not known).

    >>> per_rank_headline({"genus": 0.1, "species": 0.7, "root (abstain)": 0.2}, True, 0.9, 0.1, 0.93, 0.9125)[:87]
    '**70% of the samples get an answer at species, 10% at a coarser rank and 20% abstain**;'
    """
    shares = list(answer_share.values())
    ranks = [plain(r) for r in answer_share]  # rank names come from the uploaded table's columns
    if not certified:
        return (f"**No θ per rank can promise {target:.1%} accuracy** with {1 - delta:.0%} confidence here: every "
                "sample abstains; lower the target or add samples.")
    answered, finest = 1 - shares[-1], shares[-2]
    right = "" if answered_accuracy is None else f"{answered_accuracy:.1%} of the answers are correct, "
    promise = (f"**Guaranteed with {1 - delta:.0%} confidence: at least {target:.1%} of the answers given on new data "
               "are correct**, abstentions excluded (they are neither right nor wrong)." if quantity == "answers" else
               f"**Guaranteed with {1 - delta:.0%} confidence: hierarchical accuracy ≥ {target:.1%} on new data**, "
               "every sample counting and an abstention counting as correct (not the answers' accuracy alone).")
    return (f"**{finest:.0%} of the samples get an answer at {ranks[-2]}, {answered - finest:.0%} at a coarser rank "
            f"and {shares[-1]:.0%} abstain**; on this table {right}{accuracy:.1%} counting the abstentions as correct. "
            + promise)


def sensitivity_headline(gains: dict[str, float], rule: str, shuffled: str | None = None) -> str:
    """Hierarchy sensitivity's sentence: ``rule``'s gain over Selective (%) under each tree (``gains``:
    tree label → gain), its range under the meaningful trees, and whether it survives a tree without
    meaning (``shuffled``: that tree's label, if shown) — what to conclude about the tree's role.

    >>> sensitivity_headline({"WordNet": 12.0, "Random": -3.0, "Induced": 15.0}, "Climbing", "Random")[-79:]
    'shuffled (Random) it makes 3.0 % more: the gain comes from what the tree means.'
    """
    finite = {t: g for t, g in gains.items() if np.isfinite(g)}
    head = "Each bar is how many fewer mistakes a rule makes than plain answers under one class tree"
    meaningful = {t: g for t, g in finite.items() if t != shuffled}
    if not meaningful:
        return head + "."
    lo, hi = min(meaningful, key=meaningful.__getitem__), max(meaningful, key=meaningful.__getitem__)
    text = head + f": under {'the tree' if lo == hi else f'the {len(meaningful)} real trees'} **{rule}** saves " + (
        f"{meaningful[lo]:.1f} % ({lo})" if lo == hi else
        f"from {meaningful[lo]:.1f} % ({lo}) to {meaningful[hi]:.1f} % ({hi})")
    if shuffled not in finite:
        return text + "."
    g = finite[shuffled]
    did = f"saves {g:.1f} %" if g >= 0 else f"makes {-g:.1f} % more"
    verdict = ("the gain comes from what the tree means" if g < meaningful[lo]
               else "part of the gain does not depend on what the tree means")
    return text + f"; with the classes shuffled ({shuffled}) it {did}: {verdict}."
