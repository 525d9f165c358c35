"""`handoffd demo`: a live two-agent swarm, from nothing to a checked summary.

In a throwaway directory it lays out a coder (task mode) and a cleaner (batch mode)
from the sample configuration, starts a private tmux server whose sessions run the
scripted agents of demo_agent.py, starts the daemon, and watches N round trips
coder → cleaner → coder.  It ends with what happened — handoffs delivered, wake-ups,
pickup latency, and the queue's invariants — and removes what it created.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from handoffd.core import config, limits, project
from handoffd.core import handoff as hf
from handoffd.core.config import Box
from handoffd.core.lifecycle import daemon_path
from handoffd.daemon import audit, swarm
from handoffd.demos.demo_watch import Lookout, busy_wakes, scratch, settle
from handoffd.queue import scan
from handoffd.queue.scan import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.demos.demo_watch import RedCards


@dataclass
class Summary:
    rounds: int
    returned: int
    delivered: int
    wakeups: int
    renotifies: int
    wake_failures: int
    latencies_ms: list[float]
    problems: list[str]
    seconds: float
    busy_wakes: int = 0  # wake-ups typed while the agent's pane was printing
    forced: int = 0  # wake_forced: typed anyway after --idle-wait
    unsubmitted: int = 0  # wake_unsubmitted
    held: list[float] = field(default_factory=list)  # seconds each held wake-up waited
    stalls: int = 0  # cards the board showed red because their role did not answer
    killed: str | None = None  # the role whose agent was killed mid-demo
    killed_at: float | None = None  # seconds into the demo
    red_after: float | None = None  # seconds from the kill to its card turning red
    red_detail: str = ""
    across_hosts: bool = False  # latencies run to the copy's arrival on the other host

    @property
    def ok(self) -> bool:
        if self.problems or self.busy_wakes > self.forced:
            return False
        return self.red_after is not None if self.killed else self.returned == self.rounds


@dataclass
class Wakes:
    """How the demo's agents and daemon treat wake-ups (docs/protocol.md §14)."""

    busy_rate: float = 0.0  # share of tasks after which an agent prints on and on
    idle_after: float = 0.5  # the daemon's --idle-after: brisk, for a demo's short turns
    idle_wait: float = limits.IDLE_WAIT
    kill_agent: str | None = None  # kill this role's agent half-way through
    red_cards: RedCards | None = None  # the board's look-up (a layer above: given by the CLI)

    def daemon_args(self, renotify_after: float) -> tuple[str, ...]:
        return ("--renotify-after", str(renotify_after), "--idle-after", str(self.idle_after),
                "--idle-wait", str(self.idle_wait))  # fmt: skip


def configuration(
    rounds: int, miss_rate: float, seed: int, busy_rate: float = 0.0, events: str = ""
) -> str:
    """The sample configuration, with the scripted agent in place of a person's shell;
    each agent writes its `busy_wake` lines to `<events>/<role>.events`."""
    common = f"--miss-rate {miss_rate} --seed {seed}"
    if busy_rate:
        common += f" --busy-rate {busy_rate}"
    lines = []
    for window in project.parse(project.sample_text(), "sample"):
        starts = f" --rounds {rounds}" if window.mode == "task" else ""
        peer = "cleaner" if window.role == "coder" else "coder"
        record = f" --events {os.path.join(events, window.role + '.events')}" if events else ""
        agent = f"demo {window.worktree} {window.mode} --peer {peer}{starts} {common}{record}"
        lines.append(f"window {window.role} {agent}")
    return "\n".join(lines) + "\n"


def across_hosts(text: str, url: str) -> str:
    """The demo configuration spread over two hosts: the coder on `a`, the cleaner on `b`,
    through the NATS server at `url` (docs/protocol.md §15)."""
    lines = text.splitlines()
    coder = [line for line in lines if line.startswith("window coder ")]
    cleaner = [line for line in lines if line.startswith("window cleaner ")]
    head = [f"project demo{os.getpid()}", f"nats {url}"]
    return "\n".join([*head, "host a", *coder, "host b", *cleaner]) + "\n"


def run(
    rounds: int = 20,
    miss_rate: float = 0.0,
    renotify_after: float = 1.0,
    keep: bool = False,
    seed: int = 1,
    timeout: float | None = None,
    say: Callable[[str], None] = print,
    hosts: int = 1,
    wakes: Wakes | None = None,
) -> Summary:
    """Run the demo; the caller decides what a failed invariant means for its exit code."""
    wakes = wakes or Wakes()
    if hosts > 1:
        return run_hosts(rounds, miss_rate, renotify_after, seed, timeout, say, wakes)
    limit = timeout or 60 + rounds * (3 + 20 * miss_rate + 6 * wakes.busy_rate)
    started = time.monotonic()
    with scratch(keep, say) as (base, root):
        text = configuration(rounds, miss_rate, seed, wakes.busy_rate, base)
        project.init(root, project.parse(text, "demo configuration"))
        socket, sessions = swarm.up(
            root, daemon_args=wakes.daemon_args(renotify_after), tmux_config=os.devnull
        )
        say(f"swarm up in {root}: sessions {', '.join(sessions)} on tmux socket {socket}")
        lookout = Lookout(root, started, wakes.kill_agent, wakes.red_cards)
        returned = _watch(root, rounds, started + limit, say, lookout)
        if lookout.killed is None:
            settle(root, started + limit)
        summary = _summarise(root, rounds, returned, time.monotonic() - started)
        _add_lookout(summary, lookout, base)
    return summary


def run_hosts(
    rounds: int,
    miss_rate: float,
    renotify_after: float,
    seed: int,
    timeout: float | None,
    say: Callable[[str], None],
    wakes: Wakes | None = None,
) -> Summary:
    """`demo --hosts 2`: two project roots on this machine as hosts a and b, and a local
    NATS server (sync_interval always) started and stopped here.  Each daemon wakes its
    agent with the one-host demo's options (`Wakes`): the same run, across two hosts."""
    wakes = wakes or Wakes()
    from handoffd.remote import server, settings, setup

    base = tempfile.mkdtemp(prefix="handoffd-demo-", dir="/tmp")
    roots = {name: os.path.join(base, name) for name in "ab"}
    nats = server.Server(os.path.join(base, "nats"))
    limit = timeout or 60 + rounds * (3 + 20 * miss_rate)
    started = time.monotonic()
    try:
        nats.start()
        server.wait_jetstream(nats.url)
        say(f"nats-server {nats.url} (data in {nats.store}, sync_interval always)")
        text = across_hosts(configuration(rounds, miss_rate, seed), nats.url)
        swarm_conf = project.parse_swarm(text, "demo configuration")
        for name, root in roots.items():
            project.init(root, swarm_conf.windows, text, name, swarm_conf.hosts)
        network = settings.load(roots["a"])
        assert network is not None
        setup.prepare(network)
        # the cleaner's host first: the coder starts sending as soon as its session runs,
        # and its first handoff should find a daemon on the other host to receive it
        args = wakes.daemon_args(renotify_after)
        brought = {name: swarm.up(root, daemon_args=args, tmux_config=os.devnull)
                   for name, root in reversed(roots.items())}  # fmt: skip
        for name, (socket, sessions) in sorted(brought.items()):
            say(f"host {name} up in {roots[name]}: sessions {', '.join(sessions)} on {socket}")
        returned = _watch(roots["a"], rounds, started + limit, say)
        for root in roots.values():
            settle(root, started + limit)
        summary = _summarise_hosts(list(roots.values()), rounds, returned, started)
    finally:
        for root in roots.values():
            if os.path.isdir(os.path.join(root, config.SWARMFORGE)):
                swarm.down(root)
        nats.stop()
        shutil.rmtree(base, ignore_errors=True)
    return summary


def _summarise_hosts(roots: list[str], rounds: int, returned: int, started: float) -> Summary:
    report = audit.audit_hosts(roots)
    problems = list(report.problems)
    failed = report.count(Box.FAILED)
    if failed:
        problems.append(f"{failed} handoff(s) in failed/")
    events = [event for root in roots for event in _log_events(root)]
    latencies: list[float] = []
    for root in roots:
        here = config.this_host(root)
        local = {n: r for n, r in config.load_roles(root).items() if config.is_local(r, here)}
        latencies += _pickup_latencies(local, _received(root))
    return Summary(
        rounds=rounds, returned=returned, delivered=report.count(Box.SENT),
        wakeups=events.count("wake"), renotifies=events.count("renotify"),
        wake_failures=events.count("wake_failed"), latencies_ms=sorted(latencies),
        problems=problems, seconds=time.monotonic() - started, across_hosts=True,
    )  # fmt: skip


def _received(root: str) -> dict[str, str]:
    """File name -> when this host's daemon wrote the copy that came from another host (a
    copy's `enqueued_at` is stamped on the sender's host, before it crosses)."""
    with open(daemon_path(root, "handoffd.log"), encoding="utf-8") as log:
        events = [json.loads(line) for line in log if line.strip()]
    return {e["file"]: e["timestamp"] for e in events if e.get("event") == "received"}


def _watch(
    root: str,
    rounds: int,
    deadline: float,
    say: Callable[[str], None],
    lookout: Lookout | None = None,
) -> int:
    """Print each round trip as the coder completes the cleaner's reply; returns how many.
    A `lookout` watches the board meanwhile (and kills an agent half-way, if asked to)."""
    coder = config.load_roles(root)["coder"]
    shown = 0
    while shown < rounds and time.monotonic() < deadline:
        done = len(scan.listing(coder, (State.COMPLETED,)))
        for n in range(shown + 1, min(done, rounds) + 1):
            say(f"round trip {n}/{rounds} complete: coder → cleaner → coder")
        shown = max(shown, min(done, rounds))
        if lookout is not None and lookout.look(shown, rounds, say):
            return shown  # the killed agent's card is red: nothing more will come back
        time.sleep(0.05)
    if shown < rounds:
        say(f"timed out after {shown} of {rounds} round trips")
    return shown


def _add_lookout(summary: Summary, lookout: Lookout, events: str) -> None:
    """Add what the lookout saw, and the agents' busy_wake lines in `events`, to `summary`."""
    summary.stalls = sum(1 for detail in lookout.red.values() if detail.startswith("not taken"))
    summary.killed = lookout.kill
    summary.killed_at = None if lookout.killed is None else lookout.killed - lookout.started
    summary.red_after, summary.red_detail = lookout.red_after, lookout.red_detail
    summary.busy_wakes = busy_wakes(events)


def _summarise(root: str, rounds: int, returned: int, seconds: float) -> Summary:
    roles = config.load_roles(root)
    report = audit.audit(root, roles)
    problems = list(report.problems)
    failed = report.count(Box.FAILED)
    if failed:
        problems.append(f"{failed} handoff(s) in failed/")
    events = _log_events(root)
    return Summary(
        rounds=rounds,
        returned=returned,
        delivered=report.count(Box.SENT),
        wakeups=events.count("wake"),
        renotifies=events.count("renotify"),
        wake_failures=events.count("wake_failed"),
        latencies_ms=_pickup_latencies(roles),
        problems=problems,
        seconds=seconds,
        forced=events.count("wake_forced"),
        unsubmitted=events.count("wake_unsubmitted"),
        held=_held(root),
    )


def _held(root: str) -> list[float]:
    """How long each wake-up that had to wait for a busy pane waited (over HELD s)."""
    held = []
    with open(daemon_path(root, "handoffd.log"), encoding="utf-8") as log:
        for line in log:
            event = json.loads(line) if '"wake"' in line else {}
            if event.get("event") == "wake" and event.get("waited", 0) > HELD:
                held.append(float(event["waited"]))
    return held


HELD = 1.0  # seconds of waiting that mean the pane was busy, not merely still too briefly


def _log_events(root: str) -> list[str]:
    with open(daemon_path(root, "handoffd.log"), encoding="utf-8") as log:
        return [json.loads(line).get("event", "") for line in log if line.strip()]


def _pickup_latencies(
    roles: dict[str, config.Role], arrived: dict[str, str] | None = None
) -> list[float]:
    """created_at (just before the rename into outbox/) to enqueued_at (the copy's stamp),
    or to its arrival here when it came from another host (`arrived`, by file name)."""
    latencies = []
    for role in roles.values():
        for copy in scan.scan_role(role, (State.COMPLETED,)):
            headers = copy.headers
            end = (arrived or {}).get(copy.name) or headers.get(hf.ENQUEUED_AT)
            latencies.append(_ms_between(headers.get(hf.CREATED_AT), end))
    return sorted(latencies)


def _ms_between(start: str | None, end: str | None) -> float:
    began, ended = hf.epoch(start), hf.epoch(end)
    if began is None or ended is None:
        raise ValueError(f"a copy's times are not §2 times: {start!r}, {end!r}")
    return (ended - began) * 1000


def render(summary: Summary) -> str:
    """The summary table a person reads at the end of the demo."""
    lat = summary.latencies_ms
    cuts = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else []
    lines = [
        "",
        "handoffd demo summary",
        f"  round trips          {summary.returned}/{summary.rounds}",
        f"  handoffs delivered   {summary.delivered}",
        f"  wake-ups sent        {summary.wakeups} ({summary.renotifies} re-notify, "
        f"{summary.wake_failures} failed)",
    ]
    if cuts:
        span = "created_at → in new/ on the other host" if summary.across_hosts else (
            "created_at → enqueued_at")  # fmt: skip
        lines.append(
            f"  pickup latency       p50 {cuts[49]:.1f} ms · p90 {cuts[89]:.1f} ms"
            f" · p99 {cuts[98]:.1f} ms · max {lat[-1]:.1f} ms  ({span})"
        )
    held = summary.held
    longest = f", longest {max(held):.1f} s" if held else ""
    lines += [
        f"  into a busy pane     {summary.busy_wakes} ({summary.forced} forced after --idle-wait); "
        f"{len(held)} held until the pane was idle{longest}",
        f"  unsubmitted          {summary.unsubmitted}",
        f"  stalls turned red    {summary.stalls}",
    ]
    if summary.killed:
        lines.append(_killed_line(summary))
    lines.append(f"  elapsed              {summary.seconds:.1f} s")
    if summary.ok and summary.killed:
        lines.append("  invariants           OK: every handoff delivered exactly once, none "
                     "failed; the killed agent's card showed red")  # fmt: skip
    elif summary.ok:
        lines.append("  invariants           OK: every handoff delivered exactly once, none failed")
    else:
        lines.append("  invariants           BROKEN:")
        lines += [f"    - {problem}" for problem in summary.problems]
        if summary.returned < summary.rounds and not summary.killed:
            lines.append(f"    - only {summary.returned} of {summary.rounds} round trips came back")
        if summary.busy_wakes > summary.forced:
            lines.append(f"    - {summary.busy_wakes - summary.forced} wake-up(s) typed into a "
                         "busy pane without being forced")  # fmt: skip
        if summary.killed and summary.red_after is None:
            lines.append(f"    - {summary.killed}'s card never showed red after its agent died")
    return "\n".join(lines)


def _killed_line(summary: Summary) -> str:
    at = "?" if summary.killed_at is None else f"{summary.killed_at:.1f} s"
    if summary.red_after is None:
        return f"  killed agent         {summary.killed} at {at}: its card never turned red"
    return (f"  killed agent         {summary.killed} at {at}: its card turned red "
            f"{summary.red_after:.1f} s later — {summary.red_detail}")  # fmt: skip
