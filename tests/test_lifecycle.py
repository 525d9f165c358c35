"""One daemon per project (docs/protocol.md §5): `handoffd start`, `stop`, `stop_handoff_daemon`,
the lock that refuses a second daemon, and a stale pid file that never gets a stranger
signalled.  Real processes and real signals throughout."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.core import lifecycle
from tests.conftest import BIN, HANG, HOSTILE, SAID, Project, plant, wait_for
from tests.daemon_support import (
    alive,
    finish,
    handoffd,
    inbox,
    pid_file,
    queue,
    running_pid,
    spawn,
    stopping,
    terminate,
)

STOPPERS = {
    "handoffd stop": lambda root: handoffd("stop", root),
    "stop_handoff_daemon": lambda root: subprocess.run(
        [os.path.join(BIN, "stop_handoff_daemon"), root],
        capture_output=True, text=True, timeout=30, check=False,
    ),
}  # fmt: skip


@pytest.fixture
def stopper(project: Project) -> Iterator[Project]:
    yield from stopping(project)


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def start(project: Project) -> int:
    """`handoffd start`; the pid of the daemon it started."""
    result = handoffd("start", str(project.root))
    assert result.returncode == 0, result.stderr
    pid = running_pid(project)
    assert pid and alive(pid) and lifecycle.holder(str(project.root)) == pid
    return pid


def assert_no_daemon(project: Project, pid: int | None = None) -> None:
    assert lifecycle.holder(str(project.root)) is None
    assert not pid_file(project).exists()
    if pid:
        wait_for(lambda: not alive(pid), timeout=5, what=f"daemon {pid} to exit")


def test_start_returns_once_the_daemon_runs_and_it_delivers(stopper: Project) -> None:
    project = stopper
    pid = start(project)
    path = queue(project, "coder", ["QA"])

    wait_for(lambda: inbox(project, "QA") == [path.name], what="delivery")
    assert alive(pid)


def test_start_returns_promptly_when_its_output_is_read_through_a_pipe(stopper: Project) -> None:
    project = stopper
    started = time.monotonic()
    result = subprocess.run(
        ["bash", "-c", f'"{BIN}/handoffd" start "$1" | cat', "bash", str(project.root)],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started

    assert result.returncode == 0, result.stderr
    assert elapsed < 5, f"`handoffd start | cat` took {elapsed:.1f}s"
    assert "started" in result.stdout
    pid = running_pid(project)
    assert pid and alive(pid) and lifecycle.holder(str(project.root)) == pid


def test_starting_twice_says_it_already_runs_and_exits_0(stopper: Project) -> None:
    project = stopper
    pid = start(project)

    again = handoffd("start", str(project.root))

    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout and str(pid) in again.stdout
    assert running_pid(project) == pid and alive(pid)


def test_concurrent_starts_all_exit_0_and_leave_exactly_one_daemon(stopper: Project) -> None:
    project = stopper
    command = [os.path.join(BIN, "handoffd"), "start", str(project.root)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    starts = [subprocess.Popen(command, **pipes) for _ in range(4)]  # type: ignore[call-overload]
    results = [(p.wait(timeout=30), *p.communicate()) for p in starts]

    assert [code for code, _, _ in results] == [0] * 4, results
    pid = running_pid(project)
    assert pid and alive(pid) and lifecycle.holder(str(project.root)) == pid
    assert all(str(pid) in out for _, out, _ in results)
    assert sum("already running" in out for _, out, _ in results) == 3


def test_a_second_run_for_the_same_root_is_refused_naming_the_running_pid(
    stopper: Project,
) -> None:
    project = stopper
    pid = start(project)

    code, _, err = finish(spawn(project))

    assert code == 1
    assert str(pid) in err and "already running" in err
    assert running_pid(project) == pid and alive(pid)  # the first one is untouched


def test_a_second_run_is_refused_while_the_first_runs_in_the_foreground(
    project: Project,
) -> None:
    first = spawn(project)
    try:
        wait_for(lambda: running_pid(project) == first.pid, what="the first daemon")
        code, _, err = finish(spawn(project))
        assert code == 1 and f"pid {first.pid}" in err
    finally:
        terminate(first)


@pytest.mark.parametrize("command", sorted(STOPPERS))
def test_stop_stops_a_running_daemon_and_leaves_no_pid_file(stopper: Project, command: str) -> None:
    project = stopper
    pid = start(project)

    result = STOPPERS[command](str(project.root))

    assert result.returncode == 0, result.stderr
    assert_no_daemon(project, pid)


def test_stop_kills_a_wedged_daemon_that_does_not_answer_sigterm(stopper: Project) -> None:
    project = stopper
    pid = start(project)
    os.kill(pid, signal.SIGSTOP)  # wedged: TERM stays pending, only KILL works

    started = time.monotonic()
    result = handoffd("stop", str(project.root))

    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= lifecycle.STOP_GRACE  # TERM was tried first
    assert_no_daemon(project, pid)


@pytest.mark.parametrize("command", sorted(STOPPERS))
def test_stop_exits_0_when_no_daemon_runs(project: Project, command: str) -> None:
    result = STOPPERS[command](str(project.root))

    assert result.returncode == 0, result.stderr
    assert_no_daemon(project)


@pytest.mark.parametrize("command", sorted(STOPPERS))
def test_a_stale_pid_file_never_gets_an_unrelated_process_signalled(
    project: Project, stranger: subprocess.Popen[bytes], command: str
) -> None:
    pid_file(project).parent.mkdir(parents=True, exist_ok=True)
    pid_file(project).write_text(f"{stranger.pid}\n")

    result = STOPPERS[command](str(project.root))

    assert result.returncode == 0, result.stderr
    assert stranger.poll() is None and alive(stranger.pid)
    assert_no_daemon(project)


def test_stop_signals_the_lock_holder_not_the_pid_file_s_stranger(
    stopper: Project, stranger: subprocess.Popen[bytes]
) -> None:
    project = stopper
    pid = start(project)
    pid_file(project).write_text(f"{stranger.pid}\n")  # overwritten by someone

    assert handoffd("stop", str(project.root)).returncode == 0

    assert_no_daemon(project, pid)
    assert stranger.poll() is None and alive(stranger.pid)


def test_a_daemon_killed_with_sigkill_leaves_no_lock_a_new_one_cannot_take(
    project: Project,
) -> None:
    first = spawn(project)
    wait_for(lambda: running_pid(project) == first.pid, what="the first daemon")
    first.kill()
    first.wait()

    second = spawn(project)
    try:
        wait_for(lambda: running_pid(project) == second.pid, what="the second daemon")
        assert lifecycle.holder(str(project.root)) == second.pid
    finally:
        terminate(second)


# A killed daemon on its way out, as the kernel shows it: the main thread already a zombie,
# another thread still in a system call (an fsync on a busy disk) and so still holding the
# process's files, the lock among them, for `linger` seconds.  SYS_exit ends only the thread
# that calls it, which leaves the process in exactly that state.
DYING = """
import ctypes, fcntl, os, sys, threading, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
threading.Thread(target=time.sleep, args=(float(sys.argv[2]),)).start()
print("locked", flush=True)
ctypes.CDLL(None).syscall(60, 0)
"""


@pytest.fixture
def dying(project: Project) -> Iterator[subprocess.Popen[bytes]]:
    """The project's lock held by a process whose main thread is a zombie, for 1.5 s."""
    import sys

    holder = subprocess.Popen([sys.executable, "-c", DYING, str(project.root), "1.5"],
                              stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
    wait_for(lambda: lifecycle.exiting(holder.pid), timeout=5, what="the main thread to end")
    assert lifecycle.holder(str(project.root)) == holder.pid
    yield holder
    holder.kill()
    holder.wait()


def test_start_just_after_a_kill_waits_for_the_dying_daemon_and_starts_a_new_one(
    stopper: Project, dying: subprocess.Popen[bytes]
) -> None:
    """Pins `live_holder`: a zombie-led lock holder is not reported as a running daemon (it
    printed `already running` with exit 0, and no daemon ran: a kill -9 under disk load)."""
    project = stopper
    result = handoffd("start", str(project.root))
    assert result.returncode == 0, result.stderr
    assert "handoffd started" in result.stdout and "already running" not in result.stdout
    pid = running_pid(project)
    assert pid and pid != dying.pid and lifecycle.holder(str(project.root)) == pid


def test_run_just_after_a_kill_takes_the_lock_once_the_dying_daemon_lets_go(
    project: Project, dying: subprocess.Popen[bytes]
) -> None:
    lock = lifecycle.Lock(str(project.root))
    lock.acquire()  # waits for the dying holder, instead of AlreadyRunning
    try:
        assert lifecycle.holder(str(project.root)) == os.getpid()
    finally:
        lock.release()


def test_a_live_holder_is_still_refused_at_once(project: Project) -> None:
    """The wait is only for a holder on its way out: a running daemon is refused without one."""
    root = str(project.root)
    lock = lifecycle.Lock(root)
    lock.acquire()
    try:
        began = time.monotonic()
        with pytest.raises(lifecycle.AlreadyRunning):
            lifecycle.Lock(root).acquire()
        assert lifecycle.live_holder(root) == os.getpid()
        assert time.monotonic() - began < lifecycle.EXIT_GRACE / 2
    finally:
        lock.release()


def test_holder_is_none_for_a_free_lock_and_the_pid_for_a_held_one(project: Project) -> None:
    root = str(project.root)
    assert lifecycle.holder(root) is None
    lock = lifecycle.Lock(root)
    lock.acquire()
    try:
        assert lifecycle.holder(root) == os.getpid() == running_pid(project)
        with pytest.raises(lifecycle.AlreadyRunning) as running:
            lifecycle.Lock(root).acquire()
        assert running.value.pid == os.getpid()
    finally:
        lock.release()
    assert lifecycle.holder(root) is None and not pid_file(project).exists()


def test_removing_the_daemon_folder_under_a_running_daemon_never_lets_a_second_one_run(
    stopper: Project,
) -> None:
    """`rm -rf .swarmforge/daemon` (clearing the log, say), then `start`: still one daemon,
    which puts back its pid file and log and delivers every handoff exactly once."""
    project = stopper
    pid = start(project)
    daemon_dir = project.root / ".swarmforge" / "daemon"
    # Gone at one instant, as `rm -rf` ends: removing it in place could race the daemon
    # putting its pid file back, and fail with "directory not empty".
    os.rename(daemon_dir, project.root / "removed")
    shutil.rmtree(project.root / "removed")

    again = handoffd("start", str(project.root))
    assert again.returncode == 0 and "already" in again.stdout + again.stderr
    run = handoffd("run", str(project.root), timeout=10)
    assert run.returncode == 1 and str(pid) in run.stderr
    assert lifecycle.holder(str(project.root)) == pid
    wait_for(lambda: running_pid(project) == pid, timeout=10, what="the pid file put back")
    wait_for(lambda: (daemon_dir / "handoffd.log").exists(), timeout=10, what="a new log")
    paths = [queue(project, "coder", ["QA"]) for _ in range(20)]
    wait_for(lambda: len(inbox(project, "QA")) == 20, what="delivery")
    assert sorted(inbox(project, "QA")) == sorted(p.name for p in paths)
    # Copies appear before their originals are archived, later in the same pass.
    wait_for(lambda: all(not p.exists() for p in paths), timeout=10, what="originals archived")
    stopped = handoffd("stop", str(project.root))
    assert stopped.returncode == 0
    assert_no_daemon(project, pid)


def test_replacing_the_whole_swarmforge_folder_still_leaves_one_daemon(stopper: Project) -> None:
    """The lock is on the project root, which no clearing of `.swarmforge/` removes: a
    second `start` still finds the first daemon, which puts its pid file back."""
    project = stopper
    pid = start(project)
    folder = project.root / ".swarmforge"
    os.rename(folder, project.root / ".swarmforge-old")
    os.makedirs(folder)
    os.rename(project.root / ".swarmforge-old" / "roles.tsv", folder / "roles.tsv")

    again = handoffd("start", str(project.root))

    assert again.returncode == 0 and "already" in again.stdout + again.stderr
    assert lifecycle.holder(str(project.root)) == pid
    wait_for(lambda: running_pid(project) == pid, timeout=10, what="the pid file put back")


def test_a_helper_locking_a_worktrees_swarmforge_folder_is_not_taken_for_the_daemon(
    project: Project,
) -> None:
    """Helpers lock `<worktree>/.swarmforge/` (the live file); the first role's worktree is
    the root, so that folder must not be the daemon's lock."""
    fd = os.open(project.root / ".swarmforge", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert lifecycle.holder(str(project.root)) is None
        lock = lifecycle.Lock(str(project.root))
        lock.acquire()  # not blocked by the helper's lock
        assert lifecycle.holder(str(project.root)) == os.getpid()
        lock.release()
    finally:
        os.close(fd)


def test_wake_times_splits_sent_from_failed_and_skips_refusal_lines(tmp_path: Path) -> None:
    log = tmp_path / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir(parents=True)
    lines = [
        {"event": "wake", "role": "coder", "refused": False},
        {"event": "wake", "role": "QA", "refused": True},  # a sender told of a refusal
        {"event": "wake_failed", "role": "coder", "refused": False, "error": "no session"},
        {"event": "delivered", "role": "coder"},
    ]
    stamp = "2026-06-15T14:05:31.000000Z"
    log.write_text("".join(json.dumps({**line, "timestamp": stamp}) + "\n" for line in lines))
    at = 1781532331.0
    assert lifecycle.wake_times(str(tmp_path)) == ({"coder": [at]}, {"coder": [at]})


def test_the_log_tail_gives_each_wake_ups_submitted_and_the_last_started_options(
    tmp_path: Path,
) -> None:
    log = tmp_path / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir(parents=True)
    lines = [
        {"event": "started", "stall_wakes": 5},
        {"event": "wake", "role": "QA", "submitted": True},
        {"event": "wake", "role": "QA"},  # an older daemon's line: not known
        {"event": "wake", "role": "QA", "submitted": "yes"},  # not a bool: not known
        {"event": "started", "stall_wakes": 2, "idle_after": 2.0},  # the last one counts
        {"event": "wake", "role": "QA", "submitted": False},
    ]
    stamp = "2026-06-15T14:05:31.000000Z"
    log.write_text("".join(json.dumps({**line, "timestamp": stamp}) + "\n" for line in lines))
    tail = lifecycle.log_tail(str(tmp_path))
    assert tail.submitted == {"QA": [True, None, None, False]} and len(tail.sent["QA"]) == 4
    assert tail.options["stall_wakes"] == 2 and tail.options["idle_after"] == 2.0


def test_a_log_line_nested_past_the_parsers_depth_is_passed_over(tmp_path: Path) -> None:
    """A line appended to the log by hand, `"wake"` in it and 50 000 nested lists: the
    parser raises RecursionError, not ValueError; `status` and the board read the tail on
    every call, so it is passed over like any other line no daemon wrote."""
    log = tmp_path / ".swarmforge" / "daemon" / "handoffd.log"
    log.parent.mkdir(parents=True)
    deep = "[" * 50_000 + "]" * 50_000
    good = {"event": "wake", "role": "QA", "timestamp": "2026-06-15T14:05:31.000000Z"}
    log.write_text(f'{{"event": "wake", "x": {deep}}}\n' + json.dumps(good) + "\n")
    assert len(lifecycle.log_tail(str(tmp_path)).sent["QA"]) == 1


def test_run_start_and_stop_take_the_root_as_the_root_option_too(stopper: Project) -> None:
    """docs/protocol.md §8: every `handoffd` command also takes `--root ROOT`; the daemon
    commands of §5 answer to it as to their positional ROOT, from any working directory."""
    project = stopper
    root = str(project.root)
    queue(project, "coder", ["cleaner"])

    once = handoffd("run", "--once", "--root", root)
    assert once.returncode == 0, once.stderr
    assert inbox(project, "cleaner")  # delivered: the option named the project

    started = handoffd("start", "--root", root)
    assert started.returncode == 0, started.stderr
    pid = running_pid(project)
    assert pid and lifecycle.holder(root) == pid

    stopped = handoffd("stop", "--root", root)
    assert stopped.returncode == 0, stopped.stderr
    assert_no_daemon(project, pid)
    missing = handoffd("stop", "--root", root + "-missing")
    assert missing.returncode == 1
    shim = [os.path.join(BIN, "stop_handoff_daemon"), "--root", root]
    assert subprocess.run(shim, capture_output=True, timeout=30, check=False).returncode == 0


# --- hostile files in daemon/ (docs/protocol.md Part II) ---------------------------------------

DAEMON_FILES = {"pid": lifecycle.PID_FILE, "log": "handoffd.log"}


@pytest.mark.parametrize("what", HOSTILE)
@pytest.mark.parametrize("which", sorted(DAEMON_FILES))
def test_status_neither_waits_on_nor_follows_the_pid_file_or_the_log(
    project: Project, tmp_path: Path, which: str, what: str
) -> None:
    """`status` reads the pid file (since when the daemon runs) and the log's tail (its
    wake-ups): a FIFO, /dev/zero or a link outside there is passed over at once."""
    plant(project.root / lifecycle.DAEMON_DIR / DAEMON_FILES[which], what, tmp_path)
    shown = project.run("handoffd", "status", role="coder", timeout=HANG)
    assert shown.code == 0 and shown.out.startswith("daemon: NOT RUNNING"), shown.err


@pytest.mark.parametrize("what", HOSTILE)
@pytest.mark.parametrize("which", sorted(DAEMON_FILES))
def test_the_daemon_replaces_a_pid_file_or_log_that_is_no_regular_file_and_delivers(
    stopper: Project, tmp_path: Path, which: str, what: str
) -> None:
    """The daemon writes both: a FIFO there must not make it wait for a reader, a link
    must not be written through.  The entry itself is replaced by a file of its own."""
    project = stopper
    path = project.root / lifecycle.DAEMON_DIR / DAEMON_FILES[which]
    target = plant(path, what, tmp_path)
    mail = queue(project, "coder", ["cleaner"])
    once = handoffd("run", "--once", str(project.root), timeout=HANG)
    assert once.returncode == 0, once.stderr
    assert inbox(project, "cleaner") == [mail.name]
    log = project.root / lifecycle.DAEMON_DIR / "handoffd.log"
    assert log.is_file() and not log.is_symlink()
    if which == "log":
        first = json.loads(log.read_text().splitlines()[0])
        assert (first["event"], first["was"]) == ("log_replaced", SAID[what])
    assert target is None or stat.S_ISFIFO(target.lstat().st_mode)  # never opened, still there


def test_a_daemon_folder_that_is_a_link_is_replaced_and_nothing_lands_outside(
    stopper: Project, tmp_path: Path
) -> None:
    """The journal, the log and the pid file live in daemon/: written through a link they
    would land wherever it points.  The link is removed (never its target) and a folder
    of the project's own made."""
    project = stopper
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the daemon's\n")
    folder = project.root / lifecycle.DAEMON_DIR
    folder.symlink_to(outside)
    mail = queue(project, "coder", ["cleaner"])
    once = handoffd("run", "--once", str(project.root), timeout=HANG)
    assert once.returncode == 0, once.stderr
    assert inbox(project, "cleaner") == [mail.name]
    assert sorted(os.listdir(outside)) == ["keep.txt"]
    assert folder.is_dir() and not folder.is_symlink()
    logged = [json.loads(line) for line in (folder / "handoffd.log").read_text().splitlines()]
    assert {"event": "linked_folder", "folder": str(folder), "replaced": True}.items() <= next(
        e for e in logged if e["event"] == "linked_folder"
    ).items()
