"""Recording a run for the crash-state explorer (crashstates.py): real commands under
strace, their calls replayed onto a model of the filesystem as a list of `Op`s.

The model is a tree of inodes below one base folder: a directory maps names to inodes,
a file holds bytes.  Replaying a call resolves its paths (absolute, relative to the
process's working directory, or to a directory descriptor) in the tree as the traced
processes saw it, and turns what the call changed into an `Op`: a directory entry made,
removed or renamed (with the directories it touched), bytes written or a size set at an
offset of a file, a file or directory fsynced.  Each process's descriptors and offsets
are followed across fork, clone and dup, so a write lands where the kernel put it.  What
a step prints on its standard output is kept as an `Op` too: the tokens the explorer
holds the state to.  Calls on paths outside the base, or that `ignored` names, are left
out; a change the model cannot represent (a symlink in the tree, a rename across its
edge) raises `Unmodelled` rather than pass silently.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Tree = dict[str, bytes | None]  # relative path -> file content, or None for a directory

# --- recording ---------------------------------------------------------------------------

TRACED = (
    "open", "openat", "openat2", "creat", "close", "close_range", "dup", "dup2", "dup3",
    "fcntl", "write", "pwrite64", "writev", "pwritev", "pwritev2", "lseek", "ftruncate",
    "truncate", "fsync", "fdatasync", "sync", "syncfs", "rename", "renameat", "renameat2",
    "link", "linkat", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "symlink",
    "symlinkat", "chdir", "fchdir", "clone", "clone3", "fork", "vfork", "sendto", "sendmsg",
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
    identities = {identity(os.path.join(base, rel)): ino for rel, ino in replay.files().items()}
    return Recording(base, replay.start, is_dir, replay.paths, replay.ops, outputs, identities)


def identity(path: str) -> tuple[int, int]:
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
    (a step wrote `data` to its stdout), `sent` (a step sent `data` on the socket `what`
    names: what it told another machine, which a power cut here does not take back) or
    `began` (a step started).
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
        return reachable(self.nodes)[1]

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
        put(node.data, offset, data)
        if at is None:
            desc.offset = offset + len(data)
        self._emit("write", f"write {self.paths[desc.ino]}", ino=desc.ino, offset=offset,
                   data=data)  # fmt: skip

    # what leaves the machine

    def _sendto(self, proc: Proc, call: Call) -> None:
        self._sent(call, string(call.args[1]))

    def _sendmsg(self, proc: Proc, call: Call) -> None:
        pieces = re.findall(r'iov_base=("(?:\\x[0-9a-f]{2})*")', call.args[1])
        self._sent(call, b"".join(string(p) for p in pieces))

    def _sent(self, call: Call, data: bytes) -> None:
        """Bytes sent on a socket, named by `-y`'s `socket:[inode]` (one per connection,
        whichever thread sends)."""
        assert call.result is not None
        socket = descriptor(call.args[0])[1] or call.args[0]
        self._emit("sent", socket, data=data[: call.result])

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


def put(data: bytearray, offset: int, piece: bytes) -> None:
    """Write `piece` into `data` at `offset`, as a file grows: a gap reads as zeros."""
    if offset > len(data):
        data.extend(bytes(offset - len(data)))
    data[offset : offset + len(piece)] = piece


def reachable(nodes: dict[int, Node]) -> tuple[Tree, dict[str, int]]:
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
