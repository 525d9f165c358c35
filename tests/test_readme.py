"""The README's tour is run, in order, in one shell, as an operator types it: with the venv's
commands on PATH (as `. .venv/bin/activate` leaves them) and nothing else of handoffd's —
not the agents' `*.sh` shims, which only an agent's session has.

A block preceded by `<!-- readme-test: skip (why) -->` is not run; each says why.  The
service-install block runs from the checkout, as the README says, with a scratch HOME.
The reference the tour leaves out lives in docs/: the log's events are listed in
docs/operations.md, checked here against the code.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BIN
from tests.swarm_support import BARE_GIT_ENV, take_down

CHECKOUT = Path(__file__).resolve().parent.parent
README = CHECKOUT / "README.md"
OPERATIONS = CHECKOUT / "docs" / "operations.md"
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->")
FENCE = re.compile(r"^```(\S*)\s*$")
SERVICE = "systemd/handoffd@.service"
PROJECT = "handoffd-tour"  # the tour's `mkdir ~/handoffd-tour`
MARK = "@@readme-block"
BLOCK_LIMIT = 30.0  # seconds one block may take before the tour counts as hung


@dataclass
class Block:
    line: int  # where its fence opens, for failure messages
    text: str
    skip: str | None  # why it is not run


def sh_blocks(text: str) -> list[Block]:
    """The fenced `sh` blocks of a Markdown text, in order, with the reason given for
    skipping one."""
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


def test_only_a_few_blocks_are_skipped_and_each_says_why() -> None:
    skipped = [block for block in BLOCKS if block.skip]
    assert len(skipped) <= len(BLOCKS) // 2
    assert all(len(block.skip or "") > 10 for block in skipped)
    assert len(RUN) >= 6


def test_the_readme_is_a_front_door_not_the_reference() -> None:
    """Under 300 lines; the contract, the log's events and the figures live in docs/."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300
    for reference in ("duplicate_skipped", "journal_corrupt", "AMBIGUOUS_TASK_STATE", "p99"):
        assert reference not in text, reference


# --- the tour, run once ----------------------------------------------------------------


@dataclass
class Tour:
    project: Path
    home: Path
    code: int | None  # the shell's exit status; None if a block hung and it was killed
    outputs: list[str]  # what each block of RUN printed (stdout and stderr), in order

    @property
    def printed(self) -> str:
        return "".join(self.outputs)

    def failure(self) -> str:
        """Which block stopped the tour, and what it printed."""
        block = RUN[len(self.outputs) - 1] if self.outputs else RUN[0]
        how = "hung" if self.code is None else f"exit status {self.code}"
        printed = self.outputs[-1] if self.outputs else ""
        return f"README.md:{block.line} ({how}):\n{block.text}\nprinted:\n{printed}"


def script(blocks: list[Block]) -> str:
    """The blocks as one shell session.  Before each block, wait for the daemon to empty
    the outboxes, as it has long done by the time a person types the next command."""
    lines = [
        "settle() { for _ in $(seq 200); do",
        f'  [ -z "$(find ~/{PROJECT} -path "*/handoffs/outbox/*.handoff" 2>/dev/null)" ] '
        "&& return 0",
        "  sleep 0.05; done; }",
    ]
    for index, block in enumerate(blocks):
        lines.append(f"printf '\\n{MARK} {index}\\n'; settle")
        if SERVICE in block.text:  # installed "from the handoffd checkout"
            lines.append(f"(cd '{CHECKOUT}'\n{block.text})")
        else:
            lines.append(block.text)
    return "\n".join(lines) + "\n"


def run_tour(start: Path, env: dict[str, str]) -> tuple[int | None, list[str]]:
    """Run RUN in one `bash -e` session; the exit status and each block's output."""
    shell = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script(RUN)], cwd=start, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    assert shell.stdout is not None
    raw, blocks_seen, since = b"", -1, time.monotonic()
    with selectors.DefaultSelector() as selector:
        selector.register(shell.stdout, selectors.EVENT_READ)
        while True:
            if time.monotonic() - since > BLOCK_LIMIT:
                os.killpg(shell.pid, signal.SIGKILL)
                shell.wait()
                return None, split(raw.decode(errors="replace"))
            if not selector.select(timeout=0.5):
                continue
            chunk = os.read(shell.stdout.fileno(), 65536)
            if not chunk:
                break
            raw += chunk
            if raw.count(MARK.encode()) != blocks_seen:
                blocks_seen, since = raw.count(MARK.encode()), time.monotonic()
    return shell.wait(timeout=10), split(raw.decode(errors="replace"))


def split(text: str) -> list[str]:
    """Each block's output, from the marks printed before each block."""
    return re.split(rf"\n?{MARK} \d+\n", text)[1:]


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    """The tour as a newcomer types it: a scratch HOME (the project is ~/handoffd-tour), git
    knowing who they are, the venv's commands on PATH and no handoffd shim."""
    base = tmp_path_factory.mktemp("tour")
    home, start = base / "home", base / "start"
    for folder in (home, start):
        folder.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TMUX", "TMUX_PANE", "SWARMFORGE_ROLE", "NOTIFY_SOCKET", "HANDOFFD_ROOT")
    }
    env.update(BARE_GIT_ENV, HOME=str(home), PATH=os.pathsep.join([BIN, env.get("PATH", "")]))
    for who in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{who}_NAME": "A Newcomer", f"GIT_{who}_EMAIL": "new@example.org"})
    project = home / PROJECT
    try:
        code, outputs = run_tour(start, env)
        yield Tour(project, home, code, outputs)
    finally:
        if project.is_dir():
            take_down(project)


def test_every_command_of_the_readme_runs_in_an_operators_shell(tour: Tour) -> None:
    assert tour.code == 0 and len(tour.outputs) == len(RUN), tour.failure()


def test_the_tour_does_what_it_says(tour: Tour) -> None:
    assert tour.code == 0, tour.failure()
    printed = tour.printed
    assert "daemon: started (pid " in printed
    assert re.search(r"HANDOFF QUEUED: \S+/outbox/50_\S+_to_cleaner\.handoff", printed)
    assert "WARNING: no handoffd daemon" not in printed  # the tour's daemon was running
    assert re.search(r' delivered \{"file": ?"50_\S+", ?"recipients": ?\["cleaner"\]', printed)
    assert "RESUMING: cleaner on cleaner (from live file)" in printed
    assert re.search(r"^RED +\S+@cleaner .* Sort the imports with isort or with ruff\?$", printed,
                     re.M)  # fmt: skip
    assert "daemon: stopped pid" in printed
    assert re.search(r"mcp: \S+/\.worktrees/cleaner/\.mcp\.json", printed)  # up --mcp
    assert '"SWARMFORGE_ROLE": "cleaner"' in printed
    unit = (tour.home / ".config/systemd/user/handoffd@.service").read_text()
    assert f"ExecStart={BIN}/handoffd run %f" in unit


def claims(block: Block) -> list[str]:
    """The tokens a block's comments say it prints: `WORD:` and `WORD_WORD`, in capitals."""
    said = " ".join(line.partition("#")[2] for line in block.text.splitlines() if "# " in line)
    words = re.findall(r"\b[A-Z][A-Z_]*[A-Z](?: [A-Z][A-Z_]*[A-Z])*(?::|\b)", said)
    return [word for word in words if word.endswith(":") or "_" in word]


def test_every_token_a_comment_of_the_tour_promises_is_printed_by_its_block(tour: Tour) -> None:
    """`# NO_CURRENT_TASK` beside a command that prints NO_CURRENT_BATCH is a wrong tour."""
    assert tour.code == 0, tour.failure()
    promised = {block.line: claims(block) for block in RUN}
    assert sum(map(len, promised.values())) >= 10
    missing = {
        block.line: [token for token in promised[block.line] if token not in output]
        for block, output in zip(RUN, tour.outputs, strict=True)
    }
    assert {line: tokens for line, tokens in missing.items() if tokens} == {}


def test_a_comment_promising_a_token_its_block_does_not_print_is_caught() -> None:
    block = Block(1, "done_with_current || true  # NO_CURRENT_TASK, exit 1\n", None)
    assert claims(block) == ["NO_CURRENT_TASK"]
    assert claims(Block(1, "ready_for_next  # BATCH: …, then TASK_NAME: and FROM\n", None)) == [
        "BATCH:", "TASK_NAME:"
    ]  # fmt: skip


# --- the reference the tour points to ----------------------------------------------------


def logged_events() -> set[str]:
    """Every event name the code writes to the daemon's log."""
    call = re.compile(r"\blog\.(?:info|warning|error|exception)\(\s*\"([a-z_]+)\"")
    found = set()
    for path in (CHECKOUT / "handoffd").rglob("*.py"):
        found.update(call.findall(path.read_text(encoding="utf-8")))
    return found


def test_docs_operations_md_lists_every_event_of_the_log() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index("## The log") :]
    section = section[: section.index("\n## ", 1)]
    listed = set(re.findall(r"^- `([a-z_]+)`", section, re.M))
    events = logged_events()
    assert {"started", "delivered", "config_loaded", "recovered", "duplicate_skipped"} <= events
    assert events - listed == set()
    assert "log_dropped" in listed  # written by the log itself, not through `log.…(`


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
