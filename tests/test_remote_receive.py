"""Copies from other hosts under a hostile peer (docs/protocol.md §15, "Part III under hostile
peers and files"): anyone holding the swarm's NATS credentials can publish anything into the
stream.  A message no retry can make usable is refused at its first delivery and holds back
no other; a role behind a linked folder is never written through; a transient error naks
that one message alone; a copy planted under a real copy's name neither hides it nor is taken
for it.  Each test publishes as such a peer does, then lets host b's real daemon receive."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from handoffd.remote import settings
from handoffd.remote.server import Server
from tests.conftest import wait_for
from tests.fault_support import fill, tmpfs
from tests.nats_support import (
    Host,
    consumer_info,
    consumer_state,
    handoffd,
    hosts_fixture,
    nats_fixture,
    publish_raw,
)

nats_server = nats_fixture()
hosts = hosts_fixture()

STAMP = "20261201T120000Z"


def copy(
    seq: int, sender: str = "coder", role: str = "cleaner", message: str = "hello", **headers: str
) -> tuple[str, bytes]:
    """A copy as a sending daemon stamps it (docs/protocol.md §2), its name and bytes;
    `headers` replaces (or, given as "", drops) any header."""
    ident = f"{STAMP}_{seq:06d}_from_{sender}"
    fields = {"id": ident, "from": sender, "to": role, "priority": "50", "type": "note",
              "message": message, "created_at": "2026-12-01T12:00:00.000001Z",
              "recipient": role, "enqueued_at": "2026-12-01T12:00:00.000002Z"}  # fmt: skip
    fields.update(headers)
    head = "\n".join(f"{key}: {value}" for key, value in fields.items() if value)
    body = f"Re-read your role and constitution.\n\n{message}\n"
    return f"50_{ident}_to_{role}.handoff", f"{head}\n\n{body}".encode()


def network_of(host: Host) -> settings.Network:
    network = settings.load(str(host.root))
    assert network is not None
    return network


def publish(server: Server, host: Host, *messages: tuple[str, bytes], role: str = "cleaner",
            names: bool = True) -> None:  # fmt: skip
    """Publish copies to `role`'s subject as a peer does, with a `Handoffd-Name` each."""
    network = network_of(host)
    publish_raw(server.url, network.stream,
                [(network.subject(role), data, {"Handoffd-Name": name} if names else {})
                 for name, data in messages])  # fmt: skip


def receive(host: Host) -> None:
    done = handoffd("run", "--once", str(host.root))
    assert done.returncode == 0, done.stderr


def events(host: Host, name: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in host.log().read_text().splitlines()]
    return [line for line in lines if line["event"] == name]


def unacknowledged(server: Server, host: Host) -> int:
    network = network_of(host)
    return sum(consumer_state(server.url, network.stream, network.consumer))


def files_below(folder: Path) -> list[str]:
    return sorted(name for _, _, names in os.walk(folder) for name in names)


# --- linked folders ---------------------------------------------------------------------


LINKED = {
    "inbox/new": ".swarmforge/handoffs/inbox/new",
    "inbox": ".swarmforge/handoffs/inbox",
    "H": ".swarmforge/handoffs",
    ".swarmforge": ".swarmforge",
}


@pytest.mark.parametrize("where", list(LINKED))
def test_a_copy_for_a_role_behind_a_linked_folder_is_deferred_never_written_through_nor_acked(
    hosts: list[Host], nats_server: Server, tmp_path: Path, where: str
) -> None:
    """The running daemon defers the copy (naks it, logged with the link), writes nothing
    through the link and never acknowledges it; once the folder is real again the copy
    comes back from the stream and is written there."""
    _, b = hosts
    name, data = copy(1)
    folder = Path(b.roles["cleaner"].worktree) / LINKED[where]
    outside = tmp_path / "outside"
    shutil.move(folder, outside)
    folder.symlink_to(outside, target_is_directory=True)
    before = files_below(outside)
    b.start()
    publish(nats_server, b, (name, data))
    wait_for(lambda: [e for e in events(b, "remote_deferred") if e["file"] == name],
             what="the copy deferred")  # fmt: skip
    deferred = [e for e in events(b, "remote_deferred") if e["file"] == name]
    assert "symbolic link" in str(deferred[0]["reason"]) and str(folder) in str(
        deferred[0]["reason"]
    )
    assert files_below(outside) == before, "a copy was written through the link"
    assert unacknowledged(nats_server, b) == 1, "the copy was acknowledged, or dropped"
    folder.unlink()
    shutil.move(outside, folder)
    wait_for(lambda: b.names("cleaner", "inbox/new") == [name], what="the copy, folder real again")
    wait_for(lambda: unacknowledged(nats_server, b) == 0, what="its acknowledgement")


# --- poison messages --------------------------------------------------------------------


def poison() -> dict[str, tuple[tuple[str, bytes], str]]:
    """Messages no retry can make usable, each with the start of its refusal's reason."""
    long_sender = "c" * 240
    tail_name, tail_data = copy(12)
    return {
        "a name over 255 bytes": (copy(10, sender=long_sender), "name longer than 255 bytes"),
        "a control character in the name": (
            (tail_name.replace(".handoff", ".\x1b[2J.handoff"), tail_data),
            "a control character in its name",
        ),
        "not UTF-8": ((copy(13)[0], copy(13)[1] + b"\xff\xfe"), "not UTF-8"),
        "too long": (copy(14, message="x" * 80_000), "larger than"),
        "a NUL byte": ((copy(15)[0], copy(15)[1] + b"\0"), "contains a NUL byte"),
        "a from header that is not the name's sender": (
            copy(16, **{"from": "architect"}),
            "header 'from: architect' does not match the sending role 'coder'",
        ),
        "a sender that is a role of this host": (
            copy(17, sender="cleaner"),
            "its sender cleaner is a role of this host",
        ),
        "a to header without the role": (copy(18, to="coder"), "its 'to' header to (coder)"),
        "not stamped for the role": (copy(19, recipient="coder"), "not a copy stamped for"),
        "a header missing": (copy(20, priority=""), "missing required header(s): priority"),
        "not a handoff": ((copy(21)[0], b"just text"), "no header block"),
        "addressed to another role": (copy(22, role="coder"), "not addressed to cleaner"),
    }


def test_poison_messages_are_refused_at_their_first_delivery_and_hold_back_no_real_copy(
    hosts: list[Host], nats_server: Server
) -> None:
    """One batch: real copies before, between and after a dozen poison messages.  The real
    ones are written; each poison one is terminated and logged `remote_refused` once, with
    its reason; nothing is delivered twice, nothing waits."""
    _, b = hosts
    bad = poison()
    real = [copy(1), copy(2), copy(3)]
    batch = [real[0], *(message for message, _ in list(bad.values())[:6]), real[1],
             *(message for message, _ in list(bad.values())[6:]), real[2]]  # fmt: skip
    publish(nats_server, b, *batch)
    publish(nats_server, b, copy(30), names=False)  # no Handoffd-Name header at all
    receive(b)
    assert b.names("cleaner", "inbox/new") == sorted(name for name, _ in real)
    refused = events(b, "remote_refused")
    reasons = [str(e["reason"]) for e in refused]
    for what, (_, why) in bad.items():
        assert sum(why in reason for reason in reasons) == 1, (what, reasons)
    assert any("no Handoffd-Name" in reason for reason in reasons)
    assert len(refused) == len(bad) + 1
    assert events(b, "remote_deferred") == []
    network = network_of(b)
    info = consumer_info(nats_server.url, network.stream, network.consumer)
    assert (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0)


@pytest.mark.slow  # ~15 s: the deferred copy comes back after the server's ack wait
def test_a_full_disk_naks_the_copy_that_does_not_fit_alone_and_acknowledges_the_rest(
    hosts: list[Host], nats_server: Server
) -> None:
    """b's `new/` on a small disk with room for small copies only: the large copy between
    them is deferred (naked, sent again) while both small ones are written and acknowledged;
    once there is room again the large one arrives."""
    _, b = hosts
    new = b.box("cleaner", "inbox/new")
    new.mkdir(parents=True, exist_ok=True)
    with tmpfs(new, "256k") as cannot:
        if cannot:
            pytest.skip(cannot)
        filler = fill(new)
        os.truncate(filler, os.path.getsize(filler) - 16 * 1024)  # room for small copies
        small, large = [copy(1), copy(3)], copy(2, message="y" * 30_000)
        publish(nats_server, b, small[0], large, small[1])
        receive(b)
        assert b.names("cleaner", "inbox/new") == sorted(name for name, _ in small)
        deferred = events(b, "remote_deferred")
        assert deferred and {e["file"] for e in deferred} == {large[0]}  # sent again, deferred
        assert "ENOSPC" in str(deferred[0]["reason"])
        assert unacknowledged(nats_server, b) == 1
        os.unlink(filler)
        b.start()
        wait_for(lambda: large[0] in b.names("cleaner", "inbox/new"), what="the large copy")
        wait_for(lambda: unacknowledged(nats_server, b) == 0, what="its acknowledgement")
        b.stop()


# --- names already taken ------------------------------------------------------------------


def test_a_copy_planted_under_a_real_copys_name_neither_hides_it_nor_is_taken_for_it(
    hosts: list[Host], nats_server: Server
) -> None:
    """A peer guesses the name of the next real copy and publishes junk under it first: the
    real copy is written beside it under a name of its own (never skipped as a duplicate),
    and the real copy sent again is a duplicate of the one written."""
    _, b = hosts
    planted = copy(7, message="junk")
    real = copy(7, message="the real one")
    assert planted[0] == real[0]
    publish(nats_server, b, planted)
    receive(b)
    publish(nats_server, b, real, real)  # the second: the real copy sent again
    receive(b)
    names = b.names("cleaner", "inbox/new")
    assert len(names) == 2 and real[0] in names
    assert (b.box("cleaner", "inbox/new") / real[0]).read_bytes() == planted[1]
    (beside,) = [n for n in names if n != real[0]]
    assert (b.box("cleaner", "inbox/new") / beside).read_bytes() == real[1]
    assert [e["to"] for e in events(b, "renamed_on_arrival")] == [beside]
    assert len(events(b, "duplicate_skipped")) == 1
    assert unacknowledged(nats_server, b) == 0


def test_the_same_copy_stamped_again_by_its_sender_is_a_duplicate_not_a_second_copy(
    hosts: list[Host], nats_server: Server
) -> None:
    """A sender that lost its journal's stamp (an upgrade from a release that stamped each
    publish anew) sends the same handoff with a later `enqueued_at`: it is the copy already
    there, not a planted one."""
    _, b = hosts
    first = copy(8)
    again = copy(8, enqueued_at="2026-12-01T12:05:00.000009Z")
    publish(nats_server, b, first, again)
    receive(b)
    assert b.names("cleaner", "inbox/new") == [first[0]]
    assert (b.box("cleaner", "inbox/new") / first[0]).read_bytes() == first[1]
    assert len(events(b, "duplicate_skipped")) == 1
    assert unacknowledged(nats_server, b) == 0
