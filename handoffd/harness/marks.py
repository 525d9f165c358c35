"""What an agent's hooks leave in its role's handoff directory `H` (docs/protocol.md §16):
`H/idle`, its last end of turn (kept by `heartbeat`), and `H/announced`, the first waiting
file its Stop hook last told the agent of.

The daemon reads both on every wait for a known harness; they are hints written by the
agent's own process, so each is one `lstat` and only a regular file counts (a link, a
FIFO or a folder planted there is no mark).
"""

from __future__ import annotations

import os
import stat

ANNOUNCED = "announced"  # H/announced: `<file name>\n<in_process/ stamp>\n`
ANNOUNCED_LIMIT = 4096  # bytes of it ever read


class Marks:
    """What a role's hooks last left (epoch seconds, None when never): its last end of turn
    (H/idle) and its last announcement (H/announced)."""

    __slots__ = ("announced", "idle")

    def __init__(self, idle: float | None, announced: float | None) -> None:
        self.idle = idle
        self.announced = announced

    def hooked(self, created: float | None) -> bool:
        """Whether the role's Stop hook has run since its pane started (`created`): mail
        for it is then told at the end of a busy turn, never forced in."""
        latest = max(self.idle or 0.0, self.announced or 0.0)
        return created is not None and latest > created


def announce(handoffs: str, record: str) -> None:
    """Write `H/announced` anew: a temp created exclusively (never an existing file or a
    link), then renamed over it, so nothing planted there is ever written through.  Not
    fsynced: it is a hint, and a lost one only means the agent is told once more."""
    from handoffd.core import durable, safeio

    linked = safeio.linked_handoffs(handoffs)
    if linked:  # `H` behind a link: what is written lands outside
        raise safeio.Refused(linked, "a symbolic link, not a folder; handoffd never follows it")
    durable.sweep_stale(handoffs, f".{ANNOUNCED}.")  # what a hook killed mid-write left
    temp = os.path.join(handoffs, f".{ANNOUNCED}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o644)
    try:
        try:
            durable.write_all(fd, record.encode())
        finally:
            os.close(fd)
        os.rename(temp, os.path.join(handoffs, ANNOUNCED))
    except BaseException:
        durable.unlink_quietly(temp)
        raise


def announced_at(handoffs: str) -> float | None:
    """When the Stop hook last told of mail (the mtime of `H/announced`, a regular file
    only)."""
    try:
        info = os.lstat(os.path.join(handoffs, ANNOUNCED))
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None
