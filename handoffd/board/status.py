"""`handoffd status`: the board in the terminal (docs/protocol.md §8).

Rendering is a pure function of a `Board` (lines in, lines out); the command scans,
projects, renders and prints, or prints the cards as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time

import click

from handoffd import config, lifecycle, scan
from handoffd.board import cards, colour
from handoffd.cli import _project, root_argument
from handoffd.terminal import escape, escape_json

COLUMNS = ("STATUS", "CARD", "FROM", "TO", "PRI", "TYPE", "TASK", "AGE", "DETAIL")
TASK_WIDTH = 32
WATCH_EVERY = 2.0  # seconds between redraws under --watch
_SGR = {  # terminal colours of the STATUS cell; orange needs the 256-colour palette
    colour.RED: "\033[1;31m",
    colour.YELLOW: "\033[33m",
    colour.ORANGE: "\033[38;5;208m",
    colour.GREEN: "\033[32m",
}
_RESET = "\033[0m"


def board(
    root: str, role: str | None, show_all: bool, window_s: float, now: float | None = None
) -> cards.Board:
    """Scan `root` and project its board; `role` keeps only that role's cards."""
    now = time.time() if now is None else now
    snapshot = scan.scan(root, now=now)
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


def use_colours() -> bool:
    """Colour codes only on a terminal, and never when `NO_COLOR` is set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


@click.command("status")
@root_argument
@click.option("--role", "role", metavar="R", help="Only the cards of role R.")
@click.option("--all", "show_all", is_flag=True, help="Completed (green) cards too.")
@click.option("--json", "as_json", is_flag=True, help="The cards as a JSON list.")
@click.option(
    "--window",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="MINUTES",
    help="A claim is live while its heartbeat is younger than this.",
)
@click.option("--watch", is_flag=True, help=f"Redraw every {WATCH_EVERY:g} s until Ctrl-C.")
def status(
    root: str | None,
    role: str | None,
    show_all: bool,
    as_json: bool,
    window: float,
    watch: bool,
) -> None:
    """The board: every open card in its colour, red first (docs/protocol.md §8)."""
    project = _project(root)
    if not watch:
        click.echo(_once(project, role, show_all, as_json, window * 60))
        return
    clear = "\033[H\033[2J" if sys.stdout.isatty() else ""
    try:
        while True:
            click.echo(clear + _once(project, role, show_all, as_json, window * 60))
            sys.stdout.flush()
            time.sleep(WATCH_EVERY)
    except KeyboardInterrupt:  # Ctrl-C is how a watch ends: no traceback, exit 0
        return


def _once(project: str, role: str | None, show_all: bool, as_json: bool, window_s: float) -> str:
    now = time.time()
    try:
        result = board(project, role, show_all, window_s, now)
    except config.ConfigError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        for cycle in result.cycles:
            click.echo(escape(cycle), err=True)
        return escape_json(
            json.dumps([card.to_json() for card in result.cards], ensure_ascii=False)
        )
    return "\n".join(render(result, now, show_all, use_colours()))
