"""A project's threads: a task's handoffs (or one handoff without a task) with every file
of each, where it is now, and their reports (docs/protocol.md §2, §8, §11).

The open folders come from the queue's one scan (`handoffd.scan`), history through
`history`, which finds a thread's files without reading unrelated history; reports are
read with `handoffd.reports`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from handoffd import handoff as hf
from handoffd import reports, safeio, scan
from handoffd.continuity.history import TIMESTAMPS, File, handoff_id, lookup, role_files
from handoffd.reports import Report

REPORTS = "reports"
ORIGINAL_STATES = scan.State.ORIGINALS
# A file renamed while the scan and the history are read is kept at its later place.
LATER = {"outbox": 0, "failed": 1, "sent": 2, "new": 0, "in_process": 1, "completed": 2}


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


def open_files(snapshot: scan.Snapshot) -> list[File]:
    """The scan's open entries (`outbox`, `failed`, `new`, `in_process`) as thread files."""
    files = []
    for entry in snapshot.open:
        headers = entry.headers
        stamps = [headers.get(key, "") for key in TIMESTAMPS]
        task = headers.get("task")
        files.append(File(entry.role, entry.state, entry.path, task, max(stamps), headers))
    return files


def all_files(snapshot: scan.Snapshot) -> list[File]:
    """Every queue file of the project, with its task."""
    history = [file for role in snapshot.roles.values() for file in role_files(role)]
    return dedupe([*open_files(snapshot), *history])


def dedupe(files: Iterable[File]) -> list[File]:
    """One file per (role, side, name): one renamed between two listings is kept at its
    later place."""
    kept: dict[tuple[str, bool, str], File] = {}
    for file in files:
        key = (file.role, file.state in ORIGINAL_STATES, file.name)
        if key not in kept or LATER[file.state] >= LATER[kept[key].state]:
            kept[key] = file
    return list(kept.values())


def group(files: Iterable[File]) -> dict[str, list[File]]:
    """Thread key -> files: `task:<T>` for a task's files, `id:<id>` for one without."""
    threads: dict[str, list[File]] = {}
    for file in files:
        ident = handoff_id(file.name)
        if ident:
            key = f"task:{file.task}" if file.task is not None else f"id:{ident}"
            threads.setdefault(key, []).append(file)
    return threads


def thread_key(snapshot: scan.Snapshot, ident: str) -> str | None:
    """The key of the thread handoff `ident` belongs to, or None if no file has that id."""
    for file in thread_files(snapshot, f"id:{ident}"):
        return f"task:{file.task}" if file.task is not None else f"id:{ident}"
    return None


def thread_files(snapshot: scan.Snapshot, key: str) -> list[File]:
    """Every file of thread `key` in the project: open ones from the scan, history ones
    from each role's index."""
    history = [file for role in snapshot.roles.values() for file in lookup(role, key)]
    return dedupe([*(f for f in open_files(snapshot) if matches(f, key)), *history])


def matches(file: File, key: str) -> bool:
    if key.startswith("task:"):
        return file.task == key.removeprefix("task:")
    return f"id:{handoff_id(file.name)}" == key


def build(key: str, files: list[File], snapshot: scan.Snapshot) -> Thread:
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
    found = _reports(thread.ids, snapshot, thread)
    thread.reports = sorted(found, key=lambda r: r.reported_at)
    return thread


def _fill(file: File, thread: Thread) -> None:
    """Read a thread file's headers (history was only indexed) and a failure's reason."""
    if not file.headers:
        try:
            file.headers = hf.read_headers(file.path)
        except OSError:
            pass
    if not file.headers.get("id"):  # gone, or no header block a reader could parse
        _gap(thread, "unreadable_file")
    if file.state == "failed":
        try:  # one line, and never through a link, from a FIFO or past 4 KiB
            thread.errors[file.path] = safeio.read_line(file.path + ".error")
        except OSError:
            thread.errors[file.path] = "reason not recorded"


def _reports(ids: list[str], snapshot: scan.Snapshot, thread: Thread) -> Iterator[Report]:
    """Every stored report on the thread's handoffs, in every role's folder."""
    for role in snapshot.roles:
        for ident in ids:
            paths = snapshot.reports(role, ident)
            if len(paths) >= reports.KEEP:
                _gap(thread, "history_truncated")  # older ones may have been removed
            for path in paths:
                yield read_report(role, path)


def read_report(role: str, path: str) -> Report:
    """A report, its role taken from its folder where it lacks one (an unreadable one: its
    time from its name)."""
    try:
        report = reports.read(path)
    except OSError:
        stamp = os.path.basename(path).partition("_")[0]
        report = Report(path, {"reported_at": hf.iso_from_stamp(stamp)}, "")
    report.role = report.role or role
    report.status = report.status or "?"
    return report


def _gap(thread: Thread, gap: str) -> None:
    if gap not in thread.gaps:
        thread.gaps.append(gap)
