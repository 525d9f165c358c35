"""Copies for roles on other hosts: published to the stream, counted once acknowledged.

The courier (delivery.py) owns the journal and the originals; this keeps, per original,
the publishes in flight on the link's loop.  `send` never waits: a publish's future pokes
the daemon when the stream answers, and the next pass `collect`s it.
"""

from __future__ import annotations

import concurrent.futures

from handoffd import handoff as hf
from handoffd.remote import link as links
from handoffd.remote.settings import Network, msg_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nats.js import api

    from handoffd.journal import Entry


class Outgoing:
    """The publishes of remote copies in flight, by original."""

    def __init__(self, link: links.Link, network: Network) -> None:
        self.link = link
        self.network = network
        self.flights: dict[str, dict[str, concurrent.futures.Future[api.PubAck]]] = {}
        self._generation = link.generation

    def reconnected(self) -> bool:
        """Whether the link connected again since the last call: deferred mail is due."""
        now = self.link.generation
        changed, self._generation = now != self._generation, now
        return changed

    def in_flight(self, entry: Entry) -> bool:
        return any(not f.done() for f in self.flights.get(entry.original, {}).values())

    def collect(self, entry: Entry) -> tuple[list[str], str | None]:
        """The remote recipients of `entry` whose copies the stream acknowledged since the
        last call (added to `entry.acked`), and the first publish error, if any."""
        flights = self.flights.get(entry.original)
        if not flights:
            return [], None
        acked, error = [], None
        for role, future in list(flights.items()):
            if not future.done():
                continue
            del flights[role]
            problem = future.exception()
            if problem is None:
                acked.append(role)
            elif error is None:
                error = links.describe(problem)
        if not flights:
            del self.flights[entry.original]
        entry.acked += [role for role in acked if role not in entry.acked]
        return acked, error

    def send(self, entry: Entry, copies: dict[str, bytes]) -> str | None:
        """Publish the copies of `entry`'s unacknowledged remote recipients (`copies`: the
        stamped bytes per role); the reason when they cannot go now."""
        if not self.link.connected:
            return f"nats: not connected to {self.network.describe()}"
        name = entry.original.rsplit("/", 1)[-1]
        ident = hf.name_id(name)
        flights = self.flights.setdefault(entry.original, {})
        for role in entry.unacked:
            if role not in flights:
                publish = self.link.publish(
                    self.network.subject(role), copies[role], msg_id(ident, role), name
                )
                flights[role] = self.link.submit(publish)
        return None

    def pending(self) -> int:
        """Publishes not yet answered (`run --once` waits for them)."""
        return sum(not f.done() for fs in self.flights.values() for f in fs.values())
