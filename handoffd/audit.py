"""The queue's invariants, checked over a whole project at rest.

Used by the crash tests, the demo's summary and operators alike.  It reads every
folder, history included, so it is an audit, never a hot path:

- each original is in exactly one of its sender's `outbox/`, `sent/`, `failed/`;
- each delivered original reached each recipient exactly once across `new/`,
  `in_process/` and `completed/` (batch dirs included), and an undelivered one
  reached nobody;
- every visible file in an inbox is a complete handoff, stamped for its recipient;
- no temp file or journal is left behind.
"""

from __future__ import annotations

import os
from collections import Counter

from handoffd import durable, journal
from handoffd import handoff as hf
from handoffd.config import Box, Role
from handoffd.delivery import JOURNAL

INBOX = (Box.NEW, Box.IN_PROCESS, Box.COMPLETED)


class Report:
    """What an audit found: counts, and every broken invariant as a sentence."""

    def __init__(self) -> None:
        self.originals: dict[str, str] = {}  # original filename -> folder (outbox/sent/failed)
        self.expected: dict[str, list[str]] = {}  # id of each original -> who must hold a copy
        self.copies: Counter[tuple[str, str]] = Counter()  # (id, recipient) -> count
        self.problems: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self, folder: str) -> int:
        return sum(1 for where in self.originals.values() if where == folder)


def audit(root: str, roles: dict[str, Role]) -> Report:
    report = Report()
    for role in roles.values():
        _originals(role, report)
        _copies(role, report)
    _match(roles, report)
    try:
        if journal.load(os.path.join(root, JOURNAL)) is not None:
            report.problems.append("a committed delivery journal is left unfinished")
    except journal.Corrupt as error:
        report.problems.append(f"the delivery journal is corrupt: {error}")
    return report


def _originals(role: Role, report: Report) -> None:
    for folder in (Box.OUTBOX, Box.SENT, Box.FAILED):
        for path in _visible_files(role.path(folder)):
            name = os.path.basename(path)
            if not name.endswith(".handoff"):
                continue
            if name in report.originals:
                report.problems.append(
                    f"{name} is in both {report.originals[name]}/ and {folder}/ of {role.name}"
                )
            report.originals[name] = folder
            ident, to = _header(path, "id"), _header(path, "to")
            if ident:
                delivered = folder == Box.SENT and to is not None
                report.expected[ident] = to.split(",") if delivered and to else []
        for temp in durable.temp_files(role.path(folder)):
            report.problems.append(f"stray temp file {temp}")


def _copies(role: Role, report: Report) -> None:
    for folder in INBOX:
        for path in _visible_files(role.path(folder), into_batches=True):
            problem = _copy_problem(path, role.name)
            if problem:
                report.problems.append(problem)
            report.copies[(_header(path, "id") or os.path.basename(path), role.name)] += 1
        for temp in durable.temp_files(role.path(folder)):
            report.problems.append(f"stray temp file {temp}")


def _copy_problem(path: str, recipient: str) -> str | None:
    try:
        handoff = hf.read(path)
    except hf.HandoffError as error:
        return f"unreadable copy: {error}"
    if handoff.get("recipient") != recipient or not handoff.get("enqueued_at"):
        return f"copy not stamped for {recipient}: {path}"
    return None


def _match(roles: dict[str, Role], report: Report) -> None:
    for ident, recipients in report.expected.items():
        for recipient in roles:
            expected = 1 if recipient in recipients else 0
            found = report.copies.get((ident, recipient), 0)
            if found != expected:
                report.problems.append(
                    f"{ident} reached {recipient} {found} times, expected {expected}"
                )
    for (ident, recipient), found in report.copies.items():
        if ident not in report.expected:
            report.problems.append(f"{recipient} holds {ident} ({found}x) with no original")


def _header(path: str, key: str) -> str | None:
    try:
        return hf.read(path).get(key)
    except hf.HandoffError:
        return None


def _visible_files(directory: str, into_batches: bool = False) -> list[str]:
    files = []
    for entry in hf.visible(directory):
        if entry.is_file(follow_symlinks=False):
            files.append(entry.path)
        elif into_batches and entry.is_dir(follow_symlinks=False):
            files += _visible_files(entry.path)
    return files
