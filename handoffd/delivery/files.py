"""A copy's file steps, the delivery's own: each copy staged as a hidden, fsynced temp in its
recipient's `new/` and stamped there (§5), revealed without overwriting, an original
archived under a free name in `sent/`, each folder flushed once; and the pure checks that
every path of a pass lies where its role's folders are (docs/protocol.md §5)."""

from __future__ import annotations

import errno
import os

from handoffd.core import durable, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.delivery import journal
from handoffd.delivery.journal import Entry
from handoffd.queue import checks

COPY_LIMIT = checks.MAX_BYTES + 4096  # an original and the stamps a copy adds to it

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import TypeVar

    T = TypeVar("T")


def check_paths(path: str, entries: list[Entry], roles: dict[str, Role]) -> None:
    """Refuse (`journal.Corrupt`) a journal any of whose entries names a path no pass of
    ours would have written: an original outside its sender's outbox, an archive other
    than its sender's `sent/`, a copy outside its recipient's `new/`, a role roles.tsv
    does not know.  The journal is a file under `.swarmforge/` like any other, and one
    planted there must not make the daemon rename a file anywhere else."""
    for entry in entries:
        problem = path_problem(entry, roles)
        if problem:
            raise journal.Corrupt(f"{path}: the entry of {entry.original!r} {problem}")


def path_problem(entry: Entry, roles: dict[str, Role]) -> str | None:
    sender = roles.get(entry.sender)
    here = [r for r in entry.recipients if r not in entry.remote]  # others' copies: no path
    known = all(r in roles for r in entry.recipients)
    if sender is None or not known or len(entry.copies) != len(here):
        return "names a role roles.tsv does not know, or copies that are not its recipients'"
    name = os.path.basename(entry.original)
    if not right_inside(entry.original, sender.path(Box.OUTBOX)) or name in ("", ".", ".."):
        return "is not in its sender's outbox"
    if os.path.normpath(entry.sent) != os.path.normpath(sender.path(Box.SENT)):
        return "is not archived into its sender's sent/"
    for (staged, final), recipient in zip(entry.copies, here, strict=True):
        role = roles.get(recipient)
        new = role.path(Box.NEW) if role else ""
        hidden = os.path.basename(staged).startswith(".") and staged.endswith(".tmp")
        if not (role and right_inside(staged, new) and hidden and final == os.path.join(new, name)):
            return f"has a copy outside {recipient}'s new/"
    return None


def right_inside(path: str, folder: str) -> bool:
    """Whether `path` names an entry right inside `folder` (not deeper, not above)."""
    return os.path.dirname(os.path.normpath(path)) == os.path.normpath(folder)


def stage_copy(handoff: hf.Handoff, recipient: Role, name: str) -> tuple[str, str]:
    """Write the recipient's stamped copy as a hidden, fsynced temp file in its new/."""
    new = recipient.path(Box.NEW)
    if not os.path.isdir(recipient.worktree):
        raise FileNotFoundError(errno.ENOENT, "recipient worktree is missing", recipient.worktree)
    durable.makedirs(new)  # a copy in a folder a power cut forgets would be lost with it
    staged = durable.temp_name(new, name)
    durable.create(staged, stamped(handoff, recipient.name))
    return staged, os.path.join(new, name)


def stamped(handoff: hf.Handoff, recipient: str, at: str | None = None) -> bytes:
    """The bytes of `recipient`'s copy: the original with `recipient` and `enqueued_at`
    (`at`, else now)."""
    copy = hf.Handoff(list(handoff.headers), handoff.body)
    copy.set(hf.RECIPIENT, recipient)
    copy.set(hf.ENQUEUED_AT, at or hf.iso_now())
    return copy.render()


def remote_copies(entry: Entry) -> dict[str, bytes]:
    """The stamped copies of the entry's unacknowledged remote recipients, made from the
    original still in its outbox (it is archived only once they are acknowledged)."""
    if identity(entry.original) != entry.identity:
        raise FileNotFoundError(errno.ENOENT, "the original was replaced", entry.original)
    name = os.path.basename(entry.original)
    handoff = hf.parse(checks.read_entry(entry.original), name)
    return {role: stamped(handoff, role, entry.stamp) for role in entry.unacked}


def archived(entry: Entry) -> bool:
    """Whether the entry's original has left its outbox (it is in sent/ now)."""
    try:
        return identity(entry.original) != entry.identity
    except FileNotFoundError:
        return True


def local(entry: Entry) -> list[str]:
    return [name for name in entry.recipients if name not in entry.remote]


def signature(entries: list[Entry]) -> object:
    return [(e.original, tuple(e.acked), e.stamp) for e in entries]


def unstage(copies: list[tuple[str, str]]) -> None:
    for staged, _ in copies:
        durable.unlink_quietly(staged)


def archive(entry: Entry) -> None:
    """Move the original to sent/ under a free name, if it is still the file we delivered."""
    try:
        if identity(entry.original) != entry.identity:
            return
    except FileNotFoundError:
        return  # archived before a crash
    if safeio.linked_folders(os.path.dirname(entry.sent), (os.path.basename(entry.sent),)):
        # linked since the pass began: never carry the original out of the project
        raise OSError(errno.ENOTDIR, "a symbolic link, not a folder; not followed", entry.sent)
    durable.makedirs(entry.sent)
    name = durable.free_name(entry.sent, os.path.basename(entry.original))
    os.rename(entry.original, os.path.join(entry.sent, name))


def identity(path: str) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def parents(paths: Iterable[str]) -> list[str]:
    return [os.path.dirname(path) for path in paths]


def sync(directories: list[str]) -> set[str]:
    """fsync each distinct directory once (the Dovecot trick: one flush per pass, not per
    file); the directories that could not be flushed.  One that is gone has nothing left
    to make durable."""
    unsynced = set()
    for directory in dict.fromkeys(directories):
        try:
            durable.fsync_dir(directory)
        except FileNotFoundError:
            pass
        except OSError:
            unsynced.add(directory)
    return unsynced


def same_copy(staged: str, final: str) -> bool:
    """Whether two copies differ only in their `enqueued_at` stamp (one handoff, twice).
    Both are read with the careful reader: whatever sits in `new/` under that name (a link,
    a FIFO someone planted) is not our copy, and is never followed or opened."""
    try:
        ours, theirs = (safeio.read_regular(path, COPY_LIMIT) for path in (staged, final))
    except OSError:
        return False
    staged_copy = unstamped(ours)
    return staged_copy is not None and staged_copy == unstamped(theirs)


def unstamped(data: bytes) -> tuple[list[tuple[str, str]], str] | None:
    """A copy's headers but its `enqueued_at`, and its body; None if it is no handoff."""
    try:
        handoff = hf.parse(data, "a copy")
    except hf.HandoffError:
        return None
    return handoff.without(hf.ENQUEUED_AT), handoff.body


def in_turn(queues: list[list[T]]) -> Iterator[T]:
    """One item from each queue in turn (round robin), each queue in its own order."""
    for depth in range(max(map(len, queues), default=0)):
        yield from (queue[depth] for queue in queues if len(queue) > depth)
