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

from handoffd import durable, safeio

NAME = "heartbeat"
IDLE = "idle"  # H/idle: its mtime is the role's last "I am idle" (docs/protocol.md §14)
WAKE = "wake"  # H/wake: a line a command asks the running daemon to type (docs/protocol.md §14)
WAKE_LIMIT = 512  # one short line; a longer file is no request
LIMIT = 4096  # two short lines; never read more of it


class Heartbeat:
    """Who last showed life in a role (`agent`, `conversation`) and when (`at`, epoch seconds)."""

    __slots__ = ("agent", "at", "conversation")

    def __init__(self, agent: str, conversation: str, at: float) -> None:
        self.agent = agent
        self.conversation = conversation
        self.at = at

    def __repr__(self) -> str:
        return f"Heartbeat({self.agent!r}, {self.conversation!r}, at={self.at})"


def content(agent: str, conversation: str) -> bytes:
    """The file's bytes for this agent and conversation."""
    return f"agent: {agent}\nconversation: {conversation}".rstrip(" ").encode() + b"\n"


def renew(handoffs: str, agent: str, conversation: str) -> None:
    """Mark the role alive now: touch the file, or rewrite it when its content changes."""
    _stamp(handoffs, NAME, content(agent, conversation))


def mark_idle(handoffs: str) -> str:
    """Mark the role idle now (`H/idle`, docs/protocol.md §14): the daemon may type a
    wake-up into its pane at once.  Kept the heartbeat's way; returns the file's path."""
    _stamp(handoffs, IDLE, b"idle\n")
    return os.path.join(handoffs, IDLE)


class NotARequest(ValueError):
    """What stands at `H/wake` is no request a command could have left (why: the message)."""


def ask_wake(handoffs: str, text: str) -> None:
    """Ask the running daemon to wake the role with `text` (one line), the §14 way: typed
    once its pane is idle, checked for submission.  Requests before it is typed coalesce:
    the newest line is the one typed.  A line the daemon would not type (`request_problem`)
    is refused here (`NotARequest`), so the command can say so; what a planted link, FIFO
    or empty folder at `H/wake` would block is cleared first, the way the daemon does."""
    data = text.encode("utf-8", "surrogatepass") + b"\n"
    problem = request_problem(data)
    if problem:
        raise NotARequest(f"{problem}: not asked for")
    path = os.path.join(handoffs, WAKE)
    if _standing(path):
        _discard(path)
        if _standing(path):  # a folder with something in it: never emptied for its owner
            raise NotARequest(f"{path} is a folder, not a wake-up request: remove it")
    _stamp(handoffs, WAKE, data)


def request_problem(data: bytes) -> str:
    """Why `data` (a whole `H/wake`) is no one-line request of ours, or ''."""
    from handoffd.terminal import has_control  # the daemon and `answer` only pay for it

    if len(data) > WAKE_LIMIT:
        return f"over {WAKE_LIMIT} bytes"
    try:
        text = data.decode("utf-8").removesuffix("\n")
    except UnicodeDecodeError:
        return "not UTF-8"
    if not text or has_control(text):
        return "empty, or a control character in it"
    return ""


def _standing(path: str) -> bool:
    """Whether something that is not a regular file stands at `path` (never followed)."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def take_wake(handoffs: str) -> str | None:
    """The line a command asked for (`ask_wake`), taken so that it is typed once; None
    when none waits.  What is there but is no one-line request of ours (a link, a FIFO, a
    folder, an oversized file, a control character in it) is removed where it can be,
    never followed or typed, and raised as `NotARequest` saying which: the file is
    untrusted, and the caller logs it."""
    path = os.path.join(handoffs, WAKE)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if not stat.S_ISREG(mode):
        _discard(path)  # else it would stand in the way of every request after it
        if _standing(path):  # a folder with something in it: `ask_wake` names it, once
            return None  # (said at every pass, it would fill the log)
        raise NotARequest(f"{safeio.kind(mode)}, not a file")
    taken = os.path.join(handoffs, f".{WAKE}.taken")
    try:
        os.rename(path, taken)  # a request written after this waits for the next pass
    except OSError:
        return None  # taken away meanwhile: nothing there
    try:
        data = safeio.read_regular(taken, WAKE_LIMIT + 1)
    except safeio.TooLarge:
        raise NotARequest(f"over {WAKE_LIMIT} bytes") from None
    except OSError as error:  # swapped for a FIFO or a link since the look: never read
        raise NotARequest(str(error)) from None
    finally:
        _discard(taken)
    problem = request_problem(data)
    if problem:
        raise NotARequest(problem)
    return data.decode("utf-8").removesuffix("\n")


def _discard(path: str) -> None:
    """Remove what stands at `path` (a file, link or FIFO; an empty folder), never
    following it; a folder with something in it stays, and the next request says so."""
    try:
        os.unlink(path)
    except IsADirectoryError:
        try:
            os.rmdir(path)
        except OSError:
            pass
    except OSError:
        pass  # gone already: nothing is typed twice either way


def idle_at(handoffs: str) -> float | None:
    """When the role last marked itself idle (the mtime of `H/idle`), or None: a link or
    anything but a regular file there is no mark."""
    try:
        info = os.lstat(os.path.join(handoffs, IDLE))
    except OSError:
        return None
    return info.st_mtime if stat.S_ISREG(info.st_mode) else None


def _stamp(handoffs: str, name: str, data: bytes) -> None:
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
