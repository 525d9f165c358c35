"""`handoffd bench`: what this machine's disk allows, and how close handoffd gets to it.

Everything runs in throwaway projects under a temp dir (no git, no tmux: roles.tsv
names worktrees that exist and there is no `tmux-socket`, so wake-ups only log
`wake_failed` and cost no tmux call).  One run measures, side by side:

1. the disk's durable-write limit: temp write + fsync + rename + directory fsync;
2. a backlog drain through `handoffd run --once`, timed from the daemon's own log
   (`started` to the last `delivered`) and, for reference, as process wall time;
3. pickup latency of a running daemon: the benchmark renames a handoff into an outbox
   and waits on a raw inotify watch of the recipients' `inbox/new/`;
4. helper start-up: `ready_for_next` on an empty inbox against `python -c pass`;
5. the daemon at rest: CPU share from /proc/<pid>/stat and its RSS;
6. (2) and (3) again with a long history in `completed/` and `sent/`.

Absolute figures swing from run to run on a shared machine; compare the ratios.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import math
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
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from handoffd import durable
from handoffd import handoff as hf
from handoffd.config import Box

SENDER, RECIPIENTS = "lead", ("alice", "bob")
JOURNAL = os.path.join(".swarmforge", "daemon", "handoffd.journal")
IN_MOVED_TO = 0x80
TIMEOUT = 10.0  # seconds to wait for one delivery before giving up
SPACING = 0.02  # seconds between latency samples, so each is a pass of its own
GROWTH_TOLERANCE = 1.5  # "flat": within 1.5x of the empty-history figure ...
GROWTH_SLACK_MS = 1.0  # ... or, for latencies, within 1 ms of it (sub-ms noise)


@dataclass
class Sizes:
    handoffs: int = 1000
    latency_samples: int = 200
    idle_seconds: float = 15.0
    startup_runs: int = 20
    limit_files: int = 2000
    histories: tuple[int, ...] = (10_000, 50_000)


QUICK = Sizes(handoffs=50, latency_samples=20, idle_seconds=2.0, startup_runs=3,
              limit_files=100, histories=(500,))  # fmt: skip


class BenchError(Exception):
    """The daemon did not do what the benchmark waited for."""


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
            _write(self.box(SENDER, Box.OUTBOX, name), data)
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


def latency(project: Project, samples: int) -> list[float]:
    """Seconds from the rename into outbox/ until every recipient's copy shows in new/."""
    inotify = Inotify()
    news = [project.box(role, Box.NEW) for role in RECIPIENTS]
    for directory in news:
        inotify.watch(directory, IN_MOVED_TO)
    journal = os.path.join(project.root, JOURNAL)
    results = []
    try:
        for _ in range(samples):
            name, data = project.handoff()
            draft = project.box(SENDER, Box.DRAFTS, f".{name}.tmp")
            durable.create(draft, data)  # as swarm_handoff does; not timed
            waiting = {(directory, name) for directory in news}
            started = time.perf_counter()
            os.rename(draft, project.box(SENDER, Box.OUTBOX, name))
            while waiting:
                events = inotify.read(started + TIMEOUT - time.perf_counter())
                if not events:
                    raise BenchError(f"{name} was not delivered within {TIMEOUT} s")
                waiting.difference_update(events)
            results.append(time.perf_counter() - started)
            _wait_gone(project.box(SENDER, Box.OUTBOX, name), journal)  # the pass has ended
            project.clear_new()
            time.sleep(SPACING)
    finally:
        inotify.close()
    return results


def _wait_gone(*paths: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while any(os.path.lexists(path) for path in paths):
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not finish its pass: {paths}")
        time.sleep(0.0005)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `share` of values <= it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


# --- 4. helper start-up ------------------------------------------------------------------


def startup(project: Project, runs: int) -> tuple[float, float]:
    """Medians (s) of `ready_for_next` on an empty inbox and of `python -c pass`, interleaved."""
    helper = os.path.join(os.path.dirname(sys.executable), "ready_for_next")
    if not os.path.exists(helper):
        helper_cmd = [sys.executable, "-c", "from handoffd.helpers import ready_for_next as r; r()"]
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


def _time_run(command: list[str], cwd: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


# --- 5. the daemon at rest ---------------------------------------------------------------


def idle(pid: int, seconds: float) -> tuple[float, float]:
    """CPU share (%) over `seconds` (utime + stime of all threads) and VmRSS (MB)."""
    before, started = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    used, elapsed = _cpu_seconds(pid) - before, time.monotonic() - started
    with open(f"/proc/{pid}/status", encoding="ascii") as file:
        rss_kb = next(int(line.split()[1]) for line in file if line.startswith("VmRSS:"))
    return 100 * used / elapsed, rss_kb / 1024


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


# --- the run -----------------------------------------------------------------------------


@dataclass
class Scenario:
    history: int
    drain: Drain
    latencies_ms: list[float]

    @property
    def p50(self) -> float:
        return percentile(self.latencies_ms, 0.50)

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 0.99)


def scenario(
    base: str, history: int, sizes: Sizes, at_rest: dict[str, float] | None = None
) -> Scenario:
    """Drain, then pickup latency with a running daemon; with `at_rest`, also fill it with
    the daemon's idle cost and the helper start-up times, measured in this project."""
    project = Project(os.path.join(base, f"history-{history}"))
    _progress(f"history {history}: filling")
    project.fill_history(history)
    _progress(f"history {history}: drain of {sizes.handoffs} x {len(RECIPIENTS)}")
    drained = drain(project, sizes.handoffs)
    started = _handoffd("start", project.root)
    if started.returncode != 0:
        raise BenchError(f"handoffd start failed: {started.stderr}")
    try:
        with open(os.path.join(project.root, ".swarmforge", "daemon", "handoffd.pid")) as file:
            pid = int(file.read())
        _progress(f"history {history}: {sizes.latency_samples} latency samples")
        samples = latency(project, sizes.latency_samples)
        if at_rest is not None:
            _progress(f"daemon at rest for {sizes.idle_seconds:g} s")
            time.sleep(1.0)  # let the last pass and its log writes settle
            at_rest["cpu_pct"], at_rest["rss_mb"] = idle(pid, sizes.idle_seconds)
            _progress(f"helper start-up, {sizes.startup_runs} runs each")
            at_rest["helper_s"], at_rest["python_s"] = startup(project, sizes.startup_runs)
    finally:
        _handoffd("stop", project.root)
    return Scenario(history, drained, [s * 1000 for s in samples])


def machine(directory: str) -> dict[str, Any]:
    uname = os.uname()
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "uname": f"{uname.sysname} {uname.release} {uname.machine}",
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "temp_dir": directory,
        "filesystem": _filesystem(directory),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            return next(
                (ln.split(":", 1)[1].strip() for ln in file if ln.startswith("model name")), ""
            )
    except OSError:
        return ""


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


def measure(base: str, sizes: Sizes) -> dict[str, Any]:
    _progress(f"disk limit: {sizes.limit_files} files")
    limit = disk_limit(os.path.join(base, "limit"), sizes.limit_files)
    at_rest: dict[str, float] = {}
    runs = [scenario(base, 0, sizes, at_rest)]
    runs += [scenario(base, history, sizes) for history in sizes.histories]
    return report(limit, runs, at_rest)


def report(limit: float, runs: list[Scenario], at_rest: dict[str, float]) -> dict[str, Any]:
    """The figures and their verdicts (pure)."""
    empty = runs[0]
    helper_ratio = at_rest["helper_s"] / at_rest["python_s"]
    metrics: dict[str, Any] = {
        "disk_limit_files_per_s": limit,
        "drain_copies": empty.drain.copies,
        "drain_pass_s": empty.drain.pass_s,
        "drain_wall_s": empty.drain.wall_s,
        "drain_copies_per_s": empty.drain.copies_per_s,
        "drain_vs_limit": empty.drain.copies_per_s / limit,
        "latency_samples": len(empty.latencies_ms),
        "latency_p50_ms": empty.p50,
        "latency_p99_ms": empty.p99,
        "latency_max_ms": max(empty.latencies_ms),
        "helper_median_ms": at_rest["helper_s"] * 1000,
        "python_median_ms": at_rest["python_s"] * 1000,
        "helper_vs_python": helper_ratio,
        "idle_cpu_pct": at_rest["cpu_pct"],
        "idle_rss_mb": at_rest["rss_mb"],
        "growth": {},
    }
    verdicts = {
        "drain": metrics["drain_vs_limit"] >= 0.5,
        "latency_p50": empty.p50 <= 5.0,
        "latency_p99": empty.p99 <= 25.0,
        "helper_startup": helper_ratio <= 1.5,
        "idle_cpu": at_rest["cpu_pct"] <= 0.2,
        "idle_rss": at_rest["rss_mb"] <= 60.0,
    }
    for run in runs[1:]:
        growth = {
            "drain_copies_per_s": run.drain.copies_per_s,
            "drain_vs_empty": run.drain.copies_per_s / empty.drain.copies_per_s,
            "latency_p50_ms": run.p50,
            "p50_vs_empty": run.p50 / empty.p50,
            "latency_p99_ms": run.p99,
            "p99_vs_empty": run.p99 / empty.p99,
        }
        metrics["growth"][str(run.history)] = growth
        verdicts[f"growth_{run.history}_drain"] = growth["drain_vs_empty"] >= 1 / GROWTH_TOLERANCE
        verdicts[f"growth_{run.history}_p50"] = _flat(run.p50, empty.p50)
        verdicts[f"growth_{run.history}_p99"] = _flat(run.p99, empty.p99)
    return {"metrics": metrics, "verdicts": verdicts, "all_pass": all(verdicts.values())}


def _flat(value_ms: float, empty_ms: float) -> bool:
    return value_ms <= empty_ms * GROWTH_TOLERANCE or value_ms - empty_ms <= GROWTH_SLACK_MS


# --- rendering ---------------------------------------------------------------------------


Row = tuple[str, str, str, str]  # measurement, value, target, verdict


def render(info: dict[str, Any], sizes: Sizes, result: dict[str, Any]) -> str:
    """The readable report: machine, one row per figure with its target and verdict."""
    rows = _rows(result["metrics"], result["verdicts"], sizes)
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    header = [
        f"handoffd bench  {info['date']}",
        f"machine: {info['uname']}, {info['cpus']} CPUs ({info['cpu_model']}), {info['python']}",
        f"temp dir: {info['temp_dir']} on {info['filesystem']}",
        f"sizes: {asdict(sizes)}",
        "",
    ]
    table = [("measurement", "value", "target", "verdict"), *rows]
    lines = [
        f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
        for a, b, c, d in table
    ]
    footer = [
        "",
        "drain: timed from the daemon log's `started` to its last `delivered` event;",
        "latency: from the rename into outbox/ until both copies appear in inbox/new/ (inotify);",
        f"growth: flat = within {GROWTH_TOLERANCE}x of the empty-history figure (latencies: "
        f"or within {GROWTH_SLACK_MS:g} ms of it).",
        f"overall: {'PASS' if result['all_pass'] else 'MISS'}",
    ]
    return "\n".join(header + lines + footer)


def _rows(m: dict[str, Any], verdicts: dict[str, bool], sizes: Sizes) -> list[Row]:
    def row(label: str, value: str, target: str = "", key: str = "") -> Row:
        return label, value, target, ("PASS" if verdicts[key] else "MISS") if key else ""

    rows = [
        row("1 disk limit: write+fsync+rename+dir fsync", f"{m['disk_limit_files_per_s']:,.0f}/s"),
        row(f"2 drain {m['drain_copies']:,} copies (pass)", f"{m['drain_copies_per_s']:,.0f}/s"),
        row("  drain / disk limit", f"{m['drain_vs_limit']:.2f}x", ">= 0.5x", "drain"),
        row("  pass / run --once wall", f"{m['drain_pass_s']:.2f} s / {m['drain_wall_s']:.2f} s"),
        row(f"3 pickup p50 ({m['latency_samples']} samples)", f"{m['latency_p50_ms']:.2f} ms",
            "<= 5 ms", "latency_p50"),
        row("  pickup p99", f"{m['latency_p99_ms']:.2f} ms", "<= 25 ms", "latency_p99"),
        row("  pickup max", f"{m['latency_max_ms']:.2f} ms"),
        row("4 ready_for_next start-up, median", f"{m['helper_median_ms']:.1f} ms"),
        row("  python -c pass, median", f"{m['python_median_ms']:.1f} ms"),
        row("  helper / python", f"{m['helper_vs_python']:.2f}x", "<= 1.5x", "helper_startup"),
        row(f"5 idle CPU over {sizes.idle_seconds:g} s", f"{m['idle_cpu_pct']:.3f} %",
            "<= 0.2 %", "idle_cpu"),
        row("  idle RSS", f"{m['idle_rss_mb']:.1f} MB", "<= 60 MB", "idle_rss"),
    ]  # fmt: skip
    for history, g in m["growth"].items():
        n, key = f"{int(history):,}", f"growth_{history}"
        rows += [
            row(f"6 history {n}: drain", f"{g['drain_copies_per_s']:,.0f}/s "
                f"({g['drain_vs_empty']:.2f}x)", f">= {1 / GROWTH_TOLERANCE:.2f}x", key + "_drain"),
            row(f"  history {n}: pickup p50", f"{g['latency_p50_ms']:.2f} ms "
                f"({g['p50_vs_empty']:.2f}x)", "flat", key + "_p50"),
            row(f"  history {n}: pickup p99", f"{g['latency_p99_ms']:.2f} ms "
                f"({g['p99_vs_empty']:.2f}x)", "flat", key + "_p99"),
        ]  # fmt: skip
    return rows


def _progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


@click.command()
@click.option("--quick", is_flag=True, help="Tiny sizes: checks the benchmark runs, not speed.")
@click.option("--handoffs", type=click.IntRange(1), help="Backlog size (2 copies each) [1000].")
@click.option("--latency-samples", type=click.IntRange(1), help="Pickup samples [200].")
@click.option("--idle-seconds", type=click.FloatRange(0.5), help="Idle window [15].")
@click.option("--startup-runs", type=click.IntRange(1), help="Runs of each command [20].")
@click.option("--limit-files", type=click.IntRange(1), help="Files of the disk-limit loop [2000].")
@click.option("--history", "histories", type=click.IntRange(1), multiple=True,
              help="History sizes for the growth runs, repeatable [10000, 50000].")  # fmt: skip
@click.option("--dir", "directory", type=click.Path(file_okay=False), help="Where to build.")
@click.option("--json-only", is_flag=True, help="Print only the JSON line.")
@click.option("--keep", is_flag=True, help="Keep the temp dir.")
def main(quick: bool, directory: str | None, json_only: bool, keep: bool, **given: Any) -> None:
    """Measure the disk's limit, drain, pickup latency, start-up, idle cost and growth."""
    sizes = QUICK if quick else Sizes()
    chosen = {key: value for key, value in given.items() if value not in (None, ())}
    if "histories" in chosen:
        chosen["histories"] = tuple(chosen["histories"])
    sizes = Sizes(**{**asdict(sizes), **chosen})
    base = tempfile.mkdtemp(prefix="handoffd-bench-", dir=directory)
    try:
        info = machine(base)
        result = measure(base, sizes)
    except BenchError as error:
        raise click.ClickException(str(error)) from None
    finally:
        if keep:
            _progress(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    if not json_only:
        click.echo(render(info, sizes, result))
    click.echo(json.dumps({**info, "sizes": asdict(sizes), **result}, sort_keys=True))
