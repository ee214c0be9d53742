"""The torchmetrics metrics (``hsc_core.integrations.torchmetrics``, issue 44): batches accumulate,
states merge across processes, and ``compute`` is the evaluation layer's exact hAURC."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

import hsc_core as hsc  # noqa: E402
from hsc_core.core.synthetic import synthetic_logits  # noqa: E402
from hsc_core.integrations import torchmetrics as htm  # noqa: E402
from hsc_core.integrations.torchmetrics import HierarchicalAURC, HierarchicalRiskAtCoverage  # noqa: E402

TREE = hsc.Hierarchy.from_parents([6, 6, 6, 7, 7, 8, 9, 9, 9, -1], 6)  # leaves 0–5; a caterpillar on the right


@pytest.fixture(scope="module")
def data():
    logits, labels = synthetic_logits(TREE, 700, top1=0.6, seed=4)
    return logits.astype(np.float64), labels


def test_doctests():
    result = doctest.testmod(htm, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("rule", ["climbing", "selective", "max_coverage", "hf1"])
def test_batches_give_the_engines_haurc(data, rule):
    logits, labels = data
    metric = HierarchicalAURC(TREE, rule)
    for start in range(0, len(labels), 128):  # uneven batches
        metric.update(torch.from_numpy(logits[start: start + 128]), torch.from_numpy(labels[start: start + 128]))
    _, expected = hsc.rc_curve_and_haurc(TREE, logits, labels, rule, ts=False, protocol="paper")
    assert abs(float(metric.compute()) - expected) <= 1e-12
    if rule in hsc.RULES:  # the dense path on every sample, an independent implementation
        dense = hsc.hierarchical_aurc(TREE, hsc.node_probabilities(TREE, hsc.softmax(logits)), labels, rule)
        assert abs(float(metric.compute()) - dense) <= 1e-12
    metric.reset()
    with pytest.raises(ValueError, match="no samples yet"):
        metric.compute()


def test_protocol_settings_pass_through(data):
    logits, labels = data
    metric = HierarchicalAURC(TREE, "climbing", ts=True, protocol="project", loss="severity")
    metric.update(torch.from_numpy(logits), torch.from_numpy(labels))
    _, expected = hsc.rc_curve_and_haurc(TREE, logits, labels, "climbing", loss="severity")
    assert abs(float(metric.compute()) - expected) <= 1e-12


def test_states_merge_as_devices_would(data):
    """Two metrics, as on two devices, merged (``merge_state``: what DDP's sync concatenates) give
    the hAURC of all samples; float32 logits stay float32, as ``rc_curve_and_haurc`` keeps them."""
    logits, labels = data
    logits32 = logits.astype(np.float32)
    a, b = HierarchicalAURC(TREE), HierarchicalAURC(TREE)
    a.update(torch.from_numpy(logits32[:300]), torch.from_numpy(labels[:300]))
    b.update(torch.from_numpy(logits32[300:]), torch.from_numpy(labels[300:]))
    a.merge_state(b)
    _, expected = hsc.rc_curve_and_haurc(TREE, logits32, labels, "climbing", ts=False, protocol="paper")
    assert abs(float(a.compute()) - expected) <= 1e-12
    # sync's concatenation, by hand: the states are plain lists of tensors, reduced by "cat"
    assert a._reductions["logits"].__name__ == "dim_zero_cat" and a._reductions["labels"].__name__ == "dim_zero_cat"


def test_risk_at_coverage_is_the_curves(data):
    logits, labels = data
    metric = HierarchicalRiskAtCoverage(TREE, coverage=0.8, rule="climbing")
    metric.update(torch.from_numpy(logits), torch.from_numpy(labels))
    curve, _ = hsc.rc_curve_and_haurc(TREE, logits, labels, "climbing", ts=False, protocol="paper")
    risk, _ = hsc.risk_at_coverage(curve, [0.8])
    assert float(metric.compute()) == pytest.approx(float(risk[0]), abs=1e-12)
    # by hand: the operating point of largest θ whose coverage is still ≥ 0.8
    j = np.flatnonzero(curve.coverage >= 0.8)[-1]
    assert float(metric.compute()) == pytest.approx(float(curve.risk[j]), abs=1e-12)


def test_bad_input_is_one_line():
    metric = HierarchicalAURC(TREE)
    long = torch.long
    for preds, target, match in ((torch.zeros(3, 5), torch.zeros(3, dtype=long), "one column per leaf"),
                                 (torch.zeros(3, 6), torch.zeros(2, dtype=long), r"labels must have shape \(3,\)"),
                                 (torch.zeros(3, 6), torch.full((3,), 6), r"leaf indices in \[0, 6\), got 6"),
                                 (torch.zeros(3, 6), torch.zeros(3), "integer leaf indices")):
        with pytest.raises(ValueError, match=match) as exc:
            metric.update(preds, target)
        assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="unknown rule|not a rule|rule"):
        HierarchicalAURC(TREE, "nope")
    with pytest.raises(ValueError, match=r"coverage must lie in \[0, 1\]"):
        HierarchicalRiskAtCoverage(TREE, coverage=1.5)


def test_lightning_validation_loop_logs_the_engines_haurc(data, tmp_path):
    """The docs' Lightning example, run: a validation loop logs hAURC per epoch, equal to the
    engine's on the same logits."""
    lightning = pytest.importorskip("lightning")
    logits, labels = data
    x = torch.from_numpy(logits).float()
    y = torch.from_numpy(labels)

    class Model(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(1))
            self.val_haurc = HierarchicalAURC(TREE, rule="climbing")

        def forward(self, inputs):
            return inputs * self.scale

        def validation_step(self, batch, batch_idx):
            inputs, target = batch
            self.val_haurc.update(self(inputs), target)
            self.log("val_haurc", self.val_haurc, on_epoch=True)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=100)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    out = trainer.validate(Model(), loader, verbose=False)
    _, expected = hsc.rc_curve_and_haurc(TREE, x.numpy(), labels, "climbing", ts=False, protocol="paper")
    assert abs(out[0]["val_haurc"] - expected) <= 1e-6  # Lightning logs a float32
