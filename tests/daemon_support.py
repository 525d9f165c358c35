"""Support for the daemon's tests: a real tmux server, queued handoffs, the daemon's log,
in-process daemons stepped with a fake clock, and the daemon as a real subprocess.

The tmux server lives on a short private socket path (unix socket paths are limited to
~100 bytes; pytest's tmp_path is often longer).  Its sessions run `cat` with terminal
echo off, so each line typed into a pane shows exactly once, and only once it is whole.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from handoffd.core import handoff as hf
from handoffd.core import log as logging
from handoffd.daemon.daemon import Daemon
from tests.conftest import BIN, Project, wait_for

WAKE_TEXT = "You have new handoff mail. If idle, run ready_for_next.sh."
HANDOFFD = os.path.join(BIN, "handoffd")
T = TypeVar("T")


# --- waiting --------------------------------------------------------------------------


# --- tmux ------------------------------------------------------------------------------


class Tmux:
    """A private tmux server whose sessions echo what is typed into them."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="hd-", dir="/tmp")
        self.socket = os.path.join(self.dir, "s")
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["tmux", "-S", self.socket, "-f", os.devnull, *args],
            capture_output=True, text=True, env=self.env, timeout=10, check=False,
        )  # fmt: skip
        if check:
            assert result.returncode == 0, f"tmux {' '.join(args)}: {result.stderr}"
        return result

    def session(self, name: str) -> None:
        """A session running `cat`, ready once its terminal no longer echoes."""
        script = "stty -echo; echo READY; exec cat"
        self.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", "sh", "-c", script)
        wait_for(lambda: "READY" in self.capture(name), what=f"session {name} to start")

    def capture(self, name: str) -> str:
        return self.run("capture-pane", "-p", "-J", "-t", f"={name}:").stdout

    def wakes(self, name: str) -> int:
        """How many wake-up lines session `name` has received, once all typed input shows."""
        return self.typed(name, WAKE_TEXT)

    def typed(self, name: str, line: str) -> int:
        """How many times `line` was typed into session `name`, once all typed input shows.

        Input to a pane is ordered, so a marker typed after the wake-ups were sent shows
        only after them: when it is visible, so is every wake-up before it."""
        marker = f"MARK-{time.monotonic_ns()}"
        self.run("send-keys", "-t", f"={name}:", "-l", "--", marker)
        self.run("send-keys", "-t", f"={name}:", "Enter")
        text = wait_for(
            lambda: (lambda t: t if marker in t else "")(self.capture(name)),
            what=f"marker in session {name}",
        )
        return text.count(line)

    def server_pid(self) -> int:
        return int(self.run("display-message", "-p", "#{pid}").stdout.strip())

    def kill(self) -> None:
        self.run("kill-server", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def tmux_server() -> Iterator[Tmux]:
    """A fixture body: a private tmux server, killed at teardown."""
    server = Tmux()
    try:
        yield server
    finally:
        server.kill()


def use_socket(project: Project, socket: str) -> None:
    """Point the project at a tmux socket (`.swarmforge/tmux-socket`)."""
    (project.root / ".swarmforge" / "tmux-socket").write_text(socket + "\n")


# --- handoffs -------------------------------------------------------------------------

_sequence = iter(range(1, 1_000_000))


def handoff_name(sender: str, to: list[str], priority: str = "50", seq: int | None = None) -> str:
    number = next(_sequence) if seq is None else seq
    return f"{priority}_20260101T000000Z_{number:06d}_from_{sender}_to_{'_'.join(to)}.handoff"


def handoff_bytes(
    name: str, sender: str, to: str, body: str = "Re-read your role.\n\nDo it.\n", **extra: str
) -> bytes:
    """A queued note as swarm_handoff writes it; `extra` adds or replaces headers."""
    ident = name.split("_", 1)[1].split("_to_")[0]
    headers = {"id": ident, "from": sender, "to": to, "priority": name[:2], "type": "note"}
    headers.update({"message": "hi", "created_at": "2026-01-01T00:00:00Z", **extra})
    fields = [(key, value) for key, value in headers.items() if value is not None]
    return hf.Handoff(fields, body).render()


def queue(
    project: Project,
    sender: str,
    to: Iterable[str],
    name: str | None = None,
    data: bytes | None = None,
    **extra: str,
) -> Path:
    """Put a handoff into `sender`'s outbox atomically (as swarm_handoff does)."""
    recipients = list(to)
    name = name or handoff_name(sender, recipients)
    if data is None:
        data = handoff_bytes(name, sender, ",".join(recipients), **extra)
    drafts = project.box(sender, "outbox/tmp")
    drafts.mkdir(parents=True, exist_ok=True)
    temp = drafts / f".{name[:64]}.{os.getpid()}.tmp"  # short: `name` may be near the limit
    temp.write_bytes(data)
    os.stat(temp)  # as durable.create does: the rename then gets a later ctime (settle.py)
    target = project.box(sender, "outbox") / name
    os.rename(temp, target)
    return target


def stood_still(path: Path) -> None:
    """Age a file written in place in an outbox, as if left alone for a while: the daemon
    takes such a file only once it stands still (settle.py)."""
    past = time.time() - 10
    os.utime(path, (past, past), follow_symlinks=False)


def rewrite_roles(project: Project, text: str) -> None:
    """Replace roles.tsv atomically, as a careful operator would: a daemon reading it
    meanwhile sees the old file or the new one, never a half-written one."""
    path = project.root / ".swarmforge" / "roles.tsv"
    temp = path.with_name(".roles.tsv.tmp")
    temp.write_text(text, encoding="utf-8")
    os.rename(temp, path)


def add_role(project: Project, name: str, worktree: Path) -> None:
    """Append a role (session named like it) to roles.tsv, atomically."""
    path = project.root / ".swarmforge" / "roles.tsv"
    rewrite_roles(project, path.read_text() + f"{name}\t{name}\t{worktree}\t{name}\n")
    project.worktrees[name] = worktree


def inbox(project: Project, role: str) -> list[str]:
    """The visible names in a role's inbox/new/, sorted."""
    directory = project.box(role, "inbox/new")
    if not directory.is_dir():
        return []
    return sorted(name for name in os.listdir(directory) if not name.startswith("."))


# --- the log --------------------------------------------------------------------------


def log_path(project: Project) -> Path:
    return project.root / ".swarmforge" / "daemon" / "handoffd.log"


def read_log(project: Project) -> list[dict[str, Any]]:
    """Every complete JSON line of the daemon's log."""
    try:
        text = log_path(project).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def events(project: Project, name: str) -> list[dict[str, Any]]:
    return [entry for entry in read_log(project) if entry["event"] == name]


def wait_event(
    project: Project,
    name: str,
    timeout: float = 10.0,
    where: Callable[[dict[str, Any]], bool] = lambda entry: True,
) -> dict[str, Any]:
    """The first log event `name` satisfying `where`, waiting for it to be written."""

    def found() -> dict[str, Any] | None:
        return next((entry for entry in events(project, name) if where(entry)), None)

    return wait_for(found, timeout, what=f"log event {name!r}")


# --- in-process daemons ---------------------------------------------------------------


class RecordingWaker:
    """Stands in for the waker where a test steps the daemon: records each request
    (`requests` the new-mail wake-ups, `texts` every other line asked for)."""

    def __init__(self) -> None:
        self.requests: list[list[tuple[str, str]]] = []
        self.texts: list[tuple[str, str]] = []  # (role, text)
        self.cancelled: list[str] = []  # roles whose mail line was taken back

    def wake(self, roles: Iterable[tuple[str, str]], text: str = WAKE_TEXT) -> None:
        batch = list(roles)
        if batch and text == WAKE_TEXT:
            self.requests.append(batch)
        self.texts.extend((role, text) for role, _ in batch if text != WAKE_TEXT)

    def look(self, roles: Iterable[tuple[str, str]]) -> None:
        pass

    def cancel(self, role: str, text: str = WAKE_TEXT) -> bool:
        self.cancelled.append(role)
        return True

    def waiting(self, role: str) -> bool:
        return False  # every request is "typed" when it is recorded

    def held(self, role: str) -> bool:
        return False  # nor waits behind a person's text

    def drain(self, timeout: float) -> bool:
        return True

    def close(self, wait: float = 0.0) -> None:
        pass

    def woken(self) -> list[str]:
        """Every role asked for, in order."""
        return [role for batch in self.requests for role, _ in batch]


def open_daemon(
    project: Project,
    renotify_after: float = 120.0,
    record: bool = True,
    watch: bool = False,
    idle_after: float = 0.0,
    idle_wait: float = 300.0,
) -> Daemon:
    """A daemon for `project`, logging to its log file, recovered and ready to step (no
    watches unless `watch`: then close it).  With `record`, wake-ups are recorded instead
    of sent.  Wake-ups are typed at once unless `idle_after` says otherwise."""
    log_path(project).parent.mkdir(parents=True, exist_ok=True)
    log = logging.configure(str(log_path(project)), console=False)
    daemon = Daemon(str(project.root), log, renotify_after, idle_after=idle_after,
                    idle_wait=idle_wait)  # fmt: skip
    if record:
        daemon.waker.close()
        daemon.waker = RecordingWaker()  # type: ignore[assignment]
    daemon.open(watch=watch)
    return daemon


# --- the daemon as a process ----------------------------------------------------------


def spawn(project: Project, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`handoffd run ARGS ROOT` as a child process with piped output."""
    return subprocess.Popen(
        [HANDOFFD, "run", *args, str(project.root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip


def handoffd(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HANDOFFD, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def pid_file(project: Project) -> Path:
    return project.root / ".swarmforge" / "daemon" / "handoffd.pid"


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            state = file.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def running_pid(project: Project) -> int | None:
    """The pid the running daemon wrote, if its file is there."""
    try:
        return int(pid_file(project).read_text())
    except (FileNotFoundError, ValueError):
        return None


def finish(process: subprocess.Popen[str], timeout: float = 15.0) -> tuple[int, str, str]:
    """Wait for a spawned daemon to exit; its exit code, stdout and stderr."""
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def terminate(process: subprocess.Popen[str]) -> None:
    """Teardown: make sure a spawned daemon is gone."""
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.communicate(timeout=10)


def stopping(project: Project) -> Iterator[Project]:
    """A fixture body: the project, with any daemon still running for it stopped at teardown."""
    yield project
    handoffd("stop", str(project.root))
