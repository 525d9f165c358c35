"""`--panes`: delivery latency while every recipient's pane is busy (docs/protocol.md §14).

A wake-up waits on its role's thread until the pane goes quiet, reading the pane a few
times a second.  That waiting must cost deliveries nothing: `lead` sends each handoff to
ten roles whose tmux panes redraw every 100 ms (so no wake-up may be typed), and the
pickup latency is compared with the same project whose panes are quiet (`cat`).  Each
phase has a daemon of its own, started as `handoffd start` starts it (the defaults:
--idle-after 2, --idle-wait 300).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import table
from benchmarks.fanout import BODY, handoffd
from benchmarks.measures import IN_MOVED_TO, TIMEOUT, Inotify, until_seen
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from benchmarks.table import percentile
from handoffd.core import durable
from handoffd.core.config import Box
from testbed import Seat, handoff_id, make_project, queued

SENDER = "lead"
SPACING = 0.02  # seconds between samples, so each is a pass of its own
# A pane that never goes quiet: a counter redrawn every 100 ms.
REDRAW = "import time\nn = 0\nwhile True:\n    n += 1\n    print(f'\\rworking {n}', end='', flush=True)\n    time.sleep(0.1)\n"  # noqa: E501
QUIET = "stty -echo; echo READY; exec cat"
SLOWER_BY = 2.0  # busy panes may cost at most this factor on the quiet p50 ...
SLACK_MS = 2.0  # ... plus this much (sub-millisecond noise on a shared machine)


@dataclass
class PanesSizes:
    panes: int = 10
    latency_samples: int = 100


@dataclass
class Phase:
    """One phase: its panes' program and what it measured."""

    name: str
    latencies_ms: list[float] = field(default_factory=list)
    typed: int = 0  # `wake` lines the daemon logged: wake-ups typed into these panes


class Built:
    """The project (lead and N recipients, each with a tmux session) and its tmux server."""

    def __init__(self, base: str, panes: int) -> None:
        self.recipients = [f"r{n:02d}" for n in range(panes)]
        seats = [Seat(role, f"wt/{role}", session=f"bench-{role}")
                 for role in (SENDER, *self.recipients)]  # fmt: skip
        self.root = os.path.join(base, "project")
        self.project = make_project(Path(self.root), seats)
        self.sequence = 0
        self.tmux_dir = tempfile.mkdtemp(prefix="hdb-", dir="/tmp")  # a socket path is short
        self.socket = os.path.join(self.tmux_dir, "s")
        with open(os.path.join(self.root, ".swarmforge", "tmux-socket"), "w") as file:
            file.write(self.socket + "\n")
        os.makedirs(self.path(SENDER, Box.DRAFTS), exist_ok=True)
        os.makedirs(os.path.join(self.root, ".swarmforge", "daemon"), exist_ok=True)

    def path(self, role: str, box: str, *names: str) -> str:
        return os.path.join(self.project.box(role, box), *names)

    def tmux(self, *args: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "-f", os.devnull, *args],
                       capture_output=True, timeout=10, check=False)  # fmt: skip

    def sessions(self, command: list[str]) -> None:
        """A session per recipient running `command` (the old ones gone first)."""
        self.tmux("kill-server")
        for role in self.recipients:
            self.tmux("new-session", "-d", "-s", f"bench-{role}", "-x", "120", "-y", "30",
                      *command)  # fmt: skip
        time.sleep(0.5)  # every program is up and drawing

    def close(self) -> None:
        self.tmux("kill-server")
        shutil.rmtree(self.tmux_dir, ignore_errors=True)


class Panes(Scenario[PanesSizes, Built, list[Phase]]):
    name, key = "panes", "panes"
    full, quick = PanesSizes(), PanesSizes(panes=3, latency_samples=10)
    tunable = ("latency_samples",)

    def build(self, base: str, sizes: PanesSizes) -> Built:
        return Built(base, sizes.panes)

    def measure(self, built: Built, sizes: PanesSizes) -> list[Phase]:
        phases = [Phase("quiet"), Phase("busy")]
        programs = {"quiet": ["sh", "-c", QUIET], "busy": [sys.executable, "-c", REDRAW]}
        try:
            for phase in phases:
                progress(f"{sizes.panes} {phase.name} panes: {sizes.latency_samples} samples")
                built.sessions(programs[phase.name])
                _measure(built, phase, sizes.latency_samples)
        finally:
            built.close()
        return phases

    def figures(self, measured: list[Phase], sizes: PanesSizes) -> dict[str, Any]:
        figures: dict[str, Any] = {"panes": sizes.panes}
        for phase in measured:
            figures[f"{phase.name}_p50_ms"] = percentile(phase.latencies_ms, 0.5)
            figures[f"{phase.name}_p99_ms"] = percentile(phase.latencies_ms, 0.99)
            figures[f"{phase.name}_max_ms"] = max(phase.latencies_ms)
            figures[f"{phase.name}_typed"] = phase.typed
        return figures

    def targets(self, figures: Any) -> list[Target]:
        bound = figures["quiet_p50_ms"] * SLOWER_BY + SLACK_MS
        return [
            Target("busy_p50", figures["busy_p50_ms"], "<=", bound, " ms", ".1f"),
            Target("busy_typed", figures["busy_typed"], "<=", 0, "", "g", "0"),
        ]

    def render(self, report: Report) -> str:
        f, row = report.figures, table.Rows(report)
        rows = [
            row("quiet panes: pickup p50 / p99 / max",
                f"{f['quiet_p50_ms']:.2f} / {f['quiet_p99_ms']:.2f} / {f['quiet_max_ms']:.2f} ms"),
            row("busy panes: pickup p50 / p99 / max",
                f"{f['busy_p50_ms']:.2f} / {f['busy_p99_ms']:.2f} / {f['busy_max_ms']:.2f} ms"),
            row("busy panes: pickup p50 against quiet", f"{f['busy_p50_ms']:.2f} ms", "busy_p50"),
            row("quiet panes: wake-ups typed", str(f["quiet_typed"])),
            row("busy panes: wake-ups typed", str(f["busy_typed"]), "busy_typed"),
        ]  # fmt: skip
        notes = (
            f"pickup: from the handoff's arrival in outbox/ until all {f['panes']} copies appear",
            "  in inbox/new/ (inotify), one handoff at a time, with a running daemon. Busy panes",
            "  redraw every 100 ms, so each role's wake-up waits (reading its pane every 0.5 s,",
            "  then slower) for the whole phase; quiet panes run `cat` and get theirs at once.",
            f"target: busy p50 <= {SLOWER_BY:g} x quiet p50 + {SLACK_MS:g} ms; no wake-up typed",
            "  into a busy pane.",
        )
        return table.render(report, rows, notes, bytecode=False)


def _measure(built: Built, phase: Phase, samples: int) -> None:
    """Start a daemon, take `samples` pickups, stop it; count the wake-ups it typed."""
    log = os.path.join(built.root, ".swarmforge", "daemon", "handoffd.log")
    if os.path.exists(log):
        os.unlink(log)
    started = handoffd("start", built.root)
    if started.returncode != 0:
        raise BenchError(f"handoffd start failed: {started.stderr}")
    inotify = Inotify()
    try:
        for role in built.recipients:
            inotify.watch(built.path(role, Box.NEW), IN_MOVED_TO)
        for _ in range(samples):
            phase.latencies_ms.append(_pickup(built, inotify) * 1000)
            time.sleep(SPACING)
        time.sleep(3.0)  # past --idle-after: quiet panes have their wake-ups by now
    finally:
        inotify.close()
        handoffd("stop", built.root)
    with open(log, encoding="utf-8") as file:
        phase.typed = sum(1 for line in file if json.loads(line).get("event") == "wake")


def _pickup(built: Built, inotify: Inotify) -> float:
    """One handoff linked into lead's outbox (prepared untimed); seconds until every copy."""
    built.sequence += 1
    name, handoff = queued(handoff_id(SENDER, built.sequence), SENDER, built.recipients, BODY,
                           ("type", "note"), ("message", "benchmark"))  # fmt: skip
    temp = built.path(SENDER, Box.DRAFTS, f".{name}.tmp")
    durable.create(temp, handoff.render())
    waiting = {(built.path(role, Box.NEW), name) for role in built.recipients}
    started = time.perf_counter()
    os.link(temp, built.path(SENDER, Box.OUTBOX, name))
    os.unlink(temp)
    elapsed = until_seen(inotify, waiting, started, name)
    deadline = time.monotonic() + TIMEOUT
    while os.path.lexists(built.path(SENDER, Box.OUTBOX, name)):  # the pass ends
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not finish its pass: {name}")
        time.sleep(0.0005)
    for role in built.recipients:
        for entry in os.listdir(built.path(role, Box.NEW)):
            os.unlink(built.path(role, Box.NEW, entry))
    return elapsed
