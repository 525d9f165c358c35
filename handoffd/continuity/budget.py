"""The line-budget renderer: sections hand it rows, it decides what fits, then writes.

Shared by every view that has a line budget (docs/protocol.md §11, and §10's live file).
The budget is allocated before a line is written:

- fixed rows (`head`, `tail`, `footer`) are never dropped and are counted;
- every non-empty section gets its heading and one row before any section gets a second;
- a cut section ends with a marker (`- … <k> more` by default);
- a section that could not be afforded at all is named on one `Not shown` row, placed
  between `tail` and `footer`, and only when something was left out;
- the result never has more lines than the budget; a budget too small for the fixed rows
  is an error, never a silently longer document.

Showing a section's last row never costs more than the `… 1 more` marker it replaces,
so a section one row short of complete is always completed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


class BudgetTooSmall(ValueError):
    """The budget cannot hold the fixed rows (and the `Not shown` row they may need)."""


def more_marker(hidden: int) -> str:
    """The default last row of a cut section."""
    return f"- … {hidden} more"


@dataclass(frozen=True)
class Section:
    """A titled list of one-line rows; `heading` defaults to `## <name> (<total>)`."""

    name: str
    rows: Sequence[str]
    heading: str | None = None
    marker: Callable[[int], str] = field(default=more_marker, compare=False)

    def title(self) -> str:
        return self.heading if self.heading is not None else f"## {self.name} ({len(self.rows)})"


def cost(total: int, shown: int) -> int:
    """Lines a section takes showing `shown` of `total` rows: heading, rows, marker."""
    if shown == 0:
        return 0
    return 1 + shown + (1 if shown < total else 0)


def allocate(totals: Sequence[int], room: int) -> tuple[list[int], bool]:
    """Rows to show per section within `room` lines, and whether a `Not shown` row is
    needed (it is then already paid for out of `room`)."""
    if sum(cost(total, 1) for total in totals if total) <= room:
        return _fill([min(total, 1) for total in totals], totals, room), False
    room -= 1  # something is left out: the Not shown row comes first
    shown = [0] * len(totals)
    for index, total in enumerate(totals):
        if total and cost(total, 1) <= room:
            shown[index] = 1
            room -= cost(total, 1)
    # No paid second row while a section shows none; a free completion is not paid.
    pairs = zip(shown, totals, strict=True)
    return [total if s and s == total - 1 else s for s, total in pairs], True


def _fill(shown: list[int], totals: Sequence[int], room: int) -> list[int]:
    """Round-robin: one more row per section and round while the room lasts."""
    room -= sum(cost(total, s) for total, s in zip(totals, shown, strict=True))
    growing = True
    while growing:
        growing = False
        for index, total in enumerate(totals):
            step = cost(total, shown[index] + 1) - cost(total, shown[index])
            if shown[index] < total and step <= room:
                shown[index] += 1
                room -= step
                growing = True
    return shown


def not_shown_row(left_out: Sequence[Section]) -> str:
    """The row naming every section that could not be afforded, with its total."""
    names = ", ".join(f"{section.name} ({len(section.rows)})" for section in left_out)
    return f"Not shown for lack of room: {names}"


def render(
    budget: int,
    sections: Sequence[Section],
    head: Sequence[str] = (),
    tail: Sequence[str] = (),
    footer: Sequence[str] = (),
) -> list[str]:
    """The lines of the document: head, sections, tail, a `Not shown` row if needed, footer."""
    fixed = len(head) + len(tail) + len(footer)
    totals = [len(section.rows) for section in sections]
    # With sections to show and no line beyond the fixed rows, not even the Not shown row fits.
    if fixed > budget or (any(totals) and fixed == budget):
        raise BudgetTooSmall(f"a budget of {budget} lines cannot hold {fixed} fixed rows")
    if any("\n" in row for section in sections for row in section.rows):
        raise ValueError("a row is one line: it may not contain a line break")
    shown, left_out = allocate(totals, budget - fixed)
    lines = list(head)
    for section, count in zip(sections, shown, strict=True):
        lines.extend(_section_lines(section, count))
    lines.extend(tail)
    if left_out:
        pairs = zip(sections, shown, strict=True)
        lines.append(not_shown_row([s for s, n in pairs if s.rows and not n]))
    return lines + list(footer)


def _section_lines(section: Section, shown: int) -> list[str]:
    if not shown:
        return []
    rows = list(section.rows[:shown])
    hidden = len(section.rows) - shown
    return [section.title(), *rows, *([section.marker(hidden)] if hidden else [])]
