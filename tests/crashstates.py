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

`crashtrace.record` runs the steps under strace; `explore` builds the states, checks each with a
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

from tests.crashtrace import Node, Op, Recording, Tree, identity, put, reachable

BLOCK = 4096  # bytes: the unit a torn write keeps or loses


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
    identity matters: the daemon archives an original only if it is the file it read);
    `told`, what the run had told other machines by then, as the explorer's caller reads
    it (`explore(told=…)`): a power cut here never takes that back."""

    tree: Tree
    inodes: dict[str, int]
    told: object = None


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
    return State(*reachable(nodes))


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
        put(node.data, op.offset, data)
    else:
        del node.data[op.offset :]
        node.data.extend(bytes(op.offset - len(node.data)))


def fingerprint(state: State) -> str:
    """A digest of a state, telling states apart."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(state.tree):
        content = state.tree[path]
        kept = content or b""
        head = f"{path}\0{state.inodes.get(path)}\0{len(kept)}\0"
        digest.update(head.encode() + kept)
    digest.update(repr(state.told).encode())  # the same tree, told more: another state
    return digest.hexdigest()


# --- running the real commands on a state ---------------------------------------------------

SCRIPTS = {e.name: e for e in importlib.metadata.entry_points(group="console_scripts")}
FORK = os.environ.get("HANDOFFD_CRASHSTATES_EXEC") != "1"
# What the commands import only when they run: imported once per worker, not per call.
PRELOAD = ("handoffd.cli", "handoffd.adapters.console", "handoffd.daemon.daemon",
           "handoffd.core.log", "handoffd.continuity.live")  # fmt: skip


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
    entry = entry_point(os.path.basename(argv[0]))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(entry, argv, cwd, env, out.fileno(), err.fileno())
        code = _wait(pid, timeout)
        out.seek(0)
        err.seek(0)
        return Ran(code, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def entry_point(command: str) -> Callable[[], object]:
    """What an installed command calls: its entry point, or for an agent's helper (a small
    script in bin/, not an entry point) the function of the same name it calls."""
    if command in SCRIPTS:
        return SCRIPTS[command].load()
    from handoffd.adapters import console

    return getattr(console, command)


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
        laid.setdefault(state.inodes[rel], identity(path))
    return {was: laid[ino] for was, ino in recording.identities.items() if ino in laid}


# --- the explorer ---------------------------------------------------------------------------

# A state, and the `began` and `said` ops before its instant: what is wrong with it.
Check = Callable[[Tree, list[Op]], list[str]]


class Recovery:
    """One way of recovering a state, run in the explorer's workers (so it must pickle:
    a module-level class).  `__call__` gets the base the state is laid out below, how
    file identities moved (see `materialize`) and what the run had told other machines
    (`State.told`), and returns what is wrong after."""

    name = "recovery"

    def applies(self, step: str) -> bool:
        """Whether to recover states first seen during the step labelled `step`."""
        return True

    def __call__(self, base: str, moved: Moved, told: object = None) -> list[str]:
        raise NotImplementedError


@dataclass
class Exploration:
    """What `explore` did and found: each problem with the first state that showed it."""

    walked: int = 0  # instants whose states were built
    instants: int = 0  # instants whose states were checked (a shard's share of those walked)
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
    recording: Recording,
    check: Check,
    recoveries: list[Recovery],
    *,
    workers: int = 2,
    told: Callable[[list[Op]], object] | None = None,
    shard: tuple[int, int] = (0, 1),
) -> Exploration:
    """Build every crash state of `recording`, `check` each, and recover each distinct one
    in every way of `recoveries` that applies, in `workers` processes, each laying states
    out below its own base (afresh for each recovery).  With `told`, each state also holds
    what the ops before its instant told other machines (`told(ops)`, say the messages a
    daemon had acknowledged to a server): states alike on disk but told apart are
    recovered apart.

    `shard` (index, count) does one part of that, so that `count` calls (in as many test
    workers) share one exploration: every instant is walked (building a state costs a
    thousandth of recovering it), but this call checks only the instants `n` with
    `n % count == index`, and recovers only the distinct states whose fingerprint falls
    to it (`in_shard`).  The parts together check every state and recover each distinct
    one exactly once, each the same ways as one call would (by the step it was first seen
    in)."""
    index, count = shard
    result = Exploration()
    states: dict[str, tuple[State, str, str]] = {}  # fingerprint -> state, step, where

    def named(key: int) -> str:
        return recording.paths.get(key, f"inode {key}")

    said: object = None
    for n in range(len(recording.ops) + 1):
        if told is not None and (n == 0 or recording.ops[n - 1].kind in ("sent", "began")):
            said = told(recording.ops[:n])  # only a send or a new step can change it
        instant = Instant(recording.ops, n)
        heard = [op for op in recording.ops[:n] if op.kind in ("began", "said")]
        step = next((op.what for op in reversed(heard) if op.kind == "began"), "")
        where = _describe(recording, n)
        result.walked += 1
        checking = n % count == index
        result.instants += checking
        for choice in instant.choices(named):
            state = build(recording, instant, choice)
            state.told = said
            label = f"{where}; {choice.name}"
            if checking:
                result.checked += 1
                for problem in check(state.tree, heard):
                    result.found(problem, label)
            states.setdefault(fingerprint(state), (state, step, label))
    states = {key: found for key, found in states.items() if in_shard(key, shard)}
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


def in_shard(key: str, shard: tuple[int, int]) -> bool:
    """Whether the state of fingerprint `key` is recovered by `shard` (index, count): a
    digest's bits are as good as random, so each shard gets its share of the states."""
    index, count = shard
    return int(key, 16) % count == index


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
    shown = {"said": f"printed {op.data[:60]!r}", "sent": f"sent {op.data[:60]!r} on {op.what}"}
    what = shown.get(op.kind, op.what)
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
            found = recoveries[name](base, moved, state.told)
            problems += [f"({name}) {problem}" for problem in found]
        except Exception as error:  # a crash of the audit itself is a finding, not a hang
            problems.append(f"({name}) recovery raised {type(error).__name__}: {error}")
    shutil.rmtree(base, ignore_errors=True)
    return problems
