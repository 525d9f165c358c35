"""Checking a draft handoff (headers only) before `swarm_handoff` queues it.

Agents repair their drafts from these messages, so their texts are part of the
protocol (docs/protocol.md §3).  Everything here is pure: git is reached through the
`resolve_commit` function the caller passes in.
"""

from __future__ import annotations

from handoffd.core import handoff as hf
from handoffd.core.terminal import has_control

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a helper ~15 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    # commit -> (canonical commit, None) or (None, error message)
    CommitResolver = Callable[[str], tuple[str | None, str | None]]
    IdExists = Callable[[str], bool]

ALLOWED = (
    hf.TYPE,
    hf.RECIPIENTS,
    hf.PRIORITY,
    hf.TASK,
    hf.COMMIT,
    hf.MESSAGE,
    hf.DEPENDS_ON,
    hf.BLOCKED_REASON,
)
ANY_TYPE = (hf.DEPENDS_ON, hf.BLOCKED_REASON)  # allowed for every type (docs/protocol.md §8)
MAX_REASON = hf.REASON_LIMIT
# the headers only handoffd writes: a draft that sets one is refused
RESERVED = (hf.ID, hf.SENDER, hf.ROLE, hf.RECIPIENT, hf.CREATED_AT, hf.ENQUEUED_AT,
            hf.DEQUEUED_AT, hf.COMPLETED_AT)  # fmt: skip
TYPE_FIELDS = {
    "git_handoff": (hf.TYPE, hf.RECIPIENTS, hf.PRIORITY, hf.TASK, hf.COMMIT),
    "note": (hf.TYPE, hf.RECIPIENTS, hf.PRIORITY, hf.MESSAGE),
    "packet": (hf.TYPE, hf.RECIPIENTS, hf.PRIORITY, hf.TASK),
}
MAX_TEXT = 80
# Free text the queue shows and files under (a task is a thread's key in the digest
# index): a tab, an escape or a right-to-left override in it is refused at the source.
PLAIN = (hf.TASK, hf.MESSAGE, hf.BLOCKED_REASON)
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


class Draft:
    """A valid draft: its headers, recipients in order, the canonical commit and, for a
    packet, the packet text verbatim.  The operator's handoffs (docs/protocol.md §18) add
    headers no agent may write (`extra`: `sent_by`, `in_reply_to`, a note's `task`) and
    give the whole text as the body."""

    __slots__ = ("body", hf.COMMIT, "extra", "headers", "recipients")

    def __init__(
        self,
        headers: dict[str, str],
        recipients: list[str],
        commit: str | None,
        body: str | None = None,
    ) -> None:
        self.headers = headers
        self.recipients = recipients
        self.commit = commit
        self.body = body
        self.extra: list[tuple[str, str]] = []


def check(
    text: str,
    known_roles: set[str],
    resolve_commit: CommitResolver,
    id_exists: IdExists = lambda ident: False,
) -> Draft | list[str]:
    """The valid draft, or every error found in it, in a stable order.  `id_exists` says
    whether a `depends_on` id names a handoff already in the project."""
    text, body = split_packet(text)
    headers, errors = parse_lines(text)
    recipients, recipient_errors = _recipients(headers.get(hf.RECIPIENTS, ""), known_roles)
    commit: str | None = None
    commit_errors: list[str] = []
    if headers.get(hf.TYPE) == "git_handoff":
        commit, commit_errors = _commit(headers, resolve_commit)
    errors += _base_errors(headers)
    errors += recipient_errors
    errors += _type_field_errors(headers)
    errors += _text_errors(headers, "git_handoff", hf.TASK) + commit_errors
    errors += _text_errors(headers, "packet", hf.TASK)
    errors += _only_for(headers, "git_handoff", (hf.COMMIT,))
    if headers.get(hf.TYPE) != "packet":
        errors += _only_for(headers, "git_handoff", (hf.TASK,))
    errors += _text_errors(headers, "note", hf.MESSAGE)
    errors += _only_for(headers, "note", (hf.MESSAGE,))
    errors += dependency_errors(headers.get(hf.DEPENDS_ON), id_exists)
    errors += _reason_errors(headers.get(hf.BLOCKED_REASON))
    errors += _control_errors(headers)
    if body is not None:
        from handoffd.queue import packet  # only packets pay for importing it

        errors += packet.check(body) if body.strip() else [packet.MISSING]
    return errors or Draft(headers, recipients, commit, body)


def split_packet(text: str) -> tuple[str, str | None]:
    """A packet draft's header block and its packet (after the first blank line, verbatim);
    any other draft whole, with no body (its body lines are errors)."""
    lines = text.split("\n")
    blank = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    if "type: packet" not in (line.rstrip("\r") for line in lines[:blank]):
        return text, None
    head = "".join(line + "\n" for line in lines[:blank])
    return head, "\n".join(lines[blank + 1 :])


def dependencies(value: str) -> list[str]:
    """The ids of a `depends_on` value, in order."""
    return hf.list_parts(value)


def dependency_errors(value: str | None, id_exists: IdExists) -> list[str]:
    """Each id must name an existing handoff, once: no cycle can form through new drafts."""
    if value is None:
        return []
    idents = dependencies(value)
    errors: list[str] = []
    for index, ident in enumerate(idents):
        if not ident:
            errors.append("Header 'depends_on' contains an empty id.")
        elif ident in idents[:index]:
            errors.append(f"Duplicate dependency '{ident}'.")
        elif not id_exists(ident):
            errors.append(f"Unknown dependency '{ident}'.")
    return errors


def _reason_errors(value: str | None) -> list[str]:
    if value is None or len(value.strip()) <= MAX_REASON:
        return []
    return [
        f"Header 'blocked_reason' must be no longer than {MAX_REASON} characters; got {len(value)}."
    ]


def _control_errors(headers: dict[str, str]) -> list[str]:
    return [
        f"Header '{f}' must not contain control characters."
        for f in PLAIN
        if f in headers and has_control(headers[f])
    ]


def parse_lines(text: str) -> tuple[dict[str, str], list[str]]:
    """Header lines into a dict, with an error for each line that is not a usable header."""
    headers: dict[str, str] = {}
    errors: list[str] = []
    in_body = False
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r")
        if in_body or not line.strip():
            in_body = True
            if line.strip():
                errors.append(
                    f"Line {number}: draft handoffs may contain headers only; "
                    "payloads are generated by swarm_handoff.sh."
                )
            continue
        error = _header_error(line, headers)
        if error:
            errors.append(f"Line {number}: {error}")
        else:
            field, _, value = line.partition(": ")
            headers[field] = value
    return headers, errors


def _header_error(line: str, seen: dict[str, str]) -> str | None:
    field, sep, value = line.partition(": ")
    if not sep:
        return "expected 'field: value'."
    if not field.strip() or not value.strip():
        return "field and value must both be non-empty."
    if field in RESERVED:
        return f"header '{field}' is reserved and must not be written by agents."
    if field not in ALLOWED:
        return f"unknown header '{field}'."
    if field in seen:
        return f"duplicate header '{field}'."
    return None


def _base_errors(headers: dict[str, str]) -> list[str]:
    required = (hf.TYPE, hf.RECIPIENTS, hf.PRIORITY)
    errors = [f"Missing required header '{f}'." for f in required if f not in headers]
    kind, priority = headers.get(hf.TYPE), headers.get(hf.PRIORITY)
    if kind is not None and kind not in TYPE_FIELDS:
        errors.append(f"Header 'type' must be one of git_handoff, note or packet; got '{kind}'.")
    if priority is not None and not (len(priority) == 2 and set(priority) <= _DIGITS):
        errors.append(f"Header 'priority' must be two digits from 00 to 99; got '{priority}'.")
    return errors


def _recipients(to: str, known_roles: set[str]) -> tuple[list[str], list[str]]:
    if not to:
        return [], []
    recipients = hf.list_parts(to)
    errors: list[str] = []
    for index, name in enumerate(recipients):
        if not name:
            errors.append("Header 'to' contains an empty recipient.")
        elif "_" in name:
            errors.append(
                f"Recipient role '{name}' is invalid; role names may not contain underscores."
            )
        elif name in recipients[:index]:
            errors.append(f"Duplicate recipient '{name}'.")
        elif name not in known_roles:
            errors.append(f"Unknown recipient role '{name}'.")
    return recipients, errors


def _type_field_errors(headers: dict[str, str]) -> list[str]:
    allowed = TYPE_FIELDS.get(headers.get(hf.TYPE, ""))
    if allowed is None:  # an unknown type is reported once, not once per field
        return []
    kind = headers[hf.TYPE]
    allowed += ANY_TYPE
    return [f"Header '{f}' is not allowed for type '{kind}'." for f in headers if f not in allowed]


def _text_errors(headers: dict[str, str], kind: str, field: str) -> list[str]:
    """A type's required one-line text field (`task`, `message`): present and short."""
    if headers.get(hf.TYPE) != kind:
        return []
    value = headers.get(field)
    if value is None:
        return [f"Missing required header '{field}' for {kind}."]
    if len(value) > MAX_TEXT:
        return [f"Header '{field}' must be no longer than {MAX_TEXT} characters; got {len(value)}."]
    return []


def _only_for(headers: dict[str, str], kind: str, fields: tuple[str, ...]) -> list[str]:
    if headers.get(hf.TYPE) == kind:
        return []
    return [f"Header '{f}' is only allowed for {kind}." for f in fields if f in headers]


def _commit(
    headers: dict[str, str], resolve_commit: CommitResolver
) -> tuple[str | None, list[str]]:
    commit = headers.get(hf.COMMIT)
    if commit is None:
        return None, ["Missing required header 'commit' for git_handoff."]
    if not (len(commit) == 10 and set(commit) <= _HEX):
        return None, [f"Header 'commit' must be exactly 10 hexadecimal characters; got '{commit}'."]
    canonical, error = resolve_commit(commit)
    return canonical, [error] if error else []
