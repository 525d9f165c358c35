"""`handoffd demo --pool N`: a coder and a pool of N cleaners (docs/protocol.md §17), live.

In a throwaway directory a scripted coder sends every task at once to `cleaner`, a pool
of N scripted members each spending a moment on a task and replying to the coder.  With
`--kill-agent cleaner-2` that member's agent is killed -9 half-way while it holds a task:
the daemon (`--reclaim-after` a few seconds, for a demo) gives its claim back to the pool
and another member finishes it.  The summary says who did how many, what was reclaimed,
and whether the queue's invariants hold: every handoff delivered and completed once.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from handoffd.core import config, project
from handoffd.core.config import Box
from handoffd.core.lifecycle import daemon_path
from handoffd.daemon import audit, swarm
from handoffd.demos.demo_watch import Lookout, scratch, settle
from handoffd.queue import scan
from handoffd.queue.scan import State

SHORT_RECLAIM = (
    3.0  # seconds, not the default hour: a demo's short turns renew every heartbeat often
)
WORK_SECONDS = 0.3  # each member's work on a task


@dataclass
class PoolSummary:
    tasks: int
    returned: int
    counts: dict[str, int]  # member -> tasks it completed
    reclaimed: list[dict[str, str]]  # the daemon's `reclaimed` events
    problems: list[str]
    seconds: float
    killed: str | None = None
    held_at_kill: list[str] = field(default_factory=list)  # what the killed member held

    @property
    def ok(self) -> bool:
        if self.problems or self.returned != self.tasks:
            return False
        return not self.killed or bool(self.reclaimed)


def configuration(size: int, tasks: int, seed: int) -> str:
    """The coder sends `tasks` at once; the pool's members each work WORK_SECONDS a task."""
    common = f"--seed {seed}"
    return (
        f"window coder demo master task --peer cleaner --rounds {tasks} --burst {common}\n"
        f"pool cleaner {size} demo task --peer coder --work-seconds {WORK_SECONDS} {common}\n"
    )


def run(
    size: int = 3,
    tasks: int = 24,
    kill: str | None = None,
    seed: int = 1,
    keep: bool = False,
    say: Callable[[str], None] = print,
) -> PoolSummary:
    """Run the pool demo; the caller decides what a broken invariant means for its exit."""
    started = time.monotonic()
    held: list[str] = []
    with scratch(keep, say) as (_, root):
        text = configuration(size, tasks, seed)
        project.init(root, project.parse(text, "demo configuration"), text)
        args = ("--renotify-after", "1.0", "--idle-after", "0.5",
                "--reclaim-after", str(SHORT_RECLAIM))  # fmt: skip
        socket, sessions = swarm.up(root, daemon_args=args, tmux_config=os.devnull)
        say(f"swarm up in {root}: sessions {', '.join(sessions)} on tmux socket {socket}")
        returned = _watch(root, tasks, started + 60 + tasks, say, kill, started, held)
        settle(root, started + 90 + tasks)
        summary = _summarise(root, tasks, returned, time.monotonic() - started)
        summary.killed, summary.held_at_kill = kill, held
    return summary


def _watch(
    root: str,
    tasks: int,
    deadline: float,
    say: Callable[[str], None],
    kill: str | None,
    started: float,
    held: list[str],
) -> int:
    """Print the replies as the coder completes them; kill `kill`'s agent once the pool has
    done a third of the tasks and it holds one (noted in `held`).  Returns the replies."""
    roles = config.load_roles(root)
    coder, shown = roles["coder"], 0
    lookout = Lookout(root, started, kill, None)
    while shown < tasks and time.monotonic() < deadline:
        done = min(len(scan.listing(coder, (State.COMPLETED,))), tasks)
        if done > shown:
            say(f"replies back: {done}/{tasks}")
            shown = done
        if kill and lookout.killed is None and _pool_done(roles) >= tasks // 3:
            holding = [e.name for e in scan.listing(roles[kill], (State.IN_PROCESS,))]
            if holding:
                lookout.look(tasks, tasks, say)  # kills it now
                held += holding
        time.sleep(0.05)
    if shown < tasks:
        say(f"timed out after {shown} of {tasks} replies")
    return shown


def _pool_done(roles: dict[str, config.Role]) -> int:
    """The tasks the pool's members have completed so far (the coder reads replies later)."""
    team = [role for role in roles.values() if role.pool == "cleaner" and not role.is_pool]
    return sum(len(scan.listing(role, (State.COMPLETED,))) for role in team)


def _summarise(root: str, tasks: int, returned: int, seconds: float) -> PoolSummary:
    roles = config.load_roles(root)
    report = audit.audit(root, roles)
    problems = list(report.problems)
    if report.count(Box.FAILED):
        problems.append(f"{report.count(Box.FAILED)} handoff(s) in failed/")
    counts = {
        name: len(scan.listing(role, (State.COMPLETED,)))
        for name, role in roles.items()
        if role.pool == "cleaner" and not role.is_pool
    }
    if sum(counts.values()) != tasks:
        problems.append(f"the pool completed {sum(counts.values())} tasks, not {tasks}")
    with open(daemon_path(root, "handoffd.log"), encoding="utf-8") as log:
        events = [json.loads(line) for line in log if '"reclaimed"' in line]
    reclaimed = [e for e in events if e.get("event") == "reclaimed"]
    for event in reclaimed:  # who finished what was given back
        ident = str(event.get("card", "")).rpartition("@")[0]
        event["finished_by"] = next(
            (
                name
                for name in counts
                if any(e.id == ident for e in scan.listing(roles[name], (State.COMPLETED,)))
            ),
            "nobody",
        )
    return PoolSummary(tasks, returned, counts, reclaimed, problems, seconds)


def render(summary: PoolSummary) -> str:
    """The summary a person reads at the end of the pool demo."""
    lines = ["", "handoffd demo summary (a pool of " f"{len(summary.counts)})",
             f"  replies back         {summary.returned}/{summary.tasks}"]  # fmt: skip
    for member, count in summary.counts.items():
        lines.append(f"  {member:<20} {count} task(s)")
    if summary.killed:
        held = ", ".join(summary.held_at_kill) or "nothing"
        lines.append(f"  killed agent         {summary.killed}, holding {held}")
    for event in summary.reclaimed:
        lines.append(f"  reclaimed            {event.get('card')} from {event.get('member')} "
                     f"({event.get('why')}), finished by {event.get('finished_by')}")  # fmt: skip
    lines.append(f"  elapsed              {summary.seconds:.1f} s")
    if summary.ok:
        lines.append("  invariants           OK: every handoff delivered and completed exactly "
                     "once, none failed, none stranded")  # fmt: skip
    else:
        lines.append("  invariants           BROKEN:")
        lines += [f"    - {problem}" for problem in summary.problems]
        if summary.returned != summary.tasks:
            lines.append(f"    - only {summary.returned} of {summary.tasks} replies came back")
        if summary.killed and not summary.reclaimed:
            lines.append(f"    - nothing {summary.killed} held was reclaimed")
    return "\n".join(lines)
