"""`handoffd bench --swarm`: what an idle swarm costs the machine as it grows.

Swarms of 2 and of 32 roles, each role with a tmux session of its own (a quiet program:
`cat`), each with mail waiting: one handoff from `lead` to every role, delivered and its
wake-up typed, then nothing taken, so every rescan finds mail waiting and looks at every
pane.  Each swarm has its daemon, started as `handoffd start` starts it.  Once every
wake-up is typed and the passes have settled, the CPU each swarm costs is measured over
an idle window: the daemon's own time, its tmux calls' (the children it reaped) and its
tmux server's, from /proc (clock ticks).  Windows alternate between the sizes (2, 32, 32,
2, ...), so a drifting machine affects both alike.

Targets: 32 panes at most 1.0 % of a core, 2 panes at most 0.5 %.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import table
from benchmarks.fanout import BODY, handoffd
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from handoffd.core import durable
from handoffd.core.config import Box
from testbed import Seat, handoff_id, make_project, queued

SENDER = "lead"
QUIET = "stty -echo; echo READY; exec cat"
TARGETS = {2: 0.5, 32: 1.0}  # % of one core, by the swarm's size
SETTLE_S = 4.0  # seconds after the last wake-up before a window starts: rescans settle


@dataclass
class SwarmSizes:
    swarms: tuple[int, ...] = (2, 32)
    idle_seconds: float = 20.0
    windows: int = 2  # idle windows per swarm, alternating between the swarms


@dataclass
class Swarm:
    """One swarm: its project, its tmux server, its daemon, and what each window measured."""

    size: int
    root: str
    socket: str
    daemon_pid: int = 0
    server_pid: int = 0
    windows: list[dict[str, float]] = field(default_factory=list)

    @property
    def roles(self) -> list[str]:
        return [f"r{n:02d}" for n in range(self.size)]

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-S", self.socket, "-f", os.devnull, *args],
                              capture_output=True, text=True, timeout=10, check=False)  # fmt: skip


def build_swarm(base: str, size: int) -> Swarm:
    """The project (lead and `size` roles, a worktree and a tmux session each) and its
    server; nothing running in it yet."""
    roles = [f"r{n:02d}" for n in range(size)]
    seats = [Seat(SENDER, f"wt/{SENDER}", session=""), *(
        Seat(role, f"wt/{role}", session=f"bench-{role}") for role in roles)]  # fmt: skip
    root = os.path.join(base, f"swarm-{size}")
    make_project(Path(root), seats)
    socket = os.path.join(tempfile.mkdtemp(prefix="hds-", dir="/tmp"), "s")  # short: a socket
    with open(os.path.join(root, ".swarmforge", "tmux-socket"), "w") as file:
        file.write(socket + "\n")
    for folder in (
        os.path.join(root, ".swarmforge", "daemon"),
        os.path.join(root, "wt", SENDER, ".swarmforge", "handoffs", Box.DRAFTS),
    ):
        os.makedirs(folder, exist_ok=True)  # fmt: skip
    return Swarm(size, root, socket)


def start(swarm: Swarm) -> None:
    """Sessions up, the daemon started, the mail delivered and every wake-up typed."""
    for role in swarm.roles:
        swarm.tmux("new-session", "-d", "-s", f"bench-{role}", "-x", "120", "-y", "30",
                   "sh", "-c", QUIET)  # fmt: skip
    swarm.server_pid = int(swarm.tmux("display-message", "-p", "#{pid}").stdout.strip() or 0)
    time.sleep(0.5)  # every program is up
    started = handoffd("start", swarm.root)
    if started.returncode != 0:
        raise BenchError(f"handoffd start failed: {started.stderr}")
    with open(os.path.join(swarm.root, ".swarmforge", "daemon", "handoffd.pid")) as file:
        swarm.daemon_pid = int(file.read())
    _send(swarm)
    deadline = time.monotonic() + 60
    while _typed(swarm) < swarm.size:
        if time.monotonic() > deadline:
            raise BenchError(f"{swarm.size}-role swarm: not every wake-up was typed in 60 s")
        time.sleep(0.2)


def _send(swarm: Swarm) -> None:
    """One handoff from lead to every role, as swarm_handoff queues it."""
    name, handoff = queued(handoff_id(SENDER, 1), SENDER, swarm.roles, BODY,
                           ("type", "note"), ("message", "benchmark"))  # fmt: skip
    outbox = os.path.join(swarm.root, "wt", SENDER, ".swarmforge", "handoffs")
    temp = os.path.join(outbox, Box.DRAFTS, f".{name}.tmp")
    durable.create(temp, handoff.render())
    os.link(temp, os.path.join(outbox, Box.OUTBOX, name))
    os.unlink(temp)


def _typed(swarm: Swarm) -> int:
    """Wake-ups the daemon's log says it typed."""
    try:
        with open(os.path.join(swarm.root, ".swarmforge", "daemon", "handoffd.log"), "rb") as f:
            return sum(1 for line in f if json.loads(line).get("event") == "wake")
    except (OSError, ValueError):
        return 0


def stop(swarm: Swarm) -> None:
    handoffd("stop", swarm.root)
    swarm.tmux("kill-server")
    shutil.rmtree(os.path.dirname(swarm.socket), ignore_errors=True)


def window(swarm: Swarm, seconds: float) -> dict[str, float]:
    """% of one core over `seconds`: the daemon's own, its reaped tmux calls', the tmux
    server's."""
    pids = (swarm.daemon_pid, swarm.server_pid)
    before, started = [_ticks(pid) for pid in pids], time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    after = [_ticks(pid) for pid in pids]
    hz = os.sysconf("SC_CLK_TCK")
    share = [[100 * (a - b) / hz / elapsed for a, b in zip(x, y, strict=True)]
             for x, y in zip(after, before, strict=True)]  # fmt: skip
    own, children, server = share[0][0], share[0][1], share[1][0] + share[1][1]
    return {"daemon_pct": own, "tmux_calls_pct": children, "server_pct": server,
            "total_pct": own + children + server}  # fmt: skip


def _ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) of `pid`: its own CPU and that of its reaped children."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        fields = file.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


class IdleSwarm(Scenario[SwarmSizes, list[Swarm], list[Swarm]]):
    name, key = "swarm", "swarm"
    full, quick = SwarmSizes(), SwarmSizes(swarms=(2, 4), idle_seconds=2.0, windows=1)
    tunable = ("idle_seconds",)

    def build(self, base: str, sizes: SwarmSizes) -> list[Swarm]:
        made = []
        for size in sizes.swarms:
            progress(f"swarm: laying out {size} roles with a tmux session each")
            made.append(build_swarm(base, size))
        return made

    def measure(self, built: list[Swarm], sizes: SwarmSizes) -> list[Swarm]:
        return measure(built, sizes.windows, sizes.idle_seconds)

    def figures(self, measured: list[Swarm], sizes: SwarmSizes) -> dict[str, Any]:
        return figures(measured)

    def targets(self, figures: Any) -> list[Target]:
        return targets(figures)

    def render(self, report: Report) -> str:
        rows = section(report.figures, table.Rows(report), "")
        return table.render(report, rows, NOTES, bytecode=False)


def measure(built: list[Swarm], windows: int, seconds: float) -> list[Swarm]:
    """Every swarm started, then `windows` idle windows each, alternating; all stopped."""
    try:
        for swarm in built:
            progress(f"swarm: {swarm.size} roles: daemon, mail to every role, its wake-ups")
            start(swarm)
        time.sleep(SETTLE_S)
        order = [s for n in range(windows) for s in (built if n % 2 == 0 else built[::-1])]
        for swarm in order:
            progress(f"swarm: {swarm.size} panes with mail waiting, idle for {seconds:g} s")
            swarm.windows.append(window(swarm, seconds))
    finally:
        for swarm in built:
            stop(swarm)
    return built


def figures(measured: list[Swarm]) -> dict[str, Any]:
    """Per swarm size: the median of its windows, each part, and every window's total."""
    found: dict[str, Any] = {}
    for swarm in measured:
        parts = {key: statistics.median(w[key] for w in swarm.windows)
                 for key in swarm.windows[0]}  # fmt: skip
        found[str(swarm.size)] = {**parts, "windows_pct": [w["total_pct"] for w in swarm.windows]}
    return found


def targets(figures: dict[str, Any]) -> list[Target]:
    return [
        Target(
            f"swarm_{size}_cpu", one["total_pct"], "<=", TARGETS.get(int(size), 1.0), " %", ".1f"
        )
        for size, one in figures.items()
    ]


def section(f: dict[str, Any], row: table.Rows, number: str) -> list[table.Row]:
    """The rows of each swarm size (`number`: the section's number in the full run)."""
    rows: list[table.Row] = []
    for size, one in f.items():
        windows = ", ".join(f"{pct:.3f}" for pct in one["windows_pct"])
        rows += [
            row(f"{number}idle swarm of {size} panes, mail waiting: CPU",
                f"{one['total_pct']:.3f} %", f"swarm_{size}_cpu"),
            row("  daemon / its tmux calls / tmux server",
                f"{one['daemon_pct']:.3f} / {one['tmux_calls_pct']:.3f} / "
                f"{one['server_pct']:.3f} %"),
            row("  each window (total)", f"{windows} %"),
        ]  # fmt: skip
        number = " " * len(number)
    return rows


NOTES = (
    "idle swarm: each role has a tmux session running `cat` and one handoff waiting, its",
    "  wake-up typed and unanswered; CPU = the daemon's own time + its reaped tmux calls +",
    "  its tmux server's, from /proc/<pid>/stat (10 ms ticks) over each idle window; the",
    "  median of the windows, which alternate between the sizes.",
)
