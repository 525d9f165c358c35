"""The project the queue's scenarios run in: `lead` sends every handoff to `alice` and `bob`.

A real git project (testbed's) with a worktree per role and no tmux socket, so a wake-up
only logs `wake_failed` and costs no tmux call.  Handoffs are ~500 bytes, as swarm_handoff
writes them; the history is old files in each recipient's completed/ and lead's sent/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from handoffd.core.config import Box
from testbed import Project, Seat, handoff_id, make_project, queued, write

SENDER, RECIPIENTS = "lead", ("alice", "bob")
SEATS = tuple(Seat(role, f"wt/{role}", agent="bench", session=f"bench-{role}")
              for role in (SENDER, *RECIPIENTS))  # fmt: skip
BODY = "Re-read your role and constitution.\n\n" + "benchmark payload line.\n" * 12
HISTORY_WHEN = 1_577_836_800.0  # 2020-01-01: history is old
DAEMON = os.path.join(".swarmforge", "daemon")
JOURNAL = os.path.join(DAEMON, "handoffd.journal")


class Fanout:
    """The project at `root`, with the outbox/tmp/ drafts folder swarm_handoff writes in."""

    def __init__(self, root: str) -> None:
        self.project: Project = make_project(Path(root), SEATS)
        self.root = root
        for role in SEATS:
            os.makedirs(self.path(role.name, Box.DRAFTS))
        os.makedirs(os.path.join(root, DAEMON))

    def path(self, role: str, box: str, *names: str) -> str:
        return os.path.join(self.project.box(role, box), *names)

    def worktree(self, role: str) -> str:
        return str(self.project.worktrees[role])

    def handoff(self, when: float | None = None) -> tuple[str, bytes]:
        """A note from SENDER to every recipient, sent at `when` (now by default)."""
        ident = handoff_id(SENDER, self.project.next_sequence(), when)
        name, handoff = queued(ident, SENDER, RECIPIENTS, BODY, ("type", "note"),
                               ("message", "benchmark handoff"), when=when)  # fmt: skip
        return name, handoff.render()

    def fill_outbox(self, count: int) -> list[str]:
        """`count` handoffs in SENDER's outbox, written in place but whole."""
        names = []
        for _ in range(count):
            name, data = self.handoff()
            # Aged, so the daemon need not wait for it to stand still (settle.py), which
            # would time the wait instead of the drain.
            write(self.path(SENDER, Box.OUTBOX, name), data, mtime=time.time() - 10)
            names.append(name)
        return names

    def fill_history(self, count: int) -> None:
        """`count` old files in each recipient's completed/ and the sender's sent/ (no fsync)."""
        for _ in range(count):
            name, data = self.handoff(when=HISTORY_WHEN)
            write(self.path(SENDER, Box.SENT, name), data)
            for role in RECIPIENTS:
                write(self.path(role, Box.COMPLETED, name), data)

    def clear_new(self) -> None:
        for role in RECIPIENTS:
            for name in os.listdir(self.path(role, Box.NEW)):
                os.unlink(self.path(role, Box.NEW, name))

    def log_events(self) -> list[dict[str, Any]]:
        with open(os.path.join(self.root, DAEMON, "handoffd.log"), "rb") as file:
            return [json.loads(line) for line in file if line.strip()]


def handoffd(*args: str) -> subprocess.CompletedProcess[str]:
    """`handoffd <args>` as a process of this interpreter, its output kept."""
    command = [sys.executable, "-m", "handoffd", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
