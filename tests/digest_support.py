"""Support for the digest and carry-forward tests: a thread built with the real helpers,
commits with chosen dates, and reports stored the way docs/protocol.md §8 lays them out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from handoffd.core import handoff as hf
from tests.conftest import GIT_ENV, Project, git

HANDOFFD = os.path.join(os.path.dirname(sys.executable), "handoffd")


def commit_in(project: Project, role: str, path: str, message: str, when: float) -> str:
    """Commit a change in `role`'s worktree with committer date `when`; its sha10."""
    worktree = project.worktrees[role]
    (worktree / path).parent.mkdir(parents=True, exist_ok=True)
    (worktree / path).write_text(f"{message}\n")
    stamp = f"@{int(when)} +0000"
    env = {**os.environ, **GIT_ENV, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    for args in (["add", path], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *args], cwd=worktree, env=env, check=True)
    return git(worktree, "rev-parse", "--short=10", "HEAD")


def send(project: Project, role: str, to: str, task: str, commit: str | None = None) -> str:
    """Queue a git_handoff from `role` (a note when `commit` is None) and deliver it; its id."""
    if commit is None:
        text = f"type: note\nto: {to}\npriority: 50\nmessage: about {task}\n"
    else:
        text = f"type: git_handoff\nto: {to}\npriority: 50\ntask: {task}\ncommit: {commit}\n"
    result = project.run("swarm_handoff", str(project.draft(text)), role=role)
    assert result.code == 0, result.err
    queued = Path(result.out.split("HANDOFF QUEUED: ")[1].strip())
    subprocess.run([HANDOFFD, "run", "--once", str(project.root)], capture_output=True, check=True)
    return hf.read(str(project.box(role, "sent") / queued.name)).get("id") or ""


def report(project: Project, role: str, ident: str, status: str, text: str, when: float) -> Path:
    """Store a report the way §8 does: front matter, then the text."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(when)) + f".{int(when * 1e6) % 10**6:06d}Z"
    folder = project.handoffs(role) / "reports" / ident
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stamp}_{status}.md"
    at = hf.iso_now(when)
    front = f"status: {status}\nrole: {role}\nagent: a\nconversation: ''\nreported_at: '{at}'\n"
    path.write_text(f"---\n{front}---\n\n{text}\n", encoding="utf-8")
    return path


def hf_epoch(ident: str) -> float:
    """The time a handoff id was sent, from its timestamp."""
    return time.mktime(time.strptime(ident[:16], "%Y%m%dT%H%M%SZ")) - time.timezone


def run(command: str, project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HANDOFFD, command, *args, "--root", str(project.root)],
        capture_output=True,
        text=True,
        check=False,
    )


def build_thread(project: Project) -> dict[str, str]:
    """Task `parser` across three roles and both receive modes: coder → cleaner (batch),
    cleaner → QA (task), with commits between the handoffs and reports on each."""
    now = time.time()
    first = project.commit("coder")
    a = send(project, "coder", "cleaner", "parser", first)
    assert project.run("ready_for_next", role="cleaner").code == 0  # a batch of one
    report(project, "cleaner", a, "RUNNING", "Started the cleanup. I decided to keep tabs.", now)
    commit_in(project, "cleaner", "src/lexer.txt", "lexer cleanup", now - 200)
    second = commit_in(project, "cleaner", "src/parser.txt", "parser cleanup", now - 100)
    assert project.run("done_with_current", role="cleaner").code == 0
    b = send(project, "cleaner", "QA", "parser", second)
    assert project.run("ready_for_next", role="QA").code == 0
    report(
        project,
        "QA",
        b,
        "BLOCKED",
        "Blockers: the fixture is missing.\nI'll re-run the suite once the fixture lands.",
        now + 60,
    )
    return {"first": first, "second": second, "a": a, "b": b}
