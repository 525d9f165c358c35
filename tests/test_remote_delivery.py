"""Handoffs between hosts through a real NATS server (docs/protocol.md §15): sending,
receiving, redelivery, and local mail never held up by the network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoffd.remote.server import Server
from tests.conftest import run_command, wait_for
from tests.nats_support import Host, make_hosts, nats_fixture, stop_all

nats_server = nats_fixture()


@pytest.fixture
def hosts(tmp_path: Path, nats_server: Server) -> Iterator[list[Host]]:
    made = make_hosts(tmp_path, nats_server.url)
    try:
        yield made
    finally:
        stop_all(made)


def send_note(host: Host, sender: str, to: str, message: str) -> str:
    """Queue a note with the real `swarm_handoff`, as `sender` on `host`; its file name."""
    worktree = Path(host.roles[sender].worktree)
    draft = worktree / "draft.txt"
    draft.write_text(f"type: note\nto: {to}\npriority: 50\nmessage: {message}\n")
    done = run_command("swarm_handoff", str(draft), cwd=worktree, role=sender)
    assert done.code == 0, done.err
    return done.out.strip().rsplit("/", 1)[-1]


def helper(host: Host, role: str, command: str) -> str:
    done = run_command(command, cwd=host.roles[role].worktree, role=role)
    assert done.code == 0, done.err
    return done.out


def test_a_round_trip_coder_on_a_to_cleaner_on_b_and_back_with_real_helpers_and_daemons(
    hosts: list[Host],
) -> None:
    a, b = hosts
    a.start()
    b.start()
    sent = send_note(a, "coder", "cleaner", "please tidy")
    wait_for(lambda: sent in b.names("cleaner", "inbox/new"), what="the copy on host b")
    batch = helper(b, "cleaner", "ready_for_next")
    assert "BATCH:" in batch and "please tidy" in batch
    copy = next(Path(b.roles["cleaner"].path("inbox/in_process")).rglob(sent))
    assert b"recipient: cleaner\n" in copy.read_bytes()
    back = send_note(b, "cleaner", "coder", "tidied")
    assert "COMPLETED_BATCH:" in helper(b, "cleaner", "done_with_current")
    wait_for(lambda: back in a.names("coder", "inbox/new"), what="the answer on host a")
    task = helper(a, "coder", "ready_for_next")
    assert task.startswith("TASK: ") and "tidied" in task
    wait_for(lambda: sent in a.names("coder", "sent"), what="a's original archived")
    wait_for(lambda: back in b.names("cleaner", "sent"), what="b's original archived")
    assert a.names("coder", "outbox") == [] and b.names("cleaner", "outbox") == []
    log = [json.loads(line) for line in a.log().read_text().splitlines()]
    remote = [e for e in log if e["event"] == "delivered" and e.get("remote")]
    assert [(e["file"], e["recipients"]) for e in remote] == [(sent, ["cleaner"])]
