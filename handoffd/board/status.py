"""The board in the terminal (docs/protocol.md §8): `board` scans and projects once,
`render` is a pure function of the result (lines in, lines out)."""

from __future__ import annotations

import time

from handoffd.board import cards, colour, spending
from handoffd.core import config, lifecycle, limits
from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.core.terminal import escape
from handoffd.core.tokens import Spent, Tally
from handoffd.queue import scan
from handoffd.remote import held
from handoffd.snapshot.snapshot import Snapshot, linked_folders, take_snapshot

COLUMNS = ("STATUS", "CARD", "FROM", "TO", "PRI", "TYPE", "TASK", "AGE", "DETAIL")
TASK_WIDTH = 32
BOX_HOLDS_TEXT = "input box holds text"  # a role's line, while a person's text is in its box
_SGR = {  # terminal colours of the STATUS cell; orange needs the 256-colour palette
    colour.RED: "\033[1;31m",
    colour.YELLOW: "\033[33m",
    colour.ORANGE: "\033[38;5;208m",
    colour.GREEN: "\033[32m",
}
_RESET = "\033[0m"
# What a folder of a handoff directory behind a symbolic link stops: every command
# refuses to read or write through it (docs/protocol.md Part II).
_STOPPED = {
    Box.OUTBOX: "nothing is queued into or delivered from its outbox",
    Box.DRAFTS: "it cannot queue handoffs",
    Box.SENT: "its outbox is not delivered",
    Box.FAILED: "its outbox is not delivered",
    "inbox": "mail to it waits in its senders' outboxes and it cannot take work",
    Box.NEW: "mail to it waits in its senders' outboxes",
    Box.IN_PROCESS: "it cannot take or finish work",
    Box.COMPLETED: "it cannot take or finish work",
}


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
    snapshot = take_snapshot(root, roles, now=now, history=show_all)
    snapshot.harnesses()  # read now, with the rest: `render` reads nothing
    if role is not None and role not in snapshot.roles:
        raise config.UnknownRole(role, snapshot.roles)
    result = cards.project(snapshot, now, window_s, include_green=show_all)
    if role is not None:  # a pool's cards too where a member holds them (§17)
        result.cards = [card for card in result.cards if role in (card.role, card.pool)]
    return result


def unanswered(root: str) -> list[tuple[str, str, str]]:
    """(card, role, detail) of each card red because its role does not answer its wake-ups
    or its session is gone (docs/protocol.md §14): what the demo's lookout watches for."""
    return [
        (card.card, card.role, card.detail)
        for card in board(root, None, False, limits.LIVENESS_WINDOW).cards
        if card.colour == colour.RED
        and (card.detail.startswith("not taken after ") or card.detail.endswith(" is gone"))
    ]


def folder_warnings(roles: dict[str, config.Role]) -> list[str]:
    """One `WARNING:` line per folder of a role's handoff directory that lies behind a
    symbolic link, and per `batch_*` link in its `in_process/`: what handoffd will not do
    until it is a real folder again.  A few `lstat`s per role."""
    lines = []
    for role in roles.values():
        for where in linked_folders(role, tuple(_STOPPED)):
            stopped = _STOPPED.get(where, "that batch is never shown, taken or finished")
            lines.append(
                f"WARNING: {role.name}'s {escape(where)}/ is a symbolic link, not a folder: "
                f"handoffd never follows it, so {stopped}; replace it with a real folder"
            )
    return lines


def daemon_line(
    daemon: lifecycle.DaemonState | None, now: float, said: held.Held | None = None
) -> str:
    """`daemon: running (pid N, up 2h 03m)` or `daemon: NOT RUNNING`; then, while the
    daemon cannot reach its NATS servers, ` · NATS: unreachable (<why>)`."""
    if daemon is None or not daemon.running:
        return "daemon: NOT RUNNING"
    up = "" if daemon.started_at is None else f", up {colour.ago(now - daemon.started_at)}"
    nats = held.nats_line(said.link if said is not None else None)
    return f"daemon: running (pid {daemon.pid}{up})" + (f" · {escape(nats)}" if nats else "")


def roles(snapshot: Snapshot, only: str | None = None) -> list[dict[str, object]]:
    """Each role at a glance (docs/protocol.md §14): its session, its pane as the daemon last
    saw it (`unknown` while no daemon runs), its last wake-up, take and idle mark."""
    held: dict[str, list[float | None]] = {}  # role -> when it took the work it holds now
    for entry in snapshot.open:
        if entry.state == scan.State.IN_PROCESS:
            held.setdefault(entry.role, []).append(cards.epoch(entry.headers.get(hf.DEQUEUED_AT)))
    rows = []
    overrides = snapshot.harnesses() if snapshot.roles else {}
    spent, found = spending.held(snapshot, snapshot.taken_at), spending.tally(snapshot)
    for name, role in snapshot.roles.items():
        if only is not None and only not in (name, role.pool):
            continue
        if role.is_operator:  # a person, not a pane: its own line (`operator_line`)
            continue
        if role.is_pool:
            rows.append(pool_row(snapshot, role))
            _spending(rows[-1], snapshot, found, spent.get(name))
            continue
        seen = snapshot.panes.get(name, {})
        woken = _numbers(*snapshot.wakes.get(name, ()), seen.get("last_wake_at"))
        idle = _numbers(snapshot.idle_at.get(name), seen.get("last_idle_at"))
        took = _numbers(seen.get("last_take_at"), *held.get(name, ()))  # as the daemon saw it
        rows.append({
            "role": name,
            "harness": _harness(role, seen, overrides.get(name)),
            "session": role.session,
            "pane": seen.get("pane", "unknown"),
            "pane_since": cards.iso(_number(seen.get("since"))),
            "last_wake_at": cards.iso(max(woken, default=None)),
            "last_take_at": cards.iso(max(took, default=None)),
            "last_idle_at": cards.iso(max(idle, default=None)),
            "box_holds_text": seen.get("held") is True,  # a person's, not handoffd's (§17)
        })  # fmt: skip
        if role.pool:
            rows[-1]["pool"] = role.pool
        if isinstance(seen.get("unrecognised"), str):  # driven as generic (§17)
            rows[-1]["unrecognised"] = seen["unrecognised"]
        _spending(rows[-1], snapshot, found, spent.get(name))
    return rows


def operator_line(shown: list[cards.Card]) -> str | None:
    """`for the operator: <n> waiting (oldest <span>)` (docs/protocol.md §18): the copies in
    the operator's inbox, which no pane is woken for; None while none waits."""
    waiting = [card for card in shown
               if card.role == config.OPERATOR and card.state == scan.State.NEW]  # fmt: skip
    if not waiting:
        return None
    oldest = max(card.age_s or 0.0 for card in waiting)
    return f"for the operator: {len(waiting)} waiting (oldest {colour.ago(oldest)})"


def _spending(
    row: dict[str, object], snapshot: Snapshot, found: Tally, spent: Spent | None
) -> None:
    """A role's tokens (a pool's: its members' together) and its budget (docs/protocol.md
    §19), on its row; `budget` only where one is set."""
    name = str(row["role"])
    row["tokens"] = spending.role_tokens(snapshot, found, name).to_json()
    budget = spending.budget_json(snapshot, name, spent)
    if budget is not None:
        row["budget"] = budget


def pool_row(snapshot: Snapshot, row: config.Role) -> dict[str, object]:
    """A pool at a glance (docs/protocol.md §17): its members, and how many of their panes
    are busy, idle, gone or unknown, as their own lines show them."""
    team = [name for name, role in snapshot.roles.items() if role.pool == row.name != name]
    panes = [str(snapshot.panes.get(name, {}).get("pane", "unknown")) for name in team]
    counts = {state: panes.count(state) for state in ("busy", "idle", "gone", "unknown")}
    return {"role": row.name, "pool": len(team), "members": team, **counts}


def _harness(role: config.Role, seen: dict[str, object], override: str | None) -> str:
    """What runs in the role's pane (docs/protocol.md §16): as the daemon last saw it,
    else as the conf's `harness` line or the agent's name says."""
    from handoffd.harness import profiles

    found = seen.get("harness")
    if override is None and found in profiles.PROFILES:
        return str(found)
    return profiles.resolve(role.agent, None, override)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _numbers(*values: object) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def role_lines(rows: list[dict[str, object]], now: float) -> list[str]:
    """`<role>  <idle 2m | busy 14m | gone | unknown>  last wake 3m ago  last take 1m ago`,
    then `  screen not recognised: codex 0.150.0` for a harness driven as generic."""
    width = max((len(str(row["role"])) for row in rows), default=0)
    return [f"{escape(str(row['role'])):<{width}}  {glance(row, now)}" for row in rows]


def glance(row: dict[str, object], now: float) -> str:
    """What a role's line says after its name (`idle 2m  last wake 3m ago  last take 1m
    ago`; a pool's `pool of 3: 2 busy, 1 idle`): the terminal's and the web board's."""
    if "members" in row:  # a pool's line, above its members'
        return pool_line(row) + _held_note(row)
    pane = str(row["pane"])
    since = cards.epoch(row["pane_since"])
    if pane in ("idle", "busy") and since is not None:
        pane = f"{pane} {colour.ago(now - since)}"
    wake, take = (_span(row[key], now) for key in ("last_wake_at", "last_take_at"))
    if row.get("harness") not in (None, "generic"):
        pane = f"{row['harness']} {pane}"  # Claude Code or Codex (docs/protocol.md §16)
    if row.get("box_holds_text") is True:  # a person at work: no wake-up goes in (§17)
        pane += f"  {BOX_HOLDS_TEXT}"
    line = f"{pane}  last wake {wake}  last take {take}"
    if row.get("unrecognised"):
        line += f"  screen not recognised: {escape(str(row['unrecognised']))}"
    return line + _held_note(row)


def _held_note(row: dict[str, object]) -> str:
    """`  budget spent (<used>/<budget>)` while a budget holds the role (§19), else ''."""
    budget = row.get("budget")
    if not isinstance(budget, dict) or budget.get("spent") is not True:
        return ""
    return f"  budget spent ({budget['used']}/{budget['tokens']})"


def pool_line(row: dict[str, object]) -> str:
    """`pool of 3: 2 busy, 1 idle` (gone and unknown panes said only when there are any)."""
    said = [f"{row['busy']} busy", f"{row['idle']} idle"]
    said += [f"{row[state]} {state}" for state in ("gone", "unknown") if row[state]]
    return f"pool of {row['pool']}: " + ", ".join(said)


def _span(value: object, now: float) -> str:
    at = cards.epoch(value)
    return "never" if at is None else f"{colour.ago(now - at)} ago"


def render(
    result: cards.Board,
    now: float,
    show_all: bool,
    colours: bool,
    warnings: list[str] | None = None,
    only: str | None = None,
) -> list[str]:
    """The board as lines of text: the daemon and counts, a line per role (`only` that one),
    any cycle, any `warnings`, then a row per card."""
    counts = result.counts()
    shown = colour.ORDER if show_all else colour.ORDER[:-1]
    tally = " · ".join(f"{name} {counts[name]}" for name in shown)
    done, dismissed = result.green_split()
    if show_all and dismissed:  # put aside is not done: counted apart (§15)
        tally += f" ({done} completed, {dismissed} dismissed)"
    cycles = [escape(cycle) for cycle in result.cycles]  # the ids are the files' own words
    glance = role_lines(roles(result.snapshot, only), now)
    head = f"{daemon_line(result.snapshot.daemon, now, result.snapshot.held)} · {tally}"
    mail = operator_line(result.cards)
    lines = [head, *([mail] if mail else []), *glance, *cycles, *(warnings or [])]
    if not result.cards:
        return [*lines, "no cards" if show_all else "no open cards"]
    rows = [_row(card) for card in result.cards]
    return lines + _table(rows, [card.colour for card in result.cards], colours)


def _row(card: cards.Card) -> list[str]:
    """A card's cells, each escaped: every one but the colour and the age comes from a file,
    and a control character in it would tear the columns or redraw the screen."""
    task = escape(card.headers.get(hf.TASK) or card.headers.get(hf.MESSAGE) or "-")
    if len(task) > TASK_WIDTH:
        task = task[: TASK_WIDTH - 1] + "…"
    cells = [
        card.card,
        card.shown_sender or "-",
        ",".join(card.recipients) or "-",
        card.priority,
        card.headers.get(hf.TYPE) or "-",
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
