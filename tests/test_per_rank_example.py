"""The shipped per-rank example (ImageNet-1k, efficientnet_lite0): regenerating it gives the same
bytes, and what it holds agrees with the logits and the WordNet tree it was made from."""

from __future__ import annotations

import numpy as np
import pytest

from hsc_core.core.probabilities import node_probabilities, softmax
from hsc_core.datasets.imagenet import imagenet_hierarchy
from hsc_core.datasets.logits_io import load_logits, top1_accuracy
from hsc_core.datasets.per_rank import read_per_rank
from hsc_core.pipeline.per_rank_example import EXAMPLE, LOGITS, write_example

pytestmark = pytest.mark.skipif(not LOGITS.exists(), reason="no shipped logits")


def test_regenerating_gives_the_same_file(tmp_path):
    assert write_example(tmp_path / "again.csv").read_bytes() == EXAMPLE.read_bytes()
    assert EXAMPLE.stat().st_size < 400_000  # small enough to ship


def test_example_agrees_with_the_logits():
    scores = read_per_rank(EXAMPLE)
    bundle = load_logits(LOGITS)
    assert scores.ranks == ("depth3", "depth5", "depth7", "class") and scores.n == bundle.labels.size
    # the finest rank is the arg-max class: right exactly as often as the model's top-1
    assert scores.correct[:, -1].mean() == pytest.approx(top1_accuracy(bundle.logits, bundle.labels))
    # nested predictions: right at a rank ⇒ right at every coarser rank
    assert (np.diff(scores.correct.astype(int), axis=1) <= 0).all()
    # confidences are the WordNet node probabilities (4 decimals) of the predicted nodes
    h = imagenet_hierarchy()
    probs = node_probabilities(h, softmax(np.asarray(bundle.logits[:50], dtype=np.float64)))
    pred = np.array([[h.index_of(scores.hierarchy.node_ids[v]) for v in row] for row in scores.pred_nodes[:50]])
    np.testing.assert_allclose(scores.conf[:50], np.take_along_axis(probs, pred, axis=1), atol=5e-5)
