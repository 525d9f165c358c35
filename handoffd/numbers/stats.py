"""`handoffd stats` and the table of `/numbers` (docs/protocol.md §19), pure: the window's
counts and durations per role (the operator's too), and a total; as rows, as text and as
JSON.  The counts are `tally`'s, the very ones `/metrics` shows over all of history."""

from __future__ import annotations

import re
from typing import Any

from handoffd.board import spending
from handoffd.core import handoff as hf
from handoffd.numbers import tally, tokens
from handoffd.numbers.facts import Facts

SPAN = re.compile(r"([1-9][0-9]{0,5})([smhdw])")
UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DEFAULT_SPAN = "24h"
TOTAL = "total"
COLUMNS = ("ROLE", "DELIVERED", "TAKEN", "COMPLETED", "REOPENED", "REFUSED",
           "WAIT p50/p90", "WORK p50/p90", "TOKENS in/out")  # fmt: skip
NOT_REPORTED = "not reported"
COUNTS = ("delivered", "taken", "completed", "reopened", "refused")


def span_seconds(text: str) -> float | None:
    """`24h`, `1h`, `7d`, `90m`, `2w` in seconds; None for anything else."""
    match = SPAN.fullmatch(text.strip())
    return None if match is None else int(match.group(1)) * UNIT[match.group(2)]


def rows(facts: Facts, since: float, only: str | None = None,
         spent: list[tokens.Sample] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per role (each pool and the operator included; `only` keeps that role and
    a pool's members), then the total, over the window from `since` to the facts' `now`."""
    counts = {**tally.counts(facts, since), "refused": tally.refused(facts, since)}
    waits, works = tally.waits(facts, since), tally.works(facts, since)
    used = _tokens(spent)
    names = [r for r in facts.roles if only is None or r == only]
    shown = [_row(name, counts, waits.get(name, []), works.get(name, []), used.get(name))
             for name in names]  # fmt: skip
    every_wait = [v for name in names for v in waits.get(name, [])]
    every_work = [v for name in names for v in works.get(name, [])]
    total = _row(TOTAL, {}, every_wait, every_work, _sum(used, names) if used else None)
    for key in COUNTS:
        total[key] = sum(row[key] for row in shown)
    _pools_and_silence(facts, shown, used)
    return [*shown, total]


def _pools_and_silence(facts: Facts, shown: list[dict[str, Any]], used: dict[str, Any]) -> None:
    """A pool's tokens are its members' together (after the total, which counts each member
    once); a role whose harness ends turns but keeps no record says by which it is not
    reported (docs/protocol.md §19)."""
    if facts.board is None:
        return
    snapshot = facts.board.snapshot
    silent = spending.unreported(snapshot, facts.harness)
    for row in shown:
        name = row["role"]
        members = [n for n, r in snapshot.roles.items() if r.pool == name != n]
        if name in facts.pools and any(m in used for m in members):
            row["tokens"] = _sum(used, members)
        if row["tokens"] is None and name in silent:
            row["tokens_not_reported_by"] = silent[name]


def _row(name: str, counts: dict[str, tally.Counts], waits: list[float], works: list[float],
         used: dict[str, float] | None) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {"role": name}
    for key in COUNTS:
        row[key] = counts.get(key, {}).get(name, 0)
    row["wait_p50_s"], row["wait_p90_s"] = (
        tally.percentile(waits, 0.5),
        tally.percentile(waits, 0.9),
    )
    row["work_p50_s"], row["work_p90_s"] = (
        tally.percentile(works, 0.5),
        tally.percentile(works, 0.9),
    )
    row["tokens"] = used
    return row


def _tokens(spent: list[tokens.Sample] | None) -> dict[str, dict[str, float]]:
    """Each role's tokens by kind, from `handoffd_tokens_total`'s samples."""
    used: dict[str, dict[str, float]] = {}
    for name, labels, value in spent or ():
        if name == tokens.TOTAL and labels.get("role") and labels.get("kind") in tokens.KINDS:
            kinds = used.setdefault(labels["role"], dict.fromkeys(tokens.KINDS, 0.0))
            kinds[labels["kind"]] += value
    return used


def _sum(used: dict[str, dict[str, float]], names: list[str]) -> dict[str, float]:
    return {kind: sum(used.get(n, {}).get(kind, 0.0) for n in names) for kind in tokens.KINDS}


def as_json(facts: Facts, shown: list[dict[str, Any]], since: float, span: str) -> dict[str, Any]:
    return {"span": span, "since": hf.iso_now(since), "until": hf.iso_now(facts.now),
            "roles": shown[:-1], "total": shown[-1]}  # fmt: skip


def render(shown: list[dict[str, Any]], span: str) -> list[str]:
    """The table: a heading, one line per role, the total."""
    cells = [list(COLUMNS)] + [_cells(row) for row in shown]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = [f"over the last {span}"]
    for line in cells:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
                     .rstrip())  # fmt: skip
    return lines


def _cells(row: dict[str, Any]) -> list[str]:
    used = row["tokens"]
    silent = f"{NOT_REPORTED} by {row['tokens_not_reported_by']}" if row.get(
        "tokens_not_reported_by") else NOT_REPORTED  # fmt: skip
    spent = silent if used is None else f"{_n(used['input'])}/{_n(used['output'])}"
    return [row["role"], *(str(row[key]) for key in COUNTS),
            f"{duration(row['wait_p50_s'])}/{duration(row['wait_p90_s'])}",
            f"{duration(row['work_p50_s'])}/{duration(row['work_p90_s'])}", spent]  # fmt: skip


def _n(value: float) -> str:
    return f"{value:,.0f}"


def duration(seconds: float | None) -> str:
    """`-` for none; `0.4s`, `42s`, `3m 05s`, `2h 10m`, `3d 04h`."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"
