"""`handoffd bench --board`: what the board costs against the floor of reading the queue.

A throwaway project of 6 roles holds 1,000 open cards of every colour — waiting,
blocked, claimed (fresh heartbeats), taken with an expired claim, failed, stalled in an
outbox — in dependency chains 5 deep, and a copy of it holds 50,000 completed cards of
history besides.  In one run, interleaved so a drifting machine affects all alike:

- the floor: a plain loop that opens every open card and reads its header block, and
  lists every `completed/` once;
- `status --json` in process (scan, projection, JSON text) on both projects;
- the same with one open card depending on a completed one, which makes the board list
  history for the look-up.

Targets (docs/protocol.md §8): at most 2x the floor, and 1.2x from 0 to 50,000 of history.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from handoffd import handoff as hf
from handoffd.config import Box

ROLES = ("lead", "coder", "cleaner", "QA", "docs", "ops")
BATCH = "batch_20260101T000000Z_000001"
HEARTBEAT_OLD_S = 3 * 3600.0
PAST = 6 * 3600.0  # open cards arrived this long ago
KINDS = ("new", "blocked", "claimed", "expired", "failed", "stalled")  # cycled per card


class Layout:
    """A bench project: `open_cards` cards in chains of `depth`, `history` completed ones."""

    def __init__(self, root: str, open_cards: int, history: int, depth: int = 5) -> None:
        self.root = root
        self.open_cards = open_cards
        self.history = history
        self.depth = depth
        self.worktrees = {role: os.path.join(root, "wt", role) for role in ROLES}
        self.seq = 0

    def handoffs(self, role: str, *names: str) -> str:
        return os.path.join(self.worktrees[role], ".swarmforge", "handoffs", *names)

    def build(self, now: float) -> None:
        """Lay the project out: roles.tsv, heartbeats, the open cards, the history."""
        rows = [f"{r}\t{r}\t{p}\t{r}\t{r}\tbench\tbatch\n" for r, p in self.worktrees.items()]
        os.makedirs(os.path.join(self.root, ".swarmforge", "daemon"))
        _write(os.path.join(self.root, ".swarmforge", "roles.tsv"), "".join(rows).encode())
        for n, role in enumerate(ROLES):
            path = self.handoffs(role, "heartbeat")
            _write(path, f"agent: bench-{role}\nconversation: \n".encode())
            beat = now - (60 if n % 2 == 0 else HEARTBEAT_OLD_S)  # half fresh, half expired
            os.utime(path, (beat, beat))
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
            _write(self.handoffs(sender, folder, name), data, mtime=now - PAST)
            if kind == "failed":
                _write(self.handoffs(sender, folder, name + ".error"), b"Unknown recipient.\n")
        else:
            inside = (Box.IN_PROCESS, BATCH) if kind in ("claimed", "expired") else (Box.NEW,)
            _write(self.handoffs(recipient, *inside, name), data)
        return ident

    def _completed(self, now: float) -> None:
        sender, recipient = ROLES[self.seq % len(ROLES)], ROLES[(self.seq + 1) % len(ROLES)]
        _, name, data = self._file(sender, recipient, [], enqueued=now - 30 * 86400)
        _write(self.handoffs(recipient, Box.COMPLETED, name), data)

    def _file(
        self, sender: str, recipient: str, extra: list[tuple[str, str]], enqueued: float
    ) -> tuple[str, str, bytes]:
        """A delivered copy as the daemon writes it: ~600 bytes, headers then a body."""
        self.seq += 1
        ident = f"20260101T000000Z_{self.seq:06d}_from_{sender}"
        headers = [("id", ident), ("from", sender), ("to", recipient), ("priority", "50"),
                   ("type", "git_handoff"), ("role", sender), ("task", f"task-{self.seq % 97}"),
                   ("commit", "a1b2c3d4e5"), *extra, ("created_at", hf.iso_now(enqueued)),
                   ("recipient", recipient), ("enqueued_at", hf.iso_now(enqueued))]  # fmt: skip
        body = "Re-read your role and constitution.\n\n" + "benchmark payload line.\n" * 16
        name = f"50_{ident}_to_{recipient}.handoff"
        return ident, name, hf.Handoff(headers, body).render()

    def depend_on_history(self) -> None:
        """Make the first open card depend on a completed one (the board then lists history)."""
        first = self._first_open()
        completed = self.handoffs(ROLES[1], Box.COMPLETED)
        target = sorted(os.listdir(completed))[0]
        ident = hf.name_id(target)
        handoff = hf.read(first)
        handoff.set("depends_on", ident)
        _write(first, handoff.render())

    def _first_open(self) -> str:
        new = self.handoffs(ROLES[1], Box.NEW)
        return os.path.join(new, sorted(os.listdir(new))[0])


def _write(path: str, data: bytes, mtime: float | None = None) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


# --- what is timed ----------------------------------------------------------------------


def floor(layout: Layout) -> int:
    """The floor: open every open card and read its header block; list every completed/
    once.  Returns how many files it touched (so nothing is optimised away)."""
    touched = 0
    for role in ROLES:
        for folder in (Box.OUTBOX, Box.FAILED, Box.NEW, Box.IN_PROCESS):
            touched += _read_heads(layout.handoffs(role, folder))
        try:
            with os.scandir(layout.handoffs(role, Box.COMPLETED)) as entries:
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


def board_json(layout: Layout) -> int:
    """`handoffd status --json` in process: scan, projection and the JSON text."""
    from handoffd.ops import views
    from handoffd.ops.context import resolve_context

    return len(views.status(resolve_context(layout.root, needs_role=False), json=True).out)


def timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def measure(base: str, open_cards: int, history: int, rounds: int) -> dict[str, Any]:
    """Build the projects, then time each measurement `rounds` times, interleaved."""
    now = time.time()
    empty = Layout(os.path.join(base, "h0"), open_cards, 0)
    full = Layout(os.path.join(base, "hN"), open_cards, history)
    linked = Layout(os.path.join(base, "hN-dep"), open_cards, history)
    for layout in (empty, full, linked):
        _progress(f"board: building {open_cards:,} open cards, {layout.history:,} of history")
        layout.build(now)
    linked.depend_on_history()
    runs: dict[str, list[float]] = {k: [] for k in ("floor", "empty", "full", "linked")}
    jobs: dict[str, Callable[[], int]] = {
        "floor": lambda: floor(full),
        "empty": lambda: board_json(empty),
        "full": lambda: board_json(full),
        "linked": lambda: board_json(linked),
    }
    for job in jobs.values():
        job()  # warm the page cache and the imports: every figure is then a warm one
    for n in range(rounds):
        for key in list(jobs) if n % 2 == 0 else list(jobs)[::-1]:
            runs[key].append(timed(jobs[key]))
    return _figures(runs, open_cards, history, rounds)


def _figures(
    runs: dict[str, list[float]], open_cards: int, history: int, rounds: int
) -> dict[str, Any]:
    med = {key: statistics.median(values) * 1000 for key, values in runs.items()}
    return {
        "open_cards": open_cards,
        "history": history,
        "rounds": rounds,
        "floor_ms": round(med["floor"], 2),
        "status_empty_history_ms": round(med["empty"], 2),
        "status_ms": round(med["full"], 2),
        "status_with_history_dependency_ms": round(med["linked"], 2),
        "status_vs_floor": round(med["full"] / med["floor"], 3),
        "history_growth": round(med["full"] / med["empty"], 3),
        "history_dependency_vs_floor": round(med["linked"] / med["floor"], 3),
    }


def render(figures: dict[str, Any]) -> str:
    """The figures as a short table with the two verdicts."""
    vs_floor, growth, f = figures["status_vs_floor"], figures["history_growth"], figures
    rows = [
        ("floor (read open headers, list completed/)", f["floor_ms"], ""),
        ("status --json, no history", f["status_empty_history_ms"], ""),
        (f"status --json, {f['history']:,} of history", f["status_ms"], ""),
        ("... one dependency on a completed card", f["status_with_history_dependency_ms"],
         f"   ({f['history_dependency_vs_floor']:.2f}x floor)"),
    ]  # fmt: skip
    return "\n".join([
        f"board: {f['open_cards']:,} open cards in chains 5 deep, 6 roles, "
        f"{f['history']:,} completed; medians of {f['rounds']} interleaved runs",
        *(f"  {label:<44} {ms:8.1f} ms{note}" for label, ms, note in rows),
        f"  status vs floor      {vs_floor:5.2f}x   target <= 2.0x   {_verdict(vs_floor <= 2.0)}",
        f"  history 0 -> N       {growth:5.2f}x   target <= 1.2x   {_verdict(growth <= 1.2)}",
    ])  # fmt: skip


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _progress(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def run(directory: str | None, quick: bool) -> dict[str, Any]:
    """The whole board scenario in a temp dir (removed afterwards)."""
    import shutil

    base = tempfile.mkdtemp(prefix="handoffd-board-bench-", dir=directory)
    try:
        if quick:
            return measure(base, open_cards=60, history=500, rounds=3)
        return measure(base, open_cards=1000, history=50_000, rounds=15)
    finally:
        shutil.rmtree(base, ignore_errors=True)
