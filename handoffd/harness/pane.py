"""One read of a role's pane for the daemon: its screen with colours, its title, whether its
program still runs, when its session was made and which harness (and release of it) `up`
recorded for it, in one tmux call with a timeout.

`up` records a role's harness on its session as the user option `@handoffd-harness`
(docs/protocol.md §16), and the release it learned as `@handoffd-version`: the daemon
cannot see `up`'s `--agent NAME=COMMAND`, and the options go where the pane goes (a
session made again by `up` is recorded again).
"""

from __future__ import annotations

import subprocess

from handoffd.harness import releases
from handoffd.harness.profiles import Screen

OPTION = "@handoffd-harness"
VERSION = "@handoffd-version"
META = (f"#{{pane_dead}} #{{session_created}} #{{cursor_y}} #{{{OPTION}}} #{{{VERSION}}}"
        "|#{pane_title}")  # fmt: skip


class Pane:
    """What one read saw; `dead` when the pane's program has exited; `version` the release
    `up` recorded (None: none, or not one it would record)."""

    __slots__ = ("created", "cursor_y", "dead", "harness", "screen", "version")

    def __init__(
        self, screen: Screen, dead: bool, created: float | None, cursor_y: int, harness: str,
        version: str | None = None,
    ) -> None:  # fmt: skip
        self.screen = screen
        self.dead = dead
        self.created = created
        self.cursor_y = cursor_y
        self.harness = harness
        self.version = version

    @property
    def content(self) -> str:
        """The visible text, as `capture-pane -p` shows it."""
        return self.screen.text


def read(socket: str, session: str, timeout: float) -> Pane:
    """Read exactly `session`'s pane (`=name:`); raises on any failure (no server, no
    session, a hung tmux)."""
    target = f"={session}:"
    command = ["tmux", "-S", socket, "display-message", "-p", "-t", target, META, ";",
               "capture-pane", "-p", "-e", "-t", target]  # fmt: skip
    result = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.decode(errors="replace").strip() or "capture failed")
    return parse(result.stdout.decode(errors="replace"))


def parse(output: str) -> Pane:
    """The pane from tmux's answer: the META line, then the screen."""
    meta, _, captured = output.partition("\n")
    fields, _, title = meta.partition("|")
    dead, created, cursor, harness, version = [*fields.split(" "), "", "", "", "", ""][:5]
    screen = Screen.parse(captured.removesuffix("\n"), title)
    when = float(created) if created.isdigit() else None
    return Pane(screen, dead == "1", when, int(cursor) if cursor.isdigit() else -1, harness,
                releases.shown(version))  # fmt: skip


def record(socket: str, session: str, harness: str, timeout: float = 10.0,
           version: str | None = None) -> None:  # fmt: skip
    """Record `harness` on `session` for the daemon, and with `version` the release `up`
    learned (best effort: an older session keeps the harness its agent name says)."""
    command = ["tmux", "-S", socket, "set-option", "-t", f"={session}:", OPTION, harness]
    if version is not None:
        command += [";", "set-option", "-t", f"={session}:", VERSION, version]
    subprocess.run(command, capture_output=True, timeout=timeout, check=False)
