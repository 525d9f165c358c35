"""`handoffd bench --metrics`: what the swarm's numbers cost against `status --json`
(docs/protocol.md §19).

The project is the board scenario's (`benchmarks.board.Layout`): 1,000 open cards of every
colour over 6 roles and 50,000 completed cards of history, its folders dated a minute back
as on a board that has been running.  In one run, interleaved so a drifting machine
affects all alike, in process:

- `status --json` (scan, projection, JSON text) on the same files;
- `/metrics` served by the web board's app (its board keeps what it read of history
  between scrapes, as a running `handoffd web` does);
- `handoffd metrics` as the command computes it (history's stamps read back from the
  index's cache each time), shown without a target;
- `/numbers` served (the table and the charts over the last 24 hours), without a target.

Target: `/metrics` at most 2x `status --json`.  The first read of a history builds the
stamps cache (every header read once); it is timed apart, without a target.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.board import Layout, board_json, interleaved
from benchmarks.scenario import Report, Scenario, Target, progress
from benchmarks.web import _settle_folders

TARGET = 2.0


@dataclass
class MetricsSizes:
    open_cards: int = 1000
    history: int = 50_000
    rounds: int = 15


@dataclass
class Timed:
    medians_ms: dict[str, float]
    first_ms: float  # the first read: every history header read, the cache written
    sizes: dict[str, int]


class Metrics(Scenario[MetricsSizes, Layout, Timed]):
    name = key = "metrics"
    full, quick = MetricsSizes(), MetricsSizes(open_cards=60, history=500, rounds=3)

    def build(self, base: str, sizes: MetricsSizes) -> Layout:
        progress(f"metrics: building {sizes.open_cards:,} open cards, {sizes.history:,} completed")
        layout = Layout(os.path.join(base, "metrics"), sizes.open_cards, sizes.history)
        layout.build(time.time())
        _settle_folders(layout.root)
        return layout

    def measure(self, built: Layout, sizes: MetricsSizes) -> Timed:
        from starlette.testclient import TestClient  # the web stack: only this scenario

        from handoffd.numbers import exposition, facts
        from handoffd.web.app import create_app

        started = time.perf_counter()
        first = len(exposition.render(facts.gather(built.root)))
        first_ms = (time.perf_counter() - started) * 1000
        assert first > 0
        client = TestClient(create_app(built.root), base_url="http://127.0.0.1:8765")

        def served(path: str) -> int:
            answer = client.get(path)
            assert answer.status_code == 200, answer.status_code
            return len(answer.content)

        medians, made = interleaved({
            "status": lambda: board_json(built.root),
            "metrics": lambda: served("/metrics"),
            "command": lambda: len(exposition.render(facts.gather(built.root))),
            "numbers": lambda: served("/numbers"),
        }, sizes.rounds)  # fmt: skip
        return Timed(medians, first_ms, made)

    def figures(self, measured: Timed, sizes: MetricsSizes) -> dict[str, Any]:
        med = measured.medians_ms
        return {
            "open_cards": sizes.open_cards,
            "history": sizes.history,
            "rounds": sizes.rounds,
            "status_json_ms": round(med["status"], 2),
            "metrics_ms": round(med["metrics"], 2),
            "metrics_command_ms": round(med["command"], 2),
            "numbers_page_ms": round(med["numbers"], 2),
            "first_read_ms": round(measured.first_ms, 2),
            "metrics_vs_status": round(med["metrics"] / med["status"], 3),
            "metrics_bytes": measured.sizes["metrics"],
        }

    def targets(self, figures: Any) -> list[Target]:
        return [Target("metrics_vs_status", figures["metrics_vs_status"], "<=", TARGET, "x",
                       ".1f")]  # fmt: skip

    def render(self, report: Report) -> str:
        """The figures as a short table with the verdict."""
        f, target = report.figures, report.targets["metrics_vs_status"]
        rows = [
            ("status --json", f["status_json_ms"], ""),
            ("/metrics (the board keeps history's sums)", f["metrics_ms"],
             f"  {f['metrics_bytes']:>7,} B"),
            ("handoffd metrics (history from the cache)", f["metrics_command_ms"], ""),
            ("/numbers (table and charts, 24 h)", f["numbers_page_ms"], ""),
            ("the first read (every header, the cache made)", f["first_read_ms"], ""),
        ]  # fmt: skip
        return "\n".join([
            f"metrics: {f['open_cards']:,} open cards, 6 roles, {f['history']:,} completed; "
            f"medians of {f['rounds']} interleaved runs, in process",
            *(f"  {label:<46} {ms:8.1f} ms{note}" for label, ms, note in rows),
            f"  /metrics vs status --json  {target.value:5.2f}x   target {target.text}   "
            f"{report.verdict('metrics_vs_status')}".rstrip(),
        ])  # fmt: skip
