"""Induce an ImageNet-1k class tree from a model's classifier weights and write it as hierarchy JSON.

Usage::

    python -m hsc_core.pipeline.induce_hierarchy [--model efficientnet_lite0]
        [--out hsc_core/datasets/data/imagenet_induced_lite0_hierarchy.json]

The clustering itself is ``hsc_core.datasets.imagenet_trees.induce_tree`` (Ward linkage of the
L2-normalised rows of the final layer); this module only loads the weights, which needs torch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.imagenet import imagenet_class_names, imagenet_wnids
from ..datasets.imagenet_trees import INDUCED_JSON, induce_tree

__all__ = ["classifier_weights", "main"]


def classifier_weights(model_name: str) -> np.ndarray:
    """float64 (1000, D) final-layer weights of a registered ImageNet-1k model (``models.load_model``)."""
    from .models import load_model

    model: Any
    model, _, info = load_model(model_name)
    if info.num_classes != 1000:
        raise ValueError(f"{model_name} has {info.num_classes} outputs, not ImageNet-1k's 1000")
    head: Any = model.get_classifier()  # timm's EfficientNet: a torch.nn.Linear
    return head.weight.detach().double().numpy()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hsc_core.pipeline.induce_hierarchy",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="efficientnet_lite0", help="registered model whose classifier is clustered")
    ap.add_argument("--out", type=Path, default=INDUCED_JSON, help="output JSON path")
    args = ap.parse_args(argv)
    from .models import ModelLoadError, UnknownModelError

    try:
        tree = induce_tree(classifier_weights(args.model), imagenet_wnids(), imagenet_class_names())
    except (UnknownModelError, ModelLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tree.to_json(args.out)
    print(f"wrote {args.out}: {tree.n_nodes} nodes, max depth {tree.max_depth}, "
          f"mean leaf depth {tree.depth[: tree.n_leaves].mean():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
