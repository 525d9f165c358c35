"""Support for the crash, fault and property tests: queueing in bulk, the invariant,
injected I/O errors, tmpfs mounts, strace, and a worker that plays the recipients.

The invariant (docs/protocol.md §5.2, §5.3) is checked twice over: by `handoffd.daemon.audit`, and
by direct checks here that do not share its code (a recursive scan for hidden temp
files, batch dirs included, and a count of every copy by id and recipient).

Run as `python -m tests.fault_support work ROOT ROLE...` (from the repository root) this
module is the recipients' side of the kill -9 torture: it calls the real
`ready_for_next` and `done_with_current` commands as each role, round after round, until
its stdin is closed, then prints a JSON summary of what the helpers answered.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.core.config import Box, Role
from handoffd.daemon import audit
from handoffd.daemon.daemon import Daemon
from handoffd.delivery import journal
from handoffd.delivery.delivery import JOURNAL
from handoffd.queue.inbox import Inbox
from testbed import queue_note
from tests.conftest import git, make_project, roles_tsv

REPO = Path(__file__).resolve().parents[1]
INBOX = (Box.NEW, Box.IN_PROCESS, Box.COMPLETED)


# --- the project ----------------------------------------------------------------------


def roles_of(root: Path | str) -> dict[str, Role]:
    return config.load_roles(str(root))


class RecordingLog:
    """A stand-in for the daemon's structlog logger that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _record(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = warning = error = exception = debug = _record

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for name, fields in self.events if name == event]


RECIPIENTS = ["coder", "cleaner", "QA"]


def ident_of(path: str) -> str:
    """The id a queued file's name carries: `<prio>_<id>_to_<recipients>.handoff`."""
    return os.path.basename(path).split("_", 1)[1].split("_to_")[0]


class Scene:
    """A project with a fourth role, architect, whose outbox holds one note to three roles;
    `reset` puts it back to exactly that state."""

    def __init__(self, base: Path, original: tuple[str, bytes] | None = None) -> None:
        base.mkdir()
        self.project = make_project(base)
        root = self.project.root
        git(root, "worktree", "add", "-q", ".worktrees/architect", "-b", "architect")
        rows = [(n, n, str(p), n, n, "agent", "batch" if n == "cleaner" else "task")
                for n, p in self.project.worktrees.items()]  # fmt: skip
        rows.append(("architect", "architect", str(root / ".worktrees/architect"), "a", "A", "x"))
        self.project.write_roles(roles_tsv(rows))
        self.roles = roles_of(root)
        if original is None:
            path = queue_note(self.roles, "architect", RECIPIENTS, message="three")
            original = (os.path.basename(path), Path(path).read_bytes())
        self.original = original
        self.ident = ident_of(original[0])
        self.reset()

    def reset(self) -> None:
        """Back to the start: only the original in architect's outbox, no daemon state."""
        for role in self.roles.values():
            shutil.rmtree(role.handoffs, ignore_errors=True)
            os.makedirs(os.path.dirname(role.handoffs), exist_ok=True)  # same start every time
        shutil.rmtree(self.project.root / ".swarmforge" / "daemon", ignore_errors=True)
        # the operator's mailbox too, which the daemon makes on its first pass (§18)
        shutil.rmtree(self.project.root / config.OPERATOR_DIR, ignore_errors=True)
        architect = self.roles["architect"]
        os.makedirs(architect.path(Box.DRAFTS))
        Path(architect.handoffs, "sequence").write_text("000001\n")
        temp = Path(architect.path(Box.DRAFTS, "." + self.original[0]))
        temp.write_bytes(self.original[1])
        os.stat(temp)  # as durable.create does: the rename then reads as whole (settle.py)
        os.rename(temp, architect.path(Box.OUTBOX, self.original[0]))

    def take_everything(self) -> None:
        """Each recipient takes what it sees, as the helpers would between the crash and
        the restart: a redelivery would now show as a second copy."""
        for name in RECIPIENTS:
            inbox = Inbox(self.roles[name].handoffs)
            inbox.take_batch() if self.roles[name].mode == "batch" else inbox.take_task()

    def expect(self) -> dict[str, list[str]]:
        return {self.ident: RECIPIENTS}

    def visible_copies(self) -> list[str]:
        return [
            role.path(Box.NEW, n)
            for role in self.roles.values()
            for n in _names(role.path(Box.NEW))
            if hf.is_visible(n)
        ]

    def archived(self) -> bool:
        return os.path.lexists(self.roles["architect"].path(Box.SENT, self.original[0]))


def _names(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def open_daemon(root: Path | str) -> tuple[Daemon, RecordingLog]:
    """An in-process daemon for `root`, recovered and ready to `step(now)`; no watcher.
    (`handoffd run` creates the daemon folder when it takes its lock; so do we.)"""
    os.makedirs(os.path.join(root, config.SWARMFORGE, "daemon"), exist_ok=True)
    log = RecordingLog()
    daemon = Daemon(str(root), log)  # type: ignore[arg-type]
    daemon.open(watch=False)
    return daemon, log


# --- the invariant --------------------------------------------------------------------


def partial_copies(roles: dict[str, Role]) -> list[str]:
    """Visible files in any new/ that are not complete, stamped copies (one that vanishes
    while we look was taken by its recipient: fine)."""
    problems = []
    for role in roles.values():
        try:
            names = [n for n in os.listdir(role.path(Box.NEW)) if hf.is_visible(n)]
        except FileNotFoundError:
            continue
        for name in names:
            path = role.path(Box.NEW, name)
            try:
                with open(path, "rb") as file:
                    data = file.read()
            except (FileNotFoundError, IsADirectoryError):
                continue
            problem = _copy_problem(data, path, role.name)
            if problem:
                problems.append(problem)
    return problems


def _copy_problem(data: bytes, path: str, recipient: str) -> str | None:
    try:
        handoff = hf.parse(data, path)
    except hf.HandoffError as error:
        return f"partial or broken copy: {error}"
    if handoff.get("recipient") != recipient or not handoff.get("enqueued_at"):
        return f"copy not stamped for {recipient}: {path}"
    if not handoff.body.endswith("\n"):
        return f"copy with a truncated body: {path}"
    return None


def hidden_temps(roles: dict[str, Role]) -> list[str]:
    """Every `.…tmp` file below any role's handoff directory, batch dirs included."""
    found = []
    for role in roles.values():
        for directory, _, names in os.walk(role.handoffs):
            found += [os.path.join(directory, n) for n in names if _is_temp(n)]
    return found


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


def copies_by_id(roles: dict[str, Role], live: bool = False) -> Counter[tuple[str, str]]:
    """(id, recipient) -> how many copies sit in the recipient's new/, in_process/ and
    completed/, batch dirs included.

    `live`: the helpers may be moving files while we count (a poll, not the final audit),
    so a file gone between the listing and the read is skipped: it moves forward
    (new -> in_process -> completed), the order we walk in, so it is usually counted
    further on, and otherwise the caller's next poll sees it. At rest, a file that cannot
    be read is a failure."""
    counts: Counter[tuple[str, str]] = Counter()
    for role in roles.values():
        for box in INBOX:
            for directory, dirs, names in os.walk(role.path(box)):
                dirs[:] = [d for d in dirs if hf.is_visible(d)]
                for name in (n for n in names if hf.is_visible(n)):
                    ident = _copy_id(os.path.join(directory, name), live)
                    if ident is not None:
                        counts[(ident or name, role.name)] += 1
    return counts


def _copy_id(path: str, live: bool) -> str | None:
    """The id header of the copy at `path` ("" without one); None when it moved away
    while we looked and `live` allows that."""
    try:
        return hf.read(path).get("id") or ""
    except hf.HandoffError:
        if live and not os.path.lexists(path):
            return None
        raise


def originals(roles: dict[str, Role]) -> dict[str, list[str]]:
    """Original filename -> the folders (outbox/sent/failed) holding a file of that name."""
    where: dict[str, list[str]] = {}
    for role in roles.values():
        for box in (Box.OUTBOX, Box.SENT, Box.FAILED):
            try:
                names = os.listdir(role.path(box))
            except FileNotFoundError:
                continue
            for name in names:
                if hf.is_visible(name) and name.endswith(".handoff"):
                    where.setdefault(name, []).append(f"{role.name}/{box}")
    return where


def invariant_problems(root: Path | str, roles: dict[str, Role]) -> list[str]:
    """Everything wrong with a project at rest: handoffd.daemon.audit's findings plus our own."""
    problems = list(audit.audit(str(root), roles).problems)
    problems += [f"hidden temp file left: {path}" for path in hidden_temps(roles)]
    if journal.load(os.path.join(root, JOURNAL)) is not None:
        problems.append("committed journal left behind")
    for name, places in originals(roles).items():
        if len(places) != 1:
            problems.append(f"original {name} is in {places}")
    problems += partial_copies(roles)
    return problems


def assert_delivered_once(root: Path | str, expected: dict[str, list[str]]) -> None:
    """The invariant holds, every original in `expected` (id -> recipients) is in sent/,
    and each recipient holds exactly one copy of it, nobody else any."""
    roles = roles_of(root)
    problems = invariant_problems(root, roles)
    assert not problems, "\n".join(problems)
    counts = copies_by_id(roles)
    for ident, recipients in expected.items():
        for name in roles:
            want = 1 if name in recipients else 0
            assert counts[(ident, name)] == want, f"{ident}: {name} holds {counts[(ident, name)]}"
    sent = {n for n, places in originals(roles).items() if places[0].endswith("/sent")}
    assert len(sent) == len(expected), f"{len(sent)} originals in sent/, {len(expected)} queued"


# --- injected faults ------------------------------------------------------------------


class Faults:
    """Make chosen calls of `os.<name>` fail with an errno, in this process only.

    `fail(name, code, when)` counts the calls of `os.<name>` whose first argument passes
    `where` (default: every call) and raises `OSError(code)` on those numbered in `when`
    (1-based), or on all of them when `when` is None.  `calls` records each call's path.
    """

    def __init__(self, monkeypatch: Any) -> None:
        self.monkeypatch = monkeypatch
        self.calls: dict[str, list[str]] = {}
        self.injected: list[tuple[str, str]] = []

    def fail(
        self,
        name: str,
        code: int,
        when: set[int] | None = None,
        where: Callable[[str], bool] = lambda path: True,
    ) -> None:
        real = getattr(os, name)
        calls = self.calls.setdefault(name, [])

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            path = describe(args[0]) if args else ""
            if where(path):
                calls.append(path)
                if when is None or len(calls) in when:
                    self.injected.append((name, path))
                    raise OSError(code, os.strerror(code), path)
            return real(*args, **kwargs)

        self.monkeypatch.setattr(os, name, wrapper)

    def clear(self) -> None:
        self.monkeypatch.undo()


def describe(target: object) -> str:
    """A path for a path argument, the file's path for a file descriptor."""
    if isinstance(target, int):
        try:
            return os.readlink(f"/proc/self/fd/{target}")
        except OSError:
            return f"fd {target}"
    return os.fsdecode(target) if isinstance(target, str | bytes | os.PathLike) else ""


# --- tmpfs and strace -------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path | str, size: str) -> Iterator[str | None]:
    """Mount a tmpfs of `size` at `path` for the block; yields None (mounts nothing) with
    the reason when mounting is not allowed here, so the caller can skip."""
    try:
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError as error:
        yield f"cannot run mount here: {error}"
        return
    if result.returncode != 0:
        yield f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}"
        return
    try:
        yield None
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(directory: Path | str) -> str:
    """Fill the filesystem holding `directory` until a write fails with ENOSPC; the filler's
    path (remove it to free the space)."""
    path = os.path.join(directory, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                return path
    finally:
        os.close(fd)


def strace_problem() -> str | None:
    """Why strace cannot trace and inject here (None when it can)."""
    strace = shutil.which("strace")
    if strace is None:
        return "strace is not installed"
    with tempfile.TemporaryFile() as err:
        code = subprocess.run([strace, "-f", "-o", os.devnull, "true"], stderr=err, check=False)
        err.seek(0)
        if code.returncode != 0:
            return f"strace cannot trace here (ptrace not permitted?): {err.read().decode()}"
    return None


# --- the recipients' worker -------------------------------------------------------------


def start_worker(root: Path | str, roles: list[str]) -> subprocess.Popen[bytes]:
    """A process playing `roles` with the real helpers until its stdin is closed."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fault_support", "work", str(root), *roles],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip


def stop_worker(worker: subprocess.Popen[bytes], timeout: float = 30.0) -> dict[str, Any]:
    """Close the worker's stdin (communicate does), wait for it and return its summary."""
    out, _ = worker.communicate(timeout=timeout)
    assert worker.returncode == 0, f"worker exited with {worker.returncode}"
    summary: dict[str, Any] = json.loads(out)
    return summary


def _work(root: str, names: list[str]) -> None:
    """Round after round: each role runs ready_for_next, then done_with_current."""
    roles = config.load_roles(root)
    env = {k: v for k, v in os.environ.items() if k != "SWARMFORGE_ROLE"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    summary: dict[str, Any] = {"calls": 0, "taken": 0, "completed": 0, "refused": []}
    while not select.select([sys.stdin], [], [], 0)[0]:  # readable: our stdin was closed
        for name in names:
            for command in ("ready_for_next", "done_with_current"):
                result = subprocess.run(
                    [command], cwd=roles[name].worktree, env={**env, "SWARMFORGE_ROLE": name},
                    capture_output=True, text=True, timeout=60, check=False,
                )  # fmt: skip
                summary["calls"] += 1
                summary["taken"] += result.stdout.count("TASK: ")
                summary["completed"] += result.stdout.count("COMPLETED: ")
                # 1 is NO_CURRENT_TASK / NO_CURRENT_BATCH: nothing was in process.
                if result.returncode not in (0, 1) or (result.returncode == 1 and "NO_" not in (
                    result.stderr
                )):  # fmt: skip
                    summary["refused"].append([name, command, result.returncode, result.stderr])
    json.dump(summary, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1:2] == ["work"]:
        _work(sys.argv[2], sys.argv[3:])
