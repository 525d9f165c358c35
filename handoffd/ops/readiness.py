"""What the TASK block says beyond §4, and whether a dependency is done (docs/protocol.md
§13): the board's colours of the handoffs a file depends on, and an operator's answer.

Imported only when a waiting or taken file carries `depends_on`, or its report folder holds
an answer: a project that never uses them pays nothing for this module (the helpers'
imports are pinned), and prints exactly the §4 block.
"""

from __future__ import annotations

import os

from handoffd import reports
from handoffd.board import cards, colour
from handoffd.ops.context import Context
from handoffd.scan import scan
from handoffd.terminal import escape


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

    def first_level(self, path: str, wanted: list[str]) -> list[cards.Card] | None:
        """The cards of the handoffs `wanted` names, as the board paints them for the role's
        file at `path` (found by name: the board may have seen it in `new/` just before it
        was taken); None when the board does not show that file."""
        role, name = self.context.me.name, os.path.basename(path)
        for card in self.board().cards:
            if card.role == role and card.entry.name == name and not card.entry.is_original:
                return [other for other in card.closure if other.id in wanted]
        return None

    def done(self, wanted: list[str], path: str) -> bool:
        """Whether every card of every handoff in `wanted` is green.  A handoff of which no
        card is found anywhere (a hand-edited id, or history removed) holds nothing back."""
        found = self.first_level(path, wanted)
        return found is None or all(card.colour == colour.GREEN for card in found)

    def lines(self, path: str, wanted: list[str]) -> list[str]:
        """`DEPENDS_ON: <card> <COLOUR>`, one per card of the closure's first level."""
        return [
            f"DEPENDS_ON: {escape(card.card)} {card.colour.upper()}"
            for card in self.first_level(path, wanted) or ()
        ]


def answer_lines(handoffs: str, ident: str) -> list[str]:
    """`ANSWER: <first line> (<by>, <when>)` and `ANSWER_FILE: <path>`, or none."""
    found = reports.latest_answer(handoffs, ident)
    if found is None:
        return []
    said = escape(found.first_line)
    return [f"ANSWER: {said} ({escape(found.agent)}, {escape(found.reported_at)})",
            f"ANSWER_FILE: {found.path}"]  # fmt: skip
