"""A project's threads: a task's handoffs (or one handoff without a task) with every file
of each, where it is now, and their reports (docs/protocol.md §2, §8, §11).  Files are
found through `history`, which reads no unrelated history."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from handoffd import handoff as hf
from handoffd.config import Role
from handoffd.continuity.history import File, handoff_id, lookup, read_headers, role_files

REPORTS = "reports"
REPORTS_KEPT = 50  # §8: the newest 50 per id are kept


@dataclass
class Report:
    """One stored report (§8), named `<yyyymmddThhmmss.ffffffZ>_<STATUS>.md`."""

    role: str
    card: str
    path: str
    reported_at: str
    status: str
    text: str


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


def thread_key(roles: dict[str, Role], ident: str) -> str | None:
    """The key of the thread handoff `ident` belongs to, or None if no file has that id."""
    for role in roles.values():
        for file in lookup(role, f"id:{ident}"):
            return f"task:{file.task}" if file.task is not None else f"id:{ident}"
    return None


def thread_files(roles: dict[str, Role], key: str) -> list[File]:
    """Every file of thread `key` in the project."""
    return [file for role in roles.values() for file in lookup(role, key)]


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
