"""What the web board's templates show, as pure functions of the projection's cards.

Nothing here reads the disk or the clock: `now` is a parameter, so every wording is
table-tested without a server (docs/protocol.md §9).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from handoffd.board import colour
from handoffd.board.cards import Board, Card, epoch
from handoffd.board.cards import excerpt as shown_part
from handoffd.core import handoff as hf
from handoffd.core.config import OPERATOR
from handoffd.core.terminal import has_control
from handoffd.numbers.stats import duration as stats_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.queue.reports import Head

PAGE_SIZE = 50  # archive cards per page
NAME_LIMIT = 4096  # longer than any card's name (an escaped file name, its role)

BADGE = {  # the word beside each colour, so the colour is never the only signal
    colour.RED: "RED",
    colour.YELLOW: "YELLOW",
    colour.ORANGE: "ORANGE",
    colour.GREEN: "GREEN",
}
GLYPH = {colour.RED: "■", colour.YELLOW: "◆", colour.ORANGE: "●", colour.GREEN: "✓"}
COLUMN = {  # the open page's three columns: what each colour asks of a person
    colour.RED: "needs a person",
    colour.YELLOW: "being worked on",
    colour.ORANGE: "waiting to be taken",
}
SINCE = {  # how the age of a card reads in each state
    "outbox": "queued {} ago",
    "failed": "failed {} ago",
    "new": "waiting {}",
    "in_process": "taken {} ago",
    "completed": "completed {} ago",
    "dismissed": "dismissed {} ago",
}


DONE = {  # what a page says once an action succeeded, before the card's name (§15)
    "answer": "Answered", "block": "Blocked", "unblock": "Unblocked", "release": "Released",
    "retry": "Retried", "dismiss": "Dismissed", "reopen": "Reopened",
    "reply": "Replied to", "ack": "Acknowledged", "send": "Sent",
}  # fmt: skip


def done_line(action: str, card: str) -> str:
    """`Answered <card>`, and likewise for each action; `Sent <card>` for each copy a
    Send work form queued (its cards comma-separated)."""
    word = DONE.get(action, action.capitalize() + ": done for")
    if action == "send":
        return " · ".join(f"{word} {one}" for one in card.split(",") if one)
    return f"{word} {card}"


def valid_name(name: str) -> bool:
    """Could `name` be a card at all?  Checked before any lookup: a malformed name is a
    404 whatever the queue holds, and never reaches a path."""
    # A card's name is looked up among the cards, never joined to a path, so all a name
    # can hold is allowed (a file's own name may hold `..` or a backslash): only what
    # no card is ever named with is refused here — a slash, a control character.
    return (
        0 < len(name) <= NAME_LIMIT
        and "@" in name[1:]
        and "/" not in name
        and not has_control(name)
    )


def duration(seconds: float | None) -> str:
    """A readable span: `45 s`, `12 min`, `2 h 03 min`, `3 d 4 h`."""
    return colour.ago(seconds, colour.SPELLED)


def span(seconds: float | None) -> str:
    """A duration of the numbers page, as `handoffd stats` writes it (`-` for none)."""
    return stats_duration(seconds)


def ago(moment: object, now: float) -> str:
    """`12 min ago` for a §2 timestamp (or epoch seconds); `at an unknown time` if unreadable."""
    at = moment if isinstance(moment, float) else epoch(moment)
    if at is None:
        return "at an unknown time"
    if now - at < 1:
        return "just now"
    return f"{duration(now - at)} ago"


def since(card: Card) -> str:
    """How long the card has been where it is, worded for its state."""
    text = SINCE.get(card.state, "{}").format(duration(card.age_s))
    if card.wakeups:
        text += f" · {card.wakeups} wake-up" + ("s" if card.wakeups > 1 else "")
    return text


def why(card: Card) -> str:
    """The line that says why a card has its colour; empty where `since` says it all (an
    orange card waiting to be taken, unless it waits on another card: that one is named, or
    is an original the daemon deferred: why is said)."""
    if card.colour == colour.ORANGE and not card.claim and not card.waiting_on and not card.held:
        return ""
    return detail(card)


def detail(card: Card) -> str:
    """The board's detail, a card it names (`via <card>: …`, `inherits from <card>: …`)
    called by its title."""
    for other in card.closure:
        if other.card in card.detail:
            return card.detail.replace(other.card, f"“{title(other)}” @{other.role}", 1)
    return card.detail


def title(card: Card) -> str:
    """The card's headline: its task, else its note, else its type."""
    headers = card.headers
    return headers.get(hf.TASK) or headers.get(hf.MESSAGE) or headers.get(hf.TYPE) or card.id


def dependencies(card: Card) -> list[tuple[str, Card | None]]:
    """(id, card) for each card of each handoff `card` names in `depends_on`; (id, None)
    for an id the queue does not hold (a hand-edited header)."""
    rows: list[tuple[str, Card | None]] = []
    for ident in card.depends_on:
        found = [other for other in card.closure if other.id == ident]
        rows += [(ident, other) for other in found] or [(ident, None)]
    return rows


def transitive(card: Card) -> list[Card]:
    """The closure's cards that `card` does not name itself: what it waits on through
    its dependencies."""
    return [other for other in card.closure if other.id not in card.depends_on]


def columns(board: Board) -> list[tuple[str, list[Card]]]:
    """The open page's columns, red, yellow, orange, each with its cards in board order
    (but those shown "For you", above them)."""
    shown = [colour.RED, colour.YELLOW, colour.ORANGE]
    theirs = [c for c in board.cards if not is_for_you(c)]
    return [(name, [c for c in theirs if c.colour == name]) for name in shown]


def is_for_you(card: Card) -> bool:
    """A copy in the operator's inbox, open (docs/protocol.md §18)."""
    return card.role == OPERATOR and card.state in ("new", "in_process")


def for_you(board: Board) -> list[Card]:
    """The open page's "For you": what agents handed to the operator, oldest first."""
    mine = [c for c in board.cards if is_for_you(c)]
    return sorted(mine, key=lambda c: -(c.age_s or 0.0))


def recipients(board: Board) -> list[tuple[str, str]]:
    """(name, label) of each role and pool the Send work form offers, as roles.tsv lists
    them (the operator itself is none of them); `all` is offered beside them."""
    shown = []
    for name, role in board.snapshot.roles.items():
        if role.is_operator:
            continue
        kind = " (pool)" if role.is_pool else f" (in {role.pool})" if role.pool else ""
        shown.append((name, name + kind))
    return shown


def open_ids(board: Board) -> list[tuple[str, str]]:
    """(card, label) of each open card a new handoff may depend on, once per handoff."""
    seen: set[str] = set()
    shown = []
    for card in board.cards:
        if card.id in seen or card.colour == colour.GREEN:
            continue
        seen.add(card.id)
        shown.append((card.card, f"{title(card)} @{card.role}"))
    return shown


def newest_first(cards: list[Card]) -> list[Card]:
    """Green cards, the most recently completed first (then by name, for a stable page)."""
    green = [card for card in cards if card.colour == colour.GREEN]
    green.sort(key=lambda card: card.entry.name, reverse=True)
    green.sort(key=lambda card: math.inf if card.age_s is None else card.age_s)
    return green


def page_of(items: list[Any], page: int, size: int = PAGE_SIZE) -> tuple[list[Any], int]:
    """The items of page `page` (from 1) and how many pages there are (at least 1)."""
    pages = max(1, math.ceil(len(items) / size))
    return items[(page - 1) * size : page * size], pages


def page_number(text: str | None) -> int | None:
    """`?page=N` as a number from 1; None for anything else."""
    if text is None or text == "":
        return 1
    if not text.isdigit() or len(text) > 9:
        return None
    number = int(text)
    return number if number >= 1 else None


def counts_title(counts: dict[str, int], waiting: int = 0) -> str:
    """The browser tab's title: the reds first, so a glance at the tab bar is enough; the
    cards waiting for the operator (§18) are counted with them, as needing a person."""
    open_cards = counts[colour.RED] + counts[colour.YELLOW] + counts[colour.ORANGE]
    needing = counts[colour.RED] + waiting
    lead = f"({needing}) " if needing else ""
    return f"{lead}handoffd — {open_cards} open"


def first_line(text: str, limit: int = 160) -> str:
    """A report's first non-blank line, cut to `limit` characters."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def excerpt(text: str) -> str:
    """A report's first line as a line of prose: a Markdown heading's `#`s dropped."""
    return text.lstrip("#").strip() if text.startswith("#") else text


def report_excerpt(report: Head) -> str:
    """A card's latest report, as the board's columns and the archive show it."""
    return excerpt(shown_part(report))


def card_url(name: str) -> str:
    """The detail page of a card, its name percent-encoded but for `@`."""
    return "/card/" + quote(name, safe="@")


def roles(board: Board, now: float) -> list[dict[str, Any]]:
    """Each role at a glance, as `status` prints it under its first line (docs/protocol.md
    §14, §17): the same rows of the same projection, a pool's line above its members'.
    `state` is what the row's mark shows: idle, busy, gone, unknown, or pool."""
    from handoffd.board import status

    shown = []
    for row in status.roles(board.snapshot):
        pool = "members" in row
        shown.append({
            "role": str(row["role"]),
            "state": "pool" if pool else str(row["pane"]),
            "glance": status.glance(row, now),
            "member": bool(row.get("pool")) and not pool,  # indented under its pool
        })  # fmt: skip
    return shown
