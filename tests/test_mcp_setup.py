"""`handoffd up --mcp`: each worktree gets the `mcpServers` entry a harness reads, kept out of
git, and the server it names serves that worktree's role (docs/protocol.md §12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from tests.conftest import git, wait_for
from tests.mcp_support import Agent, connect, text
from tests.swarm_support import command_env, handoffd, take_down

CONFIG = """\
window coder   probe master  task
window cleaner probe cleaner batch
"""
OTHER = {"mcpServers": {"notes": {"command": "notes-server", "args": []}}, "theme": "dark"}


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path.resolve() / "p"
    conf = tmp_path / "swarm.conf"
    conf.write_text(CONFIG)
    assert handoffd("init", "--config", str(conf), str(root)).returncode == 0
    yield root
    take_down(root)


def worktree(root: Path, role: str) -> Path:
    return root if role == "coder" else root / ".worktrees" / role


def test_up_mcp_registers_the_server_for_each_role_in_its_worktree(
    root: Path, tmp_path: Path
) -> None:
    (worktree(root, "cleaner") / ".mcp.json").write_text(json.dumps(OTHER))
    up = handoffd("up", "--mcp", "--agent", "probe=sh -c 'exec cat'", "--check-after", "0",
                  str(root))  # fmt: skip
    assert up.returncode == 0, up.stderr
    for role in ("coder", "cleaner"):
        path = worktree(root, role) / ".mcp.json"
        assert f"mcp: {path}\n" in up.stdout
        entry = json.loads(path.read_text())["mcpServers"]["handoffd"]
        assert entry["args"] == ["mcp", "--root", str(root)]
        assert entry["env"] == {"SWARMFORGE_ROLE": role}
        assert Path(entry["command"]).name == "handoffd" and Path(entry["command"]).is_file()
        assert ".mcp.json" not in git(worktree(root, role), "status", "--porcelain", "-uall")
    kept = json.loads((worktree(root, "cleaner") / ".mcp.json").read_text())
    assert kept["mcpServers"]["notes"] == OTHER["mcpServers"]["notes"] and kept["theme"] == "dark"
    again = handoffd("up", "--mcp", "--agent", "probe=sh -c 'exec cat'", "--check-after", "0",
                     str(root))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads((worktree(root, "cleaner") / ".mcp.json").read_text()) == kept


def serve(root: Path, role: str, log: Path) -> AbstractContextManager[Agent]:
    """A session with the server `role`'s .mcp.json names, started as a harness would: its
    command, arguments and environment, in the worktree."""
    entry = json.loads((worktree(root, role) / ".mcp.json").read_text())["mcpServers"]["handoffd"]
    server = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**command_env(), **entry["env"]},
        cwd=str(worktree(root, role)),
    )
    return connect(server, log)


def test_the_registered_server_serves_the_role_of_its_worktree(root: Path, tmp_path: Path) -> None:
    up = handoffd("up", "--mcp", "--agent", "probe=sh -c 'exec cat'", "--check-after", "0",
                  str(root))  # fmt: skip
    assert up.returncode == 0, up.stderr
    log = tmp_path / "server.log"
    with serve(root, "coder", log) as coder, serve(root, "cleaner", log) as cleaner:
        for role, session in (("coder", coder), ("cleaner", cleaner)):
            beat = worktree(root, role) / ".swarmforge" / "handoffs" / "heartbeat"
            assert text(session.call("heartbeat")) == f"HEARTBEAT: {beat}\n"
        note = {"type": "note", "to": "cleaner", "priority": "50", "message": "hello"}
        assert text(coder.call("send_handoff", **note)).startswith("HANDOFF QUEUED: ")
        # the daemon `up` started delivers it; the coder works in the main checkout, whose
        # .swarmforge/ the daemon holds locked: its tools must still return
        batch = wait_for(lambda: text(cleaner.call("ready_for_next")).replace("NO_TASK\n", ""))
        assert batch.startswith("BATCH: ") and "hello" in batch
        assert text(cleaner.call("done_with_current")).endswith("NO_TASK\n")
