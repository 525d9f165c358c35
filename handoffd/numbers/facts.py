"""The one read behind every number of the swarm (docs/protocol.md §19): the board's scan
and projection, every copy's stamps (open ones from the scan, history's through the
stamps cache), the operator's mailbox, and the daemon's log.  `gather` reads; everything
after it (`handoffd.numbers.exposition`, `.stats`, `.charts`) is a pure function of the
`Facts` it returns, so `handoffd metrics`, `/metrics`, `handoffd stats` and `/numbers`
agree on the same files, and a restart of the daemon or the web board changes nothing.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator

from handoffd.board import colour
from handoffd.board import status as board
from handoffd.board.cards import Board
from handoffd.core import config, limits
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.numbers import logcount, stamps, tokens
from handoffd.numbers.logcount import Event
from handoffd.numbers.stamps import Copy
from handoffd.queue import scan
from handoffd.queue.scan import Entry, State
from handoffd.snapshot.snapshot import Snapshot

# The board's states as the numbers name them (`handoffd_cards{state}`).
QUEUED, FAILED, BLOCKED, WAITING, IN_PROCESS = (
    "queued",
    "failed",
    "blocked",
    "waiting",
    "in_process",
)
CARD_STATES = (QUEUED, FAILED, BLOCKED, WAITING, IN_PROCESS)
STALLED = "not taken after "  # how §14's detail of a role not answering its wake-ups begins


def operator_mailbox(root: str) -> Role | None:
    """The operator's mailbox (`config.operator_role`) where its folder is a real folder
    (`init` makes it), else None: the numbers count it whoever made it."""
    mailbox = config.operator_role(root)
    try:
        real = stat.S_ISDIR(os.lstat(mailbox.handoffs).st_mode)
    except OSError:
        return None
    return mailbox if real else None


class Facts:
    """What one read found: the roles the numbers name, every copy, the counted log lines,
    and the gauges of the board as it stands at `now`."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.roles: list[str] = []  # every local role, pools included, then the operator
        self.pools: list[str] = []
        self.panes: list[str] = []  # the roles with a pane (no pool, no operator)
        self.open_copies: list[Copy] = []  # in new/ and in_process/
        self.history: list[stamps.Completed] = []  # each role's completed/
        self.events: list[Event] = []
        self.cards: dict[tuple[str, str], int] = {}  # (role, state) -> open cards
        self.oldest: dict[str, float] = {}  # role -> seconds its oldest waiting copy waited
        self.stalled: set[str] = set()
        self.busy: dict[tuple[str, str], int] = {}  # (role, harness) -> 1 busy, 0 idle
        self.harness: dict[str, str] = {}
        self.up = False
        self.nats: bool | None = None  # None: the project uses no NATS
        self.tokens: list[tokens.Sample] = []
        self.board: Board | None = None  # the board the gauges were read from (the page's header)

    def copies(self) -> Iterator[Copy]:
        """Every copy, open ones first."""
        yield from self.open_copies
        for held in self.history:
            yield from held.copies


def gather(
    root: str,
    now: float | None = None,
    roles: dict[str, Role] | None = None,
    kept: stamps.Kept | None = None,
) -> Facts:
    """Read the project at `root` once for its numbers (this host's part of the swarm); a
    long-running reader passes what it `kept` of history from its last read."""
    now = time.time() if now is None else now
    roles = config.load_roles(root) if roles is None else roles
    here = config.this_host(root)
    # the operator's mailbox is read below, where its folder is (the roles may name it)
    local = {n: r for n, r in config.without_operator(roles).items() if config.is_local(r, here)}
    facts = Facts(now)
    shown = board.board(root, None, False, limits.LIVENESS_WINDOW, now, local)
    snapshot = shown.snapshot
    facts.board = shown
    mailbox = operator_mailbox(root)
    entries = list(snapshot.open)
    if mailbox is not None:
        entries += scan.scan_role(mailbox, State.OPEN)
    _roles(facts, local, mailbox)
    _gauges(facts, entries, now)
    facts.stalled = {c.role for c in shown.cards if c.colour == colour.RED and
                     c.detail.startswith(STALLED)}  # fmt: skip
    _panes(facts, snapshot)
    facts.up = bool(snapshot.daemon and snapshot.daemon.running)
    link = snapshot.held.link if snapshot.held is not None else None
    facts.nats = None if link is None else link.state == "up"
    held = [*local.values(), *([mailbox] if mailbox else [])]
    # history after the open scan: a copy moving on while we read is seen, at its later place
    facts.history = [stamps.completed(role, kept) for role in held]
    facts.open_copies = _open_copies(entries, dict(zip(held, facts.history, strict=True)))
    facts.events = logcount.events(root)
    facts.tokens = tokens.token_samples(snapshot, now)
    return facts


def _roles(facts: Facts, local: dict[str, Role], mailbox: Role | None) -> None:
    facts.roles = [*local, *([config.OPERATOR] if mailbox is not None else [])]
    facts.pools = [name for name, role in local.items() if role.is_pool]
    facts.panes = [name for name, role in local.items() if not role.is_pool]


def _gauges(facts: Facts, entries: list[Entry], now: float) -> None:
    """The open cards by role and state, and how long each role's oldest waiting copy has
    waited (since it arrived, was released or reopened)."""
    for entry in entries:
        state = _card_state(entry)
        key = (entry.role, state)
        facts.cards[key] = facts.cards.get(key, 0) + 1
        if entry.state == State.NEW:
            keys = (hf.ENQUEUED_AT, hf.RELEASED_AT, hf.REOPENED_AT)
            times = [t for t in (hf.epoch(entry.headers.get(k)) for k in keys) if t is not None]
            since = max(times) if times else entry.mtime
            if since is not None:
                waited = max(0.0, now - since)
                facts.oldest[entry.role] = max(waited, facts.oldest.get(entry.role, 0.0))


def _card_state(entry: Entry) -> str:
    if entry.state == State.OUTBOX:
        return QUEUED
    if entry.state == State.FAILED:
        return FAILED
    if entry.headers.get(hf.BLOCKED_REASON):
        return BLOCKED
    return WAITING if entry.state == State.NEW else IN_PROCESS


def _panes(facts: Facts, snapshot: Snapshot) -> None:
    """Each role's harness, and busy (1) or idle (0) as `status` shows its pane."""
    for row in board.roles(snapshot):
        name = str(row.get("role", ""))
        if name not in facts.panes:
            continue
        harness = str(row.get("harness") or "generic")
        facts.harness[name] = harness
        pane = row.get("pane")
        if pane in ("busy", "idle"):
            facts.busy[(name, harness)] = int(pane == "busy")


def _open_copies(entries: list[Entry], history: dict[Role, stamps.Completed]) -> list[Copy]:
    """The copies in `new/` and `in_process/`, but those seen in `completed/` since."""
    done = {role.name: held.names for role, held in history.items()}
    return [
        stamps.copy_of(entry.role, entry.name, entry.headers)
        for entry in entries
        if entry.state in (State.NEW, State.IN_PROCESS)
        and entry.name not in done.get(entry.role, ())
    ]


def spent(facts: Facts, since: float) -> list[tokens.Sample]:
    """The tokens each role spent in the window from `since` (for `stats` and `/numbers`)."""
    return (
        [] if facts.board is None else tokens.token_samples(facts.board.snapshot, facts.now, since)
    )
