"""`handoffd bench --digest`: the cost of `digest --task` on a large thread, and whether it
grows with unrelated history (docs/protocol.md §11).

Two projects, alike but for their history: each holds one task of 200 git handoffs
(lead → alice → bob), 500 reports and 300 commits; one also holds 50,000 completed cards
of other tasks (25,000 handoffs to two recipients, their originals in `sent/`).  The first
digest of each builds the history index (timed apart, as "cold"); the warm runs are
interleaved A B B A … so a drifting disk or a busy neighbour affects both alike.

Targets: the big project's warm digest within 1.2x of the small one's, and under 1 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from handoffd.core.config import Box
from handoffd.core.handoff import iso_now
from handoffd.ops import views
from handoffd.ops.context import resolve_context
from testbed import Project, Seat, git, handoff_id, make_project, queued, stamped, write

ROLES = ("lead", "alice", "bob")
SEATS = (Seat("lead", agent="bench"), Seat("alice", "wt/alice", agent="bench"),
         Seat("bob", "wt/bob", agent="bench"))  # fmt: skip
TASK = "bench-task"
BODY = "Re-read your role and constitution.\n\nmerge_and_process\n"
MAX_LINES = 60
GROWTH_TARGET, WARM_TARGET_S = 1.2, 1.0


@dataclass
class DigestSizes:
    handoffs: int = 200
    reports: int = 500
    commits: int = 300
    history: int = 50_000  # unrelated completed cards in the big project
    runs: int = 7


@dataclass
class Timings:
    history: int
    root: str
    cold_s: float = 0.0
    warm_s: list[float] = field(default_factory=list)
    cli_s: list[float] = field(default_factory=list)
    lines: int = 0


def build_project(root: str, sizes: DigestSizes, history: int) -> None:
    """The project: the task's thread with its commits and reports, then the history."""
    project = make_project(Path(root), SEATS, commits=sizes.commits)
    shas = git(root, "log", "--reverse", "--format=%h", "--abbrev=10", "main").split()[1:]
    step = max(1, sizes.commits * 2 // sizes.handoffs)
    for n in range(sizes.handoffs):
        sender, to = ("lead", "alice") if n % 2 == 0 else ("alice", "bob")
        sha = shas[min(len(shas) - 1, (n // 2) * step)]
        when = 1_790_000_000 + n * 600
        ident = handoff_id(sender, n + 1, when)
        headers = (("type", "git_handoff"), ("role", sender), ("task", TASK), ("commit", sha))
        name, handoff = queued(ident, sender, [to], BODY, *headers, when=when)
        project.lay(sender, Box.SENT, name, handoff)
        copy = stamped(handoff, to, when + 1)
        done = n < sizes.handoffs - 2  # the last two still wait in new/
        if done:
            copy.set("completed_at", iso_now(when + 300))
        project.lay(to, Box.COMPLETED if done else Box.NEW, name, copy)
        _reports(project, to, ident, when, n, sizes)
    _history(project, history)


def _reports(
    project: Project, role: str, ident: str, when: float, n: int, sizes: DigestSizes
) -> None:
    count = sizes.reports // sizes.handoffs + (1 if n < sizes.reports % sizes.handoffs else 0)
    for k in range(count):
        at = when + 10 + k * 30
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(at)) + ".000000Z"
        text = (f"Worked on slice {n}, step {k}. I decided to keep the parser as it is for now.\n"
                f"I'll add the remaining tests for slice {n} tomorrow morning.\n")  # fmt: skip
        front = f"---\nstatus: RUNNING\nrole: {role}\nagent: bench\nconversation: ''\n---\n\n"
        path = project.handoffs(role) / "reports" / ident / f"{stamp}_RUNNING.md"
        write(path, (front + text).encode())


def _history(project: Project, history: int) -> None:
    """`history` completed cards of other tasks: half as many handoffs, two recipients each."""
    for n in range(history // 2):
        ident = handoff_id("lead", 100_000 + n, 1_700_000_000 + n)
        name, handoff = queued(ident, "lead", ["alice", "bob"], BODY, ("type", "git_handoff"),
                               ("role", "lead"), ("task", f"other-{n % 977}"),
                               ("commit", "0000000000"), when=1_700_000_000 + n)  # fmt: skip
        data = handoff.render()
        write(project.box("lead", Box.SENT) / name, data)
        for role in ("alice", "bob"):
            write(project.box(role, Box.COMPLETED) / name, data)


def in_process(root: str) -> tuple[float, int]:
    """One digest of the task through the operation `handoffd digest` runs: seconds, lines."""
    start = time.perf_counter()
    made = views.digest(resolve_context(root, needs_role=False), task=TASK, max_lines=MAX_LINES)
    elapsed = time.perf_counter() - start
    if not made.ok:
        raise BenchError(f"digest refused: {made.err.strip()}")
    return elapsed, made.out.count("\n")


def cli(root: str) -> float:
    start = time.perf_counter()
    command = [sys.executable, "-m", "handoffd", "digest", "--task", TASK, "--root", root]
    subprocess.run(command, capture_output=True, check=True)
    return time.perf_counter() - start


class Digest(Scenario[DigestSizes, list[Timings], list[Timings]]):
    name = key = "digest"
    full, quick = DigestSizes(), DigestSizes(handoffs=20, reports=50, commits=30, history=500,
                                             runs=3)  # fmt: skip

    def build(self, base: str, sizes: DigestSizes) -> list[Timings]:
        made = []
        for history in (0, sizes.history):
            progress(f"digest: building a project with {history:,} unrelated cards")
            root = os.path.join(base, f"history-{history}")
            build_project(root, sizes, history)
            made.append(Timings(history, root))
        return made

    def measure(self, built: list[Timings], sizes: DigestSizes) -> list[Timings]:
        for timings in built:
            timings.cold_s, timings.lines = in_process(timings.root)
        for n in range(sizes.runs):
            for timings in built if n % 2 == 0 else built[::-1]:
                timings.warm_s.append(in_process(timings.root)[0])
                timings.cli_s.append(cli(timings.root))
        return built

    def figures(self, measured: list[Timings], sizes: DigestSizes) -> list[dict[str, Any]]:
        return [{"history": t.history, "cold_s": t.cold_s, "warm_s": t.warm_s,
                 "cli_s": t.cli_s, "lines": t.lines} for t in measured]  # fmt: skip

    def targets(self, figures: Any) -> list[Target]:
        small, big = (statistics.median(f["warm_s"]) for f in figures)
        return [
            Target("growth", big / small, "<=", GROWTH_TARGET, "x", ".2f"),
            Target("warm", big, "<=", WARM_TARGET_S, " s"),
        ]

    def render(self, report: Report) -> str:
        sizes, target = report.sizes, report.targets
        lines = [
            f"digest --task: {sizes['handoffs']} handoffs, {sizes['reports']} reports, "
            f"{sizes['commits']} commits; median of {sizes['runs']} warm runs",
        ]
        for f in report.figures:
            lines.append(
                f"  {f['history']:>6,} unrelated cards: in-process "
                f"{statistics.median(f['warm_s']):.3f} s "
                f"(cold, building the index: {f['cold_s']:.3f} s), "
                f"CLI {statistics.median(f['cli_s']):.3f} s, {f['lines']} lines"
            )
        both = "" if report.verdicts is None else "PASS" if report.all_pass else "MISS"
        lines.append(
            f"  growth {sizes['history']:,} vs 0: {target['growth'].value:.2f}x "
            f"(target {target['growth'].text}, {target['warm'].text}) {both}".rstrip()
        )
        return "\n".join(lines)
