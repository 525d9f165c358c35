"""Every command the README shows is run, in order, in a scratch project, as a newcomer
would type them (with `handoffd` on PATH, the helper shims as an agent's session has them,
and stand-ins for the agents `claude` and `codex`).

A block preceded by `<!-- readme-test: skip (why) -->` is not run; each says why.  The
service-install block runs from the checkout, as the README says, with a scratch HOME.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from handoffd import swarm
from tests.conftest import BIN
from tests.swarm_support import BARE_GIT_ENV, take_down

CHECKOUT = Path(__file__).resolve().parent.parent
README = CHECKOUT / "README.md"
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Block:
    line: int  # where its fence opens, for failure messages
    text: str
    skip: str | None  # why it is not run


def sh_blocks(text: str) -> list[Block]:
    """The README's fenced `sh` blocks, in order, with the reason given for skipping one."""
    lines = text.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        if opened.group(1) == "sh":
            before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            skip = SKIP.fullmatch(before.strip())
            body = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(Block(index + 1, body, skip.group(1) if skip else None))
        index = end + 1
    return blocks


BLOCKS = sh_blocks(README.read_text(encoding="utf-8"))
RUN = [block for block in BLOCKS if block.skip is None]
SERVICE = "systemd/handoffd@.service"


def test_only_a_few_blocks_are_skipped_and_each_says_why() -> None:
    skipped = [block for block in BLOCKS if block.skip]
    assert len(skipped) <= len(BLOCKS) // 2
    assert all(len(block.skip or "") > 10 for block in skipped)
    assert len(RUN) >= 6


@pytest.fixture
def newcomer(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """An empty project folder, a scratch HOME, the venv's commands and two stand-in agents
    on PATH (each prints its arguments, then waits for input like an agent would)."""
    project, home, agents = tmp_path / "myproject", tmp_path / "home", tmp_path / "agents"
    for folder in (project, home, agents):
        folder.mkdir()
    for name in ("claude", "codex"):
        agent = agents / name
        agent.write_text(f'#!/bin/sh\necho "{name} $*"\nexec cat\n')
        agent.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TMUX", "TMUX_PANE", "SWARMFORGE_ROLE", "NOTIFY_SOCKET", "HANDOFFD_ROOT")
    }
    env.update(BARE_GIT_ENV, HOME=str(home))
    # the shims too: the README's agent commands are typed in a session, where `up` puts them
    env["PATH"] = os.pathsep.join([str(agents), swarm.shims_dir(), BIN, env.get("PATH", "")])
    yield project, env
    take_down(project)


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"README.md:{block.line}:\n{block.text}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def test_every_command_of_the_readme_runs(newcomer: tuple[Path, dict[str, str]]) -> None:
    project, env = newcomer
    printed = ""
    for block in RUN:
        where = CHECKOUT if SERVICE in block.text else project
        result = run_block(block, where, env)
        printed += result.stdout + result.stderr
    # What the tour promises along the way:
    assert "daemon: started (pid " in printed
    assert re.search(r"HANDOFF QUEUED: \S+/outbox/50_\S+_to_cleaner\.handoff", printed)
    assert "WARNING: no handoffd daemon" not in printed  # the tour's daemon was running
    assert re.search(r' delivered \{"file": ?"50_\S+", ?"recipients": ?\["cleaner"\]', printed)
    assert "daemon: stopped pid" in printed
    unit = Path(env["HOME"], ".config/systemd/user/handoffd@.service").read_text()
    assert f"ExecStart={BIN}/handoffd run %f" in unit


def logged_events() -> set[str]:
    """Every event name the code writes to the daemon's log."""
    call = re.compile(r"\blog\.(?:info|warning|error|exception)\(\s*\"([a-z_]+)\"")
    found = set()
    for path in (CHECKOUT / "handoffd").rglob("*.py"):
        found.update(call.findall(path.read_text(encoding="utf-8")))
    return found


def test_the_readme_lists_every_event_of_the_log() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("The log is one JSON object per line") :]
    section = section[: section.index("\n\n", section.index("- "))]
    listed = set(re.findall(r"`([a-z_]+)`", section))
    events = logged_events()
    assert {"started", "delivered", "config_loaded", "recovered", "duplicate_skipped"} <= events
    assert events - listed == set()


def test_the_jq_line_shows_every_field_of_a_delivery() -> None:
    """No `role: null` for a delivery, and its recipients shown."""
    (block,) = [b for b in RUN if "jq " in b.text]
    program = re.search(r"jq -r '([^']+)'", block.text)
    assert program
    entry = {"timestamp": "2026-01-01T00:00:00Z", "level": "info", "event": "delivered",
             "file": "50_x.handoff", "sender": "coder", "recipients": ["cleaner"]}  # fmt: skip
    result = subprocess.run(
        ["jq", "-r", program.group(1)], input=json.dumps(entry), capture_output=True,
        text=True, timeout=10, check=True,
    )  # fmt: skip
    assert result.stdout == (
        '2026-01-01T00:00:00Z delivered {"file":"50_x.handoff","sender":"coder",'
        '"recipients":["cleaner"]}\n'
    )
