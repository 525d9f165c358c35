"""Handoffs between hosts through a real NATS server (docs/protocol.md §15): sending,
receiving, redelivery, and local mail never held up by the network."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from handoffd.remote import settings
from handoffd.remote.server import Server
from tests.conftest import make_project, run_command, wait_for
from tests.daemon_support import inbox, queue
from tests.fault_support import open_daemon
from tests.nats_support import (
    Host,
    consumer_state,
    handoffd,
    hosts_fixture,
    make_hosts,
    nats_fixture,
)

nats_server = nats_fixture()


hosts = hosts_fixture()


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


def test_a_copy_redelivered_after_a_crash_between_write_and_ack_is_acked_not_duplicated(
    hosts: list[Host], nats_server: Server
) -> None:
    """B's daemon writes the copy, then dies before it acknowledges: the server sends the
    message again (here at once, by a nak) and the next daemon finds the copy it wrote."""
    a, b = hosts
    a.start()
    sent = send_note(a, "coder", "cleaner", "once only")
    wait_for(lambda: sent in a.names("coder", "sent"), what="the stream's acknowledgement")
    first, _ = open_daemon(b.root)
    try:
        bridge = first.bridge
        assert bridge is not None
        bridge.follow(first.courier.local(first.roles.current))
        wait_for(lambda: len(bridge.link.received) > 0, what="the message fetched on b")
        assert bridge.incoming.receive(first.courier.local(first.roles.current)) == {"cleaner"}
        assert b.names("cleaner", "inbox/new") == [sent]
        for message in bridge.incoming.written:  # the crash: never acknowledged
            bridge.link.submit(message.nak()).result(5)
        bridge.incoming.written = []
    finally:
        first.close()
    network = settings.load(str(b.root))
    assert network is not None
    b.start()
    wait_for(lambda: '"duplicate_skipped"' in b.log().read_text(), what="the redelivery")
    wait_for(lambda: consumer_state(nats_server.url, network.stream, network.consumer) == (0, 0),
             what="the redelivered message acknowledged")  # fmt: skip
    assert b.names("cleaner", "inbox/new") == [sent]


def test_a_project_without_nats_never_imports_the_nats_client(tmp_path: Path) -> None:
    project = make_project(tmp_path.resolve())
    queue(project, "coder", ["cleaner"])
    probe = (
        "import sys\n"
        "from handoffd.core import log\n"
        "from handoffd.daemon.daemon import Daemon\n"
        f"d = Daemon({str(project.root)!r}, log.configure(None))\n"
        "d.open(watch=False); d.drain(); d.close()\n"
        "print(sorted(m for m in sys.modules if m == 'nats' or m.startswith(('nats.', "
        "'handoffd.remote.link', 'handoffd.daemon.bridge'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert len(inbox(project, "cleaner")) == 1


def test_a_remote_role_without_nats_is_a_config_error_and_its_mail_waits_in_the_outbox(
    tmp_path: Path,
) -> None:
    """roles.tsv (from an init with nats) names a role on host b, but swarmforge.conf has lost
    its nats line: the daemon says so by name and keeps the file, never fails it."""
    (a,) = make_hosts(tmp_path, "nats://127.0.0.1:1", names="a", prepare=False)
    conf = a.root / ".swarmforge" / "swarmforge.conf"
    conf.write_text("\n".join(line for line in conf.read_text().splitlines()
                              if not line.startswith("nats ")) + "\n")  # fmt: skip
    sent = send_note(a, "coder", "cleaner", "waits")
    daemon, log = open_daemon(a.root)
    try:
        daemon.drain()
    finally:
        daemon.close()
    assert a.names("coder", "outbox") == [sent]
    assert a.names("coder", "failed") == []
    errors = log.named("config_error")
    assert errors and errors[0]["roles"] == ["cleaner"]
    assert (
        "role 'cleaner' is on another host, but swarmforge.conf has no `nats <url>`"
        in (errors[0]["error"])
    )
    assert [d["reason"] for d in log.named("deferred")] == ["nats: not configured"]


def test_run_once_takes_what_waits_in_the_stream_for_this_host_writes_and_acknowledges_it(
    hosts: list[Host], nats_server: Server
) -> None:
    """`run --once` on b, whose daemon was down while a sent: everything now, both ways."""
    a, b = hosts
    a.start()
    sent = [send_note(a, "coder", "cleaner", f"while b was down {n}") for n in range(3)]
    wait_for(lambda: a.names("coder", "sent") == sorted(sent), what="the stream's acks")
    back = send_note(b, "cleaner", "coder", "from b, once")
    done = handoffd("run", "--once", str(b.root), timeout=60)
    assert done.returncode == 0, done.stderr
    assert b.names("cleaner", "inbox/new") == sorted(sent)
    assert b.names("cleaner", "sent") == [back]
    network = settings.load(str(b.root))
    assert network is not None
    state = consumer_state(nats_server.url, network.stream, network.consumer)
    assert state == (0, 0), "every copy acknowledged before run --once left"
    wait_for(lambda: back in a.names("coder", "inbox/new"), what="b's note on a")


def test_run_once_with_no_server_to_reach_delivers_locally_and_exits_within_seconds(
    tmp_path: Path,
) -> None:
    """Nothing can be received without a server: `run --once` gives up on it after a few
    seconds (it never waits for ever), and local mail goes as always."""
    (a,) = make_hosts(tmp_path, "nats://127.0.0.1:1", names="a", prepare=False)
    local = send_note(a, "coder", "coder", "to myself")
    start = time.monotonic()
    done = handoffd("run", "--once", str(a.root), timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 10
    assert a.names("coder", "inbox/new") == [local]
