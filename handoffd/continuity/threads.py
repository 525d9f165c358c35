"""Reading a project's threads from the queue: every file of every handoff, where it is
now, and its reports (docs/protocol.md §2, §8, §11).  Read-only but for one cache.

A thread is found by its `task` header, which only the header block holds.  History
(`sent/`, `failed/`, `completed/`) never changes once a file is there, so each role keeps
a hidden index `H/.digest-index` of `<path>\\t<task>\\t<newest timestamp>` lines for its
history files: a
file's header is read once, ever, and a digest's cost does not grow with unrelated
history beyond listing the folders.  Live folders are always read afresh.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from handoffd import handoff as hf
from handoffd.config import Box, Role

INDEX = ".digest-index"
HISTORY = (Box.SENT, Box.FAILED, Box.COMPLETED)
LIVE = (Box.OUTBOX, Box.NEW, Box.IN_PROCESS)
STATE = {
    Box.OUTBOX: "outbox",
    Box.FAILED: "failed",
    Box.SENT: "sent",
    Box.NEW: "new",
    Box.IN_PROCESS: "in_process",
    Box.COMPLETED: "completed",
}
TIMESTAMPS = ("created_at", "enqueued_at", "dequeued_at", "completed_at", "released_at")
REPORTS = "reports"
REPORTS_KEPT = 50  # §8: the newest 50 per id are kept


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


@dataclass
class Report:
    """One stored report (§8), named `<yyyymmddThhmmss.ffffffZ>_<STATUS>.md`."""

    role: str
    card: str
    path: str
    reported_at: str
    status: str
    text: str


def handoff_id(name: str) -> str | None:
    """`<ts>_<seq6>_from_<sender>` from a queue file name (§2), or None if it is not one."""
    parts = name.removesuffix(".handoff").split("_")
    if not name.endswith(".handoff") or len(parts) < 5 or parts[3] != "from":
        return None
    return "_".join(parts[1:5])


def read_headers(path: str) -> dict[str, str]:
    """A handoff's header block, without reading its body (most are under 1 KiB)."""
    with open(path, "rb") as file:
        data = file.read(4096)
        while b"\n\n" not in data and (more := file.read(65536)):
            data += more
    head = data.split(b"\n\n", 1)[0] + b"\n\n"
    return dict(hf.parse(head, path).headers)


def load_index(role: Role) -> dict[str, tuple[str, str]]:
    """The role's history index: relative path -> (task or '', newest timestamp).  A line cut short
    by a crash has no newline and is ignored; its file is simply read again."""
    try:
        with open(os.path.join(role.handoffs, INDEX), encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return {}
    index = {}
    for line in text[: text.rfind("\n") + 1].splitlines():
        fields = line.split("\t")
        if len(fields) == 3:
            index[fields[0]] = (fields[1], fields[2])
    return index


def append_index(role: Role, lines: list[str]) -> None:
    """Add lines to the index in one append; a cache, so failure is harmless."""
    if not lines:
        return
    try:
        fd = os.open(os.path.join(role.handoffs, INDEX), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, "".join(lines).encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass


def role_files(role: Role) -> list[File]:
    """Every queue file in the role's folders, each with its task; history tasks come from
    the index, and files new to history are added to it."""
    index = load_index(role)
    added: list[str] = []
    files = [f for box in HISTORY for f in _history(role, box, index, added)]
    append_index(role, added)
    for box in LIVE:
        for entry in hf.visible(role.path(box)):
            inner = hf.visible(entry.path) if entry.is_dir(follow_symlinks=False) else [entry]
            for item in inner:  # a batch dir in process holds its files
                if item.name.endswith(".handoff") and item.is_file(follow_symlinks=False):
                    files.append(_fresh(role, box, item.path))
    return files


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
                if inner.name.endswith(".handoff"):
                    yield _indexed(role, box, f"{relative}/{inner.name}", inner.path, index, added)
            if all(line.endswith("\n") for line in added[before:]):
                added.append(f"{relative}/\t\t\n")  # every file of it is indexed: never list again
        elif entry.name.endswith(".handoff"):
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
        headers = read_headers(path)
    except (OSError, hf.HandoffError):
        headers = {}
    stamps = [headers.get(key, "") for key in TIMESTAMPS]
    return File(role.name, STATE[box], path, headers.get("task"), max(stamps), headers)


# --- threads -------------------------------------------------------------------------------

ORIGINAL_STATES = ("outbox", "sent", "failed")


@dataclass
class Item:
    """One handoff of a thread: its id and every file of it in the queue."""

    id: str
    files: list[File]

    @property
    def original(self) -> File | None:
        return next((f for f in self.files if f.state in ORIGINAL_STATES), None)

    @property
    def copies(self) -> list[File]:
        return [f for f in self.files if f.state not in ORIGINAL_STATES]

    @property
    def headers(self) -> dict[str, str]:
        """The original's headers, else a copy's (a copy adds only stamps)."""
        first = self.original or self.files[0]
        return first.headers

    def header(self, key: str) -> str:
        return self.headers.get(key, "")


@dataclass
class Thread:
    """A task's handoffs (or one handoff without a task), oldest first, and their reports."""

    task: str | None
    items: list[Item]
    reports: list[Report] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # failed file path -> its .error line
    gaps: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]

    @property
    def activity(self) -> str:
        """The newest §2 timestamp of its files, or of its reports."""
        stamps = [f.activity for item in self.items for f in item.files]
        return max([*stamps, *(r.reported_at for r in self.reports)], default="")


def all_files(roles: dict[str, Role]) -> list[File]:
    """Every queue file of the project, with its task."""
    return [file for role in roles.values() for file in role_files(role)]


def group(files: Iterable[File]) -> dict[str, list[File]]:
    """Thread key -> files: `task:<T>` for a task's files, `id:<id>` for one without."""
    threads: dict[str, list[File]] = {}
    for file in files:
        ident = handoff_id(file.name)
        if ident:
            key = f"task:{file.task}" if file.task is not None else f"id:{ident}"
            threads.setdefault(key, []).append(file)
    return threads


def thread_key(files: Iterable[File], ident: str) -> str | None:
    """The key of the thread handoff `ident` belongs to, or None if no file has that id."""
    for file in files:
        if handoff_id(file.name) == ident:
            return f"task:{file.task}" if file.task is not None else f"id:{ident}"
    return None


def build(key: str, files: list[File], roles: dict[str, Role]) -> Thread:
    """The thread of `files`: headers read, grouped by id in time order, reports attached."""
    by_id: dict[str, list[File]] = {}
    for file in sorted(files, key=lambda f: f.name):
        by_id.setdefault(handoff_id(file.name) or "", []).append(file)
    task = key.removeprefix("task:") if key.startswith("task:") else None
    thread = Thread(task, [Item(i, fs) for i, fs in by_id.items()])
    for item in thread.items:
        for file in item.files:
            _fill(file, thread)
    # Two handoffs can share a second (ids sort by it): `created_at` has microseconds.
    thread.items.sort(key=lambda item: (item.header("created_at") or item.id, item.id))
    thread.reports = sorted(_reports(thread.ids, roles, thread), key=lambda r: r.reported_at)
    return thread


def _fill(file: File, thread: Thread) -> None:
    """Read a thread file's headers (history was only indexed) and a failure's reason."""
    if not file.headers:
        try:
            file.headers = read_headers(file.path)
        except (OSError, hf.HandoffError):
            _gap(thread, "unreadable_file")
    if file.state == "failed":
        try:
            with open(file.path + ".error", encoding="utf-8", errors="replace") as error:
                thread.errors[file.path] = error.readline().strip()
        except OSError:
            thread.errors[file.path] = "reason not recorded"


def _reports(ids: list[str], roles: dict[str, Role], thread: Thread) -> Iterator[Report]:
    """Every stored report on the thread's handoffs, in every role's folder."""
    for role in roles.values():
        for ident in ids:
            names = [e.name for e in hf.visible(os.path.join(role.handoffs, REPORTS, ident))]
            reports = [n for n in names if n.endswith(".md")]
            if len(reports) >= REPORTS_KEPT:
                _gap(thread, "history_truncated")  # older ones may have been removed
            for name in reports:
                yield read_report(
                    role.name, ident, os.path.join(role.handoffs, REPORTS, ident, name)
                )


def read_report(role: str, ident: str, path: str) -> Report:
    """A report on `ident` by `role`; its time and status come from its file name."""
    stamp, _, status = os.path.basename(path).removesuffix(".md").partition("_")
    return Report(role, f"{ident}@{role}", path, iso_from_report(stamp), status, body(path))


def iso_from_report(stamp: str) -> str:
    """`20260615T140531.482113Z` -> `2026-06-15T14:05:31.482113Z`."""
    if len(stamp) < 16 or stamp[8] != "T":
        return stamp
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:]}"


def body(path: str) -> str:
    """A report's text without its front matter (§8); empty when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return ""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        text = text[end + 5 :] if end >= 0 else ""
    return text.strip("\n")


def _gap(thread: Thread, gap: str) -> None:
    if gap not in thread.gaps:
        thread.gaps.append(gap)
