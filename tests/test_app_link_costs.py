"""The Calibrators page opened from the attack's link (issue 42, item 2): every calibrator × every score
of every listed model with intervals. One run computes at most its budget's pairs, says how many are
left and refuses Dirichlet scaling at ImageNet size in one line; its button computes the next pairs."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_support import open_page

from dashboard import calibrators as cal

ROOT = Path(__file__).resolve().parent.parent
ALL_CALS = "none,temperature,vector,matrix,dirichlet,isotonic,depth_temperature"
ALL_SCORES = "softmax,margin,entropy,doctor,energy,member_mean,member_disagreement"


@pytest.mark.skipif(not (ROOT / "cached_logits" / "efficientnet_lite0.npz").exists(), reason="no shipped logits")
def test_the_costliest_calibrators_link_is_computed_one_budget_at_a_time(monkeypatch):
    monkeypatch.delenv("HSC_SYNTHETIC", raising=False)
    monkeypatch.delenv("HSC_CACHED_LOGITS_DIR", raising=False)
    at = open_page("app_pages/calibrators.py", {"c_scope": "all", "c_ci": "1", "c_cals": ALL_CALS,
                                                "c_scores": ALL_SCORES})
    refused = [w.value for w in at.warning if "Dirichlet" in w.value]
    assert len(refused) == 1 and "more than one run of this page may take (20 s)" in refused[0]
    assert "`hsc evaluate --calibrator dirichlet`" in refused[0]
    left = [i.value for i in at.info if "more calibrator × score pair" in i.value]
    assert len(left) == 1
    first = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    assert 0 < len(first) < 20 and "Dirichlet calibration (ODIR)" not in set(first["calibrator"])
    more = next(b for b in at.button if b.key == "calib_more")
    more.click().run()
    assert not at.exception
    second = next(d.value for d in at.dataframe if "hAURC×1000" in d.value.columns)
    assert len(second) > len(first)  # the next run went on where the first stopped
    assert cal.RUN_BUDGET_S == 20.0
