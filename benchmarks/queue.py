"""The full run (`handoffd bench`): what this machine's disk allows, and how close the queue
gets to it; and `--pickup`, its pickup section alone.

One run measures, side by side:

1. the disk's durable-write limit: temp write + fsync + rename + directory fsync, run just
   before and just after each drain;
2. a backlog drain through `handoffd run --once`, timed from the daemon's own log
   (`started` to the last `delivered`) and, for reference, as process wall time;
3. pickup latency of a running daemon, for swarm_handoff's writer and a plain one;
4. helper start-up (`benchmarks.startup`);
5. the daemon at rest: CPU share from /proc/<pid>/stat and its RSS;
6. (2) and (3) again with a long history in `completed/` and `sent/`;
7. `handoffd status` against its floor on the board's project (`benchmarks.board`);
8. an idle swarm of 2 and of 32 panes with mail waiting (`benchmarks.swarm`).

A shared machine's disk changes speed several-fold within minutes, so the history sizes
are measured interleaved and the drain is judged as a share of the limit measured around
it: compare ratios, not absolute figures.

Targets: a drain at half the disk's limit or better, pickup within 5 ms (p50) and 25 ms
(p99) for both writers, a helper within 1.5x of `python -c pass` (on an empty inbox and
taking work), an idle daemon under 0.2 % of a CPU and 60 MB, figures that stay flat as
history grows, `handoffd status` within 3x its floor, and an idle swarm within 0.5 % of a
CPU with 2 panes and 1.0 % with 32.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks import board, measures, startup, swarm, table
from benchmarks.fanout import Fanout
from benchmarks.measures import AtRest, Drain
from benchmarks.scenario import Report, Scenario, Target, progress
from benchmarks.table import percentile

GROWTH_TOLERANCE = 1.5  # "flat": within 1.5x of the empty-history figure ...
GROWTH_SLACK_MS = 1.0  # ... or, for latencies, within 1 ms of it (sub-ms noise)
PICKUP_P50_MS, PICKUP_P99_MS = 5.0, 25.0


@dataclass
class QueueSizes:
    handoffs: int = 1000
    latency_samples: int = 200
    idle_seconds: float = 15.0
    startup_runs: int = 20
    limit_files: int = 1000  # before and after each drain
    histories: tuple[int, ...] = (10_000, 50_000)
    board_cards: int = 1000  # section 7: the board's project
    board_history: int = 50_000
    board_rounds: int = 9
    swarms: tuple[int, ...] = (2, 32)  # section 8: panes of each idle swarm
    swarm_windows: int = 2


@dataclass
class PickupSizes:
    latency_samples: int = 200


@dataclass
class History:
    """What one history size measured.  Every history size gets the same measurements,
    interleaved with the others', so a disk that drifts during the run affects all alike."""

    history: int  # old files in each recipient's completed/ and the sender's sent/
    project: Fanout
    limits: list[float] = field(default_factory=list)  # files/s, before and after each drain
    drains: list[Drain] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)  # queued as swarm_handoff does
    plain_ms: list[float] = field(default_factory=list)  # written and renamed, nothing more
    at_rest: AtRest | None = None
    startup: startup.Startup | None = None

    @property
    def limit(self) -> float:
        return statistics.fmean(self.limits)

    @property
    def copies_per_s(self) -> float:
        """All copies over all drain time."""
        return sum(d.copies for d in self.drains) / sum(d.pass_s for d in self.drains)


# --- the full run ------------------------------------------------------------------------


@dataclass
class Built:
    """The full run's projects: one per history size, the board's, the idle swarms."""

    runs: list[History]
    board: board.Layout
    swarms: list[swarm.Swarm]
    command: dict[str, float] = field(default_factory=dict)  # section 7's figures


class Queue(Scenario[QueueSizes, Built, Built]):
    name, key = "queue", "metrics"
    full = QueueSizes()
    quick = QueueSizes(handoffs=50, latency_samples=20, idle_seconds=2.0, startup_runs=3,
                       limit_files=50, histories=(500,), board_cards=60, board_history=500,
                       board_rounds=3, swarms=(2, 4), swarm_windows=1)  # fmt: skip
    tunable = ("handoffs", "latency_samples", "idle_seconds", "startup_runs", "limit_files",
               "histories", "board_cards", "board_history", "swarms")  # fmt: skip

    def build(self, base: str, sizes: QueueSizes) -> Built:
        """One project per history size (none first), its history laid out; the board's
        project; a project and a tmux server per idle swarm."""
        runs = []
        for history in (0, *sizes.histories):
            progress(f"history {history:,}: {history:,} old files per folder")
            project = Fanout(os.path.join(base, f"history-{history}"))
            project.fill_history(history)
            runs.append(History(history, project))
        progress(f"board: {sizes.board_cards:,} open cards, {sizes.board_history:,} of history")
        layout = board.Layout(os.path.join(base, "board"), sizes.board_cards, sizes.board_history)
        layout.build(time.time())
        swarms = [swarm.build_swarm(base, size) for size in sizes.swarms]
        return Built(runs, layout, swarms)

    def measure(self, built: Built, sizes: QueueSizes) -> Built:
        """Sections 1 to 6 (`_queue`), then the board's command, then the idle swarms."""
        _queue(built.runs, sizes)
        progress(f"board: handoffd status against its floor, {sizes.board_rounds} rounds")
        built.command = board.command_ratio(built.board, sizes.board_rounds)
        swarm.measure(built.swarms, sizes.swarm_windows, sizes.idle_seconds)
        return built

    def figures(self, measured: Built, sizes: QueueSizes) -> dict[str, Any]:
        return {**_figures(measured.runs), "board": measured.command,
                "swarm": swarm.figures(measured.swarms)}  # fmt: skip

    def targets(self, figures: Any) -> list[Target]:
        return [*_targets(figures), board.command_target(figures["board"]["command_vs_floor"]),
                *swarm.targets(figures["swarm"])]  # fmt: skip

    def render(self, report: Report) -> str:
        return table.render(report, _rows(report), NOTES)


def _queue(built: list[History], sizes: QueueSizes) -> list[History]:
    """Drains in A B C C B A order, each between two disk-limit runs; then pickup samples
    in turn from one running daemon per size; then the empty-history daemon at rest, and
    helper start-up in that project."""
    base = os.path.dirname(built[0].project.root)
    for n, run in enumerate(built + built[::-1]):
        progress(f"history {run.history:,}: disk limit, drain of {sizes.handoffs:,} x 2")
        limit = os.path.join(base, f"limit-{n}")
        run.limits.append(measures.disk_limit(limit + "-a", sizes.limit_files))
        run.drains.append(measures.drain(run.project, sizes.handoffs))
        run.limits.append(measures.disk_limit(limit + "-b", sizes.limit_files))
    projects = [run.project for run in built]
    try:
        pids = [measures.start(project) for project in projects]
        progress(f"{sizes.latency_samples} pickup samples per history size and writer")
        for run, samples in zip(built, measures.latency(projects, sizes.latency_samples),
                                strict=True):  # fmt: skip
            run.latencies_ms, run.plain_ms = _in_ms(samples)
        for project in projects[1:]:
            measures.stop(project)
        progress(f"daemon at rest for {sizes.idle_seconds:g} s")
        time.sleep(1.0)  # let the last pass and its log writes settle
        built[0].at_rest = measures.idle(pids[0], sizes.idle_seconds)
        built[0].startup = startup.measure(built[0].project, sizes.startup_runs)
    finally:
        for project in projects:
            measures.stop(project)
    return built


def _figures(measured: list[History]) -> dict[str, Any]:
    """Every figure; `measured[0]` has no history."""
    empty, rest, helpers = measured[0], measured[0].at_rest, measured[0].startup
    assert rest is not None and helpers is not None, "the empty run measures them"
    m: dict[str, Any] = {
        "disk_limit_files_per_s": empty.limit,
        "disk_limit_runs": empty.limits,
        "drain_copies": empty.drains[0].copies,
        "drain_runs": len(empty.drains),
        "drain_pass_s": [d.pass_s for d in empty.drains],
        "drain_wall_s": [d.wall_s for d in empty.drains],
        "drain_copies_per_s": empty.copies_per_s,
        "drain_vs_limit": empty.copies_per_s / empty.limit,
        **pickup(empty),
        **startup.figures(helpers),
        "idle_cpu_pct": rest.cpu_pct,
        "idle_cpu_pct_schedstat": rest.cpu_pct_ns,
        "idle_rss_mb": rest.rss_mb,
        "idle_threads": rest.threads,
        "growth": {str(run.history): _growth(run, empty) for run in measured[1:]},
    }
    m["latency_p50_in_limit_periods"] = m["latency_p50_ms"] * empty.limit / 1000
    return m


def _targets(figures: Any) -> list[Target]:
    m = figures
    found = [
        Target("drain", m["drain_vs_limit"], ">=", 0.5, "x"),
        *pickup_targets(m),
        *startup.targets(m),
        Target("idle_cpu", m["idle_cpu_pct"], "<=", 0.2, " %"),
        Target("idle_rss", m["idle_rss_mb"], "<=", 60.0, " MB"),
    ]
    for history, g in m["growth"].items():
        key = f"growth_{history}"
        found.append(Target(key + "_drain", g["drain_vs_empty"], ">=",
                            1 / GROWTH_TOLERANCE, "x", ".2f"))  # fmt: skip
        for p in ("p50", "p99"):
            empty_ms = m[f"latency_{p}_ms"]
            flat = max(empty_ms * GROWTH_TOLERANCE, empty_ms + GROWTH_SLACK_MS)
            found.append(Target(f"{key}_{p}", g[f"latency_{p}_ms"], "<=", flat, shown="flat"))
    return found


def _growth(run: History, empty: History) -> dict[str, float]:
    """A history run against the empty one.  The drain is compared as a share of the disk
    limit measured around it, since the disk itself drifts between runs."""
    p50, p99 = percentile(run.latencies_ms, 0.5), percentile(run.latencies_ms, 0.99)
    share, empty_share = run.copies_per_s / run.limit, empty.copies_per_s / empty.limit
    return {
        "disk_limit_files_per_s": run.limit,
        "drain_copies_per_s": run.copies_per_s,
        "drain_vs_limit": share,
        "drain_vs_empty": share / empty_share,
        "drain_raw_vs_empty": run.copies_per_s / empty.copies_per_s,
        "latency_p50_ms": p50,
        "p50_vs_empty": p50 / percentile(empty.latencies_ms, 0.5),
        "latency_p99_ms": p99,
        "p99_vs_empty": p99 / percentile(empty.latencies_ms, 0.99),
    }


def _in_ms(samples: list[list[float]]) -> list[list[float]]:
    return [[seconds * 1000 for seconds in times] for times in samples]


# --- pickup alone ------------------------------------------------------------------------


class Pickup(Scenario[PickupSizes, History, History]):
    """`--pickup`: section 3 alone, both writers from one daemon, no history."""

    name, key = "pickup", "metrics"
    full, quick = PickupSizes(), PickupSizes(latency_samples=20)
    tunable = ("latency_samples",)

    def build(self, base: str, sizes: PickupSizes) -> History:
        return History(0, Fanout(os.path.join(base, "pickup")))

    def measure(self, built: History, sizes: PickupSizes) -> History:
        try:
            measures.start(built.project)
            progress(f"{sizes.latency_samples} pickup samples per writer")
            (samples,) = measures.latency([built.project], sizes.latency_samples)
            built.latencies_ms, built.plain_ms = _in_ms(samples)
        finally:
            measures.stop(built.project)
        return built

    def figures(self, measured: History, sizes: PickupSizes) -> dict[str, Any]:
        return pickup(measured)

    def targets(self, figures: Any) -> list[Target]:
        return pickup_targets(figures)

    def render(self, report: Report) -> str:
        rows = _pickup_rows(report.figures, table.Rows(report))
        return table.render(report, rows, PICKUP_NOTES, bytecode=False)


def pickup(run: History) -> dict[str, Any]:
    """Section 3's figures: both writers' pickup percentiles (`plain_`: write, rename)."""
    return {
        "latency_samples": len(run.latencies_ms),
        "latency_p50_ms": percentile(run.latencies_ms, 0.5),
        "latency_p99_ms": percentile(run.latencies_ms, 0.99),
        "latency_max_ms": max(run.latencies_ms),
        "plain_p50_ms": percentile(run.plain_ms, 0.5),
        "plain_p99_ms": percentile(run.plain_ms, 0.99),
        "plain_max_ms": max(run.plain_ms),
    }


def pickup_targets(m: dict[str, Any]) -> list[Target]:
    return [
        Target(f"{writer}_{p}", m[f"{writer}_{p}_ms"], "<=", bound, " ms")
        for writer in ("latency", "plain")
        for p, bound in (("p50", PICKUP_P50_MS), ("p99", PICKUP_P99_MS))
    ]


# --- the table ---------------------------------------------------------------------------

PICKUP_NOTES = (
    "pickup: from the handoff's arrival in outbox/ until both copies appear in inbox/new/",
    "  (inotify), one handoff at a time, each its own pass, taken in turn from each size's",
    "  daemon: as swarm_handoff queues it (fsynced in outbox/tmp/, then linked), and as a",
    "  plain writer does (written in outbox/tmp/ without fsync, then renamed).",
)
NOTES = (
    "disk limit: one file at a time, temp write + fsync + rename + directory fsync, 500 B,",
    "  run before and after each drain; a limit period is 1/limit.",
    "drain: timed from the daemon log's `started` to its last `delivered` event; each",
    "  history size drains twice, in A B C C B A order.",
    *PICKUP_NOTES,
    f"growth: flat = drain share of the disk limit within {GROWTH_TOLERANCE}x of the empty "
    f"run's, latencies within {GROWTH_TOLERANCE}x or {GROWTH_SLACK_MS:g} ms of it.",
    "stat ticks: the daemon's CPU time (utime + stime in /proc/<pid>/stat), counted in",
    "  clock ticks (10 ms on Linux) over the idle window; schedstat: the same in ns.",
    "disk-limit periods: pickup p50 divided by one limit period (1/disk limit): how many",
    "  durable one-file writes the same time would allow.",
    "board: the installed `handoffd status`, a process of its own, against the floor (read",
    "  every open card's header block, list every completed/ once) in the same project:",
    "  6 roles, open cards of every colour in chains 5 deep, history; medians, interleaved.",
    *swarm.NOTES,
)


def _pickup_rows(m: dict[str, Any], row: table.Rows) -> list[table.Row]:
    return [
        row(f"3 pickup p50, swarm_handoff ({m['latency_samples']} samples)",
            f"{m['latency_p50_ms']:.2f} ms", "latency_p50"),
        row("  pickup p99", f"{m['latency_p99_ms']:.2f} ms", "latency_p99"),
        row("  pickup max", f"{m['latency_max_ms']:.2f} ms"),
        row("  pickup p50, plain write + rename", f"{m['plain_p50_ms']:.2f} ms", "plain_p50"),
        row("  pickup p99, plain write + rename", f"{m['plain_p99_ms']:.2f} ms", "plain_p99"),
        row("  pickup max, plain write + rename", f"{m['plain_max_ms']:.2f} ms"),
    ]  # fmt: skip


def _passes(m: dict[str, Any]) -> str:
    pairs = zip(m["drain_pass_s"], m["drain_wall_s"], strict=True)
    return ", ".join(f"{pass_s:.2f} s ({wall_s:.2f} s)" for pass_s, wall_s in pairs)


def _rows(report: Report) -> list[table.Row]:
    """One row per figure of the full run."""
    m, row, sizes = report.figures, table.Rows(report), report.sizes
    schedstat = m["idle_cpu_pct_schedstat"]
    rows = [
        row("1 disk limit (mean of runs)", f"{m['disk_limit_files_per_s']:,.0f} files/s"),
        row("  each run", " ".join(f"{limit:,.0f}" for limit in m["disk_limit_runs"])),
        row(f"2 drain of {m['drain_copies']:,} copies, x{m['drain_runs']}",
            f"{m['drain_copies_per_s']:,.0f} copies/s"),
        row("  drain / disk limit", f"{m['drain_vs_limit']:.2f}x", "drain"),
        row("  drain passes (wall of run --once)", _passes(m)),
        *_pickup_rows(m, row),
        row("  pickup p50 in disk-limit periods", f"{m['latency_p50_in_limit_periods']:.1f}"),
        *startup.rows(m, row),
        row(f"5 idle CPU over {sizes['idle_seconds']:g} s (stat ticks)",
            f"{m['idle_cpu_pct']:.3f} %", "idle_cpu"),
        row("  idle CPU (schedstat ns)", "n/a" if schedstat is None else f"{schedstat:.3f} %"),
        row("  idle RSS", f"{m['idle_rss_mb']:.1f} MB", "idle_rss"),
        row("  daemon threads", str(m["idle_threads"])),
    ]  # fmt: skip
    for history, g in m["growth"].items():
        n, key = f"{int(history):,}", f"growth_{history}"
        rows += [
            row(f"6 history {n}: drain / disk limit",
                f"{g['drain_vs_limit']:.2f}x ({g['drain_vs_empty']:.2f}x empty's)",
                key + "_drain"),
            row(f"  history {n}: drain, disk limit",
                f"{g['drain_copies_per_s']:,.0f} copies/s, "
                f"{g['disk_limit_files_per_s']:,.0f} files/s"),
            row(f"  history {n}: pickup p50",
                f"{g['latency_p50_ms']:.2f} ms ({g['p50_vs_empty']:.2f}x)", key + "_p50"),
            row(f"  history {n}: pickup p99",
                f"{g['latency_p99_ms']:.2f} ms ({g['p99_vs_empty']:.2f}x)", key + "_p99"),
        ]  # fmt: skip
    b, sizes = m["board"], report.sizes
    rows += [
        row(f"7 handoffd status, {sizes['board_cards']:,} open cards", f"{b['command_ms']:.1f} ms"),
        row(f"  floor, {sizes['board_history']:,} of history", f"{b['floor_ms']:.1f} ms"),
        row("  status / floor", f"{b['command_vs_floor']:.2f}x", "status_command_vs_floor"),
        *swarm.section(m["swarm"], row, "8 "),
    ]
    return rows
