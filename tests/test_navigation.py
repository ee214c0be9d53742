"""The sidebar's page groups (dashboard.navigation) cover every page once and the landing names them all."""

from __future__ import annotations

from pathlib import Path

from dashboard import navigation

ROOT = Path(__file__).resolve().parents[1]


def test_every_page_file_is_in_exactly_one_group_and_the_groups_are_the_four():
    files = [p.file for pages in navigation.SECTIONS.values() for p in pages]
    assert sorted(files) == sorted(f.name for f in (ROOT / "app_pages").glob("*.py"))
    assert list(navigation.SECTIONS) == ["Learn", "Explore", "Decide", "Research"]
    paths = [p.url_path for pages in navigation.SECTIONS.values() for p in pages]
    assert len(set(paths)) == len(paths)


def test_the_landing_names_every_page_under_its_group():
    lines = navigation.landing_markdown().splitlines()
    assert len(lines) == 4
    for line, (section, pages) in zip(lines, navigation.SECTIONS.items(), strict=True):
        assert line.startswith(f"- **{section}**: ")
        assert all(f"*{p.title}* (" in line for p in pages)


def test_the_landing_counts_the_storys_steps_from_its_list():
    """Issue 45: the landing said "four steps" of a five-step story; the count now comes from the
    story's own list, which the step links accept exactly."""
    import pytest

    from dashboard import state

    assert list(navigation.STORY_STEPS) == [1, 2, 3, 4, 5]  # the story's five steps, counted by hand
    assert "*Guided story* (the idea in five steps, for a class)" in navigation.landing_markdown()
    assert navigation.count_word(5) == "five" and navigation.count_word(12) == "12"
    assert state.SETTINGS["step"].parse("5") == 5
    with pytest.raises(ValueError):
        state.SETTINGS["step"].parse("6")
