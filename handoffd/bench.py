"""`handoffd bench`: what this machine's disk allows, and how close handoffd gets to it.

Everything runs in throwaway projects under a temp dir (no git, no tmux: roles.tsv
names worktrees that exist and there is no `tmux-socket`, so wake-ups only log
`wake_failed` and cost no tmux call).  One run measures, side by side:

1. the disk's durable-write limit: temp write + fsync + rename + directory fsync,
   run just before and just after each drain;
2. a backlog drain through `handoffd run --once`, timed from the daemon's own log
   (`started` to the last `delivered`) and, for reference, as process wall time;
3. pickup latency of a running daemon: the benchmark puts a handoff into an outbox, as
   swarm_handoff does (fsynced, then linked) and as a plain writer does (written, no
   fsync, then renamed), and waits on a raw inotify watch of the recipients' `inbox/new/`;
4. helper start-up: `ready_for_next` on an empty inbox against `python -c pass`;
5. the daemon at rest: CPU share from /proc/<pid>/stat and its RSS;
6. (2) and (3) again with a long history in `completed/` and `sent/`.

A shared machine's disk changes speed several-fold within minutes, so the history
sizes are measured interleaved (see `measure`) and the drain is judged as a share of
the limit measured around it: compare ratios, not absolute figures.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import platform
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from handoffd import durable, journal
from handoffd import handoff as hf
from handoffd.config import Box

SENDER, RECIPIENTS = "lead", ("alice", "bob")
JOURNAL = os.path.join(".swarmforge", "daemon", "handoffd.journal")
IN_MOVED_TO = 0x80
TIMEOUT = 10.0  # seconds to wait for one delivery before giving up
SPACING = 0.02  # seconds between latency samples, so each is a pass of its own


@dataclass
class Sizes:
    handoffs: int = 1000
    latency_samples: int = 200
    idle_seconds: float = 15.0
    startup_runs: int = 20
    limit_files: int = 1000  # before and after each drain
    histories: tuple[int, ...] = (10_000, 50_000)


QUICK = Sizes(handoffs=50, latency_samples=20, idle_seconds=2.0, startup_runs=3,
              limit_files=50, histories=(500,))  # fmt: skip


class BenchError(Exception):
    """The daemon did not do what the benchmark waited for."""


@dataclass
class Scenario:
    """What one history size measured.  Every history size gets the same measurements,
    interleaved with the others', so a disk that drifts during the run affects all alike."""

    history: int  # old files in each recipient's completed/ and the sender's sent/
    limits: list[float] = field(default_factory=list)  # files/s, before and after each drain
    drains: list[Drain] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)  # queued as swarm_handoff does
    plain_ms: list[float] = field(default_factory=list)  # written and renamed, nothing more
    at_rest: AtRest | None = None

    @property
    def limit(self) -> float:
        return statistics.fmean(self.limits)

    @property
    def copies_per_s(self) -> float:
        """All copies over all drain time."""
        return sum(d.copies for d in self.drains) / sum(d.pass_s for d in self.drains)


# --- the throwaway project -----------------------------------------------------------


class Project:
    """A project root with one worktree per role, a roles.tsv, and no tmux socket."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.worktrees = {role: os.path.join(root, "wt", role) for role in (SENDER, *RECIPIENTS)}
        rows = [
            f"{r}\t{r}\t{path}\tbench-{r}\t{r}\tbench\ttask\n" for r, path in self.worktrees.items()
        ]
        for path in self.worktrees.values():
            os.makedirs(os.path.join(path, ".swarmforge", "handoffs", Box.DRAFTS))
        os.makedirs(os.path.join(root, ".swarmforge", "daemon"))
        with open(os.path.join(root, ".swarmforge", "roles.tsv"), "w", encoding="utf-8") as file:
            file.write("".join(rows))
        self.sequence = 0

    def box(self, role: str, box: str, *names: str) -> str:
        return os.path.join(self.worktrees[role], ".swarmforge", "handoffs", box, *names)

    def handoff(self, stamp: str | None = None) -> tuple[str, bytes]:
        """A queued note from SENDER to every recipient, ~500 bytes, as swarm_handoff writes."""
        self.sequence += 1
        stamp = stamp or hf.id_stamp()
        ident = f"{stamp}_{self.sequence:06d}_from_{SENDER}"
        headers = [("id", ident), ("from", SENDER), ("to", ",".join(RECIPIENTS)),
                   ("priority", "50"), ("type", "note"), ("message", "benchmark handoff"),
                   ("created_at", hf.iso_now())]  # fmt: skip
        body = "Re-read your role and constitution.\n\n" + "benchmark payload line.\n" * 12
        name = f"50_{ident}_to_{'_'.join(RECIPIENTS)}.handoff"
        return name, hf.Handoff(headers, body).render()

    def fill_outbox(self, count: int) -> list[str]:
        names = []
        for _ in range(count):
            name, data = self.handoff()
            path = self.box(SENDER, Box.OUTBOX, name)
            _write(path, data)
            # Written in place, but whole: aged so the daemon need not wait for it to stand
            # still (settle.py), which would time the wait instead of the drain.
            os.utime(path, (time.time() - 10,) * 2)
            names.append(name)
        return names

    def fill_history(self, count: int) -> None:
        """`count` old files in each recipient's completed/ and the sender's sent/ (no fsync)."""
        for _ in range(count):
            name, data = self.handoff(stamp="20200101T000000Z")
            _write(self.box(SENDER, Box.SENT, name), data)
            for role in RECIPIENTS:
                _write(self.box(role, Box.COMPLETED, name), data)

    def clear_new(self) -> None:
        for role in RECIPIENTS:
            for name in os.listdir(self.box(role, Box.NEW)):
                os.unlink(self.box(role, Box.NEW, name))

    def log_events(self) -> list[dict[str, Any]]:
        with open(os.path.join(self.root, ".swarmforge", "daemon", "handoffd.log"), "rb") as file:
            return [json.loads(line) for line in file if line.strip()]


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)


def _handoffd(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "handoffd", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


# --- 1. the disk's limit -----------------------------------------------------------------


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


# --- 2. backlog drain --------------------------------------------------------------------


@dataclass
class Drain:
    copies: int
    pass_s: float  # from the log's `started` to its last `delivered`
    wall_s: float  # the whole `run --once` process, interpreter start-up included
    copies_per_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.copies_per_s = self.copies / self.pass_s


def drain(project: Project, handoffs: int) -> Drain:
    project.fill_outbox(handoffs)
    os.sync()  # flush what set-up wrote, so the daemon's fsyncs do not pay for it
    started = time.perf_counter()
    result = _handoffd("run", "--once", project.root)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise BenchError(f"run --once exited {result.returncode}: {result.stderr[-2000:]}")
    events = project.log_events()
    start = max(_ts(e) for e in events if e["event"] == "started")
    delivered = [_ts(e) for e in events if e["event"] == "delivered" and _ts(e) >= start]
    copies = sum(len(os.listdir(project.box(role, Box.NEW))) for role in RECIPIENTS)
    if len(delivered) != handoffs or copies != handoffs * len(RECIPIENTS):
        raise BenchError(f"drain delivered {len(delivered)} of {handoffs} ({copies} copies)")
    project.clear_new()
    return Drain(copies, max(delivered) - start, wall)


def _ts(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(event["timestamp"]).timestamp()


# --- 3. pickup latency -------------------------------------------------------------------


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


def as_swarm_handoff(project: Project, name: str, data: bytes) -> Publish:
    """Written and fsynced in outbox/tmp/ (not timed); then linked into outbox/ (timed)."""
    temp = project.box(SENDER, Box.DRAFTS, f".{name}.tmp")
    durable.create(temp, data)

    def publish() -> None:
        os.link(temp, project.box(SENDER, Box.OUTBOX, name))
        os.unlink(temp)

    return publish


def as_plain_writer(project: Project, name: str, data: bytes) -> Publish:
    """docs/protocol.md §3 and nothing more: a plain write in outbox/tmp/ (no fsync, no
    stat), then `os.replace` into outbox/ (timed), within one clock tick of the write."""
    temp = project.box(SENDER, Box.DRAFTS, f".{name}.tmp")
    with open(temp, "wb") as file:
        file.write(data)
    return lambda: os.replace(temp, project.box(SENDER, Box.OUTBOX, name))


WRITERS = (as_swarm_handoff, as_plain_writer)


def latency(projects: list[Project], samples: int) -> list[list[list[float]]]:
    """Seconds from the handoff's arrival in outbox/ until every recipient's copy shows in
    new/; `samples` per project and writer (WRITERS), taken in turn from each project's
    running daemon, one writer after the other."""
    inotify = Inotify()
    try:
        for project in projects:
            for role in RECIPIENTS:
                inotify.watch(project.box(role, Box.NEW), IN_MOVED_TO)
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
    project: Project, inotify: Inotify, writer: Callable[[Project, str, bytes], Publish]
) -> float:
    """One handoff: prepared by `writer` (not timed), then timed from its arrival in
    outbox/ to its visibility in every recipient's new/."""
    name, data = project.handoff()
    publish = writer(project, name, data)
    waiting = {(project.box(role, Box.NEW), name) for role in RECIPIENTS}
    started = time.perf_counter()
    publish()
    while waiting:
        events = inotify.read(started + TIMEOUT - time.perf_counter())
        if not events:
            raise BenchError(f"{name} was not delivered within {TIMEOUT} s")
        waiting.difference_update(events)
    elapsed = time.perf_counter() - started
    # The pass ends when the original is archived and the journal emptied.
    _wait_pass_end(project.box(SENDER, Box.OUTBOX, name), os.path.join(project.root, JOURNAL))
    project.clear_new()
    return elapsed


def _wait_pass_end(original: str, journal_path: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while os.path.lexists(original) or journal.load(journal_path) is not None:
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not finish its pass: {original}")
        time.sleep(0.0005)


# --- 4. helper start-up ------------------------------------------------------------------


def startup(project: Project, runs: int) -> tuple[float, float]:
    """Medians (s) of `ready_for_next` on an empty inbox and of `python -c pass`, interleaved.

    The package is byte-compiled first, as `pip install` does: an editable install under
    PYTHONDONTWRITEBYTECODE would otherwise compile every module on every call, which is
    the set-up of a checkout, not the cost an agent pays.
    """
    import compileall

    compileall.compile_dir(os.path.dirname(os.path.abspath(__file__)), quiet=1)
    helper = os.path.join(os.path.dirname(sys.executable), "ready_for_next")
    if not os.path.exists(helper):
        helper_cmd = [
            sys.executable,
            "-c",
            "from handoffd.adapters.console import ready_for_next as r; r()",
        ]
    else:
        helper_cmd = [helper]
    env = {**os.environ, "SWARMFORGE_ROLE": RECIPIENTS[0]}
    cwd = project.worktrees[RECIPIENTS[0]]
    check = subprocess.run(helper_cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check.stdout != "NO_TASK\n":
        raise BenchError(f"ready_for_next printed {check.stdout!r} {check.stderr!r}")
    helper_times, python_times = [], []
    for _ in range(runs):
        helper_times.append(_time_run(helper_cmd, cwd, env))
        python_times.append(_time_run([sys.executable, "-c", "pass"], cwd, env))
    return statistics.median(helper_times), statistics.median(python_times)


def take_and_finish(project: Project, runs: int) -> tuple[float, float]:
    """Medians (s) of `ready_for_next` taking one waiting file and of `done_with_current`
    completing it (stamp, fsync, rename, heartbeat): the calls an agent makes per task."""
    role = RECIPIENTS[0]
    env = {**os.environ, "SWARMFORGE_ROLE": role}
    cwd, bin_dir = project.worktrees[role], os.path.dirname(sys.executable)
    take, finish = [
        [os.path.join(bin_dir, name)] for name in ("ready_for_next", "done_with_current")
    ]
    if not os.path.exists(take[0]):
        script = "from handoffd.adapters.console import {} as h; h()"
        take, finish = [[sys.executable, "-c", script.format(n)]
                        for n in ("ready_for_next", "done_with_current")]  # fmt: skip
    take_times, finish_times = [], []
    for _ in range(runs):
        name, data = project.handoff()
        _write(project.box(role, Box.NEW, name), data)
        take_times.append(_time_run(take, cwd, env))
        finish_times.append(_time_run(finish, cwd, env))
    if os.listdir(project.box(role, Box.IN_PROCESS)):
        raise BenchError("take-and-finish left work in process")
    return statistics.median(take_times), statistics.median(finish_times)


def _time_run(command: list[str], cwd: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


# --- 5. the daemon at rest ---------------------------------------------------------------


@dataclass
class AtRest:
    cpu_pct: float  # utime + stime of every thread, from /proc/<pid>/stat (10 ms ticks)
    cpu_pct_ns: float | None  # the same from the threads' schedstat run time (ns resolution)
    rss_mb: float
    threads: int
    helper_s: float = 0.0
    python_s: float = 0.0
    take_s: float = 0.0
    finish_s: float = 0.0


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


# --- the run -----------------------------------------------------------------------------


def measure(base: str, sizes: Sizes) -> list[Scenario]:
    """Every history size (0 first), interleaved: drains in A B C C B A order, each between
    two disk-limit runs; then pickup samples in turn from one running daemon per size;
    then the empty-history daemon's idle cost, and helper start-up in that project."""
    runs = [Scenario(history) for history in (0, *sizes.histories)]
    projects = [Project(os.path.join(base, f"history-{run.history}")) for run in runs]
    for run, project in zip(runs, projects, strict=True):
        _progress(f"history {run.history:,}: {run.history:,} old files per folder")
        project.fill_history(run.history)
    order = list(zip(runs, projects, strict=True))
    for n, (run, project) in enumerate(order + order[::-1]):
        _progress(f"history {run.history:,}: disk limit, drain of {sizes.handoffs:,} x 2")
        run.limits.append(disk_limit(os.path.join(base, f"limit-{n}-a"), sizes.limit_files))
        run.drains.append(drain(project, sizes.handoffs))
        run.limits.append(disk_limit(os.path.join(base, f"limit-{n}-b"), sizes.limit_files))
    pids = []
    try:
        for project in projects:
            pids.append(_start(project))
        _progress(f"{sizes.latency_samples} pickup samples per history size and writer")
        for run, samples in zip(runs, latency(projects, sizes.latency_samples), strict=True):
            run.latencies_ms, run.plain_ms = _in_ms(samples)
        for project in projects[1:]:
            _handoffd("stop", project.root)
        runs[0].at_rest = _at_rest(projects[0], pids[0], sizes)
    finally:
        for project in projects:
            _handoffd("stop", project.root)
    return runs


def measure_pickup(base: str, sizes: Sizes) -> Scenario:
    """Section 3 alone: pickup samples of both writers from one daemon, no history."""
    run, project = Scenario(0), Project(os.path.join(base, "pickup"))
    try:
        _start(project)
        _progress(f"{sizes.latency_samples} pickup samples per writer")
        (samples,) = latency([project], sizes.latency_samples)
        run.latencies_ms, run.plain_ms = _in_ms(samples)
    finally:
        _handoffd("stop", project.root)
    return run


def _in_ms(samples: list[list[float]]) -> list[list[float]]:
    return [[seconds * 1000 for seconds in times] for times in samples]


def _start(project: Project) -> int:
    """Start the project's daemon in the background, as `handoffd start` does; its pid."""
    started = _handoffd("start", project.root)
    if started.returncode != 0:
        raise BenchError(f"handoffd start failed: {started.stderr}")
    with open(os.path.join(project.root, ".swarmforge", "daemon", "handoffd.pid")) as file:
        return int(file.read())


def _at_rest(project: Project, pid: int, sizes: Sizes) -> AtRest:
    _progress(f"daemon at rest for {sizes.idle_seconds:g} s")
    time.sleep(1.0)  # let the last pass and its log writes settle
    at_rest = idle(pid, sizes.idle_seconds)
    _progress(f"helper start-up, {sizes.startup_runs} runs each")
    at_rest.helper_s, at_rest.python_s = startup(project, sizes.startup_runs)
    _progress(f"take and finish, {sizes.startup_runs} runs each")
    at_rest.take_s, at_rest.finish_s = take_and_finish(project, sizes.startup_runs)
    return at_rest


def machine(directory: str) -> dict[str, Any]:
    uname = os.uname()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "uname": f"{uname.sysname} {uname.release} {uname.machine}",
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "bytecode": _bytecode(),
        "temp_dir": directory,
        "filesystem": _filesystem(directory),
        "load_start": _load(),
    }


def _load() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews every figure."""
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            names = (ln.split(":", 1)[1].strip() for ln in file if ln.startswith("model name"))
            return next(names, "")
    except OSError:
        return ""


def _bytecode() -> str:
    """Whether the helpers start from cached bytecode: without it each call compiles them."""
    import importlib.util

    from handoffd.adapters import console as helpers

    cached = os.path.exists(importlib.util.cache_from_source(helpers.__file__))
    note = " (PYTHONDONTWRITEBYTECODE is set)" if sys.flags.dont_write_bytecode else ""
    found = "cached" if cached else "not cached"
    return f"{found}{note}; compiled before the start-up runs, as an install does"


def _filesystem(directory: str) -> str:
    """`fstype (device on mountpoint)` of the mount holding `directory`."""
    best = ("", "?", "?")
    path = os.path.realpath(directory)
    try:
        with open("/proc/mounts", encoding="utf-8") as file:
            for line in file:
                device, point, fstype = line.split()[:3]
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best[0]):
                    best = (point, fstype, device)
    except OSError:
        pass
    return f"{best[1]} ({best[2]} on {best[0]})"


def _progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def _emit(text: str, figures: dict[str, Any], json_path: str | None, json_only: bool) -> None:
    """A scenario's table (with `--json-only` its JSON line instead), its figures to `--json`."""
    data = json.dumps(figures, sort_keys=True)
    click.echo(data if json_only else text)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as file:
            file.write(data + "\n")


@click.command()
@click.option("--quick", is_flag=True, help="Tiny sizes: checks the benchmark runs, not speed.")
@click.option("--handoffs", type=click.IntRange(1), help="Backlog size (2 copies each) [1000].")
@click.option("--latency-samples", type=click.IntRange(1), help="Pickup samples [200].")
@click.option("--idle-seconds", type=click.FloatRange(0.5), help="Idle window [15].")
@click.option("--startup-runs", type=click.IntRange(1), help="Runs of each command [20].")
@click.option(
    "--limit-files",
    type=click.IntRange(1),
    help="Files of each disk-limit loop, run before and after each drain [1000].",
)
@click.option(
    "--history",
    "histories",
    type=click.IntRange(1),
    multiple=True,
    help="History sizes for the growth runs, repeatable [10000, 50000].",
)
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Where to build.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write every figure as JSON to this file.",
)
@click.option("--json-only", is_flag=True, help="Print only the JSON (one line), no table.")
@click.option("--keep", is_flag=True, help="Keep the temp dir.")  # fmt: skip
@click.option("--board", is_flag=True, help="Only the board: status --json against its floor.")
@click.option("--digest", is_flag=True, help="Only the digest scenario (docs/protocol.md §11).")
@click.option("--web", is_flag=True, help="Only the web board: its page against status --json.")
@click.option("--pickup", is_flag=True, help="Only section 3: pickup latency of both writers.")
@click.option("--hosts", is_flag=True, help="Only two hosts over NATS: cross-host pickup, drain.")
def main(
    quick: bool,
    directory: str | None,
    json_path: str | None,
    json_only: bool,
    keep: bool,
    board: bool,
    digest: bool,
    web: bool,
    pickup: bool,
    hosts: bool,
    **given: Any,
) -> None:
    """Measure the disk's limit, drain, pickup latency, start-up, idle cost and growth.
    A full run exits 1 when a figure misses its target; --quick gives no verdict."""
    from handoffd import benchreport

    if digest:  # a scenario of its own, like the board's
        from handoffd.continuity import digest_bench

        _emit(*digest_bench.run(quick, directory, keep), json_path, json_only)
        return
    if hosts:  # a scenario of its own (docs/protocol.md §15)
        from handoffd.remote import bench as hosts_bench

        figures = hosts_bench.run(directory, quick)
        data = json.dumps({"hosts": figures}, sort_keys=True)
        click.echo(data if json_only else hosts_bench.render(figures))
        if json_path:
            with open(json_path, "w", encoding="utf-8") as file:
                file.write(data + "\n")
        return
    if board or web:  # scenarios of their own: they share no project or figure with the others
        from handoffd.board import benchmark
        from handoffd.board.web import bench as web_bench

        scenario = web_bench if web else benchmark
        figures = scenario.run(directory, quick)
        data = json.dumps({"web" if web else "board": figures}, sort_keys=True)
        click.echo(data if json_only else scenario.render(figures))
        if json_path:
            with open(json_path, "w", encoding="utf-8") as file:
                file.write(data + "\n")
        return

    chosen = {key: value for key, value in given.items() if value not in (None, ())}
    if "histories" in chosen:
        chosen["histories"] = tuple(chosen["histories"])
    sizes = Sizes(**{**asdict(QUICK if quick else Sizes()), **chosen})
    base = tempfile.mkdtemp(prefix="handoffd-bench-", dir=directory)
    shown = {"latency_samples": sizes.latency_samples} if pickup else asdict(sizes)
    try:
        info = machine(base)
        if pickup:
            result = benchreport.report_pickup(measure_pickup(base, sizes))
        else:
            result = benchreport.report(measure(base, sizes))
        info["load_end"] = _load()
    except BenchError as error:
        raise click.ClickException(str(error)) from None
    finally:
        if keep:
            _progress(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    if quick:  # tiny sizes say whether the benchmark works, not how fast anything is
        result = {"metrics": result["metrics"], "quick": True}
    report = json.dumps({**info, "sizes": shown, **result}, sort_keys=True)
    if json_only:
        click.echo(report)
    else:
        click.echo(benchreport.render(info, shown, result, only_pickup=pickup))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as file:
            file.write(report + "\n")
        if not json_only:
            click.echo(f"JSON: {json_path}")
    if not quick and not result["all_pass"]:
        raise SystemExit(1)
