"""The daemon's look at every pane at once: one `tmux list-panes -a` call says, for every
session, whether its pane printed anything since it was last read (docs/protocol.md §14).
Only a pane that did is read again (`pane.read`, one `capture-pane`); the others are what
they were, so an idle swarm costs one tmux call a rescan however many panes it watches.

tmux keeps a window's last activity (`window_activity`: the second of its last output)
and the pane's size, process, death and the harness `up` recorded; a pane whose line of
those is the one seen at its last read, and whose last output is older than that read,
shows what it showed then.  Output within the second of a read, or a clock stepped back,
only costs one read more: the rule errs towards reading.

Measured against tmux's control mode (`tmux -C`, told of each pane's `%output`): a
control client sees only the panes of the session it attaches to, so 32 panes took 32
long-lived clients (each session then shows as attached, each client holds 3.5 MB)
for 0.02 % of a core against this listing's 0.2 %; a fork per pane per rescan cost 5.4 %.
"""

from __future__ import annotations

import subprocess
import threading
import time

from handoffd.harness import pane

# A line per pane: ours are the active pane of each session's current window (`=name:`).
FIELDS = ("#{window_active}#{pane_active}", "#{pane_id}", "#{pane_pid}", "#{window_activity}",
          "#{pane_dead}", "#{session_created}", "#{pane_width}x#{pane_height}",
          f"#{{{pane.OPTION}}}", "#{session_name}")  # fmt: skip
FORMAT = "\t".join(FIELDS)
SLACK = 1  # seconds of a read's clock before which output counts as seen by it
LIMIT = 1024 * 1024  # bytes of a listing kept: a line per pane is ~60 bytes


NO_SERVER = (b"no server running", b"error connecting", b"No such file or directory")


class Listed:
    """One listing: each session's line (what must not change between two reads of its
    pane) and its last activity, in seconds since the epoch.  `answers`: tmux answered;
    `fallback`: it failed otherwise (each pane is then read on its own, as before)."""

    __slots__ = ("answers", "at", "fallback", "lines")

    def __init__(
        self, lines: dict[str, tuple[str, int]], answers: bool, at: float, fallback: bool = False
    ) -> None:
        self.lines = lines
        self.answers = answers
        self.at = at  # monotonic: when the call began
        self.fallback = fallback


class Kept:
    """A session's pane as last read: the read, the listing's line before it, and the wall
    clock then."""

    __slots__ = ("line", "read", "read_at")

    def __init__(self, read: pane.Pane, line: tuple[str, int], read_at: float) -> None:
        self.read = read
        self.line = line
        self.read_at = read_at


def parse(output: str) -> dict[str, tuple[str, int]]:
    """Session name -> (its pane's line, its window's last activity) of the active pane of
    each session's current window; other panes and malformed lines are left out."""
    found: dict[str, tuple[str, int]] = {}
    for line in output.split("\n"):
        fields = line.split("\t", len(FIELDS) - 1)
        if len(fields) != len(FIELDS) or fields[0] != "11" or not fields[3].isdigit():
            continue
        key = "\t".join(fields[1:3] + fields[4:8])
        found[fields[8]] = (key, int(fields[3]))
    return found


def unchanged(kept: Kept | None, line: tuple[str, int]) -> bool:
    """Whether a pane's listing `line` says it shows what it showed when `kept` was read:
    the same pane, size, process and harness, the same last activity as the listing before
    the read, and that before the second of the read (less SLACK).  Output just before a
    read, or a clock stepped back, makes one read more, never one fewer."""
    if kept is None:
        return False
    return line == kept.line and line[1] < int(kept.read_at) - SLACK


class Screens:
    """Every pane's last read, served again while the listing says it has not changed."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._kept: dict[tuple[str, str], Kept] = {}  # (socket, session) -> its last read
        self._last: dict[str, Listed] = {}  # socket -> its latest listing
        self._lock = threading.Lock()  # one listing at a time: those asked meanwhile share it

    def listing(self, socket: str, asked: float | None = None) -> Listed:
        """The panes of the server at `socket`: a listing begun at or after `asked`
        (monotonic; now if None), shared by every thread that asked before it began."""
        asked = time.monotonic() if asked is None else asked
        with self._lock:
            last = self._last.get(socket)
            if last is not None and last.at >= asked:
                return last
            made = _list(socket, self.timeout)
            self._last = {socket: made}  # one server at a time: the project's
            return made

    def read(
        self, socket: str, session: str, listed: Listed | None = None
    ) -> tuple[pane.Pane | None, bool]:
        """`session`'s pane (None: it cannot be read) and whether tmux answers, from a
        listing (a fresh one unless `listed`): read again only if it printed since."""
        listed = self.listing(socket) if listed is None else listed
        if listed.fallback:
            return self._each(socket, session)  # no listing to go by: read it, as ever
        if not listed.answers:  # no server: nothing to read (a project driven by hand)
            self._kept.pop((socket, session), None)
            return None, False
        line = listed.lines.get(session)
        if line is None:  # no such session on a server that answers: gone
            self._kept.pop((socket, session), None)
            return None, True
        kept = self._kept.get((socket, session))
        if kept is not None and unchanged(kept, line):
            return kept.read, True
        read_at = time.time()
        try:
            seen = pane.read(socket, session, self.timeout)
        except Exception:  # gone between the listing and the read, or a hung server
            self._kept.pop((socket, session), None)
            return None, True
        self._kept[(socket, session)] = Kept(seen, line, read_at)
        return seen, True

    def _each(self, socket: str, session: str) -> tuple[pane.Pane | None, bool]:
        """The fallback when the listing failed on a server that may answer: one read of
        the pane (one that fails is counted as no answer: nothing says more)."""
        self._kept.pop((socket, session), None)
        try:
            return pane.read(socket, session, self.timeout), True
        except Exception:
            return None, False


def _list(socket: str, timeout: float) -> Listed:
    """One `list-panes -a` call: no server (or a hung one) answers nothing; any other
    failure falls back to reading each pane."""
    at = time.monotonic()
    command = ["tmux", "-S", socket, "list-panes", "-a", "-F", FORMAT]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except Exception:  # a hung server, a socket path tmux cannot take
        return Listed({}, False, at)
    if done.returncode != 0:
        return Listed({}, False, at, fallback=not any(s in done.stderr for s in NO_SERVER))
    return Listed(parse(done.stdout[:LIMIT].decode(errors="replace")), True, at)
