"""Guaranteed accuracy: the θ to deploy for a target accuracy, what it guarantees with what confidence
and how many samples get an answer (one sentence), its decision card, and under "Advanced" the
calibration settings, the repetitions (Figure 3), the Theorem-1 solver and every method side by side.
The sections are ``dashboard.guarantees_view``'s."""

import streamlit as st

from dashboard import entry, guarantees_view, presenter, sections, sidebar, state
from hsc_core.evaluation.threshold import MAX_CAL_SHARE

entry.ensure_entrypoint(globals())

es = sidebar.require_model_context()
st.title("Guaranteed accuracy")
# The manager's controls and the sentence come first; the explanation folds away (in presenter mode the
# histogram of the repetitions shares the first screen with them).
if not presenter.presenter():
    st.caption(sidebar.eval_caption(es))
intro = st.expander("What this page does: Algorithm 2's θ̂ and Theorem 1's ε")
with intro:
    st.markdown(
        "Pick a target accuracy **1 − α** and a confidence **1 − δ**. A random calibration set of **n** samples "
        "gives each sample's smallest θ at which Climbing is correct; θ̂ is their ⌈(n+1)(1−α)⌉-th smallest value. "
        "Theorem 1: with probability ≥ 1 − δ over the calibration set, the accuracy on new samples is within "
        "**ε** of the target. The remaining samples are the test set."
    )
N = es.view.n
if N < 40:
    st.error(f"Only {N} samples: too few to split into calibration and test sets.")
    st.stop()
N_MAX = max(20, int(N * MAX_CAL_SHARE))
with intro:
    st.caption(
        f"{N:,} samples here: n goes up to {N_MAX:,} and the rest are the test set. The paper calibrates on 5,000 of "
        "the 50,000 validation images and repeats 1,000 times; on the shipped sample's 1,705 evaluation images (of "
        "its 1,894: the other 10 % only fit T) n defaults to 1,000 and the repetitions to 200."
    )


@state.fragment
def guaranteed_accuracy() -> None:
    guarantees_view.page(es, N_MAX)


guaranteed_accuracy()
sections.shift_guarantee_section(es)  # calibrate on clean, test on corrupted images (when the model has them)
