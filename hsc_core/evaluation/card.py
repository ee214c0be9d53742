"""The decision card: the θ to ship, the guarantee it carries, and the evidence.

``decision_card`` calibrates one method (``guarantees``) on a seeded calibration set drawn from a
model's evaluation split, measures it on the other samples, runs the method's shoot-out as evidence
and gathers the provenance (model, weights, data set, tree hash, protocol, T, toolkit version,
date). ``card_markdown`` writes it as Markdown with YAML front matter (the Hugging Face model-card
convention, with a ``model-index`` of the realised metrics); ``card_json`` is its JSON twin. The
``hsc card`` command, ``hsc report`` and the Guaranteed-accuracy page all use these three.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any

import numpy as np
from scipy import stats

from ..core.protocol import protocol_text
from ..core.uncertainty import BOOTSTRAP_SEED, N_RESAMPLES
from .guarantee_methods import METHODS, QUANTITY_WORDS, GuaranteeData, GuaranteeSettings, check_methods
from .model import ModelEvaluation
from .results import toolkit_version
from .shootout import shootout
from .threshold import DEFAULT_DELTA, DEFAULT_METHOD, breakdown_sentence, default_n_cal, guarantee_sentence, threshold

__all__ = ["CARD_FORMAT", "CARD_REPS", "DEFAULT_METHOD", "answer_line", "card_json", "card_markdown", "decision_card",
           "guarantee_sentence", "md_text", "promise_words", "realised_words", "status_words"]

CARD_FORMAT = "hsc-decision-card/1"
# The method a card deploys when none is named is ``threshold.DEFAULT_METHOD`` (LTT on the accuracy of
# the answers, with confidence 1 − δ), the one the dashboard's Guaranteed-accuracy page starts with, so
# `hsc card` without --method states the page's θ.
CARD_REPS = 200
CONFIDENCE = 0.95


def _proportion_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Clopper–Pearson interval of a proportion k/n."""
    a = (1 - confidence) / 2
    low = stats.beta.ppf(a, k, n - k + 1) if k > 0 else 0.0
    high = stats.beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(low), float(high)


def _mean_interval(x: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t interval of a mean."""
    m, n = float(x.mean()), x.size
    if n < 2:
        return m, m
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return m - half, m + half


def decision_card(
    evaluation: ModelEvaluation,
    *,
    target_accuracy: float,
    delta: float | None = None,
    method: str | None = None,
    n_cal: int | None = None,
    ts: bool = True,
    seed: int = 0,
    reps: int = CARD_REPS,
    data: GuaranteeData | None = None,
    n_resamples: int | None = None,
    bootstrap_seed: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Calibrate ``method`` for accuracy ≥ ``target_accuracy`` and gather the evidence.

    Parameters
    ----------
    evaluation : the model (its protocol fixes the evaluation split and T).
    target_accuracy, delta : the requirement 1 − α and the PAC failure probability δ (needed by
        the PAC methods only, ``guarantees.needs_delta``).
    method : a name of ``guarantees.METHODS``; None: ``threshold.DEFAULT_METHOD`` (LTT on the
        answers' accuracy, δ = 0.1 unless given).
    n_cal : calibration samples drawn from the evaluation split (``threshold.calibration_draw``:
        stratified, ``seed``); default ``threshold.default_n_cal``: 1,000, at most 90 % of it. The
        rest measure the realised numbers. θ is ``threshold.threshold``'s: the Guaranteed-accuracy page's θ̂ for the same
        settings.
    ts : with temperature scaling.
    reps : repetitions of the evidence shoot-out (0: none).
    data : the setting's ``GuaranteeData`` when the caller has it cached.
    n_resamples, bootstrap_seed : the hAURC interval's bootstrap (default: the layer's), e.g. the
        report's, so its cached bootstrap is reused.
    options : further ``guarantees.GuaranteeSettings`` fields (``min_coverage``, ``p_value`` …).

    Returns
    -------
    dict, JSON-serialisable: the card (``card_markdown``/``card_json`` render it).

    Examples
    --------
    One call from logits (δ only for the PAC methods, such as the default ``ltt_selective``; the paper's
    marginal ``theorem1`` needs none):

    >>> from hsc_core.core.synthetic import synthetic_logits
    >>> from hsc_core.core.hierarchy import Hierarchy
    >>> h = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)   # leaves 0–3 under 4 and 5, root 6
    >>> logits, labels = synthetic_logits(h, 600, seed=0)
    >>> card = decision_card(ModelEvaluation(h, logits, labels, name="toy"), target_accuracy=0.9,
    ...                      method="theorem1", n_cal=200, reps=0, n_resamples=50)
    >>> card["model"], card["kind"], card["delta"], card["n_cal"], card["n_test"], round(card["theta"], 4)
    ('toy', 'marginal', None, 200, 340, 0.6805)
    >>> card_markdown(card).startswith("---")
    True
    """
    if method is None:
        method, delta = DEFAULT_METHOD, DEFAULT_DELTA if delta is None else delta
    method = check_methods([method])[0]
    if not 0.0 < float(target_accuracy) < 1.0:
        raise ValueError(f"the target accuracy must lie in (0, 1), got {target_accuracy}")
    settings = GuaranteeSettings(alpha=1.0 - float(target_accuracy), delta=None if delta is None else float(delta),
                                 **options)
    es = evaluation.setting(ts)
    data = data if data is not None else es.guarantee_data()
    n = data.n
    n_cal = int(default_n_cal(n) if n_cal is None else n_cal)
    if not 0 < n_cal < n:
        raise ValueError(f"n_cal must lie in (0, {n}) (the evaluation split's size), got {n_cal}")
    fit = threshold(data, float(target_accuracy), method, delta=settings.delta, n=n_cal, seed=seed, **options)
    nodes = fit.test_nodes
    h = data.hierarchy
    correct = h.is_ancestor(nodes, data.labels[fit.test_positions])
    k, m = int(correct.sum()), fit.n_test
    b = fit.breakdown
    m_ans = int(b["n_answered"])
    k_ans = int(round(b["answered_accuracy"] * m_ans)) if m_ans else 0
    cov = h.coverage[nodes]
    boot = es.bootstrap(n_resamples=N_RESAMPLES if n_resamples is None else n_resamples,
                        seed=BOOTSTRAP_SEED if bootstrap_seed is None else bootstrap_seed).haurc["climbing"]
    info = METHODS[method]
    evidence: dict[str, Any] = {}
    if reps:
        res = shootout(data, settings, n_cal, methods=[method], reps=int(reps), sampling="iid", seed=seed)
        row = res.summary.iloc[0]
        evidence = {"reps": int(reps), "sampling": "iid", "violation_rate": float(row["violation_rate"]),
                    "violation_high_95": float(row["violation_high"]), "accuracy_mean": float(row["accuracy_mean"]),
                    "coverage_mean": float(row["coverage_mean"]), "answered_mean": float(row["answered_mean"]),
                    "answered_accuracy_mean": float(row["answered_accuracy_mean"]),
                    "guarantee_holds": None if row["guarantee_holds"] == "" else bool(row["guarantee_holds"])}
    manifest = evaluation.manifest or {}
    ds = manifest.get("dataset") if isinstance(manifest.get("dataset"), dict) else {}
    return {
        "format": CARD_FORMAT,
        "model": evaluation.name,
        "timm_model": str(manifest.get("timm_model", "")),
        "weights": str(manifest.get("weights", "")),
        "file": evaluation.file,
        "dataset": evaluation.dataset,
        "dataset_name": str(ds.get("name", "")) if isinstance(ds, dict) else "",
        "hierarchy_hash": evaluation.hierarchy_hash,
        "protocol": evaluation.protocol,
        "protocol_text": protocol_text(evaluation.protocol),
        "temperature": float(es.temperature),
        "ts": bool(ts),
        "n_eval": int(n),
        "n_cal": n_cal,
        "n_test": m,
        "seed": int(seed),
        "method": method,
        "method_label": info.label,
        "method_source": info.source,
        "kind": info.kind,
        "quantity": info.quantity,
        "theta": float(fit.theta),
        "thetas_by_group": {str(g): t for g, t in fit.thetas_by_group.items()},
        "target_accuracy": settings.target,
        "delta": settings.delta,
        "certified": bool(fit.certified),
        "meets_target": fit.meets_target,
        "note": fit.note,
        "guarantee": fit.guarantee,
        "guaranteed": {
            "quantity": QUANTITY_WORDS[info.quantity],
            "accuracy": settings.target,
            "coverage": settings.min_coverage if method == "ltt_multi" else None,
            "severity_at_most": settings.max_severity if method == "ltt_multi" else None,
            "confidence": 1.0 - settings.delta_for(method) if info.kind == "pac" else None,
            "holds": "with probability" if info.kind == "pac" else ("none" if info.kind == "heuristic"
                                                                    else "on average"),
        },
        "realised": {
            "accuracy": k / m, "accuracy_interval": list(_proportion_interval(k, m)),
            "coverage": float(cov.mean()), "coverage_interval": list(_mean_interval(cov)),
            "set_size": float(h.leaf_count[nodes].mean()), "confidence": CONFIDENCE,
            # the manager's "how many get an answer, at which level, and how many answers are right"
            "answered": b["answered"], "answered_at_leaf": b["answered_at_leaf"],
            "answered_coarser": b["answered_coarser"], "abstained": b["abstained"],
            "answered_accuracy": None if not m_ans else b["answered_accuracy"],
            "answered_accuracy_interval": None if not m_ans else list(_proportion_interval(k_ans, m_ans)),
        },
        "haurc_climbing": {"value": boot.estimate, "interval": [boot.low, boot.high],
                           "confidence": CONFIDENCE},
        "evidence": evidence,
        "toolkit_version": toolkit_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def card_json(card: dict[str, Any]) -> str:
    """The card as indented JSON (the Markdown's twin)."""
    return json.dumps(card, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]#!|<>~&])")


def md_text(value: Any, limit: int = 200) -> str:
    """User text for a Markdown body: one line, capped, every Markdown/HTML special escaped."""
    text = " ".join(str(value).split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return _MD_SPECIAL.sub(r"\\\1", text)


def _yaml(value: Any) -> str:
    """A YAML scalar: JSON's quoting is valid YAML (double-quoted, escaped), numbers as they are."""
    return json.dumps(value, ensure_ascii=False)


def promise_words(card: dict[str, Any]) -> str:
    """What the card's method promises, about which quantity, with what confidence, in plain words."""
    g, target = card.get("guaranteed") or {}, card["target_accuracy"]
    on_answers = card.get("quantity") == "answers"
    what = (f"at least {target:.1%} of the answers on new data are correct (abstentions excluded)" if on_answers else
            f"the hierarchical accuracy on new data is at least {target:.1%} (abstentions count as correct)")
    if g.get("confidence") is not None:
        return f"guaranteed with {g['confidence']:.0%} confidence: {what}"
    if g.get("holds") == "on average":
        return (f"guaranteed only on average over calibration sets: {what}; this one calibration can fall below it "
                "(a marginal statement, no confidence)")
    return "nothing is guaranteed (a heuristic)"


def realised_words(card: dict[str, Any]) -> str:
    """Whether the held-out value of the guaranteed quantity meets the target ("" for old cards)."""
    if "meets_target" not in card:
        return ""
    r = card["realised"]
    on_answers = card.get("quantity") == "answers"
    value = (1.0 if r.get("answered_accuracy") is None else r["answered_accuracy"]) if on_answers else r["accuracy"]
    what = "accuracy of the answers" if on_answers else "hierarchical accuracy"
    verdict = "meets the target" if card["meets_target"] else "is BELOW the target"
    avg = " (the method promises the target only on average)" if card["kind"].startswith("marginal") else ""
    return f"held-out {what} {value:.4f} {verdict} {card['target_accuracy']:.4g}{avg}"


def answer_line(card: dict[str, Any]) -> str:
    """The card's sentence for a manager: θ, the shares of held-out samples answered at a leaf, at a
    coarser node and abstained, the accuracy of the answers, and what is guaranteed about which
    quantity with what confidence (the dashboard page's sentence).

    Cards written before the shares were recorded (no ``answered``) get the guarantee part only."""
    r = card["realised"]
    name = "λ" if card["method"] == "darts" else "θ"
    promise = promise_words(card)
    if "answered" not in r:
        return f"**Deploy {name} = {card['theta']:.4f}**: {promise}."
    if "abstained" not in r:  # a card of 1.1: shares only
        answered, leaf = r["answered"], r["answered_at_leaf"]
        return (f"**Deploy {name} = {card['theta']:.4f}**: **{answered:.0%} of the held-out samples get an answer** "
                f"({leaf:.0%} at a leaf, {answered - leaf:.0%} at a coarser node, {1 - answered:.0%} none); {promise}.")
    b = {**r, "n": card["n_test"], "n_answered": 0 if r["answered_accuracy"] is None else 1,
         "answered_accuracy": r["answered_accuracy"] if r["answered_accuracy"] is not None else float("nan")}
    tail = realised_words(card)
    return (f"**Deploy {name} = {card['theta']:.4f}**: {breakdown_sentence(b)}. **{promise[0].upper()}{promise[1:]}**"
            + (f"; {tail}." if tail else "."))


def _guaranteed_line(card: dict[str, Any]) -> str:
    g = card.get("guaranteed") or {}
    noun = "accuracy of the answers" if card.get("quantity") == "answers" else "hierarchical accuracy"
    parts = [f"{noun} ≥ {g.get('accuracy', card['target_accuracy']):.4g}"]
    if g.get("coverage") is not None:
        parts.append(f"coverage ≥ {g['coverage']:.4g}")
    if g.get("severity_at_most") is not None:
        parts.append(f"mean severity ≤ {g['severity_at_most']:.4g}")
    how = (f"with probability ≥ {g['confidence']:.4g}" if g.get("confidence") is not None
           else {"on average": "on average over calibration sets only", "none": "(no guarantee)"}.get(
               g.get("holds", ""), ""))
    trivially = "" if card["certified"] else " — met only trivially: the root is predicted where nothing is certified"
    return f"Guaranteed: {', '.join(parts)} {how}{trivially}."


def status_words(card: dict[str, Any]) -> tuple[str, str]:
    """(verdict, detail): certified (PAC), calibrated on average only (marginal: the evidence's share
    below the target said), a heuristic, or not certified with the reason."""
    if not card["certified"]:
        return "Not certified", str(card["note"])
    ev = card.get("evidence") or {}
    below = (f"{ev['violation_rate']:.1%} of the evidence's {ev['reps']:,} calibration sets fell below the target"
             if ev else "")
    if card["kind"] == "pac":
        return f"Certified with confidence {1 - card['delta']:.4g}", below
    if card["kind"].startswith("marginal"):
        return ("Calibrated, not certified for this calibration",
                "a marginal method promises the target only on average over calibration sets" + (f": {below}"
                                                                                                 if below else ""))
    return "No guarantee (a heuristic)", below


def _status_line(card: dict[str, Any]) -> str:
    verdict, detail = status_words(card)
    return f"**{verdict}:** {md_text(detail, 400)}" if detail else f"**{verdict}.**"


def _answer_rows(card: dict[str, Any]) -> list[str]:
    """The realised table's answer rows: shares answered at a leaf / coarser / abstained, and the
    accuracy of the answers (cards of 1.1 and before have none)."""
    r = card["realised"]
    if "abstained" not in r:
        return []
    rows = [f"| answered at a leaf | {r['answered_at_leaf']:.4f} | |",
            f"| answered at a coarser node | {r['answered_coarser']:.4f} | |",
            f"| abstained (the root) | {r['abstained']:.4f} | |"]
    if r["answered_accuracy"] is not None:
        lo, hi = r["answered_accuracy_interval"]
        target = f" (target {card['target_accuracy']:.4g})" if card.get("quantity") == "answers" else ""
        rows.append(f"| accuracy of the answers{target} | {r['answered_accuracy']:.4f} | [{lo:.4f}, {hi:.4f}] |")
    return rows


def card_markdown(card: dict[str, Any]) -> str:
    """Markdown with YAML front matter (Hugging Face model-card convention)."""
    r = card["realised"]
    ds = card["dataset"] or "unknown"
    front = [
        "---",
        f"model_name: {_yaml(card['model'])}",
        "library_name: hsc-toolkit",
        "tags: [hierarchical-selective-classification, conformal-prediction, risk-control]",
        f"datasets: [{_yaml(ds)}]",
        f"base_model: {_yaml(card['timm_model'] or card['model'])}",
        "model-index:",
        f"- name: {_yaml(card['model'])}",
        "  results:",
        "  - task: {type: image-classification, name: hierarchical selective classification}",
        f"    dataset: {{type: {_yaml(ds)}, name: {_yaml(card['dataset_name'] or ds)}}}",
        "    metrics:",
        f"    - {{type: hierarchical_accuracy, value: {r['accuracy']:.6f}, name: realised accuracy}}",
        f"    - {{type: coverage, value: {r['coverage']:.6f}, name: realised coverage}}",
        f"    - {{type: haurc, value: {card['haurc_climbing']['value']:.6f}, name: hAURC Climbing}}",
        "hsc_decision_card:",
        *(f"  {k}: {_yaml(card.get(k))}" for k in (
            "format", "method", "kind", "quantity", "theta", "target_accuracy", "delta", "certified", "meets_target",
            "n_cal", "n_test", "seed", "temperature", "ts", "hierarchy_hash", "protocol", "weights", "toolkit_version",
            "date")),
        "---",
    ]
    acc_lo, acc_hi = r["accuracy_interval"]
    cov_lo, cov_hi = r["coverage_interval"]
    h = card["haurc_climbing"]
    lines = [
        f"# Decision card: {md_text(card['model'])}",
        "",
        f"**Ship {'λ' if card['method'] == 'darts' else 'θ'} = {card['theta']:.6g}** with "
        f"*{md_text(card['method_label'])}* (`{card['method']}`; {md_text(card['method_source'])}).",
        "",
        answer_line(card),
        "",
        "## Guarantee",
        "",
        md_text(card["guarantee"], 400),
        "",
        _status_line(card),
        "",
        _guaranteed_line(card),
        "",
        "## Realised on held-out samples",
        "",
        f"| quantity | value | {card['realised']['confidence']:.0%} interval |",
        "|---|---|---|",
        *_answer_rows(card),
        "| hierarchical accuracy (abstentions count as correct"
        + (f"; target {card['target_accuracy']:.4g}" if card.get("quantity", "hierarchical") == "hierarchical" else "")
        + f") | {r['accuracy']:.4f} | [{acc_lo:.4f}, {acc_hi:.4f}] |",
        f"| coverage | {r['coverage']:.4f} | [{cov_lo:.4f}, {cov_hi:.4f}] |",
        f"| mean set size (leaves) | {r['set_size']:.2f} | |",
        f"| hAURC (Climbing, ×1000) | {1000 * h['value']:.2f} | [{1000 * h['interval'][0]:.2f}, "
        f"{1000 * h['interval'][1]:.2f}] |",
        "",
        f"Calibrated on {card['n_cal']:,} samples (seed {card['seed']}) of the {card['n_eval']:,}-sample evaluation "
        f"split, measured on the other {card['n_test']:,}.",
        "",
    ]
    ev = card.get("evidence") or {}
    noun = "accuracy of the answers" if card.get("quantity") == "answers" else "hierarchical accuracy"
    if ev:
        lines += [
            "## Evidence",
            "",
            f"Over {ev['reps']:,} calibration sets of {card['n_cal']:,} drawn with replacement (the data set as the "
            f"deployment distribution): the {noun} fell below {card['target_accuracy']:.4g} in "
            f"{ev['violation_rate']:.1%} of them (95 % upper limit {ev['violation_high_95']:.1%}"
            + ("" if card["delta"] is None else f"; δ = {card['delta']:.4g}")
            + f"); mean {noun} {ev['accuracy_mean']:.4f}"
            + (f", mean share answered {ev['answered_mean']:.4f}" if "answered_mean" in ev else "")
            + f", mean coverage {ev['coverage_mean']:.4f}.",
            "",
        ]
    lines += [
        "## Provenance",
        "",
        f"- model: {md_text(card['model'])} ({md_text(card['timm_model'] or 'n/a')})",
        f"- weights: {md_text(card['weights'] or 'n/a')}",
        f"- data set: {md_text(ds)} — hierarchy hash `{card['hierarchy_hash']}`",
        f"- protocol: {md_text(card['protocol'])} — {md_text(card['protocol_text'], 400)}",
        f"- temperature T = {card['temperature']:.4f} ({'applied' if card['ts'] else 'not applied'})",
        f"- toolkit hsc {md_text(card['toolkit_version'])}, {card['date']}",
        "",
    ]
    return "\n".join(front) + "\n\n" + "\n".join(lines)
