"""The stamps of every copy a role holds: what the swarm's numbers count (docs/protocol.md
§19), read from the queue's files and nothing else.

A copy's life is written on it: `enqueued_at` (delivered), `dequeued_at` (taken),
`completed_at`, `released_at`, `reclaimed_at`, `reopened_at` and `reopens` (how many
times it came back).  Open copies are read with the snapshot's header blocks; history
(`inbox/completed/`) grows without bound, so each completed copy's stamps are kept, once
read, in the history index's folder (`H/.digest-index/stamps`): one line per file,
`<relative path>\\t<recipient>\\t<sender>\\t<first>\\t<created>\\t<enqueued>\\t<dequeued>
\\t<completed>\\t<reopened>\\t<reopens>\\t<touched>` (times as seconds since the epoch, ''
for none; `first`: 1 when the copy's recipient is the first its name lists).

A cache, never a second bookkeeping: `completed/` is listed whole, a line is believed
only for a file listed there now, a file the cache does not know is read (and added),
and a cache that is missing, torn or not ours is made again from the files, so a
restart, a deleted index or a planted line changes no number.  A line's names are only
ever shown when they are a role's here, and its numbers are checked as they are read.  A
file gone between the listing and its read (moved on) is left out of that count.  A
long-running reader (the web board) keeps what it read (`Kept`): a `completed/` whose
folders' mtimes have not moved, and are old enough to trust, is not listed again.
"""

from __future__ import annotations

import math
import os

from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.queue import scan
from handoffd.snapshot import history, indexfile
from handoffd.snapshot.indexfile import line
from handoffd.snapshot.snapshot import folders_unchanged, mtime_ns

CACHE = "stamps"
WIDTH = 12  # fields of a line
NAME_LIMIT = 100  # characters of a recipient or sender kept: a role's name is shorter


class Copy:
    """One delivered copy's stamps: who holds it (`role`, the folder it is in), who it was
    for (`recipient`, a pool for a pool's copy), who sent it, and its times (None: none).
    `first`: the copy of its handoff a pickup is timed by (its name's first recipient)."""

    __slots__ = ("completed", "created", "dequeued", "earlier", "enqueued", "first",
                 "recipient", "reopened", "reopens", "role", "sender", "touched")  # fmt: skip

    def __init__(self, role: str, fields: list[str]) -> None:
        self.role = role
        self.recipient = fields[0] or role
        self.sender = fields[1]
        self.first = fields[2] == "1"
        self.created = _time(fields[3])
        self.enqueued = _time(fields[4])
        self.dequeued = _time(fields[5])
        self.completed = _time(fields[6])
        self.reopened = _time(fields[7])
        self.reopens = int(fields[8]) if fields[8].isdigit() and len(fields[8]) <= 4 else 0
        self.touched = _time(fields[9])  # released or reclaimed: taken once, then put back
        # each earlier life's (wait, work), which a reopen ended
        self.earlier = hf.spans(fields[10]) if fields[10] else []

    @property
    def arrived(self) -> float | None:
        """When its current life began: it was delivered, or last reopened."""
        return self.reopened or self.enqueued

    @property
    def taken(self) -> int:
        """How many takes its stamps show: one before each reopen, and the current one (a
        copy released or reclaimed since keeps that take)."""
        return self.reopens + self.taken_now

    @property
    def taken_now(self) -> int:
        """1 if it was taken since it was last reopened (or ever, never reopened)."""
        if self.dequeued is not None or self.completed is not None:
            return 1
        if self.touched is None:
            return 0
        return int(self.reopened is None or self.touched > self.reopened)


def fields_of(name: str, headers: dict[str, str]) -> list[str]:
    """The stamps a copy's header block holds, as the cache keeps them (its path aside)."""
    touched = [hf.epoch(headers.get(key)) for key in (hf.RELEASED_AT, hf.RECLAIMED_AT)]
    times = (hf.CREATED_AT, hf.ENQUEUED_AT, hf.DEQUEUED_AT, hf.COMPLETED_AT, hf.REOPENED_AT)
    reopens = hf.reopen_count(headers.get(hf.REOPENS), headers.get(hf.REOPENED_AT))
    parts = hf.parse_name(name)
    recipient = (headers.get(hf.RECIPIENT) or "")[:NAME_LIMIT]
    first = parts is not None and parts.recipients[:1] == [recipient]
    return [
        recipient,
        parts.sender[:NAME_LIMIT] if parts else "",
        "1" if first else "",
        *(_text(hf.epoch(headers.get(key))) for key in times),
        str(min(reopens, 9999)),
        _text(max(filter(None, touched), default=None)),
        (headers.get(hf.REOPENED_SPANS) or "")[: hf.SPANS_KEPT * 24],
    ]


def copy_of(role: str, name: str, headers: dict[str, str]) -> Copy:
    return Copy(role, fields_of(name, headers))


class Completed:
    """A role's completed copies, and what the numbers summed of them once (`summary`,
    kept with them while they stand unchanged)."""

    __slots__ = ("copies", "names", "summary")

    def __init__(self, copies: list[Copy], names: set[str] | None = None) -> None:
        self.copies = copies
        self.names = names or set()  # the copies' file names: one seen open too moved on
        self.summary: object | None = None


class Kept:
    """What a long-running reader keeps between reads: each role's completed copies, and
    the mtimes of the folders they were listed from."""

    def __init__(self) -> None:
        self.roles: dict[str, tuple[dict[str, int], Completed]] = {}


def completed(role: Role, kept: Kept | None = None) -> Completed:
    """Every copy in the role's `completed/` (batch folders included): as `kept` has them
    while their folders stand unchanged, else listed, from the cache where it knows the
    file and read where it does not, the cache brought up to date."""
    where = scan.role_folder(role, Box.COMPLETED)  # never listed through a link
    if where is None:
        return Completed([])
    held = kept.roles.get(where) if kept is not None else None
    if held is not None and folders_unchanged(held[0], _now_ns()):
        return held[1]
    folders = {where: mtime_ns(where)}  # before the listing: a change during it shows
    copies = _listed(role, where, folders)
    if kept is not None:
        kept.roles[where] = folders, copies
    return copies


def _listed(role: Role, where: str, folders: dict[str, int]) -> Completed:
    path = history.index_file(role, CACHE)
    lines, wrong = indexfile.read(path, WIDTH) if path else ([], True)
    known = {fields[0]: fields[1:] for fields in lines}
    copies: list[Copy] = []
    names: set[str] = set()
    listed: set[str] = set()
    added: list[str] = []
    for file, name, folder in scan.queue_files(where, lambda _: True):
        relative = name if folder is None else f"{os.path.basename(folder)}/{name}"
        if folder is not None and folder not in folders:
            folders[folder] = mtime_ns(folder)
        fields = known.get(relative)
        if fields is None:
            try:
                headers = hf.read_headers(file)
            except OSError:  # gone since the listing, or no regular file: not counted now
                continue
            fields = fields_of(name, headers)
            added.append(line(relative, *fields))
        listed.add(relative)
        names.add(name)
        copies.append(Copy(role.name, fields))
    if path:
        _save(path, known, listed, added, wrong or len(known) < len(lines))
    return Completed(copies, names)


def _save(
    path: str, known: dict[str, list[str]], listed: set[str], added: list[str], wrong: bool
) -> None:
    """Append what was read anew; rewrite the cache whole when it held a line not ours or
    one of a file no longer there (a cache, so a failure is harmless)."""
    stale = len(listed) < len(known) + len(added)  # some line names a file not listed now
    if not (wrong or stale or added):
        return
    with indexfile.locked(os.path.dirname(path)) as held:
        if not held:
            return
        if wrong or stale:
            kept = (line(r, *f) for r, f in known.items() if r in listed)
            indexfile.rewrite(path, [*kept, *added])
        else:
            indexfile.append(path, added)


def _now_ns() -> int:
    import time

    return time.time_ns()


def _text(value: float | None) -> str:
    return "" if value is None else repr(value)


def _time(text: str) -> float | None:
    """A cached time back: a finite number of seconds since the epoch, else none."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value < 1e11 else None
