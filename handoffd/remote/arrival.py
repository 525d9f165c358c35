"""What a message from the stream is, decided before anything is written (docs/protocol.md
§15, "Poison messages").  Pure: the subject's role, the `Handoffd-Name` header and the bytes
in; out comes a copy to write into one of this host's inboxes, None for a role that is not
here (any more), or `Refused` with the reason when no retry could ever make it usable.

Anyone holding the swarm's credentials can publish into the stream, so nothing of a message
is trusted: its name must be a queue file's name addressed to the role of its subject, that
a file system can hold and a terminal can print; its bytes a copy that passes §5's check of
an original (from the sender its name spells), stamped for that role; and its sender a role
of another host, since this host's own roles never send from elsewhere.
"""

from __future__ import annotations

from handoffd.core import durable, limits, terminal
from handoffd.core import handoff as hf
from handoffd.core.config import OPERATOR, valid_role_name
from handoffd.queue import checks

NAME = "Handoffd-Name"
LIMIT = checks.MAX_BYTES + 4096  # an original's limit, and the headers stamping adds


class Refused(Exception):
    """A message no daemon can use: the reason, logged once; it is never redelivered."""


class Copy:
    """A message that is a copy for one of this host's roles, checked."""

    __slots__ = ("data", "handoff", "name", "role")

    def __init__(self, role: str, name: str, data: bytes, handoff: hf.Handoff) -> None:
        self.role = role
        self.name = name
        self.data = data
        self.handoff = handoff


class _Everyone(set[str]):
    """Every recipient counts as known: another host's roles.tsv may name a role this one
    has not heard of yet, and its copy is not this host's to write (only the subject's
    role is, checked on its own)."""

    def __contains__(self, name: object) -> bool:
        return True


def classify(role: str | None, name: str | None, data: bytes, local: set[str]) -> Copy | None:
    """The copy a message of `role`'s subject is; None when `role` is not one of this
    host's (`local`) now; `Refused` when it can never be one."""
    if role is None or not valid_role_name(role):
        raise Refused(f"its subject names no role's inbox ({role!r})")
    if role not in local:
        return None
    parts = _name(name, role)
    if parts.sender in local and parts.sender != OPERATOR:  # each host has its own (§18)
        raise Refused(f"its sender {parts.sender} is a role of this host, not of another")
    if len(data) > LIMIT:
        raise Refused(f"larger than the {LIMIT}-byte limit of a copy")
    assert name is not None
    try:  # its name names `role` (`_name`), and `to` names what its name does
        handoff, _ = checks.inspect(data, name, parts.sender, _Everyone())
    except checks.Refused as refusal:
        raise Refused(str(refusal)) from None
    if handoff.get(hf.RECIPIENT) != role or not handoff.get(hf.ENQUEUED_AT):
        raise Refused(f"not a copy stamped for {role} (recipient, enqueued_at)")
    return Copy(role, name, data, handoff)


def _name(name: str | None, role: str) -> hf.Name:
    """The parts of a message's file name; `Refused` for one that cannot name a copy here."""
    if not name:
        raise Refused(f"no {NAME} header")
    if len(name.encode("utf-8", "surrogatepass")) > durable.NAME_MAX:
        raise Refused(f"a name longer than {durable.NAME_MAX} bytes")
    if terminal.has_control(name):
        raise Refused("a control character in its name")
    parts = hf.parse_name(name) if hf.is_item(name) and "/" not in name else None
    if parts is None:
        raise Refused("its name is not a queue file's name")
    tail = hf.split_copy(name)[1]
    if tail is not None and not (tail.isascii() and tail.isdigit()):
        # a sender names its files `<fields>.handoff`, or `….2.handoff` when archived so;
        # any other tail is text a peer chose ($(…), quotes) riding along into every view
        raise Refused("its name has a tail that is no copy number")
    if role not in parts.recipients:
        raise Refused(f"its name is not addressed to {role}")
    return parts


def retry_in(deliveries: int) -> float:
    """Seconds before a deferred message is sent again, by how often it was delivered."""
    return limits.retry_delay(deliveries)


# Headers in which the same handoff may differ: the sending daemon stamps `enqueued_at`
# anew when it publishes again (a release that did not journal its stamp did so each
# time), and unblocking or finishing a copy drops a `blocked_reason` the draft carried.
RESTAMPED = (hf.ENQUEUED_AT, hf.BLOCKED_REASON)


def same_copy(there: bytes, copy: Copy) -> bool:
    """Whether the inbox copy `there` is `copy`, as taking, blocking, releasing, finishing
    or reopening left it (each only adds its own headers or drops `blocked_reason`): the
    same body, and every header of `copy` but those RESTAMPED with the same value."""
    try:
        held = hf.parse(there, copy.name)
    except hf.HandoffError:
        return False
    if held.body != copy.handoff.body:
        return False
    headers: dict[str, str] = {}
    for key, value in held.headers:
        headers.setdefault(key, value)
    return all(headers.get(key) == value for key, value in copy.handoff.headers
               if key not in RESTAMPED)  # fmt: skip
