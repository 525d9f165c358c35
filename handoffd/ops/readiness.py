"""What the TASK block says beyond §4, and whether a dependency is done (docs/protocol.md
§13): the board's colours of the handoffs a file depends on, and an operator's answer.

Imported only when a waiting or taken file carries `depends_on`, or its report folder holds
an answer: a project that never uses them pays nothing for this module (the helpers'
imports are pinned), and prints exactly the §4 block.
"""

from __future__ import annotations

import os

from handoffd.board import cards
from handoffd.core.terminal import escape
from handoffd.ops.context import Context
from handoffd.queue import reports
from handoffd.snapshot.snapshot import take_snapshot as scan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.core.config import Role


class Dependencies:
    """The project's board as one scan saw it, made on first use within one step."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._board: cards.Board | None = None

    def board(self) -> cards.Board:
        if self._board is None:
            snapshot = scan(self.context.root, self.context.roles)
            self._board = cards.project(snapshot, snapshot.taken_at)
        return self._board

    def card(self, path: str, role: str | None = None) -> cards.Card | None:
        """The board's card of `role`'s waiting or taken file at `path` (the role acted for
        unless named), found by name: the board may have seen it in `new/` just before it
        was taken.  A pool member's file may be its pool's (docs/protocol.md §17): waiting
        in the pool's `new/` it is the pool's card, taken it is the member's copy of the
        pool's; the copy at `path` itself is preferred to another of the same name (mail
        to both the pool and the member).  None when the board does not show that file."""
        role, name = role or self.context.me.name, os.path.basename(path)
        row = self.context.roles.get(role)
        team = row.pool if row is not None and row.pool and not row.is_pool else ""
        found = [card for card in self.board().cards
                 if card.entry.name == name and not card.entry.is_original
                 and (card.role == role or (team and team in (card.role, card.pool)))]  # fmt: skip
        return next((card for card in found if card.path == path), found[0] if found else None)

    def first_level(self, path: str, wanted: list[str]) -> list[cards.Card] | None:
        """The cards of the handoffs `wanted` names, as the board paints them for the role's
        file at `path`; None when the board does not show that file."""
        card = self.card(path)
        return None if card is None else [other for other in card.closure if other.id in wanted]

    def done(self, wanted: list[str], path: str, role: str | None = None) -> bool:
        """Whether every card of every handoff in `wanted` is green (`cards.waiting_on` says),
        as the board paints the file at `path`.  A file the board does not show (it arrived
        after the scan) is asked of the board's open cards: a handoff open anywhere holds
        it back.  A handoff of which no card is found anywhere (a hand-edited id, or history
        removed) holds nothing back; one found only done is done."""
        card = self.card(path, role)
        around = self.board().cards if card is None else card.closure
        return not cards.waiting_on(around, wanted)

    def lines(self, path: str, wanted: list[str]) -> list[str]:
        """`DEPENDS_ON: <card> <COLOUR>`, one per card of the closure's first level."""
        return [
            f"DEPENDS_ON: {escape(card.card)} {card.colour.upper()}"
            for card in self.first_level(path, wanted) or ()
        ]


def for_daemon(root: str, roles: dict[str, Role]) -> Callable[[str, str, list[str]], bool]:
    """For the daemon's re-notify check (docs/protocol.md §14): whether the handoffs
    `wanted` that role's file at `path` depends on are all done, `(role, path, wanted)`.
    One board per call of this, made only once a file that depends on something is asked
    about: the daemon makes one per re-notify check, never per file or per rescan."""
    dependencies = Dependencies(Context(root, roles))
    return lambda role, path, wanted: dependencies.done(wanted, path, role)


def answer_lines(handoffs: str, ident: str, since: str | None = None) -> list[str]:
    """`ANSWER: <first line> (<by>, <when>)` and `ANSWER_FILE: <path>`, or none (also for
    an answer from before `since`, the copy's `reopened_at`)."""
    found = reports.latest_answer(handoffs, ident, since)
    if found is None:
        return []
    said = escape(found.first_line)
    return [f"ANSWER: {said} ({escape(found.agent)}, {escape(found.reported_at)})",
            f"ANSWER_FILE: {found.path}"]  # fmt: skip
