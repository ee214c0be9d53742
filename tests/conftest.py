"""Shared fixtures: the §9 toy tree of the definitions file and small synthetic data."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

from hsc_core.core.hierarchy import Hierarchy
from hsc_core.core.probabilities import node_probabilities

REPO = Path(__file__).resolve().parents[1]
# The dashboard's on-disk caches (results by content, snapshot links) of this test run only, also for
# the servers the browser tests start: a run never reads or fills the user's ~/.cache/hsc.
os.environ.setdefault("HSC_CACHE_DIR", tempfile.mkdtemp(prefix="hsc-test-cache-"))
SHARED = REPO.parent / "shared"

# Leaves 0–4; A(5) = {0, 1}; C(6) = {3, 4}; B(7) = {2, C}; root R(8) = {A, B}.
TOY_PARENTS = [5, 5, 7, 6, 6, 8, 7, 8, -1]
TOY_LEAF_PROBS = np.array([
    [0.30, 0.05, 0.25, 0.25, 0.15],
    [0.70, 0.10, 0.10, 0.05, 0.05],
    [0.10, 0.10, 0.20, 0.35, 0.25],
    [0.20, 0.20, 0.20, 0.20, 0.20],
    [0.05, 0.05, 0.10, 0.10, 0.70],
])
TOY_LABELS = np.array([2, 1, 4, 0, 4])


@pytest.fixture(scope="session")
def toy() -> Hierarchy:
    return Hierarchy.from_parents(TOY_PARENTS, n_leaves=5, node_ids=list("01234ACBR"))


@pytest.fixture(scope="session")
def toy_probs(toy: Hierarchy) -> np.ndarray:
    return node_probabilities(toy, TOY_LEAF_PROBS)


def random_tree(n_leaves: int, seed: int) -> Hierarchy:
    """A random tree whose internal nodes have 2–5 children, built bottom-up."""
    rng = np.random.default_rng(seed)
    parent_of: dict[str, str] = {}
    level = [f"leaf{i}" for i in range(n_leaves)]
    k = 0
    while len(level) > 1:
        order = rng.permutation(len(level))
        nxt, i = [], 0
        while i < len(level):
            size = int(rng.integers(2, 6))
            if len(level) - (i + size) == 1:
                size += 1  # never leave a single node behind
            name = f"node{k}"
            k += 1
            for j in order[i: i + size]:
                parent_of[level[j]] = name
            nxt.append(name)
            i += size
        level = nxt
    return Hierarchy.from_parent_map(parent_of, [f"leaf{i}" for i in range(n_leaves)])


@pytest.fixture
def downloads(monkeypatch) -> dict:
    """key → payload of every st.download_button the pages create (the payload as given: bytes or a
    callable); read a CSV one with ``app_support.download_rows``."""
    import streamlit as st

    got, real = {}, st.download_button

    def spy(label, data, *args, **kwargs):
        got[kwargs.get("key")] = data
        return real(label, data, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", spy)
    return got


@pytest.fixture(scope="module")
def browser():
    """One headless Debian Chromium per browser-test module (``browser_support.chromium``); the
    module skips without Playwright or Chromium."""
    from browser_support import chromium, require_browser

    with chromium(require_browser()) as b:
        yield b


@pytest.fixture
def page(browser):
    """A fresh page (its own browser context) per test, 1400×1000, 60 s default timeout."""
    from browser_support import new_page

    with new_page(browser) as pg:
        yield pg


# ---------------------------------------------------------------------------------------------- test tiers
# Markers (registered in pytest.ini, which has --strict-markers) are set here, from the file name, the test's
# name or the fixtures it uses, so the test files carry none of them.
#   core tier, about 1.5 minutes on 2 cores:  python -m pytest -m "not browser and not slow"
#   the dashboard's AppTests:   python -m pytest -m app
#   everything (CI, README):    python -m pytest
# "slow" is slow by nature, or measured at over ~1.5 s (pytest --durations=0 on the 2-core development machine).
#
# file (tests)                                marker          why
# test_browser*.py, test_*_browser.py         browser, slow   real Chromium through Playwright against a live
#   (BROWSER_FILES; every file named so                       Streamlit server
#   must be listed: a test checks it)
# test_report.py (…_in_a_browser)             browser, slow   opens the HTML report in Chromium
# test_app_*.py                               app             AppTest runs of the dashboard
# test_security.py (fixture app_env)          app             AppTest runs with hostile input
# test_teaching.py (fixture open_page)        app             AppTest runs of the Explorer and the story
# test_package.py                             slow            builds and installs the wheel, runs `hsc` and every
#                                                             page in subprocesses
# test_app_overview_scale.py                  slow            AppTest Overview on a large synthetic set
# test_app_atlas.py                           slow            AppTest Model atlas (3-4 s per test)
# test_app_where.py                           slow            AppTest Where it stops (shipped logits, 5-10 s)
# test_app_rule_links.py                      slow            AppTest every page × every rule in the link (shipped
#                                                             logits, ~9 min on the busy 2-core machine)
# test_app_robust.py                          slow            AppTest hostile tables and capped links (issue 33)
# test_app_per_rank.py                        slow            AppTest Per-rank thresholds (1,000 splits per card, ~20 s)
# test_app_headlines.py                       slow            AppTest each page's opening sentence (shipped logits)
# test_app_try_image.py                       slow            AppTest Try an image: a pretrained network, degraded
# test_browser_more_metrics.py                browser, slow   metrics/rules beyond the paper: toggles, hF1 curves,
#                                                             1280×720 normal and presenter
# test_browser_atlas.py                       browser, slow   Model atlas, Where it stops: Chromium at 1280×720
# test_browser_sweep_hammer.py                browser, slow   the Explorer's θ hammered: 50 random runs of keys,
#                                                             ▶ Play and clicks, one server, one page (~3 min)
# test_app_datasets.py                        slow            AppTest on other data sets: each test builds and
#                                                             evaluates CIFAR-100 or a user data set (~10 s in all)
# test_cache_logits.py (fixture synthetic)    slow            pipeline runs: `cache-logits` end to end on a model
# SLOW_TESTS below, per file                  slow            Ray, torchrun, a subprocess, a pretrained network run
#                                                             on the CPU, and tests measured at over ~1.5 s each
#                                                             (a parametrized sweep: over ~2 s in all)
BROWSER_FILES = {"test_browser.py", "test_browser_datasets.py", "test_security_browser.py",
                 "test_browser_guarantees.py", "test_browser_atlas.py", "test_browser_teaching.py",
                 "test_hostile_names_browser.py", "test_browser_more_metrics.py", "test_browser_snapshot.py",
                 "test_browser_sweep_hammer.py"}
# The θ-sweep files (about half the browser tier's time) run as their own xdist group.
BROWSER_GROUP = {"test_browser_teaching.py": "browser_sweep", "test_browser_sweep_hammer.py": "browser_sweep"}
BROWSER_TESTS = {"test_report.py": {"test_report_makes_no_network_request_in_a_browser"}}
APP_FIXTURES = {"app_env", "open_page"}
SLOW_FILES = {"test_package.py", "test_app_overview_scale.py", "test_app_datasets.py", "test_app_guarantees.py",
              "test_app_atlas.py", "test_app_where.py", "test_app_try_image.py",
              "test_app_rule_links.py", "test_app_robust.py", "test_app_per_rank.py", "test_app_headlines.py",
              "test_calibrator_oracles.py",  # torch-uncertainty fits (issue 31)
              "test_app_calibrators.py",
              "test_app_snapshot_pages.py",  # AppTest of each page beside its snapshot (shipped logits)
              "test_app_link_costs.py"}  # AppTest of the Calibrators page's costliest link (every shipped model)
SLOW_FIXTURES = {"test_cache_logits.py": {"synthetic"}}
SLOW_TESTS = {  # file -> test functions (every parameter of each)
    "test_one_call.py": {"test_cli_card_without_delta_for_a_method_that_does_not_read_it"},  # the card, 4 s
    "test_calibrators.py": {"test_matrix_calibrators_run_every_rule"},  # L-BFGS over C² parameters
    "test_calibrator_pins.py": {"test_imagenet_size_matrix_fits_are_pinned"},  # C² L-BFGS at 1,000 classes
    "test_member_scores.py": {"test_report_benchmark_offers_the_member_scores_to_the_ensemble_only"},  # 2 reports
    "test_large_fits.py": {"test_structured_matrix_improves_on_ts_and_maps_as_fitted",  # L-BFGS, 2 forms each
                           "test_vector_in_float32_reaches_todays_nll"},
    "test_cache_logits.py": {"test_models_on_local_ray_one_task_each_resumable",  # Ray
                             "test_torchrun_two_ranks_matches_single_process",  # two torchrun processes
                             "test_pretrained_on_shared_images_matches_shipped",  # pretrained net, ../shared
                             "test_device_decode_gives_the_pil_paths_logits_on_real_images"},  # ../shared images
    "test_evaluate.py": {"test_ray_local_gives_identical_numbers",  # Ray
                         "test_ray_local_splits_one_files_rows_with_identical_numbers",  # Ray
                         "test_shipped_logits_without_hierarchy"},  # every rule of the shipped logits
    "test_rc_table.py": {"test_rc_table_on_local_ray_equals_processes"},  # Ray
    # the shipped model's evaluation, curves and figures, built for a snapshot
    "test_snapshot.py": {"test_risk_coverage_snapshot_holds_the_live_pages_numbers",
                         "test_explorer_snapshot_shows_the_sample_and_a_missing_sample_is_one_sentence",
                         "test_calibration_coverage_snapshot_holds_the_pages_table",
                         "test_overview_snapshot_holds_the_headline_and_its_intervals"},
    # every calibrator pair, a bootstrap per tree, repetitions and 1,000-split cards, built for a snapshot
    "test_snapshot_pages.py": {"test_calibrators_hold_the_pages_table",
                               "test_hierarchy_sensitivity_holds_the_trees_gains",
                               "test_guaranteed_accuracy_holds_the_one_splits_numbers",
                               "test_per_rank_holds_the_example_cards_verdict_and_two_figures"},
    # 1,000 repetitions of every method; the shipped model's evaluation and card
    "test_guarantees.py": {"test_every_guarantee_holds_on_synthetic_data",
                           "test_every_guarantee_holds_on_the_shipped_logits",
                           "test_cli_guarantees_and_card", "test_card_escapes_a_hostile_model_name",
                           "test_report_embeds_the_card_escaped"},
    # a pretrained network loaded and run on the CPU (torch threads fare badly on a busy 2-core machine)
    "test_inference.py": {"test_classify_shared_image_matches_shipped_logits", "test_model_is_loaded_once_and_reused",
                          "test_png_with_alpha_and_large_photo_classify", "test_classify_greyscale_upload"},
    "test_models.py": {"test_lite0_pretrained_matches_shipped_logits"},  # ../shared images
    "test_perturbation.py": {"test_blur_makes_climbing_retreat_on_real_images"},  # pretrained net, ../shared
    # a subprocess loading Lite0; bootstraps over the ImageNet tree; WordNet parsed twice
    "test_imagenet_trees.py": {"test_induced_tree_rebuilds_from_lite0s_weights", "test_cli_hierarchy_sensitivity",
                               "test_guarantee_fails_under_a_strong_shift",
                               "test_overrides_and_authors_tree_rebuild_from_wordnet"},
    # pretrained networks run on ../shared images, one per shipped variant
    # measured: the first pays the app's start, the guarantee runs two evaluations
    "test_app_shift.py": {"test_variants_are_models_and_shifts_are_data",
                          "test_guaranteed_accuracy_calibrates_on_clean_and_tests_on_shifted",
                          "test_hierarchy_sensitivity_page_shows_the_librarys_numbers"},  # 4 bootstraps
    "test_variants.py": {"test_variant_regenerates_on_a_slice",
                         "test_shipped_ensemble_regenerates_from_the_shipped_members"},
    "test_report.py": {"test_python_m_entry_point",  # a subprocess
                       "test_report_under_a_tiny_memory_budget_has_the_same_numbers",  # measured 2-11 s
                       "test_build_report_holds_one_models_logits_at_a_time"},
    # measured (and the pretrained-network tests among the AppTests)
    "test_formats.py": {"test_imagenet_is_a_with_the_class_list_gives_the_papers_tree"},
    "test_scale.py": {"test_predict_curve_and_grid_agree_for_every_theta",
                      "test_chunked_evaluation_never_holds_a_samples_by_nodes_matrix"},
    "test_app_overview.py": {"test_headline_is_the_librarys_sentence_on_the_shipped_logits",
                             "test_overview_tables_are_the_evaluation_layers_results",
                             "test_headline_is_honest_when_climbing_is_worse_or_unclear",
                             "test_app_offers_the_report_and_builds_it_from_the_pages_numbers"},
    # the shipped logits through AppTest and `hsc evaluate`/`hsc report` (measured 10-30 s each)
    "test_app_exports.py": {"test_full_curve_csv_is_the_layers_rc_table",
                            "test_sidebar_offers_exactly_what_the_cli_accepts",
                            "test_report_accepts_typical"},
    "test_app_pages.py": {"test_try_an_image_classifies",  # pretrained network
                          "test_every_page_renders_without_errors",  # sweep (each page also has its own tests)
                          "test_shipped_data_is_the_default", "test_synthetic_mode_is_opt_in",
                          "test_broken_files_show_errors_and_others_keep_working",
                          "test_risk_coverage_operating_points_equal_curve_at_theta",
                          # three Explorer runs: a fresh link, a full old link, the same sample again
                          "test_a_fresh_explorer_link_names_only_what_differs_and_a_full_old_link_still_opens"},
    "test_security.py": {"test_try_an_image_shows_16_bit_png_and_refuses_huge_ones",  # pretrained network
                         "test_every_widget_range_holds_at_both_ends_of_each_setting",
                         "test_zip_bomb_is_refused_from_its_headers_before_inflating",
                         "test_zip_bomb_upload_is_refused_with_a_message",
                         "test_uploaded_sample_ids_never_read_files_outside_the_image_folder"},
    "test_teaching.py": {"test_story_steps_are_deep_linkable"},  # sweep
    # measured over ~1.5 s (the shipped logits through `hsc evaluate` or the card; subprocesses; 1,000 repetitions)
    "test_cli_pins.py": {"test_default_evaluate_rows_of_the_papers_rules_are_pinned"},
    "test_cli_args.py": {"test_default_rules_are_all_rules", "test_metrics_are_the_layers_extra_results",
                         "test_python_m_and_old_import_paths_still_work"},
    "test_threshold_engine.py": {"test_card_and_engine_give_the_pinned_theta_on_lite0",
                                 "test_repeated_split_evaluation_keeps_its_numbers"},
    "test_moved_names.py": {"test_old_thresholds_path_still_offers_the_repeated_split_functions"},
    "test_headlines.py": {"test_the_sidebar_says_both_counts_in_words"},  # the shipped logits loaded
    # issue 44: scikit-learn fits on digits (200 calibrations; GridSearchCV; scikit-learn's check sweep)
    "test_integrations_sklearn.py": {"test_pac_guarantee_holds_over_200_random_splits_of_digits",
                                     "test_haurc_theta_and_score_equal_the_npz_paths",
                                     "test_grid_search_selects_by_haurc",
                                     "test_clone_pickle_and_pipeline_round_trips_keep_results",
                                     "test_scikit_learn_estimator_checks", "test_module_examples"},
    "test_integrations_hiclass.py": {"test_tree_scores_and_labels_are_hiclass_own"},  # HiClass fits
    # 1,000 i.i.d. calibration sets × 8 (model, target) cases, ~3 s each (issue 41)
    "test_selective_guarantee.py": {"test_the_answers_accuracy_holds_over_1000_iid_calibration_sets"},
    # every rule of three shipped models, and of a 20,000 × 10,000 synthetic case (~30 s)
    "test_inat21_pins.py": {"test_shipped_models_keep_every_rules_haurc",
                            "test_synthetic_20k_case_keeps_every_rules_haurc"},
    # `hsc evaluate` with every rule on a 1,000-deep caterpillar (issue 42)
    "test_deep_tree_rules.py": {"test_default_rules_evaluate_a_1000_deep_caterpillar"},
    # issue 42: 24 calibrator pairs over a few runs; `hsc evaluate` twice with a cache it cannot write
    "test_link_costs.py": {"test_a_run_stops_at_its_budget_and_the_next_goes_on"},
    "test_evaluate_robust.py": {"test_a_cache_that_cannot_be_written_keeps_the_numbers"},
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = {}
    for item in items:
        file = item.path.name
        name = getattr(item, "originalname", item.name)  # without the [parameters]
        fixtures = set(getattr(item, "fixturenames", ()))
        if getattr(item, "module", None) is not None:
            modules[file] = item.module
        browser = file in BROWSER_FILES or name in BROWSER_TESTS.get(file, ())
        if browser:
            item.add_marker(pytest.mark.browser)
        if file.startswith("test_app_") or APP_FIXTURES & fixtures:
            item.add_marker(pytest.mark.app)
        if (browser or file in SLOW_FILES or name in SLOW_TESTS.get(file, ())
                or SLOW_FIXTURES.get(file, set()) & fixtures):
            item.add_marker(pytest.mark.slow)
        # pytest-xdist (pytest.ini: -n auto --dist loadgroup) hands each group to one worker: a file's
        # tests stay together (its module fixtures are built once); the real-browser tests form two groups
        # of about equal length (a Streamlit server and Chromium per file, one after another within a group:
        # the θ-sweep files, and the rest), so on 2 cores the two may run side by side, which the browser
        # tests must bear (issue 40: they pass with a CPU hog on one core); every Ray test shares one worker.
        group = (BROWSER_GROUP.get(file, "browser") if browser else "ray" if "ray" in name else file)
        item.add_marker(pytest.mark.xdist_group(group))
    # A browser test file missing from BROWSER_FILES would run in the core tier (it happened once).
    unlisted = sorted(f for f in modules if "browser" in f and f not in BROWSER_FILES)
    if unlisted:
        warnings.warn(pytest.PytestWarning(f"browser test files not in BROWSER_FILES: {unlisted}"), stacklevel=1)
    # A renamed test would silently leave its tier: name the tables' entries its module no longer has.
    stale = sorted(f"{file}::{name}" for table in (SLOW_TESTS, BROWSER_TESTS) for file, names in table.items()
                   if file in modules for name in names if not hasattr(modules[file], name))
    if stale:
        warnings.warn(pytest.PytestWarning(f"tests/conftest.py names tests that no longer exist: {stale}"),
                      stacklevel=1)
