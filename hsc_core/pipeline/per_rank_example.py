"""The shipped per-rank example: ImageNet-1k scores of a shipped model, read as a per-rank classifier.

``hsc_core/datasets/data/imagenet_lite0_per_rank.csv`` is made from
``cached_logits/efficientnet_lite0.npz`` (1,894 ImageNet validation images) and the shipped
WordNet tree, with no temperature scaling: for each image, the arg-max class and its ancestors at
depths 3, 5 and 7 of the tree are the predictions (a class shallower than a depth stands for itself
there), each rank's confidence is its node probability (the sum of the softmax over the classes
under it, rounded to 4 decimals), and the true class's ancestors at the same depths are the truth.
Labels are WordNet ids. Regenerate with ``python -m hsc_core.pipeline.per_rank_example``; the
tests check that this gives the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.probabilities import node_probabilities, softmax
from ..datasets.imagenet import imagenet_hierarchy
from ..datasets.logits_io import load_logits
from ..datasets.per_rank import EXAMPLE

REPO = Path(__file__).resolve().parents[2]
LOGITS = REPO / "cached_logits" / "efficientnet_lite0.npz"
DEPTHS = (3, 5, 7)
DECIMALS = 4


def example_frame(logits_path: Path = LOGITS, depths: tuple[int, ...] = DEPTHS) -> pd.DataFrame:
    """The per-rank table (one row per image, ranks ``depth3 … depth7, class``)."""
    h = imagenet_hierarchy()
    bundle = load_logits(logits_path)
    probs = node_probabilities(h, softmax(np.asarray(bundle.logits, dtype=np.float64)))  # (n, n_nodes)
    top1 = np.argmax(probs[:, : h.n_leaves], axis=1)
    rows = np.arange(top1.size)
    ids = np.asarray(h.node_ids)
    frame = {"sample_id": np.asarray(bundle.sample_ids, dtype=str)}
    for name, depth in [*((f"depth{d}", d) for d in depths), ("class", None)]:
        pred = top1 if depth is None else h.ancestor_at_depth(top1, np.minimum(depth, h.depth[top1]))
        true = bundle.labels if depth is None else h.ancestor_at_depth(bundle.labels,
                                                                       np.minimum(depth, h.depth[bundle.labels]))
        frame[f"true_{name}"] = ids[true]
        frame[f"pred_{name}"] = ids[pred]
        frame[f"conf_{name}"] = np.round(np.clip(probs[rows, pred], 0.0, 1.0), DECIMALS)
    return pd.DataFrame(frame)


def write_example(path: Path = EXAMPLE) -> Path:
    """Write the example CSV (``\\n`` line ends, 4 decimals) and return its path."""
    example_frame().to_csv(path, index=False, lineterminator="\n", float_format=f"%.{DECIMALS}f")
    return path


if __name__ == "__main__":  # pragma: no cover - a maintenance script
    print(write_example(Path(sys.argv[1]) if len(sys.argv) > 1 else EXAMPLE))
