"""The line-budget renderer: sections hand it their rows, it decides what fits, then writes.

Every view with a line budget renders through here, so each gets the rules right once:
the digest (docs/protocol.md §11), the live file's 30 lines (§10) and `resume`'s five
(§10).  The budget is allocated before a line is written; fixed rows are never dropped
and are counted; the result never has more lines than the budget, and a budget too
small for the fixed rows is an error, never a silently longer document.

The views promise different things about what a cut gives up, so there are two cuts:

- `render` (the digest): every non-empty section gets its heading and one row before any
  gets a second; a cut section keeps its first rows and ends with its marker (`- … <k>
  more` by default); a section that could not be afforded at all is named on one `Not
  shown` row, placed between `tail` and `footer`, and only when something was left out.
  Showing a section's last row never costs more than the marker it replaces, so a
  section one row short of complete is always completed.
- `cut_oldest` (the live file): sections are cut one after another, in the order given,
  each giving up its first (oldest) items — an item is one or more lines, given up
  whole — and only as many as the budget needs; a cut section ends with its marker,
  which counts what earlier cuts dropped too.  What is not in those sections is never cut.

Helpers reach this module when a live file outgrows its budget: it imports nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: helpers may import this module
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Marker = Callable[[int], str]


class BudgetTooSmall(ValueError):
    """The budget cannot hold the fixed rows (and the `Not shown` row they may need)."""


def more_marker(hidden: int) -> str:
    """The default last row of a cut section."""
    return f"- … {hidden} more"


class Section:
    """A titled part of a document: its rows as given, and the items a cut gives up whole
    (by default each row is an item).  `heading`: its title line(s), by default
    `## <name> (<total>)`; `dropped`: how many items earlier cuts already gave up."""

    __slots__ = ("dropped", "heading", "items", "marker", "name", "rows")

    def __init__(
        self,
        name: str,
        rows: Sequence[str],
        heading: str | Sequence[str] | None = None,
        marker: Marker = more_marker,
        items: Sequence[Sequence[str]] | None = None,
        dropped: int = 0,
    ) -> None:
        self.name = name
        self.rows = list(rows)
        self.heading = heading
        self.marker = marker
        self.items = [list(item) for item in items] if items is not None else None
        self.dropped = dropped

    def title(self) -> list[str]:
        if self.heading is None:
            return [f"## {self.name} ({len(self.rows)})"]
        return [self.heading] if isinstance(self.heading, str) else list(self.heading)

    def __repr__(self) -> str:
        return f"Section({self.name!r}, {len(self.rows)} rows)"


# --- the fair cut: one row each before a second for any (the digest) --------------------


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
    """The lines of the document: head, sections, tail, a `Not shown` row if needed, footer.
    Each section's heading is one line and each of its rows one item."""
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
        lines.extend(_first_rows(section, count))
    lines.extend(tail)
    if left_out:
        pairs = zip(sections, shown, strict=True)
        lines.append(not_shown_row([s for s, n in pairs if s.rows and not n]))
    return lines + list(footer)


def _first_rows(section: Section, shown: int) -> list[str]:
    if not shown:
        return []
    rows = section.rows[:shown]
    hidden = len(section.rows) - shown
    return [*section.title(), *rows, *([section.marker(hidden)] if hidden else [])]


# --- the oldest-first cut: each section in turn gives up its first items (the live file) --


def cut_oldest(budget: int, fixed: int, sections: Sequence[Section]) -> dict[str, list[str]]:
    """The rows of each of `sections` once the document fits `budget` lines: the sections
    are cut in the order given, each by the fewest first items that make the document fit
    (all of them if even that is not enough: what is left is then the fixed lines' to
    answer for), and a cut one ends with its marker; `fixed` lines besides them are never
    cut.  A section with no rows takes no line, not even its
    heading.  Counting once: a section is looked at once however many items it gives up."""
    taken = [_size(section, section.rows) for section in sections]
    total = fixed + sum(taken)
    rows = {section.name: section.rows for section in sections}
    for index, section in enumerate(sections):
        if total <= budget:
            break
        if not _items(section):
            continue
        others = total - taken[index]
        rows[section.name] = _cut_first(section, budget - others - len(section.title()) - 1)
        total = others + _size(section, rows[section.name])
    return rows


def _items(section: Section) -> list[list[str]]:
    return section.items if section.items is not None else [[row] for row in section.rows]


def _size(section: Section, rows: Sequence[str]) -> int:
    return len(section.title()) + len(rows) if rows else 0


def _cut_first(section: Section, room: int) -> list[str]:
    """The section less the fewest of its first items that leave at most `room` rows
    before its marker (less all of them when even that is not enough), blank rows at its
    ends trimmed, then the marker."""
    items = _items(section)
    trailing = _blank_tail(items[-1])  # the last item's, trimmed while any item is kept
    kept, cut = sum(len(item) for item in items), 0
    while cut < len(items):
        kept -= len(items[cut])
        cut += 1
        if cut == len(items) or kept - trailing <= room:
            break
    rest = [row for item in items[cut:] for row in item]
    return [*trimmed(rest), section.marker(section.dropped + cut)]


def _blank_tail(item: Sequence[str]) -> int:
    """How many blank rows end an item."""
    count = 0
    while count < len(item) and not item[-1 - count].strip():
        count += 1
    return count


def trimmed(rows: Sequence[str]) -> list[str]:
    """Rows without leading or trailing blank ones."""
    start, end = 0, len(rows)
    while start < end and not rows[start].strip():
        start += 1
    while end > start and not rows[end - 1].strip():
        end -= 1
    return list(rows[start:end])
