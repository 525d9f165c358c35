"""What the daemon holds back, and why: its link to NATS and the originals it deferred
(docs/protocol.md §15, "A held original says why").

The daemon knows why an original waits in its outbox (a NATS server out of reach, a full
disk); `status`, `up`, `start` and the web board are other processes.  So the daemon keeps
`daemon/state.json`, rewritten atomically when what it says changes, and the views read it
back.  Read back it is untrusted input like anything under `.swarmforge/`: a regular file
only, at most `LIMIT` bytes, every field checked, anything else taken as "nothing known".
What it says is shown only while a daemon runs (a dead daemon's file says nothing now).
"""

from __future__ import annotations

import json
import math
import os

from handoffd.core import durable, safeio

FILE = "state.json"
LIMIT = 1024 * 1024  # bytes of the state file ever read
MOST = 4000  # deferred originals kept in it: more are shown as merely queued
TEXT_LIMIT = 500  # characters of a reason or a server list
SKEW = 60.0  # seconds a time in the state file may lie ahead of this host's clock
CONNECTING, UP, DOWN = "connecting", "up", "down"


class Link:
    """The daemon's NATS connection as it last saw it: up, down (and why, since when), or
    still connecting for the first time."""

    __slots__ = ("since", "state", "why")

    def __init__(self, state: str, why: str = "", since: float | None = None) -> None:
        self.state = state
        self.why = why
        self.since = since

    def to_json(self) -> dict[str, object]:
        return {"state": self.state, "why": self.why, "since": self.since}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Link) and self.to_json() == other.to_json()


class Held:
    """What the state file says: the link (None: the project uses no NATS) and, per
    outbox original (by path), since when (seconds since the epoch) and why it waits."""

    __slots__ = ("deferred", "link")

    def __init__(
        self, link: Link | None = None, deferred: dict[str, tuple[float, str]] | None = None
    ) -> None:
        self.link = link
        self.deferred = deferred or {}

    def to_json(self) -> dict[str, object]:
        oldest = sorted(self.deferred.items(), key=lambda kv: kv[1][0])[:MOST]
        deferred = {path: [since, why] for path, (since, why) in oldest}
        return {"nats": self.link.to_json() if self.link else None, "deferred": deferred}


# --- pure: what a person reads ------------------------------------------------------------


def plain(reason: str, link: Link | None) -> str:
    """A deferral's reason in a person's words: the log's `nats: not connected to …` is
    `NATS unreachable: <why>` (the link's own words for it), another `nats: …` `NATS: …`;
    a disk's or the system's reason as the log has it."""
    if reason.startswith("nats: not connected"):
        why = link.why if link is not None and link.state == DOWN else ""
        return f"NATS unreachable: {why}" if why else "NATS unreachable"
    if reason == "nats: not configured":
        return "a role on another host, and no nats line in swarmforge.conf"
    if reason.startswith("nats: "):
        return "NATS: " + reason.removeprefix("nats: ")
    return reason


def nats_line(link: Link | None) -> str:
    """`NATS: unreachable (<why>)` while the daemon cannot reach its servers, else ''."""
    if link is None or link.state != DOWN:
        return ""
    return f"NATS: unreachable ({link.why or 'no server answered'})"


# --- the file -------------------------------------------------------------------------------


def path(root: str) -> str:
    return os.path.join(root, ".swarmforge", "daemon", FILE)


def save(root: str, held: Held) -> None:
    """Write the state file (the daemon, when what it says changed); raises `OSError`.
    Atomically (a temp file of our own, created exclusively, renamed over it) but never
    fsynced: it says what is true now, and after a power cut the daemon says it anew."""
    target = path(root)
    temp = durable.temp_name(os.path.dirname(target), FILE)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o644)
    try:
        try:
            durable.write_all(fd, json.dumps(held.to_json(), sort_keys=True).encode())
        finally:
            os.close(fd)
        os.rename(temp, target)
    except BaseException:
        durable.unlink_quietly(temp)
        raise


class Keeper:
    """The daemon's side: writes the state file when what it says changes (never on every
    pass, never for a project that has nothing to say: no NATS, nothing deferred)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._said: object = None

    def update(self, link: Link | None, deferred: dict[str, tuple[float, str]]) -> None:
        """Keep `link` and `deferred` for the views; never raises (a view's file: a write
        that fails is tried again at the next change or pass)."""
        held = Held(link, deferred)
        said = held.to_json()
        if said == self._said or (self._said is None and link is None and not deferred):
            return
        try:
            save(self.root, held)
        except OSError:
            return
        self._said = said


def load(root: str) -> Held:
    """What the state file says, each field checked; nothing known (`Held()`) when there is
    no such file, or it is not a regular file of sensible size and shape."""
    try:
        data = json.loads(safeio.read_regular(path(root), LIMIT))
    except (OSError, ValueError, RecursionError):  # nested past the parser's depth
        return Held()
    if not isinstance(data, dict):
        return Held()
    return Held(_link(data.get("nats")), _deferred(data.get("deferred")))


def first_link(root: str, timeout: float = 3.0) -> Link | None:
    """The link as the daemon that just started (or runs) says it, once it has tried its
    servers or `timeout` seconds passed (a refused connection is said at once, a silent
    server within its connect timeout): what `up` and `start` print.  A poll of the state
    file with a deadline: the daemon is another process, and no pipe tells of its link."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        link = load(root).link
        if (link is not None and link.state != CONNECTING) or time.monotonic() > deadline:
            return link
        time.sleep(0.05)


def link_line(link: Link | None, servers: str) -> str:
    """What `up` and `start` say of the link: connected, unreachable (why), or still
    connecting (the daemon's log says more); escaped for the terminal, as `status` has it:
    the why comes from the state file, which anyone who can write `.swarmforge/` can plant."""
    from handoffd.core.terminal import escape

    if link is not None and link.state == UP:
        return escape(f"NATS: connected ({servers})")
    if link is not None and link.state == DOWN:
        return escape(nats_line(link))
    return escape(f"NATS: still connecting to {servers} (see the daemon's log)")


def _link(raw: object) -> Link | None:
    if not isinstance(raw, dict) or raw.get("state") not in (CONNECTING, UP, DOWN):
        return None
    since = raw.get("since")
    return Link(raw["state"], _text(raw.get("why")), since if _time(since) else None)


def _deferred(raw: object) -> dict[str, tuple[float, str]]:
    if not isinstance(raw, dict):
        return {}
    found = {}
    for key, value in list(raw.items())[:MOST]:
        if isinstance(key, str) and isinstance(value, list) and len(value) == 2:
            since, why = value
            if _time(since) and isinstance(why, str):
                found[key] = (float(since), _text(why))
    return found


def _time(value: object) -> bool:
    """A number of seconds since the epoch: finite, no bool, and a time that can be: not
    before the epoch nor after now + `SKEW` (a planted `-1e308` would print a span of three
    hundred digits on `status`, as the cards bucket's `at` is bounded, §15)."""
    import time

    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and 0 <= value <= time.time() + SKEW


def _text(value: object) -> str:
    """A string field, cut to `TEXT_LIMIT` (escaped where it is shown)."""
    return value[:TEXT_LIMIT] if isinstance(value, str) else ""
