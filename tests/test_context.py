"""Who an operation acts for (handoffd/ops/context.py): a role that lives on another host
is refused by every adapter alike, in one line naming its host (docs/protocol.md §15)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import StdioServerParameters

from tests.conftest import BIN, helper_env, run_command
from tests.mcp_support import connect, texts
from tests.nats_support import Host, make_hosts

ELSEWHERE = "Role 'cleaner' works on host b, not here (host a): run this on host b.\n"


@pytest.fixture
def host_a(tmp_path: Path) -> Host:
    """Host a of a swarm whose cleaner lives on host b (laid out without a server)."""
    a, _ = make_hosts(tmp_path, "nats://127.0.0.1:1", prepare=False)
    return a


@pytest.mark.parametrize(
    "command",
    [
        ("ready_for_next",),
        ("done_with_current",),
        ("handoffd", "ready-for-next"),
        ("handoffd", "heartbeat"),
    ],
)
def test_a_helper_run_as_a_role_on_another_host_is_refused_naming_its_host(
    host_a: Host, command: tuple[str, ...]
) -> None:
    done = run_command(*command, cwd=host_a.root, role="cleaner")
    assert (done.code, done.out, done.err) == (1, "", ELSEWHERE)


def test_sending_as_a_role_on_another_host_is_refused_and_the_draft_kept(host_a: Host) -> None:
    draft = host_a.root / "draft.txt"
    draft.write_text("type: note\nto: coder\npriority: 50\nmessage: hi\n")
    done = run_command("swarm_handoff", str(draft), cwd=host_a.root, role="cleaner")
    assert (done.code, done.err) == (1, ELSEWHERE)
    assert draft.exists()


def test_the_mcp_tools_refuse_a_role_on_another_host_as_the_helpers_do(
    host_a: Host, tmp_path: Path
) -> None:
    server = StdioServerParameters(
        command=str(Path(BIN) / "handoffd"),
        args=["mcp", "--root", str(host_a.root)],
        env=helper_env("cleaner"),
        cwd=str(host_a.root),
    )
    with connect(server, tmp_path / "server.log") as cleaner:
        result = cleaner.call("ready_for_next")
    assert result.is_error and result.meta is not None
    assert (result.meta["exit_code"], texts(result)[-1]) == (1, ELSEWHERE)


def test_a_role_of_this_host_is_served_as_before(host_a: Host) -> None:
    done = run_command("ready_for_next", cwd=host_a.root, role="coder")
    assert (done.code, done.out) == (0, "NO_TASK\n")
