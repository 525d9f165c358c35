"""`handoffd bench --web`: what the web board's pages cost against `status --json`.

The projects are the board scenario's (`benchmarks.board.Layout`): 1,000 open cards of
every colour in dependency chains, over 6 roles, once without history and once with 50,000
completed cards.  In one run, interleaved so a drifting machine affects all alike, it
times in process:

- `status --json` (scan, projection, JSON text), as the board scenario does;
- the open page `/` as the server renders it (scan, projection, the HTML of every card);
- the live fragment the page re-fetches every second;
- the archive's first page `/archive`, with no completed card and with 50,000, served as
  the open page is (through the app, in process).

Targets: the page in under 3x the time of `status --json`; the archive's first page at
50,000 completed cards within 2x of the open page, and flat (within 1.5x of itself at 0).
The board keeps the archive's names between requests and lists a folder again only when
it changed: the first page after a change (every name listed again) is shown beside them,
without a target.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.board import Layout, board_json, interleaved
from benchmarks.scenario import Report, Scenario, Target, progress
from handoffd.core import limits

TARGET = 3.0
ARCHIVE_VS_PAGE = 2.0
ARCHIVE_GROWTH = 1.5


@dataclass
class WebSizes:
    open_cards: int = 1000
    rounds: int = 15
    history: int = 50_000


@dataclass
class Timed:
    medians_ms: dict[str, float]
    sizes: dict[str, int]  # bytes of what each job made


def _settle_folders(root: str) -> None:
    """Date every folder of the project a minute back, as on a board that has been running:
    the web board lists a folder again only while its mtime is too young to trust."""
    past = time.time() - 60
    for folder, _, _ in os.walk(root):
        os.utime(folder, (past, past))


class _Request:
    """What the archive and the open page read of a request: no page number, no cookie."""

    def __init__(self) -> None:
        self.query_params: dict[str, str] = {}
        self.scope: dict[str, Any] = {"headers": []}


class Web(Scenario[WebSizes, tuple[Layout, Layout], Timed]):
    name = key = "web"
    full, quick = WebSizes(), WebSizes(open_cards=60, rounds=3, history=500)

    def build(self, base: str, sizes: WebSizes) -> tuple[Layout, Layout]:
        made = []
        for name, history in (("web", 0), ("web-archive", sizes.history)):
            progress(f"web: building {sizes.open_cards:,} open cards, {history:,} completed")
            layout = Layout(os.path.join(base, name), sizes.open_cards, history)
            layout.build(time.time())
            _settle_folders(layout.root)
            made.append(layout)
        return made[0], made[1]

    def measure(self, built: tuple[Layout, Layout], sizes: WebSizes) -> Timed:
        from starlette.testclient import TestClient  # the web stack: only this scenario

        from handoffd.web.app import Board, create_app

        bare, full = built
        pages = Board(bare.root, limits.LIVENESS_WINDOW, time.time)
        clients = {layout: TestClient(create_app(layout.root), base_url="http://127.0.0.1:8765")
                   for layout in built}  # fmt: skip

        def served(layout: Layout, path: str) -> int:
            answer = clients[layout].get(path)
            assert answer.status_code == 200, answer.status_code
            return len(answer.content)

        def relisted(layout: Layout) -> int:
            """The first archive page after the history changed: every name listed again."""
            fresh = Board(layout.root, limits.LIVENESS_WINDOW, time.time)
            return len(fresh.archive(_Request()).body)  # type: ignore[arg-type]

        medians, made = interleaved({
            "status": lambda: board_json(bare.root),
            "page": lambda: len(pages.open_html(_Request()).encode()),  # type: ignore[arg-type]
            "fragment": lambda: len(pages.live(*pages.project(include_green=False)).encode()),
            "open_served": lambda: served(bare, "/"),
            "archive_0": lambda: served(bare, "/archive"),
            "archive_n": lambda: served(full, "/archive"),
            "archive_n_relisted": lambda: relisted(full),
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
            "history": sizes.history,
            "archive_0_ms": round(med["archive_0"], 2),
            "archive_n_ms": round(med["archive_n"], 2),
            "archive_n_relisted_ms": round(med["archive_n_relisted"], 2),
            "open_served_ms": round(med["open_served"], 2),
            "archive_vs_page": round(med["archive_n"] / med["open_served"], 3),
            "archive_growth": round(med["archive_n"] / med["archive_0"], 3),
        }

    def targets(self, figures: Any) -> list[Target]:
        return [
            Target("page_vs_status", figures["page_vs_status"], "<", TARGET, "x", ".1f"),
            Target("archive_vs_page", figures["archive_vs_page"], "<=", ARCHIVE_VS_PAGE, "x",
                   ".1f"),
            Target("archive_growth", figures["archive_growth"], "<=", ARCHIVE_GROWTH, "x",
                   ".1f"),
        ]  # fmt: skip

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
            f"  {'open page / served (HTTP, in process)':<36} {f['open_served_ms']:8.1f} ms",
            f"  {'archive page 1, 0 completed':<36} {f['archive_0_ms']:8.1f} ms",
            f"  {'archive page 1, ' + format(f['history'], ',') + ' completed':<36} "
            f"{f['archive_n_ms']:8.1f} ms",
            f"  {'  the first after a change (relisted)':<36} "
            f"{f['archive_n_relisted_ms']:8.1f} ms",
            self._line(report, "archive_vs_page", "archive vs open page  "),
            self._line(report, "archive_growth", f"archive 0 -> {f['history']:,}"),
        ])  # fmt: skip

    def _line(self, report: Report, name: str, label: str) -> str:
        target = report.targets[name]
        return (
            f"  {label:<22} {target.value:5.2f}x   target {target.text}   "
            f"{report.verdict(name)}".rstrip()
        )
