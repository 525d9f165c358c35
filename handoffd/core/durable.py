"""Durable, atomic file writes: the Maildir recipe, shared by the helpers and the daemon.

A reader must only ever see a file complete or not at all, and a file we call
written must survive a crash.  So: write a hidden temp file in the destination's
own directory (same filesystem, so the final rename is atomic), write every byte,
fsync, close, rename; fsync the directory when the new name must be durable.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Set

NAME_MAX = 255  # bytes in one file name on Linux's usual filesystems
TEMP_STEM = 64  # bytes of the final name a temp name keeps (it only has to be recognisable)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_counter = itertools.count()
STALE = 60.0  # seconds: a temp file this old is no live writer's (a rewrite takes milliseconds)
# How a file of our own that is written in place is opened: never through a symlink, never
# waiting on a FIFO's reader.  Never O_TRUNC: a file is emptied only once it is known ours.
_OWN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
ATTEMPTS = 8  # names tried before a write gives up (each lost to a name planted meanwhile)
LINKED = ".linked"  # the suffix of a hard-linked file moved aside


def write_all(fd: int, data: bytes) -> None:
    """Write every byte: `os.write` may write fewer bytes than asked without raising."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def create(
    path: str, data: bytes, mode: int = 0o644, *, dir_fd: int | None = None, sync: bool = True
) -> None:
    """Create `path` (never an existing file or symlink; relative to the folder `dir_fd`
    if given) holding `data`, fsynced (unless not `sync`: a hint nobody relies on after a
    power cut, such as the heartbeat).

    On any error the partial file is removed: nothing half-written stays behind.
    A failed fsync is never retried, since the kernel may have dropped the pages.
    """
    fd = os.open(path, _CREATE, mode, dir_fd=dir_fd)
    try:
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
            # Asking for the times makes a multigrain-timestamp kernel give the rename or
            # link that publishes this file a finer, later ctime than its mtime: the daemon
            # reads that as "renamed into place, whole" (settle.py) and takes it at once.
            os.fstat(fd)
        finally:
            os.close(fd)  # a failed close still frees the fd (Linux): never close twice
    except BaseException:
        unlink_quietly(path, dir_fd=dir_fd)
        raise


def fsync_dir(path: str) -> None:
    """Make the entries (creations, renames, removals) of directory `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs(path: str) -> bool:
    """`os.makedirs(path, exist_ok=True)`, durably: a new directory's entry lives in its
    parent, so each parent of a directory made here is fsynced (parents first), and the
    new directory survives a power cut with whatever is later made durable inside it.
    True if something was made.  A directory that already exists is taken as durable:
    whoever made it made it durable (every maker in handoffd comes through here)."""
    made = _mkdirs(os.path.abspath(path))
    for directory in made:
        fsync_dir(os.path.dirname(directory))
    return bool(made)


def _mkdirs(path: str) -> list[str]:
    """Make `path` and its missing parents; the ones made, outermost first."""
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return []
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if parent == path:
            raise
        made = _mkdirs(parent)
        try:
            os.mkdir(path)
        except FileExistsError:  # made meanwhile by someone else: flushing again is harmless
            pass
        return [*made, path]
    return [path]


def temp_name(directory: str, name: str) -> str:
    """A hidden, per-process unique temp path beside `name` in `directory`.  It keeps only
    the start of `name`, so a name close to the filesystem's limit still gets a temp file."""
    return os.path.join(directory, f".{_cut(name, TEMP_STEM)}.{os.getpid()}.{next(_counter)}.tmp")


def temp_files(directory: str) -> list[str]:
    """Temp files `temp_name` made in `directory` (left behind only by a crash)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [os.path.join(directory, n) for n in names if is_temp(n)]


def is_temp(name: str) -> bool:
    """Whether `name` is one `temp_name` makes."""
    return name.startswith(".") and name.endswith(".tmp")


def sweep_stale(directory: str, prefix: str, now: float | None = None) -> list[str]:
    """Remove the temp files `<prefix><pid>….tmp` in `directory` that no live writer owns
    (a SIGKILL or a power cut leaves them); the paths removed.  A writer is gone when its
    pid names no process, or when its temp is older than STALE whatever the pid says:
    pids are reused within minutes, so a live process of that number proves nothing about
    an old file, and a swept writer that was only slow loses its rename, not data."""
    now = time.time() if now is None else now
    removed = []
    for temp in temp_files(directory):
        name = os.path.basename(temp)
        pid = name[len(prefix) :].split(".")[0] if name.startswith(prefix) else ""
        if not pid.isdigit():
            continue
        try:
            mtime = os.lstat(temp).st_mtime
        except FileNotFoundError:
            continue  # renamed into place meanwhile
        if _abandoned(int(pid), mtime, now):
            unlink_quietly(temp)
            removed.append(temp)
    return removed


def sweep_stale_at(fd: int, now: float | None = None) -> None:
    """`sweep_stale` for every temp file in the folder open at `fd` (one reached without
    following a link): a regular one whose writer is gone, or that is older than STALE even
    with no pid in its name, is removed; nothing is followed or removed through a link."""
    now = time.time() if now is None else now
    for name in filter(is_temp, os.listdir(fd)):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode) and _abandoned(temp_pid(name), info.st_mtime, now):
            unlink_quietly(name, dir_fd=fd)


def temp_pid(name: str) -> int | None:
    """The writer's pid a `temp_name` temp file names (`.<stem>.<pid>.<n>.tmp`), if any."""
    parts = name.rsplit(".", 3)
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def _abandoned(pid: int | None, mtime: float, now: float) -> bool:
    """Whether a temp file's writer is gone: it is older than STALE, or its pid is dead."""
    return now - mtime > STALE or (pid is not None and not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    except OverflowError:  # no process can have that number
        return False
    return True


def replace(path: str, data: bytes, *, sync: bool = True) -> None:
    """Atomically replace (or create) `path` with `data`: readers see old or new, never half.
    The temp is created exclusively, so a file (or a hard link to one outside) planted
    under a temp's name is never written into: the next name is taken instead.  Renaming
    over a hard link replaces that name only, never the file it shares with another."""
    directory, name = os.path.split(path)
    temp = _created(directory or ".", name, data, sync)
    try:
        os.rename(temp, path)
    except BaseException:
        unlink_quietly(temp)
        raise


def replace_at(folder: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """`replace` of `name` in the folder open as `folder` (a descriptor: no link on the
    path is followed again), the folder fsynced after: the new name is durable."""
    temp = os.path.basename(temp_name(".", name))
    create(temp, data, mode, dir_fd=folder)
    try:
        os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        unlink_quietly(temp, dir_fd=folder)
        raise
    os.fsync(folder)


def _created(directory: str, name: str, data: bytes, sync: bool) -> str:
    """A new temp beside `name` holding `data`: its path."""
    for _ in range(ATTEMPTS):
        temp = temp_name(directory, name)
        try:
            create(temp, data, sync=sync)
        except FileExistsError:  # planted under the name we were to take: never ours
            continue
        return temp
    raise FileExistsError(errno.EEXIST, f"every temp name beside {name} is taken", directory)


# --- files written in place: the log, the journal, an index ---------------------------------


def open_own(path: str, flags: int, mode: int = 0o644) -> tuple[int, str | None]:
    """A descriptor on the regular file at `path`, opened with `flags` (O_WRONLY|O_APPEND,
    say; O_CREAT to make it when missing), that no other name shares; and, when one did,
    where that file was moved aside.

    A file appended to or rewritten in place is written through every name it has: a hard
    link planted there to a file outside the project would have our lines appended to it,
    or be emptied by a rewrite.  So a file with more than one link is never written: it is
    moved aside (renamed to `<name>.linked`, the name only: the other names keep their
    file, untouched) and a file of our own is created in its place, exclusively.  A
    symlink, FIFO or device there is `NotRegular` (never followed, never opened); the
    caller decides whether to replace it.  Never truncates: a rewrite truncates the
    descriptor, once it is known ours."""
    from handoffd.core.safeio import NotRegular, kind

    aside = None
    for _ in range(ATTEMPTS):
        try:
            found = os.lstat(path).st_mode
        except FileNotFoundError:
            found = None
        if found is not None and not stat.S_ISREG(found):
            raise NotRegular(path, f"{kind(found)}, not a regular file; not written")
        try:
            fd = os.open(path, flags | _OWN, mode)
        except FileExistsError:  # planted between the move and our create: move it too
            flags &= ~os.O_EXCL
            continue
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink <= 1:
            return fd, aside
        os.close(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped in since the look
            raise NotRegular(path, f"{kind(info.st_mode)}, not a regular file; not written")
        aside = move_aside(path)
        flags |= os.O_CREAT | os.O_EXCL  # started anew: a file nobody else has a name for
    raise OSError(errno.EMLINK, "a hard link keeps being put back; not written", path)


def move_aside(path: str) -> str:
    """Rename the file at `path` (one with other names too) to a free `<name>.linked` beside
    it; the new path.  Only a name moves: the file and its other names stay as they were."""
    directory, name = os.path.split(path)
    aside = os.path.join(directory, free_name(directory or ".", name + LINKED))
    os.rename(path, aside)
    return aside


def unlink_quietly(path: str, *, dir_fd: int | None = None) -> None:
    """Remove `path` if it is there; already gone is the outcome we wanted."""
    try:
        os.unlink(path, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def free_name(
    directory: str, name: str, companions: tuple[str, ...] = (), taken: Set[str] = frozenset()
) -> str:
    """`name`, or the first `<stem>.<n><suffix>` not yet present in `directory`, nor with
    any of the `companions` suffixes appended (a failed file's `.error`, say), nor among
    the names `taken` elsewhere (a copy's name in its role's other inbox folders).

    Archives never overwrite: a second file of the same name gets a distinct one.  The
    stem is cut where the name, with its number and companions, would not fit NAME_MAX:
    a name the filesystem refuses would be retried forever.
    """
    stem, dot, suffix = name.rpartition(".")
    stem, suffix = (stem, dot + suffix) if stem else (name, "")
    room = NAME_MAX - max(len(extra.encode()) for extra in ("", *companions))
    tails = itertools.chain([suffix], (f".{n}{suffix}" for n in itertools.count(2)))
    candidates = (_cut(stem, room - len(tail.encode())) + tail for tail in tails)
    for candidate in candidates:
        present = (os.path.join(directory, candidate + extra) for extra in ("", *companions))
        if candidate not in taken and not any(os.path.lexists(path) for path in present):
            return candidate
    raise AssertionError("unreachable")


def _cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` bytes of UTF-8, never inside a character."""
    return text.encode()[: max(limit, 1)].decode(errors="ignore")


# Errors about a name itself: retrying cannot cure them, so they fail, never defer forever.
PERMANENT = frozenset({errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ})


def reason_of(error: OSError) -> str:
    """An I/O error as the log and `failed/` say it: `ENOSPC: No space left on device`."""
    return f"{errno.errorcode.get(error.errno or 0, 'error')}: {error.strerror or error}"
