"""One read of a role's pane for the daemon: its screen with colours, its title, whether its
program still runs, when its session was made and which harness `up` recorded for it, in
one tmux call with a timeout.

`up` records a role's harness on its session as the user option `@handoffd-harness`
(docs/protocol.md §16): the daemon cannot see `up`'s `--agent NAME=COMMAND`, and the
option goes where the pane goes (a session made again by `up` is recorded again).
"""

from __future__ import annotations

import subprocess

from handoffd.harness.profiles import Screen

OPTION = "@handoffd-harness"
META = f"#{{pane_dead}} #{{session_created}} #{{cursor_y}} #{{{OPTION}}}|#{{pane_title}}"


class Pane:
    """What one read saw; `dead` when the pane's program has exited."""

    __slots__ = ("created", "cursor_y", "dead", "harness", "screen")

    def __init__(
        self, screen: Screen, dead: bool, created: float | None, cursor_y: int, harness: str
    ) -> None:
        self.screen = screen
        self.dead = dead
        self.created = created
        self.cursor_y = cursor_y
        self.harness = harness

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
    dead, created, cursor, harness = [*fields.split(" "), "", "", "", ""][:4]
    screen = Screen.parse(captured.removesuffix("\n"), title)
    when = float(created) if created.isdigit() else None
    return Pane(screen, dead == "1", when, int(cursor) if cursor.isdigit() else -1, harness)


def record(socket: str, session: str, harness: str, timeout: float = 10.0) -> None:
    """Record `harness` on `session` for the daemon (best effort: an older session keeps
    the harness its agent name says)."""
    subprocess.run(["tmux", "-S", socket, "set-option", "-t", f"={session}:", OPTION, harness],
                   capture_output=True, timeout=timeout, check=False)  # fmt: skip
