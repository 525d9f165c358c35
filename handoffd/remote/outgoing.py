"""Copies for roles on other hosts: published to the stream, counted once acknowledged.

The courier (delivery/delivery.py) owns the journal and the originals; this keeps, per original,
the publishes in flight on the link's loop.  `send` never waits: a publish's future pokes
the daemon when the stream answers, and the next pass `collect`s it.

A copy's message id names its bytes (`settings.msg_id`), and its bytes are fixed once, in
the journal (`Entry.stamp`), so a copy sent again is a duplicate the stream drops.  An
acknowledgement that says "duplicate" is believed only for a copy this daemon may have
published before: one it already handed to the link, or one whose journal entry it found
at start-up (a previous run may have published it just before it stopped).  For any other
the stream holds another message under that id, put there by someone else: a conflict,
never a delivery (docs/protocol.md §15, "Message ids").
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from typing import Protocol

from handoffd.core import handoff as hf
from handoffd.remote import link as links
from handoffd.remote.settings import Network, msg_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nats.js import api

Key = tuple[str, str, str | None]  # (original, role, stamp): one copy's bytes


class Entry(Protocol):
    """What this reads of the courier's journal entry (delivery/, the layer above)."""

    original: str
    acked: list[str]
    stamp: str | None

    @property
    def unacked(self) -> list[str]: ...


class Flight:
    """One publish in flight: its answer, and whether a duplicate would be believed."""

    __slots__ = ("future", "ident", "trusted")

    def __init__(self, future: concurrent.futures.Future[api.PubAck], ident: str, trusted: bool):
        self.future = future
        self.ident = ident  # its message id, for the log
        self.trusted = trusted  # published (maybe) before: a duplicate answer is ours


class Answers:
    """What the stream answered for one original since the last look."""

    def __init__(self) -> None:
        self.acked: list[str] = []  # roles whose copies the stream now holds
        self.conflicts: list[tuple[str, str]] = []  # (role, message id) taken by another
        self.error: str | None = None  # the first publish that failed, said as `nats: …`


class Outgoing:
    """The publishes of remote copies in flight, by original."""

    def __init__(self, link: links.Link, network: Network) -> None:
        self.link = link
        self.network = network
        self.flights: dict[str, dict[str, Flight]] = {}
        self.published: set[Key] = set()  # copies this daemon may have published before
        self.taken: set[Key] = set()  # copies whose id another message held: never believed
        self._generation = link.generation

    def reconnected(self) -> bool:
        """Whether the link connected again since the last call: deferred mail is due."""
        now = self.link.generation
        changed, self._generation = now != self._generation, now
        return changed

    def inherit(self, entries: Sequence[Entry]) -> None:
        """The journal found at start-up: a run before this one may have published each of
        its remote copies just before it stopped, so a duplicate answer for one is ours."""
        self.published.update(_key(e, role) for e in entries for role in e.unacked)

    def in_flight(self, entry: Entry) -> bool:
        return any(not f.future.done() for f in self.flights.get(entry.original, {}).values())

    def collect(self, entry: Entry) -> Answers:
        """What the stream answered for `entry`'s copies since the last call; the roles it
        acknowledged are added to `entry.acked`."""
        answers = Answers()
        flights = self.flights.get(entry.original)
        for role, flight in list((flights or {}).items()):
            if not flight.future.done():
                continue
            del flights[role]  # type: ignore[union-attr]
            problem = flight.future.exception()
            if problem is not None:
                answers.error = answers.error or links.describe(problem)
            elif flight.future.result().duplicate and not flight.trusted:
                self.taken.add(_key(entry, role))
                answers.conflicts.append((role, flight.ident))
            else:
                answers.acked.append(role)
        if flights is not None and not flights:
            del self.flights[entry.original]
        entry.acked += [role for role in answers.acked if role not in entry.acked]
        return answers

    def send(self, entry: Entry, copies: dict[str, bytes]) -> str | None:
        """Publish the copies of `entry`'s unacknowledged remote recipients (`copies`: the
        stamped bytes per role); the reason when they cannot go now."""
        if not self.link.connected:
            return f"nats: not connected to {self.network.describe()}"
        name = entry.original.rsplit("/", 1)[-1]
        flights = self.flights.setdefault(entry.original, {})
        for role in entry.unacked:
            if role not in flights:
                key = _key(entry, role)
                ident = msg_id(hf.name_id(name), role, copies[role])
                publish = self.link.publish(self.network.subject(role), copies[role], ident, name)
                trusted = key in self.published and key not in self.taken
                flights[role] = Flight(self.link.submit(publish), ident, trusted)
                self.published.add(key)
        return None

    def pending(self) -> int:
        """Publishes whose answer no pass has collected yet (`run --once` waits for them):
        an answer that came back at once still has to be read, or the original would stay."""
        return sum(len(flights) for flights in self.flights.values())


def _key(entry: Entry, role: str) -> Key:
    return entry.original, role, entry.stamp
