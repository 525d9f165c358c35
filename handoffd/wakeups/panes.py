"""What the daemon sees of each role's tmux pane: idle, busy, gone or unknown, and since when
(docs/protocol.md §14).

The daemon is the one that watches panes: its wake-up threads read each pane with
`tmux capture-pane`, and `Panes` turns those reads into a state per role.  `status` is
another process, so the states live in `daemon/panes.json`, rewritten atomically when a
state changes (not on every read: a busy pane stays "busy since" one time).  Read back,
that file is untrusted input like anything under `.swarmforge/`: a regular file only, at
most `LIMIT` bytes, every field checked.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time

from handoffd.core import durable, safeio

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

FILE = "panes.json"
LIMIT = 64 * 1024  # bytes of the state file ever read
SKEW = 60.0  # seconds a time in the state file may lie ahead of this host's clock
IDLE, BUSY, GONE, UNKNOWN = "idle", "busy", "gone", "unknown"
STATES = (IDLE, BUSY, GONE, UNKNOWN)
FIELDS = ("session", "pane", "since", "last_wake_at", "last_idle_at", "last_take_at", "harness",
          "held")  # fmt: skip
TIMES = FIELDS[2:6]
HARNESSES = ("claude", "codex", "generic")  # docs/protocol.md §16
HELD = "held"  # a harness's verdict: its input box holds a person's text (§17)
# a known harness whose screen its profile does not recognise, and its release (§17)
UNRECOGNISED = re.compile(r"(claude|codex)( \d[0-9A-Za-z.+-]{0,39})?")


class Seen:
    """One role's pane as last read: a digest of its content and what that says."""

    __slots__ = ("changed_at", "digest", "first_at", "harness", "held", "last_idle_at",
                 "last_take_at", "last_wake_at", "looks", "pane", "session", "since",
                 "unrecognised")  # fmt: skip

    def __init__(self, session: str) -> None:
        self.session = session
        self.digest: bytes | None = None
        self.first_at = 0.0  # when this content was first read (its history before is unknown)
        self.changed_at: float | None = None  # when a read last found it changed
        self.looks = 0  # reads of the same content in a row
        self.pane = UNKNOWN
        self.since: float | None = None
        self.last_wake_at: float | None = None
        self.last_idle_at: float | None = None
        self.last_take_at: float | None = None  # when the daemon saw its in_process/ change
        self.harness = "generic"  # what runs in it (docs/protocol.md §16)
        self.held = False  # its input box holds text handoffd did not type (§17)
        # `codex 0.150.0` while its screen is not recognised: it is driven as generic (§17)
        self.unrecognised: str | None = None

    def still_since(self) -> float:
        """Since when the content is known to be unchanged (its first read, if no change seen)."""
        return self.changed_at if self.changed_at is not None else self.first_at

    def row(self) -> dict[str, object]:
        row = {field: getattr(self, field) for field in FIELDS}
        if self.unrecognised is not None:
            row["unrecognised"] = self.unrecognised
        return row


class Panes:
    """Every role's pane, updated from the wake-up threads, saved by the daemon's loop."""

    def __init__(self, idle_after: float) -> None:
        self.idle_after = idle_after
        self._seen: dict[str, Seen] = {}

        self._lock = threading.Lock()
        self._dirty = False
        # called (from the reading thread) when a pane's state changes: the daemon saves
        # it at once, so `status` is not a pass behind the pane (docs/protocol.md §14)
        self.changed: Callable[[], None] | None = None

    def observe(
        self, role: str, session: str, content: str | None, answers: bool, now: float,
        idle_mark: float | None = None, verdict: str | None = None, harness: str = "generic",
        unrecognised: str | None = None,
    ) -> Seen:  # fmt: skip
        """Record one read of `role`'s pane (`content` None: it could not be read, and
        `answers` says whether the tmux server did); returns the role's view.  A known
        harness gives its own `verdict` (idle, busy or starting, docs/protocol.md §16),
        which stands instead of §14's quiet time; `held` (its box holds a person's text)
        counts as busy and is kept beside it, for `status`; one whose screen its profile
        does not recognise (`unrecognised`: `codex 0.150.0`, docs/protocol.md §17) gives
        none."""
        with self._lock:
            seen = self._seen.setdefault(role, Seen(session))
            if seen.session != session:  # roles.tsv names another session: start afresh
                seen.session, seen.digest, seen.changed_at = session, None, None
            if seen.harness != harness:
                seen.harness, self._dirty = harness, True
            self._hold(seen, verdict == HELD and content is not None)
            if seen.unrecognised != unrecognised:
                seen.unrecognised, self._dirty = unrecognised, True
            if content is None:
                seen.digest, seen.looks = None, 0
                # gone since when: a held card says how long its holder has been gone
                gone_since = (seen.since if seen.pane == GONE else now) if answers else None
                self._set(seen, GONE if answers else UNKNOWN, gone_since)
            else:
                self._read(seen, _digest(content), now)
                if verdict is None:
                    self._classify(seen, now, idle_mark)
                else:
                    self._mark(seen, idle_mark)
                    state = IDLE if verdict == IDLE else BUSY
                    self._set(seen, state, seen.since if seen.pane == state else now)
            return seen

    def _read(self, seen: Seen, digest: bytes, now: float) -> None:
        if seen.digest == digest:
            seen.looks += 1
            return
        if seen.digest is not None:
            seen.changed_at = now  # a change seen between two reads
        else:
            seen.first_at, seen.changed_at = now, None
        seen.digest, seen.looks = digest, 1

    def _classify(self, seen: Seen, now: float, idle_mark: float | None) -> None:
        self._mark(seen, idle_mark)
        still = seen.still_since()
        marked = marked_idle(seen, idle_mark)
        if marked or now - still >= self.idle_after or seen.changed_at is None:
            self._set(seen, IDLE, max(still, idle_mark or 0.0) if marked else still)
        elif seen.pane != BUSY:
            self._set(seen, BUSY, now)

    def _hold(self, seen: Seen, held: bool) -> None:
        if seen.held != held:
            seen.held, self._dirty = held, True

    def _mark(self, seen: Seen, idle_mark: float | None) -> None:
        if idle_mark is not None and idle_mark != seen.last_idle_at:
            seen.last_idle_at = idle_mark
            self._dirty = True

    def _set(self, seen: Seen, pane: str, since: float | None) -> None:
        if (seen.pane, seen.since) != (pane, since):
            seen.pane, seen.since = pane, since
            self._dirty = True
            if self.changed is not None:
                self.changed()

    def working(self, role: str) -> bool:
        """Whether `role` runs a known harness last seen busy: its end of turn is worth
        seeing soon (`status` shows it idle at once, docs/protocol.md §16)."""
        with self._lock:
            seen = self._seen.get(role)
            return seen is not None and seen.pane == BUSY and seen.harness != "generic"

    def state(self, role: str) -> str:
        """`role`'s pane as last read (UNKNOWN if never read)."""
        with self._lock:
            seen = self._seen.get(role)
            return UNKNOWN if seen is None else seen.pane

    def idle_since(self) -> dict[str, float]:
        """Since when each role whose pane was last read idle has been idle."""
        with self._lock:
            return {role: seen.since or 0.0 for role, seen in self._seen.items()
                    if seen.pane == IDLE}  # fmt: skip

    def woken_at(self, role: str) -> float | None:
        """When a wake-up was last typed into `role`'s pane (None: none since the start)."""
        with self._lock:
            seen = self._seen.get(role)
            return None if seen is None else seen.last_wake_at

    def woken(self, role: str, now: float) -> None:
        """A wake-up was just typed into `role`'s pane."""
        with self._lock:
            seen = self._seen.get(role)
            if seen is not None:
                seen.last_wake_at = now
                self._dirty = True

    def took(self, role: str, session: str, now: float) -> None:
        """The daemon saw `role`'s `in_process/` change: it took (or finished) work."""
        with self._lock:
            self._seen.setdefault(role, Seen(session)).last_take_at = now
            self._dirty = True

    def save(self, root: str) -> None:
        """Write the state file if a state changed since the last save; never raises (a
        view's file: the next change writes it again)."""
        with self._lock:
            if not self._dirty:
                return
            rows = {role: seen.row() for role, seen in self._seen.items()}
            self._dirty = False
        try:
            durable.replace(path(root), json.dumps(rows, sort_keys=True).encode())
        except OSError:
            with self._lock:
                self._dirty = True


def _digest(content: str) -> bytes:
    """A pane's content in 64 bytes.  blake2b from its own module: `hashlib` loads OpenSSL
    first, a few milliseconds of every `status` that never hashes anything."""
    from _blake2 import blake2b

    return blake2b(content.encode()).digest()


def marked_idle(seen: Seen, idle_mark: float | None) -> bool:
    """The role ran `handoffd idle` after its pane last changed.  A pane read only once has
    no known last change: its mark counts from the second read of the same content."""
    if idle_mark is None:
        return False
    if seen.changed_at is None:
        return seen.looks >= 2
    return idle_mark > seen.changed_at


def path(root: str) -> str:
    return os.path.join(root, ".swarmforge", "daemon", FILE)


def load(root: str) -> dict[str, dict[str, object]]:
    """The pane states the daemon saved, each field checked; {} when there are none (or
    the file is not a regular file of sensible size and shape)."""
    try:
        data = json.loads(safeio.read_regular(path(root), LIMIT))
    except (OSError, ValueError, RecursionError):  # nested past the parser's depth
        return {}
    if not isinstance(data, dict):
        return {}
    return {role: row for role, raw in data.items() if (row := _checked(raw)) is not None}


def _checked(raw: object) -> dict[str, object] | None:
    if not isinstance(raw, dict) or raw.get("pane") not in STATES:
        return None
    row: dict[str, object] = {"pane": raw["pane"]}
    session = raw.get("session")
    row["session"] = session if isinstance(session, str) else ""
    harness = raw.get("harness")
    row["harness"] = harness if harness in HARNESSES else "generic"
    row["held"] = raw.get("held") is True
    unrecognised = raw.get("unrecognised")
    if isinstance(unrecognised, str) and UNRECOGNISED.fullmatch(unrecognised):
        row["unrecognised"] = unrecognised
    latest = time.time() + SKEW
    for field in TIMES:
        value = raw.get(field)
        row[field] = float(value) if _time(value, latest) else None  # type: ignore[arg-type]
    return row


def _time(value: object, latest: float) -> bool:
    """A time the daemon could have written: a number (no bool), finite, not before the
    epoch nor after `latest`.  A planted `1e308` or `Infinity` made `status` and the board
    fail (no date that far), a `-1e308` printed a span of three hundred digits."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and 0 <= value <= latest
