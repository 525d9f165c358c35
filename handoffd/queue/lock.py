"""A role's inbox lock and the refusals before a step touches anything: the lock taken
within `LOCK_WAIT` or `INBOX_BUSY`, a folder behind a symbolic link refused as
`LINKED_FOLDER` (docs/protocol.md §4, Part II)."""

from __future__ import annotations

import fcntl
import os
import time

from handoffd.core import safeio
from handoffd.core.outcome import Exit, Refusal

LOCK_WAIT = 5.0  # seconds a command waits for a role's inbox lock, then `INBOX_BUSY`


class LinkedFolder(Refusal):
    """A folder the step needs lies behind a symbolic link: refused before anything moved."""


class Busy(Refusal):
    """The role's inbox lock stayed held by another process for all of `LOCK_WAIT`."""


def hold(fd: int, seconds: float = LOCK_WAIT) -> bool:
    """Take the exclusive `flock` on `fd` if it comes free within `seconds`; whether it was
    taken.  Whoever holds it is never waited on for longer: a process that hangs holding a
    role's lock (or one that takes it to hang everyone else) must not hang every command,
    nor every web page behind it.  Polled, at first often (a helper's turn takes
    milliseconds), then every 50 ms."""
    deadline, pause = time.monotonic() + seconds, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)


def linked_message(handoffs: str, where: str, outcome: str) -> str:
    """`LINKED_FOLDER: …`, the one line every command says it with."""
    return (
        f"LINKED_FOLDER: {os.path.join(handoffs, where)} is a symbolic link, not a folder; "
        f"handoffd never follows it ({outcome}). Replace it with a real folder and run this "
        "again."
    )


def refuse_linked(handoffs: str, boxes: tuple[str, ...], outcome: str) -> None:
    """Refuse to act when one of `boxes` of the handoff directory `handoffs` lies behind a
    symbolic link: whatever is written there would land outside the project, whatever is
    taken from it would come from outside, and a rename into it would carry a file out
    (docs/protocol.md Part II).  `outcome` says what was left undone.  `H` itself, or the
    worktree's `.swarmforge/`, behind a link is refused alike: only the worktree is
    trusted (roles.tsv names it), as the daemon's delivery has it."""
    above = safeio.linked_handoffs(handoffs)
    if above:
        folder, name = os.path.split(above)
        raise LinkedFolder(Exit.REFUSED, linked_message(folder, name, outcome))
    found = safeio.linked_folders(handoffs, boxes)
    if found:
        raise LinkedFolder(Exit.REFUSED, linked_message(handoffs, found[0], outcome))
