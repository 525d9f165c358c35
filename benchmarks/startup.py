"""Helper start-up (`handoffd bench --startup`, and section 4 of the full run): what an
agent pays per call, `ready_for_next` on an empty inbox against a bare `python -c pass`,
and the two calls it makes per task, taking one waiting file and finishing it, each
against a `python -c pass` timed in the same loop.

The package is byte-compiled first, as `pip install` does: an editable install under
PYTHONDONTWRITEBYTECODE would otherwise compile every module on every call, which is the
set-up of a checkout, not the cost an agent pays.  The commands run interleaved, so a slow
patch of the machine hits both alike: read the ratio, not the milliseconds.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import handoffd
from benchmarks import table
from benchmarks.fanout import RECIPIENTS, Fanout
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from handoffd.core.config import Box
from testbed import helper_env, write

ROLE = RECIPIENTS[0]  # a task-mode role
HELPER_TARGET = 1.5  # a helper within 1.5x of a bare interpreter, with work waiting too
NOTES = (
    "start-up: medians of interleaved runs of each command in a task-mode role's worktree,",
    "  the package byte-compiled first; taking and finishing write the role's live file;",
    "  a take and a finish are each against `python -c pass` run in the same loop.",
)


@dataclass
class StartupSizes:
    startup_runs: int = 20


@dataclass
class Startup:
    """Medians (s) of each command."""

    helper_s: float
    python_s: float
    take_s: float
    finish_s: float
    take_python_s: float  # python -c pass, timed in the take-and-finish loop


def measure(project: Fanout, runs: int) -> Startup:
    """Every start-up figure, in `project` (whose inbox must be empty)."""
    progress(f"helper start-up, {runs} runs each")
    helper_s, python_s = empty_inbox(project, runs)
    progress(f"take and finish, {runs} runs each")
    take_s, finish_s, take_python_s = take_and_finish(project, runs)
    return Startup(helper_s, python_s, take_s, finish_s, take_python_s)


def empty_inbox(project: Fanout, runs: int) -> tuple[float, float]:
    """Medians (s) of `ready_for_next` on an empty inbox and of `python -c pass`, interleaved."""
    compileall.compile_dir(os.path.dirname(handoffd.__file__), quiet=1)
    helper, env, cwd = _helper("ready_for_next"), helper_env(ROLE), project.worktree(ROLE)
    check = subprocess.run(helper, cwd=cwd, env=env, capture_output=True, text=True)
    if check.stdout != "NO_TASK\n":
        raise BenchError(f"ready_for_next printed {check.stdout!r} {check.stderr!r}")
    helper_times, python_times = [], []
    for _ in range(runs):
        helper_times.append(_time_run(helper, cwd, env))
        python_times.append(_time_run([sys.executable, "-c", "pass"], cwd, env))
    return statistics.median(helper_times), statistics.median(python_times)


def take_and_finish(project: Fanout, runs: int) -> tuple[float, float, float]:
    """Medians (s) of `ready_for_next` taking one waiting file, of `done_with_current`
    completing it (stamp, fsync, rename, heartbeat): the calls an agent makes per task;
    and of `python -c pass` in the same loop, the bar both are held to."""
    env, cwd = helper_env(ROLE), project.worktree(ROLE)
    take, finish = _helper("ready_for_next"), _helper("done_with_current")
    take_times, finish_times, python_times = [], [], []
    for _ in range(runs):
        name, data = project.handoff()
        write(project.path(ROLE, Box.NEW, name), data)
        python_times.append(_time_run([sys.executable, "-c", "pass"], cwd, env))
        take_times.append(_time_run(take, cwd, env))
        finish_times.append(_time_run(finish, cwd, env))
    if os.listdir(project.path(ROLE, Box.IN_PROCESS)):
        raise BenchError("take-and-finish left work in process")
    return (statistics.median(take_times), statistics.median(finish_times),
            statistics.median(python_times))  # fmt: skip


def _helper(name: str) -> list[str]:
    """The installed helper next to this interpreter, else the same through `-c`."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(path):
        return [path]
    return [sys.executable, "-c", f"from handoffd.adapters.console import {name} as h; h()"]


def _time_run(command: list[str], cwd: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def figures(startup: Startup) -> dict[str, float]:
    return {
        "helper_median_ms": startup.helper_s * 1000,
        "python_median_ms": startup.python_s * 1000,
        "helper_vs_python": startup.helper_s / startup.python_s,
        "take_median_ms": startup.take_s * 1000,
        "finish_median_ms": startup.finish_s * 1000,
        "take_python_median_ms": startup.take_python_s * 1000,
        "take_vs_python": startup.take_s / startup.take_python_s,
        "finish_vs_python": startup.finish_s / startup.take_python_s,
    }


def targets(m: dict[str, Any]) -> list[Target]:
    return [
        Target("helper_startup", m["helper_vs_python"], "<=", HELPER_TARGET, "x"),
        Target("helper_take", m["take_vs_python"], "<=", HELPER_TARGET, "x"),
    ]


def rows(m: dict[str, Any], row: table.Rows) -> list[table.Row]:
    """Section 4 of the table."""
    return [
        row("4 ready_for_next start-up, median", f"{m['helper_median_ms']:.1f} ms"),
        row("  python -c pass, median", f"{m['python_median_ms']:.1f} ms"),
        row("  helper / python", f"{m['helper_vs_python']:.2f}x", "helper_startup"),
        row("  ready_for_next taking one file", f"{m['take_median_ms']:.1f} ms"),
        row("  done_with_current finishing it", f"{m['finish_median_ms']:.1f} ms"),
        row("  python -c pass, in the same loop", f"{m['take_python_median_ms']:.1f} ms"),
        row("  take / python (work waiting)", f"{m['take_vs_python']:.2f}x", "helper_take"),
        row("  finish / python", f"{m['finish_vs_python']:.2f}x"),
    ]  # fmt: skip


class StartupScenario(Scenario[StartupSizes, Fanout, Startup]):
    """`--startup`: section 4 alone, in a project of its own with no daemon."""

    name, key = "startup", "metrics"
    full, quick = StartupSizes(), StartupSizes(startup_runs=3)
    tunable = ("startup_runs",)

    def build(self, base: str, sizes: StartupSizes) -> Fanout:
        return Fanout(os.path.join(base, "startup"))

    def measure(self, built: Fanout, sizes: StartupSizes) -> Startup:
        return measure(built, sizes.startup_runs)

    def figures(self, measured: Startup, sizes: StartupSizes) -> dict[str, float]:
        return figures(measured)

    def targets(self, figures: Any) -> list[Target]:
        return targets(figures)

    def render(self, report: Report) -> str:
        return table.render(report, rows(report.figures, table.Rows(report)), NOTES)
