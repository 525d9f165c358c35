"""The files of the history index (`handoffd.snapshot.history`): lines of escaped,
TAB-separated fields, read back with suspicion and written under a lock.

The index is a cache, and untrusted like every file under `.swarmforge/`: a file is
opened without following a symlink or waiting on a FIFO, checked to be a regular file
on its descriptor, and read up to a limit; a line that is not one of ours (torn
mid-character by a crash, or written by someone else) is reported, never believed.
Fields are escaped (`\\\\`, `\\t`, `\\n`, and `\\udcXX` for a name that is not UTF-8),
so any text a hand-made file carries, a TAB included, makes one line like any other.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from handoffd.core import durable

READ_LIMIT = 64 * 1024 * 1024  # far more than any history indexes to; past it, not ours
OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_UNESCAPE = {"\\": "\\", "t": "\t", "n": "\n"}  # the character after a backslash


def _escaped(text: str) -> str:
    """A field fit for a line: its backslashes, tabs and line feeds escaped (a lone
    surrogate is escaped as the line is encoded)."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def _unescaped(text: str) -> str:
    """A field as it was before `_escaped` (ValueError or KeyError for a sequence it never
    writes)."""
    if "\\" not in text:
        return text
    out, at = [], 0
    while at < len(text):
        char, at = text[at], at + 1
        if char != "\\":
            out.append(char)
        elif text[at : at + 1] == "u":
            out.append(_surrogate(text[at + 1 : at + 5]))  # `\udcXX`: a byte not UTF-8
            at += 5
        else:
            out.append(_UNESCAPE[text[at : at + 1]])  # KeyError: a sequence never written
            at += 1
    return "".join(out)


def _surrogate(digits: str) -> str:
    """The lone surrogate `\\uXXXX` escaped (the only `\\u` the encoding writes)."""
    code = int(digits, 16) if len(digits) == 4 and digits.isalnum() else -1
    if not 0xD800 <= code <= 0xDFFF:
        raise ValueError(f"not an escaped surrogate: {digits!r}")
    return chr(code)


def line(*fields: str) -> str:
    """One line of the index: the fields escaped, TAB-separated."""
    return "\t".join(_escaped(f) for f in fields) + "\n"


def _encode(lines: Iterable[str]) -> bytes:
    return "".join(lines).encode("utf-8", "backslashreplace")


def _parse(data: bytes, width: int) -> tuple[list[list[str]], bool]:
    """The complete lines of `data` as fields, and whether some line was not one of
    ours.  Text after the last line feed is an append still in flight (or torn by a
    crash, which the next append ends): not yet a line, nor a wrong one."""
    lines, wrong = [], False
    for raw in data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]:
        try:
            fields = [_unescaped(f) for f in raw.decode("utf-8").split("\t")]
        except (UnicodeDecodeError, ValueError, KeyError):
            wrong = True
            continue
        if len(fields) == width:
            lines.append(fields)
        else:
            wrong = True
    return lines, wrong


def read(path: str, width: int = 3) -> tuple[list[list[str]], bool]:
    """An index file's lines and whether it held anything but lines of ours (a symlink,
    FIFO or oversized file counts as wrong, unread).  A missing file has no lines."""
    try:
        fd = os.open(path, os.O_RDONLY | OPEN)
    except FileNotFoundError:
        return [], False
    except OSError:  # a symlink (never followed), or not ours to read
        return [], True
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:  # a hard link: not ours
            return [], True
        chunks, size = [], 0
        while size <= READ_LIMIT and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return [], True
    finally:
        os.close(fd)
    if size > READ_LIMIT:
        return [], True
    return _parse(b"".join(chunks), width)


@contextmanager
def locked(folder: str) -> Iterator[bool]:
    """The index `folder`'s lock, around each append and rewrite: a file rebuilt from
    another never misses a line appended meanwhile.  Without a folder to lock there is
    nothing to write either (each write then fails, harmlessly).  Yields whether the lock
    is held: one another process keeps for seconds is not waited on for ever (a cache is
    never worth a hung view), and the caller then writes nothing."""
    from handoffd.queue.lock import hold

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | OPEN)
    except OSError:
        yield True
        return
    try:
        yield hold(fd)
    finally:
        os.close(fd)  # releases the lock


def append(path: str, lines: list[str]) -> None:
    """Add lines in one append (never through a symlink, never into a FIFO, never into a
    file another name shares: that is moved aside and a file begun anew,
    `durable.open_own`); a cache, so failure is harmless."""
    if not lines:
        return
    try:
        fd, _ = durable.open_own(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    except OSError:  # a symlink or FIFO: read as wrong, and so replaced, by the next look-up
        return
    try:
        data = _encode(lines)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # end a line torn by a crash, so it spoils no other
        durable.write_all(fd, data)
    except OSError:
        pass
    finally:
        os.close(fd)


def rewrite(path: str, lines: Iterable[str]) -> None:
    """Replace an index file whole (a symlink or FIFO in its place goes with it)."""
    try:
        durable.replace(path, _encode(lines))
    except OSError:
        pass
