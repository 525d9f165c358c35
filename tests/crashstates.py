"""A crash-state explorer: every state a power cut may leave on disk during a real run.

In the style of ALICE (Pillai et al., OSDI '14): record the system calls of real
commands with strace, replay them onto a model of the filesystem, and at each instant
between two calls build the states a power cut at that instant may leave.  The model is
POSIX's promise, weaker than ext4's ordered mode:

- a file's content is durable once the file is fsynced; until then each write may be
  lost, or torn at 4 KiB blocks, and a truncate may be lost while later writes land;
- a directory entry (create, link, unlink, mkdir, rmdir, rename) is durable once every
  directory it changed is fsynced (for mkdir: the parent); a new directory's contents
  are reachable only while its own entry is;
- a rename is atomic: it persists whole or not at all;
- the unsynced changes of one directory persist in the order they were made (a prefix
  of them), independently of other directories and of file contents.

Every state holds what was durable plus some choice of what was not.  The choices taken
at each instant: everything unsynced lost; nothing lost (what kill -9 leaves); and, from
each of those two extremes, one directory or one file at a time keeping only a prefix of
its unsynced changes, one file keeping its writes but losing its truncates, one file's
writes torn to their first 4 KiB.  A directory or file is varied that way only while the
step at hand changes it: older unsynced changes go with the extremes (varying them at
every later instant would multiply the states, not the findings).  States that come out
byte-identical are recovered once.  Files nothing reads back to decide anything (a log,
say) can be left out of the model altogether (`ignored`).

`record` runs the steps under strace; `explore` builds the states, checks each with a
pure function (the tokens printed so far still hold), and recovers each distinct one in
worker processes with caller-given `Recovery`s that run the real commands and audit.  A
state is laid out anew for each recovery below the worker's own folder, whose path has
the recorded base's length: paths inside files are rewritten in place, and the file
identities a reboot would keep are handed over as a map (`materialize`).

Not modelled: metadata other than names and contents (times, modes), mmap writes,
symlinks in the tree and renames across its edge (both refused with `Unmodelled`), and
reorderings within one directory (a journaling filesystem does not make them).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

BLOCK = 4096  # bytes: the unit a torn write keeps or loses
Tree = dict[str, bytes | None]  # relative path -> file content, or None for a directory

# --- recording ---------------------------------------------------------------------------

TRACED = (
    "open", "openat", "openat2", "creat", "close", "close_range", "dup", "dup2", "dup3",
    "fcntl", "write", "pwrite64", "writev", "pwritev", "pwritev2", "lseek", "ftruncate",
    "truncate", "fsync", "fdatasync", "sync", "syncfs", "rename", "renameat", "renameat2",
    "link", "linkat", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "symlink",
    "symlinkat", "chdir", "fchdir", "clone", "clone3", "fork", "vfork",
)  # fmt: skip


@dataclass
class Step:
    """One command of the recorded run, as a process would be started for it."""

    label: str
    argv: list[str]
    cwd: str
    env: dict[str, str]


@dataclass
class Recording:
    """A run: the inodes it started from (all durable), and what each step did to them."""

    base: str  # absolute: every path modelled lies below it
    start: dict[int, Node]  # inode -> node before the first step; 0 is the base
    is_dir: dict[int, bool]  # every inode the run knew of
    paths: dict[int, str]  # inode -> the last path it had, for messages
    ops: list[Op]
    outputs: list[bytes]  # each step's stdout
    identities: dict[tuple[int, int], int]  # (st_dev, st_ino) on disk -> inode of the model


def record(
    steps: list[Step], base: str, traces: str, ignored: Callable[[str], bool] = lambda rel: False
) -> Recording:
    """Snapshot `base`, then run each step under strace and replay its calls; paths (relative
    to `base`) that `ignored` names are left out of the model, as paths outside it are."""
    replay = Replay(base, snapshot(base), ignored)
    outputs = []
    for index, step in enumerate(steps):
        trace = os.path.join(traces, f"{index:02d}.trace")
        command = ["strace", "-f", "--seccomp-bpf", "-qq", "-y", "-xx", "-s", "1000000"]
        command += ["-e", "trace=" + ",".join(TRACED), "-o", trace, *step.argv]
        done = subprocess.run(command, cwd=step.cwd, env=step.env, capture_output=True,
                              timeout=60, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{step.label} exited {done.returncode}: {done.stderr[-2000:]!r}")
        with open(trace, encoding="ascii", errors="replace") as lines:
            replay.step(index, step, calls(lines))
        outputs.append(done.stdout)
    is_dir = {ino: node.is_dir for ino, node in replay.nodes.items()}
    identities = {_identity(os.path.join(base, rel)): ino for rel, ino in replay.files().items()}
    return Recording(base, replay.start, is_dir, replay.paths, replay.ops, outputs, identities)


def _identity(path: str) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def snapshot(base: str) -> Tree:
    """Every entry below `base`: files to their bytes, directories to None."""
    tree: Tree = {}
    for directory, dirs, files in os.walk(base):
        rel = os.path.relpath(directory, base)
        for name in dirs:
            tree[os.path.normpath(os.path.join(rel, name))] = None
        for name in files:
            with open(os.path.join(directory, name), "rb") as file:
                tree[os.path.normpath(os.path.join(rel, name))] = file.read()
    return tree


# --- strace's output ---------------------------------------------------------------------


@dataclass
class Call:
    """One finished system call: who made it, its arguments as strace printed them."""

    pid: int
    name: str
    args: list[str]
    result: int | None  # None: it failed (changed nothing)


_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+|\?)(<[^>]*>)?(.*)$")
_RESUMED = re.compile(r"^<\.\.\. \w+ resumed>\s?(.*)$")


def calls(lines: Iterator[str]) -> Iterator[Call]:
    """The calls of an `strace -f -y -xx` log, each whole (an interrupted call is printed
    in two halves: `<unfinished ...>`, then `<... name resumed>`)."""
    pending: dict[int, str] = {}
    for raw in lines:
        line = _LINE.match(raw.rstrip("\n"))
        if not line:
            continue
        pid, text = int(line[1]), line[2]
        if text.startswith(("---", "+++")):
            continue
        if text.endswith("<unfinished ...>"):
            pending[pid] = text[: -len("<unfinished ...>")].rstrip(" ")
            continue
        resumed = _RESUMED.match(text)
        if resumed:
            text = pending.pop(pid, "") + resumed[1]
        call = _CALL.match(text)
        if not call:
            continue
        ok = not call[3].startswith("-") and call[3] != "?"
        result = int(call[3], 0) if ok else None
        yield Call(pid, call[1], split_args(call[2]), result)


def split_args(text: str) -> list[str]:
    """strace's argument list split at its top-level commas."""
    args, depth, start, quoted = [], 0, 0, False
    index = 0
    while index < len(text):
        char = text[index]
        if quoted:
            if char == "\\":
                index += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "<" and index and (text[index - 1].isdigit() or text[index - 1] == "D"):
            index = text.index(">", index)  # a `-y` annotation: 3</path>, AT_FDCWD</path>
        elif char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
        index += 1
    if text.strip():
        args.append(text[start:].strip())
    return args


def _unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _annotation(text: str) -> str | None:
    """The path of a `-y` annotation (`<\\x2f...>`); None if it is not a plain path (a
    pipe, a socket, a file since deleted)."""
    inner = text[1:-1] if text.startswith("<") else ""
    try:
        return _unhex(inner).decode("utf-8", "surrogateescape")
    except ValueError:
        return None


def string(arg: str) -> bytes:
    """A string argument's bytes (`-xx` prints every byte as \\xNN)."""
    if not arg.startswith('"') or arg.endswith("..."):
        raise ValueError(f"not a whole string argument: {arg[:80]}")
    return _unhex(arg[1:-1])


def descriptor(arg: str) -> tuple[int | None, str | None]:
    """A descriptor argument: its number (None for AT_FDCWD) and `-y`'s path for it."""
    number, _, rest = arg.partition("<")
    path = _annotation("<" + rest) if rest else None
    return (None if number == "AT_FDCWD" else int(number, 0)), path


def flags(arg: str) -> set[str]:
    return set(arg.split("|"))


# --- the filesystem model ------------------------------------------------------------------


@dataclass
class Node:
    """An inode: a directory's entries (name -> inode number), or a file's bytes."""

    is_dir: bool
    data: bytearray = field(default_factory=bytearray)
    entries: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Op:
    """One change to the model, or a point in the run worth naming.

    kind: `link` (name -> inode in `dir`: create, mkdir, link), `unlink` (also rmdir),
    `rename`, `write`, `truncate`, `sync` (fsync of `ino`; None: everything), `said`
    (a step wrote `data` to its stdout) or `began` (a step started).
    """

    kind: str
    step: int
    dirs: tuple[int, ...] = ()  # the directories an entry change touches, in order
    names: tuple[str, ...] = ()  # the names it touches, one per directory
    ino: int | None = None
    offset: int = 0
    data: bytes = b""
    what: str = ""  # for people: the call and path this came from

    @property
    def is_entry(self) -> bool:
        return self.kind in ("link", "unlink", "rename")

    @property
    def is_content(self) -> bool:
        return self.kind in ("write", "truncate")


class Unmodelled(Exception):
    """A call changed the modelled tree in a way the model does not know."""


@dataclass
class Desc:
    """An open file description: what it is open on (None: outside the model)."""

    ino: int | None
    offset: int = 0
    append: bool = False
    stdout: bool = False  # the step's own standard output
    path: str | None = None


@dataclass
class Proc:
    """A process's descriptor table and working directory (threads share one)."""

    fds: dict[int, Desc]
    cwd: str


class Replay:
    """Turns traced calls into `Op`s, keeping a volatile model of the tree (what the
    processes saw) to resolve paths to inodes."""

    def __init__(
        self, base: str, initial: Tree, ignored: Callable[[str], bool] = lambda rel: False
    ) -> None:
        self.base = os.path.normpath(base)
        self.ignored = ignored
        self.nodes: dict[int, Node] = {0: Node(True)}
        self.paths: dict[int, str] = {0: "."}  # inode -> its latest path, for messages
        for rel in sorted((p for p in initial if not ignored(p)), key=lambda p: p.count(os.sep)):
            content = initial[rel]
            self._add(rel, Node(content is None, bytearray(content or b"")))
        self.start = {ino: Node(n.is_dir, bytearray(n.data), dict(n.entries))
                      for ino, n in self.nodes.items()}  # fmt: skip
        self.ops: list[Op] = []
        self.procs: dict[int, Proc] = {}
        self.step_index = 0

    def _add(self, rel: str, node: Node) -> int:
        parent = self.resolve_rel(os.path.dirname(rel))
        assert parent is not None, rel
        ino = len(self.nodes)
        self.nodes[ino] = node
        self.nodes[parent].entries[os.path.basename(rel)] = ino
        self.paths[ino] = rel
        return ino

    def files(self) -> dict[str, int]:
        """The files of the model as it stands: path -> inode."""
        return _walk(self.nodes)[1]

    # paths

    def rel(self, path: str) -> str | None:
        """`path` relative to the base, or None when it lies outside the model."""
        path = os.path.normpath(path)
        if path == self.base:
            return "."
        if not path.startswith(self.base + os.sep):
            return None
        rel = path[len(self.base) + 1 :]
        return None if self.ignored(rel) else rel

    def resolve_rel(self, rel: str) -> int | None:
        ino = 0
        for part in [] if rel in (".", "") else rel.split(os.sep):
            node = self.nodes[ino]
            if not node.is_dir or part not in node.entries:
                return None
            ino = node.entries[part]
        return ino

    def where(self, proc: Proc, dirfd: str | None, path: bytes) -> str:
        """The absolute path a call names: `path` against its directory argument."""
        name = os.fsdecode(path)
        if os.path.isabs(name):
            return name
        if dirfd is None:
            return os.path.join(proc.cwd, name)
        number, annotated = descriptor(dirfd)
        if number is None:
            return os.path.join(annotated or proc.cwd, name)
        desc = proc.fds.get(number)
        directory = annotated or (desc.path if desc else None)
        if directory is None:
            raise Unmodelled(f"a path relative to an unknown descriptor: {dirfd} {name}")
        return os.path.join(directory, name)

    # the run

    def step(self, index: int, step: Step, trace: Iterator[Call]) -> None:
        self.step_index = index
        self.ops.append(Op("began", index, what=step.label))
        parents: dict[int, tuple[int, bool]] = {}  # child pid -> (parent pid, shares fds)
        buffered = list(trace)
        for call in buffered:
            if call.name in ("clone", "clone3", "fork", "vfork") and call.result:
                shares = "CLONE_FILES" in " ".join(call.args)
                parents[call.result] = (call.pid, shares)
        main = buffered[0].pid if buffered else 0
        stdout = Desc(None, stdout=True)
        self.procs = {main: Proc({0: Desc(None), 1: stdout, 2: Desc(None)}, step.cwd)}
        for call in buffered:
            proc = self._proc(call.pid, parents)
            handler = getattr(self, "_" + call.name, None) if call.name in TRACED else None
            if handler is not None and call.result is not None:  # a failed call changed nothing
                handler(proc, call)

    def _proc(self, pid: int, parents: dict[int, tuple[int, bool]]) -> Proc:
        if pid not in self.procs:
            parent, shares = parents[pid]
            source = self._proc(parent, parents)
            self.procs[pid] = source if shares else Proc(dict(source.fds), source.cwd)
        return self.procs[pid]

    def _emit(self, kind: str, what: str, **fields: object) -> None:
        self.ops.append(Op(kind, self.step_index, what=what, **fields))  # type: ignore[arg-type]

    def _lookup(self, path: str) -> tuple[str | None, int | None]:
        rel = self.rel(path)
        return rel, (None if rel is None else self.resolve_rel(rel))

    def _parent(self, rel: str) -> tuple[int, str]:
        parent = self.resolve_rel(os.path.dirname(rel))
        if parent is None:
            raise Unmodelled(f"no parent directory for {rel}")
        return parent, os.path.basename(rel)

    # opening and closing

    def _open(self, proc: Proc, call: Call) -> None:
        self._opened(proc, call, None, call.args[0], call.args[1])

    def _creat(self, proc: Proc, call: Call) -> None:
        self._opened(proc, call, None, call.args[0], "O_WRONLY|O_CREAT|O_TRUNC")

    def _openat(self, proc: Proc, call: Call) -> None:
        self._opened(proc, call, call.args[0], call.args[1], call.args[2])

    def _openat2(self, proc: Proc, call: Call) -> None:
        how = re.search(r"flags=([A-Z_|0-9x]+)", call.args[2])
        self._opened(proc, call, call.args[0], call.args[1], how[1] if how else "")

    def _opened(self, proc: Proc, call: Call, dirfd: str | None, path: str, mode: str) -> None:
        absolute = self.where(proc, dirfd, string(path))
        rel, ino = self._lookup(absolute)
        opened = flags(mode)
        if rel is not None and ino is None:
            if "O_CREAT" not in opened or "O_TMPFILE" in opened:
                raise Unmodelled(f"opened {rel}, which the model does not have")
            parent, name = self._parent(rel)
            ino = len(self.nodes)
            self.nodes[ino] = Node(False)
            self.nodes[parent].entries[name] = ino
            self.paths[ino] = rel
            self._emit("link", f"create {rel}", dirs=(parent,), names=(name,), ino=ino)
        elif ino is not None and "O_TRUNC" in opened and not self.nodes[ino].is_dir:
            del self.nodes[ino].data[:]
            self._emit("truncate", f"O_TRUNC {rel}", ino=ino, offset=0)
        assert call.result is not None
        proc.fds[call.result] = Desc(ino, append="O_APPEND" in opened, path=absolute)

    def _close(self, proc: Proc, call: Call) -> None:
        proc.fds.pop(descriptor(call.args[0])[0] or 0, None)

    def _close_range(self, proc: Proc, call: Call) -> None:
        if "CLOSE_RANGE_CLOEXEC" in call.args[2]:
            return
        low, high = int(call.args[0], 0), int(call.args[1], 0)
        for number in [n for n in proc.fds if low <= n <= high]:
            del proc.fds[number]

    def _dup(self, proc: Proc, call: Call) -> None:
        self._copy_fd(proc, call.args[0], call.result)

    def _dup2(self, proc: Proc, call: Call) -> None:
        self._copy_fd(proc, call.args[0], call.result)

    _dup3 = _dup2

    def _fcntl(self, proc: Proc, call: Call) -> None:
        if call.args[1] in ("F_DUPFD", "F_DUPFD_CLOEXEC"):
            self._copy_fd(proc, call.args[0], call.result)

    def _copy_fd(self, proc: Proc, source: str, target: int | None) -> None:
        desc = proc.fds.get(descriptor(source)[0] or 0)
        if target is not None:
            if desc is None:
                proc.fds.pop(target, None)
            else:
                proc.fds[target] = desc

    def _chdir(self, proc: Proc, call: Call) -> None:
        proc.cwd = self.where(proc, None, string(call.args[0]))

    def _fchdir(self, proc: Proc, call: Call) -> None:
        _, path = descriptor(call.args[0])
        if path:
            proc.cwd = path

    # content

    def _desc(self, proc: Proc, arg: str) -> Desc | None:
        number, _ = descriptor(arg)
        return proc.fds.get(number if number is not None else -1)

    def _write(self, proc: Proc, call: Call) -> None:
        self._wrote(proc, call, string(call.args[1]), None)

    def _pwrite64(self, proc: Proc, call: Call) -> None:
        self._wrote(proc, call, string(call.args[1]), int(call.args[3], 0))

    def _writev(self, proc: Proc, call: Call) -> None:
        pieces = re.findall(r'iov_base=("(?:\\x[0-9a-f]{2})*")', call.args[1])
        self._wrote(proc, call, b"".join(string(p) for p in pieces), None)

    def _pwritev(self, proc: Proc, call: Call) -> None:
        pieces = re.findall(r'iov_base=("(?:\\x[0-9a-f]{2})*")', call.args[1])
        self._wrote(proc, call, b"".join(string(p) for p in pieces), int(call.args[3], 0))

    _pwritev2 = _pwritev

    def _wrote(self, proc: Proc, call: Call, data: bytes, at: int | None) -> None:
        desc = self._desc(proc, call.args[0])
        assert call.result is not None
        data = data[: call.result]
        if desc is None:
            return
        if desc.stdout:
            self._emit("said", "stdout", data=data)
            return
        if desc.ino is None:
            return
        node = self.nodes[desc.ino]
        offset = at if at is not None else (len(node.data) if desc.append else desc.offset)
        _put(node.data, offset, data)
        if at is None:
            desc.offset = offset + len(data)
        self._emit("write", f"write {self.paths[desc.ino]}", ino=desc.ino, offset=offset,
                   data=data)  # fmt: skip

    def _lseek(self, proc: Proc, call: Call) -> None:
        desc = self._desc(proc, call.args[0])
        if desc is not None and call.result is not None:
            desc.offset = call.result

    def _ftruncate(self, proc: Proc, call: Call) -> None:
        desc = self._desc(proc, call.args[0])
        if desc is not None and desc.ino is not None:
            self._truncated(desc.ino, int(call.args[1], 0))

    def _truncate(self, proc: Proc, call: Call) -> None:
        _, ino = self._lookup(self.where(proc, None, string(call.args[0])))
        if ino is not None:
            self._truncated(ino, int(call.args[1], 0))

    def _truncated(self, ino: int, size: int) -> None:
        data = self.nodes[ino].data
        del data[size:]
        data.extend(bytes(size - len(data)))
        self._emit("truncate", f"truncate {self.paths[ino]}", ino=ino, offset=size)

    def _fsync(self, proc: Proc, call: Call) -> None:
        desc = self._desc(proc, call.args[0])
        if desc is not None and desc.ino is not None:
            self._emit("sync", f"fsync {self.paths[desc.ino]}", ino=desc.ino)

    _fdatasync = _fsync

    def _sync(self, proc: Proc, call: Call) -> None:
        self._emit("sync", "sync")

    _syncfs = _sync

    # directory entries

    def _mkdir(self, proc: Proc, call: Call) -> None:
        self._made_dir(self.where(proc, None, string(call.args[0])))

    def _mkdirat(self, proc: Proc, call: Call) -> None:
        self._made_dir(self.where(proc, call.args[0], string(call.args[1])))

    def _made_dir(self, path: str) -> None:
        rel = self.rel(path)
        if rel is None:
            return
        parent, name = self._parent(rel)
        ino = len(self.nodes)
        self.nodes[ino] = Node(True)
        self.nodes[parent].entries[name] = ino
        self.paths[ino] = rel
        self._emit("link", f"mkdir {rel}", dirs=(parent,), names=(name,), ino=ino)

    def _unlink(self, proc: Proc, call: Call) -> None:
        self._removed(self.where(proc, None, string(call.args[0])), "unlink")

    def _rmdir(self, proc: Proc, call: Call) -> None:
        self._removed(self.where(proc, None, string(call.args[0])), "rmdir")

    def _unlinkat(self, proc: Proc, call: Call) -> None:
        verb = "rmdir" if "AT_REMOVEDIR" in call.args[2] else "unlink"
        self._removed(self.where(proc, call.args[0], string(call.args[1])), verb)

    def _removed(self, path: str, verb: str) -> None:
        rel = self.rel(path)
        if rel is None:
            return
        parent, name = self._parent(rel)
        ino = self.nodes[parent].entries.pop(name)
        self._emit("unlink", f"{verb} {rel}", dirs=(parent,), names=(name,), ino=ino)

    def _rename(self, proc: Proc, call: Call) -> None:
        source = self.where(proc, None, string(call.args[0]))
        self._renamed(source, self.where(proc, None, string(call.args[1])))

    def _renameat(self, proc: Proc, call: Call) -> None:
        source = self.where(proc, call.args[0], string(call.args[1]))
        self._renamed(source, self.where(proc, call.args[2], string(call.args[3])))

    def _renameat2(self, proc: Proc, call: Call) -> None:
        if "RENAME_EXCHANGE" in call.args[4]:
            raise Unmodelled("renameat2 with RENAME_EXCHANGE")
        self._renameat(proc, call)

    def _renamed(self, source: str, target: str) -> None:
        old, new = self.rel(source), self.rel(target)
        if old is None and new is None:
            return
        if old is None or new is None:
            raise Unmodelled(f"a rename across the model's edge: {source} -> {target}")
        (from_dir, from_name), (to_dir, to_name) = self._parent(old), self._parent(new)
        ino = self.nodes[from_dir].entries.pop(from_name)
        self.nodes[to_dir].entries[to_name] = ino
        self.paths[ino] = new
        self._emit("rename", f"rename {old} -> {new}", dirs=(from_dir, to_dir),
                   names=(from_name, to_name), ino=ino)  # fmt: skip

    def _link(self, proc: Proc, call: Call) -> None:
        source = self.where(proc, None, string(call.args[0]))
        self._linked(source, self.where(proc, None, string(call.args[1])))

    def _linkat(self, proc: Proc, call: Call) -> None:
        source = self.where(proc, call.args[0], string(call.args[1]))
        self._linked(source, self.where(proc, call.args[2], string(call.args[3])))

    def _linked(self, source: str, target: str) -> None:
        new = self.rel(target)
        if new is None:
            return
        _, ino = self._lookup(source)
        if ino is None:
            raise Unmodelled(f"a link to a file outside the model: {source}")
        parent, name = self._parent(new)
        self.nodes[parent].entries[name] = ino
        self._emit("link", f"link {new}", dirs=(parent,), names=(name,), ino=ino)

    def _symlink(self, proc: Proc, call: Call) -> None:
        if self.rel(self.where(proc, None, string(call.args[1]))) is not None:
            raise Unmodelled("a symlink in the modelled tree")

    def _symlinkat(self, proc: Proc, call: Call) -> None:
        if self.rel(self.where(proc, call.args[1], string(call.args[2]))) is not None:
            raise Unmodelled("a symlink in the modelled tree")


def _put(data: bytearray, offset: int, piece: bytes) -> None:
    """Write `piece` into `data` at `offset`, as a file grows: a gap reads as zeros."""
    if offset > len(data):
        data.extend(bytes(offset - len(data)))
    data[offset : offset + len(piece)] = piece


# --- crash states ----------------------------------------------------------------------------


@dataclass
class Choice:
    """What one crash state keeps of the changes not yet durable at its instant.

    `cuts` maps each directory to how many of its entry changes persist and each file to
    how many of its content changes do (always at least the durable ones: a prefix).
    `untruncated` names a file whose unsynced writes persist but whose unsynced truncates
    do not; `torn` a file whose unsynced writes keep only their first 4 KiB block.
    """

    name: str
    cuts: dict[int, int]
    untruncated: int | None = None
    torn: int | None = None


class Instant:
    """A crash right after `ops[:n]`: which changes of each directory and file were
    durable then (`durable`) and how many there were (`total`)."""

    def __init__(self, ops: list[Op], n: int) -> None:
        self.n = n
        self.step = ops[n - 1].step if n else -1
        changes: dict[int, list[Op]] = {}
        synced: dict[int | None, int] = {}
        for index, op in enumerate(ops[:n]):
            if op.is_entry:
                for directory in dict.fromkeys(op.dirs):  # a rename within one: one change
                    changes.setdefault(directory, []).append(op)
            elif op.is_content:
                assert op.ino is not None
                changes.setdefault(op.ino, []).append(op)
            elif op.kind == "sync":
                synced[op.ino] = index
        everything = synced.get(None, -1)
        position = {id(op): index for index, op in enumerate(ops[:n])}
        self.changes = changes
        self.total = {key: len(found) for key, found in changes.items()}
        self.durable = {
            key: sum(position[id(op)] < max(synced.get(key, -1), everything) for op in found)
            for key, found in changes.items()
        }

    def choices(self, named: Callable[[int], str]) -> Iterator[Choice]:
        """The states to build: the two extremes, and between them one key at a time,
        each key the step at hand left with unsynced changes."""
        lost = dict(self.durable)
        kept = dict(self.total)
        yield Choice("every unsynced change lost", lost)
        yield Choice("nothing lost (as kill -9 leaves it)", kept)
        for key in sorted(self.total):
            first, last = self.durable[key], self.total[key]
            if not any(op.step == self.step for op in self.changes[key][first:]):
                continue
            for count in range(first, last):
                yield Choice(
                    f"{named(key)} keeps {count - first} of its {last - first} "
                    "unsynced changes, the rest of the tree all",
                    {**kept, key: count},
                )
                yield Choice(f"{named(key)} keeps {count + 1 - first} of its {last - first} "
                             "unsynced changes, the rest of the tree none",
                             {**lost, key: count + 1})  # fmt: skip
            unsynced = self.changes[key][first:]
            if any(op.kind == "truncate" for op in unsynced):
                for extreme, cuts in (("all", kept), ("none", lost)):
                    yield Choice(f"{named(key)} keeps its unsynced writes but not its "
                                 f"truncates, the rest of the tree {extreme}", cuts,
                                 untruncated=key)  # fmt: skip
            if any(op.kind == "write" and len(op.data) > BLOCK for op in unsynced):
                for extreme, cuts in (("all", kept), ("none", lost)):
                    yield Choice(f"{named(key)}'s unsynced writes torn to their first block, "
                                 f"the rest of the tree {extreme}", cuts, torn=key)  # fmt: skip


@dataclass
class State:
    """A tree a power cut may leave, and which inode of the model each file is (a file's
    identity matters: the daemon archives an original only if it is the file it read)."""

    tree: Tree
    inodes: dict[str, int]


def build(recording: Recording, instant: Instant, choice: Choice) -> State:
    """The state a power cut at `instant` leaves when it keeps what `choice` says."""
    nodes = {ino: Node(node.is_dir, bytearray(node.data), dict(node.entries))
             for ino, node in recording.start.items()}  # fmt: skip
    seen: dict[int, int] = {}  # key -> how many of its changes were looked at so far
    stopped: set[int] = set()  # directories past the last change they keep
    for op in recording.ops[: instant.n]:
        if op.is_entry:
            dirs = tuple(dict.fromkeys(op.dirs))
            ranks = [seen.get(d, 0) for d in dirs]
            for directory in dirs:
                seen[directory] = seen.get(directory, 0) + 1
            # A rename one of its folders loses is lost to the other too (atomic), and
            # then so is every later change of both (each folder keeps a prefix).
            if any(d in stopped or r >= choice.cuts[d] for r, d in zip(ranks, dirs, strict=True)):
                stopped.update(dirs)
            else:
                _apply_entry(nodes, recording.is_dir, op)
        elif op.is_content:
            assert op.ino is not None
            rank = seen.get(op.ino, 0)
            seen[op.ino] = rank + 1
            unsynced = rank >= instant.durable[op.ino]
            if unsynced and choice.untruncated == op.ino:
                if op.kind == "write":
                    _apply_content(nodes, op, op.data)
            elif unsynced and choice.torn == op.ino:
                _apply_content(nodes, op, op.data[: BLOCK - op.offset % BLOCK])
            elif rank < choice.cuts[op.ino]:
                _apply_content(nodes, op, op.data)
    return State(*_walk(nodes))


def _apply_entry(nodes: dict[int, Node], is_dir: dict[int, bool], op: Op) -> None:
    assert op.ino is not None
    for ino in (op.ino, *op.dirs):  # one made by a change this state lost: unreachable
        if ino not in nodes:
            nodes[ino] = Node(is_dir[ino])
    first = nodes[op.dirs[0]].entries
    if op.kind == "link":
        first[op.names[0]] = op.ino
    elif first.get(op.names[0]) == op.ino:  # an unlink, or a rename's source
        del first[op.names[0]]
        if op.kind == "rename":
            nodes[op.dirs[1]].entries[op.names[1]] = op.ino


def _apply_content(nodes: dict[int, Node], op: Op, data: bytes) -> None:
    assert op.ino is not None
    node = nodes.setdefault(op.ino, Node(False))
    if op.kind == "write":
        _put(node.data, op.offset, data)
    else:
        del node.data[op.offset :]
        node.data.extend(bytes(op.offset - len(node.data)))


def _walk(nodes: dict[int, Node]) -> tuple[Tree, dict[str, int]]:
    """What is reachable from the base: the tree, and each file's inode."""
    tree: Tree = {}
    inodes: dict[str, int] = {}
    pending = [(0, ".")]
    while pending:
        ino, rel = pending.pop()
        for name, child in nodes[ino].entries.items():
            path = name if rel == "." else os.path.join(rel, name)
            node = nodes[child]
            if node.is_dir:
                tree[path] = None
                pending.append((child, path))
            else:
                tree[path] = bytes(node.data)
                inodes[path] = child
    return tree, inodes


def fingerprint(state: State) -> str:
    """A digest of a state, telling states apart."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(state.tree):
        content = state.tree[path]
        kept = content or b""
        head = f"{path}\0{state.inodes.get(path)}\0{len(kept)}\0"
        digest.update(head.encode() + kept)
    return digest.hexdigest()


# --- running the real commands on a state ---------------------------------------------------

SCRIPTS = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")}
FORK = os.environ.get("HANDOFFD_CRASHSTATES_EXEC") != "1"
# What the commands import only when they run: imported once per worker, not per call.
PRELOAD = ("handoffd.cli", "handoffd.helpers", "handoffd.daemon", "handoffd.log",
           "handoffd.continuity.hook")  # fmt: skip


@dataclass
class Ran:
    """What a command did."""

    code: int
    out: str
    err: str

    def problems(self, label: str, ok: tuple[int, ...]) -> list[str]:
        """One problem if it exited with a code not in `ok`, naming what it said."""
        return [] if self.code in ok else [f"{label} exited {self.code}: {self.err.strip()}"]

    def expect(self, code: int) -> Ran:
        assert self.code == code, f"exit {self.code}: {self.err}"
        return self


def run(argv: list[str], cwd: str, env: dict[str, str], timeout: float = 10.0) -> Ran:
    """Run an installed command.  By default in a forked child that calls the command's
    entry point, which is what the console script does once Python has started: the
    same code on the same files, without 0.1 s of start-up per call, so a thousand states
    fit in the suite.  HANDOFFD_CRASHSTATES_EXEC=1 starts the real scripts instead."""
    if not FORK:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=timeout,
                              check=False)  # fmt: skip
        return Ran(done.returncode, done.stdout.decode(errors="replace"),
                   done.stderr.decode(errors="replace"))  # fmt: skip
    entry = SCRIPTS[os.path.basename(argv[0])].load()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(entry, argv, cwd, env, out.fileno(), err.fileno())
        code = _wait(pid, timeout)
        out.seek(0)
        err.seek(0)
        return Ran(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def _child(entry: Callable[[], object], argv: list[str], cwd: str, env: dict[str, str],
           out: int, err: int) -> None:  # fmt: skip
    code = 70
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.argv = list(argv)
        try:
            entry()
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (exit.code is not None)
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    """The child's exit code (negative: the signal that ended it); killed at `timeout`."""
    ready = os.pidfd_open(pid)
    try:
        if not select.select([ready], [], [], timeout)[0]:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(ready)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


Moved = dict[tuple[int, int], tuple[int, int]]  # recorded (st_dev, st_ino) -> laid out


def materialize(recording: Recording, state: State, base: str) -> Moved:
    """Lay `state` out below `base` (emptied first); returns, for each file of the
    recording present in the state, its recorded identity and its new one (files that
    record identities, as the journal does, need them mapped: `Recovery`).

    Paths inside files that name the recorded base (roles.tsv, the journal) are rewritten
    to `base`, which has the same length, so no offset or size changes.  Every file gets
    a past mtime: it reads as renamed into place (settle.py), as the recorded files were.
    """
    old, new = recording.base.encode(), base.encode()
    assert len(old) == len(new), (recording.base, base)
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    past = time.time() - 60
    laid: dict[int, tuple[int, int]] = {}
    for rel in sorted(state.tree):
        path = os.path.join(base, rel)
        content = state.tree[rel]
        if content is None:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(content.replace(old, new))
        os.utime(path, (past, past))
        laid.setdefault(state.inodes[rel], _identity(path))
    return {was: laid[ino] for was, ino in recording.identities.items() if ino in laid}


# --- the explorer ---------------------------------------------------------------------------

# A state, and the `began` and `said` ops before its instant: what is wrong with it.
Check = Callable[[Tree, list[Op]], list[str]]


class Recovery:
    """One way of recovering a state, run in the explorer's workers (so it must pickle:
    a module-level class).  `__call__` gets the base the state is laid out below and how
    file identities moved (see `materialize`), and returns what is wrong after."""

    name = "recovery"

    def applies(self, step: str) -> bool:
        """Whether to recover states first seen during the step labelled `step`."""
        return True

    def __call__(self, base: str, moved: Moved) -> list[str]:
        raise NotImplementedError


@dataclass
class Exploration:
    """What `explore` did and found: each problem with the first state that showed it."""

    instants: int = 0
    checked: int = 0  # (instant, choice) pairs built and checked
    distinct: int = 0  # states recovered (byte-identical ones once)
    recovered: int = 0  # recoveries run (a state may be recovered more than one way)
    findings: dict[str, tuple[str, int]] = field(default_factory=dict)  # problem -> (where, n)

    def found(self, problem: str, where: str) -> None:
        first, count = self.findings.get(problem, (where, 0))
        self.findings[problem] = (first, count + 1)

    def report(self, limit: int = 20) -> str:
        lines = [f"{len(self.findings)} distinct problems over {self.checked} states:"]
        for problem, (where, count) in list(self.findings.items())[:limit]:
            lines.append(f"- {problem}\n    first at: {where} ({count}x)")
        return "\n".join(lines)


def explore(
    recording: Recording, check: Check, recoveries: list[Recovery], *, workers: int = 2
) -> Exploration:
    """Build every crash state of `recording`, `check` each, and recover each distinct one
    in every way of `recoveries` that applies, in `workers` processes, each laying states
    out below its own base (afresh for each recovery)."""
    result = Exploration()
    states: dict[str, tuple[State, str, str]] = {}  # fingerprint -> state, step, where

    def named(key: int) -> str:
        return recording.paths.get(key, f"inode {key}")

    for n in range(len(recording.ops) + 1):
        instant = Instant(recording.ops, n)
        heard = [op for op in recording.ops[:n] if op.kind in ("began", "said")]
        step = next((op.what for op in reversed(heard) if op.kind == "began"), "")
        where = _describe(recording, n)
        result.instants += 1
        for choice in instant.choices(named):
            state = build(recording, instant, choice)
            result.checked += 1
            label = f"{where}; {choice.name}"
            for problem in check(state.tree, heard):
                result.found(problem, label)
            states.setdefault(fingerprint(state), (state, step, label))
    result.distinct = len(states)
    tasks = [(state, [r.name for r in recoveries if r.applies(step)])
             for state, step, _ in states.values()]  # fmt: skip
    result.recovered = sum(len(names) for _, names in tasks)
    labels = [label for _, _, label in states.values()]
    with _pool(workers, recording, recoveries) as pool:
        for label, problems in zip(labels, pool.map(_recover, tasks, chunksize=4), strict=True):
            for problem in problems:
                result.found(problem, label)
    return result


def _pool(workers: int, recording: Recording, recoveries: list[Recovery]) -> ProcessPoolExecutor:
    """Workers started from a lean server process, not forked from the caller: each
    command a worker runs is a fork of the worker, and a fork costs what the forked
    process holds in memory (a test runner's is large)."""
    context = get_context("forkserver")
    context.set_forkserver_preload([__name__, *(PRELOAD if FORK else ())])
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start,
                               initargs=(recording, recoveries))  # fmt: skip


def _describe(recording: Recording, n: int) -> str:
    """Where a crash after `ops[:n]` falls, for people: the step and the last change."""
    if n == 0:
        return "before the first step"
    op = recording.ops[n - 1]
    began = next(o for o in reversed(recording.ops[:n]) if o.kind == "began")
    what = op.what if op.kind != "said" else f"printed {op.data[:60]!r}"
    return f"step {op.step} ({began.what}), after op {n - 1}: {what}"


_worker: dict[str, object] = {}


def _worker_start(recording: Recording, recoveries: list[Recovery]) -> None:
    name = os.path.basename(recording.base)
    base = os.path.join(
        os.path.dirname(recording.base), "w" + str(os.getpid()).zfill(len(name) - 1)
    )
    _worker.update(recording=recording, base=base, recoveries={r.name: r for r in recoveries})


def _recover(task: tuple[State, list[str]]) -> list[str]:
    state, names = task
    base, recording = str(_worker["base"]), _worker["recording"]
    recoveries: dict[str, Recovery] = _worker["recoveries"]  # type: ignore[assignment]
    assert isinstance(recording, Recording)
    problems = []
    for name in names:
        moved = materialize(recording, state, base)
        try:
            problems += [f"({name}) {problem}" for problem in recoveries[name](base, moved)]
        except Exception as error:  # a crash of the audit itself is a finding, not a hang
            problems.append(f"({name}) recovery raised {type(error).__name__}: {error}")
    shutil.rmtree(base, ignore_errors=True)
    return problems
