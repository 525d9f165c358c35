"""A thread's digest, written by the machine from recorded facts (docs/protocol.md §11).

Pure: the queue's files, the reports and git's answers come in; Markdown lines, the
receipt and the gaps come out.  Every row names its source in brackets; nothing is
summarised, and what is not known is a gap, never a guess.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from handoffd.core import budget
from handoffd.core.handoff import (
    BLOCKED_REASON,
    COMMIT,
    COMPLETED_AT,
    CREATED_AT,
    DEQUEUED_AT,
    ENQUEUED_AT,
    RECIPIENT,
    RECIPIENTS,
    SENDER,
    TYPE,
    comma_list,
    epoch,
    id_sender,
    id_stamp_of,
    iso_from_stamp,
    sender_shown,
    short_time,
)
from handoffd.core.handoff import iso_seconds as iso
from handoffd.core.terminal import escape
from handoffd.digest import evidence
from handoffd.digest.gitfacts import Commit, Facts
from handoffd.digest.threads import Item, Thread
from handoffd.queue.reports import Report

DEFAULT_LINES = 60
MIN_LINES = 8
NOT_IN_HANDOFF = (
    "Open decisions, PR state and environment traps are not in the queue or in git. "
    "Add them by hand."
)


@dataclass
class Digest:
    """The rendered digest and its machine-readable receipt and gaps."""

    lines: list[str]
    ids: list[str]
    generated_at: str
    queue_read_at: str
    gaps: list[str] = field(default_factory=list)
    activity: str = ""

    @property
    def markdown(self) -> str:
        return "\n".join(self.lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        receipt = {
            "ids": self.ids,
            "generated_at": self.generated_at,
            "queue_read_at": self.queue_read_at,
        }
        return {"markdown": self.markdown, "receipt": receipt, "gaps": self.gaps}


@dataclass
class Inputs:
    """Everything a digest is written from, gathered by the I/O layer."""

    thread: Thread
    facts: Facts
    last_commit: dict[str, float | None]  # role -> newest committer date after the reports
    root: str
    gaps: list[str] = field(default_factory=list)


def sent_at(item: Item) -> str:
    """When the handoff was queued: `created_at`, else its id's timestamp."""
    created = item.header(CREATED_AT)
    if created:
        return created
    return iso_from_stamp(id_stamp_of(item.id))


def sender(item: Item) -> str:
    named = id_sender(item.id)
    return item.header(SENDER) or (item.id if named is None else named)


# --- where each handoff is now ------------------------------------------------------------


def copy_state(role: str, state: str, headers: dict[str, str], detail: bool) -> str:
    """One copy's state, with its time when `detail` (the Outcome line) and the copy
    records one: a time it does not hold is left out, never printed empty."""
    reason = headers.get(BLOCKED_REASON)
    if state == "completed":
        return f"completed by {role}" + _when(" at ", headers, COMPLETED_AT, detail)
    if reason:
        return f"blocked: {reason} ({role})"
    if state == "in_process":
        return f"in process at {role}" + _when(" since ", headers, DEQUEUED_AT, detail)
    return f"waiting in {role}'s inbox" + _when(" since ", headers, ENQUEUED_AT, detail)


def holder(role: str, headers: dict[str, str]) -> str:
    """Who holds a copy: its role, and for a pool's copy a member claimed, of which pool
    (`cleaner-1 of cleaner`)."""
    pool = headers.get(RECIPIENT, "")
    return f"{role} of {pool}" if pool and pool != role else role


def _when(word: str, headers: dict[str, str], key: str, detail: bool) -> str:
    stamp = headers.get(key, "").strip()
    return f"{word}{short_time(stamp)}" if detail and stamp else ""


def state_now(item: Item, errors: dict[str, str], detail: bool = False) -> str:
    """Where the handoff is now: its original's folder, else each recipient's copy."""
    original = item.original
    if original and original.state == "outbox":
        return f"waiting in {original.role}'s outbox"
    if original and original.state == "failed":
        return f"failed: {errors.get(original.path, 'reason not recorded')}"
    parts = [copy_state(holder(c.role, c.headers), c.state, c.headers, detail)
             for c in item.copies]  # fmt: skip
    # a pool's copy is held by the member that claimed it (docs/protocol.md §17)
    held = {c.role for c in item.copies} | {c.headers.get(RECIPIENT, "") for c in item.copies}
    missing = [r for r in comma_list(item.header(RECIPIENTS)) if r not in held]
    parts += [f"no copy found at {role}" for role in missing]
    return "; ".join(parts) or "no copy found"


# --- the sections -------------------------------------------------------------------------


def handoff_rows(thread: Thread) -> list[str]:
    rows = []
    for item in reversed(thread.items):
        to = ", ".join(comma_list(item.header(RECIPIENTS))) or "?"
        kind = item.header(TYPE) or "?"
        commit = f" {item.header(COMMIT)}" if item.header(COMMIT) else ""
        state = state_now(item, thread.errors)
        when = short_time(sent_at(item))
        who = sender_shown(sender(item), item.headers)  # `operator (<name>)` (§18)
        rows.append(f"- {when} {who} → {to} {kind}{commit} — {state}   [{item.id}]")
    return rows


def commit_rows(commits: Sequence[Commit]) -> list[str]:
    rows = []
    for commit in commits:
        files = f"{len(commit.files)} file{'' if len(commit.files) == 1 else 's'}"
        rows.append(f"- {commit.short} {commit.subject} ({files})   [commit {commit.short}]")
    return rows


def file_rows(commits: Sequence[Commit]) -> list[str]:
    """Files by how many commits touched them, then by recency; each names its last commit."""
    touched: dict[str, list[Commit]] = {}
    for commit in commits:  # newest first, so each list starts with the last commit
        for path in commit.files:
            touched.setdefault(path, []).append(commit)
    order = sorted(touched.items(), key=lambda kv: (-len(kv[1]), -kv[1][0].committed_at, kv[0]))
    rows = []
    for path, hits in order:
        count = f"{len(hits)} commit{'' if len(hits) == 1 else 's'}"
        last = short_time(iso(hits[0].committed_at))
        rows.append(f"- {path} — {count}, last {last}   [commit {hits[0].short}]")
    return rows


def report_rows(reports: Sequence[Report], root: str) -> list[str]:
    rows = []
    for report in reports:
        first = report.first_line or "(no text)"
        first = first if len(first) <= 160 else first[:159] + "…"
        when = short_time(report.reported_at)
        rows.append(
            f"- {when} {report.status} {report.role}: {first}   [report {where(report, root)}]"
        )
    return rows


def where(report: Report, root: str) -> str:
    """The report's path relative to the project root (absolute if outside it)."""
    relative = os.path.relpath(report.path, root)
    return report.path if relative.startswith("..") else relative


def promise_rows(inputs: Inputs, reports: Sequence[Report]) -> list[str]:
    """Intentions with no later commit from the role's HEAD and no later handoff it sent."""
    sent: dict[str, list[float]] = {}
    for item in inputs.thread.items:
        sent.setdefault(sender(item), []).append(epoch(sent_at(item)) or 0.0)
    rows, seen = [], set()
    for report in reports:
        reported = epoch(report.reported_at) or 0.0
        last = inputs.last_commit.get(report.role)
        if not evidence.no_evidence(reported, last, sent.get(report.role, [])):
            continue
        for sentence in evidence.intentions(report.text):
            if sentence not in seen:
                seen.add(sentence)
                rows.append(f'- "{sentence}"   [report {where(report, inputs.root)}]')
    return rows


def decision_rows(reports: Sequence[Report], root: str) -> list[str]:
    rows, seen = [], set()
    for report in reports:
        for sentence in evidence.decisions(report.text):
            if sentence not in seen:
                seen.add(sentence)
                rows.append(f'- "{sentence}"   [report {where(report, root)}]')
    return rows


def sections(inputs: Inputs) -> list[budget.Section]:
    """Every section of §11 in order, newest rows first; empty ones render nothing."""
    thread = inputs.thread
    commits = sorted(inputs.facts.commits.values(), key=lambda c: (-c.committed_at, c.sha))
    reports = sorted(thread.reports, key=lambda r: r.reported_at, reverse=True)
    return [
        budget.Section("Handoffs", handoff_rows(thread)),
        budget.Section("Commits", commit_rows(commits)),
        budget.Section("Files touched", file_rows(commits)),
        budget.Section("Reports", report_rows(reports, inputs.root)),
        budget.Section("Said it would, no evidence it did", promise_rows(inputs, reports)),
        budget.Section("Said it decided", decision_rows(reports, inputs.root)),
    ]


# --- the document -------------------------------------------------------------------------


def title(thread: Thread) -> str:
    roles: list[str] = []
    for item in thread.items:
        for role in [sender(item), *comma_list(item.header(RECIPIENTS))]:
            if role and role not in roles:
                roles.append(role)
    first, last = short_time(sent_at(thread.items[0])), short_time(thread.activity)
    span = first if first == last else f"{first}\u2013{last}"  # an en dash, as §11 shows
    name = f"Task {thread.task}" if thread.task is not None else f"Handoff {thread.ids[0]}"
    return f"# {name} · {', '.join(roles)} · {span}"


def gaps(inputs: Inputs) -> list[str]:
    """What the digest does not know, in a stable order, each named once."""
    thread, found = inputs.thread, list(inputs.gaps)
    if not any(item.header(COMMIT) for item in thread.items):
        found.append("no_commit_header")
    if inputs.facts.missing:
        found.append("commit_not_found")
    if not thread.reports:
        found.append("no_reports")
    if any(state_now(i, thread.errors).count("no copy found") for i in thread.items):
        found.append("copy_not_found")
    found += inputs.facts.gaps + thread.gaps
    return list(dict.fromkeys(found))


def compose(inputs: Inputs, max_lines: int, now: float, queue_read_at: float) -> Digest:
    """The digest of one thread within `max_lines` (budget.BudgetTooSmall below 8)."""
    thread = inputs.thread
    head = [title(thread), f"**Outcome** {state_now(thread.items[-1], thread.errors, True)}"]
    tail = ["## Not in this handoff", NOT_IN_HANDOFF]
    generated, read = iso(now), iso(queue_read_at)
    footer = [
        "---",
        f"receipt: {', '.join(thread.ids)}",
        f"generated {generated} · queue read {read}",
    ]
    lines = budget.render(max_lines, sections(inputs), head, tail, footer)
    # every row quotes files (headers, reports, commit subjects): one row, one line, and
    # nothing in it a terminal would obey
    lines = [escape(line) for line in lines]
    return Digest(lines, thread.ids, generated, read, gaps(inputs), thread.activity)
