"""Card names: `<id>@<role>`, one of its own for every card (docs/protocol.md §8).

A name is how a person points at a card: a row of `status`, a link of the web board,
the ID a command takes.  Every card must have one, no two the same, and each must be
fit for a link.  Its first choice is the id its file name spells (`Entry.id`), the one
every command files its reports under and looks it up by; an `id` header that differs
is shown, never a name (docs/protocol.md §15, "Names").  A file dropped by hand can
spell none, or one another card already has, so the next choices are the file name
itself (which the commands take too), shown escaped if it holds a control character,
and last that with a number: a card is never left out for want of a name.  Cards are
named in board-building order (copies, then originals, then history), so the card a
name first belongs to keeps it.
"""

from __future__ import annotations

from handoffd.core.terminal import escape, has_control

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `typing` costs `status` its import
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Protocol

    from handoffd.queue.scan import Entry

    class Named(Protocol):
        """What naming reads and sets of a card (`board.cards.Card` is one): the file it
        stands for, its role, and the name it is given."""

        card: str

        @property
        def entry(self) -> Entry: ...

        @property
        def role(self) -> str: ...


MAX_ID = 255  # as long as a file name may be: any longer is not a name a person copies


def usable(ident: str) -> bool:
    """Whether `ident` can stand for a card in a name: a link's one path segment, shown
    as it is."""
    return 0 < len(ident) <= MAX_ID and "/" not in ident and not has_control(ident)


def candidates(card: Named) -> Iterator[str]:
    """The names `card` may take, best first."""
    # a copy a pool member claimed is its pool's card wherever it is (docs/protocol.md §17)
    entry, suffix = card.entry, f"@{getattr(card, 'pool', '') or card.role}"
    if usable(entry.id):
        yield entry.id + suffix
    if usable(entry.name):
        yield entry.name + suffix
    shown = escape(entry.name) + suffix  # a file name with a CR: a name a link can hold
    yield shown
    for number in range(2, 1 << 31):
        yield f"{shown}~{number}"


def assign(cards: Iterable[Named], taken: set[str]) -> None:
    """Name each card with its first candidate not yet `taken` (which it then is)."""
    for card in cards:
        card.card = next(name for name in candidates(card) if name not in taken)
        taken.add(card.card)
