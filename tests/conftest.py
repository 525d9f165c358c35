"""Shared fixtures: a real git project with real worktrees, and a way to run the helpers in it.

The project is built by `testbed`, the factory the benchmark shares (no pytest there); it
has three roles (docs/protocol.md §1):

    coder     the main checkout            task mode
    cleaner   .worktrees/cleaner           batch mode
    QA        .worktrees/QA                task mode (empty receive-mode column)

Helpers run as real subprocesses of the installed commands, with the venv's bin dir
first on PATH, and `SWARMFORGE_ROLE` set or unset as a test asks (`Project.run`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from testbed import BIN, GIT_ENV, Project, Result, Seat, git, helper_env, roles_tsv, run_command
from testbed import make_project as make_repository

__all__ = ["BIN", "GIT_ENV", "Project", "Result", "git", "helper_env", "roles_tsv", "run_command"]

# seconds: a command facing a FIFO, a device or a link where its file should be answers at
# once; one that waits on it fails the test here, never stalls the suite
HANG = 10.0
HOSTILE = ("fifo", "device", "link")  # what `plant` can put where a file should be
SAID = {"fifo": "a FIFO", "device": "a device", "link": "a symbolic link"}  # how it is named

T = TypeVar("T")
SEATS = (
    Seat("coder", display="Coder"),
    Seat("cleaner", ".worktrees/cleaner", "batch", "bot", display="Cleaner"),
    Seat("QA", ".worktrees/QA", ""),
)


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the package once, before any test runs, as `pip install` does for an
    installed one.  Under PYTHONDONTWRITEBYTECODE nothing else writes the bytecode but the
    benchmark's start-up section, which a test runs midway: the helpers' syscalls then
    changed under the crash-point tests, which number them (a module with no bytecode is an
    extra failed open), and every helper call before it compiled its modules anew."""
    import compileall

    import handoffd

    compileall.compile_dir(os.path.dirname(handoffd.__file__), quiet=1)


# swarm_handoff's one-line warning when no daemon runs for the project (docs/protocol.md §3).
NO_DAEMON = "WARNING: no handoffd daemon is running for "


def without_daemon_warning(err: str) -> str:
    """stderr less the no-daemon warning: for tests of queueing that run no daemon."""
    return "".join(line for line in err.splitlines(True) if not line.startswith(NO_DAEMON))


def wait_for(
    condition: Callable[[], T], timeout: float = 15.0, what: str = "condition", every: float = 0.01
) -> T:
    """Poll `condition` every `every` seconds until it returns something truthy; fail the
    test at the deadline.  For observing another process, whose progress no pipe reports."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


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


_TOUCHED: list[list[tuple[str, str]]] = []  # what each armed `touched()` records


def _record(event: str, args: tuple[object, ...]) -> None:
    if _TOUCHED and event in ("open", "os.listdir", "os.scandir") and args:
        where = args[0]
        path = os.fsdecode(where) if isinstance(where, (str, bytes)) else f"<fd {where}>"
        _TOUCHED[-1].append((event.removeprefix("os."), path))


@contextlib.contextmanager
def touched() -> Iterator[list[tuple[str, str]]]:
    """Record each (`open` | `listdir` | `scandir`, path) this process makes in the block,
    through an audit hook (installed once: hooks cannot be removed)."""
    if not hasattr(touched, "hooked"):
        sys.addaudithook(_record)
        touched.hooked = True  # type: ignore[attr-defined]
    _TOUCHED.append([])
    try:
        yield _TOUCHED[-1]
    finally:
        _TOUCHED.pop()


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every entry below `directory` (hidden ones too): files map to bytes, dirs to None."""
    tree: dict[str, bytes | None] = {}
    for path in sorted(directory.rglob("*")):
        key = str(path.relative_to(directory))
        tree[key] = path.read_bytes() if path.is_file() else None
    return tree


def make_project(base: Path) -> Project:
    """The project of the tests (see the module's docstring) at `base`/proj."""
    return make_repository(base / "proj", SEATS)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path.resolve())
