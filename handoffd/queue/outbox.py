"""Queueing a handoff: the sender's sequence number, then a complete-or-absent outbox write."""

from __future__ import annotations

import fcntl
import os

from handoffd.core import durable, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.core.outcome import OUTBOX_BUSY_MESSAGE, Exit
from handoffd.queue.draft import Draft, dependencies
from handoffd.queue.lock import Busy, hold, refuse_linked

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: swarm_handoff imports this module
if TYPE_CHECKING:
    from handoffd.queue.scan import Entry

SEQUENCE_FILE = "sequence"
SEQUENCE_LIMIT = 64  # bytes: six digits and a line feed; never read more of the file
PREAMBLE = "Re-read your role and constitution."


def next_sequence(handoffs: str) -> int:
    """Take the worktree's next sequence number.

    The lock is `flock` on the handoff directory itself: the kernel drops it when the
    holder exits, however it dies, so a killed process never blocks the next call (the
    older tool's `sequence.lock/` directory could, and is simply ignored here).
    """
    durable.makedirs(handoffs)
    fd = _lock(handoffs)
    try:
        return _take_number(handoffs)
    finally:
        os.close(fd)  # releases the lock


def _lock(handoffs: str) -> int:
    """Take the worktree's queueing lock (see `next_sequence`); close the fd to release.
    Waited on as long as a role's inbox lock at most (`lock.hold`): a process that keeps
    it longer is refused `OUTBOX_BUSY`, never waited on for ever."""
    fd = os.open(handoffs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if not hold(fd):
        os.close(fd)
        raise Busy(Exit.BUSY, OUTBOX_BUSY_MESSAGE.format(folder=handoffs))
    return fd


def _try_lock(handoffs: str) -> int | None:
    """The queueing lock if nobody holds it, else None."""
    fd = os.open(handoffs, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _take_number(handoffs: str) -> int:
    """The next number, recorded durably (under the lock).  Its folder is flushed before
    the caller publishes a name that uses it: a number a power cut could forget would be
    handed out again after the reboot, and within one second that is the same name and id
    as a handoff already delivered.  One directory fsync per send; the file's own fsync
    was always there."""
    path = os.path.join(handoffs, SEQUENCE_FILE)
    number = _read_number(path) + 1
    durable.replace(path, f"{number:06d}\n".encode())
    durable.fsync_dir(handoffs)
    return number


def sweep(handoffs: str) -> None:
    """Remove the temp files a killed or powered-off `queue` left (a sequence file's, a
    queued file's in `outbox/tmp/`).  Only under the queueing lock, which every writer
    of them holds: a busy lock means someone is queueing, and the sweep waits its turn
    (a later call sweeps)."""
    try:
        fd = _try_lock(handoffs)
    except FileNotFoundError:
        return
    if fd is None:
        return
    try:
        _sweep(handoffs)
    finally:
        os.close(fd)


def _sweep(handoffs: str) -> None:
    stray = [t for t in durable.temp_files(handoffs) if _queue_temp(t, f".{SEQUENCE_FILE}.")]
    if not safeio.linked_folders(handoffs, (Box.DRAFTS,)):  # never delete through a link
        drafts = os.path.join(handoffs, Box.DRAFTS)
        stray += [t for t in durable.temp_files(drafts) if _queue_temp(t)]
    for temp in stray:
        durable.unlink_quietly(temp)


def _queue_temp(path: str, prefix: str = ".") -> bool:
    """A temp name `durable.temp_name` gives (`.<name>.<pid>.<n>.tmp`), nothing an agent
    would call a draft of its own."""
    name = os.path.basename(path)
    parts = name.rsplit(".", 3)
    return name.startswith(prefix) and len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit()


def _read_number(path: str) -> int:
    """The last number taken; a missing or garbled file counts as 0 (names also carry the
    time, so restarting the count cannot collide with earlier handoffs).  So does a FIFO,
    device or link in its place, which is never opened or followed (docs/protocol.md Part
    II): the rewrite then replaces it with a file of our own."""
    try:
        return int(safeio.read_line(path, SEQUENCE_LIMIT) or "0")
    except (FileNotFoundError, NotADirectoryError, safeio.Refused, ValueError):
        return 0


def compose(draft: Draft, sender: str, sequence: int, now: float) -> tuple[str, hf.Handoff]:
    """The queued file's name and content (docs/protocol.md §2): pure, so tests need no clock."""
    stamp = hf.id_stamp(now)
    ident = hf.compose_id(stamp, sequence, sender)
    head = draft.headers
    headers = [
        (hf.ID, ident),
        (hf.SENDER, sender),
        (hf.RECIPIENTS, ",".join(draft.recipients)),
        (hf.PRIORITY, head[hf.PRIORITY]),
        (hf.TYPE, head[hf.TYPE]),
    ]
    if head[hf.TYPE] == "git_handoff":
        headers += [(hf.ROLE, sender), (hf.TASK, head[hf.TASK]), (hf.COMMIT, draft.commit or "")]
        body = f"merge_and_process {sender} {draft.commit}\n"
    elif head[hf.TYPE] == "packet":  # the packet travels verbatim (docs/protocol.md §10)
        headers.append((hf.TASK, head[hf.TASK]))
        body = draft.body or ""
    else:
        headers.append((hf.MESSAGE, head[hf.MESSAGE]))
        body = head[hf.MESSAGE] + "\n"
    if draft.body is not None:  # a packet's, or the operator's whole text (§18)
        body = draft.body
    if hf.DEPENDS_ON in head:
        headers.append((hf.DEPENDS_ON, ",".join(dependencies(head[hf.DEPENDS_ON]))))
    if hf.BLOCKED_REASON in head:
        headers.append((hf.BLOCKED_REASON, head[hf.BLOCKED_REASON].strip()))
    headers += draft.extra
    headers.append((hf.CREATED_AT, hf.iso_now(now)))
    name = hf.compose_name(head[hf.PRIORITY], ident, draft.recipients)
    return name, hf.Handoff(headers, f"{PREAMBLE}\n\n{body}")


NAME_MAX = 255  # bytes in one file name on every filesystem handoffd runs on


def name_problem(draft: Draft, sender: str) -> str | None:
    """Why the queued file's name could not be created (too long), or None.  Checked with
    the draft's other errors: a name over the limit would fail in the outbox, and a
    shortened one would lose recipients, which the name carries (docs/protocol.md §2)."""
    name, _ = compose(draft, sender, 0, 0.0)
    size = len(name.encode("utf-8"))
    if size <= NAME_MAX:
        return None
    return (
        f"The queued file name would be {size} bytes, over the filesystem's limit of "
        f"{NAME_MAX}; send to fewer recipients at once (each recipient's name is in it)."
    )


def queue(sender: Role, draft: Draft, now: float) -> str:
    """Write the handoff into the sender's outbox, complete or not at all; its path, once
    the file is durable (the outbox, and any folder made for it, flushed)."""
    fd = _ready(sender)  # held throughout: no temp here is a live writer's but ours
    try:
        while True:
            name, content = compose(draft, sender.name, _take_number(sender.handoffs), now)
            path = _put(sender, name, content.render())
            if path is not None:
                return path
    finally:
        os.close(fd)


def publish(sender: Role, name: str, data: bytes) -> str | None:
    """Put `data` into the sender's outbox as `name`, durably; its path, or None if that
    name is taken (the caller picks another, or knows the file is already there)."""
    fd = _ready(sender)
    try:
        return _put(sender, name, data)
    finally:
        os.close(fd)


def _ready(sender: Role) -> int:
    """The sender's folders made durable and its queueing lock taken, what a dead writer
    left swept; returns the lock (close it to release).  Refuses an outbox that is no
    folder of its own (`lock.refuse_linked`)."""
    refuse_linked(sender.handoffs, (Box.OUTBOX, Box.DRAFTS), "nothing was queued")
    durable.makedirs(sender.path(Box.DRAFTS))
    durable.makedirs(sender.path(Box.OUTBOX))
    fd = _lock(sender.handoffs)
    _sweep(sender.handoffs)
    return fd


def _put(sender: Role, name: str, data: bytes) -> str | None:
    """Publish `data` as `name` (under the queueing lock): its path, None if it is taken."""
    drafts, outbox = sender.path(Box.DRAFTS), sender.path(Box.OUTBOX)
    # A short temp name: the queued name alone may come close to the filesystem's limit.
    if not _publish(durable.temp_name(drafts, name), data, outbox, name):
        return None
    durable.fsync_dir(outbox)
    return os.path.join(outbox, name)


def _publish(temp: str, data: bytes, outbox: str, name: str) -> bool:
    """Write `temp` durably, then link it into the outbox: the daemon only ever sees it
    whole, and unlike rename, link never replaces a file of the same name (a sequence
    file restored from a backup could repeat a number within one second).  False if the
    name is taken."""
    durable.create(temp, data)
    try:
        os.link(temp, os.path.join(outbox, name))
    except FileExistsError:
        return False
    finally:
        durable.unlink_quietly(temp)
    return True


def handoff_exists(roles: dict[str, Role], ident: str) -> bool:
    """Whether some role's handoff directory holds a queue file (docs/protocol.md §8) of
    handoff `ident`: its sender's originals first (the id names the sender), then every inbox."""
    from handoffd.queue import scan  # only a draft with `depends_on` pays for it

    named = hf.id_sender(ident)
    sender = None if named is None else roles.get(named)
    if sender and _holds(scan.listing(sender, scan.State.ORIGINALS), ident):
        return True
    copies = (scan.State.NEW, scan.State.IN_PROCESS, scan.State.COMPLETED)
    return any(_holds(scan.listing(role, copies), ident) for role in roles.values())


def _holds(entries: list[Entry], ident: str) -> bool:
    return any(hf.name_id(entry.name) == ident for entry in entries)
