"""A throwaway project: a real git repository, a worktree per role, a roles.tsv naming them,
and a way to run the installed helpers in it.

Helpers run as real subprocesses of the installed commands, with the venv's bin dir first
on PATH, and `SWARMFORGE_ROLE` set or unset as the caller asks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoffd.core import config
from handoffd.core import handoff as hf
from testbed.files import write

BIN = os.path.dirname(sys.executable)

# Fixed identities and dates make commit hashes the same on every run.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}
HISTORY_START = 1_780_000_000  # the first of `make_project(commits=N)`'s commits, then 1 a minute
HEADER = "# role\tworktree-name\tworktree-path\tsession\tdisplay\tagent\treceive-mode\n"


class GitError(Exception):
    """A git command that laid the project out failed; the message has git's stderr."""


def git(cwd: Path | str, *args: str, stdin: str | None = None) -> str:
    """Run git in `cwd` with the fixed identities; its stdout stripped."""
    result = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, input=stdin,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {result.stderr}")
    return result.stdout.strip()


@dataclass
class Result:
    """What a command did: exit code, stdout and stderr (decoded; `raw` keeps stdout bytes)."""

    code: int
    out: str
    err: str
    raw: bytes


def helper_env(role: str | None) -> dict[str, str]:
    """The environment of a helper call: venv first on PATH, SWARMFORGE_ROLE as asked."""
    env = {k: v for k, v in os.environ.items() if k != "SWARMFORGE_ROLE"}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    if role is not None:
        env["SWARMFORGE_ROLE"] = role
    return env


def run_command(
    command: str, *args: str, cwd: Path | str, role: str | None, timeout: float = 60.0
) -> Result:
    """Run an installed command; `role=None` leaves SWARMFORGE_ROLE unset; a run past
    `timeout` seconds raises (a test fails, never stalls)."""
    proc = subprocess.run(
        [command, *args],
        cwd=cwd,
        env=helper_env(role),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


@dataclass(frozen=True)
class Seat:
    """One role of a project, as its roles.tsv row says it: `worktree` is relative to the
    root ("" for the main checkout, any other a `git worktree` on a branch of the role's
    name); `session` and `display` default to the role's name."""

    name: str
    worktree: str = ""
    mode: str = "task"
    agent: str = "agent"  # a stand-in: "claude" or "codex" would make it that harness (§16)
    session: str = ""
    display: str = ""

    def row(self, root: Path) -> tuple[str, ...]:
        path = str(root / self.worktree) if self.worktree else str(root)
        return (self.name, self.name, path, self.session or self.name,
                self.display or self.name, self.agent, self.mode)  # fmt: skip


def roles_tsv(rows: Sequence[tuple[str, ...]]) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


class Project:
    """A project root holding .swarmforge/roles.tsv, with one worktree per role."""

    def __init__(self, root: Path, worktrees: dict[str, Path]) -> None:
        self.root = root
        self.worktrees = worktrees
        self.sequence = 0  # the last number `next_sequence` gave out
        self.pools: set[str] = set()  # roles that are pools (docs/protocol.md §17)

    def handoffs(self, role: str) -> Path:
        if self.worktrees[role] == self.root and role in self.pools:
            return self.root / config.POOLS / role
        return self.worktrees[role] / ".swarmforge" / "handoffs"

    def box(self, role: str, box: str) -> Path:
        """A role's folder, e.g. `box("coder", "inbox/new")`."""
        return self.handoffs(role) / box

    def next_sequence(self) -> int:
        """A number for the next handoff laid by hand (swarm_handoff keeps its own)."""
        self.sequence += 1
        return self.sequence

    def run(
        self,
        command: str,
        *args: str,
        role: str | None,
        cwd: Path | None = None,
        timeout: float = 60.0,
    ) -> Result:
        """Run `command` as `role` (None: SWARMFORGE_ROLE unset) from `cwd` (default: the
        role's worktree); a run past `timeout` seconds fails the test."""
        if cwd is None:
            assert role is not None, "give a cwd when SWARMFORGE_ROLE is unset"
            cwd = self.worktrees[role]
        return run_command(command, *args, cwd=cwd, role=role, timeout=timeout)

    def role_mode(self, role: str) -> str:
        """The role's receive mode, as roles.tsv has it."""
        return config.load_roles(str(self.root))[role].mode

    def write_roles(self, text: str) -> None:
        (self.root / ".swarmforge" / "roles.tsv").write_text(text, encoding="utf-8")

    def commit(self, role: str = "coder", short: int = 10) -> str:
        """The abbreviated HEAD commit of `role`'s worktree."""
        return git(self.worktrees[role], "rev-parse", f"--short={short}", "HEAD")

    def draft(self, text: str, name: str = "draft.txt", where: Path | None = None) -> Path:
        """Write a draft file (default: in the project root) and return its path."""
        path = (where or self.root) / name
        path.write_text(text, encoding="utf-8")
        return path

    def note_draft(self, to: str = "cleaner", priority: str = "50", message: str = "hi") -> str:
        return f"type: note\nto: {to}\npriority: {priority}\nmessage: {message}\n"

    def deliver(self, queued: Path | str, recipient: str, enqueued_at: str | None = None) -> Path:
        """Stand-in for the daemon: copy a queued file into the recipient's inbox/new/ with
        `recipient` and `enqueued_at` set (docs/protocol.md §2, delivered copy)."""
        queued = Path(queued)
        handoff = hf.parse(queued.read_bytes(), str(queued))
        handoff.set("recipient", recipient)
        handoff.set("enqueued_at", enqueued_at or hf.iso_now())
        target = self.box(recipient, "inbox/new") / queued.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(handoff.render())
        return target

    def put(
        self,
        role: str,
        name: str,
        body: str = "Do the thing.\n",
        box: str = "inbox/new",
        **headers: str,
    ) -> Path:
        """Hand-craft a delivered handoff file in one of `role`'s folders."""
        fields = {"id": name, "from": "coder", "type": "note", "priority": "50", **headers}
        return self.lay(role, box, name, hf.Handoff(list(fields.items()), body))

    def lay(
        self, role: str, box: str, name: str, handoff: hf.Handoff, mtime: float | None = None
    ) -> Path:
        """Write `handoff` as `name` in one of `role`'s folders, plainly (see `files.write`)."""
        path = self.box(role, box) / name
        write(path, handoff.render(), mtime)
        return path


def make_project(root: Path, seats: Sequence[Seat], commits: int = 0) -> Project:
    """A git repository at `root` (made here) with one commit, then `commits` more (one
    minute apart, each changing one of 40 files), a worktree per seat and roles.tsv."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("a project\n")
    (root / "src").mkdir()
    (root / "src" / "app.txt").write_text("code\n")
    git(root, "add", "README", "src")
    git(root, "commit", "-q", "-m", "initial")
    if commits:
        _add_commits(root, commits)
    worktrees = {}
    for seat in seats:
        if seat.worktree:
            git(root, "worktree", "add", "-q", seat.worktree, "-b", seat.name)
        worktrees[seat.name] = root / seat.worktree if seat.worktree else root
    (root / ".swarmforge").mkdir()
    project = Project(root, worktrees)
    project.write_roles(HEADER + roles_tsv([seat.row(root) for seat in seats]))
    return project


def _add_commits(root: Path, count: int) -> None:
    """`count` commits on main in one `git fast-import` (hundreds cost what one does)."""
    stream = []
    for n in range(count):
        message, content = f"change {n}", f"change {n}\n"
        parent = "from refs/heads/main^0\n" if n == 0 else ""
        stream.append(
            f"commit refs/heads/main\nmark :{n + 1}\n"
            f"committer Test <test@example.com> {HISTORY_START + n * 60} +0000\n"
            f"data {len(message)}\n{message}\n{parent}"
            f"M 644 inline src/file{n % 40}.txt\ndata {len(content)}\n{content}\n"
        )
    git(root, "fast-import", "--quiet", stdin="".join(stream))
    git(root, "reset", "-q", "--hard", "main")


def make_pool_project(root: Path, size: int = 3, mode: str = "task", pool: str = "cleaner",
                      others: Sequence[str] = ("coder",)) -> Project:  # fmt: skip
    """A project with a pool of `size` members (docs/protocol.md §17) laid out as `init`
    lays it out (the pool's row, its H with only `inbox/new/`, a row per member), each
    member's worktree a plain folder (the queue needs no git), and roles `others` beside."""
    root.mkdir()
    (root / ".swarmforge").mkdir()
    rows = [f"{config.FORMAT_POOLS} hosts=\n"]
    worktrees = {}
    for name in others:
        worktrees[name] = root / name
        rows.append("\t".join((name, name, str(root / name), name, name, "agent", "task")))
    (root / config.POOLS / pool / "inbox" / "new").mkdir(parents=True)
    rows.append("\t".join((pool, "master", str(root), "", pool, "agent", mode, "", "",
                           f"{config.POOL_ROW}{size}")))  # fmt: skip
    for k in range(1, size + 1):
        name = f"{pool}-{k}"
        worktrees[name] = root / name
        rows.append("\t".join((name, name, str(root / name), name, name, "agent", mode, "",
                               "", pool)))  # fmt: skip
    for path in worktrees.values():
        path.mkdir()
    project = Project(root, worktrees)
    project.write_roles("\n".join(rows) + "\n")
    project.worktrees[pool] = root
    project.pools.add(pool)  # `handoffs(pool)` is the pool's own H
    return project
