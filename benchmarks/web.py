"""`handoffd bench --web`: what the web board's open page costs against `status --json`.

The project is the board scenario's (`benchmarks.board.Layout`): 1,000 open cards of every
colour in dependency chains, over 6 roles.  In one run, interleaved so a drifting machine
affects both alike, it times in process:

- `status --json` (scan, projection, JSON text), as the board scenario does;
- the open page `/` as the server renders it (scan, projection, the HTML of every card);
- the live fragment the page re-fetches every second.

Target: the page in under 3x the time of `status --json`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.board import Layout, board_json, interleaved
from benchmarks.scenario import Report, Scenario, Target, progress

TARGET = 3.0


@dataclass
class WebSizes:
    open_cards: int = 1000
    rounds: int = 15


@dataclass
class Timed:
    medians_ms: dict[str, float]
    sizes: dict[str, int]  # bytes of what each job made


class Web(Scenario[WebSizes, Layout, Timed]):
    name = key = "web"
    full, quick = WebSizes(), WebSizes(open_cards=60, rounds=3)

    def build(self, base: str, sizes: WebSizes) -> Layout:
        progress(f"web: building {sizes.open_cards:,} open cards")
        layout = Layout(os.path.join(base, "web"), sizes.open_cards, 0)
        layout.build(time.time())
        return layout

    def measure(self, built: Layout, sizes: WebSizes) -> Timed:
        from handoffd.board import cards  # the web stack: only this scenario needs it
        from handoffd.board.web.app import Board

        pages = Board(built.root, cards.WINDOW_S, time.time)
        medians, made = interleaved({
            "status": lambda: board_json(built.root),
            "page": lambda: len(pages.open_html().encode()),
            "fragment": lambda: len(pages.live(*pages.project(include_green=False)).encode()),
        }, sizes.rounds)  # fmt: skip
        return Timed(medians, made)

    def figures(self, measured: Timed, sizes: WebSizes) -> dict[str, Any]:
        med = measured.medians_ms
        return {
            "open_cards": sizes.open_cards,
            "rounds": sizes.rounds,
            "status_json_ms": round(med["status"], 2),
            "page_ms": round(med["page"], 2),
            "fragment_ms": round(med["fragment"], 2),
            "page_vs_status": round(med["page"] / med["status"], 3),
            "page_bytes": measured.sizes["page"],
            "status_json_bytes": measured.sizes["status"],
        }

    def targets(self, figures: Any) -> list[Target]:
        return [Target("page_vs_status", figures["page_vs_status"], "<", TARGET, "x", ".1f")]

    def render(self, report: Report) -> str:
        """The figures as a short table with the verdict."""
        f, target = report.figures, report.targets["page_vs_status"]
        verdict = report.verdict("page_vs_status")
        return "\n".join([
            f"web: {f['open_cards']:,} open cards, 6 roles; medians of {f['rounds']} "
            "interleaved runs, in process",
            f"  {'status --json':<36} {f['status_json_ms']:8.1f} ms  "
            f"{f['status_json_bytes']:>9,} B",
            f"  {'open page / (scan, project, HTML)':<36} {f['page_ms']:8.1f} ms  "
            f"{f['page_bytes']:>9,} B",
            f"  {'live fragment (each refresh)':<36} {f['fragment_ms']:8.1f} ms",
            f"  page vs status --json  {target.value:5.2f}x   target {target.text}   {verdict}"
            .rstrip(),
        ])  # fmt: skip
