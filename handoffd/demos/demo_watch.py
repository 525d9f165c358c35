"""What the demos share: the scratch project each runs in (`scratch`), the wait for its
queue to come to rest before the audit (`settle`), and the lookout,
which watches the board as a person would, a few times a second, and with `--kill-agent`
kills that role's agent half-way and times how long the board takes to show it red
(docs/protocol.md §14).

The red cards come from the caller (`handoffd demo` passes the board's own `unanswered`
look-up), so the lookout can be tried on any look-up.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager

from handoffd.core import config, project
from handoffd.daemon import swarm
from handoffd.queue import scan
from handoffd.queue.scan import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    # the red cards of roles that do not answer: (card, role, detail) each
    RedCards = Callable[[str], list[tuple[str, str, str]]]


@contextmanager
def scratch(keep: bool, say: Callable[[str], None]) -> Iterator[tuple[str, str]]:
    """A temporary folder and the project root in it for one demo run: taken down and
    removed afterwards, or with `keep` left running, saying how to attach and to stop it."""
    base = tempfile.mkdtemp(prefix="handoffd-demo-")
    root = os.path.join(base, "project")
    try:
        yield base, root
    finally:
        if keep:
            socket = project.socket_path(root)
            say(f"kept running. Attach: tmux -S {socket} attach -t =swarmforge-coder")
            say(f"take it down:  handoffd down {root}  (then remove {base})")
        else:
            swarm.down(root)
            shutil.rmtree(base, ignore_errors=True)


class Lookout:
    """Watches the board as a person would, a few times a second: counts the cards that
    turned red because their role did not answer, and with `kill`, kills that role's agent
    half-way through and times how long its card takes to show red, and why."""

    EVERY = 0.25  # seconds between two looks at the board

    def __init__(
        self, root: str, started: float, kill: str | None, red_cards: RedCards | None
    ) -> None:
        self.root = root
        self.red_cards = red_cards
        self.started = started
        self.kill = kill
        self.killed: float | None = None  # when (monotonic) the session was ended
        self.red: dict[str, str] = {}  # card -> its detail, each stalled card once
        self.red_after: float | None = None
        self.red_detail = ""
        self._next = 0.0

    def look(self, shown: int, rounds: int, say: Callable[[str], None]) -> bool:
        """One look, when due; True once the killed agent's card is red."""
        now = time.monotonic()
        if self.kill and self.killed is None and shown >= max(1, rounds // 2):
            self._kill_agent(say)
        if now < self._next or self.red_cards is None:
            return False
        self._next = now + self.EVERY
        for card, role, detail in self.red_cards(self.root):
            self.red.setdefault(card, detail)
            if self.killed is not None and role == self.kill and self.red_after is None:
                self.red_after, self.red_detail = time.monotonic() - self.killed, detail
                say(f"the board shows {card} red {self.red_after:.1f} s after the kill: "
                    f"{detail}")  # fmt: skip
        return self.red_after is not None

    def _kill_agent(self, say: Callable[[str], None]) -> None:
        """SIGKILL the agent's process; its pane stays, dead (the demo's tmux server keeps
        exited panes), as when an agent crashes with nobody watching its terminal."""
        session = config.load_roles(self.root)[self.kill or ""].session
        socket = project.socket_path(self.root)
        shown = subprocess.run(
            ["tmux", "-S", socket, "display-message", "-p", "-t", f"={session}:", "#{pane_pid}"],
            capture_output=True, text=True, timeout=5, check=False,
        )  # fmt: skip
        pid = int(shown.stdout.strip() or 0)
        if pid > 0:
            os.kill(pid, signal.SIGKILL)
        self.killed = time.monotonic()
        say(f"killed {self.kill}'s agent (pid {pid}, in session {session}) "
            f"{self.killed - self.started:.1f} s in")  # fmt: skip


def busy_wakes(folder: str) -> int:
    """The `busy_wake` lines the agents wrote into `folder`: wake-ups typed while they printed."""
    count = 0
    for name in os.listdir(folder):
        if name.endswith(".events"):
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                count += sum(1 for line in file if '"busy_wake"' in line)
    return count


def settle(root: str, deadline: float) -> None:
    """Wait until nothing is queued or in flight anywhere, so the audit sees a queue at rest."""
    here = config.this_host(root)
    roles = [r for r in config.load_roles(root).values() if config.is_local(r, here)]
    states = (State.OUTBOX, State.NEW, State.IN_PROCESS)
    while time.monotonic() < deadline:
        if not any(scan.listing(role, states) for role in roles):
            return
        time.sleep(0.05)
