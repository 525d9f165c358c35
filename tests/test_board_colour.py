"""Every precedence rule of docs/protocol.md §8, on pure data: no file is read."""

from __future__ import annotations

import pytest

from handoffd.board import colour
from handoffd.board.cards import Card, Claim
from handoffd.queue.scan import Entry

NOW = 1_800_000_000.0
IGNORED = (NOW - 90, NOW - 60, NOW - 30)  # three wake-ups, none answered
WINDOW = 3600.0
WARM = NOW - 60  # a heartbeat a minute old: live
COLD = NOW - 2 * WINDOW  # two windows old: expired


def card(
    ident: str,
    state: str = "new",
    blocked: str | None = None,
    beat: float | None = None,
    error: str | None = None,
    age: float = 120.0,
    daemon: bool = True,
    wakes: tuple[float, ...] = (),
    took: float | None = None,
    pane: str | None = None,
    waits: tuple[str, ...] = (),
    ready: float | None = None,
    held: str | None = None,
    unfit: str | None = None,
) -> Card:
    """A card of handoff `ident` held by QA; `beat` gives it a claim with that heartbeat;
    `wakes` are its role's wake-ups since it arrived, `took` its last take, `pane` its
    pane's state (docs/protocol.md §14); `waits` the dependencies it waits on, `ready`
    when the last of them turned green (§13)."""
    headers = {"id": ident, **({"blocked_reason": blocked} if blocked else {})}
    entry = Entry("QA", state, f"/nowhere/{ident}.handoff", headers=headers, mtime=NOW - age)
    red = colour.own_red(state, blocked, error, age, 60.0, daemon, held, unfit)
    if red is None and state == "new":
        red = colour.unanswered("QA", "swarm-QA", pane, wakes, took, 3, waits, ready)
    made = Card(entry, age, red, held)
    made.waiting_on = list(waits)
    if beat is not None:
        made.claim = Claim("QA", "claude", "c-1", beat, NOW, WINDOW)
    return made


CASES = [
    # (what it pins, the card, its closure, expected colour, a word of the detail)
    ("green beats its own red", card("a", "completed", blocked="stuck"), [], "green", "completed"),
    ("own red beats a warm heartbeat", card("a", "in_process", blocked="need key", beat=WARM), [],
     "red", "need key"),
    ("a live claim is yellow", card("a", "in_process", beat=WARM), [], "yellow", "claude@QA"),
    ("a pool's file no member can be handed is red, before its blocked reason (§17)",
     card("a", blocked="stuck", unfit="not UTF-8 text"), [], "red",
     "cannot be handed out: not UTF-8 text"),
    ("...and its dependents inherit it", card("b"), [card("a", unfit="too large")], "red",
     "inherits from a@QA: cannot be handed out: too large"),
    ("an expired claim is not", card("a", "in_process", beat=COLD), [], "orange", "expired"),
    ("a live claim on a dependency makes the dependent yellow",
     card("a"), [card("b", "in_process", beat=WARM)], "yellow", "via b@QA"),
    ("...even when another dependency is red",
     card("a"), [card("r", blocked="need a merge"), card("b", "in_process", beat=WARM)],
     "yellow", "via b@QA"),
    ("a dependency's blocked reason is inherited", card("a"), [card("r", blocked="need a merge")],
     "red", "inherits from r@QA: need a merge"),
    ("a dependency that failed is inherited", card("a"), [card("f", "failed", error="bad to")],
     "red", "inherits from f@QA: failed: bad to"),
    ("an expired claim on a dependency is not yellow; its red still passes down",
     card("a"), [card("b", "in_process", beat=COLD), card("r", blocked="x")], "red", "r@QA"),
    ("own red beats a live claim on a dependency",
     card("a", blocked="mine"), [card("b", "in_process", beat=WARM)], "red", "mine"),
    ("a green dependency holds nothing up", card("a"), [card("g", "completed", blocked="old")],
     "orange", "waiting 2m"),
    ("a failed original is red with its reason", card("f", "failed", error="Unknown role x"), [],
     "red", "failed: Unknown role x"),
    ("an outbox file past the stall threshold with no daemon is red",
     card("o", "outbox", age=61, daemon=False), [], "red", "daemon NOT RUNNING"),
    ("...and says it is not delivered yet when the daemon runs",
     card("o", "outbox", age=61, daemon=True), [], "red", "queued 1m: not delivered yet"),
    ("...and why, when the daemon said why it defers it",
     card("o", "outbox", age=61, held="deferred 50s: NATS unreachable: connection refused"), [],
     "red", "deferred 50s: NATS unreachable: connection refused"),
    ("a fresh outbox file is orange, queued", card("o", "outbox", age=5), [], "orange",
     "queued 5s"),
    ("...and says why when it was deferred", card("o", "outbox", age=5, held="deferred 3s: x"),
     [], "orange", "deferred 3s: x"),
    ("everything else is orange", card("a"), [], "orange", "waiting 2m"),
    ("three unanswered wake-ups make a waiting card red",
     card("a", wakes=IGNORED), [], "red", "not taken after 3 wake-ups over 1m"),
    ("two are not enough", card("a", wakes=IGNORED[1:]), [], "orange", "waiting 2m"),
    ("a take after the first restarts the count",
     card("a", wakes=IGNORED, took=NOW - 70), [], "orange", "waiting 2m"),
    ("a take before the first does not", card("a", wakes=IGNORED, took=NOW - 100), [], "red",
     "not taken after 3"),
    ("a session gone is red at once", card("a", pane="gone"), [], "red",
     "QA's session swarm-QA is gone"),
    ("no tmux server at all is unknown, not red", card("a", pane="unknown"), [], "orange",
     "waiting"),
    ("own blocked reason beats a stall", card("a", blocked="mine", wakes=IGNORED), [], "red",
     "mine"),
    ("a stalled dependency is inherited", card("a"), [card("s", wakes=IGNORED)], "red",
     "inherits from s@QA: not taken after 3"),
    ("a card waiting on a dependency is never red for its wake-ups",
     card("a", wakes=IGNORED, waits=("b@QA",)), [card("b")], "orange", "waiting 2m on b@QA"),
    ("...though a session gone still is", card("a", pane="gone", waits=("b@QA",)), [card("b")],
     "red", "QA's session swarm-QA is gone"),
    ("once its dependency is green, wake-ups before that are not counted",
     card("a", wakes=IGNORED, ready=NOW - 70), [], "orange", "waiting 2m"),
    ("...and those after it are", card("a", wakes=IGNORED, ready=NOW - 100), [], "red",
     "not taken after 3"),
    ("a live claim on a dependency beats a stalled one",
     card("a"), [card("s", wakes=IGNORED), card("b", "in_process", beat=WARM)], "yellow",
     "via b@QA"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "subject", "closure", "expected", "word"), CASES,
                         ids=[case[0] for case in CASES])  # fmt: skip
def test_precedence(
    what: str, subject: Card, closure: list[Card], expected: str, word: str
) -> None:
    found, detail = colour.paint(subject, closure)
    assert (found, word in detail) == (expected, True), (what, detail)


def test_orange_counts_wake_ups() -> None:
    waiting = card("a")
    waiting.wakeups = 3
    assert colour.paint(waiting, []) == ("orange", "waiting 2m, 3 wake-ups")


def test_orange_says_when_its_wake_ups_fail() -> None:
    # the agent cannot be reached (its session is gone, say): waiting alone would hide it
    waiting = card("a")
    waiting.wake_failures = 2
    assert colour.paint(waiting, []) == ("orange", "waiting 2m, 2 failed (see the daemon's log)")


@pytest.mark.parametrize(
    ("waits", "text"),
    [(["b@QA"], "on b@QA,"), (["b@QA", "c@QA"], "on b@QA and c@QA,"),
     (["b@QA", "c@QA", "d@QA"], "on b@QA and 2 more,")],
)  # fmt: skip
def test_orange_says_what_it_waits_on_in_one_short_line(waits: list[str], text: str) -> None:
    waiting = card("a")
    waiting.waiting_on, waiting.wakeups = waits, 1
    assert colour.paint(waiting, []) == ("orange", f"waiting 2m {text} 1 wake-up")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (7380, "2h 03m"), (90000, "1d 01h")],
)
def test_ages_read_at_a_glance(seconds: float, text: str) -> None:
    assert colour.ago(seconds) == text


def test_a_heartbeat_from_the_future_is_no_live_claim_and_says_so() -> None:
    """`heartbeat 0s ago` for ever was the board's word for a planted time (§17): it counts
    as none, for the claim's colour and its text alike."""
    ahead = Claim("QA", "claude", None, NOW + 86400, NOW, WINDOW)
    assert not ahead.live
    assert ahead.describe() == "claude@QA, heartbeat 1d 00h in the future"
    near = Claim("QA", "claude", None, NOW + 30, NOW, WINDOW)
    assert near.live and near.describe() == "claude@QA, heartbeat 0s ago"


def test_a_pool_copys_claim_without_a_heartbeat_lives_from_its_taking() -> None:
    taken = Claim("QA-1", "codex", None, None, NOW, WINDOW, taken_at=NOW - 300)
    assert taken.live and taken.describe() == "codex@QA-1, no heartbeat, taken 5m ago"
    old = Claim("QA-1", "codex", None, None, NOW, WINDOW, taken_at=NOW - WINDOW - 1)
    assert not old.live and old.describe() == "codex@QA-1, no heartbeat, taken 1h 00m ago"
    assert not Claim("QA", "codex", None, None, NOW, WINDOW).live  # direct mail: §8's rule
