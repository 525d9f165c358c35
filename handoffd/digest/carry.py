"""Which threads `carry-forward` shows (docs/protocol.md §11): the newest activity first,
optionally only those a role took part in, or active since a time.  Pure: the report
folders come from the queue's scan (`report_activity`)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from handoffd.core import handoff as hf
from handoffd.digest.threads import group
from handoffd.queue.reports import name_time
from handoffd.queue.scan import Entry
from handoffd.snapshot.snapshot import Snapshot


def roles_in(name: str) -> list[str]:
    """The sender and recipients a queue file's name gives (§2); none if it is not in that
    form.  `parse_name` reads an archived duplicate (`….2.handoff`) as its original."""
    parts = hf.parse_name(name)
    return [parts.sender, *parts.recipients] if parts else []


def report_activity(snapshot: Snapshot) -> dict[str, str]:
    """Handoff id -> the time of its newest report, over every role's reports."""
    newest: dict[str, str] = {}
    for role, idents in snapshot.report_ids.items():
        for ident in idents:
            paths = snapshot.reports(role, ident)  # oldest first: names sort by time
            if paths:
                stamp = name_time(os.path.basename(paths[-1]))
                newest[ident] = max(newest.get(ident, ""), stamp)
    return newest


def activity(files: Iterable[Entry], reports: dict[str, str]) -> float:
    """A thread's newest §2 timestamp or report, in seconds since the epoch."""
    stamps = [f.activity for f in files]
    stamps += [reports.get(f.name_id or "", "") for f in files]
    return max((hf.epoch(s) or 0.0 for s in stamps if s), default=0.0)


def choose(
    files: Iterable[Entry],
    reports: dict[str, str],
    n: int,
    since: float | None = None,
    role: str | None = None,
) -> list[tuple[str, list[Entry]]]:
    """The `n` threads with the newest activity (thread key, its files), newest first."""
    ranked = []
    for key, members in group(files).items():
        if role is not None and not any(role in roles_in(f.name) for f in members):
            continue
        when = activity(members, reports)
        if since is None or when >= since:
            ranked.append((-when, key, members))
    ranked.sort(key=lambda row: (row[0], row[1]))
    return [(key, members) for _, key, members in ranked[:n]]
