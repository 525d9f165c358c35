"""Shared fixtures: a real git project with real worktrees, and a way to run the helpers in it.

The project has three roles (docs/protocol.md §1):

    coder     the main checkout            task mode
    cleaner   .worktrees/cleaner           batch mode
    QA        .worktrees/QA                task mode (empty receive-mode column)

Helpers run as real subprocesses of the installed commands, with the venv's bin dir
first on PATH, and `SWARMFORGE_ROLE` set or unset as a test asks.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from handoffd import handoff as hf

BIN = os.path.dirname(sys.executable)
T = TypeVar("T")

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


@dataclass
class Result:
    """What a command did: exit code, stdout and stderr (decoded; `raw` keeps stdout bytes)."""

    code: int
    out: str
    err: str
    raw: bytes


# swarm_handoff's one-line warning when no daemon runs for the project (docs/protocol.md §3).
NO_DAEMON = "WARNING: no handoffd daemon is running for "


def without_daemon_warning(err: str) -> str:
    """stderr less the no-daemon warning: for tests of queueing that run no daemon."""
    return "".join(line for line in err.splitlines(True) if not line.startswith(NO_DAEMON))


def wait_for(condition: Callable[[], T], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll `condition` until it returns something truthy; fail the test at the deadline.
    For observing another process, whose progress no pipe reports."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def git(cwd: Path | str, *args: str) -> str:
    """Run git in `cwd`, fail the test on error, return stdout stripped."""
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def helper_env(role: str | None) -> dict[str, str]:
    """The environment of a helper call: venv first on PATH, SWARMFORGE_ROLE as asked."""
    env = {k: v for k, v in os.environ.items() if k != "SWARMFORGE_ROLE"}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    if role is not None:
        env["SWARMFORGE_ROLE"] = role
    return env


# seconds: a command facing a FIFO, a device or a link where its file should be answers at
# once; one that waits on it fails the test here, never stalls the suite
HANG = 10.0


HOSTILE = ("fifo", "device", "link")  # what `plant` can put where a file should be
SAID = {"fifo": "a FIFO", "device": "a device", "link": "a symbolic link"}  # how it is named


def plant(path: Path, what: str, outside: Path) -> Path | None:
    """Put a hostile entry where the file `path` should be (docs/protocol.md Part II): a FIFO
    nobody writes to, a device that never ends (`/dev/zero`'s numbers), or a link to a FIFO
    in `outside` — a command that follows the link blocks just as on the FIFO, so answering
    at once shows it was not followed.  Returns the link's target, if any."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    if what == "fifo":
        os.mkfifo(path)
    elif what == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 5))
        except PermissionError:
            pytest.skip("making a device node needs CAP_MKNOD")
    else:
        target = outside / f"{path.name}.outside"
        os.mkfifo(target)
        path.symlink_to(target)
        return target
    return None


def run_command(
    command: str, *args: str, cwd: Path | str, role: str | None, timeout: float = 60.0
) -> Result:
    """Run an installed command; `role=None` leaves SWARMFORGE_ROLE unset."""
    proc = subprocess.run(
        [command, *args],
        cwd=cwd,
        env=helper_env(role),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode(), proc.stdout)


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every entry below `directory` (hidden ones too): files map to bytes, dirs to None."""
    tree: dict[str, bytes | None] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        tree[key] = path.read_bytes() if path.is_file() else None
    return tree


class Project:
    """A project root holding .swarmforge/roles.tsv, with one worktree per role."""

    def __init__(self, root: Path, worktrees: dict[str, Path]) -> None:
        self.root = root
        self.worktrees = worktrees

    def handoffs(self, role: str) -> Path:
        return self.worktrees[role] / ".swarmforge" / "handoffs"

    def box(self, role: str, box: str) -> Path:
        """A role's folder, e.g. `box("coder", "inbox/new")`."""
        return self.handoffs(role) / box

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
        return "batch" if role == "cleaner" else "task"

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
        content = hf.Handoff(list(fields.items()), body).render()
        path = self.box(role, box) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return path


def roles_tsv(rows: list[tuple[str, ...]]) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


def make_project(base: Path) -> Project:
    """A git repository with one commit and a worktree per role, plus roles.tsv."""
    root = base / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("a project\n")
    (root / "src").mkdir()
    (root / "src" / "app.txt").write_text("code\n")
    git(root, "add", "README", "src")
    git(root, "commit", "-q", "-m", "initial")
    worktrees = {"coder": root}
    for name in ("cleaner", "QA"):
        git(root, "worktree", "add", "-q", f".worktrees/{name}", "-b", name)
        worktrees[name] = root / ".worktrees" / name
    (root / ".swarmforge").mkdir()
    project = Project(root, worktrees)
    project.write_roles(
        "# role\tworktree-name\tworktree-path\tsession\tdisplay\tagent\treceive-mode\n"
        + roles_tsv(
            [
                ("coder", "coder", str(root), "coder", "Coder", "claude", "task"),
                (
                    "cleaner",
                    "cleaner",
                    str(worktrees["cleaner"]),
                    "cleaner",
                    "Cleaner",
                    "codex",
                    "batch",
                ),
                ("QA", "QA", str(worktrees["QA"]), "QA", "QA", "claude", ""),
            ]
        )
    )
    return project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path.resolve())
