"""The daemon's side of pools (docs/protocol.md §17): giving back what a member that
stopped answering held, and choosing which member a pool's mail wakes.

A member's claim expires when its heartbeat is older than `--reclaim-after` (default the
liveness window) — with no heartbeat, or one from the future, that long after the copy's
`dequeued_at` — or when its session has been gone for a minute while the pool's tmux
server answers (a server that does not answer says nothing about the session).  It is
decided under the member's lock, from the heartbeat read there; each copy goes back by
`Inbox.give_back`, logged `reclaimed`; the member is left a note (`H/reclaimed`) its
next finish reads, `RECLAIMED: …`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from handoffd.core import durable, limits, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.core.outcome import Refusal
from handoffd.queue import heartbeat
from handoffd.queue import pool as pools
from handoffd.queue.inbox import Inbox
from handoffd.queue.lock import Busy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from structlog.typing import FilteringBoundLogger

    from handoffd.core.config import Role

FAILED = "reclaim_failed"  # the log's event when what a member holds cannot be given back


class Keeper:
    """What the daemon remembers of its pools between passes: since when each member's
    session has been seen gone, and when each member was last woken for its pool."""

    def __init__(self, root: str, log: FilteringBoundLogger, after: float = limits.RECLAIM_AFTER):
        from handoffd.core.log import Repeats  # the daemon's alone: a helper reads notes here

        self.root = root
        self.log = log
        self.after = after
        self.gone_since: dict[str, float] = {}
        self.woken_at: dict[str, float] = {}
        self.asked: dict[str, object] = {}  # member -> its in_process/ stamp when woken
        self.repeats = Repeats()  # the `reclaim_failed` lines said, by member

    def seen(self, member: str, gone: bool, answers: bool, now: float) -> None:
        """One look at a member's pane: gone (its server answering) starts its clock."""
        if gone and answers:
            self.gone_since.setdefault(member, now)
        else:
            self.gone_since.pop(member, None)

    def tick(self, roles: Mapping[str, Role], now: float) -> list[str]:
        """Give back what every member whose claim expired holds; the cards given back."""
        cards = []
        for row in pools.pools(roles):
            for member in pools.members(row.name, roles):
                # a first look, without its lock: a member with a fresh heartbeat (most,
                # at most passes) or nothing in process is never locked; one with no
                # heartbeat is decided copy by copy, under its lock
                if self.decide(member, now)(None) is not None and holds(member):
                    cards += self.give_back(member, row, None, now)
        return cards

    def decide(self, member: Role, now: float) -> Callable[[float | None], str | None]:
        """Why a copy `member` took at a time goes back now (`pool.reclaim_why`), or
        None, from its heartbeat as it is on disk now, read once."""
        beat = heartbeat.read(member.handoffs)
        at, gone = (beat.at if beat else None), self.gone_since.get(member.name)
        return lambda taken: pools.reclaim_why(at, taken, gone, now, self.after)

    def give_back(self, member: Role, row: Role, why: str | None, now: float) -> list[str]:
        """Put `member`'s pool copies whose claim has expired back into `row`'s `new/`
        (given `why`, all of them, for that reason); never raises (a member busy or
        unreadable now is looked at again next pass).

        The decision is made once the member's lock is held, from its heartbeat read
        there: a member that claimed a copy while the daemon waited for the lock renewed
        its heartbeat first (docs/protocol.md §17), and keeps what it claimed."""
        at = hf.iso_now(now)
        given: list[tuple[str, str]] = []  # (card, why)

        def note(name: str, why: str) -> None:
            card = f"{hf.name_id(name)}@{row.name}"
            add_note(member.handoffs, pools.note_line(card, row.name, at, why))
            given.append((card, why))

        try:
            with Inbox(member.handoffs, member.name, (row.name, row.handoffs)) as inbox:
                expired = self.decide(member, now)

                def because(handoff: hf.Handoff) -> str | None:
                    return why or expired(hf.epoch(handoff.get(hf.DEQUEUED_AT)))

                inbox.give_back(row.path(Box.NEW), at, because, note)
        except (Busy, Refusal, OSError) as error:
            # the same failure again (a pool's inbox left a link) is said once, not per pass
            if self.repeats.first(FAILED, member.name, str(error)):
                self.log.warning(FAILED, member=member.name, error=str(error))
        else:
            self.repeats.cleared(FAILED, member.name)
        for card, reason in given:
            self.log.info("reclaimed", card=card, member=member.name, why=reason)
        return [card for card, _ in given]

    def wake_one(self, pool: str, roles: Mapping[str, Role], idle: Mapping[str, float],
                 now: float) -> Role | None:  # fmt: skip
        """The member a pool's mail wakes now (`pool.wake_order`'s first), noted as woken
        so that the next wake-up for the pool goes to the next one; None without members."""
        from handoffd.wakeups.waker import stamp  # the daemon's alone: not on a helper's path

        team = {member.name: member for member in pools.members(pool, roles)}
        # a member woken that has taken nothing since is asked already, not idle: its pane
        # may look quiet again only because it showed the wake-up line
        asked = {
            name
            for name, member in team.items()
            if self.asked.get(name, self) == stamp(member.path(Box.IN_PROCESS))
        }
        ready = {name: at for name, at in idle.items() if name not in asked}
        order = pools.wake_order(team, ready, self.woken_at)
        if not order:
            return None
        chosen = team[order[0]]
        self.woken_at[chosen.name] = now
        self.asked[chosen.name] = stamp(chosen.path(Box.IN_PROCESS))
        return chosen


def holds(member: Role) -> bool:
    """Whether `member`'s `in_process/` may hold anything, seen without its lock: a member
    with no heartbeat (one that never ran) and nothing in process is not locked at every
    pass.  One that cannot be read is looked at under the lock, which says why."""
    try:
        with os.scandir(member.path(Box.IN_PROCESS)) as entries:
            return any(True for _ in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def add_note(handoffs: str, line: str) -> None:
    """Append `line` to a member's note (`H/reclaimed`), durably, before the copy moves."""
    path = os.path.join(handoffs, pools.NOTE)
    try:
        before = safeio.read_regular(path, pools.NOTE_LIMIT)
    except (OSError, safeio.Refused):
        before = b""
    durable.replace(path, before + line.encode("utf-8", "replace"))


def forget(handoffs: str, pool: str, finished: list[str]) -> None:
    """Drop the note's lines for copies the member has just finished itself: the daemon
    wrote them, then was cut off before it took the copy back, so they tell of what never
    happened.  Under the member's lock, as `add_note` is, so no line of the daemon's is
    lost; best-effort (a line left would only be told once, later)."""
    path = os.path.join(handoffs, pools.NOTE)
    done = {f"{hf.name_id(os.path.basename(name))}@{pool}" for name in finished}
    try:
        lines = safeio.read_regular(path, pools.NOTE_LIMIT).decode("utf-8", "replace")
        kept = [line for line in lines.splitlines(keepends=True)
                if line.split("\t", 1)[0] not in done]  # fmt: skip
        if len(kept) < len(lines.splitlines()):
            durable.replace(path, "".join(kept).encode("utf-8"))
    except (OSError, safeio.Refused):
        pass


def told(path: str) -> list[str]:
    """The `RECLAIMED:` lines of the note at `path`, taken once: moved aside first (a line
    the daemon adds meanwhile lands in a fresh note), then read the careful way."""
    taken = path + ".told"
    try:
        os.rename(path, taken)
        data = safeio.read_regular(taken, pools.NOTE_LIMIT)
    except (OSError, safeio.Refused):
        return []
    finally:
        durable.unlink_quietly(taken)
    return pools.reclaimed_lines(data.decode("utf-8", "replace"))
