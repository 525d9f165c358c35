"""A project's threads: a task's handoffs (or one handoff without a task) with every file
of each, where it is now, and their reports (docs/protocol.md §2, §8, §11).

The files are the scan's entries (`handoffd.queue.scan`): the open ones from its snapshot,
history ones through its index of history, which finds a thread's files without reading
unrelated history; reports are read with `handoffd.queue.reports`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from handoffd.core import handoff as hf
from handoffd.queue import reports, scan
from handoffd.queue.reports import Report
from handoffd.queue.scan import Entry
from handoffd.snapshot import history
from handoffd.snapshot.snapshot import Snapshot

ORIGINAL_STATES = scan.State.ORIGINALS


@dataclass
class Item:
    """One handoff of a thread: its id and every file of it in the queue."""

    id: str
    files: list[Entry]

    @property
    def original(self) -> Entry | None:
        return next((f for f in self.files if f.state in ORIGINAL_STATES), None)

    @property
    def copies(self) -> list[Entry]:
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


def key_of(entry: Entry) -> str:
    """The key of the thread a queue file is in: `task:<T>`, or `id:<id>` without a task."""
    return f"task:{entry.task}" if entry.task is not None else f"id:{entry.name_id}"


def group(files: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Thread key -> files; a file whose name is not in the §2 form is in no thread."""
    threads: dict[str, list[Entry]] = {}
    for file in files:
        if file.name_id:
            threads.setdefault(key_of(file), []).append(file)
    return threads


def thread_key(snapshot: Snapshot, ident: str) -> str | None:
    """The key of the thread handoff `ident` belongs to, or None if no file has that id."""
    for file in history.thread(snapshot, f"id:{ident}"):
        return key_of(file)
    return None


def with_replies(snapshot: Snapshot, files: list[Entry]) -> list[Entry]:
    """`files` and the handoffs linked to them by `in_reply_to` (docs/protocol.md §18), both
    ways and transitively: the card a reply answers, and the replies to any of them.  Only
    the operator writes `in_reply_to`, so the replies are looked for among its originals
    alone (its outbox, failed and sent), never in the whole history."""
    from handoffd.core import config

    found = {file.path: file for file in files}
    operator = snapshot.roles.get(config.OPERATOR)
    mine = [] if operator is None else [
        *(e for e in snapshot.open if e.role == operator.name), *history.role_files(operator)
    ]  # fmt: skip
    replies = [e for e in mine if e.state in ORIGINAL_STATES]
    while True:
        ids = {file.name_id for file in found.values()}
        wanted = {file.load().get(hf.IN_REPLY_TO) for file in found.values()} - ids - {None, ""}
        wanted |= {e.name_id for e in replies if e.load().get(hf.IN_REPLY_TO) in ids} - ids
        wanted.discard(None)
        if not wanted:
            return list(found.values())
        for ident in sorted(str(i) for i in wanted):
            for file in history.thread(snapshot, f"id:{ident}"):
                found.setdefault(file.path, file)


def build(key: str, files: list[Entry], snapshot: Snapshot) -> Thread:
    """The thread of `files`: headers read, grouped by id in time order, reports attached."""
    by_id: dict[str, list[Entry]] = {}
    for file in sorted(files, key=lambda f: f.name):
        by_id.setdefault(file.name_id or "", []).append(file)
    task = key.removeprefix("task:") if key.startswith("task:") else None
    thread = Thread(task, [Item(i, fs) for i, fs in by_id.items()])
    for item in thread.items:
        for file in item.files:
            _fill(file, thread, snapshot)
    # Two handoffs can share a second (ids sort by it): `created_at` has microseconds.
    thread.items.sort(key=lambda item: (item.header(hf.CREATED_AT) or item.id, item.id))
    found = _reports(thread.ids, snapshot, thread)
    thread.reports = sorted(found, key=lambda r: r.reported_at)
    return thread


def _fill(file: Entry, thread: Thread, snapshot: Snapshot) -> None:
    """Read a thread file's headers (history was only indexed; the careful reader); a
    failure's reason is the scan's."""
    if not file.load().get(hf.ID):  # gone, or no header block a reader could parse
        _gap(thread, "unreadable_file")
    if file.state == scan.State.FAILED:
        thread.errors[file.path] = snapshot.error(file.path) or "reason not recorded"


def _reports(ids: list[str], snapshot: Snapshot, thread: Thread) -> Iterator[Report]:
    """Every stored report on the thread's handoffs, in every role's folder (read by the
    snapshot: an unreadable one stands with its time from its name)."""
    for role in snapshot.roles:
        for ident in ids:
            found = snapshot.report_files(role, ident)
            if len(found) >= reports.KEEP:
                _gap(thread, "history_truncated")  # older ones may have been removed
            for path, report in found:
                yield _shown(role, path, report)


def _shown(role: str, path: str, report: Report | None) -> Report:
    """A report, its role taken from its folder where it lacks one (an unreadable one: its
    time from its name)."""
    if report is None:
        report = Report(path, {"reported_at": reports.name_time(os.path.basename(path))}, "")
    report.role = report.role or role
    report.status = report.status or "?"
    return report


def _gap(thread: Thread, gap: str) -> None:
    if gap not in thread.gaps:
        thread.gaps.append(gap)
