"""Filesystem events that tell the daemon to run a pass now instead of at the next rescan.

Each watch is non-recursive (a recursive watch on a handoff tree would add one inotify
watch per batch dir in `completed/`).  watchdog pairs the two halves of a rename only
within one watch, and holds an unpaired IN_MOVED_FROM up to 0.5 s in case its other
half comes, with every later event of that watch queued behind it.  Archiving an
original (outbox/ → sent/) is such a move, so the next handoff would wait half a
second: the daemon only needs "look now", never paired moves, so the hold is off.

Events only say "look now".  Inotify queues overflow and watched directories get
deleted and recreated, so the daemon also rescans periodically, and `update` re-arms a
watch whose directory was replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

from handoffd.config import Box

TRIGGERS = frozenset({"roles.tsv", "stop"})  # besides outbox/*.handoff
ARRIVALS = frozenset({"created", "moved", "modified", "closed"})  # a deletion brings no work


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
    directory, name = os.path.split(path)
    if name in TRIGGERS:
        return True
    return (
        name.endswith(".handoff")
        and not name.startswith(".")
        and directory.endswith(os.sep + Box.OUTBOX)
    )


class _Handler(FileSystemEventHandler):
    def __init__(self, on_change: Callable[[], None]) -> None:
        self.on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        # A move counts by where it lands: the daemon's own outbox → sent/ moves do not.
        path = getattr(event, "dest_path", "") or event.src_path
        arrival = event.event_type in ARRIVALS and not event.is_directory
        if arrival and is_trigger(os.fsdecode(path)):
            self.on_change()


class Watcher:
    """Keeps one watch per directory of interest; call `update` on every rescan."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        _no_move_pairing()
        self.handler = _Handler(on_change)
        self.observer = Observer()
        self.watches: dict[str, tuple[tuple[int, int], ObservedWatch]] = {}
        self.observer.start()

    def update(self, directories: list[str]) -> list[str]:
        """Watch exactly `directories` (those that exist); returns the ones newly armed."""
        armed = []
        for directory in set(self.watches) - set(directories):
            self._unwatch(directory)
        # The inode alone cannot tell a recreated directory (ext4 gives a deleted directory's
        # inode number to the next one at once), but the old watch stopped when its
        # directory was deleted.
        live = {e.watch for e in self.observer.emitters if e.should_keep_running()}
        for directory in directories:
            identity = _identity(directory)
            current = self.watches.get(directory)
            if current and current[0] == identity and current[1] in live:
                continue
            if current:
                self._unwatch(directory)
            if identity is not None:
                watch = self.observer.schedule(self.handler, directory, recursive=False)
                self.watches[directory] = (identity, watch)
                armed.append(directory)
        return armed

    def stop(self) -> None:
        self.observer.stop()
        self.observer.join(timeout=5)

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
