"""The board in the terminal (docs/protocol.md §8): `board` scans and projects once,
`render` is a pure function of the result (lines in, lines out)."""

from __future__ import annotations

import time

from handoffd import config, lifecycle, scan
from handoffd.board import cards, colour
from handoffd.terminal import escape

COLUMNS = ("STATUS", "CARD", "FROM", "TO", "PRI", "TYPE", "TASK", "AGE", "DETAIL")
TASK_WIDTH = 32
_SGR = {  # terminal colours of the STATUS cell; orange needs the 256-colour palette
    colour.RED: "\033[1;31m",
    colour.YELLOW: "\033[33m",
    colour.ORANGE: "\033[38;5;208m",
    colour.GREEN: "\033[32m",
}
_RESET = "\033[0m"


def board(
    root: str,
    role: str | None,
    show_all: bool,
    window_s: float,
    now: float | None = None,
    roles: dict[str, config.Role] | None = None,
) -> cards.Board:
    """Scan `root` (whose `roles` are read unless given) and project its board; `role` keeps
    only that role's cards."""
    now = time.time() if now is None else now
    snapshot = scan.scan(root, roles, now=now, history=show_all)
    if role is not None and role not in snapshot.roles:
        raise config.UnknownRole(role)
    result = cards.project(snapshot, now, window_s, include_green=show_all)
    if role is not None:
        result.cards = [card for card in result.cards if card.role == role]
    return result


def daemon_line(daemon: lifecycle.DaemonState | None, now: float) -> str:
    """`daemon: running (pid N, up 2h 03m)` or `daemon: NOT RUNNING`."""
    if daemon is None or not daemon.running:
        return "daemon: NOT RUNNING"
    up = "" if daemon.started_at is None else f", up {colour.ago(now - daemon.started_at)}"
    return f"daemon: running (pid {daemon.pid}{up})"


def render(result: cards.Board, now: float, show_all: bool, colours: bool) -> list[str]:
    """The board as lines of text: the daemon and counts, any cycle, then a row per card."""
    counts = result.counts()
    shown = colour.ORDER if show_all else colour.ORDER[:-1]
    tally = " · ".join(f"{name} {counts[name]}" for name in shown)
    cycles = [escape(cycle) for cycle in result.cycles]  # the ids are the files' own words
    lines = [f"{daemon_line(result.snapshot.daemon, now)} · {tally}", *cycles]
    if not result.cards:
        return [*lines, "no cards" if show_all else "no open cards"]
    rows = [_row(card) for card in result.cards]
    return lines + _table(rows, [card.colour for card in result.cards], colours)


def _row(card: cards.Card) -> list[str]:
    """A card's cells, each escaped: every one but the colour and the age comes from a file,
    and a control character in it would tear the columns or redraw the screen."""
    task = escape(card.headers.get("task") or card.headers.get("message") or "-")
    if len(task) > TASK_WIDTH:
        task = task[: TASK_WIDTH - 1] + "…"
    cells = [
        card.card,
        card.sender or "-",
        ",".join(card.recipients) or "-",
        card.priority,
        card.headers.get("type") or "-",
    ]
    return [
        card.colour.upper(),
        *(escape(cell) for cell in cells),
        task,
        colour.ago(card.age_s),
        escape(card.detail),
    ]


def _table(rows: list[list[str]], tints: list[str], colours: bool) -> list[str]:
    """Aligned columns (the last one unpadded); only the STATUS cell is coloured."""
    widths = [max(len(row[i]) for row in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]
    lines = [_line(list(COLUMNS), widths)]
    for row, tint in zip(rows, tints, strict=True):
        line = _line(row, widths)
        if colours:
            cell = row[0].ljust(widths[0])
            line = _SGR[tint] + cell + _RESET + line[len(cell) :]
        lines.append(line)
    return lines


def _line(cells: list[str], widths: list[int]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=False)]
    return "  ".join([*padded, cells[-1]]).rstrip()
