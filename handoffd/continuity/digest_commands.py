"""`handoffd digest` and `handoffd carry-forward` (docs/protocol.md §11): gather the facts
(queue, reports, git), compose, and render as text or JSON."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence

import click

from handoffd import config, scan
from handoffd.board.reports import Report
from handoffd.cli import _root, emit, root_argument, root_option
from handoffd.config import Role
from handoffd.continuity import budget, carry, gitfacts, threads
from handoffd.continuity.digest import DEFAULT_LINES, MIN_LINES, Digest, Inputs, compose, epoch
from handoffd.outcome import Outcome
from handoffd.terminal import escape, escape_json

CARRY_LINES = 20  # each thread of carry-forward is a compact digest


def gather(root: str, roles: dict[str, Role], thread: threads.Thread) -> Inputs:
    """Git's answers for a thread: its commits, and each reporting role's last commit."""
    inputs = Inputs(thread, gitfacts.Facts(), {}, root)
    named: dict[str, list[str]] = {}
    for item in thread.items:  # oldest first: `git log A..B` runs between consecutive ones
        if item.header("commit"):
            named.setdefault(item.header("from"), []).append(item.header("commit"))
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
) -> Digest | Outcome:
    """The digest of handoff `ident`'s thread or of task `task`, or the refusal."""
    if max_lines < MIN_LINES:
        return Outcome(2, stderr=f"BUDGET_TOO_SMALL: --max-lines must be at least {MIN_LINES}\n")
    snapshot = scan.scan(root)
    key = f"task:{task}" if task is not None else threads.thread_key(snapshot, _id(ident or ""))
    members = threads.thread_files(snapshot, key) if key else []
    if not members:
        missing = f"UNKNOWN_TASK: {task}" if task is not None else f"UNKNOWN_HANDOFF: {ident}"
        return Outcome(1, stderr=escape(missing) + "\n")
    thread = threads.build(key or "", members, snapshot)
    inputs = gather(root, snapshot.roles, thread)
    return compose(inputs, max_lines, time.time() if now is None else now, snapshot.taken_at)


def _id(value: str) -> str:
    """A handoff named by id, by card (`<id>@<role>`) or by file name or path: its id."""
    value = value.split("@", 1)[0]
    parts = scan.parse_name(os.path.basename(value))
    return parts.id if parts else value


def render(digest: Digest | Outcome, as_json: bool) -> Outcome:
    if isinstance(digest, Outcome):
        return digest
    if as_json:
        text = json.dumps(digest.as_json(), ensure_ascii=False, indent=2)
        return Outcome(0, escape_json(text) + "\n")
    return Outcome(0, digest.markdown)


@click.command()
@click.argument("ident", metavar="[ID]", required=False)
@click.option("--task", help="Digest every handoff with this task header.")
@click.option(
    "--max-lines",
    type=int,
    default=DEFAULT_LINES,
    show_default=True,
    help=f"At most this many lines ({MIN_LINES} or more); the receipt is never dropped.",
)
@click.option("--json", "as_json", is_flag=True, help="markdown, receipt and gaps as JSON.")
@root_option
def digest(
    ident: str | None, task: str | None, max_lines: int, as_json: bool, root_opt: str | None
) -> None:
    """A thread written by the machine from the queue, its reports and git, with receipts."""
    if (ident is None) == (task is None):
        raise click.UsageError("give a handoff ID or --task T (one of them)")
    emit(render(_safe(lambda: digest_of(_root(root_opt), ident, task, max_lines)), as_json))


def _safe(make: Callable[[], Digest | Outcome]) -> Digest | Outcome:
    """Run `make`, turning a broken roles.tsv or budget into the command's refusal."""
    try:
        return make()
    except config.ConfigError as error:
        return Outcome(1, stderr=f"{error}\n")
    except budget.BudgetTooSmall as error:
        return Outcome(2, stderr=f"BUDGET_TOO_SMALL: {error}\n")


def carry_forward_of(
    root: str,
    n: int,
    since: float | None = None,
    role: str | None = None,
    now: float | None = None,
) -> list[Digest]:
    """The last `n` threads of the project, newest activity first, each a compact digest.
    An unknown `role` is refused, as `status --role` refuses it, rather than showing nothing."""
    snapshot = scan.scan(root)
    if role is not None and role not in snapshot.roles:
        raise config.UnknownRole(role)
    files = threads.all_files(snapshot)
    chosen = carry.choose(files, carry.report_activity(snapshot), n, since, role)
    digests = []
    for key, members in chosen:
        inputs = gather(root, snapshot.roles, threads.build(key, members, snapshot))
        when = time.time() if now is None else now
        digests.append(compose(inputs, CARRY_LINES, when, snapshot.taken_at))
    return digests


def render_many(digests: list[Digest], as_json: bool) -> Outcome:
    if as_json:
        items = [d.as_json() for d in digests]
        return Outcome(0, escape_json(json.dumps(items, ensure_ascii=False, indent=2)) + "\n")
    return Outcome(0, "\n".join(d.markdown for d in digests) if digests else "NO_THREADS\n")


def _since(value: str | None) -> float | None:
    if value is None:
        return None
    when = epoch(value)
    if when is None:
        raise click.BadParameter(f"not an ISO 8601 time: {value!r}", param_hint="--since")
    return when


@click.command("carry-forward")
@click.option("-n", "count", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--since", help="Only threads active since this ISO 8601 time.")
@click.option("--role", help="Only threads this role sent or received in.")
@click.option("--json", "as_json", is_flag=True, help="A list of digest objects.")
@root_argument
def carry_forward(
    count: int,
    since: str | None,
    role: str | None,
    as_json: bool,
    root: str | None,
) -> None:
    """The latest threads, newest activity first, each a digest with its receipt."""
    when = _since(since)
    try:
        digests = carry_forward_of(_root(root), count, when, role)
    except config.ConfigError as error:
        emit(Outcome(1, stderr=f"{error}\n"))
    emit(render_many(digests, as_json))
