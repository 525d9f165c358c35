"""The operations that read the project (docs/protocol.md §8, §10, §11): the board
(`status`), `resume`, `digest`, `carry-forward`; and `note`, the agent's own lines of its
live file.  Each returns its text and, where the command has `--json`, its structure."""

from __future__ import annotations

import json as jsonlib
import time

from handoffd.core import config, limits
from handoffd.core.outcome import Exit, Result, refused
from handoffd.core.terminal import escape, escape_json
from handoffd.ops.context import Context, config_refusal


def status(
    context: Context,
    role: str | None = None,
    all: bool = False,
    json: bool = False,
    window: float = 60.0,
    all_hosts: bool = False,
    roles: bool = False,
) -> Result:
    """The board: its text (or its JSON), and its cards as data; with `roles`, the roles."""
    from handoffd.board import status as board

    now = time.time()
    if role is not None and role not in context.roles:
        return config_refusal(config.UnknownRole(role, context.roles))
    if all_hosts:
        return _all_hosts(context, json, all)
    shown = board.board(context.root, role, all, window * 60, now, context.roles)
    if roles:
        rows = board.roles(shown.snapshot, role)
        text = _dumps(rows) if json else "\n".join(board.role_lines(rows, now))
        return Result(Exit.OK, text + "\n", "", rows)
    items = [card.to_json() for card in shown.cards]
    warnings = board.folder_warnings(context.roles if role is None else {role: context.roles[role]})
    if json:
        cycles = "".join(f"{escape(cycle)}\n" for cycle in shown.cycles)
        return Result(Exit.OK, _dumps(items) + "\n", cycles + "".join(f"{w}\n" for w in warnings),
                      items)  # fmt: skip
    text = "\n".join(board.render(shown, now, all, context.colours, warnings, role)) + "\n"
    return Result(Exit.OK, text, "", items)


def metrics(context: Context) -> Result:
    """The Prometheus text exposition of this host's part of the swarm (§19)."""
    from handoffd.numbers import exposition, facts

    return Result(Exit.OK, exposition.render(facts.gather(context.root, roles=context.roles)))


def stats(
    context: Context, since: str = "24h", role: str | None = None, json: bool = False
) -> Result:
    """The swarm's numbers per role over the last `since` (§19): a table, or its JSON."""
    from handoffd.numbers import facts, stats

    span = stats.span_seconds(since)
    if span is None:
        return refused(f"INVALID_SPAN: '{escape(since)}'; give a number and a unit, "
                       "s, m, h, d or w (30m, 24h, 7d)")  # fmt: skip
    found = facts.gather(context.root, roles=context.roles)
    if role is not None and role not in found.roles:
        return config_refusal(config.UnknownRole(role, context.roles))
    start = found.now - span
    rows = stats.rows(found, start, role, facts.spent(found, start))
    shown = stats.as_json(found, rows, start, since)
    if json:
        return Result(Exit.OK, _dumps(shown) + "\n", "", shown)
    return Result(Exit.OK, "\n".join(stats.render(rows, since)) + "\n", "", shown)


def _all_hosts(context: Context, json: bool, show_all: bool = False) -> Result:
    """`status --all-hosts` (docs/protocol.md §15): every host's open cards, with `host`
    (and with `--all` this host's green ones)."""
    from handoffd.board import status as board
    from handoffd.remote import settings

    network = settings.load(context.root)
    if network is None:
        return refused(
            "NO_HOSTS: --all-hosts needs the swarm's NATS servers: a `nats <url>` line in "
            ".swarmforge/swarmforge.conf (docs/protocol.md §15)"
        )
    try:
        from handoffd.board import hosts
    except ImportError as error:
        return refused(f"NO_HOSTS: the NATS client is missing ({error.name}): "
                       "pip install 'handoffd[nats]'", Exit.FAILED)  # fmt: skip
    here = config.this_host(context.root)
    local = {n: r for n, r in context.roles.items() if config.is_local(r, here)}
    items, notes = hosts.gather(context.root, local, network, show_all)
    if json:
        return Result(Exit.OK, _dumps(items) + "\n", "".join(f"{n}\n" for n in notes), items)
    shown = board.board(context.root, None, False, limits.LIVENESS_WINDOW, roles=local)
    daemon = board.daemon_line(shown.snapshot.daemon, time.time(), shown.snapshot.held)
    kind = "card" if show_all else "open card"
    head = f"{daemon} · {len(items)} {kind}{'' if len(items) == 1 else 's'}"
    empty = "no cards" if show_all else "no open cards"
    return Result(Exit.OK, "\n".join(hosts.render(items, notes, head, empty)) + "\n", "", items)


def resume(context: Context, json: bool = False) -> Result:
    """Where were we: the role's answer, climbed once (the git rung writes the live file)."""
    from handoffd.continuity import resume as ladder

    answer = ladder.climb(context.me, context.root)
    shown = answer.as_json()
    if json:
        return Result(Exit.OK, _dumps(shown) + "\n", "", shown)
    return Result(Exit.OK, "".join(f"{line}\n" for line in answer.lines()), "", shown)


def note(
    context: Context,
    decision: str | None = None,
    ruled_out: str | None = None,
    verify: str | None = None,
) -> Result:
    """Add to the agent's sections of the live file HANDOFF.md."""
    from handoffd.continuity import live

    given = {"Decisions": decision, "Ruled Out": ruled_out, "Verify": verify}
    given = {name: live.one_line(text) for name, text in given.items() if text is not None}
    if not given or not all(given.values()):
        return refused("NOTE_EMPTY: give --decision, --ruled-out or --verify text.")

    def edit(sections: dict[str, list[str]]) -> None:
        for name, text in given.items():
            if name == "Verify":
                sections[name] = [f"`{text}`"]
            else:
                sections[name] = live.add_bullet(sections.get(name, []), f"- {text}")

    try:
        live.refresh(context.me, edit=edit)
    except OSError as error:  # a folder where the file should be, a full disk: one line
        return refused(f"NOTE_NOT_WRITTEN: {error}", Exit.FAILED)
    return Result(Exit.OK, f"NOTED: {live.path(context.me.worktree)}\n")


def digest(
    context: Context,
    id: str | None = None,
    task: str | None = None,
    max_lines: int = 60,
    json: bool = False,
) -> Result:
    """The digest of a handoff's thread, or of a task's."""
    from handoffd.core import budget
    from handoffd.digest import gather as digests

    if (id is None) == (task is None):
        return refused("INVALID_ARGUMENTS: give a handoff ID or --task T (one of them)")
    try:
        made = digests.digest_of(context.root, id, task, max_lines)
    except budget.BudgetTooSmall as error:
        return refused(f"BUDGET_TOO_SMALL: {error}")
    if isinstance(made, Result):
        return made
    shown = made.as_json()
    if json:
        return Result(Exit.OK, _dumps(shown, indent=2) + "\n", "", shown)
    return Result(Exit.OK, made.markdown, "", shown)


def carry_forward(
    context: Context,
    n: int = 5,
    since: str | None = None,
    role: str | None = None,
    json: bool = False,
) -> Result:
    """The last `n` threads, newest activity first, each a compact digest."""
    from handoffd.core.handoff import epoch
    from handoffd.digest import gather as digests

    when = None if since is None else epoch(since)
    if since is not None and when is None:
        return refused(f"INVALID_ARGUMENTS: --since is not an ISO 8601 time: {since!r}")
    if role is not None and role not in context.roles:
        return config_refusal(config.UnknownRole(role, context.roles))
    made = digests.carry_forward_of(context.root, n, when, role)
    items = [one.as_json() for one in made]
    if json:
        return Result(Exit.OK, _dumps(items, indent=2) + "\n", "", items)
    text = "\n".join(d.markdown for d in made) if made else "NO_THREADS\n"
    return Result(Exit.OK, text, "", items)


def _dumps(data: object, indent: int | None = None) -> str:
    """JSON as the commands print it: a control character from a file as JSON's own escape."""
    return escape_json(jsonlib.dumps(data, ensure_ascii=False, indent=indent))
