"""What a daemon runs for a project spread over hosts: the NATS link and the three things
that use it (copies out, copies in, the board), started and stopped together."""

from __future__ import annotations

from handoffd.remote import hosts
from handoffd.remote.incoming import Incoming
from handoffd.remote.link import Link
from handoffd.remote.outgoing import Outgoing
from handoffd.remote.settings import Network

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from structlog.typing import FilteringBoundLogger

    from handoffd.config import Role


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

    def start(self) -> None:
        self.link.start()

    def follow(self, local: dict[str, Role]) -> None:
        """Read the subjects of this host's roles (roles.tsv may have changed)."""
        self.link.consume([self.network.subject(name) for name in local])

    def close(self) -> None:
        self.link.close()
