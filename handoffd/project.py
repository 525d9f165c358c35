"""Laying out a project: the swarm configuration, git worktrees, handoff folders, roles.tsv.

A swarm configuration has one role per line:

    window <role> <agent> <worktree> [task|batch] [extra agent arguments...]

`init` turns it into the layout PROTOCOL.md §1 describes.  It is idempotent: what
exists and is right is left alone, so running it twice changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import resources

from handoffd import config, durable
from handoffd.config import Box

SAMPLE = "swarmforge.conf"
MAIN_WORKTREE = "master"  # the project checkout itself
_NOT_IN_BRANCH = frozenset(" ~^:?*[\\")
BOXES = (Box.DRAFTS, Box.SENT, Box.FAILED, Box.NEW, Box.IN_PROCESS, Box.COMPLETED)
# Runtime state, never committed; every worktree writes its own live file HANDOFF.md.
EXCLUDES = (".worktrees/", ".swarmforge/roles.tsv", ".swarmforge/tmux-socket",
            ".swarmforge/daemon/", ".swarmforge/handoffs/", ".swarmforge/HANDOFF.md")  # fmt: skip


class SwarmConfigError(Exception):
    """A swarm configuration that cannot be laid out; names the file and line."""


@dataclass(frozen=True)
class Window:
    """One role of the swarm configuration."""

    role: str
    agent: str
    worktree: str
    mode: str = "task"
    args: tuple[str, ...] = field(default=())

    def worktree_path(self, root: str) -> str:
        if self.worktree == MAIN_WORKTREE:
            return root
        return os.path.join(root, ".worktrees", self.worktree)


def sample_text() -> str:
    """The embedded sample configuration (a coder in task mode, a cleaner in batch mode)."""
    return resources.files("handoffd").joinpath("samples", SAMPLE).read_text(encoding="utf-8")


def parse(text: str, source: str) -> list[Window]:
    """Parse and validate a swarm configuration; every error names its line."""
    windows: list[Window] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{source}:{number}"
        try:
            words = shlex.split(line, comments=True)  # a trailing `# note` is not an argument
        except ValueError as error:
            raise SwarmConfigError(f"{where}: {error}") from None
        window = _window(words, where)
        _check_unique(window, windows, where)
        windows.append(window)
    if not windows:
        raise SwarmConfigError(f"{source}: no roles; add lines 'window <role> <agent> <worktree>'")
    return windows


def _window(words: list[str], where: str) -> Window:
    if len(words) < 4 or words[0] != "window":
        raise SwarmConfigError(
            f"{where}: expected 'window <role> <agent> <worktree> [task|batch] [agent args...]'"
        )
    _, role, agent, worktree, *rest = words
    if not config.valid_role_name(role):
        raise SwarmConfigError(
            f"{where}: invalid role name '{role}': use letters, digits and '-', no '_', '.' or '/'"
        )
    if not plain_name(worktree):
        raise SwarmConfigError(
            f"{where}: worktree name '{worktree}' must be a plain name git accepts as a branch"
        )
    mode = rest.pop(0) if rest and rest[0] in config.RECEIVE_MODES else "task"
    return Window(role, agent, worktree, mode, tuple(rest))


def plain_name(name: str) -> bool:
    """A worktree name that is also a valid branch name: no '/', not '.' or '..', and none
    of what `git check-ref-format --branch` refuses (a leading '-' would even be read as an
    option by `git worktree add`)."""
    return not (
        name.startswith(("-", "."))
        or name.endswith((".", ".lock"))
        or name in ("@", "HEAD")
        or any(bad in name for bad in ("..", "@{", "/"))
        or any(char in _NOT_IN_BRANCH or ord(char) < 32 or ord(char) == 127 for char in name)
    )


def _check_unique(window: Window, earlier: list[Window], where: str) -> None:
    for other in earlier:
        if other.role == window.role:
            raise SwarmConfigError(f"{where}: role '{window.role}' is defined twice")
        if other.worktree == window.worktree:
            raise SwarmConfigError(
                f"{where}: roles '{other.role}' and '{window.role}' share the worktree "
                f"'{window.worktree}'; each role needs its own worktree (its own inbox)"
            )


def roles_tsv(windows: list[Window], root: str) -> str:
    """roles.tsv: the 7 columns of PROTOCOL.md §1, then the agent's extra arguments
    (other tools ignore further columns)."""
    rows = [
        "\t".join((
            w.role, w.worktree, w.worktree_path(root), f"swarmforge-{w.role}",
            w.role[:1].upper() + w.role[1:], w.agent, w.mode, shlex.join(w.args),
        ))
        for w in windows
    ]  # fmt: skip
    return "".join(row.rstrip("\t") + "\n" for row in rows)


def socket_path(root: str) -> str:
    """A short tmux socket path, private to this user and this project (unix socket paths
    must stay under ~100 bytes, so it cannot live inside a deep project tree)."""
    digest = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), f"handoffd-{os.getuid()}", digest)


def init(root: str, windows: list[Window]) -> list[str]:
    """Lay out the project at `root`; returns what was created or changed."""
    changes: list[str] = []
    _ensure_repository(root, changes)
    for window in windows:
        _ensure_worktree(root, window, changes)
        for box in BOXES:
            os.makedirs(os.path.join(window.worktree_path(root), ".swarmforge", "handoffs", box),
                        exist_ok=True)  # fmt: skip
    swarmforge = os.path.join(root, config.SWARMFORGE)
    _write_if_changed(os.path.join(swarmforge, "roles.tsv"), roles_tsv(windows, root), changes)
    _write_if_changed(os.path.join(swarmforge, "tmux-socket"), socket_path(root) + "\n", changes)
    _exclude_runtime_state(root, changes)
    return changes


def _git(root: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def _must(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise SwarmConfigError(f"{what} failed: {result.stderr.strip()}")


def _ensure_repository(root: str, changes: list[str]) -> None:
    """A git repository with at least one commit (worktrees need a commit to branch from)."""
    os.makedirs(root, exist_ok=True)
    if _git(root, "rev-parse", "--show-toplevel").returncode != 0:
        _must(_git(root, "init", "-q", "-b", MAIN_WORKTREE), "git init")
        changes.append(f"git repository {root}")
    if _git(root, "rev-parse", "--verify", "-q", "HEAD").returncode != 0:
        identity = ["-c", "user.name=handoffd", "-c", "user.email=handoffd@localhost"]
        if _git(root, "config", "user.email").returncode == 0:
            identity = []
        _must(_git(root, *identity, "commit", "-q", "--allow-empty", "-m", "Start the swarm"),
              "the first commit")  # fmt: skip
        changes.append("first commit")


def _ensure_worktree(root: str, window: Window, changes: list[str]) -> None:
    path = window.worktree_path(root)
    if window.worktree == MAIN_WORKTREE or os.path.exists(os.path.join(path, ".git")):
        return
    branch = window.worktree
    has_branch = _git(root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}").returncode == 0
    args = [path, branch] if has_branch else ["-b", branch, path]
    _must(_git(root, "worktree", "add", "-q", *args), f"git worktree add {path}")
    changes.append(f"worktree {path} (branch {branch})")


def _write_if_changed(path: str, text: str, changes: list[str]) -> None:
    try:
        with open(path, encoding="utf-8") as file:
            if file.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    durable.replace(path, text.encode())
    changes.append(path)


def _exclude_runtime_state(root: str, changes: list[str]) -> None:
    """Keep runtime state out of git without touching tracked files: .git/info/exclude."""
    common = _git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip()
    exclude = os.path.join(common, "info", "exclude")
    try:
        with open(exclude, encoding="utf-8") as file:
            present = set(file.read().splitlines())
    except FileNotFoundError:
        present = set()
    missing = [pattern for pattern in EXCLUDES if pattern not in present]
    if missing:
        os.makedirs(os.path.dirname(exclude), exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as file:
            file.write("".join(f"{pattern}\n" for pattern in missing))
        changes.append(exclude)
