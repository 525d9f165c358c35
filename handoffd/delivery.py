"""Delivery, the daemon's side of the queue: `outbox/ → new/`, then `sent/` or `failed/`.

This module owns every transition the daemon makes.  A pass takes the ready
originals of every outbox and, for the good ones, follows the Maildir recipe with
one commit point (see journal.py):

  stage each copy (hidden temp in new/, fsync) → fsync new/ → commit the journal
  → rename copies into view → fsync new/ → rename originals to sent/ → fsync
  → clear the journal

Directory fsyncs are done once per directory per pass, not per file, so a backlog
drains at several copies per disk flush.  Bad originals go to `failed/` with a
reason and nobody gets a copy; a transient error (disk full, I/O error, permission)
leaves the original in its outbox and retries it later with backoff.
"""

from __future__ import annotations

import errno
import os

from handoffd import checks, durable, journal
from handoffd import handoff as hf
from handoffd.config import SWARMFORGE, Box, Role
from handoffd.journal import Entry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from structlog.typing import FilteringBoundLogger

JOURNAL = os.path.join(SWARMFORGE, "daemon", "handoffd.journal")
BATCH_LIMIT = 256  # originals per pass: bounds the work a SIGTERM waits for
FIRST_RETRY, LAST_RETRY = 0.5, 60.0  # seconds; doubling in between


class Retry:
    """Backoff state of one deferred original."""

    __slots__ = ("attempts", "due")

    def __init__(self, attempts: int, due: float) -> None:
        self.attempts = attempts
        self.due = due


class Courier:
    """Delivers the originals of every role's outbox; one `deliver` call is one pass."""

    def __init__(self, root: str, log: FilteringBoundLogger) -> None:
        self.journal = os.path.join(root, JOURNAL)
        self.log = log
        self.retries: dict[str, Retry] = {}
        self.backlog = False  # the last pass left ready originals behind (batch limit)
        self.refused_senders: set[str] = set()  # roles with an original sent to failed/ this pass

    # --- passes ---------------------------------------------------------------------

    def recover(self, roles: dict[str, Role]) -> None:
        """On start-up: finish a committed pass, then sweep temp files no journal owns."""
        self.finish_journal()
        for role in roles.values():
            for box in (Box.NEW, Box.FAILED):
                self._sweep(role.path(box))

    def _sweep(self, folder: str) -> None:
        """Remove the temp files in `folder`; one we cannot sweep waits for the next start
        (helpers ignore hidden files), it is never a reason not to start."""
        try:
            for temp in durable.temp_files(folder):
                durable.unlink_quietly(temp)
                self.log.info("swept", file=temp)
        except OSError as error:
            self.log.warning("sweep_failed", folder=folder, error=str(error))

    def finish_journal(self) -> None:
        """Complete a pass the journal committed but a crash or an error interrupted."""
        try:
            entries = journal.load(self.journal)
        except journal.Corrupt as error:
            # Nothing can be replayed from it; set it aside for a person and go on, rather
            # than stop every delivery.  Staged copies it named are swept at start-up.
            aside = durable.free_name(os.path.dirname(self.journal), "handoffd.journal.corrupt")
            os.rename(self.journal, os.path.join(os.path.dirname(self.journal), aside))
            self.log.error("journal_corrupt", error=str(error), kept_as=aside)
            return
        if entries is None:
            journal.clear(self.journal)  # absent, or torn before its commit line
            return
        self._publish(entries)
        self.log.info("recovered", files=[os.path.basename(e.original) for e in entries])

    def deliver(self, roles: dict[str, Role], now: float) -> set[str]:
        """One pass over every outbox; returns the roles that received new mail."""
        self.refused_senders.clear()
        self.finish_journal()
        staged = (self._stage(role, path, roles, now) for role, path in self._ready(roles, now))
        entries = [entry for entry in staged if entry]
        if not entries or not self._commit(entries, now):
            return set()
        self._publish(entries)
        for entry in entries:
            self.retries.pop(entry.original, None)
            self.log.info(
                "delivered", file=os.path.basename(entry.original), sender=entry.sender,
                recipients=entry.recipients,
            )  # fmt: skip
        return {name for entry in entries for name in entry.recipients}

    def next_retry(self) -> float | None:
        """When the earliest deferred original is due, if any."""
        return min((retry.due for retry in self.retries.values()), default=None)

    # --- steps --------------------------------------------------------------------------

    def _ready(self, roles: dict[str, Role], now: float) -> list[tuple[Role, str]]:
        """Outbox entries due for a try, in queue (filename) order across roles."""
        ready, present = [], set()
        for role in roles.values():
            try:
                names = [entry.name for entry in hf.visible(role.path(Box.OUTBOX))]
            except OSError as error:  # e.g. EACCES: one unreadable outbox holds up no other
                self.log.warning("outbox_unreadable", role=role.name, error=str(error))
                continue
            for name in names:
                path = role.path(Box.OUTBOX, name)
                present.add(path)
                retry = self.retries.get(path)
                if name.endswith(".handoff") and (retry is None or retry.due <= now):
                    ready.append((name, role, path))
        # A deferred original that left its outbox (taken back, or archived by recovery)
        # must not keep its timer: a due time in the past makes the loop wait 0 s forever.
        self.retries = {path: r for path, r in self.retries.items() if path in present}
        ready.sort(key=lambda item: item[0])
        self.backlog = len(ready) > BATCH_LIMIT
        return [(role, path) for _, role, path in ready[:BATCH_LIMIT]]

    def _stage(self, sender: Role, path: str, roles: dict[str, Role], now: float) -> Entry | None:
        """Check an original and stage its copies; None if it failed, was deferred or is gone."""
        name = os.path.basename(path)
        try:
            identity = _identity(path)
            data = checks.read_entry(path)
            handoff, recipients = checks.inspect(data, name, sender.name, set(roles))
        except checks.Refused as refusal:
            self._fail(sender, path, str(refusal), now)
            return None
        except FileNotFoundError:
            return None  # taken back by its sender: nothing to do
        except OSError as error:
            self._defer(path, error, now)
            return None
        copies: list[tuple[str, str]] = []
        try:
            for recipient in recipients:
                copies.append(_stage_copy(handoff, roles[recipient], name))
        except OSError as error:
            _unstage(copies)
            self._defer(path, error, now)
            return None
        return Entry(sender.name, path, identity, sender.path(Box.SENT), copies, recipients)

    def _commit(self, entries: list[Entry], now: float) -> bool:
        """Make the staged copies and the journal durable: the pass's point of no return."""
        try:
            _sync(_parents(staged for e in entries for staged, _ in e.copies))
            journal.commit(self.journal, entries)
        except OSError as error:
            for entry in entries:
                _unstage(entry.copies)
                self._defer(entry.original, error, now)
            return False
        return True

    def _publish(self, entries: list[Entry]) -> None:
        """Rename staged copies into view, archive the originals, clear the journal.
        Idempotent, so a crash at any point is finished by running it again."""
        for entry in entries:
            for staged, final in entry.copies:
                self._reveal(staged, final)
        _sync(_parents(final for e in entries for _, final in e.copies))
        for entry in entries:
            _archive(entry)
        _sync(_parents(e.original for e in entries) + [e.sent for e in entries])
        journal.clear(self.journal)

    def _reveal(self, staged: str, final: str) -> None:
        if not os.path.lexists(staged):
            return  # published before a crash; the recipient may have taken it since
        if os.path.lexists(final):
            # Only the daemon creates names in new/, and it renames each staged copy once,
            # so this is an earlier handoff of the same name still unread: keep that one.
            durable.unlink_quietly(staged)
            self.log.warning("duplicate_skipped", file=final)
            return
        os.rename(staged, final)

    def _fail(self, sender: Role, path: str, reason: str, now: float) -> None:
        """Move a bad original to failed/ with `<name>.error` beside it; nobody gets a copy."""
        failed = sender.path(Box.FAILED)
        try:
            os.makedirs(failed, exist_ok=True)
            target = durable.free_name(failed, os.path.basename(path), companions=(".error",))
            # The reason first: an operator never sees a failed file without its reason.
            error_file = os.path.join(failed, target + ".error")
            durable.replace(error_file, f"{reason}\n".encode())
            try:
                os.rename(path, os.path.join(failed, target))
            except OSError:
                durable.unlink_quietly(error_file)  # no reason without its file
                raise
            durable.fsync_dir(failed)
            durable.fsync_dir(os.path.dirname(path))
        except OSError as error:
            self._defer(path, error, now)
            return
        self.retries.pop(path, None)
        self.refused_senders.add(sender.name)
        self.log.warning("failed", file=os.path.basename(path), sender=sender.name, reason=reason)

    def _defer(self, path: str, error: OSError, now: float) -> None:
        """Leave the original in its outbox and try again later, waiting longer each time."""
        previous = self.retries.get(path)
        attempts = previous.attempts + 1 if previous else 1
        delay = min(FIRST_RETRY * 2 ** (attempts - 1), LAST_RETRY)
        self.retries[path] = Retry(attempts, now + delay)
        reason = f"{errno.errorcode.get(error.errno or 0, 'error')}: {error.strerror or error}"
        self.log.warning(
            "deferred", file=os.path.basename(path), reason=reason, attempt=attempts, retry_in=delay
        )


# --- file steps -------------------------------------------------------------------------


def _stage_copy(handoff: hf.Handoff, recipient: Role, name: str) -> tuple[str, str]:
    """Write the recipient's stamped copy as a hidden, fsynced temp file in its new/."""
    new = recipient.path(Box.NEW)
    if not os.path.isdir(recipient.worktree):
        raise FileNotFoundError(errno.ENOENT, "recipient worktree is missing", recipient.worktree)
    os.makedirs(new, exist_ok=True)
    copy = hf.Handoff(list(handoff.headers), handoff.body)
    copy.set("recipient", recipient.name)
    copy.set("enqueued_at", hf.iso_now())
    staged = durable.temp_name(new, name)
    durable.create(staged, copy.render())
    return staged, os.path.join(new, name)


def _unstage(copies: list[tuple[str, str]]) -> None:
    for staged, _ in copies:
        durable.unlink_quietly(staged)


def _archive(entry: Entry) -> None:
    """Move the original to sent/ under a free name, if it is still the file we delivered."""
    try:
        if _identity(entry.original) != entry.identity:
            return
    except FileNotFoundError:
        return  # archived before a crash
    os.makedirs(entry.sent, exist_ok=True)
    name = durable.free_name(entry.sent, os.path.basename(entry.original))
    os.rename(entry.original, os.path.join(entry.sent, name))


def _identity(path: str) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _parents(paths: Iterable[str]) -> list[str]:
    return [os.path.dirname(path) for path in paths]


def _sync(directories: list[str]) -> None:
    """fsync each distinct directory once (the Dovecot trick: one flush per pass, not per
    file); one that is gone has nothing left to make durable."""
    for directory in dict.fromkeys(directories):
        try:
            durable.fsync_dir(directory)
        except FileNotFoundError:
            pass
