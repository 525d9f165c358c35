"""The scan's index of history: it finds a thread's files without reading unrelated
history (docs/protocol.md §2, §11).  Built on the scan: a snapshot's open files and
the index's history ones make a thread (`thread`, `every_file`); the folders are walked
by the scan's own walker, and what it finds is the scan's `Entry`, with the task and
newest time the index knows.

A thread is found by its `task` header, which only the header block holds.  History
(`sent/`, `completed/`, batch dirs included) rarely changes once a file is there, so
each role keeps a hidden cache `H/.digest-index/` of `<path>\\t<task>\\t<newest
timestamp>` lines: `all` (every history file), `b-<xx>` (256 buckets, each line filed
under its task and under its id) and `folders` (each history folder's mtime when it was
last listed whole).  A header is read once; a folder whose mtime has not changed is not
listed again, so finding a thread reads one bucket, whatever the history's size.
The open folders (`outbox/`, `failed/`, `inbox/new/`, `inbox/in_process/`) are not
indexed: the threads read them from the queue's scan (`handoffd.queue.scan`), afresh each time.

The index is a cache, and untrusted like every file under `.swarmforge/`: it never
outlives the files it names, and what it says is checked before it is believed.
- A file it names is used only while a regular file is there (taken out of a batch,
  moved back to `new/` or deleted, it is gone from the answer).  A batch dir's line
  carries how many files it held and its mtime; a batch dir that changed since is
  listed again, and the lines of files no longer in it are dropped.
- A line that is not one (torn mid-character by a crash, or written by someone else)
  is skipped, and a bucket that held one is rebuilt from `all`; a path the index never
  writes is never opened.  The index's files are read and written by `indexfile`: never
  through a symlink, never waiting on a FIFO, never read past a limit, fields escaped so
  that any task a hand-made file carries, a TAB included, is indexed like any other.
Appends are one write each, under the index's lock, as is every rewrite.
"""

from __future__ import annotations

import os
import stat
import time
import zlib
from collections.abc import Iterator

from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.queue import scan
from handoffd.queue.scan import Entry
from handoffd.snapshot import indexfile
from handoffd.snapshot.indexfile import line as _line
from handoffd.snapshot.indexfile import read as _read
from handoffd.snapshot.snapshot import Snapshot

INDEX = ".digest-index"
BUCKETS = 256
# A folder modified this recently may change again within its mtime's granularity
# unnoticed; it is listed again next time instead of being trusted.
SETTLED_NS = 2_000_000_000
HISTORY = (Box.SENT, Box.COMPLETED)
STATE = {Box.SENT: scan.State.SENT, Box.COMPLETED: scan.State.COMPLETED}

Line = tuple[str, str, str]  # relative path, task (or count), newest timestamp (or mtime)


def bucket(key: str) -> str:
    return f"b-{zlib.crc32(key.encode('utf-8')) % BUCKETS:02x}"


def _folder(role: Role) -> str:
    """The index folder (no trailing slash: lstat sees a symlink there, not its target)."""
    return os.path.join(role.handoffs, INDEX)


def _path(role: Role, name: str) -> str:
    return os.path.join(_folder(role), name)


def _ready(role: Role) -> bool:
    """Whether the role's index folder is a real folder, made if missing.  Anything else
    found under its name (a symlink, a file) is removed — the link itself, never what it
    points at — so the cache is never written through it; False if that fails."""
    folder = _folder(role)
    try:
        if stat.S_ISDIR(os.lstat(folder).st_mode):
            return True
        os.unlink(folder)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        os.makedirs(folder, exist_ok=True)
        return stat.S_ISDIR(os.lstat(folder).st_mode)
    except OSError:
        return False


def index_file(role: Role, name: str) -> str | None:
    """The path of file `name` in the role's index folder, made if missing; None when no
    real folder can be had there (what else keeps caches beside the index's own files:
    the swarm's numbers, `handoffd.numbers.stamps`)."""
    return _path(role, name) if _ready(role) else None


def load_index(role: Role) -> dict[str, tuple[str, str]]:
    """Every indexed history file: relative path -> (task or '', newest timestamp).  A
    batch dir's line, `<dir>/`, maps to (how many files it held, its mtime in ns)."""
    return {f[0]: (f[1], f[2]) for f in _read(_path(role, "all"))[0]}


def _keys(relative: str, task: str) -> set[str]:
    """The buckets a line is filed in: its id's, and its task's."""
    keys = {bucket(f"id:{hf.parsed_id(os.path.basename(relative))}")}
    if task:
        keys.add(bucket(f"task:{task}"))
    return keys


def _record(role: Role, added: list[Line]) -> None:
    """File new lines in their buckets first, then in `all`: a crash in between only
    makes a later listing index them again (duplicates are harmless)."""
    if not added:
        return
    filed: dict[str, list[str]] = {}
    for relative, task, activity in added:
        if not relative.endswith("/"):  # a batch dir's line is for `all` only
            for key in _keys(relative, task):
                filed.setdefault(key, []).append(_line(relative, task, activity))
    for name, lines in filed.items():
        indexfile.append(_path(role, name), lines)
    indexfile.append(_path(role, "all"), [_line(*fields) for fields in added])


def _rebuild(role: Role, name: str) -> list[list[str]]:
    """Bucket `name` anew from `all`, for a bucket found holding a line not of ours (its
    lines all the same, unwritten, when the index's lock is held too long elsewhere)."""
    with indexfile.locked(_folder(role)) as held:
        lines = [f for f in _read(_path(role, "all"))[0] if name in _keys(f[0], f[1])]
        if held:
            indexfile.rewrite(_path(role, name), (_line(*fields) for fields in lines))
    return lines


def _forget(role: Role, gone: set[str]) -> None:
    """Drop the lines of files no longer where the index says (`all` is rewritten; a
    bucket's stale line is harmless, since a look-up checks each file it names)."""
    lines = [f for f in _read(_path(role, "all"))[0] if f[0] not in gone]
    indexfile.rewrite(_path(role, "all"), (_line(*fields) for fields in lines))


def _folders(role: Role) -> dict[str, str]:
    return {f[0]: f[1] for f in _read(_path(role, "folders"), 2)[0]}


def _save_folders(role: Role, folders: dict[str, str]) -> None:
    lines = (_line(box, mtime) for box, mtime in folders.items())
    indexfile.rewrite(_path(role, "folders"), lines)


def _settled(mtime_ns: int) -> bool:
    return time.time_ns() - mtime_ns > SETTLED_NS


def _mtimes(role: Role) -> dict[str, str]:
    """Each history folder's mtime now: '0' when it is missing, '' when too fresh to trust."""
    found = {}
    for box in HISTORY:
        try:
            mtime = os.stat(role.path(box)).st_mtime_ns
        except OSError:
            mtime = 0
        found[box] = str(mtime) if _settled(mtime) else ""
    return found


# --- a snapshot's threads -----------------------------------------------------------------


def thread(snapshot: Snapshot, key: str) -> list[Entry]:
    """Every queue file of thread `key` (`task:<T>`, or `id:<id>` for one handoff): open
    ones from the snapshot, history ones through each role's index."""
    found = [e for e in snapshot.open if matches(e, key)]
    found += [e for role in snapshot.roles.values() for e in lookup(role, key)]
    return scan.dedupe(found)


def every_file(snapshot: Snapshot) -> list[Entry]:
    """Every queue file of the project, each with its task: history through the index."""
    history = (e for role in snapshot.roles.values() for e in role_files(role))
    return scan.dedupe([*snapshot.open, *history])


# --- listing and looking up -------------------------------------------------------------


def role_files(role: Role) -> list[Entry]:
    """Every history file of the role, each with its task (listed whole; files new to
    history are indexed)."""
    if not _ready(role):  # no cache to be had: every header read afresh
        return [f for box in HISTORY for f in _history(role, box, {}, [], set())]
    mtimes, index = _mtimes(role), load_index(role)
    added: list[Line] = []
    gone: set[str] = set()
    files = [f for box in HISTORY for f in _history(role, box, index, added, gone)]
    _finish(role, added, gone, mtimes)
    return files


def sync(role: Role) -> bool:
    """Bring the role's index up to date, listing only the folders that changed; whether
    it is (False: its lock was held too long elsewhere, and nothing was written)."""
    mtimes, known = _mtimes(role), _folders(role)
    changed = [box for box in HISTORY if not mtimes[box] or mtimes[box] != known.get(box)]
    if not changed:
        return True
    index, added, gone = load_index(role), list[Line](), set[str]()
    for box in changed:
        for _ in _history(role, box, index, added, gone):
            pass
    return _finish(role, added, gone, {**known, **{box: mtimes[box] for box in changed}})


def _finish(role: Role, added: list[Line], gone: set[str], mtimes: dict[str, str]) -> bool:
    """Write what a listing learnt, all under one hold of the index's lock, or none of it
    (held too long elsewhere: the next listing learns it again; a folder never counts as
    listed while its files are missing from the index); whether it was written."""
    with indexfile.locked(_folder(role)) as held:
        if held:
            if gone:
                _forget(role, gone)
            _record(role, added)
            _save_folders(role, mtimes)
        return held


def lookup(role: Role, key: str) -> list[Entry]:
    """The role's history files of `key`: `task:<T>` (every file with that task) or
    `id:<id>` (every file of that handoff)."""
    if not _ready(role):
        return [file for file in role_files(role) if matches(file, key)]
    if not sync(role):  # the index is behind and could not be brought up to date
        listed = [f for box in HISTORY for f in _history(role, box, {}, [], set())]
        return [file for file in listed if matches(file, key)]
    lines, wrong = _read(_path(role, bucket(key)))
    if wrong:  # a torn or foreign line: skipped, and the bucket made anew
        lines = _rebuild(role, bucket(key))
    found: dict[str, Entry] = {}
    for relative, task, activity in lines:
        box = _box(relative)
        if box is None or relative in found:
            continue
        file = _entry(role, box, relative, task, activity)
        if matches(file, key) and _is_file(file.path):  # taken out of history: gone
            found[relative] = file
    return list(found.values())


def _entry(role: Role, box: str, relative: str, task: str, activity: str) -> Entry:
    """A history file as the index knows it: its task and newest time, headers unread."""
    path = os.path.join(role.handoffs, relative)
    folder = os.path.dirname(path)
    entry = Entry(role.name, STATE[box], path, None if folder == role.path(box) else folder)
    entry.indexed = (task, activity)
    return entry


def _box(relative: str) -> str | None:
    """The history folder an index line's path lies in, if it is a path the index writes
    (`<box>/<name>` or `<box>/<batch dir>/<name>`): no other path is ever opened."""
    for box in HISTORY:
        parts = relative.split("/")
        if relative.startswith(box + "/") and "\0" not in relative:
            inner = parts[box.count("/") + 1 :]
            if len(inner) <= 2 and all(p and p not in (".", "..") for p in inner):
                return box if hf.is_item(inner[-1]) else None
    return None


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def matches(entry: Entry, key: str) -> bool:
    """Whether the queue file `entry` is of thread `key` (`task:<T>` or `id:<id>`)."""
    if key.startswith("task:"):
        return entry.task == key.removeprefix("task:")
    return f"id:{entry.name_id}" == key


def _history(
    role: Role, box: str, index: dict[str, tuple[str, str]], added: list[Line], gone: set[str]
) -> Iterator[Entry]:
    """The files of one history folder, walked by the scan's walker; a batch dir listed
    before, and unchanged since (same mtime, same count), is known from the index, one
    that changed is listed again and what left it is dropped."""
    members = _batch_members(index, box)
    known: list[str] = []  # batch dirs the index still knows whole
    listed: dict[str, str] = {}  # batch dirs listed again: relative path -> mtime

    def relist(batch: os.DirEntry[str]) -> bool:
        relative = f"{box}/{batch.name}"
        try:
            mtime = str(batch.stat(follow_symlinks=False).st_mtime_ns)
        except OSError:
            return False
        if index.get(relative + "/") == (str(len(members.get(relative, []))), mtime):
            known.append(relative)
            return False
        listed[relative] = mtime
        return True

    present: dict[str, set[str]] = {}  # each batch dir listed again: its files
    where = scan.role_folder(role, box)  # never listed through a link
    for path, name, folder in scan.queue_files(where, relist) if where else ():
        batch = folder and f"{box}/{os.path.basename(folder)}"
        relative = f"{batch or box}/{name}"
        if batch:
            present.setdefault(batch, set()).add(relative)
        yield _indexed(role, box, relative, path, index, added)
    for batch in known:
        for child in members[batch]:
            yield _entry(role, box, child, *index[child])
    for batch, mtime in listed.items():
        there = present.get(batch, set())
        gone.update(child for child in members.get(batch, []) if child not in there)
        if _settled(int(mtime)):  # too fresh, it may still change unseen: listed next time
            index[batch + "/"] = (str(len(there)), mtime)
            added.append((batch + "/", str(len(there)), mtime))


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
    added: list[Line],
) -> Entry:
    """A history file with its task, from the index or (once) from its header block, read
    through the careful reader (nothing, for one that is not a regular file by then)."""
    if relative not in index:
        fresh = Entry(role.name, STATE[box], path)
        headers = fresh.load()
        index[relative] = (headers.get(hf.TASK) or "", scan.newest_time(headers))
        added.append((relative, *index[relative]))
    return _entry(role, box, relative, *index[relative])
