"""A swarm across hosts under kill -9, a stopped NATS server and a cluster losing a server
(docs/protocol.md §15, "Exactly once across hosts"): nothing lost, duplicated or partial,
by the audit of §5 run over every host (`audit.audit_hosts`) and direct counts."""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from handoffd.core import config
from handoffd.daemon import audit
from handoffd.delivery import journal
from handoffd.delivery.delivery import JOURNAL
from handoffd.remote import server as servers
from handoffd.remote import settings
from handoffd.remote.server import Server
from handoffd.remote.settings import ACK_WAIT
from tests.conftest import wait_for
from tests.fault_support import (
    copies_by_id,
    hidden_temps,
    partial_copies,
    queue_note,
    start_worker,
    stop_worker,
)
from tests.nats_support import (
    Host,
    connected_port,
    consumer_info,
    eventually,
    hosts_fixture,
    make_hosts,
    nats_fixture,
    running_cluster,
    settle,
    step_down,
    stop_all,
)

nats_server = nats_fixture()

HANDOFFS = 500
KILLS = ["b"] * 10 + ["a"] * 5


def local(host: Host) -> dict[str, config.Role]:
    here = config.this_host(str(host.root))
    return {n: r for n, r in host.roles.items() if config.is_local(r, here)}


def settled(a: Host, b: Host, expected: int, across: int | None = None) -> bool:
    """Every original archived on a, no journal left, every copy on b (`across` of them,
    when not every handoff went to b). A poll while b's worker still moves copies from
    box to box, so a copy that moved under the count is skipped and the next poll counts it."""
    done = len(a.names("coder", "sent")) == expected and not a.names("coder", "outbox")
    if not done or journal.load(str(a.root / JOURNAL)) is not None:
        return False
    return len(copies_by_id(local(b), live=True)) == (expected if across is None else across)


def check_once(hosts: list[Host], expected: int) -> None:
    report = audit.audit_hosts([str(host.root) for host in hosts])
    assert report.ok, "\n".join(report.problems[:20])
    counts = copies_by_id(local(hosts[1]))
    assert len(counts) == expected and set(counts.values()) == {1}
    for host in hosts:
        assert hidden_temps(local(host)) == []
        assert partial_copies(local(host)) == []


hosts = hosts_fixture()


@pytest.mark.slow
def test_500_handoffs_while_b_is_killed_ten_times_and_a_five_lose_and_duplicate_nothing(
    hosts: list[Host],
) -> None:
    """Costs ~20-30 s: 500 notes coder@a -> cleaner@b, queued by the helpers' own code while
    a worker takes and finishes them on b with the real helpers; between every ~33 notes one
    daemon is killed -9 and started again (b ten times, a five, in a fixed shuffled order)."""
    a, b = hosts
    a.start()
    b.start()
    kills = KILLS[:]
    random.Random(15).shuffle(kills)
    worker = start_worker(b.root, ["cleaner"])
    roles = a.roles
    chunk = -(-HANDOFFS // len(kills))
    try:
        for n in range(HANDOFFS):
            queue_note(roles, "coder", ["cleaner"], message=f"note {n}")
            if n % chunk == chunk // 2 and kills:
                victim = a if kills.pop() == "a" else b
                victim.kill()
                victim.start()
        wait_for(lambda: settled(a, b, HANDOFFS), timeout=60, what="every handoff across")
    finally:
        summary = stop_worker(worker)
        stop_all(hosts)
    assert summary["refused"] == []
    recovered = sum(h.log().read_text().count('"event": "started"') for h in hosts)
    # every start and restart logged `started`: under disk load a killed daemon's threads can
    # outlive its main thread, and `start` once took that dying process for a running daemon
    # (`already running`, exit 0, no restart; tests/test_lifecycle.py pins it on its own)
    assert recovered == 2 + len(KILLS)
    check_once(hosts, HANDOFFS)


@pytest.mark.slow
def test_the_nats_server_stopped_for_30_s_holds_up_no_local_mail_and_delivers_all_after(
    tmp_path: Path,
) -> None:
    """Costs ~40 s (the outage itself is 30 s): its own server, stopped mid-flow and
    started again on the same port and data folder."""
    store = tempfile.mkdtemp(prefix="hd-js-", dir="/tmp")
    nats = Server(store)
    nats.start()
    servers.wait_jetstream(nats.url)
    text = SWARM_WITH_QA
    a, b = make_hosts(tmp_path, nats.url, text=text)
    try:
        a.start()
        b.start()
        roles = a.roles
        for n in range(20):
            queue_note(roles, "coder", ["cleaner"], message=f"before {n}")
        wait_for(lambda: len(b.names("cleaner", "inbox/new")) == 20, what="the first 20")
        for n in range(20):
            queue_note(roles, "coder", ["cleaner"], message=f"racing {n}")
        nats.stop()
        outage = time.monotonic()
        pickups = []
        for n in range(10):
            queue_note(roles, "coder", ["cleaner", "QA"], message=f"during {n}")
            start = time.monotonic()
            path = queue_note(roles, "coder", ["QA"], message=f"local {n}")
            name = Path(path).name
            wait_for(lambda name=name: name in a.names("QA", "inbox/new"), timeout=5,
                     what="a local pickup during the outage")  # fmt: skip
            pickups.append(time.monotonic() - start)
            time.sleep(2.5)
        assert a.names("coder", "outbox"), "remote mail waits in the outbox meanwhile"
        assert a.names("coder", "failed") == []
        time.sleep(max(0.0, 30 - (time.monotonic() - outage)))
        nats.start()
        wait_for(lambda: settled(a, b, 60, across=50), timeout=30,
                 what="everything after the outage")  # fmt: skip
    finally:
        stop_all([a, b])
        nats.stop()
        shutil.rmtree(store, ignore_errors=True)
    print(f"local pickup during the outage: max {max(pickups) * 1000:.0f} ms")
    assert max(pickups) < 1.0
    deferred = a.log().read_text().count('"reason": "nats: not connected')
    assert deferred > 0
    report = audit.audit_hosts([str(a.root), str(b.root)])
    assert report.ok, "\n".join(report.problems[:20])


SWARM_WITH_QA = """project {project}
nats {urls}
host a
window coder shell master task
window QA shell qa task
host b
window cleaner shell cleaner batch
"""


@pytest.mark.slow
def test_a_three_server_cluster_losing_a_server_mid_flow_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    """Costs ~15 s: three servers on loopback, an R3 stream, one server killed -9 while
    200 handoffs go from a to b."""
    store = tempfile.mkdtemp(prefix="hd-c-", dir="/tmp")
    cluster = servers.cluster(store)
    for node in cluster:
        node.start()
    try:
        servers.wait_jetstream(cluster[0].url, timeout=30)
        urls = ",".join(node.url for node in cluster)
        a, b = make_hosts(tmp_path, urls)
        try:
            init = (a.root / ".swarmforge" / "daemon").exists()
            assert not init
            a.start()
            b.start()
            roles = a.roles
            for n in range(200):
                queue_note(roles, "coder", ["cleaner"], message=f"clustered {n}")
                if n == 60:
                    cluster[0].stop(kill=True)
            wait_for(lambda: settled(a, b, 200), timeout=60, what="every handoff across")
        finally:
            stop_all([a, b])
        check_once([a, b], 200)
    finally:
        for node in cluster:
            node.stop()
        shutil.rmtree(store, ignore_errors=True)


def network_of(host: Host) -> settings.Network:
    network = settings.load(str(host.root))
    assert network is not None
    return network


def leader_of(node: Server, network: settings.Network) -> str:
    """The server leading b's consumer ("" while one is being elected)."""
    try:
        info = consumer_info(node.url, network.stream, network.consumer)
    except Exception:  # a request timed out: no leader answers yet
        return ""
    return str(info.cluster.leader or "")


def send(a: Host, what: str, count: int) -> None:
    roles = a.roles
    for n in range(count):
        queue_note(roles, "coder", ["cleaner"], message=f"{what} {n}")


def arrived(b: Host, count: int) -> bool:
    return len(copies_by_id(local(b), live=True)) == count


@pytest.mark.slow
def test_the_consumers_leader_moving_while_b_waits_never_stops_b_fetching(
    tmp_path: Path,
) -> None:
    """Costs ~10 s (a three-server cluster). Each move answers the pull b has waiting with
    a status and no message: b must pull again at once, not wait for a batch that never
    came. Bounded below the ack wait, so mail parked on a dead pull and sent again later
    does not pass either."""
    with running_cluster() as nodes:
        a, b = make_hosts(tmp_path, ",".join(node.url for node in nodes))
        try:
            a.start()
            b.start()
            send(a, "first", 1)
            wait_for(lambda: arrived(b, 1), timeout=30, what="the first note")
            network = network_of(b)
            for _ in range(3):
                settle(1.5)  # b's next pull is waiting on the leader
                step_down(nodes[0].url, network.stream, network.consumer)
            start = time.monotonic()
            send(a, "after", 10)
            wait_for(lambda: arrived(b, 11), timeout=ACK_WAIT - 1, what="the notes after")
            print(f"delivered {time.monotonic() - start:.1f} s after the leader moved")
        finally:
            stop_all([a, b])


@pytest.mark.slow
def test_mail_sent_while_the_server_was_away_reaches_b_on_its_first_pull_after(
    tmp_path: Path,
) -> None:
    """Costs ~10 s: its own server, stopped for 4 s while b waits. Nothing b pulls for may
    be answered where no fetch listens (a pull buffered through the outage, into an inbox
    given up): the server would deliver nothing else before the ack wait, and count a
    redelivery."""
    store = tempfile.mkdtemp(prefix="hd-js-", dir="/tmp")
    nats = Server(store)
    nats.start()
    servers.wait_jetstream(nats.url)
    a, b = make_hosts(tmp_path, nats.url)
    try:
        a.start()
        b.start()
        send(a, "before", 3)
        wait_for(lambda: arrived(b, 3), timeout=30, what="the notes before")
        network = network_of(b)
        eventually(lambda: consumer_info(nats.url, network.stream, network.consumer)
                   .num_ack_pending == 0, timeout=10, what="b's acks")  # fmt: skip
        nats.stop()
        send(a, "during", 5)
        settle(4)
        nats.start()
        back = time.monotonic()
        wait_for(lambda: arrived(b, 8), timeout=ACK_WAIT - 1, what="the notes during")
        print(f"delivered {time.monotonic() - back:.1f} s after the server came back")
        info = consumer_info(nats.url, network.stream, network.consumer)
        assert info.num_redelivered == 0
    finally:
        stop_all([a, b])
        nats.stop()
        shutil.rmtree(store, ignore_errors=True)


@pytest.mark.slow
def test_killing_the_server_b_reads_through_and_its_consumers_leader_resumes_delivery(
    tmp_path: Path,
) -> None:
    """Costs ~15 s (a three-server cluster): the consumer's leader is moved to the very
    server b is connected to, which is then killed -9 with mail flowing. b must reconnect to
    another, pull from the new leader and receive everything within a bound."""
    with running_cluster() as nodes:
        a, b = make_hosts(tmp_path, ",".join(node.url for node in nodes))
        try:
            a.start()
            b.start()
            send(a, "first", 1)
            wait_for(lambda: arrived(b, 1), timeout=30, what="the first note")
            network = network_of(b)
            victim = next(node for node in nodes if node.port == connected_port(b))
            other = next(node for node in nodes if node is not victim)
            eventually(lambda: leader_of(other, network), timeout=10, what="a leader")
            if leader_of(other, network) != victim.name:
                step_down(other.url, network.stream, network.consumer, preferred=victim.name)
            eventually(lambda: leader_of(other, network) == victim.name, timeout=10,
                       what=f"{victim.name} to lead b's consumer")  # fmt: skip
            send(a, "racing", 20)
            victim.stop(kill=True)
            start = time.monotonic()
            send(a, "after", 20)
            wait_for(lambda: arrived(b, 41), timeout=30, what="every note after the kill")
            print(f"delivered {time.monotonic() - start:.1f} s after the kill")
        finally:
            stop_all([a, b])
        check_once([a, b], 41)


@pytest.mark.slow  # about 10 s: a server stopped and started again, two daemons
def test_an_original_held_by_a_nats_outage_says_why_on_status_start_and_the_board(
    tmp_path: Path,
) -> None:
    """docs/protocol.md §15, "A held original says why": while the daemon cannot reach
    NATS, `status`'s first line, `start` and the web board say `NATS: unreachable (<why>)`,
    and the original shows `deferred <span>: NATS unreachable: <why>` (not a bare wait),
    from the daemon's state file; once the server is back, neither is said any more."""
    from starlette.testclient import TestClient

    from handoffd.web.app import create_app
    from tests.nats_support import handoffd

    store = tempfile.mkdtemp(prefix="hd-o-", dir="/tmp")
    nats = Server(store)
    nats.start()
    servers.wait_jetstream(nats.url)
    a, b = make_hosts(tmp_path, nats.url)
    try:
        a.start()
        b.start()
        nats.stop()
        queued = Path(queue_note(a.roles, "coder", ["cleaner"], message="held"))
        state = a.root / ".swarmforge" / "daemon" / "state.json"
        wait_for(lambda: state.exists() and queued.name in state.read_text(), timeout=20,
                 what="the daemon to record the deferral")  # fmt: skip
        refused = " · NATS: unreachable (connection refused) · "
        shown = wait_for(
            lambda: (out := handoffd("status", "--root", str(a.root)).stdout.splitlines())
            and refused in out[0] and out,
            timeout=10, what="status to say why NATS cannot be reached",
        )  # fmt: skip
        [row] = [line for line in shown if queued.name.split("_", 1)[1][:24] in line]
        assert " deferred " in row and row.endswith(": NATS unreachable: connection refused")
        again = handoffd("start", str(a.root))
        assert again.stdout.endswith("NATS: unreachable (connection refused)\n"), again.stdout
        page = TestClient(create_app(str(a.root)), base_url="http://127.0.0.1:8765").get("/")
        assert 'data-daemon="warn"' in page.text and "NATS: unreachable" in page.text
        assert "NATS unreachable: connection refused" in page.text
        nats.start()
        wait_for(lambda: queued.name in b.names("cleaner", "inbox/new"), timeout=30,
                 what="the held original to cross once the server is back")  # fmt: skip
        wait_for(lambda: "NATS" not in handoffd("status", "--root", str(a.root)).stdout,
                 timeout=10, what="status to stop saying NATS is unreachable")  # fmt: skip
        assert handoffd("start", str(a.root)).stdout.endswith(f"NATS: connected ({nats.url})\n")
    finally:
        stop_all([a, b])
        nats.stop()
        shutil.rmtree(store, ignore_errors=True)
