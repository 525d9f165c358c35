"""The projection: one scan's snapshot, the clock and the liveness window → the cards of
docs/protocol.md §8, each with its state, claim, latest report, blocked reason,
dependency closure, colour and detail.

Every view (`status`, the web board, the MCP tools) reads `project()`; none reads the
queue on its own.  `project` is pure: it reads no file, so it makes no call per card
(the N+1 trap) — whatever it shows of a card (its latest report, a failed original's
reason, the dependencies already done) the scan read.  History is in the snapshot
only for `--all` and for a dependency that is no longer open.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from handoffd.board import colour, naming, spending
from handoffd.core import handoff as hf
from handoffd.core import limits
from handoffd.core.tokens import Totals
from handoffd.queue import heartbeat
from handoffd.queue import pool as pools
from handoffd.queue.reports import Head
from handoffd.queue.scan import Entry, State, dependencies, recipients
from handoffd.snapshot.snapshot import Snapshot

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `typing` costs `status` its import
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

STALL_S = 60.0  # an original older than this in an outbox is stalled
EXCERPT = 120  # characters of a report's first line shown as its excerpt


class Claim:
    """A role's claim on a card it has in process; live while its heartbeat is fresh (a
    pool copy's, while its member has no heartbeat that counts: since it was taken)."""

    __slots__ = ("agent", "conversation", "gone", "heartbeat_age_s", "heartbeat_at", "live",
                 "now", "role", "taken_age_s")  # fmt: skip

    def __init__(
        self,
        role: str,
        agent: str | None,
        conversation: str | None,
        heartbeat_at: float | None,
        now: float,
        window_s: float,
        taken_at: float | None = None,
    ) -> None:
        """`taken_at`: a pool copy's `dequeued_at` (docs/protocol.md §17), None for any
        other; the daemon's reclaim counts both times by the same rule (`pool.alive_at`)."""
        self.role = role
        self.agent = agent
        self.conversation = conversation
        self.heartbeat_at = heartbeat_at
        self.now = now
        beat = heartbeat.counted(heartbeat_at, now)  # one from the future counts as none
        self.heartbeat_age_s = None if beat is None else now - beat
        taken = None if beat is not None else heartbeat.counted(taken_at, now)
        self.taken_age_s = None if taken is None else now - taken
        alive = pools.alive_at(heartbeat_at, taken_at, now)
        self.live = alive is not None and now - alive < window_s
        self.gone = ""  # `holder gone 42s; back to cleaner in 18s` (`holder_gone`)

    def describe(self) -> str:
        """Who holds it and how fresh: `claude@coder, heartbeat 3m ago`; without a heartbeat
        that counts, which (none, or one from the future) and, for a pool copy, when taken."""
        who = f"{self.agent}@{self.role}" if self.agent else self.role
        if self.heartbeat_age_s is not None:
            return f"{who}, heartbeat {colour.ago(self.heartbeat_age_s)} ago" + self.gone
        if self.heartbeat_at is None:
            said = f"{who}, no heartbeat"
        else:  # counted as none: a clock stepped back, or a time planted
            said = f"{who}, heartbeat {colour.ago(self.heartbeat_at - self.now)} in the future"
        if self.taken_age_s is not None:
            said += f", taken {colour.ago(self.taken_age_s)} ago"
        return said + self.gone

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "agent": self.agent,
            "conversation": self.conversation,
            "heartbeat_at": iso(self.heartbeat_at),
            "live": self.live,
        }


def excerpt(report: Head) -> str:
    """The part of a report's first line a view shows."""
    return report.first_line[:EXCERPT]


def report_json(report: Head | None) -> dict[str, Any] | None:
    """A card's latest report as `status --json` shows it."""
    if report is None:
        return None
    fields = ("status", "role", "reported_at")
    return {**{key: getattr(report, key) for key in fields}, "excerpt": excerpt(report)}


class Card:
    """One card, `<id>@<role>`: a delivered copy, or an original nobody has a copy of."""

    __slots__ = (
        "age_s", "blocked_reason", "box_holds_text", "card", "claim", "closure", "colour",
        "depends_on", "detail", "entry", "headers", "held", "id", "latest_report", "pool",
        "red_reason", "role", "state", "tokens", "waiting_on", "wake_at", "wake_failures",
        "wake_last_at", "wake_submitted", "wake_via", "wakeups",
    )  # fmt: skip

    def __init__(
        self,
        entry: Entry,
        age_s: float | None,
        red_reason: str | None = None,
        held: str | None = None,
    ) -> None:
        self.entry = entry
        self.headers = entry.headers
        self.id = entry.id
        self.role = entry.role
        self.pool = ""  # the pool a member's copy is from (docs/protocol.md §17): its name's
        self.card = f"{self.id}@{self.role}"  # until `naming.assign` gives it its own
        self.state = entry.state
        self.age_s = age_s
        self.blocked_reason = self.headers.get(hf.BLOCKED_REASON) or None
        self.depends_on = dependencies(entry)
        self.red_reason = red_reason
        self.held = held  # an outbox original's `deferred <span>: <reason>` (§15)
        self.claim: Claim | None = None
        self.latest_report: Head | None = None  # the newest report on it, as the scan read it
        self.wakeups = 0
        self.wake_failures = 0  # wake-ups the daemon tried and could not deliver
        self.wake_last_at: float | None = None  # the last wake-up since the card arrived
        self.wake_submitted: bool | None = None  # whether that one was seen submitted
        self.wake_via: str | None = None  # how it came: typed, or by a Stop hook (§16)
        self.wake_at: list[float] = []  # the times of those wake-ups, oldest first
        self.box_holds_text = False  # its role's wake-up waits behind a person's text (§17)
        self.closure: list[Card] = []
        self.waiting_on: list[str] = []  # the dependencies it waits for (§13: not ready)
        self.colour = colour.ORANGE
        self.detail = ""
        self.tokens = Totals()  # what was spent on it (docs/protocol.md §19)

    @property
    def path(self) -> str:
        return self.entry.path

    @property
    def sender(self) -> str:
        """The `from` header, else the sender its name spells."""
        if hf.SENDER in self.headers:
            return self.headers[hf.SENDER]
        parts = self.entry.parts
        return parts.sender if parts else ""

    @property
    def shown_sender(self) -> str:
        """The sender as the views name it: `operator (<name>)` for the operator's (§18)."""
        return hf.sender_shown(self.sender, self.headers)

    @property
    def recipients(self) -> list[str]:
        return recipients(self.entry)

    @property
    def finished_by(self) -> str:
        """The member that finished a pool's card (docs/protocol.md §17: its copy is in
        that member's `completed/`), '' for any other card."""
        return self.role if self.pool and self.state == State.COMPLETED else ""

    @property
    def priority(self) -> str:
        if hf.PRIORITY in self.headers:
            return self.headers[hf.PRIORITY]
        parts = self.entry.parts
        return parts.priority if parts else "50"

    def to_json(self) -> dict[str, Any]:
        """The card as `status --json` prints it (docs/protocol.md §8)."""
        return {
            "card": self.card,
            "id": self.id,
            "role": self.role,
            "state": self.state,
            "color": self.colour,
            "detail": self.detail,
            "from": self.sender,
            "to": self.recipients,
            "priority": self.priority,
            "type": self.headers.get(hf.TYPE),
            "task": self.headers.get(hf.TASK),
            "blocked_reason": self.blocked_reason,
            "claim": self.claim.to_json() if self.claim else None,
            "depends_on": self.depends_on,
            "latest_report": report_json(self.latest_report),
            "age_s": None if self.age_s is None else int(self.age_s),
            "path": self.path,
            "wakes": {
                "sent": self.wakeups,
                "failed": self.wake_failures,
                "last_at": iso(self.wake_last_at),
                "submitted": self.wake_submitted,
                "via": self.wake_via,
                "box_holds_text": self.box_holds_text,
            },
            "tokens": self.tokens.to_json(),
        }

    def __repr__(self) -> str:
        return f"Card({self.card}, {self.state}, {self.colour})"


class Board:
    """The cards of a project, in the board's order, and what was found wrong on the way."""

    def __init__(self, snapshot: Snapshot, cards: list[Card], cycles: list[str]) -> None:
        self.snapshot = snapshot
        self.cards = sorted(cards, key=_board_order)
        self.cycles = cycles  # `DEPENDENCY_CYCLE: a -> b -> a`, one per cycle
        self.by_card = {card.card: card for card in self.cards}

    def counts(self) -> dict[str, int]:
        """Cards per colour, in the board's order of colours."""
        counts = dict.fromkeys(colour.ORDER, 0)
        for card in self.cards:
            counts[card.colour] += 1
        return counts

    def green_split(self) -> tuple[int, int]:
        """The green cards completed, and those dismissed (a refusal put aside, §13)."""
        dismissed = sum(1 for card in self.cards if card.state == State.DISMISSED)
        return self.counts()[colour.GREEN] - dismissed, dismissed


def project(
    snapshot: Snapshot,
    now: float,
    window_s: float = limits.LIVENESS_WINDOW,
    stall_s: float = STALL_S,
    include_green: bool = False,
) -> Board:
    """The board of `snapshot` at time `now` (green cards too if `include_green`: the
    snapshot's history must then be read, `Snapshot.load_history`)."""
    if include_green and not snapshot.history_loaded:
        raise ValueError("green cards need the snapshot's history: load_history() first")
    # history first: a copy completed while we read is then kept green, not also open
    greens = list(snapshot.entries(State.GREEN)) if include_green else []
    cards = _open_cards(snapshot, now, stall_s) + [_green(entry, now) for entry in greens]
    names: set[str] = set()
    _pooled(cards, snapshot)
    naming.assign(cards, names)
    for card in cards:  # only these can hold a claim: a done dependency is green anyway
        _dress(card, snapshot, now, window_s)
    by_id = _index(cards)
    _resolve(snapshot, by_id, now)  # adds the green cards of dependencies already done
    named = {id(card) for card in cards}
    done = [c for same in by_id.values() for c in same if id(c) not in named]
    _pooled(done, snapshot)  # a pool copy a member completed is the pool's card too (§17)
    naming.assign(done, names)
    every = [card for same in by_id.values() for card in same]  # history's too
    for card in every:
        card.closure = closure(card, by_id)
    for card in cards:  # a stall is rule 2: known for every card before any is painted
        if card.state == State.NEW:
            _stall(card, snapshot, now)
    for card in every:
        _dismissed(card, snapshot, now)
        card.colour, card.detail = colour.paint(card, card.closure)
        if card.state == State.DISMISSED:  # who put it aside, when and why (§13)
            card.detail = snapshot.dismissal(card.path) or card.detail
        if card.finished_by:  # which member of its pool did it (§17)
            card.detail += f" by {card.finished_by}"
        if card.colour == colour.ORANGE and card.state == State.NEW:
            card.detail = _reclaimed(card, snapshot, now) or card.detail
    spending.dress(every, snapshot, now)  # tokens, and `held: budget spent` (§19)
    cycles = find_cycles({ident: same[0].depends_on for ident, same in by_id.items()})
    return Board(snapshot, cards, cycles)


def find_card(snapshot: Snapshot, card: str) -> Card | None:
    """The open copy the board names `card`, from a snapshot of its role alone
    (`snapshot.take_role`).  The names are the board's: copies are named before any
    original, and a role's own in the same order, so no other role's file and no original
    can change which name a copy of this role has (docs/protocol.md §8)."""
    copies = [e for e in snapshot.open if e.state in (State.NEW, State.IN_PROCESS)]
    cards = [Card(entry, None) for entry in copies]
    naming.assign(cards, set())
    return next((found for found in cards if found.card == card), None)


def green_cards(snapshot: Snapshot, entries: list[Entry], now: float) -> list[Card]:
    """The green cards of `entries` (a page of the archive, `Snapshot.load_page` read),
    in their order: named, their latest report and, for a dismissed one, its note."""
    shown = [_green(entry, now) for entry in entries]
    _pooled(shown, snapshot)
    naming.assign(shown, set())
    for card in shown:
        card.latest_report = snapshot.head(card.role, card.id)
        _dismissed(card, snapshot, now)
        card.colour, card.detail = colour.paint(card, ())
        if card.state == State.DISMISSED:
            card.detail = snapshot.dismissal(card.path) or card.detail
        if card.finished_by:
            card.detail += f" by {card.finished_by}"
    return shown


# --- building cards -------------------------------------------------------------------


def _open_cards(snapshot: Snapshot, now: float, stall_s: float) -> list[Card]:
    """A card per open copy, and per original in an outbox or failed/ that nobody holds."""
    copies = [e for e in snapshot.open if e.state in (State.NEW, State.IN_PROCESS)]
    held = {e.id for e in copies}
    # An outbox original whose copies are out is being delivered: its copies stand for
    # it.  A refused one never had copies (no partial fan-out): a copy with its id is
    # another handoff's, and the refusal is a card of its own, never hidden behind it.
    originals = [
        e
        for e in snapshot.open
        if e.state == State.FAILED or (e.state == State.OUTBOX and e.id not in held)
    ]
    running = bool(snapshot.daemon and snapshot.daemon.running)
    cards = []
    for entry in (*copies, *originals):
        age = _age(entry, now)
        error = snapshot.error(entry.path) if entry.state == State.FAILED else None
        deferred = _held(entry, snapshot, now) if entry.state == State.OUTBOX else None
        reason = colour.own_red(
            entry.state,
            entry.headers.get(hf.BLOCKED_REASON),
            error,
            age or 0.0,
            stall_s,
            running,
            deferred,
            snapshot.unfit.get(entry.path),
        )
        cards.append(Card(entry, age, reason, deferred))
    return cards


def _held(entry: Entry, snapshot: Snapshot, now: float) -> str | None:
    """`deferred <span>: <reason>` for an outbox original the running daemon deferred, as
    its state file says (docs/protocol.md §15), else None."""
    from handoffd.remote import held

    said = snapshot.held
    found = said.deferred.get(entry.path) if said is not None else None
    if found is None:
        return None
    since, reason = found
    return f"deferred {colour.ago(now - since)}: {held.plain(reason, said.link if said else None)}"


def _dismissed(card: Card, snapshot: Snapshot, now: float) -> None:
    """A dismissed original's age runs from its dismissal, as its note says (§15): the file
    itself is as old as the day it was written, and history is listed by name alone."""
    if card.state != State.DISMISSED:
        return
    from handoffd.queue.failed import dismissed_at

    when = dismissed_at(snapshot.dismissal(card.path) or "")
    if when is not None:
        card.age_s = max(0.0, now - when)


def _green(entry: Entry, now: float) -> Card:
    return Card(entry, _age(entry, now))


def _index(cards: Iterable[Card]) -> dict[str, list[Card]]:
    by_id: dict[str, list[Card]] = {}
    for card in cards:
        by_id.setdefault(card.id, []).append(card)
    return by_id


def _resolve(snapshot: Snapshot, by_id: dict[str, list[Card]], now: float) -> None:
    """Add the green cards of dependencies no longer open, and theirs in turn: the copies
    the scan found done (`Snapshot.done`; it looks in history only if some dependency is
    not open)."""
    named = {d for cards in list(by_id.values()) for d in cards[0].depends_on}
    missing = [d for d in named if d not in by_id]
    for ident in sorted(d for d in named if d in by_id and _partly_done(by_id[d])):
        # every card of the handoff is in the closure (§8): its copies already done too
        held = {card.role for card in by_id[ident]}
        done = [e for e in snapshot.done(ident) if e.role not in held]
        by_id[ident] += [_green(entry, now) for entry in done]
    while missing:
        ident = missing.pop()
        if ident in by_id:
            continue
        found = snapshot.done(ident)
        if not found:
            continue  # unknown (a hand-edited id): nothing to colour by
        by_id[ident] = [_green(entry, now) for entry in found]
        missing += [d for d in by_id[ident][0].depends_on if d not in by_id]


def _partly_done(cards: list[Card]) -> bool:
    """Whether some recipients of a delivered handoff hold no open copy: theirs may be done."""
    if any(card.state in (State.OUTBOX, State.FAILED) for card in cards):
        return False  # never delivered: no copy can be completed
    return bool(set(cards[0].recipients) - {card.role for card in cards})


def _pooled(cards: Iterable[Card], snapshot: Snapshot) -> None:
    """Mark each copy a member claimed from its pool: its card is `<id>@<pool>` wherever
    it is (docs/protocol.md §17), its claim still the member's."""
    for card in cards:
        row = snapshot.roles.get(card.role)
        if row is not None and row.pool and not row.is_pool:
            pool = snapshot.roles.get(row.pool)
            if pool is not None and pool.is_pool and card.headers.get(hf.RECIPIENT) == pool.name:
                card.pool = pool.name


def _reclaimed(card: Card, snapshot: Snapshot, now: float) -> str | None:
    """`reclaimed from coder-2 3m ago (session gone)` for a copy given back to its pool,
    the why as the daemon's log says it (docs/protocol.md §17)."""
    row = snapshot.roles.get(card.role)
    who, at = card.headers.get(hf.RECLAIMED_FROM), epoch(card.headers.get(hf.RECLAIMED_AT))
    if row is None or not row.is_pool or not who or at is None:
        return None
    why = snapshot.reclaimed.get(card.card, "see the daemon's log")
    return f"reclaimed from {who} {colour.ago(now - at)} ago ({why})"


def _dress(card: Card, snapshot: Snapshot, now: float, window_s: float) -> None:
    """The facts around a card: its claim, its latest report, its wake-ups."""
    if card.state == State.IN_PROCESS:
        card.claim = _claim(card, snapshot, now, window_s)
    card.latest_report = snapshot.head(card.role, card.id)
    if card.state == State.NEW:
        _wakes(card, snapshot, now - (card.age_s or 0.0))


def _wakes(card: Card, snapshot: Snapshot, since: float) -> None:
    """A waiting card's wake-ups since it arrived (§14); a pool's are its members' (§17,
    merged by the scan)."""
    times = snapshot.wakes.get(card.role, [])
    submitted = snapshot.wake_submitted.get(card.role, [])
    submitted = submitted + [None] * (len(times) - len(submitted))  # a log without the field
    via = snapshot.wake_via.get(card.role, [])
    via = via + ["typed"] * (len(times) - len(via))
    sent = [(at, ok, how) for at, ok, how in zip(times, submitted, via, strict=False)
            if at >= since]  # fmt: skip
    card.wakeups = len(sent)
    card.wake_at = [at for at, _, _ in sent]
    card.wake_failures = sum(1 for t in snapshot.wake_failures.get(card.role, ()) if t >= since)
    if sent:
        card.wake_last_at, card.wake_submitted, card.wake_via = sent[-1]
    card.box_holds_text = snapshot.panes.get(card.role, {}).get("held") is True


def _stall(card: Card, snapshot: Snapshot, now: float) -> None:
    """What a waiting card waits on, and whether its wake-ups made it red (§14): only
    those since it could be taken count, so its closure must be known."""
    waiting = waiting_on(card.closure, card.depends_on)
    card.waiting_on = [other.card for other in waiting]
    if card.red_reason is not None:
        return
    done = [other.age_s for other in card.closure if other.id in card.depends_on]
    ready_at = max((now - age for age in done if age is not None), default=None)
    row = snapshot.roles.get(card.role)
    pane = snapshot.panes.get(card.role, {}).get("pane")
    card.red_reason = colour.unanswered(
        card.role, row.session if row else "", pane if isinstance(pane, str) else None,
        card.wake_at, snapshot.took_at.get(card.role), stall_wakes(snapshot),
        card.waiting_on, ready_at,
    )  # fmt: skip


def waiting_on(closure: Iterable[Card], wanted: list[str]) -> list[Card]:
    """The cards of the handoffs `wanted` names (a file's `depends_on`) that are not green,
    among `closure`: while there is one, the file is not ready (docs/protocol.md §13: every
    card of every handoff it depends on must be green).  The one place that says so: the
    board's detail, the stall rule and a take (`ops/readiness`) all ask here."""
    return [other for other in closure if other.id in wanted and other.state not in colour.DONE]


def stall_wakes(snapshot: Snapshot) -> int:
    """The daemon's --stall-wakes, as its last `started` line in the log says (else 3)."""
    value = snapshot.daemon_options.get("stall_wakes")
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else limits.STALL_WAKES  # type: ignore[return-value]


def _claim(card: Card, snapshot: Snapshot, now: float, window_s: float) -> Claim:
    role, beat = card.role, snapshot.heartbeats.get(card.role)
    # a pool copy's claim lives from its taking while its member has no heartbeat (§17)
    taken = epoch(card.headers.get(hf.DEQUEUED_AT)) if card.pool else None
    if beat is None:
        row = snapshot.roles.get(role)
        claim = Claim(role, row.agent if row else None, None, None, now, window_s, taken)
    else:
        claim = Claim(role, beat.agent or None, beat.conversation or None, epoch(beat.at), now,
                      window_s, taken)  # fmt: skip
    claim.gone = holder_gone(snapshot.panes.get(role, {}), card.pool, now)
    return claim


def holder_gone(seen: dict[str, object], pool: str, now: float) -> str:
    """`; holder gone 42s; back to cleaner in 18s` while the holder's session is gone (its
    tmux server answering, docs/protocol.md §14), '' otherwise: a pool copy goes back to
    its pool once its member has been gone `pool.GONE_FOR` (§17); other work stays put."""
    since = seen.get("since")
    if seen.get("pane") != "gone":
        return ""
    if not isinstance(since, int | float) or isinstance(since, bool):
        return "; holder gone" + (f"; back to {pool} soon" if pool else "")
    said = f"; holder gone {colour.ago(now - since)}"
    if not pool:
        return said
    left = pools.GONE_FOR - (now - since)
    return said + (f"; back to {pool} in {colour.ago(left)}" if left >= 1 else
                   f"; back to {pool} at the daemon's next pass")  # fmt: skip


# --- dependencies ---------------------------------------------------------------------


def closure(card: Card, by_id: dict[str, list[Card]]) -> list[Card]:
    """Every card of every handoff `card` depends on, transitively, nearest first; a cycle
    is walked once, never looped on, and the card is never in its own closure."""
    seen = {card.id}
    queue = list(card.depends_on)
    found: list[Card] = []
    while queue:
        ident = queue.pop(0)
        if ident in seen:
            continue
        seen.add(ident)
        for other in by_id.get(ident, ()):
            if other is not card:
                found.append(other)
        if by_id.get(ident):
            queue += by_id[ident][0].depends_on
    return found


def find_cycles(graph: dict[str, list[str]]) -> list[str]:
    """Each dependency cycle among the ids of `graph`, once: `DEPENDENCY_CYCLE: a -> b -> a`.
    A depth-first walk without recursion, so a long hand-made chain cannot overflow it."""
    done: set[str] = set()
    cycles: list[str] = []
    for start in sorted(graph):
        if start in done:
            continue
        path, stack = [start], [iter(graph[start])]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                done.add(path.pop())
                stack.pop()
            elif step in path:
                loop = [*path[path.index(step) :], step]
                cycles.append("DEPENDENCY_CYCLE: " + " -> ".join(loop))
            elif step in graph and step not in done:
                path.append(step)
                stack.append(iter(graph[step]))
    return cycles


# --- small facts ----------------------------------------------------------------------


def _age(entry: Entry, now: float) -> float | None:
    """How long the card has been where it is: since enqueued (or released), taken,
    completed; an original since its file was written."""
    headers = entry.headers
    if entry.state == State.NEW:
        keys = (hf.ENQUEUED_AT, hf.RELEASED_AT, hf.REOPENED_AT)
        since = max(filter(None, (epoch(headers.get(k)) for k in keys)), default=None)
    elif entry.state == State.IN_PROCESS:
        since = epoch(headers.get(hf.DEQUEUED_AT))
    elif entry.state == State.COMPLETED:
        since = epoch(headers.get(hf.COMPLETED_AT))
    else:
        since = None
    since = since if since is not None else entry.mtime
    return None if since is None else max(0.0, now - since)


def epoch(value: object) -> float | None:
    """Seconds since the epoch from a §2 timestamp or a number; None if none."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    return hf.epoch(str(value))


def iso(value: float | None) -> str | None:
    """A §2 timestamp for `value` seconds since the epoch."""
    return None if value is None else hf.iso_now(value)


def _board_order(card: Card) -> tuple[int, str, str]:
    return colour.ORDER.index(card.colour), card.entry.name, card.role


__all__ = ["Board", "Card", "Claim", "closure", "find_cycles", "project"]
