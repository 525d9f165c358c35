"""The operator across hosts (docs/protocol.md §15, §18): each host has its own mailbox;
work the operator sends on host a reaches a role on host b over the real nats-server, as
any original does, and what a role hands to `operator` stays on its own host."""

from __future__ import annotations

from pathlib import Path

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.remote.server import Server
from tests.conftest import wait_for
from tests.nats_support import Host, handoffd, hosts_fixture, nats_fixture

nats_server = nats_fixture()
hosts = hosts_fixture()


def mailbox(host: Host, box: str) -> list[Path]:
    folder = host.root / config.OPERATOR_DIR / box
    return sorted(folder.glob("*.handoff")) if folder.is_dir() else []


def test_work_sent_on_host_a_reaches_a_role_on_host_b_and_mail_for_the_operator_stays_home(
    hosts: list[Host], nats_server: Server
) -> None:
    a, b = hosts
    for host in hosts:
        host.start()
    done = handoffd("send", "all", "Release 0.4 on Friday.", "--by", "alice", "--root", str(a.root))
    assert done.returncode == 0, done.stderr
    wait_for(lambda: b.names("cleaner", "inbox/new"), timeout=30, what="the copy on host b")
    [name] = b.names("cleaner", "inbox/new")
    copy = hf.read(str(b.box("cleaner", "inbox/new") / name))
    assert (copy.get("from"), copy.get("sent_by"), copy.get("to")) == (
        "operator", "alice", "coder,cleaner"
    )  # fmt: skip
    assert copy.body.endswith("Release 0.4 on Friday.\n")
    wait_for(lambda: mailbox(a, "sent"), timeout=30, what="the original in a's sent/")
    assert a.names("coder", "inbox/new")  # the local copy too

    draft = b.root / "d.txt"
    draft.write_text("type: note\nto: operator\npriority: 50\nmessage: Approve the date?\n")
    import os
    import subprocess

    from tests.nats_support import command_env

    queued = subprocess.run(["swarm_handoff", str(draft)], cwd=b.roles["cleaner"].worktree,
                            env=command_env({"SWARMFORGE_ROLE": "cleaner"}), capture_output=True,
                            text=True, timeout=30, check=False)  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    wait_for(lambda: mailbox(b, "inbox/new"), timeout=30, what="b's operator mailbox")
    assert mailbox(a, "inbox/new") == []  # the sender's host's operator, not another's
    assert os.path.basename(str(mailbox(b, "inbox/new")[0])).endswith("_to_operator.handoff")
