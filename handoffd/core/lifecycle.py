"""One daemon per project: its lock, pid file, start, stop and readiness notices.

The kernel lock (`flock` on the project's root folder itself) is the truth about
whether a daemon runs; the pid file is a courtesy for people.  `stop` signals only the
process the kernel says holds this project's lock, so a stale pid file never gets a
stranger signalled, and a killed daemon never leaves a lock behind.

The lock is on a folder, not on a file in `daemon/`: someone clearing `daemon/` (to get
rid of a large log, say) would unlink a lock file from under the running daemon, and the
next `start` would lock a new file and run a second daemon beside the first.  It is the
root, not `.swarmforge/`: the helpers lock each worktree's `.swarmforge/` while they
rewrite its live file, and the first role's worktree is often the root.  Taking the lock
writes nothing, so a daemon starts on a full disk.

`swarm_handoff` asks `holder` whether a daemon will deliver what it queued, and the
views read `daemon_state`: what only starting, stopping and notifying use (`subprocess`,
`socket`, `select`, `signal`, which bring `re` and `enum` with them) is imported there.
"""

from __future__ import annotations

import fcntl
import os
import time

from handoffd.core import safeio
from handoffd.core.config import SWARMFORGE

DAEMON_DIR = os.path.join(SWARMFORGE, "daemon")
PID_FILE = "handoffd.pid"
PID_LIMIT = 64  # bytes: one number and a line feed; never read more of the pid file
READY_FD_ENV = "HANDOFFD_READY_FD"
STOP_GRACE = 5.0  # seconds between TERM and KILL
# seconds a daemon on its way out may keep the lock: killed, its main thread is already a
# zombie while another thread finishes a system call (an fsync on a busy disk), and until
# that thread ends the process holds its files, the lock among them
EXIT_GRACE = 5.0
EXIT_POLL = 0.02  # seconds between looks at a lock on its way to being let go (or stopped)


def daemon_path(root: str, name: str) -> str:
    return os.path.join(root, DAEMON_DIR, name)


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None) -> None:
        super().__init__(f"pid {pid}" if pid else "pid unknown")
        self.pid = pid


class Lock:
    """The project's daemon lock, held for the daemon's whole life."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = lock_path(root)
        self.fd: int | None = None
        self.identity: tuple[int, int] | None = None
        self.pid_error: OSError | None = None  # the pid file could not be written
        self.replaced = False  # a link stood where daemon/ should be, and was removed

    def acquire(self) -> None:
        """Take the lock or raise `AlreadyRunning` with the holder's pid (a holder on its way
        out is waited for, see `live_holder`); then write the pid file if we can (a full disk
        must not keep the daemon from starting)."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        deadline = time.monotonic() + EXIT_GRACE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                running = live_holder(self.root, deadline - time.monotonic())
                # past the grace it is refused even when /proc/locks names no holder (none
                # readable there, say), so a lock that stays taken never spins us forever
                if running is not None or time.monotonic() > deadline:
                    os.close(fd)
                    raise AlreadyRunning(running) from None
                time.sleep(EXIT_POLL)  # the one on its way out let go: try again
        self.fd = fd
        info = os.fstat(fd)
        self.identity = (info.st_dev, info.st_ino)
        try:
            self.replaced = own_folder(self.root)
        except OSError as error:
            self.pid_error = error
            return
        self.pid_error = ensure_pid(self.root, os.getpid())

    def lost(self) -> bool:
        """Whether the locked folder is no longer the project's root (removed or replaced):
        a new daemon could then lock the new one, so this one must stop."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False  # cannot tell: keep going
        return (info.st_dev, info.st_ino) != self.identity

    def release(self) -> None:
        remove_pid(self.root, os.getpid())
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def lock_path(root: str) -> str:
    """What the daemon locks: the project's root folder (see the module docstring)."""
    return os.path.abspath(root)


def holder(root: str) -> int | None:
    """The pid holding the project's daemon lock, from the kernel's lock table; None if free."""
    path = lock_path(root)
    try:
        info = os.stat(path)
        with open("/proc/locks", "rb") as table:  # bytes: no codec to import for it
            rows = table.read().splitlines()
    except OSError:
        return None
    for row in rows:
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (blocked waiters have "->")
        fields = row.split()
        if len(fields) >= 6 and fields[1] == b"FLOCK" and b"->" not in fields:
            major, minor, inode = fields[5].split(b":")
            device = os.makedev(int(major, 16), int(minor, 16))
            if (device, int(inode)) == (info.st_dev, info.st_ino):
                return int(fields[4])
    return None


def live_holder(root: str, grace: float = EXIT_GRACE) -> int | None:
    """`holder`, waiting up to `grace` seconds for one on its way out (see `exiting`) to
    let go: a `start` just after a `kill -9` starts a daemon instead of reporting the dead
    one as running."""
    running = holder(root)
    if running is not None and exiting(running) and _wait_released(root, running, grace):
        running = holder(root)  # free, or taken by a daemon started meanwhile
    return running


def exiting(pid: int) -> bool:
    """Whether `pid` is gone or going: no such process, or its main thread a zombie (a
    daemon's main thread never ends before the others do, unless the process was killed)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b") ")[2][:1]
    except OSError:
        return True
    return state in (b"Z", b"X")


def own_folder(root: str) -> bool:
    """Make sure `daemon/` is no link: one in its place is removed — the link itself, never
    what it points at — so the journal, the log and the pid file are never written outside
    the project (docs/protocol.md Part II); the folder is made anew by their next write.
    True if a link was removed.  Only the daemon holding the lock calls this."""
    if not safeio.linked_folders(os.path.join(root, SWARMFORGE), ("daemon",)):
        return False
    os.unlink(os.path.join(root, DAEMON_DIR))
    return True


def write_pid(root: str, pid: int) -> None:
    from handoffd.core import durable

    durable.makedirs(daemon_path(root, ""))  # the journal will rely on it surviving
    durable.replace(daemon_path(root, PID_FILE), f"{pid}\n".encode())


def ensure_pid(root: str, pid: int) -> OSError | None:
    """Write the pid file unless it already names `pid`; the error if it cannot be written
    (the caller logs it: a missing pid file is no reason to stop delivering)."""
    if read_pid(root) == pid:
        return None
    try:
        write_pid(root, pid)
    except OSError as error:
        return error
    return None


def read_pid(root: str) -> int | None:
    """The pid the pid file names; None if there is none we may read (see `_open_daemon_file`)."""
    try:
        fd = _open_daemon_file(root, PID_FILE)
    except OSError:
        return None
    try:
        return _pid_in(fd)
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int | None:
    try:
        return int(safeio.read_fd(fd, PID_LIMIT + 1).strip())
    except (OSError, ValueError):  # garbled, or longer than any pid
        return None


def _open_daemon_file(root: str, name: str) -> int:
    """A descriptor on the regular file `daemon/<name>`, opened the careful way: a FIFO or
    a device there is never opened, and neither a link in its place nor a `daemon/` that is
    a link is followed (docs/protocol.md Part II): `status` waits on nothing and reads
    nothing outside the project.  `.swarmforge/` itself is trusted, as roles.tsv is."""
    return safeio.open_regular(daemon_path(root, name), below=os.path.join(root, SWARMFORGE))


def remove_pid(root: str, pid: int | None = None) -> None:
    """Remove the pid file; with `pid`, only if it names that pid (not a successor's)."""
    if pid is not None and read_pid(root) not in (pid, None):
        return
    try:
        os.unlink(daemon_path(root, PID_FILE))
    except FileNotFoundError:
        pass


def notify(state: str) -> None:
    """Tell a supervisor how we are: systemd's `$NOTIFY_SOCKET` (READY=1, STOPPING=1,
    WATCHDOG=1), and for READY=1 the pipe `handoffd start` waits on."""
    address = os.environ.get("NOTIFY_SOCKET")
    if address:
        import socket

        if address.startswith("@"):  # abstract namespace
            address = "\0" + address[1:]
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            try:
                sock.sendto(state.encode(), address)
            except OSError:
                pass  # a supervisor that went away is not our failure
    ready_fd = os.environ.pop(READY_FD_ENV, None) if state == "READY=1" else None
    if ready_fd:
        try:
            os.write(int(ready_fd), b"READY=1\n")
            os.close(int(ready_fd))
        except (OSError, ValueError):
            pass


def start(root: str, extra_args: list[str], timeout: float = 15.0) -> int:
    """Start a detached daemon for `root` and wait until it is ready; returns its pid.

    The child gets its own session and /dev/null for stdio, so a caller reading our
    output through a pipe sees EOF as soon as we return.  Readiness comes over a
    private pipe the child writes once it holds the lock and watches its outboxes.
    """
    import subprocess
    import sys

    running = live_holder(root)
    if running:
        raise AlreadyRunning(running)
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", "handoffd", "run", *extra_args, root]
    env = {**os.environ, READY_FD_ENV: str(write_end)}
    env.pop("NOTIFY_SOCKET", None)
    with open(os.devnull, "r+b") as null:
        child = subprocess.Popen(
            command, stdin=null, stdout=null, stderr=null, env=env,
            pass_fds=(write_end,), start_new_session=True, cwd=root,
        )  # fmt: skip
    os.close(write_end)
    try:
        ready = _read_line(read_end, timeout)
    finally:
        os.close(read_end)
    if ready != b"READY=1\n":
        code = child.poll()
        running = holder(root)
        if code is None and running == child.pid:
            return child.pid  # up, only slow to say so
        if running is not None and running != child.pid:
            raise AlreadyRunning(running)  # a concurrent start won the lock; ours gave up
        raise RuntimeError(f"the daemon did not start (exit status {code})")
    return child.pid


def _read_line(fd: int, timeout: float) -> bytes:
    import select

    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, 64)
        if not chunk:
            break  # the child closed the pipe without READY: it died
        data += chunk
    return data


def stop(root: str, grace: float = STOP_GRACE) -> int | None:
    """Stop the project's daemon, if any: TERM, wait up to `grace` s, then KILL.
    Returns the pid that was stopped; afterwards no daemon runs and no pid file is left."""
    import signal

    pid = holder(root)
    if pid is not None:
        _signal(pid, signal.SIGTERM)
        if not _wait_released(root, pid, grace):
            _signal(pid, signal.SIGKILL)
            _wait_released(root, pid, grace)
    remove_pid(root)
    return pid


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _wait_released(root: str, pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while holder(root) == pid:
        if time.monotonic() > deadline:
            return False
        time.sleep(EXIT_POLL)
    return True


# --- what a reader sees: the daemon's state and its recent wake-ups --------------------

LOG_TAIL = 256 * 1024  # bytes of the log read for wake-up counts
Times = dict[str, list[float]]  # role -> times


class DaemonState:
    """The daemon as its pid file and lock show it: running or not, and since when."""

    __slots__ = ("pid", "running", "started_at")

    def __init__(self, pid: int | None, running: bool, started_at: float | None) -> None:
        self.pid = pid
        self.running = running
        self.started_at = started_at


def daemon_state(root: str) -> DaemonState:
    """Running only if some process holds the daemon lock: a pid file left behind by a
    killed daemon is stale, never "running".  Started when it wrote its pid file."""
    pid: int | None = None
    started_at: float | None = None
    try:
        fd = _open_daemon_file(root, PID_FILE)
    except OSError:
        fd = None
    if fd is not None:
        try:
            pid, started_at = _pid_in(fd), os.fstat(fd).st_mtime
        finally:
            os.close(fd)
    locker = holder(root)
    if locker is None:
        return DaemonState(pid, False, None)
    return DaemonState(locker, True, started_at if pid == locker else None)


class LogTail:
    """What the board reads of the log's tail: each role's mail wake-ups (their times,
    whether each was submitted, and how it came: typed, or by the agent's Stop hook), its
    failed ones, and the options of the last `started`."""

    __slots__ = ("failed", "held", "options", "reclaimed", "sent", "submitted", "via")

    def __init__(self) -> None:
        self.sent: Times = {}
        self.failed: Times = {}
        self.submitted: dict[str, list[bool | None]] = {}  # beside `sent`, one per wake-up
        self.via: dict[str, list[str]] = {}  # beside `sent`: "typed" or "hook" (§16)
        self.held: set[str] = set()  # roles whose last wake-up waited behind a person's text
        self.options: dict[str, object] = {}
        self.reclaimed: dict[str, str] = {}  # card -> why it went back to its pool (§17)


def wake_times(root: str, tail: int = LOG_TAIL) -> tuple[Times, Times]:
    """The times of the mail wake-ups per role, those sent and those that failed."""
    found = log_tail(root, tail)
    return found.sent, found.failed


def log_tail(root: str, tail: int = LOG_TAIL) -> LogTail:
    """The wake-ups and the daemon's options in the last `tail` bytes of the log: a bounded
    read, so the counts cover the recent past only.  A line telling a sender its handoff
    was refused (`refused: true`) is not mail."""
    found = LogTail()
    try:
        fd = _open_daemon_file(root, "handoffd.log")  # a FIFO there must not hang `status`
    except OSError:
        return found
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, size - tail), os.SEEK_SET)
        lines = safeio.read_fd(fd, tail).split(b"\n")[0 if size <= tail else 1 :]  # a cut line
    except OSError:
        return found
    finally:
        os.close(fd)
    for line in lines:
        if b'"wake' in line or b'"started"' in line or b'"reclaimed"' in line:  # cheap filter
            _add_line(line, found)
    return found


def _add_line(line: bytes, found: LogTail) -> None:
    import json

    from handoffd.core.handoff import epoch

    try:
        event = json.loads(line)
        name = event["event"]
        when = epoch(event["timestamp"])
    except (ValueError, KeyError, TypeError, RecursionError):  # a line no daemon wrote
        return
    if name == "started":
        found.options = event
        return
    if name == "reclaimed":
        card, why = event.get("card"), event.get("why")
        if isinstance(card, str) and isinstance(why, str) and why.isprintable():
            found.reclaimed[card] = why
        return
    times = {"wake": found.sent, "wake_failed": found.failed}.get(name)
    role = event.get("role")
    if when is None or times is None or not isinstance(role, str) or event.get("refused"):
        return
    if name == "wake" and event.get("after_held") is True and role in found.held:
        _drop_last(found, role)  # the attempt that waited, now typed: one wake-up, not two
    times.setdefault(role, []).append(when)
    if name == "wake":
        (found.held.add if event.get("held") is True else found.held.discard)(role)
        submitted = event.get("submitted")
        found.submitted.setdefault(role, []).append(
            submitted if isinstance(submitted, bool) else None
        )
        found.via.setdefault(role, []).append("hook" if event.get("via") == "hook" else "typed")


def _drop_last(found: LogTail, role: str) -> None:
    """Forget `role`'s last wake-up read (one that waited, which its typing replaces)."""
    found.sent[role].pop()
    found.submitted[role].pop()
    found.via[role].pop()
