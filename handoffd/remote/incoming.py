"""Copies arriving from other hosts: written into this host's inboxes, then acknowledged.

Each message of a batch the link fetched is first classified (`arrival.classify`, pure): a
message no retry could make usable is terminated at once and logged `remote_refused`, so it
never comes back and never holds back another.  The copies are then written role by role,
each on its own, the §5 way: a hidden temp file in the role's `new/` (fsynced), linked into
view under its name, and one flush of `new/` for the role's whole batch; the daemon wakes
the roles, and only then are those messages acknowledged.  A copy that cannot be written now
(a full disk) is naked alone, with backoff, and the others of its batch go on; a role whose
inbox folders, or a folder above them, lie behind a symbolic link gets nothing written
through it (each of its messages naked, `remote_deferred`, never acknowledged).

A copy the role already holds anywhere in its inbox is acknowledged without a second copy:
the server redelivers what a killed daemon wrote but never acknowledged.  "Already holds" is
by content, not name alone: a peer could publish junk under the name a real copy will have,
and the real copy must then be written beside it (under a name of its own), not dropped.
"""

from __future__ import annotations

import errno
import os

from nats.aio.msg import Msg

from handoffd.core import config, durable, safeio
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.queue.scan import State, listing
from handoffd.remote import arrival
from handoffd.remote.arrival import NAME, Copy
from handoffd.remote.link import Link
from handoffd.remote.settings import Network

TYPE_CHECKING = False
if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

INBOX = (State.NEW, State.IN_PROCESS, State.COMPLETED)
FOLDERS = (Box.NEW, Box.IN_PROCESS, Box.COMPLETED)  # read or written by a receive


class Incoming:
    """Takes the messages the link fetched and publishes them into local inboxes."""

    def __init__(self, link: Link, network: Network, log: FilteringBoundLogger) -> None:
        self.link = link
        self.network = network
        self.log = log
        self.written: list[Msg] = []  # published (or already there): acknowledge after waking

    def receive(self, local: dict[str, Role]) -> set[str]:
        """Publish what arrived; the roles that received new mail."""
        batch: list[Msg] = []
        while self.link.received:
            batch.append(self.link.received.popleft())
        if not batch:
            return set()
        by_role: dict[str, list[tuple[Copy, Msg]]] = {}
        for message in batch:
            copy = self._classify(message, set(local))
            if copy is not None:
                by_role.setdefault(copy.role, []).append((copy, message))
        got = {role for role, items in by_role.items() if self._publish(local[role], items)}
        if not self.written:
            self.link.taken()
        return got

    def acknowledge(self) -> None:
        """After the wake-ups: acknowledge what was published, then fetch the next batch."""
        if not self.written:
            return
        for message in self.written:
            self.link.ack(message)
        self.written = []
        self.link.taken()

    def _classify(self, message: Msg, local: set[str]) -> Copy | None:
        """The copy a message is, if it is one to write now; a poison message is terminated."""
        role = self.network.role_of(message.subject)
        name = (message.headers or {}).get(NAME)
        try:
            copy = arrival.classify(role, name, message.data, local)
        except arrival.Refused as refusal:
            self._refuse(message, name, str(refusal))
            return None
        if copy is None:
            # roles.tsv moved the role away since the fetch: its new host's consumer takes
            # it once this one no longer asks for it (unacknowledged, it is sent again)
            self.log.warning("remote_not_local", subject=message.subject, file=name)
        return copy

    # --- writing one role's copies ----------------------------------------------------

    def _publish(self, role: Role, items: list[tuple[Copy, Msg]]) -> bool:
        """Write one role's new copies; True if any came into view."""
        linked = config.linked_folders(role)
        link = next((linked[box] for box in FOLDERS if box in linked), None)
        if link is not None:
            why = f"{link} is a symbolic link, not a folder; nothing is written through it"
            for copy, message in items:
                self._defer(role, copy.name, message, why)
            return False
        try:
            folder = _open_new(role)
        except OSError as error:  # new/ cannot be made or opened (a file in its place…)
            for copy, message in items:
                self._defer(role, copy.name, message, durable.reason_of(error))
            return False
        try:
            return self._write(role, folder, items)
        finally:
            os.close(folder)

    def _write(self, role: Role, folder: int, items: list[tuple[Copy, Msg]]) -> bool:
        """Each copy into `new/` (open at `folder`) on its own; then one flush of `new/`,
        and of each folder where a copy was found already, before any is acknowledged."""
        held = _held(role)
        taken = {os.path.basename(path) for paths in held.values() for path in paths}
        landed: list[tuple[Copy, str, Msg]] = []
        found: list[tuple[Copy, str, Msg]] = []  # (copy, the folder holding it, message)
        for copy, message in items:
            there = _same(held.get(copy.name, []), copy)
            if there is not None:
                found.append((copy, os.path.dirname(there), message))
                continue
            final = self._place(role, folder, copy, message, taken)
            if final is not None:
                held.setdefault(copy.name, []).append(os.path.join(role.path(Box.NEW), final))
                taken.add(final)
                landed.append((copy, final, message))
        flushed = _flush(folder, {where for _, where, _ in found})
        for copy, where, message in found:
            if where in flushed:
                self.log.warning("duplicate_skipped", file=copy.name, role=role.name, remote=True)
                self.written.append(message)
            else:
                self._defer(role, copy.name, message, f"{where} could not be flushed")
        for copy, final, message in landed:
            if None in flushed:
                self.log.info("received", file=final, role=role.name)
                self.written.append(message)
            else:  # in view but maybe not durable: the redelivery finds it and flushes again
                self._defer(role, copy.name, message, "the role's new/ could not be flushed")
        return bool(landed) and None in flushed

    def _place(
        self, role: Role, folder: int, copy: Copy, message: Msg, taken: set[str]
    ) -> str | None:
        """Stage `copy` and link it into view under a name no copy in the inbox has (none of
        `taken`); that name, or None when it could not be written (the message is deferred
        or refused)."""
        new = role.path(Box.NEW)
        temp = os.path.basename(durable.temp_name(new, copy.name))
        try:
            durable.create(temp, copy.data, dir_fd=folder)
            try:
                final = _link(folder, temp, new, copy.name, taken)
            finally:
                durable.unlink_quietly(temp, dir_fd=folder)
        except OSError as error:
            if error.errno in durable.PERMANENT:  # the file system refuses the name itself
                self._refuse(message, copy.name, f"cannot be written: {durable.reason_of(error)}")
            else:
                self._defer(role, copy.name, message, durable.reason_of(error))
            return None
        if final != copy.name:
            self.log.warning("renamed_on_arrival", file=copy.name, to=final, role=role.name)
        return final

    # --- outcomes -----------------------------------------------------------------------

    def _refuse(self, message: Msg, name: str | None, reason: str) -> None:
        self.log.error("remote_refused", subject=message.subject, file=name, reason=reason)
        self.link.term(message)

    def _defer(self, role: Role, name: str, message: Msg, reason: str) -> None:
        """Have the message sent again later, waiting longer each time it comes back."""
        try:
            deliveries = message.metadata.num_delivered or 1
        except Exception:  # not a JetStream delivery (never from the link): as a first one
            deliveries = 1
        delay = arrival.retry_in(deliveries)
        self.log.warning("remote_deferred", role=role.name, file=name, reason=reason,
                         retry_in=delay)  # fmt: skip
        self.link.nak(message, delay)


def _open_new(role: Role) -> int:
    """A descriptor on the role's `new/` (made if missing), reached from its worktree
    without following any link: a link swapped in after the check is refused here too."""
    if not os.path.isdir(role.worktree):
        raise FileNotFoundError(errno.ENOENT, "the role's worktree is missing", role.worktree)
    durable.makedirs(role.path(Box.NEW))
    return safeio.open_dir(role.path(Box.NEW), below=role.worktree)


def _held(role: Role) -> dict[str, list[str]]:
    """The paths of the role's inbox copies by the name they arrived under (a copy renamed on
    arrival, `….2.handoff`, under its original's)."""
    held: dict[str, list[str]] = {}
    for entry in listing(role, INBOX):
        held.setdefault(hf.split_copy(entry.name)[0], []).append(entry.path)
    return held


def _same(paths: list[str], copy: Copy) -> str | None:
    """The path of the inbox copy that is `copy` (as taking, blocking or finishing left it),
    if one is; a file that cannot be read as one is not."""
    for path in paths:
        try:
            there = safeio.read_regular(path, hf.READ_LIMIT)
        except OSError:
            continue
        if arrival.same_copy(there, copy):
            return path
    return None


def _link(folder: int, temp: str, new: str, name: str, taken: set[str]) -> str:
    """Link the staged `temp` into `new/` as `name`, or as the first free name after it when
    that is taken (in `new/` or another folder of the inbox); the name given.  A link never
    replaces a file, so a copy that appeared meanwhile under that name is never lost."""
    final = durable.free_name(new, name, taken=taken)
    for _ in range(100):
        try:
            os.link(temp, final, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            return final
        except FileExistsError:  # made meanwhile: the next free one
            final = durable.free_name(new, name, taken=taken | {final})
    raise OSError(errno.EEXIST, "no free name for the copy", name)


def _flush(folder: int, others: set[str]) -> set[str | None]:
    """fsync `new/` (reported as None) and each of `others`; the ones that were flushed."""
    done: set[str | None] = set()
    try:
        os.fsync(folder)
        done.add(None)
    except OSError:
        pass
    for path in others:
        try:
            durable.fsync_dir(path)
            done.add(path)
        except OSError:
            pass
    return done
