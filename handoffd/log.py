"""The daemon's log: one JSON object per line in `daemon/handoffd.log` (PROTOCOL.md §6),
and the same events rendered for a person on stderr when the daemon runs in a terminal."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, FilteringBoundLogger, WrappedLogger


class _Tee:
    """Final processor: append the JSON line to the log file, then hand the event on to
    the console renderer (or drop it when there is no console)."""

    def __init__(self, file: TextIO | None, console: bool) -> None:
        self.file = file
        self.console = console
        self.json = structlog.processors.JSONRenderer()
        self.lock = threading.Lock()  # the waker thread logs too

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        if self.file is not None:
            line = self.json(logger, method, dict(event))
            line = line.decode() if isinstance(line, bytes) else line
            with self.lock:
                self.file.write(f"{line}\n")
                self.file.flush()
        if not self.console:
            raise structlog.DropEvent
        return event


def configure(log_path: str | None, console: bool | None = None) -> FilteringBoundLogger:
    """Log to `log_path` (JSON lines, appended) and, if `console`, to stderr (by default,
    unless stderr is /dev/null, as for a daemon started in the background)."""
    if console is None:
        console = not _is_devnull(sys.stderr)
    file = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _Tee(file, console),
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
    ]
    structlog.configure(
        processors=processors,
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    logger: FilteringBoundLogger = structlog.get_logger()
    return logger


def _is_devnull(stream: TextIO) -> bool:
    try:
        mine, null = os.fstat(stream.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return True  # no usable stderr at all
    return (mine.st_dev, mine.st_ino) == (null.st_dev, null.st_ino)
