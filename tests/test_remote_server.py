"""The loopback `nats-server` of the demo, the benchmark and the tests: a port taken by
another process between choosing it and listening on it."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.remote.server import PortTaken, Server, free_port

TIMEOUT = 10.0  # seconds for a start, every retry included


@pytest.fixture
def store() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="hd-srv-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def started() -> Iterator[list[Server]]:
    """Every server a test appends is stopped after it."""
    servers: list[Server] = []
    yield servers
    for server in servers:
        server.stop(kill=True)


def squat(port: int) -> socket.socket:
    """Another process's listener on `port`, accepting connections and saying nothing."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def info(port: int) -> dict[str, object]:
    """The INFO a NATS server sends first on a connection to `port`."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        line = conn.makefile("rb").readline().decode()
    assert line.startswith("INFO "), line
    parsed: dict[str, object] = json.loads(line[5:])
    return parsed


def test_a_chosen_port_taken_before_the_server_listens_is_chosen_again(
    store: str, started: list[Server]
) -> None:
    """Pins: the server comes up on another port, and `start` returns only once this very
    server listens (a listener of someone else's on the first port does not count)."""
    server = Server(store, name="mine")
    taken = server.port
    with squat(taken):
        started.append(server)
        server.start(timeout=TIMEOUT)
        assert server.port != taken
        assert server.process is not None and server.process.poll() is None
        assert info(server.port)["server_name"] == "mine"
    assert "address already in use" in Path(server.log).read_text()


def test_a_port_given_by_the_caller_and_taken_is_a_clear_error_naming_it(
    store: str, started: list[Server]
) -> None:
    port = free_port()
    with squat(port):
        server = Server(store, port=port)
        started.append(server)
        with pytest.raises(PortTaken) as raised:
            server.start(timeout=TIMEOUT)
        assert server.port == port
    assert str(raised.value) == (
        f"nats-server cannot listen on 127.0.0.1:{port}: another process holds that port "
        "(address already in use); stop it, or start this server on another port"
    )


def test_a_restart_keeps_its_port_and_names_it_when_it_was_taken_meanwhile(
    store: str, started: list[Server]
) -> None:
    """Pins: clients reconnect to the port they know, so a server started again never
    moves; a port taken while it was stopped is an error naming that port."""
    server = Server(store)
    started.append(server)
    server.start(timeout=TIMEOUT)
    port = server.port
    server.stop()
    server.start(timeout=TIMEOUT)
    assert server.port == port
    assert info(port)["server_name"] == "n1"
    server.stop()
    with squat(port), pytest.raises(PortTaken, match=f"127.0.0.1:{port}: another process"):
        server.start(timeout=TIMEOUT)
    assert server.port == port


def test_a_chosen_cluster_port_taken_before_the_server_listens_is_chosen_again(
    store: str, started: list[Server]
) -> None:
    """Pins: the same for the port the cluster's routes connect to; the server routes to
    its cluster port where it now is."""
    server = Server(store, cluster="handoffd-test")
    taken = server.cluster_port
    assert taken is not None
    with squat(taken):
        started.append(server)
        server.start(timeout=TIMEOUT)
        assert server.cluster_port not in (None, taken)
        assert server.process is not None and server.process.poll() is None
        assert f"127.0.0.1:{server.cluster_port}" in server.config()
        assert str(taken) not in server.config()
        assert info(server.cluster_port)["server_name"] == "n1"  # type: ignore[arg-type]
