"""The wake-up request `H/wake`: one line a command (`answer`, `up`) asks the running daemon
to type into the role's pane (docs/protocol.md §14).

A command leaves the line (`ask_wake`); the daemon takes it once (`take_wake`) on the
file event of the role's handoff directory, or at its next rescan, and types it once the
pane is idle.  Requests before it is typed coalesce: the newest line is the one typed.
The file is untrusted: what stands there that is no one-line request of ours (a link, a
FIFO, a folder, an oversized file, a control character in it) is never followed or
typed, and is cleared where it can be.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from handoffd.core import safeio
from handoffd.queue import heartbeat

WAKE = "wake"  # H/wake
WAKE_LIMIT = 512  # one short line; a longer file is no request


class Request(NamedTuple):
    """A line a command asked the daemon to type, and when it was asked (the file's mtime)."""

    text: str
    at: float


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
    heartbeat.stamp(handoffs, WAKE, data)


def request_problem(data: bytes) -> str:
    """Why `data` (a whole `H/wake`) is no one-line request of ours, or ''."""
    from handoffd.core.terminal import has_control  # the daemon and `answer` only pay for it

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


def take_wake(handoffs: str) -> Request | None:
    """The request a command left (`ask_wake`), taken so that it is typed once; None
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
        at = os.lstat(taken).st_mtime
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
    return Request(data.decode("utf-8").removesuffix("\n"), at)


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
