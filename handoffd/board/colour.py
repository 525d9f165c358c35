"""A card's colour: a pure function of the card and its dependency closure.

The precedence is the contract (docs/protocol.md §8), first match wins:
1. green — the copy is completed;
2. red (own) — it declares a blocked reason, or it failed, or it stalls in an outbox,
   or it waits for a role that does not answer its wake-ups or whose session is gone:
   a declaration of "I need a person" beats a still-warm heartbeat, being the more
   deliberate signal;
3. yellow — a live claim on it or on any not-green card of its closure: work on a
   dependency is forward progress, even when another dependency is red (that red
   card is still on the board, under its own name);
4. red (inherited) — a card of its closure is red by rule 2: nobody can move it until
   a person acts, so it shows red rather than waiting orange;
5. orange — everything else: open, unblocked, unclaimed.

`paint` takes any card that has what it reads (`Painted`), so this module knows nothing
of how cards are built: `board/cards` imports it, never the other way round.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: `typing` costs `status` its import
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    class Claimed(Protocol):
        """What the colour reads of a claim: is it live, and who holds it, in words."""

        @property
        def live(self) -> bool: ...

        def describe(self) -> str: ...

    class Painted(Protocol):
        """What the colour reads of a card (`board.cards.Card` is one)."""

        @property
        def card(self) -> str: ...

        @property
        def state(self) -> str: ...

        @property
        def red_reason(self) -> str | None: ...

        @property
        def claim(self) -> Claimed | None: ...

        @property
        def age_s(self) -> float | None: ...

        @property
        def wakeups(self) -> int: ...

        @property
        def wake_failures(self) -> int: ...

        @property
        def waiting_on(self) -> Sequence[str]: ...

        @property
        def held(self) -> str | None: ...


RED = "red"
YELLOW = "yellow"
ORANGE = "orange"
GREEN = "green"
ORDER = (RED, YELLOW, ORANGE, GREEN)  # the order the board shows them in
DONE = ("completed", "dismissed")  # the states of a green card (rule 1, and a dismissal)


def own_red(
    state: str,
    blocked_reason: str | None,
    error: str | None,
    age_s: float,
    stall_s: float,
    daemon_running: bool,
    held: str | None = None,
    unfit: str | None = None,
) -> str | None:
    """Why a card is red by rule 2 (its own doing), or None.  `held`: an outbox original's
    `deferred <span>: <reason>`, when the daemon said why it waits (docs/protocol.md §15).
    `unfit`: why a file in a pool's `new/` cannot be handed out (§17: every member skips
    it, so it would wait for ever unseen)."""
    if state in DONE:
        return None
    if unfit:
        return f"cannot be handed out: {unfit}"
    if blocked_reason:
        return blocked_reason
    if state == "failed":
        return f"failed: {error or 'no .error file beside it'}"
    if state == "outbox" and age_s > stall_s:
        if held:
            return held
        why = "not delivered yet (see the daemon's log)" if daemon_running else "daemon NOT RUNNING"
        return f"queued {ago(age_s)}: {why}"
    return None


def unanswered(
    role: str,
    session: str,
    pane: str | None,
    wakes: Sequence[float],
    taken_at: float | None,
    stall_wakes: int,
    waiting_on: Sequence[str] = (),
    ready_at: float | None = None,
) -> str | None:
    """Why a waiting card is red by rule 2 because its role does not answer (docs/protocol.md
    §14), or None: its session is gone (the tmux server answers without it: `pane` is
    "gone"; no server at all is "unknown", never red), or it was sent `stall_wakes`
    wake-ups since the card arrived (`wakes`, oldest first) and took nothing since the
    first of them.  Taking anything restarts the count: only later wake-ups are counted.

    Only a card the role could take counts (§13, ready work first): one `waiting_on`
    dependencies that are not green is never red for its wake-ups (the dependency is what
    holds it back, and the board says so), and once they are green only the wake-ups
    after `ready_at`, when the last of them turned green, are counted."""
    if pane == "gone":
        return f"{role}'s session {session} is gone"
    if waiting_on:
        return None
    since = max((t for t in (taken_at, ready_at) if t is not None), default=None)
    unanswered = [at for at in wakes if since is None or at > since]
    if stall_wakes < 1 or len(unanswered) < stall_wakes:
        return None
    span = ago(unanswered[-1] - unanswered[0])
    return f"not taken after {len(unanswered)} wake-ups over {span}"


def paint(card: Painted, closure: Sequence[Painted]) -> tuple[str, str]:
    """(colour, detail) of `card`, whose dependency closure is `closure` (nearest first)."""
    if card.state == "completed":
        return GREEN, f"completed {ago(card.age_s)} ago"
    if card.state == "dismissed":  # a refused original an operator put aside
        return GREEN, f"dismissed {ago(card.age_s)} ago"
    if card.red_reason:
        return RED, card.red_reason
    if card.claim and card.claim.live:
        return YELLOW, card.claim.describe()
    for other in closure:
        if other.claim and other.claim.live and other.state != "completed":
            return YELLOW, f"via {other.card}: {other.claim.describe()}"
    for other in closure:
        if other.red_reason:
            return RED, f"inherits from {other.card}: {other.red_reason}"
    return ORANGE, _waiting(card)


def _waiting(card: Painted) -> str:
    if card.state == "outbox":  # an original nobody has a copy of yet: the daemon's to move
        return card.held or f"queued {ago(card.age_s)}"
    if card.claim:  # in process, but its claim has expired
        return f"claim expired: {card.claim.describe()}"
    detail = f"waiting {ago(card.age_s)}"
    if card.waiting_on:  # not ready (§13): say what holds it back, not the agent
        detail += " on " + _listed(card.waiting_on)
    if card.wakeups:
        detail += f", {card.wakeups} wake-up" + ("s" if card.wakeups > 1 else "")
    if card.wake_failures:  # the agent cannot be reached: the log's wake_failed says why
        detail += f", {card.wake_failures} failed (see the daemon's log)"
    return detail


def _listed(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a and 2 more`: a row stays one short line."""
    if len(names) <= 2:
        return " and ".join(names)
    return f"{names[0]} and {len(names) - 1} more"


# How a span is spelled: the terminal's compact words, or the web board's (`12 min ago`).
SHORT = ("{}s", "{}m", "{}h {:02d}m", "{}d {:02d}h")
SPELLED = ("{} s", "{} min", "{} h {:02d} min", "{} d {} h")


def ago(seconds: float | None, spelling: tuple[str, str, str, str] = SHORT) -> str:
    """A span: `45s`, `12m`, `2h 03m`, `3d 04h` (or spelled out); `?` when unknown."""
    if seconds is None or seconds != seconds:  # None, or NaN
        return "?"
    s = max(0, int(seconds))
    if s < 60:
        return spelling[0].format(s)
    if s < 3600:
        return spelling[1].format(s // 60)
    if s < 86400:
        return spelling[2].format(s // 3600, s % 3600 // 60)
    return spelling[3].format(s // 86400, s % 86400 // 3600)
