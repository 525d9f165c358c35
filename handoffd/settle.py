"""Whether an outbox file is whole: renamed into place, or written in place and left alone.

The protocol asks writers to build a file in `outbox/tmp/` and rename it into `outbox/`
(docs/protocol.md §3), but people and tools write straight into the outbox (`cat >`,
`cp`, an editor's save), and a file read while it is being written would be refused as
"no header block" or, worse, delivered cut short.  So a file is taken only when:

- nobody has it open for writing: the kernel refuses a read lease on a file that is
  open for writing anywhere, which answers exactly that without scanning /proc; and
- it was renamed or linked into place — its ctime is later than its mtime, since a
  rename or link changes the inode after its last write (a write sets both to the same
  instant) — or else it has not changed for `QUIET` seconds.

A rename within one clock tick of the last write can leave ctime equal to mtime; such a
file merely waits `QUIET` seconds.  Writers in this package ask for the file's times
after writing it (see durable.create), after which the kernel stamps the rename with a
finer, later ctime (multigrain timestamps), so their files keep their millisecond pickup.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat

QUIET = 1.0  # seconds a file written in place must stand unchanged, once closed
RECHECK = 0.25  # seconds before looking again at a file still open for writing


def wait(info: os.stat_result, now: float, writing: bool) -> float:
    """Seconds until the file described by `info` may be taken; 0 when it may be now (pure)."""
    if not stat.S_ISREG(info.st_mode):
        return 0.0  # never read as a file: the checks refuse it without waiting
    if writing:
        return RECHECK
    if info.st_ctime_ns > info.st_mtime_ns:
        return 0.0  # renamed or linked in after its last write
    # ctime, not mtime: a writer can set mtime to any time, never ctime.
    return max(0.0, QUIET - (now - info.st_ctime_ns / 1e9))


def being_written(path: str) -> bool:
    """Whether some process has `path` open for writing.  False when the kernel cannot say
    (leases not supported here, or the file is not ours): then its times alone decide."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        # A writer opening the file while we hold the lease makes the kernel signal us;
        # SIGURG is ignored by default, unlike SIGIO, which would end the daemon.
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except OSError as error:
        return error.errno == errno.EAGAIN
    finally:
        os.close(fd)  # also releases the lease
    return False
