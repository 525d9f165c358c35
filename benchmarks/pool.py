"""`handoffd bench --pool`: several agents behind one role (docs/protocol.md §17).

- The drain: a pool of 4 scripted members (processes running the helpers' own operations
  in a loop: take, spend `work_s` on the task, finish) drains 200 tasks from the pool's
  `new/`; against the ideal, tasks x work / members (10 s).
- Claim conflicts: every claim each member tries (one rename) and how many it lost
  (`ENOENT`: another member renamed the file first), per 1,000 claims, in the drain and
  in a tight race (the same members with no work between takes, over 1,000 tasks); and
  what a lost race costs: a take that lost one or more races against one that lost none.
- The board: `status --json` in process with a pool of 32 members holding 1,000 open
  cards (waiting in the pool, and claimed into members' batches), against the same files
  with the pool's row and its members as plain roles.

Targets: the drain within 1.25x the ideal; the board with a pool within 1.2x of without.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.board import board_json, interleaved
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from handoffd.core import config
from handoffd.core import handoff as hf
from testbed import queued, stamped, write
from testbed.project import make_pool_project

DRAIN_TARGET, BOARD_TARGET = 1.25, 1.2
BODY = "Re-read your role and constitution.\n\n" + "benchmark payload line.\n" * 16
# One member: the helpers' own take and finish, in process, each take timed and its lost
# races counted (a claim is one rename; a lost one is the rename's FileNotFoundError).
MEMBER = """
import json, sys, time
from handoffd.queue import inbox
from handoffd.ops import queue
from handoffd.ops.context import resolve_context
lost = [0]
tries = [0]
claim = inbox._claim
def counted(source, target):
    tries[0] += 1
    won = claim(source, target)
    lost[0] += not won
    return won
inbox._claim = counted
work = float(sys.argv[1])
context = resolve_context()
print("ready", flush=True)
sys.stdin.readline()
takes = []
start = time.perf_counter()
result = queue.take_task(context)
while "NO_TASK" not in result.out:
    time.sleep(work)
    before, at = lost[0], time.perf_counter()
    result = queue.finish_task(context)
    takes.append((time.perf_counter() - at, lost[0] - before))
print(json.dumps({"claims": tries[0], "lost": lost[0], "takes": takes,
                  "seconds": time.perf_counter() - start}))
"""


@dataclass
class PoolSizes:
    members: int = 4
    tasks: int = 200
    work_s: float = 0.2
    race_tasks: int = 1000
    board_members: int = 32
    open_cards: int = 1000
    rounds: int = 15


def lay_tasks(root: Path, pool: str, count: int) -> None:
    """`count` copies delivered to the pool, waiting in its `new/`."""
    for n in range(count):
        ident = hf.compose_id(f"20260101T000000{n:06d}Z", n, "coder")
        name, handoff = queued(ident, "coder", [pool], BODY, ("type", "note"),
                               ("message", f"task {n}"))  # fmt: skip
        write(root / config.POOLS / pool / "inbox" / "new" / name,
              stamped(handoff, pool).render())  # fmt: skip


def drain(root: Path, members: int, work_s: float) -> dict[str, Any]:
    """Start every member at once; their outcomes, and the wall time to the last's exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWARMFORGE_")}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", MEMBER, str(work_s)],
            cwd=root / f"cleaner-{k}",
            env={**env, "SWARMFORGE_ROLE": f"cleaner-{k}"},
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for k in range(1, members + 1)
    ]
    for worker in workers:  # each imported and resolved: the clock starts after start-up
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            raise BenchError("a pool member did not start")
    started = time.perf_counter()
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    outs = [worker.communicate(timeout=600)[0] for worker in workers]
    seconds = time.perf_counter() - started
    if any(worker.returncode for worker in workers):
        raise BenchError(f"a pool member failed: {[w.returncode for w in workers]}")
    found = [json.loads(out) for out in outs]
    takes = [take for one in found for take in one["takes"]]
    return {
        "seconds": seconds,
        "claims": sum(one["claims"] for one in found),
        "lost": sum(one["lost"] for one in found),
        "per_member": [len(one["takes"]) for one in found],
        "clean_ms": [t * 1000 for t, lost in takes if not lost],
        "raced_ms": [t * 1000 for t, lost in takes if lost],
    }


def board_layout(root: Path, members: int, cards: int, pooled: bool) -> Path:
    """`cards` open cards, 60% waiting for the pool and 40% in members' batches: with the
    pool's row (`pooled`), or the same files under plain roles."""
    project = make_pool_project(root, size=members, mode="batch")
    tsv = root / ".swarmforge" / "roles.tsv"
    if not pooled:  # the same rows, none a pool: the waiting files in a plain role's new/
        rows = tsv.read_text().splitlines()[1:]
        plain = []
        for row in rows:
            fields = row.split("\t")
            if len(fields) > 9 and fields[9].startswith(config.POOL_ROW):
                fields[2] = str(root / "waiting")
            plain.append("\t".join(fields[:9]))
        tsv.write_text("\n".join(plain) + "\n")
    waiting = (root / config.POOLS / "cleaner") if pooled else root / "waiting" / ".swarmforge" / (
        "handoffs")  # fmt: skip
    for n in range(cards):
        ident = hf.compose_id(f"20260101T000000{n:06d}Z", n, "coder")
        k = n % members + 1
        recipient = "cleaner" if pooled or n % 10 < 6 else f"cleaner-{k}"
        name, handoff = queued(ident, "coder", ["cleaner"], BODY, ("type", "note"),
                               ("message", f"task {n}"))  # fmt: skip
        copy = stamped(handoff, recipient)
        if n % 10 < 6:
            write(waiting / "inbox" / "new" / name, copy.render())
        else:
            copy.set("dequeued_at", copy.get("enqueued_at") or "")
            copy.set("claimed_by", f"cleaner-{k}")
            batch = project.box(f"cleaner-{k}", "inbox/in_process") / "batch_20260101T000000Z_1"
            write(batch / name, copy.render())
    return root


class Pool(Scenario[PoolSizes, dict[str, Path], dict[str, Any]]):
    name = key = "pool"
    full = PoolSizes()
    quick = PoolSizes(tasks=12, work_s=0.02, race_tasks=40, board_members=4, open_cards=40,
                      rounds=2)  # fmt: skip

    def build(self, base: str, sizes: PoolSizes) -> dict[str, Path]:
        cards, size = f"{sizes.open_cards:,}", sizes.board_members
        progress(f"pool: {sizes.tasks} tasks for {sizes.members} members, {cards} open "
                 f"cards for a pool of {size}")  # fmt: skip
        built = {}
        for name, count in (("drain", sizes.tasks), ("race", sizes.race_tasks)):
            built[name] = make_pool_project(Path(base) / name, size=sizes.members).root
            lay_tasks(built[name], "cleaner", count)
        for name, pooled in (("pooled", True), ("plain", False)):
            built[name] = board_layout(Path(base) / name, sizes.board_members,
                                       sizes.open_cards, pooled)  # fmt: skip
        return built

    def measure(self, built: dict[str, Path], sizes: PoolSizes) -> dict[str, Any]:
        progress("pool: the drain")
        drained = drain(built["drain"], sizes.members, sizes.work_s)
        progress("pool: the tight race")
        raced = drain(built["race"], sizes.members, 0.0)
        progress("pool: status --json with and without the pool")
        medians, _ = interleaved({
            "plain": lambda: board_json(str(built["plain"])),
            "pooled": lambda: board_json(str(built["pooled"])),
        }, sizes.rounds)  # fmt: skip
        return {"drain": drained, "race": raced, "board": medians}

    def figures(self, measured: dict[str, Any], sizes: PoolSizes) -> dict[str, Any]:
        drained, raced, board = measured["drain"], measured["race"], measured["board"]
        ideal = sizes.tasks * sizes.work_s / sizes.members
        every = drained["clean_ms"] + raced["clean_ms"]
        lost = drained["raced_ms"] + raced["raced_ms"]
        return {
            "members": sizes.members,
            "tasks": sizes.tasks,
            "work_s": sizes.work_s,
            "drain_s": round(drained["seconds"], 2),
            "ideal_s": round(ideal, 2),
            "drain_vs_ideal": round(drained["seconds"] / ideal, 3),
            "per_member": drained["per_member"],
            "drain_conflicts_per_1000": round(1000 * drained["lost"] / drained["claims"], 2),
            "race_tasks": sizes.race_tasks,
            "race_claims": raced["claims"],
            "race_conflicts_per_1000": round(1000 * raced["lost"] / raced["claims"], 2),
            "race_per_member": raced["per_member"],
            "take_ms_no_lost_race": round(statistics.median(every), 2) if every else None,
            "take_ms_lost_race": round(statistics.median(lost), 2) if lost else None,
            "takes_with_lost_race": len(lost),
            "board_members": sizes.board_members,
            "open_cards": sizes.open_cards,
            "status_plain_ms": round(board["plain"], 2),
            "status_pool_ms": round(board["pooled"], 2),
            "status_pool_vs_plain": round(board["pooled"] / board["plain"], 3),
        }

    def targets(self, figures: Any) -> list[Target]:
        return [
            Target("drain_vs_ideal", figures["drain_vs_ideal"], "<=", DRAIN_TARGET, "x", ".2f"),
            Target(
                "status_pool_vs_plain",
                figures["status_pool_vs_plain"],
                "<=",
                BOARD_TARGET,
                "x",
                ".1f",
            ),
        ]

    def render(self, report: Report) -> str:
        f, target = report.figures, report.targets
        cost = ("no take lost a race" if f["take_ms_lost_race"] is None else
                f"{f['take_ms_lost_race']:.2f} ms with a lost race vs "
                f"{f['take_ms_no_lost_race']:.2f} ms without "
                f"({f['takes_with_lost_race']} such takes)")  # fmt: skip
        drain, board = target["drain_vs_ideal"], target["status_pool_vs_plain"]
        return "\n".join([
            f"pool: {f['members']} members x {f['work_s']} s/task draining {f['tasks']} tasks",
            f"  drain                {f['drain_s']:8.2f} s   ideal {f['ideal_s']:.2f} s   "
            f"{drain.value:.2f}x   target {drain.text}   {report.verdict('drain_vs_ideal')}",
            f"  tasks per member     {', '.join(map(str, f['per_member']))}",
            f"  claim conflicts      {f['drain_conflicts_per_1000']:.2f} per 1,000 claims "
            f"(drain); {f['race_conflicts_per_1000']:.2f} per 1,000 in a tight race of "
            f"{f['race_tasks']:,} tasks ({', '.join(map(str, f['race_per_member']))})",
            f"  a take's median      {cost}",
            f"  status --json        {f['status_pool_ms']:8.1f} ms with a pool of "
            f"{f['board_members']} and {f['open_cards']:,} open cards, "
            f"{f['status_plain_ms']:.1f} ms without   {board.value:.2f}x   "
            f"target {board.text}   {report.verdict('status_pool_vs_plain')}",
        ]).rstrip()  # fmt: skip
