"""What the swarm's numbers read of the daemon's log (docs/protocol.md §6, §19): each
refusal, wake-up and reclaim it wrote, with its time and the labels it counts under.

The whole log is read, a line at a time (a counter counts over all the history the log
keeps, not over a tail), and every line is untrusted: one that is not whole JSON (torn by
a crash, written by someone else) is skipped, a label that is not a role's name is not
believed, and only lines ended by a line feed count, so a line still being written is
counted once it is whole, never twice.  Rotating the log away starts its counts again,
which Prometheus reads as a counter's reset.
"""

from __future__ import annotations

import json
import os

from handoffd.core import handoff as hf
from handoffd.core import lifecycle, safeio
from handoffd.core.config import SWARMFORGE, valid_role_name

LOG = "handoffd.log"
CHUNK = 1 << 20
# cheap filters before a line is parsed: the events counted
MARKS = (b'"failed"', b'"wake"', b'"wake_failed"', b'"reclaimed"')
VIAS = ("typed", "hook")
RESULTS = ("submitted", "unsubmitted", "forced", "failed")


class Event:
    """One counted line: its counter (`refused`, `wakeup`, `reclaimed`), its labels, when."""

    __slots__ = ("at", "kind", "labels")

    def __init__(self, kind: str, labels: tuple[str, ...], at: float | None) -> None:
        self.kind = kind
        self.labels = labels
        self.at = at


def events(root: str) -> list[Event]:
    """Every counted line of the project's daemon log, oldest first (none without one)."""
    found: list[Event] = []
    try:
        # never a FIFO, a link, nor through a `daemon/` that is a link
        fd = safeio.open_regular(
            lifecycle.daemon_path(root, LOG), below=os.path.join(root, SWARMFORGE)
        )
    except OSError:
        return found
    try:
        rest = b""
        while chunk := os.read(fd, CHUNK):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()  # not ended yet: a line still being written
            found += filter(None, map(_event, filter(_marked, lines)))
    except OSError:
        pass  # what was read counts; the next read reads it all again
    finally:
        os.close(fd)
    return found


def _marked(line: bytes) -> bool:
    return any(mark in line for mark in MARKS)


def _event(line: bytes) -> Event | None:
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError):  # torn, or no daemon's
        return None
    if not isinstance(fields, dict):
        return None
    name, at = fields.get("event"), _time(fields.get("timestamp"))
    if name == "failed":
        sender = _role(fields.get("sender"))
        return Event("refused", (sender,), at) if sender else None
    if name == "reclaimed":
        card = fields.get("card")
        pool = _role(card.rpartition("@")[2]) if isinstance(card, str) else ""
        return Event("reclaimed", (pool,), at) if pool else None
    if name in ("wake", "wake_failed") and fields.get("refused") is not True:
        role = _role(fields.get("role"))
        result = _result(name, fields)
        if role and result:
            via = "hook" if fields.get("via") == "hook" else "typed"
            return Event("wakeup", (role, via, result), at)
    return None


def _result(name: str, fields: dict[str, object]) -> str:
    """How a wake-up ended (`submitted`, `unsubmitted`, `forced`, `failed`); '' for a line
    that typed nothing (`held`: the wait behind a person's text, counted when typed)."""
    if name == "wake_failed":
        return "failed"
    if fields.get("held") is True:
        return ""
    if fields.get("forced") is True:
        return "forced"
    return "submitted" if fields.get("submitted") is True else "unsubmitted"


def _role(value: object) -> str:
    ok = isinstance(value, str) and len(value) <= 100 and valid_role_name(value)
    return value if ok else ""  # type: ignore[return-value]


def _time(value: object) -> float | None:
    return hf.epoch(value) if isinstance(value, str) else None
