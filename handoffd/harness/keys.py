"""Typing a line into Claude Code or Codex (docs/protocol.md §16): when, and how.

When: `Watch` is the wait for the harness to take a line, fed one read of the pane at a
time (pure: the time is a parameter).  Keys typed before a harness has drawn its input box
lose their Enter, so nothing is typed before it is ready; that wait does not count toward
`--idle-wait`, and a pane never ready in READY_WAIT seconds gets the line anyway
(`not_ready`).  Once ready, the line goes in as soon as the harness is idle — no busy
marker, an empty box — and never while it is busy, except that a pane busy for
`--idle-wait` gets it anyway, unless the role is *hooked*: its Stop hook tells the agent
of mail at the end of its turn, so a busy hooked pane is waited on for as long as it
takes, and an announcement by that hook makes the typed line unneeded (`CANCEL`).  A
hooked Claude Code that turns idle gets its Stop hook HOOK_GRACE seconds to speak first
(the hook runs as the turn ends, the screen may show the end a moment before); Codex's
notify cannot tell the agent anything, so its line is typed as soon as the turn is over.
A box holding text handoffd did not type is a person at work (docs/protocol.md §17): the
line waits (`HELD`) for as long as the text stays, `--idle-wait` or not, and that clock
starts afresh once the box is emptied (the person's own turn may follow).

How: the text (`send-keys -l`), then after `enter_after`, once the box shows it, one
Enter; then the pane is read until it shows the line taken (gone from the box, and in the
conversation or a turn running), with one more Enter while the box still holds it, the
line typed once more if it vanished untaken, and the box cleared if even that left it
there: after every typed line the box is empty.  A box already holding the line (typed
once, its Enter lost) gets only the Enter.  Keys that would touch a person's text — the
more Enter, the clearing — are never sent: only a box holding exactly handoffd's line is
entered or cleared.
"""

from __future__ import annotations

import time

from handoffd.harness import profiles
from handoffd.harness.profiles import Profile, Screen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

READY_WAIT = 60.0  # seconds a harness may take to draw its input box before a line is forced
HOOK_GRACE = 3.0  # seconds an idle hooked pane waits for its Stop hook to speak first
TAKEN_WITHIN = 5.0  # seconds a harness gets to show a line taken after its Enter (a loaded
# machine draws slowly: a line taken still shows for a while)
SHOWN_WITHIN = 1.0  # seconds the box gets to show a line typed, before its Enter anyway
LOOK_EVERY = 0.05  # seconds between two reads of the box after the keys

WAIT, TYPE, CANCEL, FORCED = "wait", "type", "cancel", "forced"
HELD = "held"  # wait: the box holds a person's text, for as long as it stays there
NOT_READY = "not_ready"


class Watch:
    """The wait of one wake-up for a known harness to be idle, fed each read in turn."""

    def __init__(self, started: float, idle_wait: float, ready_wait: float = READY_WAIT) -> None:
        self.started = started
        self.idle_wait = idle_wait
        self.ready_wait = ready_wait
        self.ready_at: float | None = None  # when the harness first showed itself ready
        self.counted_from: float | None = None  # --idle-wait counts from here: ready, or
        # the last read that found a person's text in the box (their turn may follow)
        self.busy_at: float | None = None  # when it was last seen busy
        self.idle_since: float | None = None
        self.reason = ""  # why a line was forced

    def see(self, state: str, now: float, hooked: bool, idle_mark: float | None,
            announced: bool, tells: bool = True) -> str:  # fmt: skip
        """What to do after a read that found the pane in `state` (`profiles.state`) at
        `now`; `idle_mark` is the role's last Stop hook (H/idle), `announced` whether the
        hook told the agent of its mail since this wait began, `tells` whether its hook can
        (else a turn's end is no reason to wait)."""
        if announced:
            return CANCEL
        if self.ready_at is None and state == profiles.STARTING:
            if now - self.started < self.ready_wait:
                return WAIT
            self.reason = NOT_READY
            return FORCED
        if self.ready_at is None:
            self.ready_at = now
        if state == profiles.HELD or self.counted_from is None:
            self.counted_from = now
        if state == profiles.HELD:  # a person's text: theirs, whatever --idle-wait says
            self.idle_since = None
            return HELD
        if state not in (profiles.IDLE, profiles.UNSENT):  # busy, or a dialog: not for keys
            self.busy_at, self.idle_since = now, None
            if hooked or now - self.counted_from < self.idle_wait:
                return WAIT
            self.reason = "busy"
            return FORCED
        if self.idle_since is None:
            self.idle_since = now
        if hooked and tells and self._hook_may_speak(now, idle_mark):
            return WAIT
        return TYPE

    def _hook_may_speak(self, now: float, idle_mark: float | None) -> bool:
        """A hooked pane seen busy, now idle, whose Stop hook has not run since: it runs as
        the turn ends and may announce the mail (then nothing is typed)."""
        if self.busy_at is None or (idle_mark is not None and idle_mark >= self.busy_at):
            return False
        return now - (self.idle_since or now) < HOOK_GRACE

    def waited(self, now: float) -> float:
        """Seconds waited for idleness: the wait for the harness to be ready is not counted."""
        return 0.0 if self.ready_at is None else now - self.ready_at


def type_line(send: Callable[..., None], look: Callable[[], Screen], prof: Profile,
              text: str, ours: Collection[str] = ()) -> None:  # fmt: skip
    """The text, literally, then after `enter_after` seconds one Enter (no C-j: it leaves an
    empty line in the box, docs/protocol.md §16) — once the box shows the text: a harness
    that draws it late would take an Enter sent before as nothing to submit.  A box that
    already holds `text` gets only the Enter; one holding another of `ours` (handoffd's
    lines) is emptied first; one holding anything else is a person's: `BoxHeld`, and
    nothing is sent."""
    held = profiles.box_text(look(), prof)
    if held and not profiles.ours_exactly(held, (text,)):
        if not profiles.ours_exactly(held, ours):
            raise BoxHeld("the input box holds text handoffd did not type: nothing typed")
        send(prof.clear)
    if not held or not profiles.ours_exactly(held, (text,)):
        send("-l", "--", text)
        time.sleep(prof.enter_after)
    deadline = time.monotonic() + SHOWN_WITHIN
    while not profiles.holds(look(), prof, text) and time.monotonic() < deadline:
        time.sleep(LOOK_EVERY)
    send(prof.enter)


class BoxHeld(RuntimeError):
    """The input box holds a person's text: no key goes in."""


def submitted(look: Callable[[], Screen], send: Callable[..., None], prof: Profile,
              text: str) -> tuple[bool, bool]:  # fmt: skip
    """After `type_line`: whether the harness took the line (`profiles.sent`), and whether
    the box had to be cleared.  While the box still holds the line, one more Enter; when
    the line vanished untaken (a harness still starting drew its box afresh), it is typed
    once more; when even that leaves it in the box, the box is emptied of it.  A box that
    holds anything beside the line is a person's: nothing more is sent.  Raises whatever
    `look` raises (a dead pane)."""
    seen = _outcome(look, prof, text)
    if seen == LOST:  # emptied first: what it holds unseen must not come back doubled
        send(prof.clear)
        type_line(send, look, prof, text)
        seen = _outcome(look, prof, text)
    if seen == HELD_LINE:
        send(prof.enter)
        seen = _outcome(look, prof, text)
    if seen == TAKEN:
        return True, False
    if seen == HELD_LINE:
        send(prof.clear)  # nothing handoffd typed stays in the box
        _outcome(look, prof, text)
    return False, seen == HELD_LINE


TAKEN, HELD_LINE, LOST, FOREIGN = "taken", "held", "lost", "foreign"


def _outcome(look: Callable[[], Screen], prof: Profile, text: str) -> str:
    """Read the pane until it shows the line taken, or TAKEN_WITHIN has passed: then
    whether the box still holds it, or lost it."""
    deadline = time.monotonic() + TAKEN_WITHIN
    while True:
        time.sleep(LOOK_EVERY)
        screen = look()
        if profiles.sent(screen, prof, text):
            return TAKEN
        if time.monotonic() >= deadline:
            return _left(profiles.box_text(screen, prof), text)


def _left(typed: str | None, text: str) -> str:
    """What a box showing `typed` holds of a line not taken: exactly the line, nothing
    (or no box), or something of a person's."""
    if not typed:
        return LOST
    return HELD_LINE if profiles.ours_exactly(typed, (text,)) else FOREIGN
