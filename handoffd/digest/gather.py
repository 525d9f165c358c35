"""Gathering a digest (docs/protocol.md §11), the I/O behind `digest` and
`carry-forward`: a thread's handoffs and reports from one scan, git's answers about its
commits, then `compose` (pure) writes it."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.core.handoff import epoch
from handoffd.core.outcome import Exit, Result, refused
from handoffd.core.terminal import escape
from handoffd.digest import carry, gitfacts, threads
from handoffd.digest.digest import MIN_LINES, Digest, Inputs, compose
from handoffd.queue.reports import Report
from handoffd.snapshot import history
from handoffd.snapshot.snapshot import take_snapshot

CARRY_LINES = 20  # each thread of carry-forward is a compact digest


def gather(root: str, roles: dict[str, Role], thread: threads.Thread) -> Inputs:
    """Git's answers for a thread: its commits, and each reporting role's last commit."""
    inputs = Inputs(thread, gitfacts.Facts(), {}, root)
    named: dict[str, list[str]] = {}
    for item in thread.items:  # oldest first: `git log A..B` runs between consecutive ones
        if item.header(hf.COMMIT):
            named.setdefault(item.header(hf.SENDER), []).append(item.header(hf.COMMIT))
    for name, commits in named.items():
        if name in roles:
            gitfacts.thread_commits(
                roles[name].worktree, list(dict.fromkeys(commits)), inputs.facts
            )
        else:
            inputs.gaps.append("worktree_unknown")
    _last_commits(roles, thread.reports, inputs)
    return inputs


def _last_commits(roles: dict[str, Role], reports: Sequence[Report], inputs: Inputs) -> None:
    """For the evidence rule: each reporting role's newest commit after its first report."""
    since: dict[str, float] = {}
    for report in reports:
        when = epoch(report.reported_at) or 0.0
        since[report.role] = min(since.get(report.role, when), when)
    for name, first in since.items():
        try:
            inputs.last_commit[name] = gitfacts.last_commit_at(roles[name].worktree, first)
        except (gitfacts.GitUnavailable, KeyError):
            inputs.last_commit[name] = None
            inputs.gaps.append("git_unavailable")


def digest_of(
    root: str, ident: str | None, task: str | None, max_lines: int, now: float | None = None
) -> Digest | Result:
    """The digest of handoff `ident`'s thread or of task `task`, or the refusal."""
    if max_lines < MIN_LINES:
        return refused(f"BUDGET_TOO_SMALL: --max-lines must be at least {MIN_LINES}")
    snapshot = take_snapshot(root)
    key = f"task:{task}" if task is not None else threads.thread_key(snapshot, _id(ident or ""))
    members = threads.with_replies(snapshot, history.thread(snapshot, key)) if key else []
    if not members:
        missing = f"UNKNOWN_TASK: {task}" if task is not None else f"UNKNOWN_HANDOFF: {ident}"
        return refused(escape(missing), Exit.FAILED)
    thread = threads.build(key or "", members, snapshot)
    inputs = gather(root, snapshot.roles, thread)
    return compose(inputs, max_lines, time.time() if now is None else now, snapshot.taken_at)


def _id(value: str) -> str:
    """A handoff named by id, by card (`<id>@<role>`) or by file name or path: its id."""
    value = value.split("@", 1)[0]
    return hf.parsed_id(os.path.basename(value)) or value


def carry_forward_of(
    root: str,
    n: int,
    since: float | None = None,
    role: str | None = None,
    now: float | None = None,
) -> list[Digest]:
    """The last `n` threads of the project, newest activity first, each a compact digest.
    An unknown `role` is refused, as `status --role` refuses it, rather than showing nothing."""
    snapshot = take_snapshot(root)
    if role is not None and role not in snapshot.roles:
        raise config.UnknownRole(role, snapshot.roles)
    files = history.every_file(snapshot)
    chosen = carry.choose(files, carry.report_activity(snapshot), n, since, role)
    digests = []
    for key, members in chosen:
        inputs = gather(root, snapshot.roles, threads.build(key, members, snapshot))
        when = time.time() if now is None else now
        digests.append(compose(inputs, CARRY_LINES, when, snapshot.taken_at))
    return digests
