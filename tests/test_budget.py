"""The line-budget renderer (docs/protocol.md §11): its rules as properties over random
sections and budgets, and a few pinned layouts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handoffd.core import budget
from handoffd.core.budget import BudgetTooSmall, Section

HEAD = ["# Task t", "**Outcome** done"]
TAIL = ["## Not in this handoff", "Add them by hand."]
FOOTER = ["---", "receipt: a", "generated x"]
FIXED = len(HEAD) + len(TAIL) + len(FOOTER)
MARKER = re.compile(r"^- … (\d+) more$")
NOT_SHOWN = re.compile(r"^Not shown for lack of room: (.*)$")

sizes = st.lists(st.integers(min_value=0, max_value=30), min_size=0, max_size=7)


def make_sections(totals: list[int]) -> list[Section]:
    return [
        Section(f"S{i}", [f"- row {i}.{j}" for j in range(total)]) for i, total in enumerate(totals)
    ]


def parse(lines: list[str], sections: list[Section]) -> tuple[dict[str, int], dict[str, int], set]:
    """What the output shows: rows per section, the count its marker claims, and the
    names on the Not shown row."""
    shown: dict[str, int] = {}
    claimed: dict[str, int] = {}
    named: set[str] = set()
    current = None
    for line in lines:
        if line.startswith("## S"):
            current = line.split()[1]
            shown[current] = 0
        elif current and line.startswith("- row "):
            shown[current] += 1
        elif current and (match := MARKER.match(line)):
            claimed[current] = int(match.group(1))
        elif match := NOT_SHOWN.match(line):
            named = {part.split()[0] for part in match.group(1).split(", ")}
    return shown, claimed, named


@given(totals=sizes, budget_lines=st.integers(min_value=FIXED + 1, max_value=80))
def test_never_over_budget_and_every_section_present_or_named(totals, budget_lines):
    sections = make_sections(totals)
    lines = budget.render(budget_lines, sections, HEAD, TAIL, FOOTER)
    assert len(lines) <= budget_lines
    shown, _, named = parse(lines, sections)
    for section in sections:
        if section.rows:
            assert (section.name in shown) != (section.name in named), section.name
        else:
            assert section.name not in shown and section.name not in named


@given(totals=sizes, budget_lines=st.integers(min_value=FIXED + 1, max_value=80))
def test_fixed_rows_are_never_dropped_and_keep_their_places(totals, budget_lines):
    lines = budget.render(budget_lines, make_sections(totals), HEAD, TAIL, FOOTER)
    assert lines[: len(HEAD)] == HEAD
    assert lines[-len(FOOTER) :] == FOOTER
    at = lines.index(TAIL[0])
    assert lines[at : at + len(TAIL)] == TAIL


@given(totals=sizes, budget_lines=st.integers(min_value=FIXED + 1, max_value=80))
def test_dropped_row_counts_are_correct(totals, budget_lines):
    sections = make_sections(totals)
    lines = budget.render(budget_lines, sections, HEAD, TAIL, FOOTER)
    shown, claimed, _ = parse(lines, sections)
    for section in sections:
        if section.name in shown:
            assert shown[section.name] >= 1
            assert shown[section.name] + claimed.get(section.name, 0) == len(section.rows)
            assert f"## {section.name} ({len(section.rows)})" in lines


@given(totals=sizes, budget_lines=st.integers(min_value=FIXED + 1, max_value=80))
def test_first_rows_before_second_rows(totals, budget_lines):
    """No section shows a paid second row while another non-empty one shows none, and
    rows are dealt round-robin: a cut section is at most one round behind any other
    (a section one row short of complete is completed for free: its last row replaces
    the `… 1 more` marker)."""
    sections = make_sections(totals)
    lines = budget.render(budget_lines, sections, HEAD, TAIL, FOOTER)
    shown, claimed, named = parse(lines, sections)
    if named:
        assert all(n == 1 or n == len(s.rows) == 2 for s in sections if (n := shown.get(s.name)))
    for cut in sections:
        if cut.name in claimed:
            for other in sections:
                n = shown.get(other.name, 0)
                assert n <= shown[cut.name] + 1 or n == len(other.rows) == shown[cut.name] + 2


@given(totals=sizes, budget_lines=st.integers(min_value=FIXED + 1, max_value=80))
def test_not_shown_row_only_when_something_was_left_out(totals, budget_lines):
    sections = make_sections(totals)
    lines = budget.render(budget_lines, sections, HEAD, TAIL, FOOTER)
    shown, _, _ = parse(lines, sections)
    rows = [line for line in lines if NOT_SHOWN.match(line)]
    left_out = [s for s in sections if s.rows and s.name not in shown]
    assert len(rows) == (1 if left_out else 0)
    if left_out:
        assert rows[0] == budget.not_shown_row(left_out)


@given(totals=sizes)
def test_a_budget_big_enough_shows_everything(totals):
    sections = make_sections(totals)
    room = sum(len(s.rows) + 1 for s in sections if s.rows)
    lines = budget.render(FIXED + room, sections, HEAD, TAIL, FOOTER)
    assert len(lines) == FIXED + room
    assert not any(MARKER.match(line) or NOT_SHOWN.match(line) for line in lines)


def test_a_budget_smaller_than_the_fixed_rows_is_an_error():
    with pytest.raises(BudgetTooSmall):
        budget.render(FIXED - 1, [], HEAD, TAIL, FOOTER)


def test_fixed_rows_alone_fit_exactly_when_there_are_no_sections():
    assert budget.render(FIXED, [Section("E", [])], HEAD, TAIL, FOOTER) == HEAD + TAIL + FOOTER


def test_sections_with_no_room_for_the_not_shown_row_are_an_error():
    with pytest.raises(BudgetTooSmall):
        budget.render(FIXED, make_sections([3]), HEAD, TAIL, FOOTER)


def test_a_row_with_a_line_break_is_refused():
    with pytest.raises(ValueError, match="line break"):
        budget.render(40, [Section("A", ["- one\n- two"])], HEAD, TAIL, FOOTER)


def test_a_pinned_layout_cut_and_left_out():
    sections = make_sections([4, 1, 9])
    assert budget.render(12, sections, HEAD, TAIL, FOOTER) == [
        *HEAD,
        "## S0 (4)",
        "- row 0.0",
        "- … 3 more",
        *TAIL,
        "Not shown for lack of room: S1 (1), S2 (9)",
        *FOOTER,
    ]


def test_round_robin_deals_second_rows_in_section_order():
    sections = make_sections([5, 5])
    lines = budget.render(FIXED + 7, sections, HEAD, TAIL, FOOTER)
    body = lines[len(HEAD) : -len(TAIL) - len(FOOTER)]
    first = ["## S0 (5)", "- row 0.0", "- row 0.1", "- … 3 more"]
    assert body == [*first, "## S1 (5)", "- row 1.0", "- … 4 more"]


def test_a_custom_heading_and_marker_for_other_views():
    section = Section("In-Flight", ["- a", "- b", "- c"], heading="## In-Flight", marker=str)
    assert budget.render(3, [section]) == ["## In-Flight", "- a", "2"]
    assert budget.render(4, [section]) == ["## In-Flight", "- a", "- b", "- c"]
