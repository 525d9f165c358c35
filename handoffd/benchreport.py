"""The verdicts and the readable table of `handoffd bench` (pure: no clock, no disk).

Targets: a drain at half the disk's durable-write limit or better, pickup within 5 ms
(p50) and 25 ms (p99) for swarm_handoff and for a plain write-then-rename writer alike,
a helper within 1.5x of a bare `python -c pass`, an idle daemon under 0.2 % of a CPU and
60 MB, and figures that stay flat as history grows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.bench import Scenario

GROWTH_TOLERANCE = 1.5  # "flat": within 1.5x of the empty-history figure ...
GROWTH_SLACK_MS = 1.0  # ... or, for latencies, within 1 ms of it (sub-ms noise)
PICKUP_P50_MS, PICKUP_P99_MS = 5.0, 25.0

Row = tuple[str, str, str, str]  # measurement, value, target, verdict


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `share` of values <= it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def pickup(run: Scenario) -> dict[str, Any]:
    """Section 3's figures: both writers' pickup percentiles (`plain_`: write, rename)."""
    p50, p99 = percentile(run.latencies_ms, 0.5), percentile(run.latencies_ms, 0.99)
    return {
        "latency_samples": len(run.latencies_ms),
        "latency_p50_ms": p50,
        "latency_p99_ms": p99,
        "latency_max_ms": max(run.latencies_ms),
        "plain_p50_ms": percentile(run.plain_ms, 0.5),
        "plain_p99_ms": percentile(run.plain_ms, 0.99),
        "plain_max_ms": max(run.plain_ms),
    }


def pickup_verdicts(m: dict[str, Any]) -> dict[str, bool]:
    return {
        "latency_p50": m["latency_p50_ms"] <= PICKUP_P50_MS,
        "latency_p99": m["latency_p99_ms"] <= PICKUP_P99_MS,
        "plain_p50": m["plain_p50_ms"] <= PICKUP_P50_MS,
        "plain_p99": m["plain_p99_ms"] <= PICKUP_P99_MS,
    }


def report(runs: list[Scenario]) -> dict[str, Any]:
    """Every figure, its verdict, and the overall verdict; `runs[0]` has no history."""
    empty, rest = runs[0], runs[0].at_rest
    assert rest is not None, "the empty-history run measures the daemon at rest"
    metrics: dict[str, Any] = {
        "disk_limit_files_per_s": empty.limit,
        "disk_limit_runs": empty.limits,
        "drain_copies": empty.drains[0].copies,
        "drain_runs": len(empty.drains),
        "drain_pass_s": [d.pass_s for d in empty.drains],
        "drain_wall_s": [d.wall_s for d in empty.drains],
        "drain_copies_per_s": empty.copies_per_s,
        "drain_vs_limit": empty.copies_per_s / empty.limit,
        **pickup(empty),
        "helper_median_ms": rest.helper_s * 1000,
        "python_median_ms": rest.python_s * 1000,
        "helper_vs_python": rest.helper_s / rest.python_s,
        "take_median_ms": rest.take_s * 1000,
        "finish_median_ms": rest.finish_s * 1000,
        "take_vs_python": rest.take_s / rest.python_s,
        "finish_vs_python": rest.finish_s / rest.python_s,
        "idle_cpu_pct": rest.cpu_pct,
        "idle_cpu_pct_schedstat": rest.cpu_pct_ns,
        "idle_rss_mb": rest.rss_mb,
        "idle_threads": rest.threads,
        "growth": {str(run.history): _growth(run, empty) for run in runs[1:]},
    }
    metrics["latency_p50_in_limit_periods"] = metrics["latency_p50_ms"] * empty.limit / 1000
    verdicts = {
        "drain": metrics["drain_vs_limit"] >= 0.5,
        **pickup_verdicts(metrics),
        "helper_startup": metrics["helper_vs_python"] <= 1.5,
        "idle_cpu": rest.cpu_pct <= 0.2,
        "idle_rss": rest.rss_mb <= 60.0,
    }
    for history, growth in metrics["growth"].items():
        verdicts[f"growth_{history}_drain"] = growth["drain_vs_empty"] >= 1 / GROWTH_TOLERANCE
        for key in ("p50", "p99"):
            flat = _flat(growth[f"latency_{key}_ms"], metrics[f"latency_{key}_ms"])
            verdicts[f"growth_{history}_{key}"] = flat
    return {"metrics": metrics, "verdicts": verdicts, "all_pass": all(verdicts.values())}


def report_pickup(run: Scenario) -> dict[str, Any]:
    """`bench --pickup`: section 3's figures and verdicts alone."""
    metrics = pickup(run)
    verdicts = pickup_verdicts(metrics)
    return {"metrics": metrics, "verdicts": verdicts, "all_pass": all(verdicts.values())}


def _growth(run: Scenario, empty: Scenario) -> dict[str, float]:
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


def _flat(value_ms: float, empty_ms: float) -> bool:
    return value_ms <= empty_ms * GROWTH_TOLERANCE or value_ms - empty_ms <= GROWTH_SLACK_MS


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
)


def render(
    info: dict[str, Any], sizes: dict[str, Any], result: dict[str, Any], only_pickup: bool = False
) -> str:
    """The readable report: machine, one row per figure with its target and verdict."""
    quick = result.get("quick", False)
    verdicts = result.get("verdicts")
    rows = _pickup_rows(result["metrics"], verdicts) if only_pickup else (
        _rows(result["metrics"], verdicts, sizes))  # fmt: skip
    table = [("measurement", "value", "target", "verdict"), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = [
        f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
        for a, b, c, d in table
    ]
    header = [
        f"handoffd bench  {info['date']}",
        f"machine: {info['uname']}, {info['cpus']} CPUs ({info['cpu_model']}), {info['python']}",
        f"load average (1, 5, 15 min): {info['load_start']} at start, {info['load_end']} at end",
        *([] if only_pickup else [f"bytecode of the helpers: {info['bytecode']}"]),
        f"temp dir: {info['temp_dir']} on {info['filesystem']}",
        "sizes: " + ", ".join(f"{key}={value}" for key, value in sizes.items()),
        "",
    ]
    notes = PICKUP_NOTES if only_pickup else NOTES
    overall = (
        "overall: no verdict (--quick runs tiny sizes: it checks that the benchmark runs, "
        "not how fast anything is)"
        if quick
        else f"overall: {'PASS' if result['all_pass'] else 'MISS'}"
    )
    footer = ["", *notes, overall]
    return "\n".join(header + lines + footer)


def _passes(m: dict[str, Any]) -> str:
    pairs = zip(m["drain_pass_s"], m["drain_wall_s"], strict=True)
    return ", ".join(f"{pass_s:.2f} s ({wall_s:.2f} s)" for pass_s, wall_s in pairs)


def _row(verdicts: dict[str, bool] | None) -> Callable[..., Row]:
    """A row maker; without `verdicts` (a quick run) the verdict column stays empty."""

    def row(label: str, value: str, target: str = "", key: str = "") -> Row:
        if not key or verdicts is None:
            return label, value, target, ""
        return label, value, target, "PASS" if verdicts[key] else "MISS"

    return row


def _pickup_rows(m: dict[str, Any], verdicts: dict[str, bool] | None) -> list[Row]:
    row, p50, p99 = _row(verdicts), f"<= {PICKUP_P50_MS:g} ms", f"<= {PICKUP_P99_MS:g} ms"
    return [
        row(f"3 pickup p50, swarm_handoff ({m['latency_samples']} samples)",
            f"{m['latency_p50_ms']:.2f} ms", p50, "latency_p50"),
        row("  pickup p99", f"{m['latency_p99_ms']:.2f} ms", p99, "latency_p99"),
        row("  pickup max", f"{m['latency_max_ms']:.2f} ms"),
        row("  pickup p50, plain write + rename", f"{m['plain_p50_ms']:.2f} ms", p50, "plain_p50"),
        row("  pickup p99, plain write + rename", f"{m['plain_p99_ms']:.2f} ms", p99, "plain_p99"),
        row("  pickup max, plain write + rename", f"{m['plain_max_ms']:.2f} ms"),
    ]  # fmt: skip


def _rows(m: dict[str, Any], verdicts: dict[str, bool] | None, sizes: dict[str, Any]) -> list[Row]:
    """One row per figure; without `verdicts` (a quick run) the verdict column stays empty."""
    row = _row(verdicts)
    schedstat = m["idle_cpu_pct_schedstat"]
    rows = [
        row("1 disk limit (mean of runs)", f"{m['disk_limit_files_per_s']:,.0f} files/s"),
        row("  each run", " ".join(f"{limit:,.0f}" for limit in m["disk_limit_runs"])),
        row(f"2 drain of {m['drain_copies']:,} copies, x{m['drain_runs']}",
            f"{m['drain_copies_per_s']:,.0f} copies/s"),
        row("  drain / disk limit", f"{m['drain_vs_limit']:.2f}x", ">= 0.5x", "drain"),
        row("  drain passes (wall of run --once)", _passes(m)),
        *_pickup_rows(m, verdicts),
        row("  pickup p50 in disk-limit periods", f"{m['latency_p50_in_limit_periods']:.1f}"),
        row("4 ready_for_next start-up, median", f"{m['helper_median_ms']:.1f} ms"),
        row("  python -c pass, median", f"{m['python_median_ms']:.1f} ms"),
        row("  helper / python", f"{m['helper_vs_python']:.2f}x", "<= 1.5x", "helper_startup"),
        row("  ready_for_next taking one file", f"{m['take_median_ms']:.1f} ms"),
        row("  done_with_current finishing it", f"{m['finish_median_ms']:.1f} ms"),
        row("  take / python, finish / python",
            f"{m['take_vs_python']:.2f}x, {m['finish_vs_python']:.2f}x"),
        row(f"5 idle CPU over {sizes['idle_seconds']:g} s (stat ticks)",
            f"{m['idle_cpu_pct']:.3f} %", "<= 0.2 %", "idle_cpu"),
        row("  idle CPU (schedstat ns)", "n/a" if schedstat is None else f"{schedstat:.3f} %"),
        row("  idle RSS", f"{m['idle_rss_mb']:.1f} MB", "<= 60 MB", "idle_rss"),
        row("  daemon threads", str(m["idle_threads"])),
    ]  # fmt: skip
    for history, g in m["growth"].items():
        n, key = f"{int(history):,}", f"growth_{history}"
        rows += [
            row(f"6 history {n}: drain / disk limit",
                f"{g['drain_vs_limit']:.2f}x ({g['drain_vs_empty']:.2f}x empty's)",
                f">= {1 / GROWTH_TOLERANCE:.2f}x", key + "_drain"),
            row(f"  history {n}: drain, disk limit",
                f"{g['drain_copies_per_s']:,.0f} copies/s, "
                f"{g['disk_limit_files_per_s']:,.0f} files/s"),
            row(f"  history {n}: pickup p50",
                f"{g['latency_p50_ms']:.2f} ms ({g['p50_vs_empty']:.2f}x)", "flat", key + "_p50"),
            row(f"  history {n}: pickup p99",
                f"{g['latency_p99_ms']:.2f} ms ({g['p99_vs_empty']:.2f}x)", "flat", key + "_p99"),
        ]  # fmt: skip
    return rows
