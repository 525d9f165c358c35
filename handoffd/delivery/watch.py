"""Filesystem events: they tell the daemon to run a pass now instead of at the next
rescan, and how each outbox file arrived (settle.py).

Each watch is non-recursive (a recursive watch on a handoff tree would add one inotify
watch per batch dir in `completed/`).  watchdog pairs the two halves of a rename only
within one watch, and holds an unpaired IN_MOVED_FROM up to 0.5 s in case its other
half comes, with every later event of that watch queued behind it.  Archiving an
original (outbox/ → sent/) is such a move, so the next handoff would wait half a
second: the daemon never needs paired moves, so the hold is off.

How a file arrived (settle.py reads it): a rename into the outbox is `moved` (IN_MOVED_TO;
"full" events, so that one from an unwatched folder such as `outbox/tmp/` is not
reported as a creation); a link, or an open that creates the file, is `created`
(IN_CREATE); a write, or a close after writing, is `written`.  `Arrivals` keeps the
latest per outbox file, with the file's identity then, so that a file replaced or
written since is never taken on an older event's word.  A `created` file may be a
writer's, whose writes are still on their way through watchdog's threads; before the
daemon believes such a one arrived whole it asks for a `sync`: a marker file created in
that outbox, and a wait until the marker's own event comes through, by which time every
earlier event of that watch has (inotify keeps one watch's events in order).  With the
lease check first (nobody holds the file open for writing, so every writer's close is
already queued), no writer goes unseen.

Events only say "look now" and "arrived whole".  Inotify queues overflow and watched
directories get deleted and recreated, so the daemon also rescans periodically, a file
with no event falls back to its timestamps, and `update` re-arms a watch whose directory
was replaced.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver, ObservedWatch

from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.delivery import settle
from handoffd.wakeups.wakeup import WAKE

# besides outbox/*.handoff; `H/wake`: a command asks for a wake-up (docs/protocol.md §14)
TRIGGERS = frozenset({"roles.tsv", "stop", WAKE})
ARRIVALS = frozenset({"created", "moved", "modified", "closed"})  # a deletion brings no work
# What each watch asks the kernel for: the events the handler reads.  Not opens nor closes
# without a write: every rescan opens the folders it lists and the files it reads, and a
# watch told of those woke watchdog's threads a few hundred times a rescan in a swarm of
# 32 (a cost that grew with the swarm, for events the handler drops).
EVENTS = [FileCreatedEvent, FileMovedEvent, FileModifiedEvent, FileClosedEvent, FileDeletedEvent]
SAID = {"moved": settle.MOVED, "created": settle.CREATED}  # any other arrival: written
MARKER = ".handoffd-sync."  # the name start of the marker files `sync` creates
SYNC_TIMEOUT = 0.5  # seconds `sync` waits for its marker's event before giving up
_markers = itertools.count()


def _observer() -> BaseObserver:
    """An inotify observer reporting a rename from an unwatched folder as a move."""
    try:
        from watchdog.observers.inotify import InotifyObserver
    except ImportError:  # not Linux: creations and moves look alike, and times decide
        from watchdog.observers import Observer

        return Observer()
    return InotifyObserver(generate_full_events=True)


def _no_move_pairing() -> None:
    """Turn off watchdog's 0.5 s hold of unpaired moves (see above).  The name is watchdog's
    own (7.x); should it move, events are merely late and the rescan still bounds them."""
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:
        return
    InotifyMoveEventGrouper.delay = 0.0


def is_trigger(path: str) -> bool:
    """Whether a change at `path` can give the daemon work (pure)."""
    name = os.path.basename(path)
    return name in TRIGGERS or is_outbox_item(path)


def is_outbox_item(path: str) -> bool:
    """Whether `path` names a queue file in an outbox (pure)."""
    directory, name = os.path.split(path)
    return hf.is_item(name) and directory.endswith(os.sep + Box.OUTBOX)


Identity = tuple[int, int, int]  # inode, size, mtime (ns): what a write or a replacement changes


def identity(info: os.stat_result) -> Identity:
    return info.st_ino, info.st_size, info.st_mtime_ns


class Arrivals:
    """What the events said of each outbox file: arrived whole or written in place, and
    its identity when they said so.  Fed by the watcher's thread, read by the daemon's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, Identity, float]] = {}  # path: said, identity, when
        self._markers: dict[str, threading.Event] = {}

    def note(self, event_type: str, path: str) -> None:
        """Record one event at an outbox queue file's path (watcher thread)."""
        try:
            info = os.lstat(path)
        except OSError:
            self.forget(path)  # gone already: its departure event follows
            return
        said = SAID.get(event_type, settle.WRITTEN)
        with self._lock:  # the latest event decides: a new arrival, or a write after one
            self._seen[path] = (said, identity(info), time.monotonic())

    def forget(self, path: str) -> None:
        with self._lock:
            self._seen.pop(path, None)

    def said(self, path: str, info: os.stat_result) -> str | None:
        """What the events said of the file `info` describes at `path` (settle.MOVED,
        CREATED or WRITTEN: also when it changed since they spoke); None: no event seen."""
        with self._lock:
            seen = self._seen.get(path)
        if seen is None:
            return None
        return seen[0] if seen[1] == identity(info) else settle.WRITTEN

    def prune(self, present: set[str], before: float) -> None:
        """Drop what was noted before `before` (time.monotonic) of files not `present`:
        their departure events were lost (a queue overflow, say)."""
        with self._lock:
            gone = [p for p, (_, _, at) in self._seen.items() if at < before and p not in present]
            for path in gone:
                del self._seen[path]

    def expect(self, marker: str) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._markers[marker] = event
        return event

    def arrived(self, marker: str) -> None:
        with self._lock:
            event = self._markers.pop(marker, None)
        if event is not None:
            event.set()

    def drop(self, marker: str) -> None:
        with self._lock:
            self._markers.pop(marker, None)


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[], None], arrivals: Arrivals) -> None:
        self.on_change = on_change
        self.arrivals = arrivals

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        source = os.fsdecode(event.src_path)
        # A move counts by where it lands: the daemon's own outbox → sent/ moves do not.
        dest = os.fsdecode(getattr(event, "dest_path", "") or "")
        kind = event.event_type
        if os.path.basename(source).startswith(MARKER):
            if kind == "created":
                self.arrivals.arrived(source)
            return
        if kind in ("deleted", "moved"):
            self.arrivals.forget(source)  # gone (a move's source), or replaced by its dest
        path = dest if kind == "moved" else source
        if kind not in ARRIVALS or not path:  # a move out of the watched folder: no arrival
            return
        if is_outbox_item(path):
            self.arrivals.note(kind, path)
        if is_trigger(path):
            self.on_change()


class Watcher:
    """Keeps one watch per directory of interest; call `update` on every rescan."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        _no_move_pairing()
        self.arrivals = Arrivals()
        self.handler = _Handler(on_change, self.arrivals)
        self.observer = _observer()
        self.watches: dict[str, tuple[tuple[int, int], ObservedWatch]] = {}
        self.observer.start()

    def update(self, directories: list[str]) -> list[str]:
        """Watch exactly `directories` (those that exist); returns the ones newly armed."""
        armed = []
        for directory in set(self.watches) - set(directories):
            self._unwatch(directory)
        live = self._live()
        for directory in directories:
            identity = _identity(directory)
            current = self.watches.get(directory)
            if current and current[0] == identity and current[1] in live:
                continue
            if current:
                self._unwatch(directory)
            if identity is not None:
                watch = self.observer.schedule(self.handler, directory, recursive=False,
                                               event_filter=EVENTS)  # fmt: skip
                self.watches[directory] = (identity, watch)
                armed.append(directory)
                _sweep_markers(directory)
        return armed

    def said(self, path: str, info: os.stat_result) -> str | None:
        """What the events said of `path` (see `Arrivals.said`)."""
        return self.arrivals.said(path, info)

    def prune(self, present: set[str], before: float) -> None:
        self.arrivals.prune(present, before)

    def sync(self, directories: Iterable[str], timeout: float = SYNC_TIMEOUT) -> set[str]:
        """Wait until every event the watches of `directories` had queued has been handled;
        the directories for which that is known (a marker could not be made there, or its
        event did not come in time: not known, and then no event of theirs is trusted)."""
        live = self._live()
        waiting = {}
        for directory in directories:
            current = self.watches.get(directory)
            if current is None or current[1] not in live:
                continue
            marker = os.path.join(directory, f"{MARKER}{os.getpid()}.{next(_markers)}")
            arrived = self.arrivals.expect(marker)
            if _touch(marker):
                waiting[directory] = (marker, arrived)
            else:
                self.arrivals.drop(marker)
        deadline = time.monotonic() + timeout
        synced = set()
        for directory, (marker, arrived) in waiting.items():
            if arrived.wait(max(0.0, deadline - time.monotonic())):
                synced.add(directory)
            else:
                self.arrivals.drop(marker)
        return synced

    def stop(self) -> None:
        self.observer.stop()
        self.observer.join(timeout=5)

    def _live(self) -> set[ObservedWatch]:
        # The inode alone cannot tell a recreated directory (ext4 gives a deleted directory's
        # inode number to the next one at once), but the old watch stopped when its
        # directory was deleted.
        return {e.watch for e in self.observer.emitters if e.should_keep_running()}

    def _unwatch(self, directory: str) -> None:
        _, watch = self.watches.pop(directory)
        try:
            self.observer.unschedule(watch)
        except (KeyError, OSError):
            pass  # its directory is already gone, and the watch with it


def _identity(directory: str) -> tuple[int, int] | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _touch(marker: str) -> bool:
    """Create and remove `marker`: its creation is the event `sync` waits for."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(marker, flags, 0o600))
    except OSError:  # a read-only or full outbox: then events are not trusted there
        return False
    try:
        os.unlink(marker)
    except OSError:
        pass  # a hidden empty file, swept when the directory is next armed
    return True


def _sweep_markers(directory: str) -> None:
    """Remove markers a killed daemon left (hidden, empty, never read by anyone)."""
    try:
        with os.scandir(directory) as entries:
            left = [e.path for e in entries if e.name.startswith(MARKER) and e.is_file(
                follow_symlinks=False)]  # fmt: skip
    except OSError:
        return
    for path in left:
        try:
            os.unlink(path)
        except OSError:
            pass
