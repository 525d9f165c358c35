"""Whether a pane's screen is one its harness's profile knows (docs/protocol.md §17,
"Releases move").  Pure: fed one read at a time, the time a parameter.

A release that draws its screen otherwise than the profile expects never looks idle to it:
Codex 0.150 draws the input box as 0.171 does but not the `? for shortcuts` footer (only
for a moment as it starts), so its idle pane reads as a box not ready, for ever, and the
daemon would wait on it with the wake-up unsent.  So the profile drives a pane only while
it explains what the pane shows: the harness idle, its busy marker, its ready box holding
text — or, once the profile has read the pane so, no input box at all (a dialog in its
place: waited on, never typed into).  A pane that shows nothing so explained for
RECOGNISE_WITHIN seconds (counted from the first read) — a box that is never ready, or
from its start a screen without one — is driven as generic (§14's quiet time and §5's
keys) until the profile sees it idle again.  A busy marker alone does not bring the
profile back: Codex 0.150 shows 0.171's marker during a turn, and after it would again
look not ready for ever.
"""

from __future__ import annotations

from handoffd.harness import profiles
from handoffd.harness.profiles import Profile, Screen

RECOGNISE_WITHIN = 60.0  # seconds a pane may show nothing its profile explains


class Recognition:
    """The screens of one role's pane, as its profile reads them."""

    __slots__ = ("created", "explained_at", "read_so", "unrecognised", "within")

    def __init__(self, within: float | None = None) -> None:
        self.within = RECOGNISE_WITHIN if within is None else within
        self.created: float | None = None  # the pane these reads are of (its session's start)
        self.explained_at: float | None = None  # the last read the profile explained
        self.read_so = False  # the profile has read it idle, busy or ready at least once
        self.unrecognised = False  # driven as generic until the profile sees it idle

    def see(self, screen: Screen, prof: Profile, created: float | None, now: float) -> bool:
        """Record one read of the pane (whose session started at `created`) at `now`:
        whether the profile drives it (True), or it is driven as generic."""
        if created != self.created or self.explained_at is None:  # a new pane, or a first read
            self.created, self.explained_at = created, now
            self.read_so = self.unrecognised = False
        state = profiles.state(screen, prof)
        if state == profiles.IDLE:
            self.unrecognised = False
        if self.unrecognised:
            return False
        if self._explained(screen, prof, state):
            self.explained_at = now
        self.unrecognised = now - self.explained_at >= self.within
        return not self.unrecognised

    def _explained(self, screen: Screen, prof: Profile, state: str) -> bool:
        ready = profiles.ready(screen, prof)
        if (
            state == profiles.IDLE
            or profiles.busy(screen, prof)
            or (ready and state in (profiles.BUSY, profiles.HELD, profiles.UNSENT))  # its box
        ):
            self.read_so = True
            return True
        return self.read_so and profiles.box_rows(screen, prof) is None
