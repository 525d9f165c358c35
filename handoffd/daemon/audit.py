"""The queue's invariants, checked over a whole project at rest.

Used by the crash tests, the demo's summary and operators alike.  It reads the whole
scan (`scan.py`), history included, so it is an audit, never a hot path:

- each original is in exactly one of its sender's `outbox/`, `sent/`, `failed/`;
- each delivered original reached each recipient exactly once across `new/`,
  `in_process/` and `completed/` (batch dirs included), and an undelivered one
  reached nobody (a pool's one copy wherever it is: its own `new/` or a member's);
- every `.handoff` file in an inbox is a complete handoff, stamped for its recipient;
- no temp file or journal is left behind.

`audit_hosts` checks the same over a swarm spread across hosts (docs/protocol.md §15):
every host's own roles, and copies matched across all of them.
"""

from __future__ import annotations

import os
from collections import Counter

from handoffd.core import config, durable
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.delivery import journal
from handoffd.delivery.delivery import JOURNAL
from handoffd.queue import scan
from handoffd.queue.scan import State
from handoffd.snapshot.snapshot import take_snapshot

INBOX = (Box.NEW, Box.IN_PROCESS, Box.COMPLETED)
COPIES = (State.NEW, State.IN_PROCESS, State.COMPLETED)


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
    _gather(root, roles, report)
    _match(roles, report)
    return report


def audit_hosts(roots: list[str]) -> Report:
    """The audit of one swarm whose hosts are the project roots `roots` (each read with its
    own roles.tsv and `.swarmforge/host`): originals and copies of all hosts, matched."""
    report = Report()
    everyone: dict[str, Role] = {}
    for root in roots:
        here = config.this_host(root)
        local = {n: r for n, r in config.load_swarm(root).items() if config.is_local(r, here)}
        _gather(root, local, report)
        everyone.update(local)
    _match(everyone, report)
    return report


def _gather(root: str, roles: dict[str, Role], report: Report) -> None:
    snapshot = take_snapshot(root, roles, once=False)  # at rest, a name in two folders is a bug
    for entry in snapshot.entries(State.ORIGINALS):
        _original(entry, report)
    for entry in snapshot.entries(COPIES):
        _copy(entry, report, _owner(entry, roles))
    for role in roles.values():
        _temps(role, report)
    try:
        if journal.load(os.path.join(root, JOURNAL)) is not None:
            report.problems.append(f"a committed delivery journal is left unfinished in {root}")
    except journal.Corrupt as error:
        report.problems.append(f"the delivery journal is corrupt: {error}")


def _original(entry: scan.Entry, report: Report) -> None:
    folder = scan.FOLDER[entry.state]
    if entry.name in report.originals:
        report.problems.append(
            f"{entry.name} is in both {report.originals[entry.name]}/ and {folder}/ of {entry.role}"
        )
    report.originals[entry.name] = folder
    to = entry.headers.get(hf.RECIPIENTS)
    delivered = entry.state == State.SENT and to is not None
    report.expected[entry.id] = hf.comma_list(to) if delivered and to else []


def _owner(entry: scan.Entry, roles: dict[str, Role]) -> str:
    """The recipient a copy counts for: its role's, or a member's pool for a copy the
    member claimed from it (docs/protocol.md §17: one copy per handoff to a pool)."""
    row = roles.get(entry.role)
    if row is None or not row.pool or row.is_pool or row.pool not in roles:
        return entry.role
    return row.pool if entry.headers.get(hf.RECIPIENT) == row.pool else entry.role


def _copy(entry: scan.Entry, report: Report, owner: str) -> None:
    problem = _copy_problem(entry.path, owner)
    if problem:
        report.problems.append(problem)
    report.copies[(entry.id, owner)] += 1


def _copy_problem(path: str, recipient: str) -> str | None:
    try:
        handoff = hf.read(path)  # the whole file: an audit checks each copy is complete
    except hf.HandoffError as error:
        return f"unreadable copy: {error}"
    if handoff.get(hf.RECIPIENT) != recipient or not handoff.get(hf.ENQUEUED_AT):
        return f"copy not stamped for {recipient}: {path}"
    return None


def _temps(role: Role, report: Report) -> None:
    """Hidden temp files are invisible to the scan by design; the audit looks for strays."""
    for folder in (Box.OUTBOX, Box.SENT, Box.FAILED, *INBOX):
        for temp in durable.temp_files(role.path(folder)):
            report.problems.append(f"stray temp file {temp}")


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
