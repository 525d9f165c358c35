"""A pool on another host (docs/protocol.md §15, §17): a handoff from host a to a pool on
host b crosses the stream once, lands in the pool's own `new/` on b, and is claimed there
by exactly one member, whose reply crosses back.  Real daemons, a real nats-server."""

from __future__ import annotations

from pathlib import Path

from handoffd.core import handoff as hf
from handoffd.remote.server import Server
from tests.nats_support import Host, handoffd, make_hosts, nats_fixture, stop_all
from tests.test_remote_delivery import helper, send_note

nats_server = nats_fixture()

POOLED = """project {project}
nats {urls}
host a
window coder shell master task
host b
pool cleaner 2 shell task
"""


def run_once(host: Host) -> None:
    done = handoffd("run", "--once", str(host.root))
    assert done.returncode == 0, done.stderr


def test_a_handoff_to_a_pool_on_another_host_is_claimed_there_once_and_answered_back(
    tmp_path: Path, nats_server: Server
) -> None:
    a, b = make_hosts(tmp_path, nats_server.url, text=POOLED)
    try:
        assert {"cleaner", "cleaner-1", "cleaner-2"} <= set(a.roles)  # a knows where they live
        sent = send_note(a, "coder", "cleaner", "tidy the parser")
        run_once(a)
        assert a.names("coder", "sent") == [sent]
        run_once(b)
        assert b.names("cleaner", "inbox/new") == [sent]  # the pool's own new/, one copy
        assert b.names("cleaner-1", "inbox/new") == b.names("cleaner-2", "inbox/new") == []
        task = helper(b, "cleaner-2", "ready_for_next")
        assert "tidy the parser" in task
        assert helper(b, "cleaner-1", "ready_for_next").strip() == "NO_TASK"
        held = b.box("cleaner-2", "inbox/in_process") / sent
        assert hf.read(str(held)).get("claimed_by") == "cleaner-2"
        assert "COMPLETED" in helper(b, "cleaner-2", "done_with_current")
        back = send_note(b, "cleaner-2", "coder", "tidied")
        run_once(b)
        run_once(a)
        assert a.names("coder", "inbox/new") == [back]
    finally:
        stop_all([a, b])
