"""hAURC and risk at a coverage as ``torchmetrics.Metric`` s for training loops (needs torch and torchmetrics).

Both metrics accumulate logits and labels across batches in list states that concatenate across
devices (``dist_reduce_fx="cat"``: DDP, ``merge_state``), and ``compute`` hands everything to the
evaluation layer (``rc_curve_and_haurc``): the exact curve, never a binned estimate. By default they
measure every accumulated sample without temperature scaling (``ts=False, protocol="paper"``), as a
validation metric should; ``ts=True`` gives the protocol's numbers (T on a seeded 10 % split, the
curve on the other 90 %), which depend on the samples' order when they come from several devices.

Example (Lightning)::

    from hsc_core.integrations.torchmetrics import HierarchicalAURC

    class Model(lightning.LightningModule):
        def __init__(self, tree):
            super().__init__()
            self.val_haurc = HierarchicalAURC(tree, rule="climbing")

        def validation_step(self, batch, batch_idx):
            x, y = batch                         # y: leaf indices (the logits' columns are the tree's leaves)
            self.val_haurc.update(self(x), y)
            self.log("val_haurc", self.val_haurc, on_epoch=True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from ..core.curves import RCCurve
from ..core.metric_rules import check_rule
from ..core.risk import LOSSES, Loss
from ..core.selective_metrics import risk_at_coverage
from ..core.validation import quote
from ..evaluation.one_call import rc_curve_and_haurc
from .trees import TreeSpec, as_hierarchy

__all__ = ["HierarchicalAURC", "HierarchicalRiskAtCoverage"]


class _HierarchicalCurve(Metric):
    """Accumulates (logits, labels); ``curve()`` is the exact RC curve of the evaluation layer."""

    is_differentiable = False
    higher_is_better = False
    full_state_update = False
    logits: list[torch.Tensor]
    labels: list[torch.Tensor]

    def __init__(self, hierarchy: TreeSpec, rule: str = "climbing", *, loss: Loss = "01", ts: bool = False,
                 protocol: str = "paper", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hierarchy = as_hierarchy(hierarchy)
        self.rule = check_rule(rule)
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {quote(loss)}; choose one of {', '.join(LOSSES)}")
        self.loss, self.ts, self.protocol = loss, bool(ts), protocol
        self.add_state("logits", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")

    def update(self, preds: torch.Tensor, target: torch.Tensor) -> None:
        """Add a batch.

        Parameters
        ----------
        preds : (batch, n_leaves) logits, columns in the tree's leaf order (log-probabilities work:
            a softmax gives the probabilities back).
        target : (batch,) true leaf indices.
        """
        n_leaves = self.hierarchy.n_leaves
        if preds.ndim != 2 or preds.shape[1] != n_leaves:
            raise ValueError(f"logits must have shape (batch, {n_leaves}) (one column per leaf of the tree), "
                             f"got {tuple(preds.shape)}")
        if target.ndim != 1 or target.shape[0] != preds.shape[0]:
            raise ValueError(f"labels must have shape ({preds.shape[0]},), got {tuple(target.shape)}")
        if target.is_floating_point() or target.is_complex():
            raise ValueError(f"labels must be integer leaf indices, got dtype {target.dtype}")
        lo, hi = (int(target.min()), int(target.max())) if target.numel() else (0, 0)
        if lo < 0 or hi >= n_leaves:
            raise ValueError(f"labels must be leaf indices in [0, {n_leaves}), got {lo if lo < 0 else hi}")
        self.logits.append(preds.detach())
        self.labels.append(target.detach().long())

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The accumulated (n, n_leaves) logits (float64 stays float64, other dtypes become float32,
        as ``check_logits`` keeps them) and (n,) labels, as numpy."""
        if not self.logits:
            raise ValueError(f"{type(self).__name__}: no samples yet: call update() before compute()")
        logits = dim_zero_cat(self.logits).detach().cpu()
        logits = logits.double() if logits.dtype == torch.float64 else logits.float()
        return logits.numpy(), dim_zero_cat(self.labels).detach().cpu().numpy()

    def curve(self) -> RCCurve:
        """The exact hierarchical RC curve of everything accumulated (``rc_curve_and_haurc``)."""
        logits, labels = self.arrays()
        curve, _ = rc_curve_and_haurc(self.hierarchy, logits, labels, self.rule, ts=self.ts, loss=self.loss,
                                      protocol=self.protocol)
        return curve


class HierarchicalAURC(_HierarchicalCurve):
    """hAURC of ``rule`` (raw; the paper prints ×1000) over every sample seen since the last reset.

    Parameters
    ----------
    hierarchy : the class tree (a ``Hierarchy``, a hierarchy file, or a {child: parent} mapping).
    rule : any registered rule (``rule_names()``).
    loss : ``"01"`` or ``"severity"``.
    ts, protocol : as ``rc_curve_and_haurc``; default every sample, no temperature scaling.
    kwargs : ``torchmetrics.Metric`` options (``dist_sync_on_step`` …).

    Examples
    --------
    >>> import torch
    >>> from hsc_core import Hierarchy
    >>> tree = Hierarchy.from_parents([4, 4, 5, 5, 6, 6, -1], 4)
    >>> metric = HierarchicalAURC(tree)
    >>> metric.update(torch.tensor([[3.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]]), torch.tensor([0, 0]))
    >>> metric.update(torch.tensor([[0.0, 0.0, 0.0, 1.0]]), torch.tensor([3]))
    >>> float(metric.compute()) * 36     # by hand: risk 1/3 from coverage 1 down to 2/3, then 0
    5.0
    """

    def compute(self) -> torch.Tensor:
        return torch.tensor(self.curve().haurc, dtype=torch.float64)


class HierarchicalRiskAtCoverage(_HierarchicalCurve):
    """Hierarchical risk of ``rule`` at the largest θ whose coverage is ≥ ``coverage``
    (``risk_at_coverage``; NaN when no operating point reaches it).

    Parameters
    ----------
    hierarchy, rule, loss, ts, protocol, kwargs : as ``HierarchicalAURC``.
    coverage : the target coverage, in [0, 1].
    """

    def __init__(self, hierarchy: TreeSpec, coverage: float = 0.9, rule: str = "climbing", **kwargs: Any) -> None:
        super().__init__(hierarchy, rule, **kwargs)
        if not 0.0 <= float(coverage) <= 1.0:
            raise ValueError(f"coverage must lie in [0, 1], got {coverage}")
        self.coverage = float(coverage)

    def compute(self) -> torch.Tensor:
        risk, _ = risk_at_coverage(self.curve(), [self.coverage])
        return torch.tensor(float(risk[0]), dtype=torch.float64)
