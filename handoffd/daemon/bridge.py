"""What a daemon runs for a project spread over hosts: the NATS link and the three things
that use it (copies out, copies in, the board), started and stopped together."""

from __future__ import annotations

import time

from handoffd.board import hosts
from handoffd.remote.incoming import Incoming
from handoffd.remote.link import Link
from handoffd.remote.outgoing import Outgoing
from handoffd.remote.settings import Network

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from structlog.typing import FilteringBoundLogger

    from handoffd.core.config import Role


CONNECT_GRACE = 3.0  # seconds `run --once` waits to reach a server before it gives up receiving


class Bridge:
    """This host's side of the swarm's NATS: one link, its users, one life."""

    def __init__(
        self, root: str, network: Network, log: FilteringBoundLogger, poke: Callable[[], None]
    ) -> None:
        self.network = network
        self.link = Link(network, log, poke)
        self.outgoing = Outgoing(self.link, network)
        self.incoming = Incoming(self.link, network, log)
        self.board = hosts.Publisher(self.link, network, root, log)
        self.started = 0.0

    def start(self) -> None:
        self.link.start()
        self.started = time.monotonic()

    def received_all(self, now: float) -> bool:
        """`run --once`: whether everything the stream holds for this host's roles is
        written and acknowledged (a pull came back empty after the last batch); with no
        server reached within CONNECT_GRACE seconds, nothing can be received now."""
        self.link.draining = True  # from now on an empty pull wakes the daemon too
        if self.incoming.written:
            return False
        if self.link.connected:
            return self.link.drained()
        return now > self.started + CONNECT_GRACE

    def follow(self, local: dict[str, Role]) -> None:
        """Read the subjects of this host's roles (roles.tsv may have changed): never the
        operator's, whose mailbox every host has and no other host sends to (§18)."""
        self.link.consume([self.network.subject(name) for name, role in local.items()
                           if not role.is_operator])  # fmt: skip

    def close(self) -> None:
        self.link.close()
