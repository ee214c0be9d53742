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
