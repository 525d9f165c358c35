"""Pools: several agents behind one role (docs/protocol.md §17), the pure decisions.

A pool is a roles.tsv row whose column 10 is `pool:<n>`; its members are rows whose column
10 names it.  Mail to the pool waits in the pool's own `new/` until a member claims it by
one rename into its own `in_process/` (`inbox`), and the daemon puts back what a member
that stopped answering held (`reclaim`).  What is decided here reads no file and no clock:
which rows belong together, which copy is a pool's, which member to wake, whether a claim
has expired, and the note a reclaimed member is told.
"""

from __future__ import annotations

from handoffd.queue import heartbeat

TYPE_CHECKING = False  # helpers import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from handoffd.core.config import Role

GONE_FOR = 60.0  # seconds a member's session is gone, its tmux server answering, to reclaim
NOTE = "reclaimed"  # H/reclaimed: the member's lines `RECLAIMED:` is made from
NOTE_LIMIT = 64 * 1024  # bytes: never read more of a member's note
# Why a claim went back: the `why` of the log event and of the RECLAIMED line.
EXPIRED, SESSION_GONE = "heartbeat expired", "session gone"
NO_HEARTBEAT, AHEAD = "no heartbeat", "heartbeat in the future"  # expired from `dequeued_at`


def pool_of(role: Role, roles: Mapping[str, Role]) -> Role | None:
    """The pool `role` is a member of (its column 10 names a pool row), else None."""
    if not role.pool or role.is_pool:
        return None
    found = roles.get(role.pool)
    return found if found is not None and found.is_pool else None


def members(pool: str, roles: Mapping[str, Role]) -> list[Role]:
    """The members of the pool `pool`, in roles.tsv's order (`<pool>-1` first)."""
    return [role for role in roles.values() if role.pool == pool and not role.is_pool]


def pools(roles: Mapping[str, Role]) -> list[Role]:
    """The pool rows of roles.tsv, in its order."""
    return [role for role in roles.values() if role.is_pool]


def is_pool_copy(headers: Mapping[str, str], member: Role) -> bool:
    """Whether a copy in `member`'s inbox is its pool's (claimed from the pool: its
    recipient is the pool), not direct mail to the member (never reclaimed)."""
    return bool(member.pool) and headers.get("recipient") == member.pool


def alive_at(heartbeat_at: float | None, taken_at: float | None, now: float) -> float | None:
    """When a member's claim on a copy last showed life: its heartbeat as it counts
    (`heartbeat.counted`); with none (or one from the future), when it took the copy (its
    `dequeued_at`, counted alike); None when neither is known."""
    beat = heartbeat.counted(heartbeat_at, now)
    return beat if beat is not None else heartbeat.counted(taken_at, now)


def reclaim_why(
    heartbeat_at: float | None,
    taken_at: float | None,
    gone_since: float | None,
    now: float,
    after: float,
) -> str | None:
    """Why a member's copy taken at `taken_at` goes back to the pool now, or None: its
    session has been gone `GONE_FOR` seconds (`gone_since` is only given while the pool's
    tmux server answers), or its claim has shown no life for `after` seconds
    (`alive_at`: a copy whose member has no heartbeat expires `after` its taking)."""
    if gone_since is not None and now - gone_since >= GONE_FOR:
        return SESSION_GONE
    alive = alive_at(heartbeat_at, taken_at, now)
    if alive is not None and now - alive <= after:
        return None
    if heartbeat_at is None:
        return NO_HEARTBEAT
    return EXPIRED if heartbeat.counted(heartbeat_at, now) is not None else AHEAD


def wake_order(
    names: Iterable[str], idle_since: Mapping[str, float], woken_at: Mapping[str, float]
) -> list[str]:
    """The members in the order a pool's mail wakes them: the idle ones first (idle since
    before their last wake-up counts as not: they have been asked), the one idle longest
    first; then the others, the one woken least recently first (never woken:
    first of all), roles.tsv's order breaking ties.  The member woken last goes to the end:
    a re-notify (its wake-up unanswered) wakes the next one, never the same one again."""
    listed = list(names)
    never = float("-inf")
    idle = [n for n in listed if n in idle_since and idle_since[n] > woken_at.get(n, never)]
    idle.sort(key=lambda n: idle_since[n])
    busy = [n for n in listed if n not in idle]
    busy.sort(key=lambda n: woken_at.get(n, never))
    order = idle + busy
    last = max(woken_at, key=lambda n: woken_at[n], default=None)
    if last in order and len(order) > 1:
        order.remove(last)
        order.append(last)
    return order


def note_line(card: str, pool: str, at: str, why: str) -> str:
    """One line of a member's note: what went back, where, when and why (TAB-separated)."""
    return "\t".join(_flat(part) for part in (card, pool, at, why)) + "\n"


def reclaimed_lines(note: str) -> list[str]:
    """`RECLAIMED: <card> went back to <pool> at <time> (<why>)`, one per whole note line;
    a torn or planted line is skipped (the note is untrusted, as all of `H` is)."""
    lines = []
    for line in note.split("\n")[:-1]:
        parts = line.split("\t")
        if len(parts) == 4 and all(part and part.isprintable() for part in parts):
            card, pool, at, why = parts
            lines.append(f"RECLAIMED: {card} went back to {pool} at {at} ({why})")
    return lines


def _flat(text: str) -> str:
    """A field of a note line: no TAB, no line end, no control character."""
    return "".join(char if char.isprintable() and char != "\t" else " " for char in text)
