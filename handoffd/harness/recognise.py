"""Whether a pane's screen is one its harness's profile knows (docs/protocol.md §17,
"Releases move").  Pure: fed one read at a time, the time a parameter.

A release that draws its screen otherwise than the profile expects (Codex 0.150 has no
`? for shortcuts` footer) never looks idle to it: the daemon would wait on it for ever, its
wake-up unsent.  So a profile drives a pane only while its screen is recognised: once the
profile has seen it idle, for the pane's life; before that, while what it shows is
something the profile knows — its busy marker, or its ready input box holding text — or
for RECOGNISE_WITHIN seconds after the pane was first read or last showed such a thing.
Past that the pane is driven as generic (§14's quiet time and cadence) until the profile
sees it idle after all.
"""

from __future__ import annotations

from handoffd.harness import profiles
from handoffd.harness.profiles import Profile, Screen

RECOGNISE_WITHIN = 60.0  # seconds a pane's screen may show nothing its profile knows


class Recognition:
    """The screens of one role's pane, as its profile reads them."""

    __slots__ = ("created", "known_at", "seen_idle", "within")

    def __init__(self, within: float | None = None) -> None:
        self.within = RECOGNISE_WITHIN if within is None else within
        self.created: float | None = None  # the pane these reads are of (its session's start)
        self.known_at: float | None = None  # the last read showing what the profile knows
        self.seen_idle = False

    def see(self, screen: Screen, prof: Profile, created: float | None, now: float) -> bool:
        """Record one read of the pane (whose session started at `created`) at `now`:
        whether the profile drives it (True), or it is driven as generic."""
        if created != self.created or self.known_at is None:  # a new pane, or the first read
            self.created, self.known_at, self.seen_idle = created, now, False
        if profiles.state(screen, prof) == profiles.IDLE:
            self.seen_idle = True
        if self.seen_idle:
            return True
        if profiles.busy(screen, prof) or (profiles.ready(screen, prof)
                                           and profiles.box_text(screen, prof)):  # fmt: skip
            self.known_at = now
        return now - self.known_at < self.within
