"""The cards bucket's entries, checked before anything of them is shown (docs/protocol.md
§15, "The cards bucket").

The bucket is shared by every host of the swarm, and anyone holding the swarm's NATS
credentials can put anything under any key.  So an entry is taken apart here, by one pure
function, before `status --all-hosts` or `web --all-hosts` see it: a JSON object, whose
`at` is a finite time no later than a minute ahead of this host's clock, whose `cards` is a
list of the §8 card objects with every field of the type `status --json` gives it.  An
entry that fails is kept as a host with an unreadable entry and the reason (shown as
`host <name>: unreadable entry (<why>)`), never as cards: a view then has nothing to trip
over, and the other hosts are shown as usual.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Test = Callable[[object], bool]

ENTRY_LIMIT = 1024 * 1024  # bytes: NATS's default largest message; a daemon's entry is smaller
CARD_LIMIT = 1000  # cards per entry: what a daemon puts at most (hosts.Publisher)
AHEAD = 60.0  # seconds an entry's `at` may be ahead of this host's clock (clocks drift)
STALE = 30.0  # seconds: an entry older than this names its host as last seen


class Entry:
    """One host's entry as read from the bucket: its cards, or why it cannot be shown."""

    def __init__(
        self, host: str, at: float | None, cards: list[dict[str, Any]], problem: str | None = None
    ) -> None:
        self.host = host
        self.at = at
        self.cards = cards
        self.problem = problem  # why the entry was not readable; None when it was

    def stale(self, now: float) -> bool:
        return self.at is None or now - self.at > STALE


class Unreadable(Exception):
    """What is wrong with an entry, in a few words."""


def check(host: str, raw: bytes, now: float) -> Entry:
    """The entry `raw` put under the key `host`, checked against `now` (this host's clock)."""
    try:
        value = _object(raw)
        at = _at(value.get("at"), now)
        cards = _cards(value.get("cards"), host)
    except Unreadable as why:
        return Entry(host, None, [], str(why))
    return Entry(host, at, cards)


def _object(raw: bytes) -> dict[str, Any]:
    if len(raw) > ENTRY_LIMIT:
        raise Unreadable(f"larger than {ENTRY_LIMIT} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise Unreadable("not JSON") from None
    if not isinstance(value, dict):
        raise Unreadable("not a JSON object")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number JSON knows")


def _at(value: object, now: float) -> float:
    if not _is_number(value):
        raise Unreadable("'at' is not a time")
    try:
        at = float(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer too large for a float
        at = math.inf
    if not math.isfinite(at):
        raise Unreadable("'at' is not a finite time")
    if at > now + AHEAD:
        raise Unreadable(f"'at' is {at - now:.0f} s ahead of this host's clock")
    return at


def _cards(value: object, host: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise Unreadable("'cards' is not a list")
    if len(value) > CARD_LIMIT:
        raise Unreadable(f"more than {CARD_LIMIT} cards")
    for number, card in enumerate(value, 1):
        problem = _shape_problem(card, CARD, OPTIONAL)
        if problem:
            raise Unreadable(f"card {number}: {problem}")
    return [{**card, "host": host} for card in value]


# --- the §8 card object, field by field ---------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: object) -> bool:
    return isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _flag(value: object) -> bool:
    return isinstance(value, bool)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _span(value: object) -> bool:
    """Seconds: a finite number, not negative."""
    if not _is_number(value):
        return False
    try:
        return math.isfinite(float(value)) and float(value) >= 0  # type: ignore[arg-type]
    except OverflowError:
        return False


def _maybe(test: Test) -> Test:
    return lambda value: value is None or test(value)


def _one_of(*names: str) -> Test:
    return lambda value: isinstance(value, str) and value in names


def _shaped(fields: dict[str, Test], optional: dict[str, Test] | None = None) -> Test:
    return lambda value: _shape_problem(value, fields, optional or {}) is None


def _shape_problem(value: object, fields: dict[str, Test], optional: dict[str, Test]) -> str | None:
    """Why `value` is not an object with `fields` (and maybe `optional`) of their types."""
    if not isinstance(value, dict):
        return "not an object"
    for key, test in fields.items():
        if key not in value:
            return f"no '{key}'"
        if not test(value[key]):
            return f"'{key}' is not {_WORDS.get(test, 'of its type')}"
    for key, test in optional.items():
        if key in value and not test(value[key]):
            return f"'{key}' is not {_WORDS.get(test, 'of its type')}"
    return None


CLAIM = _shaped({"role": _text, "agent": _maybe(_text), "conversation": _maybe(_text),
                 "heartbeat_at": _maybe(_text), "live": _flag})  # fmt: skip
REPORT = _shaped({"status": _text, "role": _text, "reported_at": _text, "excerpt": _text})
WAKES = _shaped({"sent": _count, "failed": _count, "last_at": _maybe(_text),
                 "submitted": _maybe(_flag)},
                {"via": _maybe(_one_of("typed", "hook"))})  # docs/protocol.md §16  # fmt: skip
STATE = _one_of("outbox", "failed", "new", "in_process", "completed")
COLOUR = _one_of("red", "yellow", "orange", "green")
OPTIONAL_TEXT = _maybe(_text)
CARD: dict[str, Test] = {
    "card": _text, "id": _text, "role": _text, "state": STATE, "color": COLOUR,
    "detail": _text, "from": _text, "to": _texts, "priority": _text, "type": OPTIONAL_TEXT,
    "task": OPTIONAL_TEXT, "blocked_reason": OPTIONAL_TEXT, "claim": _maybe(CLAIM),
    "depends_on": _texts, "latest_report": _maybe(REPORT), "age_s": _maybe(_span),
    "path": _text,
}  # fmt: skip
# Fields a daemon of an older release did not put yet; checked when present.
OPTIONAL: dict[str, Test] = {"wakes": WAKES, "host": _text}
_WORDS: dict[Test, str] = {
    _text: "text", _texts: "a list of text", STATE: "a card state", COLOUR: "a colour",
    OPTIONAL_TEXT: "text or null", CARD["claim"]: "a claim or null",
    CARD["latest_report"]: "a report or null", CARD["age_s"]: "a number of seconds or null",
    WAKES: "the wake-ups object", CLAIM: "a claim", REPORT: "a report",
}  # fmt: skip
