"""The .handoff file: `key: value` header lines, one empty line, then an opaque body.

The body belongs to the sender and is kept byte for byte; tools only add or replace
headers.  This module is imported by every helper, so it uses nothing beyond `os`
and `time` (see the start-up budget in README.md).
"""

from __future__ import annotations

import os
import time

from handoffd import durable, safeio

SEPARATOR = "\n\n"
SUFFIX = ".handoff"
# The daemon delivers nothing over 64 KiB; a copy gains a few stamped headers.  A file
# planted larger than this is refused, never read whole.
READ_LIMIT = 1024 * 1024


class HandoffError(Exception):
    """A file that is not a handoff; the message names the file and what is wrong."""


class Handoff:
    """Parsed headers (in file order) and the untouched body text."""

    __slots__ = ("body", "headers")

    def __init__(self, headers: list[tuple[str, str]], body: str) -> None:
        self.headers = headers
        self.body = body

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the first `key` header, or `default`."""
        for name, value in self.headers:
            if name == key:
                return value
        return default

    def set(self, key: str, value: str) -> None:
        """Replace `key`'s line in place, or append it at the end of the header block."""
        for index, (name, _) in enumerate(self.headers):
            if name == key:
                self.headers[index] = (key, value)
                return
        self.headers.append((key, value))

    def render(self) -> bytes:
        """The file's bytes; `parse(h.render())` gives back the same headers and body."""
        head = "\n".join(f"{name}: {value}" for name, value in self.headers)
        return (head + SEPARATOR + self.body).encode("utf-8")


def parse(data: bytes, source: str) -> Handoff:
    """Parse a handoff file's bytes; `source` names the file in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HandoffError(f"{source}: not UTF-8 text (bad byte at offset {error.start})") from None
    end = -1 if text.startswith("\n") else text.find(SEPARATOR)
    if end < 0:
        raise HandoffError(f"{source}: no header block (header lines, then an empty line)")
    headers = []
    for number, line in enumerate(text[:end].split("\n"), start=1):
        name, sep, value = line.partition(": ")
        if not sep or not name:
            raise HandoffError(f"{source}: header line {number} is not 'key: value': {line!r}")
        headers.append((name, value))
    return Handoff(headers, text[end + len(SEPARATOR) :])


def read(path: str) -> Handoff:
    """Read and parse the handoff at `path`."""
    try:  # never through a link, from a FIFO or past the limit
        data = safeio.read_regular(path, READ_LIMIT)
    except safeio.Refused as refusal:
        raise HandoffError(f"{path}: cannot read: {refusal.why}") from None
    except OSError as error:
        raise HandoffError(f"{path}: cannot read: {error.strerror}") from None
    return parse(data, path)


def stamp(path: str, key: str, value: str) -> Handoff:
    """Set one header of the file at `path`, replacing the file atomically."""
    handoff = read(path)
    handoff.set(key, value)
    durable.replace(path, handoff.render())
    return handoff


def iso_now(now: float | None = None) -> str:
    """An audit timestamp: ISO 8601 UTC with microseconds, ending in `Z`."""
    now = time.time() if now is None else now
    micros = int(now * 1_000_000) % 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{micros:06d}Z"


def id_stamp(now: float | None = None) -> str:
    """The compact UTC timestamp used in filenames and ids: `yyyymmddThhmmssZ`."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def iso_from_stamp(stamp: str) -> str:
    """The §2 time a compact stamp spells (`20260615T140531[.482113]Z`, as in ids and report
    names) -> `2026-06-15T14:05:31[.482113]Z`; anything else unchanged."""
    if len(stamp) < 16 or stamp[8] != "T":
        return stamp
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:]}"


def epoch(stamp: str) -> float | None:
    """Seconds since 1970 of a §2 time (one without a zone is UTC); None if it is not one."""
    from datetime import UTC, datetime  # not at the top: every helper imports this module

    try:
        moment = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def name_id(name: str) -> str:
    """The id a queue file name carries: `50_<stamp>_<seq>_from_a_to_b.handoff` →
    `<stamp>_<seq>_from_a` (docs/protocol.md §2).  By slicing, not parsing: a role name
    holds no `_`, so the first `_to_` after the priority ends it."""
    stem = name.removesuffix(SUFFIX)
    return stem[3:].partition("_to_")[0]


def is_visible(name: str) -> bool:
    """Entries starting with `.` are working files of some tool, never queue items."""
    return not name.startswith(".")


def visible(directory: str) -> list[os.DirEntry[str]]:
    """The visible entries of `directory`, sorted by name; a missing folder is an empty one.
    Other errors (an unreadable folder, say) are the caller's to report."""
    try:
        with os.scandir(directory) as entries:
            return sorted((e for e in entries if is_visible(e.name)), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
