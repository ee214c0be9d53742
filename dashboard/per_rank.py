"""The per-rank thresholds page's logic: reading the table (the shipped example or an upload, bounded),
the card (cached by content), and its two figures (the shared-θ RC curve, where answers stop)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from hsc_core import config
from hsc_core.core.per_rank import rank_rc_curve
from hsc_core.datasets.per_rank import EXAMPLE, PerRankScores, read_per_rank
from hsc_core.evaluation.guarantee_methods import QUANTITY_WORDS
from hsc_core.evaluation.per_rank import (
    check_study_size,
    guarantee_text,
    rank_breakdown,
    rank_card,
    rank_card_json,
    rank_card_markdown,
)

#: The largest table the page reads (the uploader refuses larger files before they reach it).
MAX_UPLOAD_MB = 20
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 2**20
#: The most memory one table may take once decoded, and its split study (a Parquet file of 500 kB can
#: decode to gigabytes: both are checked before they are allocated, as ``hsc ranks`` does with its bound;
#: ``HSC_MAX_DECODED_MB`` can lower it).
MAX_DECODED_MB = 512
MAX_DECODED_BYTES = MAX_DECODED_MB * 2**20
#: Random calibration/test splits of the comparison (as ``hsc ranks``).
REPS = 1000
EXAMPLE_NAME = EXAMPLE.name


@st.cache_data(show_spinner=False, max_entries=4)
def _scores(digest: str, name: str, percent: bool, _payload: bytes) -> PerRankScores:
    budget = min(MAX_DECODED_BYTES, config.max_decoded_bytes())
    scores = read_per_rank(_payload, name=name, percent=percent, max_bytes=MAX_UPLOAD_BYTES, max_decoded=budget)
    try:
        check_study_size(scores.n, len(scores.ranks), budget=budget)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return scores


def load_scores(name: str | None, payload: bytes | None, percent: bool) -> tuple[PerRankScores, str, str]:
    """(scores, file name, content key) of the uploaded table (``name``, ``payload``), or of the
    shipped example when there is none; cached by content. Raises ``ScoresFileError`` (one line), or a
    ValueError when the table's split study would take more than ``MAX_DECODED_BYTES``."""
    if payload is None:
        name, payload = EXAMPLE_NAME, EXAMPLE.read_bytes()
    name = str(name)
    digest = hashlib.sha256(payload).hexdigest() + ("%" if percent else "")
    return _scores(digest, name, percent, payload), name, digest


@st.cache_data(show_spinner=False, max_entries=16)
def _card(digest: str, _scores_obj: PerRankScores, source: str, target: float, delta: float,
          quantity: str) -> dict[str, Any]:
    return rank_card(_scores_obj, target, delta, source=source, reps=REPS, quantity=quantity)  # type: ignore[arg-type]


def card_for(scores: PerRankScores, digest: str, source: str, target: float, delta: float,
             quantity: str = "hierarchical") -> dict[str, Any]:
    """``rank_card`` of the table at (target, δ) for ``quantity`` (``QUANTITY_WORDS``), cached by the
    table's content key and the settings."""
    return _card(digest, scores, source, float(target), float(delta), str(quantity))


def quantity_label(quantity: str) -> str:
    """The choice of which accuracy to guarantee, as the page's radio shows it (``QUANTITY_WORDS``)."""
    words = QUANTITY_WORDS[quantity]
    return words[0].upper() + words[1:]


def card_downloads(card: dict[str, Any]) -> tuple[str, str]:
    """(Markdown, JSON) of the card."""
    return rank_card_markdown(card), rank_card_json(card)


def rc_figure(scores: PerRankScores, font_size: int | None = None) -> go.Figure:
    """The exact RC curve of Climbing by rank with one shared θ (hover: θ)."""
    curve = rank_rc_curve(scores.conf, scores.correct, scores.coverage)
    fig = go.Figure(go.Scatter(x=curve.coverage, y=curve.risk, mode="lines+markers", marker={"size": 3},
                               customdata=curve.thresholds, name="Climbing by rank",
                               hovertemplate="θ ≤ %{customdata:.4f}<br>coverage %{x:.3f}<br>risk %{y:.4f}"
                                             "<extra></extra>"))
    fig.update_layout(title=f"One shared θ: hAURC {curve.haurc:.5f}", xaxis_title="coverage",
                      yaxis_title="hierarchical risk (0/1)", height=380, margin={"t": 50, "b": 40},
                      font={"size": font_size} if font_size else None)
    return fig


def stops_figure(card: dict[str, Any], font_size: int | None = None) -> go.Figure:
    """Bar: the share of samples whose answer stops at each rank (and at the root) at the card's θ."""
    labels = list(card["answer_share"])
    shares = np.array(list(card["answer_share"].values()))
    fig = go.Figure(go.Bar(x=labels, y=shares, text=[f"{s:.1%}" for s in shares], textposition="outside",
                           hovertemplate="%{x}: %{y:.1%}<extra></extra>"))
    fig.update_layout(title="Where answers stop", yaxis_tickformat=".0%", yaxis_range=[0, 1.1], height=380,
                      margin={"t": 50, "b": 40}, font={"size": font_size} if font_size else None)
    return fig


def verdict(card: dict[str, Any], target: float, delta: float, n: int) -> str:
    """The card's verdict in one sentence: certified (with the realised accuracy and coverage), or
    why no θ vector can be. The page and its snapshot show this."""
    if card["certified"]:
        flat = card.get("shared_theta") or {}
        versus = (f" One shared θ at the full δ reaches coverage {flat['realised_coverage']:.3f} on it."
                  if flat.get("certified") else "")
        promise = guarantee_text(card.get("quantity", "hierarchical"), target)
        return (f"Certified with probability ≥ {1 - delta:.0%}: {promise}. On this table: {rank_breakdown(card)}; "
                f"coverage {card['realised_coverage']:.3f}.{versus}")
    return (f"No θ vector can be certified for {target:.1%} at δ = {delta:g} on {n:,} samples: every sample "
            "abstains. Lower the target or add samples.")


def thetas_rows(card: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per rank: θ (``never`` where the rank does not answer) and the share stopping there."""
    return [{"rank": r, "θ": "never" if t is None else f"{t:.4f}", "answers stopping here":
             f"{card['answer_share'][r]:.1%}"} for r, t in card["thetas"].items()]


def comparison_rows(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The split study as display rows (violation rate on the whole table, and on the test half with its
    binomial noise; mean accuracy, mean coverage per method)."""
    return [{"method": r["method"], "thresholds": r["thetas"], "violation rate": f"{r['violation_rate']:.1%}",
             "on the test half (noisier)": f"{r['violation_rate_test']:.1%}",
             "mean accuracy": f"{r['mean_accuracy']:.2%}", "mean coverage": f"{r['mean_coverage']:.3f}"}
            for r in card["comparison"]]
