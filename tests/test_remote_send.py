"""Copies sent to other hosts under a hostile peer (docs/protocol.md §15, "Message ids"): a
copy's `Nats-Msg-Id` names its bytes, so junk published first under the id a real copy would
have had cannot make the stream drop the real one; a "duplicate" answer for bytes this daemon
never published is a conflict, never a delivery; and one for a copy it did publish before
(a crash between the publish and its answer) is the delivery it says."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from handoffd.core import handoff as hf
from handoffd.delivery import files, journal
from handoffd.delivery.delivery import JOURNAL
from handoffd.remote import settings
from handoffd.remote.server import Server
from tests.conftest import wait_for
from tests.fault_support import open_daemon
from tests.nats_support import Host, handoffd, hosts_fixture, nats_fixture, publish_raw
from tests.nats_support import stream_messages as stored
from tests.test_remote_delivery import send_note

nats_server = nats_fixture()
hosts = hosts_fixture()


def network_of(host: Host) -> settings.Network:
    network = settings.load(str(host.root))
    assert network is not None
    return network


def burn(server: Server, host: Host, *ids: str) -> None:
    """Publish junk under each message id, on a subject no host reads, as a peer may."""
    network = network_of(host)
    junk = [(network.subject("nobody"), b"junk", {"Nats-Msg-Id": ident}) for ident in ids]
    publish_raw(server.url, network.stream, junk)


def run_once(host: Host) -> None:
    done = handoffd("run", "--once", str(host.root))
    assert done.returncode == 0, done.stderr


def events(host: Host, name: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in host.log().read_text().splitlines()]
    return [line for line in lines if line["event"] == name]


def received(host: Host, name: str) -> hf.Handoff:
    (path,) = [p for p in Path(host.roles["cleaner"].path("inbox/new")).iterdir() if p.name == name]
    return hf.read(str(path))


def test_junk_published_first_under_the_ids_a_copy_would_have_had_cannot_make_it_a_duplicate(
    hosts: list[Host], nats_server: Server
) -> None:
    """A peer sees the next handoff's name (its id is in it) and publishes junk under every
    id it can make of it: the real copy's id names its bytes, which the peer cannot know."""
    a, b = hosts
    sent = send_note(a, "coder", "cleaner", "the real one")
    ident = hf.name_id(sent)
    burn(nats_server, a, f"{ident}@cleaner", f"{ident}@cleaner#0000000000000000")
    run_once(a)
    assert a.names("coder", "sent") == [sent]
    run_once(b)
    assert b.names("cleaner", "inbox/new") == [sent]
    assert received(b, sent).get("message") == "the real one"


def test_a_duplicate_answer_for_a_copy_never_published_before_is_a_conflict_not_a_delivery(
    hosts: list[Host], nats_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp of the copy is pinned here, so the test can burn the very id the daemon will
    use (no peer could): the daemon logs `remote_conflict`, not `delivered`, keeps the
    original, and sends the copy again with a new stamp (new bytes, a new id), which is the
    one delivery and the one copy that arrives."""
    a, b = hosts
    sent = send_note(a, "coder", "cleaner", "conflicted")
    original = Path(a.roles["coder"].path("outbox", sent))
    pinned = "2026-12-01T12:00:00.123456Z"
    expected = files.stamped(hf.parse(original.read_bytes(), sent), "cleaner", pinned)
    burned = settings.msg_id(hf.name_id(sent), "cleaner", expected)
    burn(nats_server, a, burned)
    daemon, log = open_daemon(a.root)
    try:
        real_now = hf.iso_now
        calls: list[float | None] = []

        def first_pinned(now: float | None = None) -> str:  # the stamp the pass gives the copy
            calls.append(now)
            return pinned if len(calls) == 1 else real_now(now)

        wait_for(lambda: daemon.bridge is not None and daemon.bridge.link.connected,
                 what="the link connected")  # fmt: skip
        monkeypatch.setattr(hf, "iso_now", first_pinned)
        daemon.drain()
        # `run --once` may leave once the conflict is deferred (nothing else in flight): the
        # next pass, once the backoff is due, sends the new stamp
        due = daemon.courier.next_retry()
        if due is not None:
            time.sleep(max(0.0, due - time.monotonic()))
            daemon.drain()
    finally:
        daemon.close()
    said = [(name, fields) for name, fields in log.events
            if name in ("remote_conflict", "deferred", "delivered")]  # fmt: skip
    assert [name for name, _ in said] == ["remote_conflict", "deferred", "delivered"]
    assert (said[0][1]["role"], said[0][1]["msg_id"]) == ("cleaner", burned)
    assert "remote_conflict" in str(said[1][1]["reason"])
    assert a.names("coder", "sent") == [sent]
    assert journal.load(str(a.root / JOURNAL)) is None
    assert stored(nats_server.url, network_of(a).stream) == 2  # the junk, and the copy once
    run_once(b)
    assert b.names("cleaner", "inbox/new") == [sent]
    copy = received(b, sent)
    assert copy.get("message") == "conflicted" and copy.get("enqueued_at") != pinned


def test_a_copy_published_again_after_a_crash_is_delivered_on_the_duplicate_answer(
    hosts: list[Host], nats_server: Server
) -> None:
    """The daemon publishes, the stream stores the copy, the daemon dies before it hears the
    answer: the journal still lists the copy, with the stamp it was published with, so the
    next daemon publishes the same bytes under the same id, the stream drops them as the
    duplicate they are, and that answer counts as the delivery (no conflict, one message)."""
    a, b = hosts
    sent = send_note(a, "coder", "cleaner", "once")
    daemon, _ = open_daemon(a.root)
    try:
        wait_for(lambda: daemon.bridge is not None and daemon.bridge.link.connected,
                 what="the link connected")  # fmt: skip
        outgoing = daemon.courier.outgoing
        assert outgoing is not None

        def published() -> bool:  # passes until one hands the copy to the stream
            daemon.step(time.monotonic())
            return bool(outgoing.flights)

        wait_for(published, what="the copy published")
        flights = [f for fs in outgoing.flights.values() for f in fs.values()]
        wait_for(lambda: all(f.future.done() for f in flights), what="the stream's answer")
    finally:
        daemon.close()  # the crash: the answer was never taken in
    (entry,) = journal.load(str(a.root / JOURNAL)) or []
    assert entry.unacked == ["cleaner"] and entry.stamp
    network = network_of(a)
    assert stored(nats_server.url, network.stream) == 1
    run_once(a)
    assert a.names("coder", "sent") == [sent]
    assert events(a, "remote_conflict") == []
    assert [e["recipients"] for e in events(a, "delivered") if e.get("remote")] == [["cleaner"]]
    assert stored(nats_server.url, network.stream) == 1, "the stream kept a second copy"
    run_once(b)
    assert b.names("cleaner", "inbox/new") == [sent]
    assert received(b, sent).get("enqueued_at") == entry.stamp


def test_run_once_reads_the_streams_answer_even_when_it_came_back_before_the_pass_looked(
    hosts: list[Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to receive, `run --once` stays only for its own publishes: one answered
    at once (its future already done) still has to be collected, or the original stays in
    the outbox with its journal and the next run sends it again."""
    a, _ = hosts
    sent = send_note(a, "coder", "cleaner", "answered at once")
    daemon, log = open_daemon(a.root)
    try:
        wait_for(lambda: daemon.bridge is not None and daemon.bridge.link.connected,
                 what="the link connected")  # fmt: skip
        monkeypatch.setattr(daemon, "_receiving", lambda: False)
        daemon.drain()
    finally:
        daemon.close()
    assert [name for name, _ in log.events if name == "delivered"] == ["delivered"]
    assert a.names("coder", "sent") == [sent]
    assert journal.load(str(a.root / JOURNAL)) is None
