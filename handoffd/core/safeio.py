"""One careful reader for the files handoffd finds under `.swarmforge/` (docs/protocol.md,
Part II, "Hostile files").

Anyone who can write there can put a symlink, a FIFO, a device, a directory or a huge
file where a report, an `.error`, a heartbeat or the live file should be.  Every read of
such a file goes through here, so that:

- a link is never followed: the last name is opened with `O_NOFOLLOW`, and with `below`
  every folder between a trusted one and the file is opened the same way, one by one;
- a FIFO or a device is never opened: its type is checked before the open and again on
  the open descriptor (`fstat`), in case the name was swapped in between, and the open is
  `O_NONBLOCK`, so even a FIFO swapped in at that instant cannot make it wait;
- no more than `limit` + 1 bytes are ever read: enough to tell "over the limit" apart.

A refusal is a `Refused`, which is an `OSError`: a view that already skips a file it
cannot read skips a hostile one the same way.  The helpers reach this module on every
call (the live file, the heartbeat), so it imports only `os`, `stat` and `errno`.
"""

from __future__ import annotations

import errno
import os
import stat

LINE = 4096  # an `.error` is one line of at most this many bytes
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TRUSTED = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Refused(OSError):
    """A file that was not read: `why` says what was found instead."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


class NotRegular(Refused):
    """A link, FIFO, device, socket or folder where a regular file (or a folder) should be."""


class TooLarge(Refused):
    """Over the limit: at most limit + 1 bytes of it were read, then it was refused."""


class Outside(Refused):
    """A path that does not lie below the folder it has to be in."""


def kind(mode: int) -> str | None:
    """What a file of this mode is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def read_regular(
    path: str, limit: int, *, dir_fd: int | None = None, below: str | None = None
) -> bytes:
    """The bytes of the regular file at `path` (relative to `dir_fd`, or reached from the
    folder `below` without following any link); `TooLarge` past `limit` bytes."""
    fd = open_regular(path, dir_fd=dir_fd, below=below)
    try:
        data = read_fd(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(path, f"larger than the {limit}-byte limit; it was not read further")
    return data


def read_line(
    path: str, limit: int = LINE, *, dir_fd: int | None = None, below: str | None = None
) -> str:
    """The first line of the regular file at `path`, stripped; `TooLarge` when that line is
    longer than `limit` bytes.  Whatever follows the line is never read."""
    fd = open_regular(path, dir_fd=dir_fd, below=below)
    try:
        data = read_fd(fd, limit + 1)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    if end < 0 and len(data) > limit:
        raise TooLarge(path, f"a line longer than the {limit}-byte limit; it was not read")
    return data[: end if end >= 0 else len(data)].decode("utf-8", "replace").strip()


def open_regular(path: str, *, dir_fd: int | None = None, below: str | None = None) -> int:
    """A read-only descriptor on the regular file at `path`; the caller closes it."""
    if below is not None:
        folder, name = _parent(path, below)
        try:
            return _open_file(name, folder, path)
        finally:
            os.close(folder)
    return _open_file(path, dir_fd, path)


def open_dir(path: str, *, dir_fd: int | None = None, below: str | None = None) -> int:
    """A descriptor on the folder at `path`, itself no link (nor any folder between it and
    `below`); for `os.listdir(fd)` and the `dir_fd` of a create, rename or unlink."""
    if below is not None:
        folder, name = _parent(path, below)
        try:
            return _open_folder(name, folder, path)
        finally:
            os.close(folder)
    return _open_folder(path, dir_fd, path)


def linked_folders(below: str, folders: tuple[str, ...]) -> list[str]:
    """Which of `folders` (paths relative to the trusted folder `below`, such as
    `inbox/new`) lie behind a symbolic link: for each, the first name on its way that is
    one, that name once however many folders lie under it (a linked `inbox/` stands for
    `inbox/new` and `inbox/completed` alike).  Such a folder is never to be followed: what
    is written through it lands outside the project, what is taken from it comes from
    outside.  A name not there yet is fine (it is made as a real folder), and so, here, is a
    file or FIFO in a folder's place: nothing can be written through one, and the command
    that needs the folder says so.  Only `lstat`: cheap for every helper and every pass."""
    found: dict[str, None] = {}
    for folder in folders:
        where = ""
        for name in folder.split("/"):
            where = f"{where}/{name}" if where else name
            try:
                mode = os.lstat(os.path.join(below, where)).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(mode):
                found[where] = None
            if not stat.S_ISDIR(mode):
                break
    return list(found)


def linked_handoffs(handoffs: str) -> str | None:
    """The path of the link on the way to a role's handoff directory `H` from its worktree
    (`.swarmforge/` or `H` itself), or None.  roles.tsv names the worktree, the one folder
    trusted; `H` lies in it and is the agent's to replace like anything under it.  A
    directory not of the `<worktree>/.swarmforge/handoffs` shape is taken as given."""
    parent, name = os.path.split(os.path.normpath(handoffs))
    above = os.path.dirname(parent)
    if (
        name == "handoffs"
        and os.path.basename(parent) == "operator"
        and (os.path.basename(above) == ".swarmforge")
    ):  # the operator's `P/.swarmforge/operator/handoffs` (docs/protocol.md §18)
        root = os.path.dirname(above)
        found = linked_folders(root, (".swarmforge/operator/handoffs",))
        return os.path.join(root, found[0]) if found else None
    if name != "handoffs" or os.path.basename(parent) != ".swarmforge":
        return None
    found = linked_folders(above, (".swarmforge/handoffs",))
    return os.path.join(above, found[0]) if found else None


def read_fd(fd: int, limit: int) -> bytes:
    """At most `limit` bytes from `fd`, to its end: `os.read` may return fewer than asked."""
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def inside(path: str, folder: str) -> str | None:
    """`path` relative to `folder` when it lies below it (compared name by name, after
    `..` is resolved in the text, never as a raw prefix); None otherwise."""
    target, base = os.path.abspath(path), os.path.abspath(folder)
    prefix = base.rstrip(os.sep) + os.sep
    return target[len(prefix) :] if target.startswith(prefix) and target != prefix else None


# --- the opens --------------------------------------------------------------------------


def _open_file(name: str, dir_fd: int | None, shown: str) -> int:
    # Checked before the open, so a FIFO or device is never opened at all (a FIFO's
    # writer would be woken, a device may act on an open); and after it, on the
    # descriptor, in case the name was swapped for one in between.
    _refuse(shown, os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError as error:
        raise _link_refusal(error, shown) from None
    try:
        _refuse(shown, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_folder(name: str, dir_fd: int | None, shown: str) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=dir_fd)
    except OSError as error:
        if error.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    # O_DIRECTORY | O_NOFOLLOW refuses a link with ENOTDIR, as it does a file: say which
    mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    raise NotRegular(shown, f"{kind(mode) or 'a regular file'}, not a directory; not followed")


def _parent(path: str, below: str) -> tuple[int, str]:
    """A descriptor on the folder holding `path`, reached from `below` one name at a time
    without following a link, and the last name of `path`."""
    relative = inside(path, below)
    if relative is None:
        raise Outside(path, f"not inside {below}")
    *folders, name = relative.split(os.sep)
    fd = os.open(below, _TRUSTED)  # the folder we were given is trusted, links and all
    where = below
    try:
        for folder in folders:
            where = os.path.join(where, folder)
            step = _open_folder(folder, fd, where)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _refuse(path: str, mode: int) -> None:
    what = kind(mode)
    if what is not None:
        done = "followed" if stat.S_ISLNK(mode) else "read"
        raise NotRegular(path, f"{what}, not a regular file; it was not {done}")


def _link_refusal(error: OSError, path: str) -> OSError:
    """`O_NOFOLLOW` on a link fails with ELOOP: say what it was; other errors as they are."""
    if error.errno == errno.ELOOP:
        return NotRegular(path, "a symbolic link on the way; it was not followed")
    return error


def is_regular(path: str) -> bool:
    """Whether a regular file stands at `path` itself (a link, a FIFO or a folder there is
    not one, and is never followed); False when nothing is there."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
