"""Whether an outbox file is whole: it arrived by rename or link, or was written in place
and left alone.

The protocol asks writers to build a file in `outbox/tmp/` and rename it into `outbox/`
(docs/protocol.md §3), but people and tools write straight into the outbox (`cat >`,
`cp`, an editor's save), and a file read while it is being written would be refused as
"no header block" or, worse, delivered cut short.  So a file is taken only when nobody
has it open for writing (the kernel refuses a read lease on a file that is open for
writing anywhere, which answers exactly that without scanning /proc), and:

- the filesystem's events say it arrived by rename or link and nothing wrote to it since
  (watch.py keeps that record; `renamed` is True) — whoever renames a file in is done
  with it, and one who opens it again for writing holds it open, which the lease
  check sees; or
- the events say it was written in place (`renamed` is False): then it must have stood
  unchanged for `QUIET` seconds; or
- no event was seen for it (`renamed` is None: found by a rescan, or no watcher runs):
  then its times are the only witness.  A rename or link changes the inode after its
  last write, so a ctime later than the mtime says "renamed in" — but a rename within
  one clock tick of the write leaves them equal, and such a file waits `QUIET` seconds.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat

QUIET = 1.0  # seconds a file written in place must stand unchanged, once closed
RECHECK = 0.25  # seconds before looking again at a file still open for writing
# What the events said of a file (watch.py): renamed in; created there (a link, or an open
# whose writes may still be on their way to the watcher); written in place, or changed
# since the event that brought it.
MOVED, CREATED, WRITTEN = "moved", "created", "written"


def renamed(said: str | None, info: os.stat_result) -> tuple[bool | None, bool]:
    """`wait`'s `renamed` from what the events `said` of the file `info` describes, and
    whether that holds only once the watcher has caught up with the kernel (pure).

    A `created` file is a link, or a file opened to be written: its writes and close
    follow as events of their own, which may not have reached the watcher yet.  Its
    times settle it at once when they can (a link after the last write makes ctime
    the later); otherwise the watcher must catch up first (watch.Watcher.sync).
    """
    if said is None:
        return None, False
    if said == WRITTEN:
        return False, False
    return True, said == CREATED and info.st_ctime_ns <= info.st_mtime_ns


def wait(info: os.stat_result, now: float, writing: bool, renamed: bool | None = None) -> float:
    """Seconds until the file described by `info` may be taken; 0 when it may be now (pure).
    `renamed`: what the events said of it (see above), None when none was seen."""
    if not stat.S_ISREG(info.st_mode):
        return 0.0  # never read as a file: the checks refuse it without waiting
    if writing:
        return RECHECK
    if renamed or (renamed is None and info.st_ctime_ns > info.st_mtime_ns):
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
