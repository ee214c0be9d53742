"""Every page's snapshot link (``dashboard.snapshot_pages``): each builder renders with the numbers
its live page shows for the same link (pinned values the page tests also see, or the shared
function), an upload's page gets no link, and bad or stale links get one sentence."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from dashboard import navigation, snapshot, snapshot_learn, snapshot_pages, snapshot_views
from dashboard.snapshot import BUILDERS
from hsc_core.core.rule_registry import rule_names

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cached_logits"
LITE0 = "efficientnet_lite0"


def test_every_page_of_the_navigation_has_a_snapshot_builder():
    pages = {p.url_path for ps in navigation.SECTIONS.values() for p in ps}
    assert pages - {"home"} <= set(BUILDERS), pages - set(BUILDERS)
    assert {"", "overview"} <= set(BUILDERS)  # "home" is the default page at "/"


def test_an_upload_page_offers_no_link_while_an_upload_is_in_use():
    assert snapshot_views.shows_upload("per_rank", {snapshot_pages.session_keys.PER_RANK_UPLOAD: object()})
    assert snapshot_views.shows_upload("model_atlas", {snapshot_pages.session_keys.ATLAS_UPLOAD: object()})
    assert snapshot_views.shows_upload("try_an_image", {snapshot_learn.IMAGE_UPLOAD: object()})
    assert not snapshot_views.shows_upload("per_rank", {snapshot_pages.session_keys.PER_RANK_UPLOAD: None})
    assert not snapshot_views.shows_upload("where_in_tree", {snapshot_pages.session_keys.PER_RANK_UPLOAD: 1})
    assert "uploads are not in links" in snapshot_views.UPLOAD_NOTE


# ---------------------------------------------------------------------------- the builders
@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The snapshot folder and a model folder of Lite0 and Lite1 (copies: a test edits one)."""
    if not (SHIPPED / f"{LITE0}.npz").is_file():
        pytest.skip("shipped logits absent")
    models = tmp_path_factory.mktemp("models")
    for name in (LITE0, "efficientnet_lite1"):
        for suffix in (".npz", ".json"):
            shutil.copy(SHIPPED / f"{name}{suffix}", models / f"{name}{suffix}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HSC_SNAPSHOT_DIR", str(tmp_path_factory.mktemp("snaps")))
        mp.setenv("HSC_CACHED_LOGITS_DIR", str(models))
        mp.delenv("HSC_SYNTHETIC", raising=False)
        yield models


def snap(page: str, **params: str) -> tuple[int, str]:
    """(status, HTML) of ``page``'s snapshot link for Lite0 with ``params``."""
    link = snapshot_views.share_link(page, {"model": LITE0, **params})
    assert link is not None and re.fullmatch(r"s/[0-9a-f]{20}", link)
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    return reply.status, gzip.decompress(reply.body).decode() if reply.gzipped else reply.body.decode()


def headline(page: str) -> str:
    return re.search(r'data-testid="headline">(.*?)</div>', page, re.S).group(1)


def figures(page: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'id="fig\d+-data">(.*?)</script>', page, re.S)]


def test_guaranteed_accuracy_holds_the_one_splits_numbers(env):
    status, page = snap("guaranteed_accuracy", acc="0.95", conf="0.9", n="1000", split_seed="0", reps="10",
                        split_method="theorem1")
    text = headline(page)
    # Lite0, seed 0, n = 1,000, 1 − α = 0.95, Theorem 1: the numbers the live page shows (test_app_guarantees).
    assert status == 200 and "<strong>θ̂ (threshold)</strong>: 0.8570" in text
    assert "<strong>Hierarchical accuracy</strong>: 0.9447" in text
    assert "<strong>Hierarchical coverage</strong>: 0.7566" in text
    assert "<strong>Within target ± ε (on average)</strong>: yes" in text  # ε = theorem1_epsilon(1000, 0.05, 0.1)
    assert "Deploy θ = 0.8570" in text and 'href="../guaranteed_accuracy?' in page
    assert "is BELOW the target 0.95 (promised only on average" in text
    # the default method: LTT on the answers' accuracy, the live page's 0.9000 (test_app_guarantees)
    status, page = snap("guaranteed_accuracy", acc="0.95", conf="0.9", n="1000", split_seed="0", reps="10")
    assert status == 200 and "<strong>Accuracy of the answers</strong>: 0.9631" in headline(page)
    (fig,) = figures(page)
    assert {t["type"] for t in fig["data"]} >= {"histogram"}


def test_where_it_stops_holds_the_pages_sentence_and_its_chart_kind(env):
    from dashboard import headlines
    from hsc_core.datasets.imagenet import imagenet_hierarchy
    from hsc_core.datasets.logits_io import load_logits
    from hsc_core.evaluation.diagnostics import landing_counts
    from hsc_core.evaluation.model import ModelEvaluation

    status, page = snap("where_in_tree", cmp_rule="climbing", theta="0.5", wkind="icicle", node="no-such-node")
    es = ModelEvaluation.from_bundle(load_logits(env / f"{LITE0}.npz"), imagenet_hierarchy()).setting(True)
    h = es.hierarchy
    table = landing_counts(h, es.decision_paths("climbing"), es.labels, 0.5).reindex(range(h.n_nodes), fill_value=0)
    sentence = headlines.where_headline(table["stops"].to_numpy(), table["stops_correct"].to_numpy(), h.leaf_count,
                                        "Climbing", 0.5)  # what the live page shows (test_app_headlines)
    assert status == 200 and headline(page).startswith(snapshot.markdown_html(sentence))
    assert sentence.startswith("At θ = 0.50, Climbing answers 86 % of the samples with a leaf (86 % of them right)")
    assert figures(page)[0]["data"][0]["type"] == "icicle"  # an unknown node: the whole tree, as the page


def test_compare_models_holds_every_models_area(env):
    status, page = snap("compare_models", cmp_rule="climbing")
    text = headline(page)
    assert status == 200 and "<strong>efficientnet_lite0</strong>: hAURC×1000 40.428, gain 12.62 %" in text
    assert "<strong>efficientnet_lite1</strong>: hAURC×1000 39.291, gain 14.28 %" in text
    assert "<strong>efficientnet_lite1</strong> has the lowest (39.3 ×10⁻³)" in text
    assert len(figures(page)[0]["data"]) == 2


def test_a_changed_model_file_makes_its_links_stale(env):
    link = snapshot_views.share_link("where_in_tree", {"model": LITE0})
    assert snapshot.snapshot_reply(snapshot_views.store(), link[2:]).status == 200
    (env / f"{LITE0}.json").write_text((SHIPPED / f"{LITE0}.json").read_text() + "\n")  # its manifest edited
    reply = snapshot.snapshot_reply(snapshot_views.store(), link[2:])
    assert reply.status == 410 and b"have changed" in reply.body and b"Traceback" not in reply.body
    assert snapshot_views.share_link("where_in_tree", {"model": LITE0}) != link  # a new link for the new data


def test_story_steps_show_the_example_and_the_guarantee(env):
    status, page = snap("story", step="3")
    text = headline(page)
    assert status == 200 and "<strong>Top-1 leaf:</strong> badger (p = 0.285)" in text
    assert "<strong>Climbing</strong> → musteline mammal (p = 0.948, coverage 0.718)" in text
    assert 'src="data:image/jpeg;base64,' in page or "(no image)" in page
    fig = figures(page)[0]
    assert len(fig["frames"]) == 101
    _, page = snap("story", step="5")
    assert "<strong>θ̂</strong>: 0.857" in headline(page)  # the Guaranteed accuracy page's θ̂ for its defaults
    _, page = snap("story", step="1")
    assert figures(page)[0]["data"][0]["type"] == "bar"


def test_per_rank_holds_the_example_cards_verdict_and_two_figures(env):
    from dashboard import per_rank
    from hsc_core.datasets.per_rank import EXAMPLE, read_per_rank
    from hsc_core.evaluation.per_rank import rank_card

    status, page = snap("per_rank", r_acc="0.92", r_delta="0.05")
    card = rank_card(read_per_rank(EXAMPLE.read_bytes(), name=EXAMPLE.name), 0.92, 0.05, source=EXAMPLE.name,
                     reps=per_rank.REPS)
    assert status == 200 and snapshot.markdown_html(per_rank.verdict(card, 0.92, 0.05, 1894)) in headline(page)
    assert f"θ {card['thetas']['class']:.4f}" in headline(page)
    assert len(figures(page)) == 2
    status, page = snap("per_rank", r_acc="0.92", r_delta="0.05", r_quantity="answers")
    card = rank_card(read_per_rank(EXAMPLE.read_bytes(), name=EXAMPLE.name), 0.92, 0.05, source=EXAMPLE.name,
                     reps=per_rank.REPS, quantity="answers")
    assert status == 200 and snapshot.markdown_html(per_rank.verdict(card, 0.92, 0.05, 1894)) in headline(page)
    assert "of the answers given on new data are correct" in headline(page)


def test_hierarchy_sensitivity_holds_the_trees_gains(env):
    status, page = snap("hierarchy_sensitivity", trees="wordnet")
    text = headline(page)
    # the Overview's seeded bootstrap: the same interval under the default tree
    assert status == 200 and "hAURC×1000 40.43, gain 12.62 % (8.06 to 17.43)" in text
    assert "Selective</strong>: hAURC×1000 46.26" in text


def test_model_atlas_of_the_shipped_models_and_a_table_outside_the_folder(env, tmp_path, monkeypatch):
    monkeypatch.setenv("HSC_RESULTS_DIR", str(tmp_path))  # an empty folder: the shipped models only
    status, page = snap("model_atlas")
    assert status == 200 and "Each marker is one of 2 models" in headline(page)
    assert snapshot_views.share_link("model_atlas", {"model": LITE0, "atlas": "gone.csv"}) is None
    (tmp_path / "t.csv").write_text("x\n")
    link = snapshot_views.share_link("model_atlas", {"atlas": "t.csv"})
    (tmp_path / "t.csv").unlink()
    assert snapshot.snapshot_reply(snapshot_views.store(), link[2:]).status == 410


def test_calibrators_hold_the_pages_table(env):
    from dashboard import calibrators as cal
    from dashboard import evaluations

    status, page = snap("calibrators")
    es = evaluations.model_context(LITE0, str(env / f"{LITE0}.npz"), "all", True)
    table = cal.shown_table(cal.benchmark(es, cal.DEFAULT_CALIBRATORS, cal.DEFAULT_CONFIDENCES, "climbing",
                                          False).rows)
    assert status == 200 and len(table) == 13 and 'class="view text"' in page
    for _, row in table.iterrows():
        assert (f"<strong>{row['calibrator']} · {row['confidence']}</strong>: hAURC×1000 {row['hAURC×1000']}, "
                f"gain % {row['gain %']}") in headline(page)


def test_calibrators_follow_the_links_choices(env):
    """c_cals, c_scores, c_rule and c_scope: the snapshot shows the link's pairs for the link's rule,
    and with c_scope=all every model's (model-prefixed) lines."""
    from dashboard import calibrators as cal
    from dashboard import evaluations

    status, page = snap("calibrators", c_cals="none,temperature", c_scores="margin", c_rule="selective")
    es = evaluations.model_context(LITE0, str(env / f"{LITE0}.npz"), "all", True)
    table = cal.shown_table(cal.benchmark(es, ("none", "temperature"), ("margin",), "selective", False).rows)
    text = headline(page)
    assert status == 200 and len(table) == 2 and "<strong>Rule</strong>: Selective" in text
    assert text.count(" · Margin</strong>") == 2 and "Softmax" not in text
    for _, row in table.iterrows():
        assert f"<strong>{row['calibrator']} · Margin</strong>: hAURC×1000 {row['hAURC×1000']}," in text
    status, page = snap("calibrators", c_cals="temperature", c_scores="softmax", c_scope="all")
    text = headline(page)
    assert status == 200 and text.count("Temperature scaling · Softmax") == 2
    assert "efficientnet_lite1: <strong>Temperature scaling · Softmax" in text


def test_try_an_image_link_to_a_missing_image_is_one_sentence(env):
    from dashboard import perturb

    if not perturb.pipeline_installed():
        assert snapshot_views.share_link("try_an_image", {"timg": "x.JPEG"}) is None
        return
    link = snapshot_views.share_link("try_an_image", {"timg": "../../etc/passwd"})
    assert link is None  # not a shipped image: no link (the stamp refuses it)


def test_each_snapshot_opens_with_its_pages_sentence(env):
    """The snapshot's text starts with the sentence the live page opens with (``page_sentences``,
    one function for both): Explorer, Risk–Coverage, Calibration–Coverage, the story, Per-rank."""
    from dashboard import evaluations, page_sentences
    from dashboard import per_rank as pr
    from dashboard.snapshot import markdown_html

    values = snapshot_views.settings({"model": LITE0})
    es = snapshot_views.context_of(values)
    v = es.view
    i = 7  # any evaluation sample: the link names it
    cs = evaluations.curve_set(es, values["loss"], None if values["dec"] == "exact" else 2)
    rules = [r for r in rule_names() if r in values["rules"]]
    scores, source, digest = pr.load_scores(None, None, False)
    card = pr.card_for(scores, digest, source, float(values["r_acc"]), float(values["r_delta"]))
    expected = {
        "risk_coverage": page_sentences.risk_coverage(cs, rules, values["loss"]),
        "calibration_coverage": page_sentences.calibration_coverage(v.cc_summary(rules, int(values["bins"]))),
        "story": page_sentences.story(v),
        "per_rank": page_sentences.per_rank(card, float(values["r_acc"]), float(values["r_delta"])),
    }
    expected["explorer"] = page_sentences.climb(v.hierarchy, v.node_row(i), int(v.leaf_pred[i]), int(v.labels[i]))
    for page_name, sentence in expected.items():
        status, page = snap(page_name, sample=str(v.sample_ids[i]))
        assert status == 200 and markdown_html(sentence) in headline(page), page_name
