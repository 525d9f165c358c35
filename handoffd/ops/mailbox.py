"""The operator as a sender and a mailbox (docs/protocol.md §18): `send` gives the swarm
work, `inbox` lists what agents handed to a person, `reply` and `ack` close such a card.

The operator is no role of roles.tsv but has a handoff directory of its own
(`P/.swarmforge/operator/handoffs/`, `config.operator_role`): what it sends is an original
in its `outbox/`, made by the same check and the same queueing as `swarm_handoff` (§3), so
the daemon delivers it as any other; what is sent to it lands in its `inbox/new/`, where no
agent takes it and no pane is woken.  Closing a card is one stamp and one rename under the
operator's inbox lock (`Inbox.close`), printed once durable.
"""

from __future__ import annotations

import json as jsonlib
import os
import time

from handoffd.core import config
from handoffd.core import handoff as hf
from handoffd.core.config import Role
from handoffd.core.outcome import Exit, Refusal, Result
from handoffd.core.terminal import escape
from handoffd.ops.context import Context
from handoffd.ops.operator import operator_name
from handoffd.ops.table import SEND_LIMIT, SEND_USAGE
from handoffd.queue.scan import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from handoffd.board.cards import Card
    from handoffd.queue.draft import Draft

ALL = "all"  # every role of the swarm, on every host: pools once, their members not
NAME = "handoffd send"  # how a refusal names what it refused (`HANDOFF INVALID: <name>`)
MESSAGE_LIMIT = 80  # characters of a note's `message` (§3)
ONE_LINE = (hf.TASK, hf.PRIORITY, hf.COMMIT, hf.BLOCKED_REASON, hf.DEPENDS_ON)


def operator(context: Context) -> Role:
    """The operator's mailbox of the project (`config.load_swarm` lists it)."""
    return context.roles.get(config.OPERATOR) or config.operator_role(context.root)


# --- send ---------------------------------------------------------------------------------


def send(
    context: Context,
    to: str,
    text: str = "",
    said: str | None = None,
    task: str | None = None,
    priority: str = "50",
    depends_on: list[str] | str | None = None,
    blocked: str | None = None,
    commit: str | None = None,
    by: str | None = None,
) -> Result:
    """`handoffd send TO [TEXT | --file F|-]`: the text as work for the roles `to` names
    (`all`: every role), queued in the operator's outbox with `from: operator` and
    `sent_by: <NAME>`."""
    if said is not None and text:
        raise invalid(context, ["Give the text as TEXT or with --file, not both."])
    words = said if said is not None else text
    fields = {hf.TASK: task, hf.PRIORITY: priority, hf.COMMIT: commit,
              hf.BLOCKED_REASON: blocked, hf.DEPENDS_ON: _joined(depends_on)}  # fmt: skip
    return queue_text(context, recipients(to, context.roles), words, fields, _who(context, by))


def _who(context: Context, by: str | None) -> str:
    """`operator_name`, its refusal said as §3's report, as every refusal of `send` is."""
    try:
        return operator_name(by)
    except Refusal as refusal:
        raise invalid(context, [refusal.message.partition(": ")[2] + "."]) from None


def recipients(to: str, roles: dict[str, Role]) -> str:
    """The `to` header TO names: `all` is every role of roles.tsv (every host's), a pool once
    and its members not; any other list as given (the draft's check judges it)."""
    parts = hf.list_parts(to)
    if ALL not in (part.strip() for part in parts):
        return to
    everyone = [name for name, role in roles.items()
                if not role.is_operator and not (role.pool and not role.is_pool)]  # fmt: skip
    return ",".join(everyone)


def _joined(value: list[str] | str | None) -> str | None:
    """`--depends-on` given once per id, or as one comma-separated list (a form's field)."""
    if value is None or isinstance(value, str):
        return value or None
    ids = [part for item in value for part in hf.list_parts(item)]
    return ",".join(ids) or None


def queue_text(
    context: Context,
    to: str,
    text: str,
    fields: dict[str, str | None],
    who: str,
    extra: list[tuple[str, str]] | None = None,
) -> Result:
    """Check and queue the operator's handoff of `text` to `to` (fields: the options, None
    or '' for one not given), then log it.  Every refusal is §3's `HANDOFF INVALID`."""
    from handoffd.ops.queue import queued
    from handoffd.queue import outbox

    me = operator(context)
    text = text.replace("\r\n", "\n")  # a handoff's lines end in LF (§2); a browser sends CRLF
    checked = check(context, to, text, fields)
    checked.body = text if text.endswith("\n") else text + "\n"
    checked.extra += [(hf.SENT_BY, who), *(extra or ())]
    path = outbox.queue(me, checked, time.time())
    _log_sent(context.root, who, checked.recipients, os.path.basename(path))
    result = queued(context.root, path)
    ident = hf.path_id(path)
    result.data = {"path": path, "id": ident, "cards": [f"{ident}@{r}" for r in checked.recipients]}
    return result


def check(context: Context, to: str, text: str, fields: dict[str, str | None]) -> Draft:
    """The draft the options make, checked as `swarm_handoff` checks a draft (§3), with the
    text's own errors among the others; refused with every error listed."""
    from handoffd.core import git
    from handoffd.queue import draft, outbox

    given = {key: value.strip() for key, value in fields.items() if value and value.strip()}
    errors = [f"Header '{key}' must be one line." for key, value in given.items()
              if "\n" in value or "\r" in value]  # fmt: skip
    errors += text_errors(text)
    if "\n" in to or "\r" in to:
        errors.append("Header 'to' must be one line.")
    if errors:
        raise invalid(context, errors)
    task, message = given.get(hf.TASK), first_line(text) or "-"
    git_handoff = hf.COMMIT in given
    lines = {hf.TYPE: "git_handoff" if git_handoff else "note", hf.RECIPIENTS: to,
             hf.PRIORITY: given.get(hf.PRIORITY), hf.TASK: task if git_handoff else None,
             hf.COMMIT: given.get(hf.COMMIT), hf.MESSAGE: None if git_handoff else message,
             hf.DEPENDS_ON: given.get(hf.DEPENDS_ON),
             hf.BLOCKED_REASON: given.get(hf.BLOCKED_REASON)}  # fmt: skip
    made = "".join(f"{key}: {value}\n" for key, value in lines.items() if value)
    checked = draft.check(
        made,
        set(context.roles),
        lambda c: git.resolve_commit(context.root, c),
        lambda ident: outbox.handoff_exists(context.roles, ident),
    )
    found = checked if isinstance(checked, list) else []
    if task is not None and not git_handoff:  # a note that names its task (§18)
        found += _task_errors(task)
    if not isinstance(checked, list) and (long := outbox.name_problem(checked, config.OPERATOR)):
        found.append(long)
    if found or isinstance(checked, list):
        raise invalid(context, found)
    if task is not None and not git_handoff:
        checked.extra.append((hf.TASK, task))
    return checked


def _task_errors(task: str) -> list[str]:
    """A note's `task` as a git handoff's is checked (§3's texts)."""
    from handoffd.core.terminal import has_control
    from handoffd.queue.draft import MAX_TEXT

    errors = []
    if len(task) > MAX_TEXT:
        errors.append(
            f"Header 'task' must be no longer than {MAX_TEXT} characters; got {len(task)}."
        )
    if has_control(task):
        errors.append("Header 'task' must not contain control characters.")
    return errors


def text_errors(text: str) -> list[str]:
    """What the text must be: 1 byte to 16 KiB of UTF-8 (UTF-8 already: `spec.not_text`)."""
    size = len(text.encode("utf-8"))
    if not text.strip():
        return ["The text is empty: give the work (1 byte to 16 KiB)."]
    if size > SEND_LIMIT:
        return [f"The text is {size} bytes, over the limit of {SEND_LIMIT}."]
    return []


def first_line(text: str) -> str:
    """A note's `message`: the text's first line that is not blank, its spaces and tabs
    made single spaces, at most 80 characters, cut at a word with `…`."""
    line = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    if len(line) <= MESSAGE_LIMIT:
        return line
    cut = line[: MESSAGE_LIMIT - 1]
    if " " in cut:
        cut = cut[: cut.rfind(" ")].rstrip()
    return cut + "…"


def invalid(context: Context, errors: list[str]) -> Refusal:
    """`HANDOFF INVALID: handoffd send`, every error, the usage: exit 2 (§3's report)."""
    from handoffd.core.config import nearest

    listed = "".join(f"- {message}\n" for message in errors)
    usage = SEND_USAGE
    unknown = [m.split("'")[1] for m in errors if m.startswith("Unknown recipient role '")]
    if unknown:
        roles = config.without_operator(context.roles)
        near = [(n, m) for n in unknown if (m := nearest(n, roles))]
        meant = "".join(f" Did you mean '{m}' for '{n}'?" for n, m in near)
        usage += f"\nKnown roles: {', '.join(sorted(roles))}, or all.{meant}"
    return Refusal(Exit.REFUSED, f"HANDOFF INVALID: {NAME}\n\nErrors:\n{listed}\n{usage}")


def _log_sent(root: str, by: str, to: list[str], name: str) -> None:
    """`operator_sent` in the daemon's log (§6's format): who sent what to whom.  Never
    raises and never writes through a link (as `web.log`): the handoff is queued already."""
    from handoffd.core import safeio
    from handoffd.core.log import LogFile

    if safeio.linked_folders(os.path.join(root, config.SWARMFORGE), ("daemon",)):
        return
    path = os.path.join(root, config.SWARMFORGE, "daemon", "handoffd.log")
    line = {"timestamp": hf.iso_now(), "event": "operator_sent", "by": by, "to": to,
            "file": name, "level": "info"}  # fmt: skip
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        log = LogFile(path)
    except OSError:
        return
    log.write(jsonlib.dumps(line, ensure_ascii=False))
    log.close()


# --- the operator's inbox ---------------------------------------------------------------


def cards_of(context: Context, history: bool = False) -> list[Card]:
    """The operator's copies as the board names them (`<id>@operator`), oldest first: open
    ones, and with `history` the completed too."""
    from handoffd.board import status

    board = status.board(context.root, config.OPERATOR, history, 60.0, roles=context.roles)
    states = (State.NEW, State.IN_PROCESS, *((State.COMPLETED,) if history else ()))
    mine = [card for card in board.cards if card.role == config.OPERATOR and card.state in states]
    return sorted(mine, key=lambda card: (card.state == State.COMPLETED, -(card.age_s or 0.0)))


def inbox(context: Context, all: bool = False, json: bool = False) -> Result:
    """`handoffd inbox`: what agents handed to the operator, oldest first."""
    from handoffd.board import colour

    found = cards_of(context, all)
    if json:
        data = [card.to_json() for card in found]
        return Result(Exit.OK, jsonlib.dumps(data, indent=2, ensure_ascii=False) + "\n", "", data)
    if not found:
        return Result(Exit.OK, "nothing for the operator\n" if all else "nothing waiting for "
                      "the operator\n", "", [])  # fmt: skip
    rows = [[card.card, card.sender or "-", _about(card), colour.ago(card.age_s)]
            + (["done"] if card.state == State.COMPLETED else []) for card in found]  # fmt: skip
    rows = [[escape(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows if len(row) > i) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)),
                        *row[3:]]) for row in rows]  # fmt: skip
    return Result(Exit.OK, "".join(line.rstrip() + "\n" for line in lines), "", None)


def _about(card: Card) -> str:
    """A card's task, else its note, else its type."""
    headers = card.headers
    return headers.get(hf.TASK) or headers.get(hf.MESSAGE) or headers.get(hf.TYPE) or "-"


def _open_card(context: Context, card: str) -> Card:
    """The operator's open card `card` names, else `UNKNOWN_CARD: <card>` (exit 2)."""
    from handoffd.board import cards
    from handoffd.snapshot.snapshot import take_role

    found = None
    if card.rpartition("@")[2] == config.OPERATOR:
        found = cards.find_card(take_role(context.root, operator(context)), card)
    if found is None:
        raise Refusal(Exit.REFUSED, f"UNKNOWN_CARD: {escape(card)}")
    return found


def _close(context: Context, found: Card, card: str, stamps: list[tuple[str, str]]) -> str:
    """The operator's copy to `completed/` with `stamps`, under its inbox lock."""
    from handoffd.queue.inbox import Inbox

    me = operator(context)
    with Inbox(me.handoffs, me.name) as inbox:
        try:
            return inbox.close(found.entry.name, stamps)
        except FileNotFoundError:  # closed or moved since it was found
            raise Refusal(Exit.REFUSED, f"UNKNOWN_CARD: {escape(card)}") from None


def reply(
    context: Context, card: str, text: str = "", said: str | None = None, by: str | None = None
) -> Result:
    """`handoffd reply CARD`: a note back to the card's sender, `in_reply_to` the card's id
    (in the card's task's thread), then the operator's copy completed, `replied_by`."""
    if said is not None and text:
        raise invalid(context, ["Give the text as TEXT or with --file, not both."])
    words = said if said is not None else text
    who = _who(context, by)
    found = _open_card(context, card)
    fields = {hf.TASK: found.headers.get(hf.TASK), hf.PRIORITY: found.priority}
    sent = queue_text(context, found.sender, words, fields, who, [(hf.IN_REPLY_TO, found.id)])
    done = _close(context, found, card, [(hf.REPLIED_BY, who)])
    return Result(Exit.OK, sent.out + f"COMPLETED: {done}\n", sent.err, sent.data)


def ack(context: Context, card: str, by: str | None = None) -> Result:
    """`handoffd ack CARD`: the operator's copy completed without a reply, `acked_by`."""
    who = operator_name(by)
    found = _open_card(context, card)
    return Result(Exit.OK, f"COMPLETED: {_close(context, found, card, [(hf.ACKED_BY, who)])}\n")
