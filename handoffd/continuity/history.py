"""The queue's files with their tasks, and the history index that finds a thread's files
without reading unrelated history (docs/protocol.md §2, §11).

A thread is found by its `task` header, which only the header block holds.  History
(`sent/`, `completed/`, batch dirs included) never changes once a file is
there, so each role keeps a hidden cache `H/.digest-index/` of `<path>\\t<task>\\t<newest
timestamp>` lines: `all` (every history file), `b-<xx>` (256 buckets, each line filed
under its task and under its id) and `folders` (each history folder's mtime when it was
last listed whole).  A header is read once, ever; a folder whose mtime has not changed is
not listed again, so finding a thread reads one bucket, whatever the history's size.
The open folders (`outbox/`, `failed/`, `inbox/new/`, `inbox/in_process/`) are not
indexed: the threads read them from the queue's scan (`handoffd.scan`), afresh each time.
Appends are one write each; a line torn by a crash has no newline and is ignored.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from handoffd import durable, scan
from handoffd import handoff as hf
from handoffd.config import Box, Role

INDEX = ".digest-index"
BUCKETS = 256
# A folder modified this recently may change again within its mtime's granularity
# unnoticed; it is listed again next time instead of being trusted.
SETTLED_NS = 2_000_000_000
HISTORY = (Box.SENT, Box.COMPLETED)
STATE = {Box.SENT: scan.State.SENT, Box.COMPLETED: scan.State.COMPLETED}
TIMESTAMPS = ("created_at", "enqueued_at", "dequeued_at", "completed_at", "released_at")


@dataclass
class File:
    """One file of a handoff: whose folder holds it, its state there, and its headers
    (read on demand)."""

    role: str
    state: str
    path: str
    task: str | None = None
    activity: str = ""  # the newest §2 timestamp in its headers
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def handoff_id(name: str) -> str | None:
    """`<ts>_<seq6>_from_<sender>` from a queue file name (§2), or None if it is not one."""
    parts = scan.parse_name(name)
    return parts.id if parts else None


def _path(role: Role, name: str) -> str:
    return os.path.join(role.handoffs, INDEX, name)


def _lines(path: str) -> Iterator[list[str]]:
    """The complete lines of an index file, split at tabs; nothing if it is missing."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return
    for line in text[: text.rfind("\n") + 1].splitlines():
        yield line.split("\t")


def load_index(role: Role) -> dict[str, tuple[str, str]]:
    """Every indexed history file: relative path -> (task or '', newest timestamp)."""
    return {f[0]: (f[1], f[2]) for f in _lines(_path(role, "all")) if len(f) == 3}


def _append(path: str, lines: list[str]) -> None:
    """Add lines in one append; a cache, so failure is harmless."""
    if not lines:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = "".join(lines).encode("utf-8")
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a line torn by a crash, so it spoils no other
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass


def bucket(key: str) -> str:
    return f"b-{zlib.crc32(key.encode('utf-8')) % BUCKETS:02x}"


def _record(role: Role, added: list[str]) -> None:
    """File new lines in their buckets first, then in `all`: a crash in between only
    makes a later listing index them again (duplicates are harmless)."""
    filed: dict[str, list[str]] = {}
    for line in added:
        relative, task, _ = line.split("\t")
        keys = {bucket(f"id:{handoff_id(os.path.basename(relative))}")}
        if task:
            keys.add(bucket(f"task:{task}"))
        for key in keys:
            filed.setdefault(key, []).append(line)
    for name, lines in filed.items():
        _append(_path(role, name), lines)
    _append(_path(role, "all"), added)


def _folders(role: Role) -> dict[str, str]:
    return {f[0]: f[1] for f in _lines(_path(role, "folders")) if len(f) == 2}


def _save_folders(role: Role, folders: dict[str, str]) -> None:
    text = "".join(f"{box}\t{mtime}\n" for box, mtime in folders.items())
    try:
        os.makedirs(_path(role, ""), exist_ok=True)
        durable.replace(_path(role, "folders"), text.encode("utf-8"))
    except OSError:
        pass


def _mtimes(role: Role) -> dict[str, str]:
    """Each history folder's mtime now: '0' when it is missing, '' when too fresh to trust."""
    now, found = time.time_ns(), {}
    for box in HISTORY:
        try:
            mtime = os.stat(role.path(box)).st_mtime_ns
        except OSError:
            mtime = 0
        found[box] = str(mtime) if now - mtime > SETTLED_NS else ""
    return found


def role_files(role: Role) -> list[File]:
    """Every history file of the role, each with its task (listed whole; files new to
    history are indexed)."""
    mtimes, index = _mtimes(role), load_index(role)
    added: list[str] = []
    files = [f for box in HISTORY for f in _history(role, box, index, added)]
    _finish(role, added, mtimes)
    return files


def sync(role: Role) -> None:
    """Bring the role's index up to date, listing only the folders that changed."""
    mtimes, known = _mtimes(role), _folders(role)
    changed = [box for box in HISTORY if not mtimes[box] or mtimes[box] != known.get(box)]
    if not changed:
        return
    index, added = load_index(role), list[str]()
    for box in changed:
        for _ in _history(role, box, index, added):
            pass
    _finish(role, added, {**known, **{box: mtimes[box] for box in changed}})


def _finish(role: Role, added: list[str], mtimes: dict[str, str]) -> None:
    if "" in added:  # a task the index cannot hold: list these folders again next time
        mtimes = {box: "" for box in mtimes}
    _record(role, [line for line in added if line])
    _save_folders(role, mtimes)


def lookup(role: Role, key: str) -> list[File]:
    """The role's history files of `key`: `task:<T>` (every file with that task) or
    `id:<id>` (every file of that handoff)."""
    sync(role)
    found: dict[str, File] = {}
    for fields in _lines(_path(role, bucket(key))):
        if len(fields) != 3 or fields[0] in found:
            continue
        relative, task, activity = fields
        path = os.path.join(role.handoffs, relative)
        box = Box.COMPLETED if relative.startswith(Box.COMPLETED) else relative.split("/")[0]
        if box not in STATE:
            continue
        file = File(role.name, STATE[box], path, task or None, activity)
        if _matches(file, key) and os.path.exists(path):  # history removed by hand is gone
            found[relative] = file
    return list(found.values())


def _matches(file: File, key: str) -> bool:
    if key.startswith("task:"):
        return file.task == key.removeprefix("task:")
    return f"id:{handoff_id(file.name)}" == key


def _history(
    role: Role, box: str, index: dict[str, tuple[str, str]], added: list[str]
) -> Iterator[File]:
    """The files of one history folder; a batch dir listed once is known from the index."""
    batches = _batch_members(index, box)
    for entry in hf.visible(role.path(box)):
        relative = f"{box}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            if relative + "/" in index:
                for child in batches.get(relative, ()):
                    path = os.path.join(role.handoffs, child)
                    yield File(
                        role.name, STATE[box], path, index[child][0] or None, index[child][1]
                    )
                continue
            before = len(added)
            for inner in hf.visible(entry.path):
                if scan.is_item(inner.name):
                    yield _indexed(role, box, f"{relative}/{inner.name}", inner.path, index, added)
            if all(line.endswith("\n") for line in added[before:]):
                added.append(f"{relative}/\t\t\n")  # every file of it is indexed: never list again
        elif scan.is_item(entry.name):
            yield _indexed(role, box, relative, entry.path, index, added)


def _batch_members(index: dict[str, tuple[str, str]], box: str) -> dict[str, list[str]]:
    """Indexed files inside batch dirs of `box`, by batch dir."""
    members: dict[str, list[str]] = {}
    prefix = box + "/"
    for relative in index:
        if relative.startswith(prefix) and relative.count("/") > prefix.count("/"):
            head, _, tail = relative.rpartition("/")
            if tail:
                members.setdefault(head, []).append(relative)
    return members


def _indexed(
    role: Role,
    box: str,
    relative: str,
    path: str,
    index: dict[str, tuple[str, str]],
    added: list[str],
) -> File:
    """A history file with its task, from the index or (once) from its header."""
    if relative not in index:
        file = _fresh(role, box, path)
        if file.task is not None and ("\t" in file.task or "\n" in file.task):
            added.append("")  # not indexable: read afresh each time
            return file
        index[relative] = (file.task or "", file.activity)
        added.append(f"{relative}\t{file.task or ''}\t{file.activity}\n")
    task, activity = index[relative]
    return File(role.name, STATE[box], path, task or None, activity)


def _fresh(role: Role, box: str, path: str) -> File:
    """A file read now: its task and newest timestamp (none when it cannot be read)."""
    try:
        headers = scan.read_headers(path)
    except OSError:
        headers = {}
    stamps = [headers.get(key, "") for key in TIMESTAMPS]
    return File(role.name, STATE[box], path, headers.get("task"), max(stamps), headers)
