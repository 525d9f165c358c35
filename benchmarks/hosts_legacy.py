"""`handoffd bench --hosts`: a swarm across two hosts (two project roots here) over a local
nats-server with `sync_interval: always`, against the same daemons' local mail.

In one run, so the figures compare: cross-host pickup (a file renamed into coder's outbox
on host a, until its copy is visible in cleaner's `new/` on host b) beside local pickup
(coder to QA, both on a), p50 and p99; and the drain rate of a backlog from a to b against
this disk's limit (write, fsync, rename, fsync the folder, one file at a time).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from handoffd import durable, project
from handoffd import handoff as hf
from handoffd.config import Box, load_roles
from handoffd.remote import server, settings, setup

CONF = """project bench{pid}
nats {url}
host a
window coder shell master task
window QA shell qa task
host b
window cleaner shell cleaner task
"""
TIMEOUT = 30.0  # seconds for one copy to arrive
HANDOFFD = os.path.join(os.path.dirname(sys.executable), "handoffd")


def run(directory: str | None, quick: bool) -> dict[str, Any]:
    samples, backlog = (5, 20) if quick else (100, 500)
    base = tempfile.mkdtemp(prefix="handoffd-bench-hosts-", dir=directory or "/tmp")
    nats = server.Server(os.path.join(base, "nats"))
    roots = {name: os.path.join(base, name) for name in "ab"}
    try:
        nats.start()
        server.wait_jetstream(nats.url)
        text = CONF.format(pid=os.getpid(), url=nats.url)
        swarm = project.parse_swarm(text, "bench")
        for name, root in roots.items():
            project.init(root, swarm.windows, text, name, swarm.hosts)
        network = settings.load(roots["a"])
        assert network is not None
        setup.prepare(network)
        figures = {"disk_files_per_s": _disk_limit(base, 300 if not quick else 30)}
        _daemons(roots, "start")
        figures.update(_pickups(roots, samples))
        _daemons(roots, "stop")
        figures.update(_drain(roots, backlog))
    finally:
        _daemons(roots, "stop")
        nats.stop()
        shutil.rmtree(base, ignore_errors=True)
    return figures


def _daemons(roots: dict[str, str], verb: str) -> None:
    for root in roots.values():
        if os.path.isdir(os.path.join(root, ".swarmforge")):
            subprocess.run([HANDOFFD, verb, root], capture_output=True, timeout=30, check=False)


def _queue(root: str, sender: str, to: str, n: int) -> str:
    """A note renamed into `sender`'s outbox (as swarm_handoff does); its file name."""
    role = load_roles(root)[sender]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"50_{stamp}_{n:06d}_from_{sender}_to_{to}.handoff"
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
            raise RuntimeError(f"{path} did not arrive within {TIMEOUT} s")
        time.sleep(0.0002)


def _pickups(roots: dict[str, str], samples: int) -> dict[str, Any]:
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
            time.sleep(0.02)
    return {"cross_host_pickup_ms": _cuts(remote), "local_pickup_ms": _cuts(local)}


def _cuts(times: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else times * 99
    return {"p50": round(cuts[49], 2), "p99": round(cuts[98], 2), "n": len(times)}


def _drain(roots: dict[str, str], backlog: int) -> dict[str, Any]:
    """A backlog queued while the daemons are down, timed from their start until every
    copy is visible on host b."""
    cleaner = load_roles(roots["b"])["cleaner"]
    names = [_queue(roots["a"], "coder", "cleaner", 100_000 + n) for n in range(backlog)]
    start = time.perf_counter()
    _daemons(roots, "start")
    deadline = time.monotonic() + TIMEOUT + backlog / 20
    for name in names:
        _arrived(cleaner.path(Box.NEW, name), deadline)
    seconds = time.perf_counter() - start
    return {"drain_handoffs": backlog, "drain_s": round(seconds, 2),
            "drain_per_s": round(backlog / seconds, 1)}  # fmt: skip


def _disk_limit(base: str, files: int) -> float:
    """Files per second of the durable write loop alone, on this disk."""
    folder = os.path.join(base, "disk")
    os.makedirs(folder)
    start = time.perf_counter()
    for n in range(files):
        temp = durable.temp_name(folder, f"f{n}")
        durable.create(temp, b"x" * 400)
        os.rename(temp, os.path.join(folder, f"f{n}"))
        durable.fsync_dir(folder)
    return round(files / (time.perf_counter() - start), 1)


def render(figures: dict[str, Any]) -> str:
    remote, local = figures["cross_host_pickup_ms"], figures["local_pickup_ms"]
    share = figures["drain_per_s"] / figures["disk_files_per_s"]
    return "\n".join([
        "handoffd bench --hosts: two hosts over a local nats-server (sync_interval always)",
        f"  cross-host pickup   p50 {remote['p50']:.1f} ms · p99 {remote['p99']:.1f} ms"
        f"  (n={remote['n']}, outbox on a → new/ on b)",
        f"  local pickup        p50 {local['p50']:.1f} ms · p99 {local['p99']:.1f} ms"
        f"  (n={local['n']}, same daemon, same run)",
        f"  drain a → b         {figures['drain_per_s']:.0f} handoffs/s "
        f"({figures['drain_handoffs']} in {figures['drain_s']:.1f} s, from the daemons' start)",
        f"  disk limit          {figures['disk_files_per_s']:.0f} files/s durable "
        f"(write, fsync, rename, fsync dir): the drain runs at {share:.0%} of it",
    ])  # fmt: skip
