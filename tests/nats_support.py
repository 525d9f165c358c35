"""Support for the tests of a swarm across hosts (docs/protocol.md §15): a real
`nats-server` from the venv, started once per test module on a free loopback port with a
short data folder under /tmp, and "hosts" that are project roots on this machine, each
laid out by the real `handoffd init --host`.

A test module uses it with `nats_server = nats_fixture()` at module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from handoffd.core import config
from handoffd.remote.server import Server, cluster, wait_jetstream
from tests.conftest import BIN, GIT_ENV, wait_for

HANDOFFD = os.path.join(BIN, "handoffd")

SWARM = """project {project}
nats {urls}
host a
window coder shell master task
host b
window cleaner shell cleaner batch
"""


def nats_fixture() -> Any:
    """A module-scoped fixture: one real server for the module's tests."""

    @pytest.fixture(scope="module")
    def nats_server() -> Iterator[Server]:
        store = tempfile.mkdtemp(prefix="hd-js-", dir="/tmp")
        server = Server(store)
        server.start()
        wait_jetstream(server.url)
        try:
            yield server
        finally:
            server.stop()
            shutil.rmtree(store, ignore_errors=True)

    return nats_server


def hosts_fixture() -> Any:
    """A fixture: two hosts, `a` and `b`, on the module's server, both daemons stopped after."""

    @pytest.fixture
    def hosts(tmp_path: Path, nats_server: Server) -> Iterator[list[Host]]:
        made = make_hosts(tmp_path, nats_server.url)
        try:
            yield made
        finally:
            stop_all(made)

    return hosts


_projects = iter(range(1, 1_000_000))


def project_name() -> str:
    """A project name of its own for each test: its own stream, bucket and consumers."""
    return f"t{os.getpid()}x{next(_projects)}"


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SWARMFORGE_ROLE", "TMUX")}
    env.update(GIT_ENV)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    return {**env, **(extra or {})}


def handoffd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HANDOFFD, *args], env=command_env(), capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


class Host:
    """One host of the swarm: a project root laid out by `handoffd init --host NAME`."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name

    @property
    def roles(self) -> dict[str, config.Role]:
        return config.load_roles(str(self.root))

    def box(self, role: str, box: str) -> Path:
        return Path(self.roles[role].path(box))

    def names(self, role: str, box: str) -> list[str]:
        folder = self.box(role, box)
        return (
            sorted(n for n in os.listdir(folder) if n.endswith(".handoff"))
            if folder.is_dir()
            else []
        )

    def log(self) -> Path:
        return self.root / ".swarmforge" / "daemon" / "handoffd.log"

    def start(self) -> None:
        done = handoffd("start", str(self.root))
        assert done.returncode == 0, done.stderr

    def stop(self) -> None:
        handoffd("stop", str(self.root))

    def pid(self) -> int | None:
        try:
            return int((self.root / ".swarmforge" / "daemon" / "handoffd.pid").read_text())
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """kill -9 the daemon, and wait until it is gone."""
        pid = self.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        wait_for(lambda: not _alive(pid), timeout=10, what=f"daemon {pid} to die")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours is as good as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def make_hosts(
    base: Path,
    urls: str,
    project: str | None = None,
    names: str = "ab",
    text: str = SWARM,
    prepare: bool = True,
) -> list[Host]:
    """Two (or more) hosts of one swarm, laid out by the real `init` with the same conf
    (`prepare=False`: by `project.init` alone, without reaching the servers)."""
    from handoffd.core import project as layout

    conf = text.format(project=project or project_name(), urls=urls)
    hosts = []
    for name in names:
        root = base / name
        root.mkdir(parents=True)
        (root / "swarm.conf").write_text(conf)
        if prepare:
            done = handoffd("init", "--host", name, "--config", str(root / "swarm.conf"),
                            str(root))  # fmt: skip
            assert done.returncode == 0, done.stderr
        else:
            swarm = layout.parse_swarm(conf, "swarm.conf")
            layout.init(str(root), swarm.windows, conf, name, swarm.hosts)
        hosts.append(Host(root, name))
    return hosts


def stop_all(hosts: list[Host]) -> None:
    for host in hosts:
        host.stop()


def consumer_state(url: str, stream: str, consumer: str) -> tuple[int, int]:
    """(messages not yet delivered, delivered and not yet acknowledged) of a consumer."""
    import nats

    async def ask() -> tuple[int, int]:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().consumer_info(stream, consumer)
            return info.num_pending or 0, info.num_ack_pending or 0
        finally:
            await nc.close()

    return asyncio.run(ask())


def consumer_info(url: str, stream: str, consumer: str) -> Any:
    """The consumer's info as its leader tells it (`cluster.leader`, `num_redelivered`…)."""
    import nats

    async def ask() -> Any:
        nc = await nats.connect(url)
        try:
            return await nc.jetstream().consumer_info(stream, consumer)
        finally:
            await nc.close()

    return asyncio.run(ask())


def step_down(url: str, stream: str, consumer: str, preferred: str | None = None) -> None:
    """Ask the consumer's leader to hand over (to the server named `preferred`): the pull
    requests waiting on it are answered with a status and no message."""
    import nats

    async def ask() -> None:
        nc = await nats.connect(url)
        try:
            body = json.dumps({"placement": {"preferred": preferred}} if preferred else {})
            subject = f"$JS.API.CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}"
            reply = json.loads((await nc.request(subject, body.encode(), timeout=5)).data)
            assert reply.get("success"), reply
        finally:
            await nc.close()

    asyncio.run(ask())


@contextlib.contextmanager
def running_cluster(size: int = 3) -> Iterator[list[Server]]:
    """`size` real servers routed into one cluster on loopback, each with its own short data
    folder under /tmp, taking JetStream requests; all stopped and removed afterwards."""
    store = tempfile.mkdtemp(prefix="hd-c-", dir="/tmp")
    nodes = cluster(store, size)
    try:
        for node in nodes:
            node.start()
        wait_jetstream(nodes[0].url, timeout=30)
        yield nodes
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(store, ignore_errors=True)


def connected_port(host: Host) -> int:
    """The port of the server `host`'s daemon last said it connected to."""
    lines = [json.loads(line) for line in host.log().read_text().splitlines()]
    server = [line["server"] for line in lines if line["event"] == "nats_connected"][-1]
    return int(server.rsplit(":", 1)[1])


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    wait_for(lambda: check() or None, timeout=timeout, what=what)


def settle(seconds: float) -> None:
    time.sleep(seconds)


def publish_raw(
    url: str, stream: str, messages: list[tuple[str, bytes, dict[str, str]]]
) -> list[Any]:
    """Publish `messages` (subject, data, headers) into `stream` as any holder of the swarm's
    credentials may, in order; the stream's acknowledgements."""
    import nats

    async def publish() -> list[Any]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            return [await js.publish(subject, data, stream=stream, headers=headers or None)
                    for subject, data, headers in messages]  # fmt: skip
        finally:
            await nc.close()

    return asyncio.run(publish())


def stream_messages(url: str, stream: str) -> int:
    """How many messages `stream` holds."""
    import nats

    async def ask() -> int:
        nc = await nats.connect(url)
        try:
            return (await nc.jetstream().stream_info(stream)).state.messages
        finally:
            await nc.close()

    return asyncio.run(ask())
