"""A swarm of real agent harnesses for the tests and the benchmark: a project laid out by
`handoffd init`, Claude Code and Codex started by `handoffd up` in the project's own tmux
server, their model a scripted server on loopback (`testbed.models`), mail sent through
the real helpers by a third role whose pane is a plain shell.

`RealSwarm` does the I/O; a test says what to send and what the model is to do, and reads
what reached the model (`server.requests`), the daemon's log and the panes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from handoffd.core import lifecycle
from handoffd.harness import keys, pane, profiles
from handoffd.wakeups.wake import TEXT as WAKE
from testbed import harnesses
from testbed.models import Call, ModelServer, Rule

BIN = os.path.dirname(sys.executable)
SENDER = "QA"  # the role mail comes from: a shell, not an agent
AGENTS = {"coder": "claude", "cleaner": "codex"}  # role -> harness, as the tests use them
WORKTREES = {"coder": "master", "cleaner": "cleaner", SENDER: SENDER}
HARNESS_ENV_DROP = ("TMUX", "TMUX_PANE", "SWARMFORGE_ROLE", "NOTIFY_SOCKET", "HANDOFFD_ROOT")
TAKE: list[str | Call] = ["ready_for_next.sh", "done_with_current.sh"]  # take it, finish it
HOOK_REASON = "handoff(s) waiting"  # in the Stop hook's reason (docs/protocol.md §16)
SLOW = "SLOW-TURN"  # a prompt whose turn keeps the harness busy for seconds


def rules(slow: float = 2.0) -> list[Rule]:
    """The model of an agent that does its work: woken (typed or by its Stop hook), it
    takes the mail and finishes it; a SLOW-TURN prompt keeps it busy, each of its two
    answers `slow` seconds in coming."""
    return [
        Rule(WAKE, TAKE, say="Took the mail."),
        Rule(HOOK_REASON, TAKE, say="Took the mail the hook told of."),
        Rule(SLOW, ["echo working slowly"], say="Slow turn done.", delay=slow),
    ]


class RealSwarm:
    """Roles `roles` (of AGENTS) each running its real harness, plus the sender's shell;
    `versions` (role -> release) runs an older release of a role's harness than its pinned
    one (`testbed/harnesses.tsv`)."""

    def __init__(self, base: Path, server: ModelServer, roles: tuple[str, ...],
                 versions: dict[str, str] | None = None) -> None:  # fmt: skip
        self.base = base
        self.server = server
        self.roles = roles
        self.versions = dict(versions or {})
        self.root = base / "p"
        self.env = _env()
        self.homes = {role: base / f"home-{role}" for role in roles}
        self.socket = ""
        self.up_output = ""

    # --- building and running -----------------------------------------------------------

    def init(self, extra_conf: str = "") -> None:
        lines = [f"window {r} {AGENTS[r]} {WORKTREES[r]} task" for r in self.roles]
        lines += [f"window {SENDER} shell {SENDER} task", extra_conf]
        conf = self.base / "swarm.conf"
        conf.write_text("\n".join(lines) + "\n")
        self.handoffd("init", "--config", str(conf), str(self.root))
        for role, home in self.homes.items():
            if AGENTS[role] == "claude":
                harnesses.claude_home(home, [self.worktree(role)])
            else:
                harnesses.codex_home(home, [self.worktree(role)], self.server.url)
                harnesses.login_profile(home)

    def up(self, *options: str) -> str:
        """`handoffd up` with each harness's command line; what it printed."""
        agents = []
        for role, home in self.homes.items():
            version = self.versions.get(role)
            if AGENTS[role] == "claude":
                command = harnesses.claude_command(home, self.server.url, version)
            else:
                command = harnesses.codex_command(home, version)
            agents += ["--agent", f"{AGENTS[role]}={command}"]
        self.up_output = self.handoffd("up", *agents, *options, str(self.root)).stdout
        self.socket = (self.root / ".swarmforge" / "tmux-socket").read_text().strip()
        return self.up_output

    def down(self) -> None:
        """Stop the daemon and the tmux server, then anything of the harnesses left
        running in this swarm's folders (by pid: only what this swarm started)."""
        lifecycle.stop(str(self.root), grace=2.0)
        if self.socket:
            subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True,
                           timeout=10, check=False)  # fmt: skip
        for pid in leftovers(self.base):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def handoffd(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [os.path.join(BIN, "handoffd"), *args]
        result = subprocess.run(command, env=self.env, capture_output=True, text=True,
                                timeout=120, check=False)  # fmt: skip
        if check and result.returncode != 0:
            raise RuntimeError(f"handoffd {args[0]}: {result.stdout}{result.stderr}")
        return result

    # --- what the swarm does --------------------------------------------------------------

    def worktree(self, role: str) -> Path:
        return self.root if WORKTREES[role] == "master" else self.root / ".worktrees" / role

    def handoffs(self, role: str) -> Path:
        return self.worktree(role) / ".swarmforge" / "handoffs"

    def session(self, role: str) -> str:
        return f"swarmforge-{role}"

    def send(self, to: str, message: str, sender: str = SENDER) -> str:
        """Queue a note from `sender` through `swarm_handoff`; the queued file's name."""
        draft = self.base / f"draft-{time.monotonic_ns()}.txt"
        draft.write_text(f"type: note\nto: {to}\npriority: 50\nmessage: {message}\n")
        result = self.helper(sender, "swarm_handoff", str(draft))
        if result.returncode != 0:
            raise RuntimeError(f"swarm_handoff: {result.stderr}")
        return os.path.basename(result.stdout.split("HANDOFF QUEUED: ", 1)[1].strip())

    def helper(self, role: str, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([os.path.join(BIN, name), *args], cwd=self.worktree(role),
                              env={**self.env, "SWARMFORGE_ROLE": role}, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip

    def type(self, role: str, text: str, command: bool = False) -> None:
        """Type a prompt into the role's harness as the daemon types a wake-up (text, then
        Enter once it shows, one more while it stays), and see it taken; a `command` (as
        `/clear`) leaves no trace of itself: only its box is seen emptied."""
        target = f"={self.session(role)}:"
        prof = profiles.PROFILES[AGENTS[role]]

        def send(*typed: str) -> None:
            self.tmux("send-keys", "-t", target, *typed)

        def look() -> profiles.Screen:
            return pane.read(self.socket, self.session(role), 10).screen

        keys.type_line(send, look, prof, text)
        if command:
            deadline = time.monotonic() + 10
            while profiles.holds(look(), prof, text) and time.monotonic() < deadline:
                time.sleep(0.05)
            return
        if not keys.submitted(look, send, prof, text)[0]:
            raise RuntimeError(f"{role}'s harness did not take {text!r}:\n{self.screen(role)}")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True,
                              timeout=10, check=False).stdout  # fmt: skip

    def look(self, role: str) -> tuple[str, str | None]:
        """The role's harness as the daemon reads it: its state and its input box's text."""
        seen = pane.read(self.socket, self.session(role), 10)
        prof = profiles.PROFILES[AGENTS[role]]
        return profiles.state(seen.screen, prof), profiles.box_text(seen.screen, prof)

    def wait_idle(self, role: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.look(role)[0] != profiles.IDLE:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{role}'s harness never went idle:\n{self.screen(role)}")
            time.sleep(0.1)

    def screen(self, role: str) -> str:
        return self.tmux("capture-pane", "-p", "-t", f"={self.session(role)}:")

    def log(self, event: str | None = None) -> list[dict[str, Any]]:
        path = self.root / ".swarmforge" / "daemon" / "handoffd.log"
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [line for line in lines if event is None or line["event"] == event]

    def wakes(self, role: str) -> list[dict[str, Any]]:
        return [line for line in self.log("wake") if line.get("role") == role]

    def completed(self, role: str) -> list[str]:
        folder = self.handoffs(role) / "inbox" / "completed"
        return sorted(os.listdir(folder)) if folder.is_dir() else []


def _env() -> dict[str, str]:
    """A `handoffd` command's environment: the venv first on PATH, outside any tmux, git
    without the user's configuration but with an identity."""
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_ENV_DROP}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    for who in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{who}_NAME": "Test", f"GIT_{who}_EMAIL": "test@example.com"})
    return env


def leftovers(base: Path) -> list[int]:
    """Live processes whose command line or environment names `base` (the harnesses and
    their servers run with HOME and roots there), other than this one."""
    found, marker = [], str(base).encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                cmdline = file.read()
            with open(f"/proc/{entry}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(int(entry))
    return found


def clean(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
