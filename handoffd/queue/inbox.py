"""The inbox state machine: `new/ → in_process/ → completed/`, one task or one batch at a time.

This module owns every inbox transition, and each one is a rename: a file is claimed
by renaming it out of `new/`, so at any instant it sits in exactly one folder and a
process killed mid-way leaves a shape the next call handles.  Every check runs before
the first rename or stamp.  Pure decisions (`queue/items`'s `current_*`) take a listing
and either name the work in process or raise a `Refusal`; the lock and the refusal of a
linked folder are `queue/lock`'s; the `Inbox` methods do the I/O.

A rename survives a power cut only once both folders it touched are fsynced, so each
folder a step changed is fsynced once when the step ends, before its tokens are printed
(one flush per folder per step, however many files moved).  Where a later rename would
outlive an earlier change it depends on, the earlier one is flushed first: a batch dir's
stamps before the dir moves, a new batch dir's mkdir before files move into it, a
released batch's files before the emptied dir is removed.
"""

from __future__ import annotations

import itertools
import os

from handoffd.core import durable
from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.core.handoff import FILE, FOLDER
from handoffd.core.outcome import BUSY_MESSAGE, Exit, Refusal
from handoffd.queue.items import (
    BLOCKED,
    FOLDERS,
    Item,
    Listing,
    Seen,
    Work,
    current_batch,
    current_task,
    current_work,
    names_match,
    not_ready,
    priority,
)
from handoffd.queue.lock import Busy, hold, refuse_linked

TYPE_CHECKING = False  # helpers import this module: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from handoffd.queue.items import Done


# --- the I/O layer --------------------------------------------------------------------


class Inbox:
    """A role's inbox, rooted at its handoff directory.

    Use it as a context manager around a transition: it holds an `flock` on the inbox
    folder, so two helpers of one role started at once act one after the other instead
    of both claiming work.  The kernel drops the lock if the holder dies; one held by a
    live process for longer than `LOCK_WAIT` is `Busy` (`INBOX_BUSY`, naming `role`).
    """

    def __init__(self, handoffs: str, role: str = "", pool: tuple[str, str] | None = None) -> None:
        self.role = role or handoffs
        # a pool member's pool (docs/protocol.md §17): its name and its H, whose `new/` the
        # member claims from once its own `new/` holds nothing ready
        self.pool, self.pool_new = pool or ("", "")
        if pool:
            self.pool_new = os.path.join(pool[1], Box.NEW)
        self.root = os.path.join(handoffs, "inbox")
        self.new = os.path.join(handoffs, Box.NEW)
        self.in_process = os.path.join(handoffs, Box.IN_PROCESS)
        self.completed = os.path.join(handoffs, Box.COMPLETED)
        self._lock: int | None = None
        self._unsynced: dict[str, None] = {}  # folders changed since their last fsync
        self.seen = Seen()  # what this step listed and read (the live file's, after it)

    def __enter__(self) -> Inbox:
        refuse_linked(os.path.dirname(self.root), FOLDERS, "nothing was taken or changed")
        if self.pool:
            refuse_linked(os.path.dirname(os.path.dirname(self.pool_new)), (Box.NEW,),
                          "nothing was taken or changed")  # fmt: skip
        durable.makedirs(self.root)
        self.seen = Seen()  # a step's own: nothing kept from an earlier one
        self._lock = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        if not hold(self._lock):
            os.close(self._lock)
            self._lock = None
            raise Busy(Exit.BUSY, BUSY_MESSAGE.format(role=self.role))
        return self

    def __exit__(self, failed: object, *_: object) -> None:
        try:
            if failed is None:
                self.sync()  # before the caller prints what the step did
        finally:
            if self._lock is not None:
                os.close(self._lock)  # releases the lock
                self._lock = None

    def sync(self) -> None:
        """Make every change so far durable: fsync each folder changed, once.  A folder
        removed since (a released batch's) has nothing left to flush."""
        while self._unsynced:
            folder = next(iter(self._unsynced))
            try:
                durable.fsync_dir(folder)
            except FileNotFoundError:
                pass
            del self._unsynced[folder]

    def _changed(self, *paths: str) -> None:
        """Note that the folders holding `paths` have changed entries."""
        for path in paths:
            self._unsynced[os.path.dirname(path)] = None

    # reading

    def listing(self) -> Listing:
        """What is in process.  An empty batch dir is a take killed right after its mkdir:
        it holds no work, so it is removed rather than shown as a batch of nothing."""
        files, batches = [], []
        for name, kind in self._entries(self.in_process, sweep=True):
            path = os.path.join(self.in_process, name)
            if kind == FILE and _plain_item(name):
                files.append(path)
            elif kind == FOLDER and _batch_name(name):
                if self.batch_items(path):
                    batches.append(path)
                else:
                    self._removed(path)  # fails, harmlessly, if a stray non-item is left
        return Listing(files, batches)

    def _entries(self, directory: str, sweep: bool = False) -> list[tuple[str, str]]:
        """The visible entries of one of the role's own folders, by name: listed on the
        step's first look, then as the step's own changes left them (`Seen`).  With
        `sweep` (what is in process), the same listing removes the stamping temp files a
        killed helper left: while we hold the inbox lock no other helper of this role is
        writing one, so any found are strays (never in `new/`: the daemon delivers there
        without the lock).  Without the lock nothing is kept: each look lists again."""
        if self._lock is None:
            return sorted(_listed(directory, False).items())
        known = self.seen.folders.get(directory)
        if known is None:
            known = self.seen.folders[directory] = _listed(directory, sweep)
        return sorted(known.items())  # queue (byte) order, whatever moved in since

    def waiting(self) -> list[str]:
        """Paths of the files waiting in `new/`, in queue (byte) order."""
        return [os.path.join(self.new, name) for name, kind in self._entries(self.new)
                if kind == FILE and _plain_item(name)]  # fmt: skip

    def pooled(self) -> list[str]:
        """Paths of the files waiting in the pool's `new/`, in queue order (none without a
        pool).  Other members claim from it meanwhile: a path may be gone when read."""
        if not self.pool:
            return []
        return [e.path for e in hf.visible(self.pool_new) if hf.is_item_entry(e, plain=True)]

    def batch_items(self, batch: str) -> list[str]:
        """The files of a batch dir in process (its stamping temps swept, as `listing`)."""
        return [os.path.join(batch, name) for name, kind in self._entries(batch, sweep=True)
                if kind == FILE and _plain_item(name)]  # fmt: skip

    def work(self, directory: str) -> Work:
        """The work a task file or a batch dir in process stands for."""
        return (
            Work(directory, self.batch_items(directory))
            if os.path.isdir(directory)
            else (Work(directory, [directory]))
        )

    def current(self) -> Work:
        """The work in process, whatever its shape; refuses when there is none."""
        found = current_work(self.listing())
        if found is None:
            raise Refusal(Exit.FAILED, "NO_CURRENT_TASK")
        return self.work(found)

    def in_process_named(self, ident: str) -> tuple[Work, str] | None:
        """The work in process holding the file `ident` names, and that file (None if none)."""
        listing = self.listing()
        shapes = [self.work(path) for path in listing.files + listing.batches]
        pairs = [(work, path) for work in shapes for path in work.files]
        index = _named(ident, [path for _, path in pairs])
        return None if index is None else pairs[index]

    def copies_named(self, ident: str) -> list[str]:
        """The role's copies in `new/` or in process that `ident` names."""
        listing = self.listing()
        paths = self.waiting() + listing.files
        paths += [path for batch in listing.batches for path in self.batch_items(batch)]
        index = _named(ident, paths)
        return [] if index is None else [paths[index]]

    def handoff(self, path: str) -> hf.Handoff:
        """`hf.read`, kept in `seen` as `_read` keeps what it reads."""
        known = self.seen.read.get(path) if self._lock is not None else None
        if known is None:
            known = self.seen.read[path] = hf.read(path)
        return known

    def _read(self, path: str) -> Item:
        """`_load`, kept in `seen`: the Item's handoff is what the step then stamps and
        writes back, so what is kept stays what the file holds.  A file read once is not
        read again: under the lock only this step changes it."""
        known = self.seen.read.get(path) if self._lock is not None else None
        if known is not None:
            return Item(path, known)
        item = _load(path)
        self.seen.read[path] = item.handoff
        return item

    # every rename, mkdir and rmdir of a step goes through these, so `seen` stays true

    def _claimed(self, source: str, target: str) -> bool:
        """`_claim`, kept in `seen`."""
        if not _claim(source, target):
            self.seen.gone(source)
            return False
        self.seen.moved(source, target, FILE)
        return True

    def _moved(self, source: str, target: str, kind: str = FILE) -> None:
        """`_move`, kept in `seen`."""
        _move(source, target)
        self.seen.moved(source, target, kind)

    def _removed(self, path: str) -> None:
        """`_rmdir_quietly`, kept in `seen`."""
        if _rmdir_quietly(path):
            self.seen.gone(path)

    def _resumed(self, path: str) -> Item:
        """Load work already taken; a take killed before its stamp gets the stamp now (a
        copy claimed from the pool, its `claimed_by` too)."""
        item = self._read(path)
        if item.handoff.get(hf.DEQUEUED_AT) is not None:
            return item
        self._changed(path)
        return self._stamp_taken(item, self.pool and item.handoff.get(hf.RECIPIENT) == self.pool)

    def _stamp_taken(self, item: Item, pooled: object) -> Item:
        """Stamp `dequeued_at` (and `claimed_by: <member>` on a copy claimed from the pool)
        in one rewrite, after the rename that took it."""
        if pooled:
            item.handoff.set(hf.CLAIMED_BY, self.role)
        self.seen.read[item.path] = item.handoff
        return _stamp(item, hf.DEQUEUED_AT)

    def pool_items(self) -> Iterator[Item]:
        """The files of the pool's `new/` a member may be handed, in queue order, each read
        as it comes: one another member claimed since the listing is skipped (a lost race
        is no error), and so is one that is no handoff (docs/protocol.md §17: one bad file
        stops no pool; the board shows it red, with why)."""
        for path in self.pooled():
            item = _load_pooled(path)
            if item is not None:
                yield item

    def pool_reasons(self, done: Done | None) -> list[str]:
        """Why each file of the pool's `new/` that is not ready is not (`not_ready`)."""
        return [why for item in self.pool_items() if (why := not_ready(item, done)) is not None]

    def _ready_pooled(self, done: Done | None) -> Item | None:
        """The first file in the pool's `new/` that is ready."""
        return next((item for item in self.pool_items() if not_ready(item, done) is None), None)

    # task mode

    def ready(self, done: Done | None) -> tuple[list[Item], list[str]]:
        """The files waiting in `new/` that are ready to take, in queue order, and why each
        of the others is not (docs/protocol.md §13).  Reads each waiting file; a file that
        is not a handoff is refused as before, wherever it stands."""
        ready, reasons = [], []
        for path in self.waiting():
            item = self._read(path)
            reason = not_ready(item, done)
            if reason is None:
                ready.append(item)
            else:
                reasons.append(reason)
        return ready, reasons

    def first_ready(self, done: Done | None) -> Item | None:
        """The first waiting file that is ready, reading no further than it."""
        for path in self.waiting():
            item = self._read(path)
            if not_ready(item, done) is None:
                return item
        return None

    def take_task(self, done: Done | None = None) -> Item | None:
        """Resume the task in process, or claim the first waiting one that is ready; None
        if there is none."""
        current = current_task(self.listing(), finishing=False)
        if current:
            return self._resumed(current)
        while first := self.first_ready(done) or self._ready_pooled(done):
            target = os.path.join(self.in_process, os.path.basename(first.path))
            if self._claimed(first.path, target):
                self._changed(first.path, target)  # the stamp's rename is in target's folder
                pooled = os.path.dirname(first.path) == self.pool_new
                return self._stamp_taken(Item(target, first.handoff), pooled)
        return None

    def finish_task(self) -> list[str]:
        """Complete the task in process; returns its path in `completed/`."""
        current = current_task(self.listing(), finishing=True)
        if current is None:
            raise Refusal(Exit.FAILED, "NO_CURRENT_TASK")
        item = _complete(self._read(current), hf.iso_now())
        target = os.path.join(self.completed, durable.free_name(self.completed, _name(current)))
        # No flush between the stamp and the move: both change in_process/ (a folder's
        # changes persist in order) and the move carries the stamped file itself.
        self._moved(item.path, target)
        self._changed(item.path, target)
        return [target]

    # batch mode

    def take_batch(self, done: Done | None = None) -> tuple[str, list[Item]] | None:
        """Resume the batch in process, or claim every ready waiting file of the first ready
        file's priority into a new batch dir; None if nothing ready waits."""
        current = current_batch(self.listing(), finishing=False)
        if current:
            return current, [self._resumed(p) for p in self.batch_items(current)]
        while waiting := self.ready(done)[0] or self._pool_ready(done):
            wanted = priority(waiting[0].handoff)
            batch = self._new_batch_dir()
            items = []
            for item in (i for i in waiting if priority(i.handoff) == wanted):
                target = os.path.join(batch, _name(item.path))
                if self._claimed(item.path, target):
                    self._changed(item.path, target)
                    pooled = os.path.dirname(item.path) == self.pool_new
                    items.append(self._stamp_taken(Item(target, item.handoff), pooled))
            if items:
                return batch, items
            self._removed(batch)  # every file of it taken by other members: look again
        return None

    def _pool_ready(self, done: Done | None) -> list[Item]:
        """The ready files of the pool's `new/`, in queue order."""
        return [item for item in self.pool_items() if not_ready(item, done) is None]

    def finish_batch(self) -> tuple[str, list[str]]:
        """Complete the batch in process; returns its dir in `completed/` and its files."""
        current = current_batch(self.listing(), finishing=True)
        if current is None:
            raise Refusal(Exit.FAILED, "NO_CURRENT_BATCH")
        items = [self._read(path) for path in self.batch_items(current)]
        stamp = hf.iso_now()  # one completed_at for the batch: audits group its files by it
        for item in items:
            _complete(item, stamp)
        # The stamps are changes inside the batch dir, the move one of its parents: flushed
        # in that order, or a power cut could keep the moved batch without its stamps.
        durable.fsync_dir(current)
        target = os.path.join(self.completed, durable.free_name(self.completed, _name(current)))
        self._moved(current, target, FOLDER)
        self._changed(current, target)
        return target, [os.path.join(target, _name(item.path)) for item in items]

    # either mode

    def release(self, ident: str | None = None, now: float | None = None) -> list[str]:
        """Put the work in process back into `new/` (all of a batch, whichever file `ident`
        names), stamped `released_at`; returns the paths in `new/`."""
        work = self._named_or_current(ident)
        items = [self._read(path) for path in work.files]
        back = [self._back_to(item) for item in items]  # a pool's copy: the pool's new/ (§17)
        clashes = [i.path for i, new in zip(items, back, strict=True)
                   if os.path.lexists(os.path.join(new, _name(i.path)))]  # fmt: skip
        if clashes:
            raise Refusal(
                Exit.REFUSED, "RELEASE_CONFLICT: a file of that name is already in new/.", clashes
            )
        stamp = hf.iso_now(now)
        # stamp in place first, then rename: a crash between leaves the work in process
        # (resumable, releasable again), never a half-stamped file in new/
        for item, new in zip(items, back, strict=True):
            if new != self.new:
                _drop(item.handoff, hf.CLAIMED_BY)
            item.handoff.set(hf.RELEASED_AT, stamp)
            durable.replace(item.path, item.handoff.render())
        targets = [
            os.path.join(new, _name(item.path)) for item, new in zip(items, back, strict=True)
        ]
        for item, target in zip(items, targets, strict=True):
            self._moved(item.path, target)
            self._changed(item.path, target)
        if work.batch:
            self.sync()  # the files out of the batch dir before the dir's removal persists
            self._removed(work.path)
            self._changed(work.path)
        return targets

    def give_back(
        self,
        pool_new: str,
        at: str,
        why: Callable[[hf.Handoff], str | None],
        note: Callable[[str, str], None],
    ) -> list[str]:
        """Put every copy this member claimed from its pool that `why` gives a reason for
        back into the pool's `new/` (docs/protocol.md §17), stamped `reclaimed_at`,
        `reclaimed_from` and without `dequeued_at` and `claimed_by`; returns their paths
        there.  Direct mail stays.

        Rewritten in place first (under this member's lock, so none of its helpers is
        touching it), then one rename: a rewrite after the rename would race the other
        members' claims, and could leave a second copy behind the one claimed.  A crash
        between leaves a copy in process without `dequeued_at`, which a take resumes and
        stamps, and the daemon's next pass gives back.  `note(name, why)` is told of each
        copy before it moves, for the member's `RECLAIMED:` line."""
        listing = self.listing()
        paths = listing.files + [p for batch in listing.batches for p in self.batch_items(batch)]
        moved = []
        for path in paths:
            try:
                item = self._read(path)
            except Refusal:
                continue  # not a handoff: the member's own helper says so, nothing to give
            if item.handoff.get(hf.RECIPIENT) != self.pool or not self.pool:
                continue  # direct mail to the member: never reclaimed
            target = os.path.join(pool_new, _name(path))
            if os.path.lexists(target):
                continue  # a copy of that name waits already: never replaced
            reason = why(item.handoff)  # asked before anything changes: dequeued_at goes
            if reason is None:
                continue
            note(_name(path), reason)
            for key in (hf.DEQUEUED_AT, hf.CLAIMED_BY):
                _drop(item.handoff, key)
            item.handoff.set(hf.RECLAIMED_AT, at)
            item.handoff.set(hf.RECLAIMED_FROM, self.role)
            durable.replace(path, item.handoff.render())
            durable.fsync_dir(os.path.dirname(path))  # the rewrite before the rename
            self._moved(path, target)
            self._changed(path, target)
            moved.append(target)
        for batch in listing.batches:
            if not self.batch_items(batch):
                self.sync()
                self._removed(batch)
                self._changed(batch)
        return moved

    def _back_to(self, item: Item) -> str:
        """Where released work goes: a copy claimed from the pool back to the pool's `new/`
        (any member may take it), anything else to the role's own."""
        return (
            self.pool_new if self.pool and item.handoff.get(hf.RECIPIENT) == self.pool else self.new
        )

    def held(self, name: str) -> bool:
        """Whether a file called `name` waits in `new/` or is in process (a batch's too)."""
        listing = self.listing()
        paths = self.waiting() + listing.files
        paths += [path for batch in listing.batches for path in self.batch_items(batch)]
        return any(_name(path) == name for path in paths) or os.path.lexists(
            os.path.join(self.new, name)
        )

    def reopen(
        self, path: str, reason: str | None = None, now: float | None = None, by: str = ""
    ) -> str:
        """Move the completed copy at `path` back into `new/`, without its `completed_at`,
        `dequeued_at` and `blocked_reason`, stamped `reopened_at` (and `reopened_by`,
        `reopened_reason`: who and why, for its next TASK block); its path in `new/`.
        The caller checked that no file of its name is in `new/` or in process.

        Moved first, then rewritten in place: a kill between leaves an open copy still
        carrying its old stamps, which taking and finishing stamp anew (and the rewrite's
        temp, in `new/`, is what the daemon sweeps at start); never two copies, and never
        a temp file in `completed/`, which nothing lists on a hot path to sweep."""
        item = self._read(path)
        target = os.path.join(self.new, _name(path))
        self._moved(path, target)
        self._changed(path, target)
        before = hf.reopen_count(item.handoff.get(hf.REOPENS), item.handoff.get(hf.REOPENED_AT))
        item.handoff.set(hf.REOPENED_SPANS, hf.life_spans(item.handoff))  # before its stamps go
        for key in (hf.COMPLETED_AT, hf.DEQUEUED_AT, BLOCKED, hf.REOPENED_REASON, hf.REOPENED_BY):
            _drop(item.handoff, key)
        item.handoff.set(hf.REOPENED_AT, hf.iso_now(now))
        item.handoff.set(hf.REOPENS, str(before + 1))
        if by:
            item.handoff.set(hf.REOPENED_BY, by)
        if reason:
            item.handoff.set(hf.REOPENED_REASON, reason)
        durable.replace(target, item.handoff.render())
        folder = os.path.dirname(path)
        if folder != self.completed:  # a completed batch left empty is removed
            self.sync()
            self._removed(folder)
            self._changed(folder)
        return target

    def _named_or_current(self, ident: str | None) -> Work:
        if ident is None:
            return self.current()
        found = self.in_process_named(ident)
        if found is None:
            if current_work(self.listing()) is None:
                raise Refusal(Exit.FAILED, "NO_CURRENT_TASK")
            raise Refusal(Exit.REFUSED, f"NOT_IN_PROCESS: {ident}")
        return found[0]

    def set_header(self, ident: str | None, key: str, value: str | None) -> list[str]:
        """Set (or, with None, remove) a header on the copy `ident` names in `new/` or in
        process, or on every file of the work in process; returns the paths.  Without
        `ident`, a value for a batch is set only on its files that have none: a value
        someone put on one file of it (an operator's reason) is never replaced unasked."""
        if ident is None:
            paths = self.current().files
        else:
            paths = self.copies_named(ident)
            if not paths:
                raise Refusal(Exit.REFUSED, f"UNKNOWN_HANDOFF: {ident}")
        items = [self._read(path) for path in paths]  # every file read before any is written
        if ident is None and value is not None and len(items) > 1:
            items = [item for item in items if item.handoff.get(key) is None]
            paths = [item.path for item in items]
        for item in items:
            if value is not None:
                item.handoff.set(key, value)
            elif item.handoff.get(key) is None:
                continue
            else:
                _drop(item.handoff, key)
            durable.replace(item.path, item.handoff.render())
            self._changed(item.path)
        return paths

    def close(self, name: str, stamps: list[tuple[str, str]]) -> str:
        """Complete the copy called `name` waiting in `new/` without taking it (the
        operator's reply or acknowledgement, docs/protocol.md §18): stamped `completed_at`
        and `stamps` in place, then moved to `completed/`; its path there.  A kill between
        leaves it waiting with the stamps, which the next close sets again."""
        paths = [path for path in self.waiting() if _name(path) == name]
        if not paths:
            raise FileNotFoundError(name)
        item = self._read(paths[0])
        for key, value in stamps:
            item.handoff.set(key, value)
        item = _complete(item, hf.iso_now())  # one rewrite, every stamp in it
        target = os.path.join(self.completed, durable.free_name(self.completed, name))
        self._moved(item.path, target)
        self._changed(item.path, target)
        return target

    def _new_batch_dir(self) -> str:
        """`batch_<time>_<n>`, unique across in_process/ and completed/; mkdir claims it."""
        stamp = hf.id_stamp()
        durable.makedirs(self.in_process)
        for n in itertools.count(1):
            name = f"batch_{stamp}_{n:06d}"
            if os.path.lexists(os.path.join(self.completed, name)):
                continue
            try:
                os.mkdir(os.path.join(self.in_process, name))
            except FileExistsError:
                continue
            self.seen.added(os.path.join(self.in_process, name), FOLDER)
            self.seen.folders[os.path.join(self.in_process, name)] = {}
            # Durable before anything moves in: files claimed into a batch dir whose own
            # entry a power cut then loses would be lost with it.
            durable.fsync_dir(self.in_process)
            self._unsynced.pop(self.in_process, None)
            return os.path.join(self.in_process, name)
        raise AssertionError("unreachable")


# --- small I/O steps ------------------------------------------------------------------


def _name(path: str) -> str:
    return os.path.basename(path)


def _batch_name(name: str) -> bool:
    """A batch dir's name, fit to be printed on a BATCH line: one planted with a control
    character in it is no batch (docs/protocol.md §15, "Names"), and never shown."""
    return name.startswith("batch_") and hf.name_problem(name) is None


def _load(path: str) -> Item:
    """Read a task file, refusing (exit 2, nothing moved) one that is not a handoff."""
    try:
        return Item(path, hf.read(path))
    except hf.HandoffError as error:
        raise Refusal(
            Exit.REFUSED,
            f"INVALID_HANDOFF: {error}. Move the file out of the inbox to go on.",
            [path],
        ) from None


def _load_pooled(path: str) -> Item | None:
    """Read a file of the pool's `new/`; None if another member claimed it meanwhile, or if
    it is no handoff (§4's checks, as `_load` makes them): unlike a role's own `new/`, the
    pool's is every member's, and one file a member cannot take must not stop them all."""
    try:
        return Item(path, hf.read(path))
    except hf.HandoffError:
        return None


def _stamp(item: Item, key: str) -> Item:
    item.handoff.set(key, hf.iso_now())
    durable.replace(item.path, item.handoff.render())
    return item


def _complete(item: Item, stamp: str) -> Item:
    """Stamp `completed_at`; a completed copy is no longer blocked (docs/protocol.md §8)."""
    _drop(item.handoff, BLOCKED)
    item.handoff.set(hf.COMPLETED_AT, stamp)
    durable.replace(item.path, item.handoff.render())
    return item


def _drop(handoff: hf.Handoff, key: str) -> None:
    handoff.headers = [(name, value) for name, value in handoff.headers if name != key]


def _named(ident: str, paths: list[str]) -> int | None:
    """The index of the first file `ident` names: by its file name or the id that spells,
    then, for a hand-made name that spells none, by the id it goes by (`hf.file_id`: its
    plain `id` header).  A header that differs from a §2 name's id is never a key."""
    for index, path in enumerate(paths):
        if names_match(_name(path), ident):
            return index
    for index, path in enumerate(paths):
        if hf.parse_name(_name(path)) is not None:
            continue
        try:
            if hf.file_id(_name(path), hf.read(path).get(hf.ID)) == ident:
                return index
        except hf.HandoffError:
            continue
    return None


def _claim(source: str, target: str) -> bool:
    """Claim `source` by renaming it to `target`; False if someone else took it first."""
    durable.makedirs(os.path.dirname(target))
    try:
        os.rename(source, target)
    except FileNotFoundError:
        return False
    return True


def _move(source: str, target: str) -> None:
    durable.makedirs(os.path.dirname(target))
    os.rename(source, target)


def _rmdir_quietly(path: str) -> bool:
    """Remove an empty folder; whether it went."""
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _plain_item(name: str) -> bool:
    """`hf.is_item_entry(…, plain=True)` of a regular file's name: what an agent takes."""
    return hf.is_item(name) and hf.name_problem(name) is None


def _listed(directory: str, sweep: bool) -> dict[str, str]:
    """The visible entries of `directory`, each name's `hf.kind` (never through a link);
    with `sweep`, the temp files of the same listing removed.  A missing folder is an
    empty one; other errors (an unreadable folder) are the caller's to report."""
    try:
        with os.scandir(directory) as listing:
            entries = list(listing)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {}
    for entry in entries:
        if hf.is_visible(entry.name):
            found[entry.name] = hf.kind(entry)
        elif sweep and durable.is_temp(entry.name):
            durable.unlink_quietly(entry.path)
    return found
