"""The daemon's log: one JSON object per line in `daemon/handoffd.log` (docs/protocol.md §6),
and the same events rendered for a person on stderr when the daemon runs in a terminal.

Logging is never fatal.  A full disk or an I/O error must not stop deliveries (that is
what the log is about), so a line that cannot be written is counted and dropped, and once
writing works again one `log_dropped` line says how many were lost.  Each line goes out in
a single `write` of the whole line, and a write cut short is cut back off the file, so a
JSON reader never meets half a line.

The log is a file under `.swarmforge/`, where anyone may leave a link, a FIFO or a device
in its place (docs/protocol.md Part II): the daemon never writes through a link nor waits
on a FIFO's reader; it replaces such an entry with a file of its own and says so
(`log_replaced`) on the first line it writes there.  A hard link is never written through
either: a log file that another name shares (found so when it is opened, or at any line)
is moved aside and a new one started (`linked_file_moved`, `durable.open_own`).

A failure that recurs at every pass is logged once per cause (`Repeats`), again when its
cause changes or after it has cleared: a log that repeats one line every rescan buries
the line that matters.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger

from handoffd.core import durable, safeio

_sinks: list[LogFile] = []  # the files `configure` opened, for `reopen` (SIGHUP)
# No link followed; a FIFO swapped in after the check fails to open (no reader) instead of
# waiting for one.  The flag changes nothing for a regular file.
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


class LogFile:
    """An append-only file of whole lines whose `write` never raises."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.dropped = 0  # lines lost since the last one written
        self.torn = False  # a cut-short write could not be cut back: start on a fresh line
        self.replaced: str | None = None  # what stood where the log should be, until said
        self.moved: str | None = None  # where a hard-linked log was moved aside, until said
        self.lock = threading.Lock()  # the wake-up threads log too
        self._open()

    def write(self, line: str) -> bool:
        """Append `line` and a newline; False (and counted) when it could not be written."""
        with self.lock:
            data = line.encode("utf-8", "backslashreplace") + b"\n"
            if self.dropped:
                data = _dropped_line(self.dropped) + data
            if self.fd is not None and _shared(self.fd):
                self._close()  # another name was given to our file: start a file anew
            if self.fd is None:
                self._open()  # before the `log_replaced` line: opening may replace an entry
            if self.replaced:
                data = _replaced_line(self.path, self.replaced) + data
            if self.moved:
                data = _moved_line(self.path, self.moved) + data
            if self.torn:
                data = b"\n" + data
            if not self._append(data):
                self.dropped += 1
                return False
            self.dropped, self.torn, self.replaced, self.moved = 0, False, None, None
            return True

    def drop(self) -> None:
        """Count a line that never reached `write` (it could not be rendered)."""
        with self.lock:
            self.dropped += 1

    def reopen(self) -> None:
        """Close and open the path again: after a rotator renamed the file away."""
        with self.lock:
            self._close()
            self._open()

    def close(self) -> None:
        with self.lock:
            self._close()

    def _open(self) -> None:
        try:
            self.fd = self._open_file()
        except OSError:
            self.fd = None  # e.g. daemon/ removed: try again at the next line

    def _open_file(self) -> int:
        """The log, open for appending.  A link, FIFO or device where it should be is
        removed (the entry itself, never what a link points at) and a file made: the log
        is ours to rewrite, like the pid file.  A folder there is left alone (no log).  A
        file other names share is moved aside, and a new one made (`durable.open_own`)."""
        try:
            fd, aside = durable.open_own(self.path, _FLAGS)
        except safeio.NotRegular:
            found = safeio.kind(os.lstat(self.path).st_mode)
            os.unlink(self.path)  # a folder raises here: it is never removed
            self.replaced = found
            fd, aside = durable.open_own(self.path, _FLAGS)
        self.moved = aside or self.moved
        return fd

    def _close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass  # nothing useful to do: the descriptor is released either way
            self.fd = None

    def _append(self, data: bytes) -> bool:
        """One `write` of all of `data`; a partial write is truncated away again."""
        if self.fd is None:
            self._open()
        if self.fd is None:
            return False
        try:
            size = os.fstat(self.fd).st_size
            written = os.write(self.fd, data)
        except OSError:
            return False
        if written == len(data):
            return True
        # Cut short (the disk filled up part-way): take the fragment back off, so the file
        # ends with a whole line.  Shrinking a file needs no space.  If even that fails,
        # the next line starts with a newline: the fragment then stands alone on its line.
        try:
            os.ftruncate(self.fd, size)
        except OSError:
            self.torn = True
        return False


def _dropped_line(count: int) -> bytes:
    """The line that reports lost lines, written just before the first one that got through."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")  # as TimeStamper writes it
    entry = {"dropped": count, "event": "log_dropped", "level": "warning", "timestamp": stamp}
    return json.dumps(entry).encode() + b"\n"


def _replaced_line(path: str, found: str) -> bytes:
    """The line saying what stood where the log should be (and was removed, not followed)."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    entry = {"event": "log_replaced", "file": path, "level": "warning", "timestamp": stamp,
             "was": found}  # fmt: skip
    return json.dumps(entry).encode() + b"\n"


def _moved_line(path: str, aside: str) -> bytes:
    """The line saying that the log was a file with other names too, moved aside unwritten."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    entry = {"event": "linked_file_moved", "file": path, "level": "warning", "moved_to": aside,
             "timestamp": stamp}  # fmt: skip
    return json.dumps(entry).encode() + b"\n"


def _shared(fd: int) -> bool:
    """Whether the open file has another name besides ours (a hard link made to it)."""
    try:
        return os.fstat(fd).st_nlink > 1
    except OSError:
        return False


class Repeats:
    """The failures met again at every pass, said once per cause: for each (event, subject)
    — `reclaim_failed` of a member, say — the cause last logged.  A failure is logged when
    its cause differs from that one (it changed) or there is none (the first, or the first
    since the failure cleared); a pool whose inbox is a link is then one line, not one per
    rescan (2 s) for as long as it stays so."""

    def __init__(self) -> None:
        self._said: dict[tuple[str, str], str] = {}

    def first(self, event: str, subject: str, cause: str) -> bool:
        """Whether to log this failure (noted as said, if so)."""
        key = (event, subject)
        if self._said.get(key) == cause:
            return False
        self._said[key] = cause
        return True

    def cleared(self, event: str, subject: str) -> None:
        """The failure is over (the step that failed has succeeded): the next one is logged."""
        self._said.pop((event, subject), None)


class _Tee:
    """Final processor: append the JSON line to the log file, then hand the event on to
    the console renderer (or drop it when there is no console)."""

    def __init__(self, file: LogFile | None, console: bool) -> None:
        self.file = file
        self.console = console
        self.json = structlog.processors.JSONRenderer()

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        if self.file is not None:
            try:
                line = self.json(logger, method, dict(event))
            except Exception:  # an unrenderable value: count it, never raise into a pass
                self.file.drop()
            else:
                self.file.write(line.decode() if isinstance(line, bytes) else line)
        if not self.console:
            raise structlog.DropEvent
        return event


def _escaped(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """The event for a person's terminal: a control character a value carries (a file's
    name, a reason read from a file) shown as its escape, never obeyed.  The JSON line
    already went to the file, where JSON escapes its own."""
    from handoffd.core.terminal import escape

    return {key: escape(value) if isinstance(value, str) else value for key, value in event.items()}


class _Console(structlog.PrintLogger):
    """stderr for a person; a closed or broken stderr loses the line, never the daemon."""

    def msg(self, message: str) -> None:
        try:
            super().msg(message)
        except (OSError, ValueError):
            pass  # the JSON file still has the line

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def configure(log_path: str | None, console: bool | None = None) -> FilteringBoundLogger:
    """Log to `log_path` (JSON lines, appended) and, if `console`, to stderr (by default,
    unless stderr is /dev/null, as for a daemon started in the background)."""
    if console is None:
        console = not _is_devnull(sys.stderr)
    dropped = 0
    while _sinks:  # configured again (the log was removed): the count of lost lines carries
        old = _sinks.pop()
        old.close()
        dropped += old.dropped
    file = LogFile(log_path) if log_path else None
    if file is not None:
        file.dropped = dropped
        _sinks.append(file)
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _Tee(file, console),
        _escaped,
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
    ]
    structlog.configure(
        processors=processors,
        logger_factory=lambda *_: _Console(sys.stderr),
        cache_logger_on_first_use=False,
    )
    logger: FilteringBoundLogger = structlog.get_logger()
    return logger


def reopen() -> None:
    """Reopen the log file at its path (SIGHUP, after an external rotator moved it)."""
    for sink in _sinks:
        sink.reopen()


def _is_devnull(stream: TextIO) -> bool:
    try:
        mine, null = os.fstat(stream.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return True  # no usable stderr at all
    return (mine.st_dev, mine.st_ino) == (null.st_dev, null.st_ino)
