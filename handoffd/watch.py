"""Filesystem events that tell the daemon to run a pass now instead of at the next rescan.

Each watch is non-recursive (a recursive watch on a handoff tree would add one inotify
watch per batch dir in `completed/`).  Each role's `sent/` and `failed/` are watched
beside its `outbox/` on purpose: when a file is renamed out of a watched directory
into an unwatched one, watchdog holds that watch's events ~0.5 s waiting for the
matching half of the move; with both ends watched the move pairs at once.

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
        if not event.is_directory and is_trigger(os.fsdecode(path)):
            self.on_change()


class Watcher:
    """Keeps one watch per directory of interest; call `update` on every rescan."""

    def __init__(self, on_change: Callable[[], None]) -> None:
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
