"""`handoffd bench --board`: what the board costs against the floor of reading the queue.

A project of 6 roles holds 1,000 open cards of every colour — waiting, blocked, claimed
(fresh heartbeats), taken with an expired claim, failed, stalled in an outbox — in
dependency chains 5 deep, and a copy of it holds 50,000 completed cards of history besides.
In one run, interleaved so a drifting machine affects all alike:

- the floor: a plain loop that opens every open card and reads its header block, and
  lists every `completed/` once;
- `status --json` in process (scan, projection, JSON text) on both projects;
- the same with one open card depending on a completed one, which makes the board list
  history for the look-up;
- `handoffd status` as a person runs it: the installed command, a process of its own
  (start-up, imports, scan, projection, the text board), in the project with history.

Targets (docs/protocol.md §8): in process at most 2x the floor, the command at most 3x,
and 1.2x from 0 to 50,000 of history.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.scenario import Report, Scenario, Target, progress
from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.ops import views
from handoffd.ops.context import resolve_context
from testbed import Project, Seat, handoff_id, make_project, queued, stamped, write

ROLES = ("lead", "coder", "cleaner", "QA", "docs", "ops")
SEATS = tuple(Seat(role, f"wt/{role}", "batch", "bench") for role in ROLES)
BATCH = "batch_20260101T000000Z_000001"
SENT_AT = 1_767_225_600.0  # 2026-01-01, the time every card's id carries
HEARTBEAT_OLD_S = 3 * 3600.0
PAST = 6 * 3600.0  # open cards arrived this long ago
KINDS = ("new", "blocked", "claimed", "expired", "failed", "stalled")  # cycled per card
BODY = "Re-read your role and constitution.\n\n" + "benchmark payload line.\n" * 16
STATUS_TARGET, GROWTH_TARGET = 2.0, 1.2
COMMAND_TARGET = 3.0  # `handoffd status`, a process of its own, against the floor


@dataclass
class BoardSizes:
    open_cards: int = 1000
    history: int = 50_000
    rounds: int = 15


class Layout:
    """A board project: `open_cards` cards in chains of `depth`, `history` completed ones."""

    def __init__(self, root: str, open_cards: int, history: int, depth: int = 5) -> None:
        self.root = root
        self.open_cards = open_cards
        self.history = history
        self.depth = depth
        self.project: Project = make_project(Path(root), SEATS)

    def path(self, role: str, *names: str) -> str:
        return os.path.join(self.project.handoffs(role), *names)

    def build(self, now: float) -> None:
        """Lay the project out: heartbeats, the open cards, the history."""
        os.makedirs(os.path.join(self.root, ".swarmforge", "daemon"))
        for n, role in enumerate(ROLES):
            beat = now - (60 if n % 2 == 0 else HEARTBEAT_OLD_S)  # half fresh, half expired
            write(self.path(role, "heartbeat"), f"agent: bench-{role}\nconversation: \n".encode(),
                  mtime=beat)  # fmt: skip
        previous: str | None = None
        for n in range(self.open_cards):
            previous = self._open_card(n, now, None if n % self.depth == 0 else previous)
        for _ in range(self.history):
            self._completed(now)

    def _open_card(self, n: int, now: float, depends_on: str | None) -> str:
        kind = KINDS[n % len(KINDS)]
        sender, recipient = ROLES[n % len(ROLES)], ROLES[(n + 1) % len(ROLES)]
        if kind == "claimed":  # a role whose heartbeat is fresh
            recipient = ROLES[(n // 2 * 2) % len(ROLES)]
            sender = ROLES[(ROLES.index(recipient) + 1) % len(ROLES)]
        elif kind == "expired":
            recipient = ROLES[(n // 2 * 2 + 1) % len(ROLES)]
            sender = ROLES[(ROLES.index(recipient) + 1) % len(ROLES)]
        extra = [("depends_on", depends_on)] if depends_on else []
        if kind == "blocked":
            extra.append(("blocked_reason", "waiting for the operator to approve the merge"))
        ident, name, data = self._file(sender, recipient, extra, enqueued=now - PAST)
        if kind in ("failed", "stalled"):
            folder = Box.FAILED if kind == "failed" else Box.OUTBOX
            write(self.path(sender, folder, name), data, mtime=now - PAST)
            if kind == "failed":
                write(self.path(sender, folder, name + ".error"), b"Unknown recipient.\n")
        else:
            inside = (Box.IN_PROCESS, BATCH) if kind in ("claimed", "expired") else (Box.NEW,)
            write(self.path(recipient, *inside, name), data)
        return ident

    def _completed(self, now: float) -> None:
        seq = self.project.sequence
        sender, recipient = ROLES[seq % len(ROLES)], ROLES[(seq + 1) % len(ROLES)]
        _, name, data = self._file(sender, recipient, [], enqueued=now - 30 * 86400)
        write(self.path(recipient, Box.COMPLETED, name), data)

    def _file(
        self, sender: str, recipient: str, extra: list[tuple[str, str]], enqueued: float
    ) -> tuple[str, str, bytes]:
        """A delivered copy as the daemon writes it: ~600 bytes, headers then a body."""
        seq = self.project.next_sequence()
        ident = handoff_id(sender, seq, SENT_AT)
        name, handoff = queued(ident, sender, [recipient], BODY, ("type", "git_handoff"),
                               ("role", sender), ("task", f"task-{seq % 97}"),
                               ("commit", "a1b2c3d4e5"), *extra, when=enqueued)  # fmt: skip
        return ident, name, stamped(handoff, recipient, enqueued).render()

    def depend_on_history(self) -> None:
        """Make the first open card depend on a completed one (the board then lists history)."""
        new = self.path(ROLES[1], Box.NEW)
        first = os.path.join(new, sorted(os.listdir(new))[0])
        target = sorted(os.listdir(self.path(ROLES[1], Box.COMPLETED)))[0]
        handoff = hf.read(first)
        handoff.set("depends_on", hf.name_id(target))
        write(first, handoff.render())


# --- what is timed ----------------------------------------------------------------------


def floor(layout: Layout) -> int:
    """The floor: open every open card and read its header block; list every completed/
    once.  Returns how many files it touched (so nothing is optimised away)."""
    touched = 0
    for role in ROLES:
        for folder in (Box.OUTBOX, Box.FAILED, Box.NEW, Box.IN_PROCESS):
            touched += _read_heads(layout.path(role, folder))
        try:
            with os.scandir(layout.path(role, Box.COMPLETED)) as entries:
                touched += sum(1 for _ in entries)
        except FileNotFoundError:
            pass
    return touched


def _read_heads(directory: str) -> int:
    touched = 0
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if entry.is_dir():
            touched += _read_heads(entry.path)
        elif entry.name.endswith(".handoff"):
            with open(entry.path, "rb") as file:
                head = file.read(4096)
                while b"\n\n" not in head and (more := file.read(4096)):
                    head += more
            touched += 1
    return touched


def board_json(root: str) -> int:
    """`handoffd status --json` in process (scan, projection, JSON text): its length."""
    return len(views.status(resolve_context(root, needs_role=False), json=True).out)


def status_command() -> list[str]:
    """The installed `handoffd` next to this interpreter (else the same through `-m`), with
    the package byte-compiled first, as an install leaves it."""
    import handoffd

    compileall.compile_dir(os.path.dirname(handoffd.__file__), quiet=1)
    path = os.path.join(os.path.dirname(sys.executable), "handoffd")
    if os.path.exists(path):
        return [path, "status"]
    return [sys.executable, "-m", "handoffd", "status"]


def run_status(command: list[str], root: str) -> int:
    """`handoffd status` run in `root` as a person runs it, its board thrown away: 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMFORGE_")}
    subprocess.run(command, cwd=root, env=env, stdout=subprocess.DEVNULL, check=True)
    return 0


def command_ratio(layout: Layout, rounds: int) -> dict[str, float]:
    """The floor and `handoffd status` in `layout`, interleaved: their medians (ms) and
    the command's ratio to the floor (the figures the full run and `--board` show)."""
    command = status_command()
    medians, _ = interleaved({
        "floor": lambda: floor(layout),
        "command": lambda: run_status(command, layout.root),
    }, rounds)  # fmt: skip
    return {
        "floor_ms": round(medians["floor"], 2),
        "command_ms": round(medians["command"], 2),
        "command_vs_floor": round(medians["command"] / medians["floor"], 3),
    }


def interleaved(
    jobs: dict[str, Callable[[], int]], rounds: int
) -> tuple[dict[str, float], dict[str, int]]:
    """Medians (ms) of each job over `rounds`, run in order, then in reverse, and so on;
    and what each job returned when run once first, untimed, to warm the page cache, the
    imports and the template cache."""
    warm = {key: job() for key, job in jobs.items()}
    runs: dict[str, list[float]] = {key: [] for key in jobs}
    for n in range(rounds):
        for key in list(jobs) if n % 2 == 0 else list(jobs)[::-1]:
            started = time.perf_counter()
            jobs[key]()
            runs[key].append(time.perf_counter() - started)
    return {key: statistics.median(values) * 1000 for key, values in runs.items()}, warm


def command_target(ratio: float) -> Target:
    return Target("status_command_vs_floor", ratio, "<=", COMMAND_TARGET, "x", ".1f")


class Board(Scenario[BoardSizes, tuple[Layout, Layout, Layout], dict[str, float]]):
    name = key = "board"
    full, quick = BoardSizes(), BoardSizes(open_cards=60, history=500, rounds=3)

    def build(self, base: str, sizes: BoardSizes) -> tuple[Layout, Layout, Layout]:
        """The project without history, with it, and with one dependency on it."""
        now, made = time.time(), []
        for name, history in (("h0", 0), ("hN", sizes.history), ("hN-dep", sizes.history)):
            progress(f"board: building {sizes.open_cards:,} open cards, {history:,} of history")
            layout = Layout(os.path.join(base, name), sizes.open_cards, history)
            layout.build(now)
            made.append(layout)
        made[2].depend_on_history()
        return made[0], made[1], made[2]

    def measure(self, built: tuple[Layout, Layout, Layout], sizes: BoardSizes) -> dict[str, float]:
        empty, full, linked = built
        command = status_command()
        medians, _ = interleaved({
            "floor": lambda: floor(full),
            "empty": lambda: board_json(empty.root),
            "full": lambda: board_json(full.root),
            "linked": lambda: board_json(linked.root),
            "command": lambda: run_status(command, full.root),
        }, sizes.rounds)  # fmt: skip
        return medians

    def figures(self, measured: dict[str, float], sizes: BoardSizes) -> dict[str, Any]:
        med = measured
        return {
            "open_cards": sizes.open_cards,
            "history": sizes.history,
            "rounds": sizes.rounds,
            "floor_ms": round(med["floor"], 2),
            "status_empty_history_ms": round(med["empty"], 2),
            "status_ms": round(med["full"], 2),
            "status_with_history_dependency_ms": round(med["linked"], 2),
            "status_vs_floor": round(med["full"] / med["floor"], 3),
            "history_growth": round(med["full"] / med["empty"], 3),
            "history_dependency_vs_floor": round(med["linked"] / med["floor"], 3),
            "status_command_ms": round(med["command"], 2),
            "status_command_vs_floor": round(med["command"] / med["floor"], 3),
        }

    def targets(self, figures: Any) -> list[Target]:
        return [
            Target("status_vs_floor", figures["status_vs_floor"], "<=", STATUS_TARGET, "x", ".1f"),
            Target("history_growth", figures["history_growth"], "<=", GROWTH_TARGET, "x", ".1f"),
            command_target(figures["status_command_vs_floor"]),
        ]

    def render(self, report: Report) -> str:
        """The figures as a short table with the two verdicts."""
        f, target = report.figures, report.targets
        rows = [
            ("floor (read open headers, list completed/)", f["floor_ms"], ""),
            ("status --json, no history", f["status_empty_history_ms"], ""),
            (f"status --json, {f['history']:,} of history", f["status_ms"], ""),
            ("... one dependency on a completed card", f["status_with_history_dependency_ms"],
             f"   ({f['history_dependency_vs_floor']:.2f}x floor)"),
            ("handoffd status (the command, a process)", f["status_command_ms"], ""),
        ]  # fmt: skip
        judged = [
            (label, target[name], report.verdict(name))
            for label, name in (("status vs floor", "status_vs_floor"),
                                ("history 0 -> N", "history_growth"),
                                ("command vs floor", "status_command_vs_floor"))
        ]  # fmt: skip
        return "\n".join([
            f"board: {f['open_cards']:,} open cards in chains 5 deep, 6 roles, "
            f"{f['history']:,} completed; medians of {f['rounds']} interleaved runs",
            *(f"  {label:<44} {ms:8.1f} ms{note}" for label, ms, note in rows),
            *(f"  {label:<20} {t.value:5.2f}x   target {t.text}   {verdict}".rstrip()
              for label, t, verdict in judged),
        ])  # fmt: skip
