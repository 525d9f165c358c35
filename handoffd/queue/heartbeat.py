"""A role's heartbeat: `H/heartbeat`, whose mtime says when the role last showed life.

The file holds two lines, `agent: <name>` and `conversation: <id or empty>`
(docs/protocol.md §8).  Every helper renews it, so it costs one `os.utime` when
nothing changed, and imports `os`, the careful reader and `durable` only.  It is a
liveness hint, not a record: it is replaced atomically (a reader never sees half of it)
but never fsynced.  A link, FIFO or folder in its place is never followed, read or
touched: a renewal replaces it with a file of our own.  A rewrite killed before its
rename leaves its temp behind, which the next rewrite sweeps once its writer is gone
(`durable.sweep_stale`).
"""

from __future__ import annotations

import os
import stat

from handoffd.core import durable, safeio

NAME = "heartbeat"
IDLE = "idle"  # H/idle: its mtime is the role's last "I am idle" (docs/protocol.md §14)
LIMIT = 4096  # two short lines; never read more of it
AHEAD = 60.0  # seconds: a time of life further ahead of the clock than this counts as none


class Heartbeat:
    """Who last showed life in a role (`agent`, `conversation`) and when (`at`, epoch seconds)."""

    __slots__ = ("agent", "at", "conversation")

    def __init__(self, agent: str, conversation: str, at: float) -> None:
        self.agent = agent
        self.conversation = conversation
        self.at = at

    def __repr__(self) -> str:
        return f"Heartbeat({self.agent!r}, {self.conversation!r}, at={self.at})"


def counted(at: float | None, now: float) -> float | None:
    """A heartbeat's time (or a claim's) as it counts at `now`: None when there is none,
    or when it is more than `AHEAD` seconds in the future (docs/protocol.md §17) — a clock
    stepped back, or a time planted (`touch -d 2030…`), would otherwise look fresh for
    ever.  The one place that says so: the daemon's reclaim and the board's claim ask here."""
    return None if at is None or at - now > AHEAD else at


def content(agent: str, conversation: str) -> bytes:
    """The file's bytes for this agent and conversation."""
    return f"agent: {agent}\nconversation: {conversation}".rstrip(" ").encode() + b"\n"


def renew(handoffs: str, agent: str, conversation: str) -> None:
    """Mark the role alive now: touch the file, or rewrite it when its content changes."""
    stamp(handoffs, NAME, content(agent, conversation))


def mark_idle(handoffs: str) -> str:
    """Mark the role idle now (`H/idle`, docs/protocol.md §14): the daemon may type a
    wake-up into its pane at once.  Kept the heartbeat's way; returns the file's path."""
    stamp(handoffs, IDLE, b"idle\n")
    return os.path.join(handoffs, IDLE)


def idle_at(handoffs: str) -> float | None:
    """When the role last marked itself idle (the mtime of `H/idle`), or None: a link or
    anything but a regular file there is no mark."""
    try:
        info = os.lstat(os.path.join(handoffs, IDLE))
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


def stamp(handoffs: str, name: str, data: bytes) -> None:
    """Touch `H/<name>`, or rewrite it when it does not hold `data`; never through an `H`
    (or `.swarmforge/`) behind a link, whose files lie outside (`safeio.Refused`)."""
    linked = safeio.linked_handoffs(handoffs)
    if linked:
        raise safeio.Refused(linked, "a symbolic link, not a folder; handoffd never follows it")
    path = os.path.join(handoffs, name)
    if _touched(path, data):
        return
    # write beside it and rename: a reader sees the old content or the new, never a mix;
    # first, what a rewrite killed between its write and its rename left behind.  The temp
    # is created exclusively (a file or a hard link planted under its name is never
    # written into) and not fsynced: a liveness hint, not a record.
    durable.sweep_stale(handoffs, f".{name}.")
    try:
        durable.replace(path, data, sync=False)
    except FileNotFoundError:  # a role that has never had mail has no handoff directory yet
        os.makedirs(handoffs, exist_ok=True)
        durable.replace(path, data, sync=False)


def _touched(path: str, data: bytes) -> bool:
    """Touch the heartbeat if it is a regular file that holds `data`.  The time is set on
    the descriptor we read, never by name: a link swapped in meanwhile is never followed."""
    try:
        fd = safeio.open_regular(path)
    except OSError:  # missing, or not ours to touch (a link, a FIFO): rewrite it
        return False
    try:
        if os.fstat(fd).st_nlink > 1:  # a hard link: its other name's time is not ours to set
            return False
        if safeio.read_fd(fd, LIMIT) != data:
            return False
        os.utime(fd)
        return True
    finally:
        os.close(fd)


def read(handoffs: str) -> Heartbeat | None:
    """The role's heartbeat, or None when it has never beaten (or is not a regular file)."""
    path = os.path.join(handoffs, NAME)
    try:
        fd = safeio.open_regular(path)
    except OSError:
        return None
    try:
        text = safeio.read_fd(fd, LIMIT).decode("utf-8", "replace")
        at = os.fstat(fd).st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = {}
    for line in text.split("\n"):
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return Heartbeat(fields.get("agent", ""), fields.get("conversation", ""), at)
