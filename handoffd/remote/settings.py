"""How this host reaches the others: the names NATS knows the swarm by, read from the
project's swarmforge.conf and `.swarmforge/host` (pure but for that one read).

Every name is derived from the `project` line, so every host of a swarm computes the
same stream, subjects, bucket and consumer names from the one committed configuration.
"""

from __future__ import annotations

import hashlib
import os

from handoffd.core import config, project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.core.config import Role

# Mail a recipient's daemon has not acknowledged is sent to it again after this long: a
# daemon killed with a batch in hand gets it back once it runs again.
ACK_WAIT = 10.0  # seconds
# Within this window a repeated Nats-Msg-Id is acknowledged and not stored again; past it,
# the recipient's own check (a copy already in its inbox) still drops it.
DUPLICATE_WINDOW = 600.0  # seconds


class Network:
    """The NATS side of one project on this host."""

    def __init__(
        self,
        project_name: str,
        urls: list[str],
        here: str,
        hosts: list[str],
        creds: str | None = None,
        tls_ca: str | None = None,
    ) -> None:
        self.project = project_name
        self.urls = urls
        self.here = here or "local"  # a host of its own name, even for a single machine
        self.hosts = hosts
        self.creds = creds
        self.tls_ca = tls_ca

    @property
    def stream(self) -> str:
        """`HANDOFFD_<PROJECT>`: upper-cased, every character outside A-Z0-9 as `_`."""
        upper = self.project.upper()
        return "HANDOFFD_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in upper)

    @property
    def bucket(self) -> str:
        return f"handoffd_{self.project}_cards"

    @property
    def consumer(self) -> str:
        return f"{self.project}-{self.here}"

    @property
    def subjects(self) -> str:
        """Every role's inbox subject: what the stream stores."""
        return f"handoffd.{self.project}.inbox.*"

    def subject(self, role: str) -> str:
        return f"handoffd.{self.project}.inbox.{role}"

    def role_of(self, subject: str) -> str | None:
        """The role a subject is the inbox of, if it is one of ours."""
        prefix = f"handoffd.{self.project}.inbox."
        return subject[len(prefix) :] if subject.startswith(prefix) else None

    def describe(self) -> str:
        return ",".join(self.urls)


def msg_id(ident: str, role: str, data: bytes) -> str:
    """The stream's dedupe key for one copy: `<id>@<role>#<16 hex digits of the SHA-256 of
    its bytes>`, the copy's card and what it holds.  The stream drops a message whose id it
    has seen, from whoever; an id that names the bytes cannot be taken first by someone
    publishing other bytes (docs/protocol.md §15, "Message ids")."""
    return f"{ident}@{role}#{hashlib.sha256(data).hexdigest()[:16]}"


def load(root: str) -> Network | None:
    """The project's network, or None when its configuration names no NATS servers (a
    project on one machine).  Raises `ConfigError` for a configuration that cannot be read."""
    path = project.stored_configuration(root)
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise config.ConfigError(f"cannot read {path}: {error}") from None
    try:
        swarm = project.parse_swarm(text, path)
    except project.SwarmConfigError as error:
        raise config.ConfigError(str(error)) from None
    return from_swarm(swarm, root, config.this_host(root))


def from_swarm(swarm: project.Swarm, root: str, here: str) -> Network | None:
    """The network a parsed configuration describes for host `here`; None without `nats`."""
    if not swarm.urls:
        return None
    given = swarm.settings
    return Network(
        given["project"],
        swarm.urls,
        here,
        swarm.hosts,
        _path(root, given.get("nats-creds")),
        _path(root, given.get("nats-tls-ca")),
    )


def _path(root: str, value: str | None) -> str | None:
    """A file named in the configuration: relative to the project root."""
    if value is None:
        return None
    return os.path.join(root, os.path.expanduser(value))


def remote_roles(roles: dict[str, Role], here: str) -> dict[str, Role]:
    return {name: role for name, role in roles.items() if not config.is_local(role, here)}


def local_roles(roles: dict[str, Role], here: str) -> dict[str, Role]:
    return {name: role for name, role in roles.items() if config.is_local(role, here)}
