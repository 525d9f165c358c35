"""`handoffd bench --web`: what the web board's open page costs against `status --json`.

The project is the board benchmark's (`handoffd.board.benchmark.Layout`): 1,000 open
cards of every colour in dependency chains, over 6 roles.  In one run, interleaved so a
drifting machine affects both alike, it times in process:

- `status --json` (scan, projection, JSON text), as the board benchmark does;
- the open page `/` as the server renders it (scan, projection, the HTML of every card);
- the live fragment the page re-fetches every second.

Target (issue 11): the page in under 3x the time of `status --json`.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from handoffd.board import benchmark, cards
from handoffd.board.web.app import Board

TARGET = 3.0


def measure(base: str, open_cards: int, rounds: int) -> dict[str, Any]:
    """Build the project, then time each job `rounds` times, in alternating order."""
    _progress(f"web: building {open_cards:,} open cards")
    layout = benchmark.Layout(os.path.join(base, "web"), open_cards, 0)
    layout.build(time.time())
    pages = Board(layout.root, cards.WINDOW_S, time.time)
    sizes: dict[str, int] = {}
    jobs: dict[str, Callable[[], int]] = {
        "status": lambda: benchmark.board_json(layout),
        "page": lambda: len(pages.open_html().encode()),
        "fragment": lambda: len(pages.live(*pages.project(include_green=False)).encode()),
    }
    for key, job in jobs.items():
        sizes[key] = job()  # warm the page cache, the imports and the template cache
    runs: dict[str, list[float]] = {key: [] for key in jobs}
    for n in range(rounds):
        for key in list(jobs) if n % 2 == 0 else list(jobs)[::-1]:
            started = time.perf_counter()
            jobs[key]()
            runs[key].append(time.perf_counter() - started)
    med = {key: statistics.median(values) * 1000 for key, values in runs.items()}
    return {
        "open_cards": open_cards,
        "rounds": rounds,
        "status_json_ms": round(med["status"], 2),
        "page_ms": round(med["page"], 2),
        "fragment_ms": round(med["fragment"], 2),
        "page_vs_status": round(med["page"] / med["status"], 3),
        "page_bytes": sizes["page"],
        "status_json_bytes": sizes["status"],
    }


def render(figures: dict[str, Any]) -> str:
    """The figures as a short table with the verdict."""
    f = figures
    ratio = f["page_vs_status"]
    verdict = "PASS" if ratio < TARGET else "MISS"
    return "\n".join([
        f"web: {f['open_cards']:,} open cards, 6 roles; medians of {f['rounds']} "
        "interleaved runs, in process",
        f"  {'status --json':<36} {f['status_json_ms']:8.1f} ms  {f['status_json_bytes']:>9,} B",
        f"  {'open page / (scan, project, HTML)':<36} {f['page_ms']:8.1f} ms  "
        f"{f['page_bytes']:>9,} B",
        f"  {'live fragment (each refresh)':<36} {f['fragment_ms']:8.1f} ms",
        f"  page vs status --json  {ratio:5.2f}x   target < {TARGET:.1f}x   {verdict}",
    ])  # fmt: skip


def _progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def run(directory: str | None, quick: bool) -> dict[str, Any]:
    """The whole web scenario in a temp dir (removed afterwards)."""
    import shutil

    base = tempfile.mkdtemp(prefix="handoffd-web-bench-", dir=directory)
    try:
        if quick:
            return measure(base, open_cards=60, rounds=3)
        return measure(base, open_cards=1000, rounds=15)
    finally:
        shutil.rmtree(base, ignore_errors=True)
