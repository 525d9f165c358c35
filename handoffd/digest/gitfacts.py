"""What git knows about a thread: the commits its handoffs name, the commits between
them, the files they touched, and when a role last committed (docs/protocol.md §11).

A thin layer over the `git` command: a few calls per worktree, never one per commit.
Whatever git cannot answer becomes a gap (`git_unavailable`, `commit_not_found`),
never a guess.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

RECORD = "\x1e"
UNIT = "\x1f"
LOG_FORMAT = f"--format={RECORD}%H{UNIT}%ct{UNIT}%s"


@dataclass(frozen=True)
class Commit:
    """One commit: its full sha, committer date (epoch seconds), subject and files."""

    sha: str
    committed_at: float
    subject: str
    files: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass
class Facts:
    """The commits of a thread (by full sha) and what could not be learned."""

    commits: dict[str, Commit] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # named commits git does not have
    gaps: list[str] = field(default_factory=list)


class GitUnavailable(Exception):
    """git cannot run here: no git binary, or the directory is not a repository."""


def git(worktree: str, *args: str, stdin: str | None = None) -> str:
    """The stdout of `git <args>` in `worktree`; GitUnavailable when it fails."""
    command = ["git", "-c", "core.quotePath=false", *args]
    try:
        done = subprocess.run(
            command, cwd=worktree, input=stdin, capture_output=True, text=True, check=False
        )
    except OSError as error:  # no git, or the worktree is gone
        raise GitUnavailable(str(error)) from None
    if done.returncode != 0:
        raise GitUnavailable(done.stderr.strip() or f"git exited {done.returncode}")
    return done.stdout


def resolve(worktree: str, named: Sequence[str]) -> tuple[list[str], list[str]]:
    """Full shas of the named commits that exist here, in order, and the names that do not."""
    lines = git(worktree, "cat-file", "--batch-check", stdin="".join(f"{n}\n" for n in named))
    found, missing = [], []
    for name, line in zip(named, lines.splitlines(), strict=True):
        parts = line.split()  # "<sha> commit <size>", "<name> missing" or "… ambiguous"
        if parts[1:2] == ["commit"]:
            found.append(parts[0])
        else:
            missing.append(name)
    return found, missing


def parse_log(text: str) -> list[Commit]:
    """Commits from `git log` run with LOG_FORMAT and `--name-only`."""
    commits = []
    for record in text.split(RECORD)[1:]:
        head, _, names = record.partition("\n")
        sha, committed, subject = head.split(UNIT, 2)
        files = tuple(line for line in names.splitlines() if line)
        commits.append(Commit(sha, float(committed), subject, files))
    return commits


def thread_commits(worktree: str, named: Sequence[str], facts: Facts) -> None:
    """Add to `facts` the commits named by one worktree's handoffs (in the order they were
    sent) and every commit between consecutive ones: `git log A..B` for each pair, taken
    in one call as `B C … ^A` (the same set on a linear history)."""
    try:
        found, missing = resolve(worktree, named)
        facts.missing.extend(missing)
        if not found:
            return
        shown = git(worktree, "log", "--no-walk=unsorted", LOG_FORMAT, "--name-only", *found)
        between = ""
        if len(found) > 1:
            tips = list(dict.fromkeys(found[1:]))
            between = git(worktree, "log", LOG_FORMAT, "--name-only", *tips, f"^{found[0]}")
    except GitUnavailable:
        _gap(facts, "git_unavailable")
        return
    for commit in parse_log(shown) + parse_log(between):
        facts.commits.setdefault(commit.sha, commit)


def last_commit_at(worktree: str, since: float) -> float | None:
    """The newest committer date after `since` among commits reachable from the
    worktree's HEAD, or None when there is none."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime(since))
    out = git(worktree, "log", "--format=%ct", f"--since={stamp}", "HEAD")
    dates = [float(line) for line in out.split() if float(line) > since]
    return max(dates) if dates else None


def _gap(facts: Facts, gap: str) -> None:
    if gap not in facts.gaps:
        facts.gaps.append(gap)
