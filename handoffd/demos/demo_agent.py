"""A scripted agent for `handoffd demo`: it follows the protocol literally, as a person would.

It runs in its role's tmux session and reads what is typed there.  On the wake-up
line it runs `ready_for_next.sh`; for each task it merges the commit it was handed,
"works" by committing, hands the result to its peer with `swarm_handoff.sh`, and
finishes with `done_with_current.sh` (which also shows the next task, if any).
With `--miss-rate` it ignores that share of wake-ups, as a busy agent would.  With
`--busy-rate` it spends that share of its tasks printing on and on after handing the work
over (a long tool run, say): the daemon must not type a wake-up into its pane meanwhile
(docs/protocol.md §14), and a wake-up line that arrives while it prints is written to
its `--events` file as `busy_wake`, for the demo's summary to count.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time

WAKE_TEXT = "You have new handoff mail."
BUSY_SECONDS = 2.0  # how long a busy stretch prints
BUSY_EVERY = 0.1  # seconds between two of its lines
IDENTITY = ["-c", "user.name=demo agent", "-c", "user.email=demo@handoffd.invalid"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peer", required=True, help="the role to hand work to")
    parser.add_argument("--rounds", type=int, default=0, help="round trips to start (0: echo)")
    parser.add_argument("--miss-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--busy-rate", type=float, default=0.0)
    parser.add_argument("--busy-seconds", type=float, default=BUSY_SECONDS)
    parser.add_argument("--events", default="", help="a file for busy_wake lines")
    parser.add_argument("--burst", action="store_true", help="start every round at once")
    parser.add_argument("--work-seconds", type=float, default=0.0, help="each task's work")
    args = parser.parse_args(argv)
    agent = Agent(os.environ["SWARMFORGE_ROLE"], args.peer, args.rounds, args.miss_rate, args.seed)
    agent.busy_rate, agent.busy_seconds, agent.events = (
        args.busy_rate,
        args.busy_seconds,
        args.events,
    )
    agent.work_seconds = args.work_seconds
    agent.say(f"{agent.role} is ready; waiting for wake-ups (peer: {agent.peer})")
    lines: queue.Queue[tuple[str, bool] | None] = queue.Queue()
    threading.Thread(target=agent.read, args=(lines,), daemon=True).start()
    for _ in range(agent.rounds if args.burst else min(agent.rounds, 1)):
        agent.start_round()  # a burst: every round at once, for a pool to share
    while (item := lines.get()) is not None:
        line, busy = item
        if WAKE_TEXT in line:
            if busy:  # typed while this pane was printing: what idle-first must prevent
                agent.record("busy_wake")
            agent.on_wake()
    return 0


class Agent:
    def __init__(self, role: str, peer: str, rounds: int, miss_rate: float, seed: int) -> None:
        self.role = role
        self.peer = peer
        self.rounds = rounds  # > 0: this agent starts round trips and counts their returns
        self.sent = 0
        self.miss_rate = miss_rate
        self.random = random.Random(f"{seed}-{role}")
        self.busy_rate = 0.0
        self.busy_seconds = BUSY_SECONDS
        self.events = ""
        self.work_seconds = 0.0  # how long each task's work takes (a pool's demo)
        self.busy = False  # printing on and on: the pane is anything but idle
        self.busy_random = random.Random(f"{seed}-{role}-busy")  # misses keep their draws

    def say(self, text: str) -> None:
        print(f"[{self.role}] {text}", flush=True)

    def read(self, lines: queue.Queue[tuple[str, bool] | None]) -> None:
        """Each line typed into the pane as it arrives, with whether it found us busy."""
        for line in sys.stdin:
            lines.put((line, self.busy))
        lines.put(None)

    def record(self, event: str) -> None:
        if self.events:
            with open(self.events, "a", encoding="utf-8") as file:
                file.write(
                    json.dumps({"event": event, "role": self.role, "at": time.time()}) + "\n"
                )

    def work_visibly(self) -> None:
        """Print on and on for a while, as an agent running a long tool does."""
        self.busy = True
        try:
            deadline = time.monotonic() + self.busy_seconds
            n = 0
            while time.monotonic() < deadline:
                n += 1
                self.say(f"busy: running the tests… {n}")
                time.sleep(BUSY_EVERY)
        finally:
            self.busy = False

    def on_wake(self) -> None:
        if self.random.random() < self.miss_rate:
            self.say("busy: ignoring this wake-up")
            return
        output = run("ready_for_next.sh")
        while "TASK: " in output:
            for payload in payloads(output):
                self.handle(payload)
            if self.busy_random.random() < self.busy_rate:
                self.work_visibly()  # the peer's reply may arrive meanwhile
            output = run("done_with_current.sh")
        self.say("idle")

    def handle(self, payload: str) -> None:
        """Merge what the peer handed over, then do our part of the round."""
        for line in payload.splitlines():  # the payload's last line: merge_and_process <from> <c>
            words = line.split()
            if len(words) == 3 and words[0] == "merge_and_process":
                merge(words[2])
        if self.rounds == 0:
            time.sleep(self.work_seconds)
            self.hand_off(f"cleaned-{commit_count()}", "clean.txt")
        elif self.sent < self.rounds:
            self.start_round()
        else:
            self.say(f"all {self.rounds} round trips are back")

    def start_round(self) -> None:
        self.sent += 1
        self.hand_off(f"round-{self.sent}", "feature.txt")

    def hand_off(self, task: str, filename: str) -> None:
        commit = work(filename, task)
        fd, draft = tempfile.mkstemp(suffix=".draft")
        with os.fdopen(fd, "w") as file:
            file.write(f"type: git_handoff\nto: {self.peer}\npriority: 50\n")
            file.write(f"task: {task}\ncommit: {commit}\n")
        self.say(run("swarm_handoff.sh", draft).strip())


def payloads(output: str) -> list[str]:
    """The PAYLOAD text of each TASK block in a helper's output."""
    blocks = output.split("PAYLOAD:\n")[1:]
    return [block.split("\nBATCH_ITEM:")[0].split("\nCOMPLETED")[0] for block in blocks]


def run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        print(result.stderr, end="", flush=True)
    return result.stdout


def merge(commit: str) -> None:
    if subprocess.run(["git", *IDENTITY, "merge", "-q", "--no-edit", commit],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        subprocess.run(["git", "merge", "--abort"], capture_output=True, check=False)


def work(filename: str, task: str) -> str:
    """'Work': append a line to a file and commit it; returns the commit's 10-digit name."""
    with open(filename, "a", encoding="utf-8") as file:
        file.write(f"{task}\n")
    subprocess.run(["git", "add", filename], check=True, capture_output=True)
    subprocess.run(["git", *IDENTITY, "commit", "-q", "-m", task], check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "--short=10", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_count() -> int:
    result = subprocess.run(["git", "rev-list", "--count", "HEAD"], capture_output=True, text=True)
    return int(result.stdout.strip() or 0)


if __name__ == "__main__":
    sys.exit(main())
