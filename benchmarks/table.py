"""The table of the queue's scenarios (the full run, `--pickup`, `--startup`): the machine,
one row per figure with its target and verdict, the notes that explain each term, and the
overall verdict (pure: no clock, no disk)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchmarks.scenario import Report

Row = tuple[str, str, str, str]  # measurement, value, target, verdict
NO_VERDICT = (
    "overall: no verdict (--quick runs tiny sizes: it checks that the benchmark runs, "
    "not how fast anything is)"
)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `share` of values <= it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


class Rows:
    """Makes a report's rows: a row naming a target shows the target's text and, in a
    judged run, its verdict; a quick run leaves the verdict column empty."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __call__(self, label: str, value: str, target: str = "") -> Row:
        if not target:
            return label, value, "", ""
        return label, value, self.report.targets[target].text, self.report.verdict(target)


def render(report: Report, rows: Sequence[Row], notes: Sequence[str], bytecode: bool = True) -> str:
    """The header, the rows in aligned columns, the notes and the overall verdict."""
    info = report.machine
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
        *([f"bytecode of the helpers: {info['bytecode']}"] if bytecode else []),
        f"temp dir: {info['temp_dir']} on {info['filesystem']}",
        "sizes: " + ", ".join(f"{key}={value}" for key, value in report.sizes.items()),
        "",
    ]
    overall = NO_VERDICT if report.verdicts is None else (
        f"overall: {'PASS' if report.all_pass else 'MISS'}")  # fmt: skip
    return "\n".join([*header, *lines, "", *notes, overall])
