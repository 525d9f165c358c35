"""The web board's actions (docs/protocol.md §13): the forms a card's page offers and the
POST that runs one, made from the table of operations.

An operation with a `form` is an action: its name is the last part of the POST's path
(`/card/<card>/<action>`), its `offer` says which cards show the form, and its text or
reason parameter is the form's one field.  The POST runs the operation's own function,
as the command does, for the card's role (an operation on a role) or for the project
with the card named; every action, done or refused, is one line of `daemon/web.log`.
A new operator action is one more table entry with a `form`.
"""

from __future__ import annotations

import json
import os

from handoffd.board import colour
from handoffd.core import config
from handoffd.core.log import LogFile
from handoffd.core.outcome import Exit, Result, refused
from handoffd.ops import spec
from handoffd.ops.context import config_refusal, resolve_context
from handoffd.ops.invoke import invoke
from handoffd.ops.spec import Op, Param
from handoffd.ops.table import OPS
from handoffd.queue.scan import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from handoffd.board.cards import Card
    from handoffd.ops.context import Context

ACTIONS = {op.form: op for op in OPS if op.form}
FIELDS = ("text", "reason")  # the form fields an operation may take (docs/protocol.md §13)
COPIES = (State.NEW, State.IN_PROCESS)


def agents(card: Card) -> bool:
    """An open copy of an agent's, which §13's actions act on: the operator's own copies
    are replied to or acknowledged (docs/protocol.md §18), never blocked or released."""
    return card.state in COPIES and card.role != config.OPERATOR


OFFERS: dict[str, Callable[[Card], bool]] = {  # what each word of an `offer` matches
    "red": lambda card: card.colour == colour.RED and agents(card),
    "blocked": lambda card: bool(card.blocked_reason) and agents(card),
    "open": agents,
    "in_process": lambda card: card.state == State.IN_PROCESS and agents(card),
    "failed": lambda card: card.state == State.FAILED,
    "completed": lambda card: card.state == State.COMPLETED,
    # a copy waiting in the operator's inbox (docs/protocol.md §18): Reply, Acknowledge
    "for_you": lambda card: card.role == config.OPERATOR and card.state in COPIES,
}
LABELS = {"ack": "Acknowledge"}  # a button's word where the action's name is short for it
SEND = "send"  # the board's Send work form (docs/protocol.md §18): `POST /send`
SEND_FIELDS = ("to", "task", "priority", "depends_on", "text")
WEB_LOG = os.path.join(config.SWARMFORGE, "daemon", "web.log")


class Field:
    """A form's input: its name, a label, a text box or a line, and how long it may be."""

    __slots__ = ("box", "label", "limit", "name", "required")

    def __init__(self, param: Param) -> None:
        self.name = param.name
        self.label = param.help.split(" (")[0].split(":")[0].rstrip(".")
        self.box = param.kind == spec.TEXT  # a text box for a text, a line for a reason
        self.limit = param.limit  # bytes of a text, characters of a line
        self.required = param.required or self.box


class Form:
    """One action as a form: where it posts, what its button says, its fields."""

    __slots__ = ("action", "fields", "help", "label")

    def __init__(self, op: Op) -> None:
        self.action = op.form
        self.label = LABELS.get(op.form, op.form.capitalize())
        self.help = op.help
        self.fields = [Field(p) for p in op.arguments("cli") if p.name in FIELDS]


FORMS = {action: Form(op) for action, op in ACTIONS.items()}


def within_limits(
    op: Op, values: dict[str, object], context: Context
) -> dict[str, object] | Result:
    """A form's texts as the operation takes them: none past its limit."""
    for param in op.params:
        text = values.get(param.name)
        size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else 0
        if param.kind == spec.TEXT and size > param.limit:
            return refused(param.over.format(limit=param.limit))
    return values


def forms(card: Card) -> list[Form]:
    """The forms `card`'s page and the open board show for it: one with a text box (an
    answer) first, then the table's order."""
    offered = [FORMS[action] for action, op in ACTIONS.items()
               if any(OFFERS[word](card) for word in op.offer)]  # fmt: skip
    return sorted(offered, key=lambda form: not any(field.box for field in form.fields))


class Actions:
    """Runs the actions on the project at `root` and logs each to `daemon/web.log`."""

    def __init__(self, root: str, by: str | None = None) -> None:
        self.root = root
        self.names = frozenset(ACTIONS)
        self.by = by or os.environ.get("USER") or "operator"
        self._log: LogFile | None = None

    def forms(self, card: Card) -> list[Form]:
        return forms(card)

    def run(self, action: str, card: str, fields: dict[str, str]) -> Result:
        """Run `action` on `card` with the form's `fields`; its result, logged."""
        op = ACTIONS.get(action)
        if op is None:
            return refused(f"UNKNOWN_ACTION: {action}")
        result = self._run(op, card, fields)
        said = "ok" if result.ok else (result.err.strip().splitlines() or ["refused"])[0]
        self.log(action=action, card=card, by=self.by, result=said)
        return result

    def _run(self, op: Op, card: str, fields: dict[str, str]) -> Result:
        values: dict[str, object] = {}
        for param in op.arguments("cli"):
            given = fields.get(param.name)
            if given is None and param.required and param.name in FIELDS:
                given = ""  # a required field left out: refused as left empty, by the command
            if given == "" and not (param.required or param.kind == spec.TEXT):
                given = None  # an optional box left empty: not given, as on the command line
            if param.name in FIELDS and given is not None:
                values[param.name] = given
        if op.needs == "role":
            return self._on_role(op, card, values)
        values["card"] = card
        if any(p.name == "by" for p in op.params):
            values["by"] = self.by
        return invoke(op, values, within_limits, root=self.root)

    def _on_role(self, op: Op, card: str, values: dict[str, object]) -> Result:
        """An operation of §8 for the card's role, on the card's file."""
        from handoffd.ops.operator import find

        try:
            found = find(resolve_context(self.root, needs_role=False), card)
        except config.ConfigError as error:
            return config_refusal(error)
        if found is None or found.state not in COPIES:
            return Result(Exit.REFUSED, "", f"UNKNOWN_CARD: {card}\n")
        who = {"role": found.role, "agent": self.by}
        values = {"id": found.entry.name, **values, **who}
        result = invoke(op, values, within_limits, root=self.root, who=tuple(who))
        if result.ok:
            return result
        # the command names the file it was given; the person chose a card
        return Result(result.code, result.out, result.err.replace(found.entry.name, card),
                      result.data)  # fmt: skip

    def send(self, fields: dict[str, list[str]]) -> Result:
        """The Send work form: `handoffd send` on its fields (`to` and `depends_on` given once
        per value or comma-separated; a dependency named by its card), logged."""
        from handoffd.ops.table import BY_NAME

        op = BY_NAME[SEND]
        values: dict[str, object] = {"by": self.by}
        to = ",".join(part for value in fields.get("to", []) for part in value.split(",") if part)
        values["to"] = to
        depends = [value.rpartition("@")[0] or value for value in fields.get("depends_on", [])
                   if value]  # fmt: skip
        if depends:
            values["depends_on"] = depends
        for name in ("task", "priority", "text"):
            given = (fields.get(name) or [""])[0]
            if given:
                values[name] = given
        result = invoke(op, values, within_limits, root=self.root)
        said = "ok" if result.ok else (result.err.strip().splitlines() or ["refused"])[0]
        cards = result.data.get("cards", []) if isinstance(result.data, dict) else []
        self.log(action=SEND, card=",".join(cards) or to, by=self.by, result=said)
        return result

    def log(self, **fields: str) -> None:
        """One line in the daemon's log format: never raises, never follows a link, the
        folder's included (a `daemon/` that is a link gets no line: written through, it
        would land outside the project; the daemon puts a real folder back)."""
        from handoffd.core import safeio
        from handoffd.core.handoff import iso_now

        if safeio.linked_folders(os.path.join(self.root, config.SWARMFORGE), ("daemon",)):
            return
        if self._log is None:
            path = os.path.join(self.root, WEB_LOG)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError:
                return  # no folder to log into: the action stands, its line is lost
            self._log = LogFile(path)
        line = {"event": "web_action", **fields, "level": "info", "timestamp": iso_now()}
        self._log.write(json.dumps(line, ensure_ascii=False))
