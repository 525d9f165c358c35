"""What the daemon checks before it writes anything (docs/protocol.md §5.1).

An outbox entry is read without following links or blocking on special files, and
never beyond the size limit; then `inspect` (pure) decides: deliverable, or refused
with a one-line reason for the `.error` file.
"""

from __future__ import annotations

from handoffd.core import handoff as hf
from handoffd.core import safeio
from handoffd.core.config import valid_role_name

MAX_BYTES = 64 * 1024
REQUIRED = (hf.ID, hf.SENDER, hf.RECIPIENTS, hf.PRIORITY, hf.TYPE)


class Refused(Exception):
    """The entry can never be delivered; the message is the reason an operator reads."""


class UnknownRecipient(Refused):
    """A recipient missing from the roles the daemon knows: worth re-reading roles.tsv."""


def read_entry(path: str) -> bytes:
    """The bytes of a regular file at `path`, refusing links, FIFOs, directories and
    oversized files without reading them (the careful reader, `safeio`)."""
    try:
        return safeio.read_regular(path, MAX_BYTES)
    except safeio.TooLarge:
        raise Refused(f"larger than the {MAX_BYTES}-byte limit") from None
    except safeio.NotRegular as refusal:
        raise Refused(refusal.why) from None


def inspect(data: bytes, name: str, sender: str, roles: set[str]) -> tuple[hf.Handoff, list[str]]:
    """The parsed handoff and its recipients, or `Refused` saying why it cannot go out."""
    if b"\0" in data:
        raise Refused("contains a NUL byte")
    try:
        handoff = hf.parse(data, name)
    except hf.HandoffError as error:
        raise Refused(_crlf_reason(data) or str(error)) from None
    if any(value.endswith("\r") for _, value in handoff.headers):
        raise Refused(_crlf_reason(data) or "a header line ends in a carriage return")
    keys = [key for key, _ in handoff.headers]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        # Only the first would be read: a second `to:` would silently lose its recipients.
        raise Refused(f"header(s) given more than once: {', '.join(twice)}")
    missing = [key for key in REQUIRED if not handoff.get(key)]
    if missing:
        raise Refused(f"missing required header(s): {', '.join(missing)}")
    claimed = handoff.get(hf.SENDER)
    if claimed != sender:
        raise Refused(f"header 'from: {claimed}' does not match the sending role '{sender}'")
    to = handoff.get(hf.RECIPIENTS) or ""
    recipients = _recipients(to)
    for recipient in recipients:
        if recipient not in roles:
            raise UnknownRecipient(
                f"unknown recipient role '{recipient}' (not in roles.tsv); nobody got a copy"
            )
    _check_name(name, sender, recipients)
    return handoff, recipients


def _check_name(name: str, sender: str, recipients: list[str]) -> None:
    """Names are unique per sender only because they carry the sender (a borrowed name
    could stand in an inbox in place of another role's handoff), and a name is what a
    Stop hook and the board read before any header: one that says other than its
    headers is refused."""
    problem = hf.misnamed(name, sender, recipients)
    if problem is not None:
        raise Refused(problem)


def _crlf_reason(data: bytes) -> str | None:
    """Why a file written with Windows line ends is refused, said as such (docs/protocol.md §2)."""
    if b"\r\n" not in data.partition(b"\n\n")[0] + b"\n":
        return None
    return "CRLF line endings; a handoff file uses LF (\\n) line endings only"


def _recipients(to: str) -> list[str]:
    """`to`'s recipients in order, each a valid role name given once."""
    recipients = hf.list_parts(to)
    for index, name in enumerate(recipients):
        if not valid_role_name(name):
            raise Refused(f"invalid recipient {name!r} in 'to: {to}'")
        if name in recipients[:index]:
            raise Refused(f"recipient '{name}' is listed twice in 'to: {to}'")
    return recipients
