"""Copies arriving from other hosts: written into this host's inboxes, then acknowledged.

Each batch the link fetched is published the §5 way, role by role: every new copy staged
as a hidden temp file in the role's `new/` (fsynced), renamed into view, one flush of
`new/`; the daemon wakes the roles, and only then are the messages acknowledged.  A copy
whose name the role already holds anywhere in its inbox is acknowledged without a second
copy: the server redelivers what a killed daemon wrote but never acknowledged, and the
name (unique per sender) says it is the same handoff.
"""

from __future__ import annotations

import os

from nats.aio.msg import Msg

from handoffd import checks, durable
from handoffd import handoff as hf
from handoffd.config import Box, Role
from handoffd.remote.link import Link
from handoffd.remote.settings import Network
from handoffd.scan import State, listing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

NAME = "Handoffd-Name"
LIMIT = checks.MAX_BYTES + 4096  # an original's limit, and the headers stamping adds
INBOX = (State.NEW, State.IN_PROCESS, State.COMPLETED)


class Refused(Exception):
    """A message no daemon can use: the reason, logged once; it is never redelivered."""


class Incoming:
    """Takes the messages the link fetched and publishes them into local inboxes."""

    def __init__(self, link: Link, network: Network, log: FilteringBoundLogger) -> None:
        self.link = link
        self.network = network
        self.log = log
        self.written: list[Msg] = []  # published (or already there): acknowledge after waking

    def receive(self, local: dict[str, Role]) -> set[str]:
        """Publish what arrived; the roles that received new mail."""
        batch: list[Msg] = []
        while self.link.received:
            batch.append(self.link.received.popleft())
        if not batch:
            return set()
        by_role: dict[str, list[tuple[str, bytes, Msg]]] = {}
        for message in batch:
            try:
                role, name = self._check(message, local)
            except Refused as refusal:
                self.log.error("remote_refused", subject=message.subject, reason=str(refusal))
                self.link.term(message)
                continue
            if role is not None:
                by_role.setdefault(role, []).append((name, message.data, message))
        got = {role for role, items in by_role.items() if self._publish(local[role], items)}
        if not self.written:
            self.link.taken()
        return got

    def acknowledge(self) -> None:
        """After the wake-ups: acknowledge what was published, then fetch the next batch."""
        if not self.written:
            return
        for message in self.written:
            self.link.ack(message)
        self.written = []
        self.link.taken()

    def _check(self, message: Msg, local: dict[str, Role]) -> tuple[str | None, str]:
        """(role, file name) of a usable message; role None: not ours to write now."""
        role = self.network.role_of(message.subject)
        name = (message.headers or {}).get(NAME, "")
        if role is None or role not in local:
            # roles.tsv moved the role away since the fetch: its new host's consumer takes
            # it once this one no longer asks for it (unacknowledged, it is sent again)
            self.log.warning("remote_not_local", subject=message.subject, file=name)
            return None, name
        parsed = hf.parse_name(name) if hf.is_visible(name) and "/" not in name else None
        if parsed is None or role not in parsed.recipients:
            raise Refused(f"{NAME} {name!r} is not a queue file name addressed to {role}")
        data = message.data
        if len(data) > LIMIT or b"\0" in data:
            raise Refused(f"{name}: larger than {LIMIT} bytes, or holds a NUL byte")
        try:
            copy = hf.parse(data, name)
        except hf.HandoffError as error:
            raise Refused(str(error)) from None
        if copy.get("recipient") != role or not copy.get("enqueued_at"):
            raise Refused(f"{name}: not a copy stamped for {role}")
        return role, name

    def _publish(self, role: Role, items: list[tuple[str, bytes, Msg]]) -> bool:
        """Write one role's new copies; True if any came into view.  A write that fails
        (disk full…) leaves its messages unacknowledged: the server sends them again."""
        present = {entry.name for entry in listing(role, INBOX)}
        new = role.path(Box.NEW)
        staged: list[tuple[str, str, Msg]] = []
        try:
            durable.makedirs(new)
            for name, data, message in items:
                if name in present:
                    self.log.warning("duplicate_skipped", file=name, role=role.name, remote=True)
                    self.written.append(message)
                    continue
                present.add(name)
                temp = durable.temp_name(new, name)
                durable.create(temp, data)
                staged.append((temp, os.path.join(new, name), message))
            for temp, final, _ in staged:
                os.rename(temp, final)  # `present` said no copy of this name is there
            durable.fsync_dir(new)
        except OSError as error:
            for temp, _, _ in staged:
                durable.unlink_quietly(temp)
            self.log.warning("remote_deferred", role=role.name, error=str(error),
                             files=[os.path.basename(final) for _, final, _ in staged])  # fmt: skip
            return False
        for _, final, message in staged:
            self.written.append(message)
            self.log.info("received", file=os.path.basename(final), role=role.name)
        return bool(staged)
