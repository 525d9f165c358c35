"""`handoffd bench --hosts`: a swarm across two hosts (two project roots here) over a local
nats-server with `sync_interval: always`, against the same daemons' local mail.

In one run, so the figures compare:

- cross-host pickup (a note renamed into coder's outbox on host a, until its copy is
  visible in cleaner's `new/` on host b) beside local pickup (coder to QA, both on a),
  interleaved one by one, p50 and p99;
- the drain of a backlog queued on a while its daemon was down, to b's running daemon,
  timed from the daemons' own logs (a's `started` to b's last `received`), against this
  disk's limit (write, fsync, rename, fsync the folder, one file at a time), measured just
  before it.

Targets: cross-host pickup within 3x of local pickup at the median (a cross-host copy costs
the server's flush and the receiver's own publish on top of a local one), and a drain at a
fifth of the disk's limit or better (each copy is flushed by the sender's journal, the
server and the receiver).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from benchmarks import measures, table
from benchmarks.scenario import BenchError, Report, Scenario, Target, progress
from benchmarks.table import percentile
from handoffd.core import durable, project
from handoffd.core import handoff as hf
from handoffd.core.config import Box, load_roles
from handoffd.remote import server

CONF = """project bench{pid}
nats {url}
host a
window coder shell master task
window QA shell qa task
host b
window cleaner shell cleaner task
"""
TIMEOUT = 30.0  # seconds for one copy to arrive
SPACING = 0.02  # seconds between pickup samples, so each is a pass of its own
HANDOFFD = [sys.executable, "-m", "handoffd"]
PICKUP_VS_LOCAL = 3.0
DRAIN_VS_LIMIT = 0.2


@dataclass
class HostsSizes:
    latency_samples: int = 100
    handoffs: int = 500  # the backlog drained from a to b
    limit_files: int = 300


@dataclass
class Swarm:
    """The two hosts' roots (laid out once the server is up) and the server they share
    (not started)."""

    roots: dict[str, str]
    nats: server.Server
    disk: str  # where the disk's limit is measured


@dataclass
class Measured:
    remote_ms: list[float]
    local_ms: list[float]
    disk_files_per_s: float
    drain_s: float


class Hosts(Scenario[HostsSizes, Swarm, Measured]):
    name = key = "hosts"
    full, quick = HostsSizes(), HostsSizes(latency_samples=5, handoffs=20, limit_files=30)
    tunable = ("latency_samples", "handoffs", "limit_files")

    def build(self, base: str, sizes: HostsSizes) -> Swarm:
        nats = server.Server(os.path.join(base, "nats"))
        roots = {name: os.path.join(base, name) for name in "ab"}
        return Swarm(roots, nats, os.path.join(base, "disk"))

    def measure(self, built: Swarm, sizes: HostsSizes) -> Measured:
        try:
            _start_server(built)
            progress(f"hosts: {sizes.latency_samples} pickups each way")
            _daemons(built.roots, "start")
            remote, local = _pickups(built.roots, sizes.latency_samples)
            _daemons(built.roots, "stop")
            limit = measures.disk_limit(built.disk, sizes.limit_files)
            progress(f"hosts: draining {sizes.handoffs} handoffs from a to b")
            drained = _drain(built.roots, sizes.handoffs)
        finally:
            _daemons(built.roots, "stop")
            built.nats.stop()
        return Measured(remote, local, limit, drained)

    def figures(self, measured: Measured, sizes: HostsSizes) -> dict[str, Any]:
        remote, local = _cuts(measured.remote_ms), _cuts(measured.local_ms)
        drain_per_s = sizes.handoffs / measured.drain_s
        return {
            "cross_host_pickup_ms": remote,
            "local_pickup_ms": local,
            "pickup_vs_local": round(remote["p50"] / local["p50"], 2),
            "drain_handoffs": sizes.handoffs,
            "drain_s": round(measured.drain_s, 2),
            "drain_per_s": round(drain_per_s, 1),
            "disk_files_per_s": round(measured.disk_files_per_s, 1),
            "drain_vs_limit": round(drain_per_s / measured.disk_files_per_s, 3),
        }

    def targets(self, figures: Any) -> list[Target]:
        return [
            Target("pickup_vs_local", figures["pickup_vs_local"], "<=", PICKUP_VS_LOCAL,
                   "x", ".0f"),
            Target("drain_vs_limit", figures["drain_vs_limit"], ">=", DRAIN_VS_LIMIT, "x"),
        ]  # fmt: skip

    def render(self, report: Report) -> str:
        f, row = report.figures, table.Rows(report)
        remote, local = f["cross_host_pickup_ms"], f["local_pickup_ms"]
        rows = [
            row(f"cross-host pickup p50 ({remote['n']} samples)", f"{remote['p50']:.2f} ms"),
            row("cross-host pickup p99", f"{remote['p99']:.2f} ms"),
            row(f"local pickup p50 ({local['n']} samples)", f"{local['p50']:.2f} ms"),
            row("local pickup p99", f"{local['p99']:.2f} ms"),
            row("cross-host / local, p50", f"{f['pickup_vs_local']:.2f}x", "pickup_vs_local"),
            row(f"drain a -> b of {f['drain_handoffs']:,}",
                f"{f['drain_per_s']:,.0f} handoffs/s ({f['drain_s']:.2f} s)"),
            row("disk limit", f"{f['disk_files_per_s']:,.0f} files/s"),
            row("drain / disk limit", f"{f['drain_vs_limit']:.2f}x", "drain_vs_limit"),
        ]  # fmt: skip
        notes = [
            "hosts: two project roots on this machine, one local nats-server with "
            "sync_interval: always;",
            "  coder and QA on host a, cleaner on host b.",
            "pickup: from a note's rename into coder's outbox on a until its copy is in",
            "  cleaner's new/ on b (cross-host) or QA's new/ on a (local), taken in turn.",
            "drain: a backlog queued on a while its daemon was down, from that daemon's",
            "  `started` until b's daemon logs the last copy `received` (both logs).",
            "disk limit: one file at a time, temp write + fsync + rename + directory fsync.",
        ]
        return table.render(report, rows, notes, bytecode=False)


def _start_server(built: Swarm) -> None:
    from handoffd.remote import settings, setup  # the NATS client: only this scenario needs it

    built.nats.start()
    server.wait_jetstream(built.nats.url)
    # laid out once the server listens: its port may have moved at the start
    text = CONF.format(pid=os.getpid(), url=built.nats.url)
    swarm = project.parse_swarm(text, "bench")
    for name, root in built.roots.items():
        project.init(root, swarm.windows, text, name, swarm.hosts)
    network = settings.load(built.roots["a"])
    if network is None:
        raise BenchError("the hosts' configuration names no NATS server")
    setup.prepare(network)


def _daemons(roots: dict[str, str], verb: str) -> None:
    for root in roots.values():
        if os.path.isdir(os.path.join(root, ".swarmforge")):
            done = subprocess.run([*HANDOFFD, verb, root], capture_output=True, text=True,
                                  timeout=60, check=False)  # fmt: skip
            if done.returncode != 0:
                raise BenchError(f"handoffd {verb} {root}: {done.stderr.strip()}")


def _queue(root: str, sender: str, to: str, n: int) -> str:
    """A note made durable in outbox/tmp/ and renamed into `sender`'s outbox (as
    swarm_handoff does); its file name."""
    role = load_roles(root)[sender]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = hf.compose_name("50", hf.compose_id(stamp, n, sender), [to])
    headers = [("id", hf.name_id(name)), ("from", sender), ("to", to), ("priority", "50"),
               ("type", "note"), ("message", "bench"), ("created_at", hf.iso_now())]  # fmt: skip
    data = hf.Handoff(headers, "Re-read your role.\n\nbench\n").render()
    temp = durable.temp_name(role.path(Box.DRAFTS), name)
    durable.create(temp, data)
    os.rename(temp, role.path(Box.OUTBOX, name))
    return name


def _arrived(path: str, deadline: float) -> None:
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise BenchError(f"{path} did not arrive in time")
        time.sleep(0.0002)


def _pickups(roots: dict[str, str], samples: int) -> tuple[list[float], list[float]]:
    """Cross-host and local pickup, interleaved, in milliseconds."""
    cleaner = load_roles(roots["b"])["cleaner"]
    qa = load_roles(roots["a"])["QA"]
    remote: list[float] = []
    local: list[float] = []
    for n in range(samples):
        for to, role, times in (("cleaner", cleaner, remote), ("QA", qa, local)):
            start = time.perf_counter()
            name = _queue(roots["a"], "coder", to, 2 * n + (to == "QA"))
            _arrived(role.path(Box.NEW, name), time.monotonic() + TIMEOUT)
            times.append((time.perf_counter() - start) * 1000)
            time.sleep(SPACING)
    return remote, local


def _cuts(times: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(times, 0.50), 2),
        "p99": round(percentile(times, 0.99), 2),
        "n": len(times),
    }


def _drain(roots: dict[str, str], backlog: int) -> float:
    """A backlog queued on a while its daemon is down, drained to b's running daemon: the
    seconds from a's `started` to b's last `received`, from the daemons' own logs (so the
    interpreter's start-up is not counted)."""
    cleaner = load_roles(roots["b"])["cleaner"]
    names = [_queue(roots["a"], "coder", "cleaner", 100_000 + n) for n in range(backlog)]
    os.sync()  # flush what set-up wrote, so the daemons' fsyncs do not pay for it
    _daemons({"b": roots["b"]}, "start")
    _connected(roots["b"], time.monotonic() + TIMEOUT)
    _daemons({"a": roots["a"]}, "start")
    deadline = time.monotonic() + TIMEOUT + backlog / 20
    for name in names:
        _arrived(cleaner.path(Box.NEW, name), deadline)
    started = max(_when(e) for e in _log(roots["a"]) if e["event"] == "started")
    return max(_received(roots["b"], set(names), deadline)) - started


def _received(root: str, names: set[str], deadline: float) -> list[float]:
    """When the daemon of `root` logged each of `names` received (a copy is in view a
    moment before its line is written)."""
    while True:
        times = [_when(e) for e in _log(root)
                 if e["event"] == "received" and e.get("file") in names]  # fmt: skip
        if len(times) == len(names):
            return times
        if time.monotonic() > deadline:
            raise BenchError(f"{root} logged {len(times)} of {len(names)} copies received")
        time.sleep(0.01)


def _connected(root: str, deadline: float) -> None:
    """Until the daemon of `root` says it reached the server."""
    while not any(e["event"] == "nats_connected" for e in _log(root)):
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon of {root} did not reach the NATS server in time")
        time.sleep(0.01)


def _log(root: str) -> list[dict[str, Any]]:
    path = os.path.join(root, ".swarmforge", "daemon", "handoffd.log")
    try:
        with open(path, "rb") as file:
            return [json.loads(line) for line in file if line.strip()]
    except FileNotFoundError:
        return []


def _when(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(event["timestamp"]).timestamp()
