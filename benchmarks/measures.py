"""What the queue's scenarios time: the disk's durable-write limit, a backlog drain, pickup
latency of a running daemon, and the daemon at rest.  Each is one measurement of one
project; `benchmarks.queue` decides their order."""

from __future__ import annotations

import ctypes
import datetime
import os
import select
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.fanout import JOURNAL, RECIPIENTS, SENDER, Fanout, handoffd
from benchmarks.scenario import BenchError
from handoffd.core import durable
from handoffd.core.config import Box
from handoffd.delivery import journal

IN_MOVED_TO = 0x80
TIMEOUT = 10.0  # seconds to wait for one delivery before giving up
SPACING = 0.02  # seconds between latency samples, so each is a pass of its own


# --- the disk's limit --------------------------------------------------------------------


def disk_limit(directory: str, files: int) -> float:
    """Files/s of the durable-publish loop: write a temp, fsync, rename, fsync the directory."""
    os.makedirs(directory)
    data = b"x" * 500
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    started = time.perf_counter()
    for n in range(files):
        temp = os.path.join(directory, f".{n}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        durable.write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(temp, os.path.join(directory, f"{n}.handoff"))
        os.fsync(dir_fd)
    elapsed = time.perf_counter() - started
    os.close(dir_fd)
    return files / elapsed


# --- backlog drain -----------------------------------------------------------------------


@dataclass
class Drain:
    copies: int
    pass_s: float  # from the log's `started` to its last `delivered`
    wall_s: float  # the whole `run --once` process, interpreter start-up included
    copies_per_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.copies_per_s = self.copies / self.pass_s


def drain(project: Fanout, handoffs: int) -> Drain:
    """A backlog of `handoffs` drained by `handoffd run --once`, timed from its own log."""
    project.fill_outbox(handoffs)
    os.sync()  # flush what set-up wrote, so the daemon's fsyncs do not pay for it
    started = time.perf_counter()
    result = handoffd("run", "--once", project.root)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise BenchError(f"run --once exited {result.returncode}: {result.stderr[-2000:]}")
    events = project.log_events()
    start = max(_ts(e) for e in events if e["event"] == "started")
    delivered = [_ts(e) for e in events if e["event"] == "delivered" and _ts(e) >= start]
    copies = sum(len(os.listdir(project.path(role, Box.NEW))) for role in RECIPIENTS)
    if len(delivered) != handoffs or copies != handoffs * len(RECIPIENTS):
        raise BenchError(f"drain delivered {len(delivered)} of {handoffs} ({copies} copies)")
    project.clear_new()
    return Drain(copies, max(delivered) - start, wall)


def _ts(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(event["timestamp"]).timestamp()


# --- pickup latency ----------------------------------------------------------------------


class Inotify:
    """A raw inotify instance (libc through ctypes): no polling, no helper thread."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.paths: dict[int, str] = {}

    def watch(self, path: str, mask: int) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), "inotify_add_watch failed", path)
        self.paths[wd] = path

    def read(self, timeout: float) -> list[tuple[str, str]]:
        """(directory, name) of each event that arrives within `timeout`."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        data, events, offset = os.read(self.fd, 65536), [], 0
        while offset < len(data):
            wd, _, _, size = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16 : offset + 16 + size].rstrip(b"\0")
            events.append((self.paths.get(wd, ""), os.fsdecode(name)))
            offset += 16 + size
        return events

    def close(self) -> None:
        os.close(self.fd)


Publish = Callable[[], None]


def as_swarm_handoff(project: Fanout, name: str, data: bytes) -> Publish:
    """Written and fsynced in outbox/tmp/ (not timed); then linked into outbox/ (timed)."""
    temp = project.path(SENDER, Box.DRAFTS, f".{name}.tmp")
    durable.create(temp, data)

    def publish() -> None:
        os.link(temp, project.path(SENDER, Box.OUTBOX, name))
        os.unlink(temp)

    return publish


def as_plain_writer(project: Fanout, name: str, data: bytes) -> Publish:
    """docs/protocol.md §3 and nothing more: a plain write in outbox/tmp/ (no fsync, no
    stat), then `os.replace` into outbox/ (timed), within one clock tick of the write."""
    temp = project.path(SENDER, Box.DRAFTS, f".{name}.tmp")
    with open(temp, "wb") as file:
        file.write(data)
    return lambda: os.replace(temp, project.path(SENDER, Box.OUTBOX, name))


WRITERS = (as_swarm_handoff, as_plain_writer)


def latency(projects: list[Fanout], samples: int) -> list[list[list[float]]]:
    """Seconds from the handoff's arrival in outbox/ until every recipient's copy shows in
    new/; `samples` per project and writer (WRITERS), taken in turn from each project's
    running daemon, one writer after the other."""
    inotify = Inotify()
    try:
        for project in projects:
            for role in RECIPIENTS:
                inotify.watch(project.path(role, Box.NEW), IN_MOVED_TO)
        results: list[list[list[float]]] = [[[] for _ in WRITERS] for _ in projects]
        for _ in range(samples):
            for project, result in zip(projects, results, strict=True):
                for writer, times in zip(WRITERS, result, strict=True):
                    times.append(_pickup(project, inotify, writer))
                    time.sleep(SPACING)
    finally:
        inotify.close()
    return results


def _pickup(
    project: Fanout, inotify: Inotify, writer: Callable[[Fanout, str, bytes], Publish]
) -> float:
    """One handoff: prepared by `writer` (not timed), then timed from its arrival in
    outbox/ to its visibility in every recipient's new/."""
    name, data = project.handoff()
    publish = writer(project, name, data)
    waiting = {(project.path(role, Box.NEW), name) for role in RECIPIENTS}
    started = time.perf_counter()
    publish()
    elapsed = until_seen(inotify, waiting, started, name)
    # The pass ends when the original is archived and the journal emptied.
    _wait_pass_end(project.path(SENDER, Box.OUTBOX, name), os.path.join(project.root, JOURNAL))
    project.clear_new()
    return elapsed


def until_seen(inotify: Inotify, waiting: set[tuple[str, str]], started: float, name: str) -> float:
    """Seconds from `started` until inotify showed every (folder, name) of `waiting`."""
    while waiting:
        events = inotify.read(started + TIMEOUT - time.perf_counter())
        if not events:
            raise BenchError(f"{name} was not delivered within {TIMEOUT} s")
        waiting.difference_update(events)
    return time.perf_counter() - started


def _wait_pass_end(original: str, journal_path: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while os.path.lexists(original) or journal.load(journal_path) is not None:
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not finish its pass: {original}")
        time.sleep(0.0005)


def start(project: Fanout) -> int:
    """Start the project's daemon in the background, as `handoffd start` does; its pid."""
    started = handoffd("start", project.root)
    if started.returncode != 0:
        raise BenchError(f"handoffd start failed: {started.stderr}")
    with open(os.path.join(project.root, ".swarmforge", "daemon", "handoffd.pid")) as file:
        return int(file.read())


def stop(project: Fanout) -> None:
    handoffd("stop", project.root)


# --- the daemon at rest ------------------------------------------------------------------


@dataclass
class AtRest:
    cpu_pct: float  # utime + stime of every thread, from /proc/<pid>/stat (10 ms ticks)
    cpu_pct_ns: float | None  # the same from the threads' schedstat run time (ns resolution)
    rss_mb: float
    threads: int


def idle(pid: int, seconds: float) -> AtRest:
    """The daemon's CPU share (%) over `seconds`, its VmRSS (MB) and thread count."""
    ticks, ns, started = _cpu_ticks(pid), _run_ns(pid), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    cpu = 100 * (_cpu_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK") / elapsed
    after = _run_ns(pid)
    cpu_ns = None if ns is None or after is None else 100 * (after - ns) / 1e9 / elapsed
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        rss_kb = next(int(line.split()[1]) for line in file if line.startswith("VmRSS:"))
    return AtRest(cpu, cpu_ns, rss_kb / 1024, len(os.listdir(f"/proc/{pid}/task")))


def _cpu_ticks(pid: int) -> int:
    """utime + stime of the whole process (its threads included, live or exited)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        fields = file.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def _run_ns(pid: int) -> int | None:
    """Nanoseconds on CPU summed over the live threads; None without schedstat."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as file:
                total += int(file.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total
