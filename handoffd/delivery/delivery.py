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

Publishing goes entry by entry: an entry that cannot be finished (its sender's
`sent/` became a plain file, say) stays alone in the journal and is retried with
backoff, while every other entry of the pass, and every later pass, goes on.

A recipient on another host (docs/protocol.md §15) gets its copy through the NATS stream
(`remote/outgoing.py`): the entry stays in the journal, its local copies published, until
the stream acknowledged every remote copy; only then is the original archived.
"""

from __future__ import annotations

import errno
import os
import stat
import time

from handoffd.core import config, durable, lifecycle, limits
from handoffd.core import handoff as hf
from handoffd.core.config import SWARMFORGE, Box, Role, linked_folders
from handoffd.core.durable import PERMANENT, reason_of
from handoffd.delivery import files, journal, settle
from handoffd.delivery.journal import Entry
from handoffd.queue import checks, failed, outbox
from handoffd.remote import held

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

    from structlog.typing import FilteringBoundLogger

    from handoffd.delivery.watch import Watcher
    from handoffd.remote.outgoing import Outgoing

JOURNAL = os.path.join(SWARMFORGE, "daemon", "handoffd.journal")
BATCH_LIMIT = 256  # originals per pass: bounds the work a SIGTERM waits for
SENDING = (Box.OUTBOX, Box.SENT, Box.FAILED)


class Retry:
    """Backoff state of one deferred original, and why and since when (the wall clock) it
    waits: what `status` shows of it (`held.py`)."""

    __slots__ = ("attempts", "due", "reason", "since")

    def __init__(self, attempts: int, due: float, reason: str = "", since: float = 0.0) -> None:
        self.attempts = attempts
        self.due = due
        self.reason = reason
        self.since = since


class Courier:
    """Delivers the originals of every role's outbox; one `deliver` call is one pass."""

    def __init__(
        self,
        root: str,
        log: FilteringBoundLogger,
        reload_roles: Callable[[], dict[str, Role]] | None = None,
    ) -> None:
        self.journal = os.path.join(root, JOURNAL)
        self.log = log
        self.retries: dict[str, Retry] = {}
        self.backlog = False  # the last pass left ready originals behind (batch limit)
        # Reads roles.tsv now, before a recipient is called unknown (it may be brand new).
        self.reload_roles = reload_roles
        self.refused_senders: set[str] = set()  # senders of originals failed in this pass
        self.settling: dict[str, float] = {}  # files still being written: when to look again
        self.clock = time.time  # the wall clock file times are compared with
        self.arrivals: Watcher | None = None  # how outbox files arrived, from their events
        self._unsure: dict[str, os.stat_result] = {}  # taken as links: confirmed by a sync
        self.linked: dict[str, dict[str, str]] = {}  # role -> {box behind a link: the link}
        self.here = ""  # this host (`.swarmforge/host`); roles elsewhere are remote
        self.outgoing: Outgoing | None = None  # the NATS side, when the project has one
        self._written: object = None  # what the journal on disk lists: rewrite only a change

    # --- passes ---------------------------------------------------------------------

    def recover(self, roles: dict[str, Role]) -> None:
        """On start-up: finish a committed pass, then sweep temp files no journal owns:
        in every folder the daemon writes temps in (staged copies, `.error` files, its
        own pid file and journal; only the daemon holding the lock writes those), the
        reasons in `failed/` a killed retry left beside no original (`failed.sweep`), and
        the senders' queueing temps (under their own lock, see `outbox.sweep`)."""
        self.finish_journal(roles)
        self.survey(roles)
        local = self.local(roles)
        for role in local.values():
            for box in (Box.NEW, Box.FAILED):
                if box not in self.linked.get(role.name, {}):  # never delete through a link
                    self._sweep(role.path(box))
            if Box.FAILED not in self.linked.get(role.name, {}):
                self._sweep_reasons(role)
        own = tuple(f".{os.path.basename(n)}." for n in (self.journal, lifecycle.PID_FILE,
                                                          held.FILE))  # fmt: skip
        self._sweep(os.path.dirname(self.journal), own)
        for role in local.values():
            outbox.sweep(role.handoffs)  # a sender killed mid-queue, if it never sends again

    def local(self, roles: dict[str, Role]) -> dict[str, Role]:
        """The roles of this host: the only ones whose folders are here."""
        return {name: role for name, role in roles.items() if config.is_local(role, self.here)}

    def _sweep(self, folder: str, prefixes: tuple[str, ...] = ("",)) -> None:
        """Remove the temp files in `folder` (those whose name starts with one of
        `prefixes`); one we cannot sweep waits for the next start (helpers ignore hidden
        files), it is never a reason not to start."""
        try:
            for temp in durable.temp_files(folder):
                if os.path.basename(temp).startswith(prefixes):
                    durable.unlink_quietly(temp)
                    self.log.info("swept", file=temp)
        except OSError as error:
            self.log.warning("sweep_failed", folder=folder, error=str(error))

    def _sweep_reasons(self, sender: Role) -> None:
        """Remove the reasons a retry cut short left once their originals were sent."""
        try:
            for path in failed.sweep(sender):
                self.log.info("swept", file=path)
        except OSError as error:
            self.log.warning("sweep_failed", folder=sender.path(Box.FAILED), error=str(error))

    def finish_journal(self, roles: dict[str, Role] | None = None) -> None:
        """Complete what a committed journal lists (a pass a crash or an error interrupted)."""
        pending = self._pending(roles)
        if self.outgoing is not None:
            self.outgoing.inherit(pending)
        if pending:
            self._settle_journal(self._publish(pending, 0.0)[1])
            self.log.info("recovered", files=[os.path.basename(e.original) for e in pending])

    def _pending(self, roles: dict[str, Role] | None = None) -> list[Entry]:
        """The committed entries not yet finished; a corrupt journal is set aside, and so is
        one naming a path no pass of ours would (see `files.check_paths`)."""
        try:
            entries = journal.load(self.journal)
            if entries and roles is not None:
                files.check_paths(self.journal, entries, roles)
        except journal.Corrupt as error:
            # Nothing can be replayed from it; set it aside for a person and go on, rather
            # than stop every delivery.  Staged copies it named are swept at start-up.
            aside = durable.free_name(os.path.dirname(self.journal), "handoffd.journal.corrupt")
            os.rename(self.journal, os.path.join(os.path.dirname(self.journal), aside))
            self.log.error("journal_corrupt", error=str(error), kept_as=aside)
            return []
        self._written = files.signature(entries or [])
        for entry in entries or []:
            if entry.remote and entry.stamp is None:  # journalled by a release without stamps
                entry.stamp = hf.iso_now()  # from now on fixed: the journal is rewritten
        return entries or []

    def deliver(self, roles: dict[str, Role], now: float) -> set[str]:
        """One pass over every outbox; returns the roles that received new mail."""
        self.refused_senders = set()
        self.survey(roles)
        pending = self._pending(roles)
        answered = self._answered(pending, now)
        due = [e for e in pending if e in answered or (self._due(e.original, now)
                                                       and not self._flying(e))]  # fmt: skip
        busy = {e.original for e in pending}  # journalled: never staged a second time
        staged = (
            self._stage(role, path, roles, now) for role, path in self._ready(roles, now, busy)
        )
        entries = [entry for entry in staged if entry]
        if entries and not self._commit(entries, now, keep=pending):
            entries = []
        if not entries and not due:
            return set()
        landed, unfinished = self._publish(due + entries, now)
        self._settle_journal([e for e in pending if e not in due] + unfinished)
        for entry in landed:
            self.log.info(
                "delivered", file=os.path.basename(entry.original), sender=entry.sender,
                recipients=files.local(entry),
            )  # fmt: skip
        return {name for entry in landed for name in files.local(entry)}

    # --- copies for other hosts (docs/protocol.md §15) ----------------------------------

    def _flying(self, entry: Entry) -> bool:
        return self.outgoing is not None and self.outgoing.in_flight(entry)

    def _answered(self, pending: list[Entry], now: float) -> list[Entry]:
        """The journalled entries whose remote copies the stream answered since the last
        pass (each acknowledgement logged as a delivery); after a reconnection, every entry
        still waiting is due at once rather than at its backoff."""
        if self.outgoing is None:
            return []
        if self.outgoing.reconnected():
            for entry in pending:
                if entry.unacked:
                    self.retries.pop(entry.original, None)
        answered = []
        for entry in pending:
            answers = self.outgoing.collect(entry)
            if answers.acked:
                self.log.info("delivered", file=os.path.basename(entry.original),
                              sender=entry.sender, recipients=answers.acked,
                              remote=True)  # fmt: skip
            if answers.conflicts:
                self._conflict(entry, answers.conflicts, pending, now)
            elif answers.error is not None:
                self._postpone(entry.original, answers.error, now)
            if answers.acked or answers.conflicts or answers.error is not None:
                answered.append(entry)
        return answered

    def _conflict(
        self, entry: Entry, taken: list[tuple[str, str]], pending: list[Entry], now: float
    ) -> None:
        """The stream said "duplicate" for copies this daemon never published: another
        message holds their ids.  Not delivered: the copies get a new stamp (new bytes, so
        new ids), made durable in the journal before they go out again, with backoff."""
        for role, ident in taken:
            self.log.error("remote_conflict", file=os.path.basename(entry.original),
                           sender=entry.sender, role=role, msg_id=ident)  # fmt: skip
        entry.stamp = hf.iso_now()
        try:
            journal.commit(self.journal, pending, atomic=True)
            self._written = files.signature(pending)
        except OSError as error:  # the old stamp stays burned in memory (Outgoing.taken)
            self.log.warning("journal_not_rewritten", error=str(error))
        roles = ", ".join(role for role, _ in taken)
        self._postpone(entry.original, f"nats: the stream already holds another message "
                       f"under the id of {roles}'s copy (remote_conflict)", now)  # fmt: skip

    def _send_remote(self, entry: Entry, now: float) -> None:
        """Hand the entry's unacknowledged remote copies to the stream, or defer them."""
        if self._flying(entry) or not self._due(entry.original, now):
            return
        if self.outgoing is None:
            self._unreachable(entry.original, entry.unacked, now)
            return
        try:
            copies = files.remote_copies(entry)
        except (OSError, checks.Refused, hf.HandoffError) as error:
            self._postpone(entry.original, f"cannot read the original again: {error}", now)
            return
        reason = self.outgoing.send(entry, copies)
        if reason is not None:
            self._postpone(entry.original, reason, now)

    def _unreachable(self, path: str, remote: list[str], now: float) -> None:
        """A recipient on another host and no NATS configured: a configuration error,
        said by name; the original waits in its outbox (deferred), never failed."""
        self.log.error(
            "config_error", file=os.path.basename(path), roles=remote,
            error=f"role '{remote[0]}' is on another host, but swarmforge.conf has no "
            "`nats <url>` line to reach it; add one (and `project <name>`), then run "
            "`handoffd init`",
        )  # fmt: skip
        self._postpone(path, "nats: not configured", now)

    def _postpone(self, path: str, reason: str, now: float) -> None:
        delay = self._backoff(path, now, reason)
        self.log.warning("deferred", file=os.path.basename(path), reason=reason,
                         attempt=self.retries[path].attempts, retry_in=delay)  # fmt: skip

    def survey(self, roles: dict[str, Role]) -> None:
        """Note which folders of each role lie behind a symbolic link, logging each link
        once while it stays.  The daemon neither takes from a linked outbox (nor archives
        into a linked `sent/` or `failed/`) nor delivers into a linked `inbox/new/`: either
        would carry mail out of the project or into it from outside.  A few `lstat`s per
        role and pass."""
        linked: dict[str, dict[str, str]] = {}
        for role in roles.values():
            try:
                found = linked_folders(role)
            except OSError:  # cannot tell (EACCES): the steps meet the error and defer
                found = {}
            known = set(self.linked.get(role.name, {}).values())
            for path in dict.fromkeys(found.values()):
                if path not in known:
                    self.log.error("linked_folder", role=role.name, folder=path)
            if found:
                linked[role.name] = found
        self.linked = linked

    def _due(self, original: str, now: float) -> bool:
        retry = self.retries.get(original)
        return retry is None or retry.due <= now

    def next_settled(self) -> float | None:
        """When a file still being written is next worth a look, if any."""
        return min(self.settling.values(), default=None)

    def next_retry(self) -> float | None:
        """When the earliest deferred or still-settling original is due, if any."""
        due = [retry.due for retry in self.retries.values()] + list(self.settling.values())
        return min(due, default=None)

    # --- steps --------------------------------------------------------------------------

    def _ready(
        self, roles: dict[str, Role], now: float, busy: set[str] | None = None
    ) -> list[tuple[Role, str]]:
        """Outbox entries due for a try: every outbox in turn, each in queue (filename)
        order, so one sender's flood never starves the others; sorted by name."""
        queues, present, listed = [], set(), time.monotonic()
        for role in self.local(roles).values():
            if role.is_pool:
                continue  # a pool sends nothing (docs/protocol.md §17): its outbox is no queue
            if any(box in self.linked.get(role.name, {}) for box in SENDING):
                continue  # its originals wait where they are (see `survey`)
            try:
                names = [entry.name for entry in hf.visible(role.path(Box.OUTBOX))]
            except OSError as error:  # e.g. EACCES: one unreadable outbox holds up no other
                self.log.warning("outbox_unreadable", role=role.name, error=str(error))
                continue
            mine = []
            for name in names:
                path = role.path(Box.OUTBOX, name)
                present.add(path)
                if hf.is_item(name) and path not in (busy or ()) and self._due(path, now):
                    mine.append((name, role, path))
            queues.append(mine)
        # A deferred original that left its outbox (taken back, or archived by recovery)
        # must not keep its timer: a due time in the past makes the loop wait 0 s forever.
        self.retries = {path: r for path, r in self.retries.items() if path in present}
        if self.arrivals is not None:
            self.arrivals.prune(present, listed)
        self.settling, self._unsure, wall = {}, {}, self.clock()
        chosen: list[tuple[str, Role, str]] = []
        self.backlog = False
        for item in files.in_turn(queues):  # settled files only, so a flood's checks stay bounded
            if len(chosen) == BATCH_LIMIT:
                self.backlog = True
                break
            if self._settled(item[2], now, wall):
                chosen.append(item)
        chosen = self._confirmed(chosen, now, wall)
        return [(role, path) for _, role, path in sorted(chosen, key=lambda item: item[0])]

    def _settled(self, path: str, now: float, wall: float) -> bool:
        """Whether `path` is whole (see settle.py); if not, when to look again."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return False
        said = self.arrivals.said(path, info) if self.arrivals is not None else None
        renamed, unsure = settle.renamed(said, info)
        delay = settle.wait(info, wall, writing=False, renamed=renamed)
        if not delay and stat.S_ISREG(info.st_mode) and settle.being_written(path):
            delay = settle.RECHECK
        if delay:
            self.settling[path] = now + delay
        elif unsure:
            self._unsure[path] = info
        return not delay

    def _confirmed(
        self, chosen: list[tuple[str, Role, str]], now: float, wall: float
    ) -> list[tuple[str, Role, str]]:
        """`chosen`, less the files a sync shows were written in place (settle.renamed):
        taken as links on a `created` event, they may have had writes still on their way."""
        if not self._unsure or self.arrivals is None:
            return chosen
        synced = self.arrivals.sync({os.path.dirname(p) for p in self._unsure})
        kept = []
        for item in chosen:
            info = self._unsure.get(item[2])
            if info is not None:
                caught_up = os.path.dirname(item[2]) in synced
                said = self.arrivals.said(item[2], info) if caught_up else None
                delay = settle.wait(
                    info, wall, writing=False, renamed=settle.renamed(said, info)[0]
                )
                if delay:
                    self.settling[item[2]] = now + delay
                    continue
            kept.append(item)
        return kept

    def _stage(self, sender: Role, path: str, roles: dict[str, Role], now: float) -> Entry | None:
        """Check an original and stage its copies; None if it failed, was deferred or is gone."""
        name = os.path.basename(path)
        problem = hf.name_problem(name)
        if problem is not None:  # before it is read: such a name never reaches an inbox
            self._fail(sender, path, problem, now)
            return None
        try:
            identity = files.identity(path)
            data = checks.read_entry(path)
            handoff, recipients, roles = self._inspect(data, name, sender, roles)
        except checks.Refused as refusal:
            self._fail(sender, path, str(refusal), now)
            return None
        except FileNotFoundError:
            return None  # taken back by its sender: nothing to do
        except OSError as error:
            self._defer(path, error, now, sender)
            return None
        if any(Box.NEW in self.linked.get(name, {}) for name in recipients):
            return None  # held in the outbox, every copy or none (see `survey`)
        here = self.local(roles)
        remote = [name for name in recipients if name not in here]
        if remote and self.outgoing is None:
            self._unreachable(path, remote, now)
            return None
        copies: list[tuple[str, str]] = []
        try:
            for recipient in recipients:
                if recipient in here:
                    copies.append(files.stage_copy(handoff, roles[recipient], name))
        except OSError as error:
            files.unstage(copies)
            self._defer(path, error, now, sender)
            return None
        return Entry(sender.name, path, identity, sender.path(Box.SENT), copies, recipients,
                     remote, stamp=hf.iso_now() if remote else None)  # fmt: skip

    def _inspect(
        self, data: bytes, name: str, sender: Role, roles: dict[str, Role]
    ) -> tuple[hf.Handoff, list[str], dict[str, Role]]:
        """`checks.inspect`, but a recipient unknown to our view of roles.tsv is looked up
        in the file as it is now: the helper that queued it may have read a newer one."""
        try:
            return (*checks.inspect(data, name, sender.name, set(roles)), roles)
        except checks.UnknownRecipient:
            if self.reload_roles is None:
                raise
        try:
            fresh = self.reload_roles()
        except config.ConfigError as error:  # half-written, say: try again, never refuse
            raise OSError(errno.EAGAIN, f"roles.tsv cannot be read: {error}") from None
        return (*checks.inspect(data, name, sender.name, set(fresh)), fresh)

    def _commit(self, entries: list[Entry], now: float, keep: list[Entry] | None = None) -> bool:
        """Make the staged copies and the journal durable: the pass's point of no return.
        The journal still lists `keep` (unfinished entries of earlier passes)."""
        try:
            files.sync(files.parents(staged for e in entries for staged, _ in e.copies))
            self._moved(journal.commit(self.journal, [*(keep or []), *entries], atomic=bool(keep)))
            self._written = files.signature([*(keep or []), *entries])
        except OSError as error:
            for entry in entries:
                files.unstage(entry.copies)
                self._defer(entry.original, error, now)
            return False
        return True

    def _publish(self, entries: list[Entry], now: float) -> tuple[list[Entry], list[Entry]]:
        """Rename staged copies into view and archive the originals, entry by entry: one
        that fails is left for a later retry and holds up no other.  Idempotent, so a crash
        at any point is finished by running it again.  Returns the entries whose copies
        came into view now, and the entries left unfinished."""
        landed: list[Entry] = []
        unfinished: list[Entry] = []
        revealed: list[Entry] = []
        waiting: list[Entry] = []  # remote copies not all acknowledged: not archived yet
        for entry in entries:
            try:
                now_in_view = [self._reveal(staged, final) for staged, final in entry.copies]
                if any(now_in_view):
                    landed.append(entry)
                if entry.unacked and files.archived(entry):
                    # archived only once every remote copy was acknowledged: a crash after the
                    # archive, before the journal was trimmed, left stale acknowledgements
                    entry.acked = list(entry.remote)
                (waiting if entry.unacked else revealed).append(entry)
            except OSError as error:
                self._stuck(entry, error, now, unfinished)
        unsynced = files.sync(
            files.parents(final for e in revealed + waiting for _, final in e.copies)
        )
        for entry in waiting:
            self._send_remote(entry, now)
            unfinished.append(entry)
        archived = []
        for entry in revealed:
            try:
                if unsynced.intersection(files.parents(final for _, final in entry.copies)):
                    raise OSError(errno.EIO, "the recipient's new/ could not be flushed")
                files.archive(entry)
                archived.append(entry)
            except OSError as error:
                self._stuck(entry, error, now, unfinished)
        unsynced = files.sync(
            files.parents(e.original for e in archived) + [e.sent for e in archived]
        )
        for entry in archived:
            if unsynced.intersection([os.path.dirname(entry.original), entry.sent]):
                self._stuck(entry, OSError(errno.EIO, "its archive could not be flushed"), now,
                            unfinished)  # fmt: skip
            else:
                self.retries.pop(entry.original, None)
        return landed, unfinished

    def _settle_journal(self, remaining: list[Entry]) -> None:
        """Keep only the unfinished entries in the journal, replaced atomically so that a
        crash never loses one; a journal that cannot be rewritten keeps its older, larger
        list, whose finished entries replay as no-ops."""
        if not remaining:
            try:
                self._moved(journal.clear(self.journal))
            except OSError as error:  # a FIFO planted there, say: the next commit replaces it
                self.log.warning("journal_not_rewritten", error=str(error))
            self._written = files.signature([])
            return
        if files.signature(remaining) == self._written:
            return  # entries waiting on the stream: the journal already says just this
        try:
            journal.commit(self.journal, remaining, atomic=True)
            self._written = files.signature(remaining)
        except OSError as error:
            self.log.warning("journal_not_rewritten", error=str(error))

    def _moved(self, aside: str | None) -> None:
        """Say that the journal had another name too (a hard link), and was moved aside."""
        if aside is not None:
            self.log.warning("linked_file_moved", file=self.journal, moved_to=aside)

    def _stuck(self, entry: Entry, error: OSError, now: float, unfinished: list[Entry]) -> None:
        """A committed entry that cannot be finished now: retried alone, with backoff."""
        unfinished.append(entry)
        delay = self._backoff(entry.original, now, reason_of(error))
        self.log.warning(
            "publish_stuck", file=os.path.basename(entry.original), sender=entry.sender,
            reason=reason_of(error), retry_in=delay,
        )  # fmt: skip

    def _reveal(self, staged: str, final: str) -> bool:
        """Rename a staged copy into view; True if this call did it."""
        if not os.path.lexists(staged):
            return False  # published before a crash; the recipient may have taken it since
        if os.path.lexists(final):
            # A name in new/ is still unread: an earlier handoff of that name, or one put
            # back by `release`.  The same copy presented again is dropped; a different
            # file gets a distinct name (as archives do), so nobody's mail is lost.
            if files.same_copy(staged, final):
                durable.unlink_quietly(staged)
                self.log.warning("duplicate_skipped", file=final)
                return False
            directory = os.path.dirname(final)
            final = os.path.join(directory, durable.free_name(directory, os.path.basename(final)))
            self.log.warning("renamed_on_arrival", file=os.path.basename(staged), to=final)
        os.rename(staged, final)
        return True

    def _fail(self, sender: Role, path: str, reason: str, now: float) -> None:
        """Move a bad original to failed/ with `<name>.error` beside it; nobody gets a copy."""
        try:
            failed.refuse(sender, path, reason)
        except OSError as error:
            self._defer(path, error, now)
            return
        self.retries.pop(path, None)
        self.refused_senders.add(sender.name)
        self.log.warning("failed", file=os.path.basename(path), sender=sender.name, reason=reason)

    def _defer(self, path: str, error: OSError, now: float, sender: Role | None = None) -> None:
        """Leave the original in its outbox and try again later, waiting longer each time;
        an error no retry can cure (a name too long, say) fails it instead."""
        if sender is not None and error.errno in PERMANENT:
            self._fail(sender, path, f"cannot be delivered: {reason_of(error)}", now)
            return
        delay = self._backoff(path, now, reason_of(error))
        self.log.warning(
            "deferred", file=os.path.basename(path), reason=reason_of(error),
            attempt=self.retries[path].attempts, retry_in=delay,
        )  # fmt: skip

    def _backoff(self, path: str, now: float, reason: str) -> float:
        """Schedule the next try of `path`, waiting twice as long as last time; the delay.
        It waits since its first deferral, for the latest `reason`."""
        previous = self.retries.get(path)
        attempts = previous.attempts + 1 if previous else 1
        delay = limits.retry_delay(attempts)
        since = previous.since if previous else self.clock()
        self.retries[path] = Retry(attempts, now + delay, reason, since)
        return delay

    def held(self) -> dict[str, tuple[float, str]]:
        """Each original waiting in an outbox for a retry: since when, and why."""
        return {path: (retry.since, retry.reason) for path, retry in self.retries.items()}
